"""``python -m simulator sweep FILE.yaml ...``: every point of every scenario on a Dask cluster
(:mod:`simulator.sweep`); each scenario's table and files as ``run`` writes them; failed points
one line each on stderr (exit 2 where a point's input was at fault, as ``run`` exits, else 1),
the others kept."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.commands.command import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    Command,
)
from simulator.commands.console import say, stop_code, stopped, verification
from simulator.commands.options import DEFAULT_FORMAT, FORMATS, check_options, formats
from simulator.commands.paths import check_outputs, check_writable, scenario_inputs
from simulator.errors import InputError, Problem
from simulator.limits import DEFAULT_PROXY_ELEMENTS

if TYPE_CHECKING:

    from simulator.inputs import InputFile
    from simulator.output.results import Result
    from simulator.scenario.spec import Scenario
    from simulator.sweep import Failure, Sweep


def arguments(parser: argparse.ArgumentParser) -> None:
    """``sweep``'s arguments."""
    parser.add_argument("scenarios", type=Path, nargs="+", help="scenario YAML files")
    parser.add_argument("--output", type=Path, metavar="DIR",
                        help="write each scenario's files in DIR/<its name> (default: each "
                             "scenario's own output, results/<name> where it sets none)")
    parser.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. "
                                            "tcp://host:8786 (default: a local cluster)")
    parser.add_argument("--workers", type=int, help="worker processes of the local cluster "
                                                    "(default: one per core)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the input data (default 0)")
    parser.add_argument("--proxy-elements", type=int, default=DEFAULT_PROXY_ELEMENTS,
                        help=f"as for run (default {DEFAULT_PROXY_ELEMENTS})")
    parser.add_argument("--format", default=DEFAULT_FORMAT,
                        help=f"files to write per scenario, of {FORMATS}; the CSV is always "
                             f"written (default {DEFAULT_FORMAT})")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG figures")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--verbose", action="store_true",
                        help="print every point of each table, its busiest link, and the "
                             "averages (default: a line per size where several algorithms ran)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the points a stopped sweep (or run) of the same scenarios and "
                             "settings already wrote, and run only the rest")
    parser.add_argument("--allow-import", action="store_true",
                        help="accepted as for run; a sweep runs no training step, so it never "
                             "imports a {torch: ...} model (it refuses a training scenario)")


def execute(args: argparse.Namespace) -> int:
    """Check every scenario and option, sweep, then write and say what came of each point."""
    check_options(args)
    chosen = formats(args.format, args.no_plot)
    from simulator.inputs import recording
    from simulator.scenario.parse import load_scenario
    from simulator.scenario.training import Imports
    from simulator.sweep import ClusterError, sweep

    # a sweep runs no training step (checked_setup refuses one, before the cluster starts), so
    # it never builds a {torch: ...} model, with --allow-import or without
    with recording() as reads:
        scenarios = [load_scenario(path, imports=Imports.SKIP) for path in args.scenarios]
    if args.output is not None:  # as run's --output, over each scenario's own
        scenarios = [replace(scenario, output=args.output / scenario.name)
                     for scenario in scenarios]
    _check_outputs(scenarios, reads)
    if args.workers is not None and args.workers < 1:  # before the files: a command-line slip
        raise InputError([Problem("command line", "--workers", f"expected a whole number ≥ 1, "
                                                               f"got {args.workers}")])
    with _locked(scenarios):  # before the cluster starts: a run into one directory is refused
        kept = [_kept_by_sweep(scenario, args) for scenario in scenarios] if args.resume else None
        try:
            done = sweep(scenarios, scheduler=args.scheduler, workers=args.workers,
                         seed=args.seed, proxy_elements=args.proxy_elements,
                         progress=not args.no_progress, kept=kept)
        except ClusterError as error:  # nothing ran: the files are as they were
            print(f"sweep: {error}; nothing ran", file=sys.stderr)
            return EXIT_FAILED
        status = _write(args, scenarios, done, chosen)
        return _outcome(done, status)


def _check_outputs(scenarios: Sequence[Scenario], reads: Sequence[InputFile]) -> None:
    """Refuse an output directory that cannot be written or that two scenarios share, and an
    output file that is any file the sweep read (``reads``: every scenario's) or is not a
    regular file, as run refuses one."""
    outputs: dict[Path, str] = {}
    for scenario in scenarios:
        check_writable(scenario.source, scenario.output_dir)
        # ./a and a, or a link to it: one directory (realpath: a link loop is no error here)
        directory = Path(os.path.realpath(scenario.output_dir))
        if directory in outputs:
            raise InputError([Problem(scenario.source, "output", (
                f"expected its own directory, but {outputs[directory]} also writes to "
                f"{scenario.output_dir}"))])
        outputs[directory] = scenario.source
    for scenario in scenarios:
        check_outputs(scenario, scenario.output_dir, {}, scenario_inputs(scenario, reads))


@contextmanager
def _locked(scenarios: Sequence[Scenario]) -> Iterator[None]:
    """Hold each scenario's output directory as ``run`` holds its own
    (:class:`~simulator.output.files.DirectoryLock`), so that a sweep and a run of one scenario
    into one directory refuse each other, as two runs do; let go when the sweep ends, however
    it ends, with a directory made only for the lock removed where nothing was written in it."""
    from simulator.output.files import DirectoryLock

    made = sorted({missing for scenario in scenarios for missing in _missing(scenario.output_dir)},
                  key=lambda directory: len(directory.parts))
    locks: list[DirectoryLock] = []
    try:
        for scenario in scenarios:
            locks.append(DirectoryLock(scenario.output_dir, scenario.name, scenario.source,
                                       "give the scenario another output"))
        yield
    finally:
        for lock in locks:
            lock.release()
        for directory in reversed(made):  # only if empty: one the sweep wrote in stays
            with contextlib.suppress(OSError):
                directory.rmdir()


def _missing(directory: Path) -> list[Path]:
    """``directory`` and each of its parents that does not exist yet (what a lock there makes),
    deepest first."""
    missing = []
    while not directory.exists() and directory != directory.parent:
        missing.append(directory)
        directory = directory.parent
    return missing


def _write(args: argparse.Namespace, scenarios: Sequence[Scenario], done: Sweep,
           chosen: tuple[str, ...]) -> int:
    """Each scenario's table printed and files written; EXIT_FAILED where a row failed
    verification, else EXIT_OK."""
    from simulator.output.observed import Observed
    from simulator.output.table import format_table
    from simulator.output.writers import write_results
    from simulator.runner import settings_of

    status = EXIT_OK
    left_out = done.left_out or tuple(() for _ in scenarios)
    for scenario, results, left in zip(scenarios, done.frames, left_out, strict=True):
        say(format_table(results, picks_only=scenario.nccl_choice,
                         registered=scenario.nccl.symmetric, verbose=args.verbose,
                         left_out=left))
        paths = write_results(results, scenario,
                              settings_of(scenario, args.seed, args.proxy_elements),
                              scenario.output_dir, chosen, Observed(left_out=left))
        say(f"# results: {', '.join(str(path) for path in paths)}\n")
        status = max(status, verification(scenario.source, results))
    return status


def _outcome(done: Sweep, status: int) -> int:
    """What did not come of the sweep, one line each on stderr (the points left out, failed,
    stranded, or not run after a signal stopped it), and the exit code."""
    from simulator.sweep import NO_WORKERS_S

    for note in done.notes:  # the points all and auto left out, as run says them
        print(note, file=sys.stderr)
    for failure in done.failures:
        print(failure, file=sys.stderr)
    if done.stranded:  # every worker gone: what finished is written above, the rest named
        print(f"sweep: no Dask worker left for {NO_WORKERS_S:g} s: {_points(done.stranded)} "
              "not run; those finished are written", file=sys.stderr)
        status = EXIT_FAILED
    if done.stop is not None:  # a signal: what finished is written above, and said so here
        finished = sum(len(frame) for frame in done.frames) + len(done.failures)
        print(f"sweep: {stopped(done.stop)} after {finished} of {done.interrupted_of} points; "
              "those finished are written", file=sys.stderr)
        return stop_code(done.stop)
    # as run exits: 2 where a point's input was at fault, else 1 for a failed point or check
    return max([status, *(EXIT_BAD_INPUT if failure.bad_input else EXIT_FAILED
                          for failure in done.failures)])


def _points(failures: Sequence[Failure]) -> str:
    """``3 points (s: ring at 4096 bytes, ...)``: the first few named, the rest counted."""
    named = ", ".join(f"{f.scenario}: {f.algorithm} at {f.size_bytes} bytes" for f in failures[:8])
    more = f", and {len(failures) - 8} more" if len(failures) > 8 else ""
    return f"{len(failures)} point{'s' if len(failures) != 1 else ''} ({named}{more})"


def _kept_by_sweep(scenario: Scenario, args: argparse.Namespace) -> list[Result]:
    """The points of ``scenario`` a stopped sweep or run left in its output directory, in the
    plan's order, any of them (a sweep finishes points out of order)."""
    from simulator.output.resume import resumed
    from simulator.runner import checked_setup, plan_points, settings_of

    settings = settings_of(scenario, args.seed, args.proxy_elements)
    setup = checked_setup(scenario, settings)
    planned = [(plan.algorithm.name, plan.size_bytes)
               for plan in plan_points(scenario, setup, settings).plans]
    return resumed(scenario, settings, scenario.output_dir, planned, prefix=False)


COMMAND = Command("sweep", "run every point of scenario files in parallel on a Dask cluster and "
                           "write each one's results", arguments, execute, "scenarios")
