"""``python -m simulator run FILE.yaml``: say what is coming, run the points with a progress bar
(on a terminal), keep each in the results files as it finishes, then print the table; Ctrl-C
keeps the points done (docs/design.md §3). A training scenario runs its step instead
(:func:`_train`), its files written at the end."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.commands.command import EXIT_FAILED, EXIT_OK, Command
from simulator.commands.console import progress_bar, say, stop_code, stopped, verification
from simulator.commands.options import DEFAULT_FORMAT, FORMATS, check_options, formats
from simulator.commands.paths import (
    check_outputs,
    check_writable,
    run_files,
    scenario_inputs,
    writing,
)
from simulator.errors import InputError, Problem, quoted
from simulator.limits import DEFAULT_PROXY_ELEMENTS

if TYPE_CHECKING:
    from simulator.engine.plan import PointPlan
    from simulator.output.outlook import Outlook, Upcoming
    from simulator.output.results import Result
    from simulator.output.stream import ResultsStream
    from simulator.scenario.spec import Scenario
    from simulator.scenario.training import Imports
    from simulator.settings import RunSettings


def arguments(parser: argparse.ArgumentParser) -> None:
    """``run``'s arguments."""
    parser.add_argument("scenario", type=Path, help="scenario YAML file (see scenarios/)")
    parser.add_argument("--output", type=Path, help="directory for results (default: the "
                                                    "scenario's output, else results/<name>)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the input data (default 0)")
    parser.add_argument("--proxy-elements", type=int, default=DEFAULT_PROXY_ELEMENTS,
                        help="cap on elements per rank actually moved and verified "
                             f"(default {DEFAULT_PROXY_ELEMENTS})")
    parser.add_argument("--format", default=DEFAULT_FORMAT,
                        help=f"comma-separated files to write, of {FORMATS}; the CSV is always "
                             f"written (default {DEFAULT_FORMAT}; parquet needs pyarrow)")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG figure")
    parser.add_argument("--quiet", action="store_true", help="no word on stderr before the run "
                                                             "(points, closed forms) and no "
                                                             "progress bar; a run that may "
                                                             "take long still says so")
    parser.add_argument("--verbose", action="store_true",
                        help="print every point of the table, its busiest link, and the "
                             "averages (default: one screen, a line per size where several "
                             "algorithms ran)")
    parser.add_argument("--trace", type=Path, metavar="FILE.json",
                        help="write a Perfetto / chrome://tracing timeline of every point to "
                             "FILE.json (traced points run on the SimPy engine)")
    parser.add_argument("--trace-point", metavar="ALGO:SIZE",
                        help="with --trace, trace only this point, e.g. ring:1MiB")
    parser.add_argument("--links", type=Path, metavar="FILE.csv",
                        help="write every link's bytes, busy time and utilisation per point to "
                             "FILE.csv, and their heatmap to FILE.png")
    parser.add_argument("--resume", action="store_true",
                        help="keep the points a stopped run of the same scenario and settings "
                             "already wrote to the output directory, and run only the rest")
    parser.add_argument("--allow-import", action="store_true",
                        help="let a training model given as {torch: MODULE:FACTORY} import "
                             "MODULE and call FACTORY, running their code (refused without it)")


def execute(args: argparse.Namespace) -> int:
    """Check the options and where the files go, then run the scenario's points (or its
    training step), keeping each point in the results files as it finishes."""
    check_options(args)
    chosen = formats(args.format, args.no_plot)
    from simulator.output.observed import Observed, link_usage, watch_for, write_observed
    from simulator.output.stream import ResultsStream
    from simulator.output.table import format_table
    from simulator.runner import (
        checked_setup,
        outlook,
        plan_points,
        points_of,
        run_points,
        settings_of,
    )

    scenario, output = _scenario(args)
    if scenario.training is not None:
        return _train(args, scenario, output, chosen)
    settings = settings_of(scenario, args.seed, args.proxy_elements)
    files = ResultsStream(scenario, settings, output, chosen)
    total = None
    try:
        setup = checked_setup(scenario, settings)
        picks = ([(point.algorithm.name, point.size_bytes)
                  for point in points_of(scenario, setup)[0]] if scenario.nccl_choice else None)
        watch = watch_for(scenario, [algorithm.name for algorithm in setup.algorithms],
                          args.trace, args.trace_point, args.links, picks)
        planning = plan_points(scenario, setup, settings)
        plans = planning.plans
        coming = outlook(scenario, setup, planning)
        total = len(coming.points)
        done = _resumed(args, scenario, settings, output, plans) if args.resume else []
        files.rows = done
        _announce(args.quiet, scenario.source, coming, len(done))
        points = run_points(scenario, seed=args.seed, proxy_elements=args.proxy_elements,
                            setup=setup, watch=watch, plans=plans[len(done):])
        _keep(points, coming.points[len(done):], files, args.quiet)
        say(format_table(files.frame, picks_only=scenario.nccl_choice,
                         registered=scenario.nccl.symmetric, verbose=args.verbose,
                         left_out=planning.left_out))
        with writing(scenario.source, output):
            usage = link_usage(watch, args.links)  # the links file's table, and the report's
            paths = [*files.finish(Observed(usage, planning.left_out)),
                     *write_observed(watch, scenario, args.trace, args.links, usage)]
    except KeyboardInterrupt as stop:  # the points done are on disk, every file whole
        print(f"{scenario.source}: {stopped(stop)}: {_kept(files, total)}", file=sys.stderr)
        return stop_code(stop)
    finally:
        files.close()
    say(f"# results: {', '.join(str(path) for path in paths)}\n")
    return verification(scenario.source, files.frame)


def _scenario(args: argparse.Namespace) -> tuple[Scenario, Path]:
    """The scenario and where its files go, checked before anything runs (a directory that
    can be written, no output that is an input or not a regular file), what a killed run left
    half-written there cleared."""
    from simulator.inputs import recording
    from simulator.output.files import remove_leftovers
    from simulator.scenario.parse import load_scenario

    with recording() as reads:
        scenario = load_scenario(args.scenario, imports=_imports(args))
    output = args.output or scenario.output_dir
    check_writable(scenario.source, output)
    check_outputs(scenario, output, {"--trace": args.trace, "--links": args.links},
                  scenario_inputs(scenario, reads))
    remove_leftovers(output, run_files(scenario))
    return scenario, output


def _announce(quiet: bool, source: str, coming: Outlook, kept: int) -> None:
    """Say on stderr what is coming (unless ``quiet``), and NCCL's own view, the points left
    out and whether the run may take long (even if quiet)."""
    if not quiet:
        print(f"{source}: {coming.describe()}"
              + (f" ({kept} kept from the stopped run)" if kept else ""),
              file=sys.stderr, flush=True)
    for note in coming.notes:  # NCCL's own view, the points left out: said even if quiet
        print(f"{source}: {note}", file=sys.stderr, flush=True)
    if (slow := coming.slow()) is not None:  # a long run says so, even if quiet
        print(f"{source}: {slow}", file=sys.stderr, flush=True)


def _keep(points: Iterator[Result], coming: Sequence[Upcoming], files: ResultsStream,
          quiet: bool) -> None:
    """Each point as it is simulated kept in the results files, counted on the progress bar."""
    with progress_bar(len(coming), quiet) as bar:
        for planned in coming:
            bar.set_postfix_str(planned.label)
            result = next(points)
            with writing(files.scenario.source, files.directory):
                files.add(result)
            bar.update()


def _resumed(args: argparse.Namespace, scenario: Scenario, settings: RunSettings, output: Path,
             plans: Sequence[PointPlan]) -> list[Result]:
    """The points a stopped run already wrote (:mod:`simulator.output.resume`); InputError with
    an option that needs every point run here."""
    from simulator.output.resume import resumed

    for option in ("trace", "links"):
        if getattr(args, option) is not None:
            raise InputError([Problem("command line", "--resume", (
                f"expected no --{option} with --resume: the points kept from the stopped run "
                f"left no {'timeline' if option == 'trace' else 'link usage'}"))])
    return resumed(scenario, settings, output,
                   [(plan.algorithm.name, plan.size_bytes) for plan in plans])


def _kept(files: ResultsStream, total: int | None) -> str:
    """What an interrupted run leaves: ``7 of 20 points written to results/x/x.csv``."""
    if not files.rows:
        return "nothing written" if total is None else f"0 of {total} points done, nothing written"
    where = " and ".join(str(path) for path in files.results_paths)
    return f"{len(files.rows)} of {total} point{'s' if total != 1 else ''} written to {where}"


def _imports(args: argparse.Namespace) -> Imports:
    """What ``run`` does with a ``{torch: MODULE:FACTORY}`` model: import it only with
    ``--allow-import`` (the user's code runs only where the user asked for it)."""
    from simulator.scenario.training import Imports

    return Imports.ALLOW if args.allow_import else Imports.REFUSE


def _train(args: argparse.Namespace, scenario: Scenario, output: Path,
           chosen: tuple[str, ...]) -> int:
    """A training scenario: its step (verified) and sweeps, printed and written; Ctrl-C leaves
    the files as they were (they are written at the end, each atomically)."""
    from simulator.model.faults import caveats
    from simulator.output.training import format_training
    from simulator.output.writers import write_training
    from simulator.runner import settings_of
    from simulator.trainer import train

    _refuse_point_options(args, chosen)
    for caveat in caveats(scenario.faults):  # said even if quiet, as a run of points says it
        print(f"{scenario.source}: {caveat}", file=sys.stderr, flush=True)

    def progress(what: str) -> None:
        if not args.quiet:
            print(f"{scenario.source}: simulating the {what}", file=sys.stderr, flush=True)

    try:
        training = train(scenario, seed=args.seed, proxy_elements=args.proxy_elements,
                         progress=progress)
        say(format_training(training))
        with writing(scenario.source, output):
            paths = write_training(training, scenario,
                                   settings_of(scenario, args.seed, args.proxy_elements), output,
                                   chosen)
    except KeyboardInterrupt as stop:
        print(f"{scenario.source}: {stopped(stop)}: nothing written", file=sys.stderr)
        return stop_code(stop)
    say(f"# results: {', '.join(str(path) for path in paths)}\n")
    if training.step.verified is False:
        print(f"{scenario.source}: verification failed: the gradients did not end averaged and "
              f"identical on every rank (max abs error {training.step.max_abs_error:.3g})",
              file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _refuse_point_options(args: argparse.Namespace, chosen: tuple[str, ...]) -> None:
    """InputError for an option of a run of points given with a training scenario, and for a
    format only a run of points writes (the HTML report)."""
    from simulator.output.writers import TRAINING_FORMATS

    if refused := [name for name in chosen if name not in TRAINING_FORMATS]:
        raise InputError([Problem("command line", "--format", (
            f"expected {', '.join(TRAINING_FORMATS)} with a training scenario, got "
            f"{quoted(args.format)} ({', '.join(refused)}: a report of a run of sizes; a "
            f"training step's tables and figures are its csv and png files)"))])
    for option in ("trace", "trace_point", "links"):
        if getattr(args, option) is not None:
            flag = "--" + option.replace("_", "-")
            raise InputError([Problem("command line", flag, "expected no " + flag + " with a "
                                      "training scenario (trace one bucket's allreduce as a "
                                      "point of a plain scenario)")])
    if args.resume:
        raise InputError([Problem("command line", "--resume", "expected no --resume with a "
                                  "training scenario (its files are written once, at the end)")])


COMMAND = Command("run", "run a scenario file and write its results", arguments, execute,
                  "scenario")
