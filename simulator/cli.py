"""Command line: ``python -m simulator run FILE.yaml``, ``sweep FILE.yaml ...`` (every point on
a Dask cluster), ``calibrate LOG --preset NAME``, ``topo FILE_OR_PRESET`` (a topology's
numbers and drawing), ``plot RESULTS`` and ``tune FILE.yaml`` (NCCL's tuner configuration).

The only module that prints or exits. Exit codes (docs/design.md §3): 0 success; 2 bad input (one
line per problem on stderr: file, field, what was expected); 1 when a run fails verification;
130 on Ctrl-C and 143 on SIGTERM, with one line and no half-written file.
Heavy modules (pandas, SimPy, matplotlib) are imported only once a command runs, so ``--help``
and ``--version`` answer at once.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Never

from simulator.errors import AlgorithmError, InputError, NetworkCut, Problem
from simulator.limits import DEFAULT_PROXY_ELEMENTS
from simulator.output.writers import DEFAULT_FORMATS, WRITERS
from simulator.version import __version__

if TYPE_CHECKING:
    import pandas as pd
    from tqdm import tqdm

    from simulator.engine.plan import PointPlan
    from simulator.output.results import Result
    from simulator.output.stream import ResultsStream
    from simulator.scenario.spec import Scenario, TopologySpec
    from simulator.scenario.training import Imports
    from simulator.settings import RunSettings
    from simulator.sweep import Failure

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143
FORMATS = ", ".join(WRITERS)
"""The formats ``--format`` takes, as ``--help`` and its error list them: csv, json, png, parquet
(``output.writers`` is light to import, so ``--help`` still loads no pandas nor matplotlib)."""
DEFAULT_FORMAT = ",".join(DEFAULT_FORMATS)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m simulator",
                                     description="Simulate collective-communication algorithms.")
    parser.add_argument("--version", action="version", version=f"allreduce-sim {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a scenario file and write its results")
    run.add_argument("scenario", type=Path, help="scenario YAML file (see scenarios/)")
    run.add_argument("--output", type=Path, help="directory for results (default: the "
                                                 "scenario's output, else results/<name>)")
    run.add_argument("--seed", type=int, default=0, help="seed of the input data (default 0)")
    run.add_argument("--proxy-elements", type=int, default=DEFAULT_PROXY_ELEMENTS,
                     help="cap on elements per rank actually moved and verified "
                          f"(default {DEFAULT_PROXY_ELEMENTS})")
    run.add_argument("--format", default=DEFAULT_FORMAT,
                     help=f"comma-separated files to write, of {FORMATS}; the CSV is always "
                          f"written (default {DEFAULT_FORMAT}; parquet needs pyarrow)")
    run.add_argument("--no-plot", action="store_true", help="skip the PNG figure")
    run.add_argument("--quiet", action="store_true", help="no word on stderr before the run (points, "
                                                          "closed forms) and no progress bar")
    run.add_argument("--trace", type=Path, metavar="FILE.json",
                     help="write a Perfetto / chrome://tracing timeline of every point to "
                          "FILE.json (traced points run on the SimPy engine)")
    run.add_argument("--trace-point", metavar="ALGO:SIZE",
                     help="with --trace, trace only this point, e.g. ring:1MiB")
    run.add_argument("--links", type=Path, metavar="FILE.csv",
                     help="write every link's bytes, busy time and utilisation per point to "
                          "FILE.csv, and their heatmap to FILE.png")
    run.add_argument("--resume", action="store_true",
                     help="keep the points a stopped run of the same scenario and settings "
                          "already wrote to the output directory, and run only the rest")
    run.add_argument("--allow-import", action="store_true",
                     help="let a training model given as {torch: MODULE:FACTORY} import MODULE "
                          "and call FACTORY, running their code (refused without it)")
    sweep = commands.add_parser("sweep", help="run every point of scenario files in parallel on a "
                                              "Dask cluster and write each one's results")
    sweep.add_argument("scenarios", type=Path, nargs="+", help="scenario YAML files")
    sweep.add_argument("--scheduler", help="address of a running Dask scheduler, e.g. "
                                           "tcp://host:8786 (default: a local cluster)")
    sweep.add_argument("--workers", type=int, help="worker processes of the local cluster "
                                                   "(default: one per core)")
    sweep.add_argument("--seed", type=int, default=0, help="seed of the input data (default 0)")
    sweep.add_argument("--proxy-elements", type=int, default=DEFAULT_PROXY_ELEMENTS,
                       help=f"as for run (default {DEFAULT_PROXY_ELEMENTS})")
    sweep.add_argument("--format", default=DEFAULT_FORMAT,
                       help=f"files to write per scenario, of {FORMATS}; the CSV is always "
                            f"written (default {DEFAULT_FORMAT})")
    sweep.add_argument("--no-plot", action="store_true", help="skip the PNG figures")
    sweep.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    sweep.add_argument("--resume", action="store_true",
                       help="keep the points a stopped sweep (or run) of the same scenarios and "
                            "settings already wrote, and run only the rest")
    sweep.add_argument("--allow-import", action="store_true",
                       help="accepted as for run; a sweep runs no training step, so it never "
                            "imports a {torch: ...} model (it refuses a training scenario)")
    fit = commands.add_parser("calibrate", help="fit a preset's NCCL execution model to an "
                                                "nccl-tests log and write the calibrated preset")
    fit.add_argument("log", type=Path, help="all_reduce_perf output, its -J JSON file, or a CSV "
                                            "with size_bytes, time_us and busbw_GBps")
    fit.add_argument("--preset", required=True, help="the preset of the measured machine "
                                                     "(e.g. dgx_h100)")
    fit.add_argument("--nodes", type=int, default=1, help="hosts the log ran on (default 1); "
                                                          "on several the network's bandwidth "
                                                          "and latency are fitted")
    fit.add_argument("--output", type=Path, help="where to write the calibrated preset "
                                                 "(default results/calibrated/<preset>.yaml)")
    tune = commands.add_parser("tune", help="simulate every NCCL kernel and protocol of a "
                                            "scenario and write the tuner configuration of "
                                            "NCCL's example tuner plugin where one beats NCCL's "
                                            "pick")
    tune.add_argument("scenario", type=Path, help="scenario YAML file (execution: nccl)")
    tune.add_argument("--output", type=Path, metavar="FILE", help="the configuration to write "
                                                                  "(default: nccl_tuner.conf in "
                                                                  "the scenario's output "
                                                                  "directory)")
    tune.add_argument("--quiet", action="store_true", help="no word on stderr before the run and "
                                                           "no progress bar")
    topo = commands.add_parser("topo", help="summarise a topology (GPUs, switches, cables, "
                                             "diameter, bisection, injection) and draw it")
    topo.add_argument("topology", help="a preset name (e.g. dgx_h100), a preset-style YAML file "
                                       "(kind: and its parameters), a scenario file or NCCL's "
                                       "topology file (NCCL_TOPO_DUMP_FILE's .xml)")
    topo.add_argument("--output", type=Path, help="directory for the drawing (default "
                                                  "results/topo)")
    plot = commands.add_parser("plot", help="draw every figure of a results file again, without "
                                            "simulating; optionally beside measurements")
    plot.add_argument("results", type=Path, help="a results CSV written by run (its JSON beside "
                                                 "it gives the link rate)")
    plot.add_argument("--reference", type=Path, help="an nccl-tests log, its -J JSON file, or a "
                                                     "CSV (size_bytes, time_us, busbw_GBps) to "
                                                     "overlay, with the error per size")
    plot.add_argument("--output", type=Path, help="directory for the figures (default: the "
                                                  "results file's)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = _parser().parse_args(argv)
    from simulator.output.files import Terminated, raise_terminated

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, raise_terminated)  # stop as on Ctrl-C, said in one line
    try:
        commands = {"run": _run, "sweep": _sweep, "calibrate": _calibrate, "topo": _topo,
                    "plot": _plot, "tune": _tune}
        return commands[args.command](args)
    except InputError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    except AlgorithmError as error:  # a bug in an algorithm's program, not in the input
        print(f"{_input(args)}: algorithm failed: {error}", file=sys.stderr)
        return EXIT_FAILED
    except NetworkCut as error:  # the scenario's faults split the network: the run cannot end
        print(f"{_input(args)}: {error}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt as stop:  # every file is written atomically: none half-written
        print(f"{_input(args)}: {_stopped(stop)}; files already written are complete",
              file=sys.stderr)
        return EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _stop_code(stop: KeyboardInterrupt) -> int:
    """The exit code of a run stopped by Ctrl-C (130) or SIGTERM (143)."""
    from simulator.output.files import Terminated

    return EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED


def _stopped(stop: KeyboardInterrupt) -> str:
    """How a run was stopped, as its last line says it."""
    from simulator.output.files import Terminated

    return "terminated (SIGTERM)" if isinstance(stop, Terminated) else "interrupted"


def _input(args: argparse.Namespace) -> Path:
    """The file a command works on, to name it in messages."""
    if args.command == "sweep":
        return Path(args.scenarios[0])
    if args.command == "topo":
        return Path(args.topology)
    if args.command == "plot":
        return Path(args.results)
    return Path(args.scenario if args.command in ("run", "tune") else args.log)


def _calibrate(args: argparse.Namespace) -> int:
    from simulator.calibration import calibrate, preset_yaml, value_of
    from simulator.measured.nccl_tests import load_measurements
    from simulator.output.files import output_problem, write_atomically
    from simulator.scenario.presets import preset_text

    output = args.output or Path("results") / "calibrated" / f"{args.preset}.yaml"
    problem = output_problem(output, [Path(args.log)])
    if problem:
        raise InputError([Problem("command line", "--output", problem)])
    series = load_measurements(args.log)
    if args.nodes < 1:
        raise InputError([Problem("command line", "--nodes", f"expected a whole number ≥ 1, "
                                                             f"got {args.nodes}")])
    result = calibrate(series, args.preset, args.nodes)
    _check_writable("command line", output.parent)
    nodes = f" --nodes {args.nodes}" if args.nodes > 1 else ""
    lines = [f"# calibrate {args.log} --preset {args.preset}{nodes}",
             f"#{'size(B)':>11} {'pick':>12} {'measured(us)':>13} {'before(us)':>11} "
             f"{'err(%)':>7} {'after(us)':>11} {'err(%)':>7}"]
    for p in result.points:
        lines.append(f"{p.size_bytes:>12} {p.pick:>12} {p.measured_us:>13.2f} {p.before_us:>11.2f} "
                     f"{100 * (p.before_us / p.measured_us - 1):>+7.1f} {p.after_us:>11.2f} "
                     f"{100 * (p.after_us / p.measured_us - 1):>+7.1f}")
    before, after = result.before, result.after
    lines += [f"# geometric mean |error|: before {100 * result.geomean_error('before'):.1f} %, "
              f"after {100 * result.geomean_error('after'):.1f} %",
              "# fitted: " + ", ".join(f"{name} {value_of(name, before, '.2f', ' ')} -> "
                                       f"{value_of(name, after, '.2f', ' ')}"
                                       for name in result.parameters)
              + (f" (not constrained by this log, left as derived: {', '.join(result.fixed)})"
                 if result.fixed else "")]
    _print("\n".join(lines) + "\n")
    text = preset_yaml(result, preset_text(args.preset) or "")

    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8")

    write_atomically(output, write)
    _print(f"# calibrated preset: {output} (use it as topology: {{preset: {output}}})\n")
    return EXIT_OK


def _tune(args: argparse.Namespace) -> int:
    """Simulate the scenario's NCCL kernels with every protocol, print NCCL's pick beside the
    fastest per size, and write the tuner configuration (docs/tune.md); nothing is written when
    a point fails verification (exit 1) or the input is bad (exit 2)."""
    from simulator.output.files import output_problem, remove_leftovers, write_atomically
    from simulator.output.tuner_conf import format_tuner_conf
    from simulator.scenario.parse import load_scenario
    from simulator.scenario.training import Imports
    from simulator.tune import tune

    scenario = load_scenario(args.scenario, imports=Imports.SKIP)  # tune refuses a training step
    output = args.output or scenario.output_dir / "nccl_tuner.conf"
    inputs = [Path(scenario.source)]
    if scenario.topology.kind == "graph":
        inputs.append(Path(str(scenario.topology.params["file"])))
    problem = output_problem(output, inputs)
    if problem:
        raise InputError([Problem("command line", "--output", problem) if args.output else
                          Problem(scenario.source, "output", problem)])
    _check_writable(scenario.source, output.parent)
    remove_leftovers(output.parent, [output.name])
    with _progress_bar(0, args.quiet) as bar:

        def progress(done: int, total: int) -> None:
            if done == 0:
                bar.reset(total)
                if not args.quiet:
                    print(f"{scenario.source}: simulating {total} points: NCCL's kernels "
                          "with each protocol it runs them with", file=sys.stderr, flush=True)
            else:
                bar.update()

        tuning = tune(scenario, progress=progress)
    if _verification(scenario.source, tuning.results) != EXIT_OK:
        print(f"{scenario.source}: nothing written", file=sys.stderr)
        return EXIT_FAILED
    text = format_tuner_conf(tuning.rows, tuning.chosen,
                             tuning.about(f"python -m simulator tune {args.scenario}"))

    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8", newline="\n")

    with _writing(scenario.source, output.parent):
        write_atomically(output, write)
    _print(text + f"# tuner configuration: {output} ({len(tuning.rows)} "
                  f"row{'' if len(tuning.rows) == 1 else 's'})\n")
    return EXIT_OK


def _topo(args: argparse.Namespace) -> int:
    from simulator.model.analysis.fabric import summarize
    from simulator.output.fabric import format_summary
    from simulator.output.fabric_figure import draw_fabric

    spec = _topology_spec(args.topology)
    output = args.output or Path("results") / "topo"
    _check_writable(args.topology, output)
    graph = spec.build()
    graph.graph["name"] = graph.graph.get("name") or spec.kind  # a graph file may name none
    summary = summarize(graph, spec.label)
    _print(format_summary(summary))
    path = output / f"{re.sub(r'[^A-Za-z0-9_.=-]+', '_', spec.label).strip('_') or 'topology'}.png"
    try:
        draw_fabric(graph, summary, path)
    except OSError as error:
        raise InputError([Problem(args.topology, "output", f"cannot write "
                                  f"{error.filename or path}: {error.strerror}")]) from None
    _print(f"# figure: {path}\n")
    return EXIT_OK


def _plot(args: argparse.Namespace) -> int:
    """Every figure of a results file (docs/results.md), without simulating; with
    ``--reference``, the measured sweep beside the simulated one and the error table."""
    from simulator.measured.nccl_tests import load_measurements
    from simulator.output.figures import link_rate_beside, read_results, write_figures
    from simulator.output.reference import Reference, errors, format_errors

    results = read_results(args.results)
    reference = None
    if args.reference is not None:
        series = load_measurements(args.reference)
        reference = Reference(str(args.reference), tuple(m.size_bytes for m in series.rows),
                              tuple(m.busbw_GBps for m in series.rows), series.test)
    output = args.output or args.results.parent
    _check_writable(str(args.results), output)
    rate, why = link_rate_beside(args.results)
    try:
        paths = write_figures(results, output / args.results.stem, rate, reference)
    except OSError as error:
        raise InputError([Problem(str(args.results), "output", f"cannot write "
                                  f"{error.filename or output}: {error.strerror}")]) from None
    if reference is not None and (results.ranks > 1).all():
        _print(f"# {args.results} against {args.reference}\n" + format_errors(errors(results,
                                                                                  reference)))
    if rate is None:
        _print(f"# no link-rate line: {why}\n")
    _print(f"# figures: {', '.join(str(path) for path in paths)}\n")
    return EXIT_OK


def _topology_spec(text: str) -> TopologySpec:
    """The topology ``topo`` is given: a preset-style file (``kind:``), a scenario file's
    ``topology``, NCCL's topology file (``.xml``: one host on a leaf switch), or a preset's
    name."""
    from simulator.scenario.fields import load_yaml_mapping
    from simulator.scenario.ncclxml import load_nccl_xml
    from simulator.scenario.parse import load_preset, load_preset_file, load_scenario
    from simulator.scenario.presets import preset_names
    from simulator.scenario.training import Imports

    path = Path(text)
    if path.is_file() and path.suffix.lower() == ".xml":  # NCCL's topology file: one host
        return load_nccl_xml(text)
    if path.is_file():
        data = load_yaml_mapping(path)
        if "kind" in data:
            return load_preset_file(path)
        if "topology" in data:  # a {torch: ...} model is left unbuilt: topo needs no model
            return load_scenario(path, imports=Imports.SKIP).topology
        raise InputError([Problem(text, "", "expected a topology file (kind: and the builder's "
                                            "parameters) or a scenario file (topology: ...)")])
    if text in preset_names():
        return load_preset(text)
    if path.suffix in (".yaml", ".yml") or len(path.parts) > 1:
        raise InputError([Problem(text, "", "no such file")])
    raise InputError([Problem(text, "", f"no such preset or file; expected a preset "
                                        f"({', '.join(preset_names())}), a topology file "
                                        "(kind: ...) or a scenario file")])


def _formats(text: str, no_plot: bool) -> tuple[str, ...]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in WRITERS]
    if unknown or not names:
        raise InputError([Problem("command line", "--format", f"expected a comma-separated list "
                                  f"of {FORMATS}, got {text!r}")])
    formats = tuple(name for name in dict.fromkeys(names) if not (no_plot and name == "png"))
    if not formats:
        raise InputError([Problem("command line", "--no-plot", f"drops the only file --format "
                                                               f"{text} asks for")])
    if "parquet" in formats and not _importable("pyarrow"):
        raise InputError([Problem("command line", "--format", "parquet needs pyarrow, which is not "
                                  "installed: pip install 'allreduce-sim[parquet]'")])
    return ("csv", *(name for name in formats if name != "csv"))  # the results file, always


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def _imports(args: argparse.Namespace) -> Imports:
    """What ``run`` does with a ``{torch: MODULE:FACTORY}`` model: import it only with
    ``--allow-import`` (the user's code runs only where the user asked for it)."""
    from simulator.scenario.training import Imports

    return Imports.ALLOW if args.allow_import else Imports.REFUSE


def _check_options(args: argparse.Namespace) -> None:
    problems = []
    if args.seed < 0:
        problems.append(Problem("command line", "--seed", f"expected a whole number ≥ 0, got "
                                                          f"{args.seed}"))
    if args.proxy_elements < 1:
        problems.append(Problem("command line", "--proxy-elements", "expected a whole number ≥ 1, "
                                                                    f"got {args.proxy_elements}"))
    if problems:
        raise InputError(problems)


def _run_files(scenario: Scenario) -> list[str]:
    """The names of the files a run of ``scenario`` may write in its output directory: every
    writer's, whichever formats this run asks for."""
    return [file for writer in WRITERS.values() for file in writer.files(scenario.name)]


def _check_outputs(scenario: Scenario, output: Path, options: dict[str, Path | None]) -> None:
    """Refuse, before anything runs, an output path that is an input of the run (the scenario,
    a graph file) or is not a regular file: every results file, and the files of ``options``."""
    from simulator.output.files import output_problem

    inputs = [Path(scenario.source)]
    if scenario.topology.kind in ("graph", "nccl_xml"):
        inputs.append(Path(str(scenario.topology.params["file"])))
    named = {f"output ({name})": output / name for name in _run_files(scenario)}
    named.update({option: path for option, path in options.items() if path is not None})
    if options.get("--links") is not None:
        named["--links (its figure)"] = Path(str(options["--links"])).with_suffix(".png")
    problems = [Problem("command line" if option.startswith("--") else scenario.source, option,
                        problem) for option, path in named.items()
                for problem in [output_problem(path, inputs)] if problem]
    if problems:
        raise InputError(problems)


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


def _run(args: argparse.Namespace) -> int:
    """Say what is coming, run the points with a progress bar (on a terminal), keep each in the
    results files as it finishes, then print the table; Ctrl-C keeps the points done."""
    _check_options(args)
    formats = _formats(args.format, args.no_plot)
    from simulator.output.observed import watch_for, write_observed
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
    from simulator.scenario.parse import load_scenario

    scenario = load_scenario(args.scenario, imports=_imports(args))
    output = args.output or scenario.output_dir
    _check_writable(scenario.source, output)
    _check_outputs(scenario, output, {"--trace": args.trace, "--links": args.links})
    from simulator.output.files import remove_leftovers

    remove_leftovers(output, _run_files(scenario))
    if scenario.training is not None:
        return _train(args, scenario, output, formats)
    settings = settings_of(scenario, args.seed, args.proxy_elements)
    files = ResultsStream(scenario, settings, output, formats)
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
        if not args.quiet:
            print(f"{scenario.source}: {coming.describe()}"
                  + (f" ({len(done)} kept from the stopped run)" if done else ""),
                  file=sys.stderr, flush=True)
        for note in coming.notes:  # NCCL's own view, the points left out: said even if quiet
            print(f"{scenario.source}: {note}", file=sys.stderr, flush=True)
        points = run_points(scenario, seed=args.seed, proxy_elements=args.proxy_elements,
                            setup=setup, watch=watch, plans=plans[len(done):])
        with _progress_bar(total - len(done), args.quiet) as bar:
            for planned in coming.points[len(done):]:
                bar.set_postfix_str(planned.label)
                result = next(points)
                with _writing(scenario.source, output):
                    files.add(result)
                bar.update()
        _print(format_table(files.frame, picks_only=scenario.nccl_choice))
        with _writing(scenario.source, output):
            paths = [*files.finish(), *write_observed(watch, scenario, args.trace, args.links)]
    except KeyboardInterrupt as stop:  # the points done are on disk, every file whole
        print(f"{scenario.source}: {_stopped(stop)}: {_kept(files, total)}", file=sys.stderr)
        return _stop_code(stop)
    finally:
        files.close()
    _print(f"# results: {', '.join(str(path) for path in paths)}\n")
    return _verification(scenario.source, files.frame)


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


def _train(args: argparse.Namespace, scenario: Scenario, output: Path,
           formats: tuple[str, ...]) -> int:
    """A training scenario: its step (verified) and sweeps, printed and written; Ctrl-C leaves
    the files as they were (they are written at the end, each atomically)."""
    from simulator.output.training import format_training
    from simulator.output.writers import write_training
    from simulator.runner import settings_of
    from simulator.trainer import train

    for option in ("trace", "trace_point", "links"):
        if getattr(args, option) is not None:
            flag = "--" + option.replace("_", "-")
            raise InputError([Problem("command line", flag, "expected no " + flag + " with a "
                                      "training scenario (trace one bucket's allreduce as a "
                                      "point of a plain scenario)")])
    if args.resume:
        raise InputError([Problem("command line", "--resume", "expected no --resume with a "
                                  "training scenario (its files are written once, at the end)")])

    def progress(what: str) -> None:
        if not args.quiet:
            print(f"{scenario.source}: simulating the {what}", file=sys.stderr, flush=True)

    try:
        training = train(scenario, seed=args.seed, proxy_elements=args.proxy_elements,
                         progress=progress)
        _print(format_training(training))
        with _writing(scenario.source, output):
            paths = write_training(training, scenario,
                                   settings_of(scenario, args.seed, args.proxy_elements), output,
                                   formats)
    except KeyboardInterrupt as stop:
        print(f"{scenario.source}: {_stopped(stop)}: nothing written", file=sys.stderr)
        return _stop_code(stop)
    _print(f"# results: {', '.join(str(path) for path in paths)}\n")
    if training.step.verified is False:
        print(f"{scenario.source}: verification failed: the gradients did not end averaged and "
              f"identical on every rank (max abs error {training.step.max_abs_error:.3g})",
              file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _progress_bar(total: int, quiet: bool) -> tqdm[Never]:
    """A bar over a run's points on stderr, drawn only on a terminal and without ``--quiet``,
    and wiped when done, so the table follows on a clean screen."""
    from tqdm import tqdm

    return tqdm(total=total, unit="point", file=sys.stderr, leave=False, dynamic_ncols=True,
                disable=quiet or not sys.stderr.isatty())


@contextmanager
def _writing(source: str, output: Path) -> Iterator[None]:
    """A file that cannot be written as an input error naming it."""
    try:
        yield
    except OSError as error:
        raise InputError([Problem(source, "output", f"cannot write {error.filename or output}: "
                                                    f"{error.strerror}")]) from None


def _kept(files: ResultsStream, total: int | None) -> str:
    """What an interrupted run leaves: ``7 of 20 points written to results/x/x.csv``."""
    if not files.rows:
        return "nothing written" if total is None else f"0 of {total} points done, nothing written"
    where = " and ".join(str(path) for path in files.results_paths)
    return f"{len(files.rows)} of {total} point{'s' if total != 1 else ''} written to {where}"


def _sweep(args: argparse.Namespace) -> int:
    """Every point of every scenario on Dask; each scenario's table and files as ``run`` writes
    them; failed points one line each on stderr (exit 2 where a point's input was at fault, as
    ``run`` exits, else 1), the others kept."""
    _check_options(args)
    formats = _formats(args.format, args.no_plot)
    from simulator.output.table import format_table
    from simulator.output.writers import write_results
    from simulator.runner import settings_of
    from simulator.scenario.parse import load_scenario
    from simulator.scenario.training import Imports
    from simulator.sweep import NO_WORKERS_S, ClusterError, sweep

    # a sweep runs no training step (checked_setup refuses one, before the cluster starts), so
    # it never builds a {torch: ...} model, with --allow-import or without
    scenarios = [load_scenario(path, imports=Imports.SKIP) for path in args.scenarios]
    outputs: dict[Path, str] = {}
    for scenario in scenarios:
        _check_writable(scenario.source, scenario.output_dir)
        if scenario.output_dir in outputs:
            raise InputError([Problem(scenario.source, "output", (
                f"expected its own directory, but {outputs[scenario.output_dir]} also writes to "
                f"{scenario.output_dir}"))])
        outputs[scenario.output_dir] = scenario.source
    if args.workers is not None and args.workers < 1:  # before the files: a command-line slip
        raise InputError([Problem("command line", "--workers", f"expected a whole number ≥ 1, "
                                                               f"got {args.workers}")])
    kept = [_kept_by_sweep(scenario, args) for scenario in scenarios] if args.resume else None
    try:
        done = sweep(scenarios, scheduler=args.scheduler, workers=args.workers, seed=args.seed,
                     proxy_elements=args.proxy_elements, progress=not args.no_progress, kept=kept)
    except ClusterError as error:  # nothing ran: the files are as they were
        print(f"sweep: {error}; nothing ran", file=sys.stderr)
        return EXIT_FAILED
    status = EXIT_OK
    for scenario, results in zip(scenarios, done.frames, strict=True):
        _print(format_table(results, picks_only=scenario.nccl_choice))
        paths = write_results(results, scenario,
                              settings_of(scenario, args.seed, args.proxy_elements),
                              scenario.output_dir, formats)
        _print(f"# results: {', '.join(str(path) for path in paths)}\n")
        status = max(status, _verification(scenario.source, results))
    for note in done.notes:  # the points all and auto left out, as run says them
        print(note, file=sys.stderr)
    for failure in done.failures:
        print(failure, file=sys.stderr)
    if done.stranded:  # every worker gone: what finished is written above, the rest named
        print(f"sweep: no Dask worker left for {NO_WORKERS_S:g} s: {_points(done.stranded)} "
              "not run; those finished are written", file=sys.stderr)
        status = EXIT_FAILED
    if done.interrupted_of:  # Ctrl-C: what finished is written above, and said so here
        finished = sum(len(frame) for frame in done.frames) + len(done.failures)
        print(f"sweep: interrupted after {finished} of {done.interrupted_of} points; those "
              "finished are written", file=sys.stderr)
        return EXIT_INTERRUPTED
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


def _verification(source: str, results: pd.DataFrame) -> int:
    failed = results[results.verified.eq(False).fillna(False)]
    if failed.empty:
        return EXIT_OK
    first = failed.iloc[0]
    where = f": {first.mismatch}" if first.mismatch else ""
    print(f"{source}: verification failed for {len(failed)} run(s), first {first.algorithm} at "
          f"{first.size_bytes} bytes (max abs error {first.max_abs_error:.3g}){where}",
          file=sys.stderr)
    return EXIT_FAILED


def _print(text: str) -> None:
    """Write to stdout; a reader that stopped early (``| head``) only stops the printing, so the
    results are still written and the exit code still says how the run went."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # Python docs, "Note on SIGPIPE": point stdout at devnull
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
