"""``python -m simulator topo FILE_OR_PRESET``: a topology's numbers (GPUs, switches, cables,
diameter, bisection, injection) printed, and its drawing written (docs/topo.md); with
``--names`` every node and link by the name a scenario's faults give it."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.commands.command import EXIT_OK, Command
from simulator.commands.console import say
from simulator.commands.paths import check_writable
from simulator.errors import InputError, Problem

if TYPE_CHECKING:
    from simulator.scenario.spec import TopologySpec


def arguments(parser: argparse.ArgumentParser) -> None:
    """``topo``'s arguments."""
    parser.add_argument("topology", help="a preset name (e.g. dgx_h100, or dgx_h100:8 for 8 "
                                         "nodes), a preset-style YAML file (kind: and its "
                                         "parameters), a scenario file, a graph file (YAML "
                                         "edge list or GraphML) or NCCL's topology file "
                                         "(NCCL_TOPO_DUMP_FILE's .xml), as nccl reads it")
    parser.add_argument("--output", type=Path, help="directory for the drawing (default "
                                                    "results/topo)")
    parser.add_argument("--names", action="store_true",
                        help="also print every node and directed link by name, as a scenario's "
                             "faults name them (nic_down: nic; link_down: link: [FROM, TO])")


def execute(args: argparse.Namespace) -> int:
    """Build the topology, print its summary and draw it."""
    from simulator.model.analysis.fabric import summarize
    from simulator.output.fabric import format_summary
    from simulator.output.fabric_figure import draw_fabric

    spec = _topology_spec(args.topology)
    output = args.output or Path("results") / "topo"
    check_writable(args.topology, output)
    graph = spec.build()
    graph.graph["name"] = graph.graph.get("name") or spec.kind  # a graph file may name none
    summary = summarize(graph, spec.label)
    say(format_summary(summary))
    if args.names:
        from simulator.output.fabric_names import format_names

        say(format_names(graph) + "\n")
    path = output / f"{re.sub(r'[^A-Za-z0-9_.=-]+', '_', spec.label).strip('_') or 'topology'}.png"
    try:
        draw_fabric(graph, summary, path)
    except OSError as error:
        raise InputError([Problem(args.topology, "output", f"cannot write "
                                  f"{error.filename or path}: {error.strerror}")]) from None
    say(f"# figure: {path}\n")
    return EXIT_OK


def _topology_spec(text: str) -> TopologySpec:
    """The topology ``topo`` is given, read as ``nccl`` reads its TOPOLOGY
    (:func:`~simulator.scenario.topology_word.topology_word`: a preset, ``NAME:NODES``, a
    preset-style, scenario, graph or NCCL topology file) and checked as a scenario's
    ``topology:`` (:func:`~simulator.scenario.parse.topology_from_dict`); InputError naming
    TOPOLOGY, or the file at fault."""
    from simulator.scenario.parse import topology_from_dict
    from simulator.scenario.topology_word import topology_word

    word = topology_word(text, None, "command line", "TOPOLOGY")
    try:
        return topology_from_dict(word.topology, source=word.beside or "command line")
    except InputError as error:  # what the command line gave is TOPOLOGY, as nccl says it
        raise InputError([Problem(problem.file, "TOPOLOGY", problem.message)
                          if problem.file == "command line" else problem
                          for problem in error.problems]) from None


COMMAND = Command("topo", "summarise a topology (GPUs, switches, cables, diameter, bisection, "
                          "injection) and draw it", arguments, execute, "topology")
