"""The options ``run`` and ``sweep`` share, checked before anything is loaded: the seed, the
proxy length and the formats to write (names of :data:`~simulator.output.writers.WRITERS`)."""

from __future__ import annotations

import argparse
import importlib

from simulator.errors import InputError, Problem, quoted
from simulator.output.writers import DEFAULT_FORMATS, WRITERS

FORMATS = ", ".join(WRITERS)
"""The formats ``--format`` takes, as ``--help`` and its error list them: csv, json, png, parquet, html
(``output.writers`` is light to import, so ``--help`` still loads no pandas nor matplotlib)."""
DEFAULT_FORMAT = ",".join(DEFAULT_FORMATS)


def check_options(args: argparse.Namespace) -> None:
    """InputError, one line per problem, for a negative ``--seed`` or ``--proxy-elements`` < 1."""
    problems = []
    if args.seed < 0:
        problems.append(Problem("command line", "--seed", f"expected a whole number ≥ 0, got "
                                                          f"{args.seed}"))
    if args.proxy_elements < 1:
        problems.append(Problem("command line", "--proxy-elements", "expected a whole number ≥ 1, "
                                                                    f"got {args.proxy_elements}"))
    if problems:
        raise InputError(problems)


def formats(text: str, no_plot: bool) -> tuple[str, ...]:
    """The formats ``--format`` and ``--no-plot`` ask for, each once, the CSV first (always
    written); InputError for a name no writer has, for nothing left, or for Parquet without
    pyarrow."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in WRITERS]
    if unknown or not names:
        raise InputError([Problem("command line", "--format", f"expected a comma-separated list "
                                  f"of {FORMATS}, got {quoted(text)}")])
    chosen = tuple(name for name in dict.fromkeys(names) if not (no_plot and name == "png"))
    if not chosen:
        raise InputError([Problem("command line", "--no-plot", f"drops the only file --format "
                                                               f"{text} asks for")])
    if "parquet" in chosen and not _importable("pyarrow"):
        raise InputError([Problem("command line", "--format", "parquet needs pyarrow, which is not "
                                  "installed: pip install 'allreduce-sim[parquet]'")])
    return ("csv", *(name for name in chosen if name != "csv"))  # the results file, always


def _importable(module: str) -> bool:
    """Whether ``module`` (an optional package) is installed."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
