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
    parser.add_argument("topology", help="a preset name (e.g. dgx_h100), a preset-style YAML "
                                         "file (kind: and its parameters), a scenario file or "
                                         "NCCL's topology file (NCCL_TOPO_DUMP_FILE's .xml)")
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
    """The topology ``topo`` is given: a preset-style file (``kind:``), a scenario file's
    ``topology``, NCCL's topology file (``.xml``: one host on a leaf switch), or a preset's
    name."""
    from simulator.inputs import read_bytes
    from simulator.scenario.fields import load_yaml_mapping
    from simulator.scenario.ncclxml import load_nccl_xml
    from simulator.scenario.parse import load_preset, load_preset_file, load_scenario
    from simulator.scenario.presets import preset_names
    from simulator.scenario.training import Imports

    path = Path(text)
    if path.exists() and not path.is_file() and not path.is_dir():
        read_bytes(path)  # a FIFO or a device: it says which, not "no such file"
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


COMMAND = Command("topo", "summarise a topology (GPUs, switches, cables, diameter, bisection, "
                          "injection) and draw it", arguments, execute, "topology")
