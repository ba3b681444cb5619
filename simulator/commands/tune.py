"""``python -m simulator tune FILE.yaml``: simulate the scenario's NCCL kernels with every
protocol, print NCCL's pick beside the fastest per size, and write the tuner configuration of
NCCL's example tuner plugin (docs/tune.md); nothing is written when a point fails verification
(exit 1) or the input is bad (exit 2)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.commands.command import EXIT_FAILED, EXIT_OK, Command
from simulator.commands.console import progress_bar, say, verification
from simulator.commands.paths import check_writable, scenario_inputs, writing
from simulator.errors import InputError, Problem

if TYPE_CHECKING:
    from simulator.inputs import InputFile
    from simulator.scenario.spec import Scenario
    from simulator.tune import Tuning


def arguments(parser: argparse.ArgumentParser) -> None:
    """``tune``'s arguments."""
    parser.add_argument("scenario", type=Path, help="scenario YAML file (execution: nccl)")
    parser.add_argument("--output", type=Path, metavar="FILE", help="the configuration to write "
                                                                    "(default: nccl_tuner.conf in "
                                                                    "the scenario's output "
                                                                    "directory)")
    parser.add_argument("--quiet", action="store_true", help="no word on stderr before the run "
                                                             "and no progress bar")


def execute(args: argparse.Namespace) -> int:
    """Check where the configuration goes, simulate every point, write it when all verified."""
    from simulator.inputs import recording
    from simulator.output.files import remove_leftovers, write_atomically
    from simulator.output.tuner_conf import format_tuner_conf
    from simulator.scenario.parse import load_scenario
    from simulator.scenario.training import Imports

    with recording() as reads:  # tune refuses a training step: its model is never built
        scenario = load_scenario(args.scenario, imports=Imports.SKIP)
    output = args.output or scenario.output_dir / "nccl_tuner.conf"
    _check_output(args, scenario, output, scenario_inputs(scenario, reads))
    check_writable(scenario.source, output.parent)
    remove_leftovers(output.parent, [output.name])
    tuning = _tuning(scenario, args.quiet)
    if verification(scenario.source, tuning.results) != EXIT_OK:
        print(f"{scenario.source}: nothing written", file=sys.stderr)
        return EXIT_FAILED
    text = format_tuner_conf(tuning.rows, tuning.chosen,
                             tuning.about(f"python -m simulator tune {args.scenario}"))

    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8", newline="\n")

    with writing(scenario.source, output.parent):
        write_atomically(output, write)
    say(text + f"# tuner configuration: {output} ({len(tuning.rows)} "
               f"row{'' if len(tuning.rows) == 1 else 's'})\n")
    return EXIT_OK


def _check_output(args: argparse.Namespace, scenario: Scenario, output: Path,
                  inputs: Sequence[InputFile]) -> None:
    """Refuse a configuration path that is one of ``inputs`` (every file the scenario read) or
    is not a regular file, naming ``--output`` when it was given."""
    from simulator.output.files import output_problem

    problem = output_problem(output, inputs)
    if problem:
        raise InputError([Problem("command line", "--output", problem) if args.output else
                          Problem(scenario.source, "output", problem)])


def _tuning(scenario: Scenario, quiet: bool) -> Tuning:
    """Every point simulated, said first and counted on a progress bar (unless ``quiet``)."""
    from simulator.tune import tune

    with progress_bar(0, quiet) as bar:

        def progress(done: int, total: int) -> None:
            if done == 0:
                bar.reset(total)
                if not quiet:
                    print(f"{scenario.source}: simulating {total} points: NCCL's kernels "
                          "with each protocol it runs them with", file=sys.stderr, flush=True)
            else:
                bar.update()

        return tune(scenario, progress=progress)


COMMAND = Command("tune", "simulate every NCCL kernel and protocol of a scenario and write the "
                          "tuner configuration of NCCL's example tuner plugin where one beats "
                          "NCCL's pick", arguments, execute, "scenario")
