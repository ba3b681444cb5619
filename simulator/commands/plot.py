"""``python -m simulator plot RESULTS``: every figure of a results file (docs/results.md) drawn
again, without simulating; with ``--reference``, the measured sweep beside the simulated one and
the error per size."""

from __future__ import annotations

import argparse
from pathlib import Path

from simulator.commands.command import EXIT_OK, Command
from simulator.commands.console import say
from simulator.commands.paths import check_writable, output_problems
from simulator.errors import InputError, Problem


def arguments(parser: argparse.ArgumentParser) -> None:
    """``plot``'s arguments."""
    parser.add_argument("results", type=Path, help="a results CSV written by run (its JSON beside "
                                                   "it gives the link rate and the fabric's "
                                                   "ceiling)")
    parser.add_argument("--reference", type=Path, help="an nccl-tests log, its -J JSON file, or a "
                                                       "CSV (size_bytes, time_us, busbw_GBps) to "
                                                       "overlay, with the error per size")
    parser.add_argument("--output", type=Path, help="directory for the figures (default: the "
                                                    "results file's)")


def execute(args: argparse.Namespace) -> int:
    """Read the results (and the reference), draw the figures, print the errors per size."""
    from simulator.inputs import identified, recording
    from simulator.measured.nccl_tests import load_measurements
    from simulator.output.figures import (
        figure_paths,
        limits_beside,
        read_results,
        write_figures,
    )
    from simulator.output.reference import Reference, errors, format_errors

    results = read_results(args.results)
    reference = None
    with recording() as reads:
        if args.reference is not None:
            series = load_measurements(args.reference)
            reference = Reference(str(args.reference), tuple(m.size_bytes for m in series.rows),
                                  tuple(m.busbw_GBps for m in series.rows), series.test)
    output = args.output or args.results.parent
    check_writable(str(args.results), output)
    inputs = [*reads, *identified([args.results, args.results.with_suffix(".json")])]
    figures = figure_paths(output / args.results.stem, reference is not None)
    problems = output_problems({f"output ({path.name})": path for path in figures}, inputs)
    if problems:
        raise InputError([Problem(str(args.results), name, problem)
                          for name, problem in problems])
    rate, ceiling, why = limits_beside(args.results, results.size_bytes)
    try:
        paths = write_figures(results, output / args.results.stem, rate, reference, ceiling)
    except OSError as error:
        raise InputError([Problem(str(args.results), "output", f"cannot write "
                                  f"{error.filename or output}: {error.strerror}")]) from None
    if reference is not None and (results.ranks > 1).all():
        say(f"# {args.results} against {args.reference}\n" + format_errors(errors(results,
                                                                               reference)))
    if rate is None:
        say(f"# no link-rate line and no fabric's ceiling: {why}\n")
    say(f"# figures: {', '.join(str(path) for path in paths)}\n")
    return EXIT_OK


COMMAND = Command("plot", "draw every figure of a results file again, without simulating; "
                          "optionally beside measurements", arguments, execute, "results")
