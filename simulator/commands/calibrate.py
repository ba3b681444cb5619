"""``python -m simulator calibrate LOG --preset NAME``: fit a preset's NCCL execution model to an
nccl-tests log, print each size before and after, and write the calibrated preset."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.commands.command import EXIT_OK, Command
from simulator.commands.console import say
from simulator.commands.paths import check_writable, writing
from simulator.errors import InputError, Problem

if TYPE_CHECKING:
    from simulator.calibration import Calibration


def arguments(parser: argparse.ArgumentParser) -> None:
    """``calibrate``'s arguments."""
    parser.add_argument("log", type=Path, help="all_reduce_perf output, its -J JSON file, or a CSV "
                                               "with size_bytes, time_us and busbw_GBps")
    parser.add_argument("--preset", required=True, help="the preset of the measured machine "
                                                        "(e.g. dgx_h100)")
    parser.add_argument("--nodes", type=int, default=1, help="hosts the log ran on (default 1); "
                                                             "on several the network's bandwidth "
                                                             "and latency are fitted")
    parser.add_argument("--output", type=Path, help="where to write the calibrated preset "
                                                    "(default results/calibrated/<preset>.yaml)")


def execute(args: argparse.Namespace) -> int:
    """Fit, print the fit per size and overall, and write the preset with the fitted values."""
    from simulator.calibration import calibrate, preset_yaml
    from simulator.inputs import identified
    from simulator.measured.nccl_tests import load_measurements
    from simulator.output.files import output_problem, write_atomically
    from simulator.scenario.presets import preset_text

    output = args.output or Path("results") / "calibrated" / f"{args.preset}.yaml"
    problem = output_problem(output, identified([Path(args.log)]))  # its one input
    if problem:
        raise InputError([Problem("command line", "--output", problem)])
    check_writable("command line", output.parent, "--output")
    series = load_measurements(args.log)
    if args.nodes < 1:
        raise InputError([Problem("command line", "--nodes", f"expected a whole number ≥ 1, "
                                                             f"got {args.nodes}")])
    result = calibrate(series, args.preset, args.nodes)
    say("\n".join(_report(args, result)) + "\n")
    text = preset_yaml(result, preset_text(args.preset) or "")

    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8")

    with writing("command line", output.parent, "--output"):
        write_atomically(output, write)
    say(f"# calibrated preset: {output} (use it as topology: {{preset: {output.resolve()}}}, or "
        "its path relative to the scenario's directory)\n")
    return EXIT_OK


def _report(args: argparse.Namespace, result: Calibration) -> list[str]:
    """The fit as printed: the command, each size's pick and times before and after with their
    errors, the geometric mean error and the parameters fitted."""
    from simulator.calibration import value_of

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
    return lines


COMMAND = Command("calibrate", "fit a preset's NCCL execution model to an nccl-tests log and "
                               "write the calibrated preset", arguments, execute, "log")
