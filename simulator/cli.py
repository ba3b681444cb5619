"""Command line: ``python -m simulator run FILE.yaml``, ``sweep FILE.yaml ...`` (every point on
a Dask cluster), ``calibrate LOG --preset NAME``, ``topo FILE_OR_PRESET`` (a topology's
numbers and drawing), ``plot RESULTS``, ``tune FILE.yaml`` (NCCL's tuner configuration) and
``nccl TOPOLOGY`` (NCCL's pick and predicted time per size, from its model alone).

The entry point: the parser, built from :data:`COMMANDS` (each command's module,
:mod:`simulator.commands`, adds its own arguments and runs it), and the one place a command's
errors become exit codes (docs/design.md §3): 0 success; 2 bad input (one line per problem on
stderr: file, field, what was expected); 1 when a run fails verification or an algorithm
fails; 130 on Ctrl-C, 143 on SIGTERM and 129 on SIGHUP, with one line and no half-written file.
Heavy modules (pandas, SimPy, matplotlib) are imported only once a command runs, so ``--help``
and ``--version`` answer at once.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence

from simulator.commands import calibrate, nccl, plot, run, sweep, topo, tune
from simulator.commands.command import EXIT_BAD_INPUT, EXIT_FAILED, Command
from simulator.commands.console import stop_code, stopped
from simulator.errors import AlgorithmError, InputError, NetworkCut
from simulator.output.files import STOPPING, raise_terminated
from simulator.version import __version__

COMMANDS: dict[str, Command] = {command.name: command for command in (
    run.COMMAND, sweep.COMMAND, calibrate.COMMAND, tune.COMMAND, nccl.COMMAND, topo.COMMAND,
    plot.COMMAND)}
"""Every command by name, in the order ``--help`` lists them."""


def _parser() -> argparse.ArgumentParser:
    """``python -m simulator``'s parser: ``--version``, and a subparser per command."""
    parser = argparse.ArgumentParser(prog="python -m simulator",
                                     description="Simulate collective-communication algorithms.")
    parser.add_argument("--version", action="version", version=f"allreduce-sim {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.arguments(subparsers.add_parser(command.name, help=command.help))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = _parser().parse_args(argv)
    command = COMMANDS[args.command]
    main_thread = threading.current_thread() is threading.main_thread()
    before = {number: signal.getsignal(number) or signal.SIG_DFL
              for number in (STOPPING if main_thread else ())}
    for number, handler in before.items():  # SIGTERM, SIGHUP: stop as on Ctrl-C, in one line
        if handler is not signal.SIG_IGN:  # nohup's: the user asked it to outlive the terminal
            signal.signal(number, raise_terminated)
    try:
        return command.run(args)
    except InputError as error:
        for problem in error.problems:
            print(problem, file=sys.stderr)
        return EXIT_BAD_INPUT
    except AlgorithmError as error:  # a bug in an algorithm's program, not in the input
        print(f"{command.input(args)}: algorithm failed: {error}", file=sys.stderr)
        return EXIT_FAILED
    except NetworkCut as error:  # the scenario's faults split the network: the run cannot end
        print(f"{command.input(args)}: {error}", file=sys.stderr)
        return EXIT_FAILED
    except MemoryError:  # past the estimates made before running: the machine said no
        print(f"{command.input(args)}: out of memory: the machine could not give the run what "
              "it needed; files already written are complete (use fewer ranks or sizes, or a "
              "smaller --proxy-elements)", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt as stop:  # every file is written atomically: none half-written
        print(f"{command.input(args)}: {stopped(stop)}; files already written are complete",
              file=sys.stderr)
        return stop_code(stop)
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
