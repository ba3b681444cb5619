"""``python -m simulator nccl TOPOLOGY [--sizes ...] [--json]``: NCCL's algorithm, protocol,
channels and predicted time at each size on a machine, from NCCL's model alone
(:func:`simulator.nccl.query`, docs/nccl-api.md); ``--simulate`` adds the simulated time of each
pick. Nothing is written; bad input exits 2 with one line."""

from __future__ import annotations

import argparse
import json

from simulator.commands.command import EXIT_OK, Command
from simulator.commands.console import say
from simulator.errors import InputError, Problem, quoted


def arguments(parser: argparse.ArgumentParser) -> None:
    """``nccl``'s arguments."""
    parser.add_argument("topology", help="a preset (dgx_h100, or dgx_h100:8 for 8 nodes), a "
                                         "topology, scenario or graph file, or NCCL's topology "
                                         "file (.xml)")
    parser.add_argument("--nodes", help="hosts of the preset or NCCL topology file (default: "
                                        "the preset's; NAME:NODES says the same)")
    parser.add_argument("--collective",
                        help="allreduce (default, or a scenario file's collective:), "
                             "reduce_scatter or allgather")
    parser.add_argument("--sizes", nargs="+", metavar="SIZE",
                        help="sizes in bytes or with units (32KiB 1MiB, or 32KiB,1MiB; default "
                             "1KiB to 1GiB, x4)")
    parser.add_argument("--nccl-version", help="the NCCL whose tuner picks: 2.26, 2.30 "
                                               "(default, or a scenario file's "
                                               "nccl.version) or 2.31")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="NCCL_ALGO, NCCL_PROTO or NCCL_NVLS_ENABLE as NCCL reads them "
                             "(repeat for several, each once), each over the nccl: key it "
                             "sets of a scenario file, whose other nccl: keys hold")
    parser.add_argument("--json", action="store_true", help="print a JSON array, a record a "
                                                            "size")
    parser.add_argument("--simulate", action="store_true",
                        help="also simulate each size's pick (as algorithms: auto runs it) and "
                             "print its time beside NCCL's; run's checks first: a size too "
                             "large to simulate is refused before anything runs")


CLI_NAMES_FIELDS = {"source": "command line", "topology": "TOPOLOGY", "nodes": "--nodes",
                    "collective": "--collective", "sizes": "--sizes",
                    "version": "--nccl-version", "env": "--env"}
"""How the messages name the inputs: by the command's options."""


def execute(args: argparse.Namespace) -> int:
    """Ask NCCL's model at every size and print its table (or JSON)."""
    from simulator.nccl import DEFAULT_SIZES, Names, answer, question

    names = Names(**CLI_NAMES_FIELDS)
    sizes = ([size for item in args.sizes for size in item.split(",") if size]
             if args.sizes else DEFAULT_SIZES)
    asked = question(args.topology, args.collective, sizes, args.nccl_version,
                     _env(args.env) if args.env else None, args.nodes, names)
    table = answer(asked, args.simulate)
    say(json.dumps(table.records(), indent=1) + "\n" if args.json else table.text())
    return EXIT_OK


def _env(settings: list[str]) -> dict[str, str]:
    """``--env NAME=VALUE`` options as a mapping; InputError for one without ``=``, or a
    variable given twice (NCCL reads one value of it)."""
    env: dict[str, str] = {}
    for setting in settings:
        name, equals, value = setting.partition("=")
        if not equals or not name:
            raise InputError([Problem("command line", "--env", f"expected NAME=VALUE "
                                                               f"(NCCL_ALGO=Ring), got "
                                                               f"{quoted(setting)}")])
        if name in env:
            raise InputError([Problem("command line", f"--env {name}", (
                f"expected the variable once (NCCL reads one value), got "
                f"{quoted(f'{name}={env[name]}')} and {quoted(setting)}"))])
        env[name] = value
    return env


COMMAND = Command("nccl", "NCCL's algorithm, protocol, channels and predicted time at each size "
                          "on a machine, from its model, without simulating", arguments, execute,
                  "topology")
