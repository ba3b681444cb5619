"""The paths a command writes, checked before anything runs: a directory that can be written,
no output that is an input of the run or is not a regular file; and a file that fails to be
written, said as an input error naming it. The run's file names are its writers'
(:meth:`~simulator.output.writers.Writer.files`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.errors import InputError, Problem
from simulator.output.digests import sidecar_name
from simulator.output.writers import WRITERS

if TYPE_CHECKING:
    from simulator.scenario.spec import Scenario


def run_files(scenario: Scenario) -> list[str]:
    """The names of the files a run of ``scenario`` may write in its output directory: every
    writer's, whichever formats this run asks for, and the results' digest sidecar
    (:mod:`~simulator.output.digests`)."""
    return [*(file for writer in WRITERS.values() for file in writer.files(scenario.name)),
            sidecar_name(scenario.name)]


def check_writable(source: str, output: Path) -> None:
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


def check_outputs(scenario: Scenario, output: Path, options: dict[str, Path | None]) -> None:
    """Refuse, before anything runs, an output path that is an input of the run (the scenario,
    a graph file) or is not a regular file: every results file, and the files of ``options``."""
    from simulator.output.files import output_problem

    inputs = [Path(scenario.source)]
    if scenario.topology.kind in ("graph", "nccl_xml"):
        inputs.append(Path(str(scenario.topology.params["file"])))
    named = {f"output ({name})": output / name for name in run_files(scenario)}
    named.update({option: path for option, path in options.items() if path is not None})
    if options.get("--links") is not None:
        named["--links (its figure)"] = Path(str(options["--links"])).with_suffix(".png")
    problems = [Problem("command line" if option.startswith("--") else scenario.source, option,
                        problem) for option, path in named.items()
                for problem in [output_problem(path, inputs)] if problem]
    if problems:
        raise InputError(problems)


@contextmanager
def writing(source: str, output: Path) -> Iterator[None]:
    """A file that cannot be written as an input error naming it."""
    try:
        yield
    except OSError as error:
        raise InputError([Problem(source, "output", f"cannot write {error.filename or output}: "
                                                    f"{error.strerror}")]) from None
