"""The paths a command writes, checked before anything runs: a directory that can be written,
no output that is an input of the run (any file it read, by identity), that another output
names too, or that is not a regular file; and a file that fails to be
written, said as an input error naming it. The run's file names are its writers'
(:meth:`~simulator.output.writers.Writer.files`)."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.errors import InputError, Problem
from simulator.output.digests import sidecar_name
from simulator.output.writers import WRITERS

if TYPE_CHECKING:
    from simulator.inputs import InputFile
    from simulator.scenario.spec import Scenario


def run_files(scenario: Scenario) -> list[str]:
    """The names of the files a run of ``scenario`` may write in its output directory: every
    writer's, whichever formats this run asks for, and the results' digest sidecar
    (:mod:`~simulator.output.digests`)."""
    return [*(file for writer in WRITERS.values() for file in writer.files(scenario.name)),
            sidecar_name(scenario.name)]


def check_writable(source: str, output: Path, field: str = "output") -> None:
    """Refuse, before any simulation, an output directory that could not be written (``field``
    names what gave it). Where the directory's permissions allow writing, a file is made there
    and removed at once: root may write anywhere ``os.access`` says, but not in ``/proc``."""
    if output.exists() and not output.is_dir():
        raise InputError([Problem(source, field, f"expected a directory, but {output} is a file")])
    existing = output
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise InputError([Problem(source, field, f"expected a directory path, but {existing} "
                                                 "is a file")])
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError([Problem(source, field, f"cannot write in {existing}")])
    probe = existing / f".allreduce-sim.{secrets.token_hex(4)}.probe"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as error:
        raise InputError([Problem(source, field, f"cannot write in {existing}: "
                                                 f"{error.strerror}")]) from None
    probe.unlink(missing_ok=True)


def check_outputs(scenario: Scenario, output: Path, options: dict[str, Path | None],
                  inputs: Sequence[InputFile]) -> None:
    """Refuse, before anything runs, an output path that is one of ``inputs`` (the files read
    while the scenario was loaded: :func:`simulator.inputs.recording`), that is not a regular
    file, or that another output of the run also names: every results file, and the files of
    ``options``."""
    named = {f"output ({name})": output / name for name in run_files(scenario)}
    named.update({option: path for option, path in options.items() if path is not None})
    for option, path in options.items():  # the results directory is checked by the caller
        if path is not None:
            check_writable("command line", path.parent, option)
    if options.get("--links") is not None:
        named["--links (its figure)"] = Path(str(options["--links"])).with_suffix(".png")
    problems = [Problem("command line" if option.startswith("--") else scenario.source, option,
                        problem) for option, problem in output_problems(named, inputs)]
    if problems:
        raise InputError(problems)


def output_problems(named: Mapping[str, Path],
                    inputs: Sequence[InputFile]) -> list[tuple[str, str]]:
    """What is wrong with each of the outputs ``named`` (by the option or file that names
    them) as (that name, the problem): an input of the run (:func:`output_problem`), not a
    regular file, or a file another of them names too (by identity where it exists, else by
    its resolved path), which one would write over the other."""
    from simulator.output.files import output_problem

    found: list[tuple[str, str]] = []
    seen: dict[tuple[object, ...], str] = {}
    for name, path in named.items():
        problem = output_problem(path, inputs)
        if problem:
            found.append((name, problem))
            continue
        key = _identity(path)
        if key in seen:
            found.append((name, f"{path} is also {seen[key]}; expected a file of its own"))
        seen.setdefault(key, name)
    return found


def _identity(path: Path) -> tuple[object, ...]:
    """What makes two output paths one file: device and inode where it exists, else the
    absolute path with every link of its directory resolved."""
    try:
        status = path.stat()
    except OSError:
        # realpath, not Path.resolve: a directory that is a link to itself is no error here
        return ("path", os.path.join(os.path.realpath(path.parent), path.name))
    return ("file", status.st_dev, status.st_ino)


def scenario_inputs(scenario: Scenario, reads: Sequence[InputFile]) -> list[InputFile]:
    """Every file a run of ``scenario`` reads: those read while it was loaded (``reads``), and
    the Chakra traces its training step reads when it runs."""
    from simulator.inputs import identified
    from simulator.scenario.chakra import trace_files

    chakra = scenario.training.chakra if scenario.training is not None else None
    return [*reads, *identified(trace_files(chakra) if chakra is not None else [])]


@contextmanager
def writing(source: str, output: Path, field: str = "output") -> Iterator[None]:
    """A file that cannot be written as an input error naming it (``field``: what gave it)."""
    try:
        yield
    except OSError as error:
        raise InputError([Problem(source, field, f"cannot write {error.filename or output}: "
                                                 f"{error.strerror}")]) from None
