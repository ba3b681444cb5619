"""Command line: ``python -m simulator run FILE.yaml``.

The only module that prints or exits. Exit codes (DESIGN.md §3): 0 success; 2 bad input (one
line per problem on stderr: file, field, what was expected); 1 when a run fails verification.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from simulator.data import DEFAULT_PROXY_ELEMENTS
from simulator.errors import AlgorithmError, InputError, Problem
from simulator.plots import plot_results
from simulator.report import format_table, write_csv
from simulator.runner import simulate
from simulator.scenario import load_scenario

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m simulator",
                                     description="Simulate collective-communication algorithms.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a scenario file and write its results")
    run.add_argument("scenario", type=Path, help="scenario YAML file (see scenarios/)")
    run.add_argument("--output", type=Path, help="directory for results (default: the "
                                                 "scenario's output, else results/<name>)")
    run.add_argument("--seed", type=int, default=0, help="seed of the input data (default 0)")
    run.add_argument("--proxy-elements", type=int, default=DEFAULT_PROXY_ELEMENTS,
                     help="cap on elements per rank actually moved and verified "
                          f"(default {DEFAULT_PROXY_ELEMENTS})")
    run.add_argument("--no-plot", action="store_true", help="skip the PNG figure")
    return parser


def _check_writable(source: str, output: Path) -> None:
    """Refuse, before any simulation, an output directory that could not be written."""
    if output.exists() and not output.is_dir():
        raise InputError([Problem(source, "output", f"expected a directory, but {output} is a file")])
    existing = output
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise InputError([Problem(source, "output", f"expected a directory path, but {existing} "
                                                    "is a file")])
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError([Problem(source, "output", f"cannot write in {existing}")])


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except InputError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    except AlgorithmError as error:  # a bug in an algorithm's program, not in the input
        print(f"{args.scenario}: algorithm failed: {error}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:  # e.g. `... | head`: stop quietly (Python docs, "SIGPIPE" note)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED


def _run(args: argparse.Namespace) -> int:
    if args.seed < 0 or args.proxy_elements < 1:
        field = "--seed" if args.seed < 0 else "--proxy-elements"
        raise InputError([Problem("command line", field, "expected a non-negative whole number")])
    scenario = load_scenario(args.scenario)
    output = args.output or scenario.output
    _check_writable(scenario.source, output)
    results = simulate(scenario, seed=args.seed, proxy_elements=args.proxy_elements)
    sys.stdout.write(format_table(results))
    csv_path = output / f"{scenario.name}.csv"
    try:
        write_csv(results, csv_path)
        if not args.no_plot:
            plot_results(results, output / f"{scenario.name}.png")
    except OSError as error:
        raise InputError([Problem(scenario.source, "output",
                                  f"cannot write {error.filename or output}: {error.strerror}")]
                         ) from None
    print(f"# results: {csv_path}" + ("" if args.no_plot else f", {csv_path.with_suffix('.png')}"))
    failed = results[results.verified.eq(False).fillna(False)]
    if not failed.empty:
        first = failed.iloc[0]
        print(f"{scenario.source}: verification failed for {len(failed)} run(s), first "
              f"{first.algorithm} at {first.size_bytes} bytes (max abs error "
              f"{first.max_abs_error:.3g})", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
