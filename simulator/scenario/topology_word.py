"""A topology as a person types it on a command line (``dgx_h100``, ``dgx_h100:8``, a file) turned
into what a scenario's ``topology:`` says, so that it is read, checked and built by the
scenario's own code (:func:`simulator.scenario.parse.scenario_from_dict`) and names its
problems as a scenario would. ``python -m simulator nccl`` and :func:`simulator.nccl.query`
take it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.errors import InputError, Problem, quoted
from simulator.inputs import read_bytes
from simulator.scenario.fields import load_yaml_mapping
from simulator.scenario.presets import preset_names

_PRESET_NODES = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+):(?P<nodes>[^:/\\]+)$")
"""``NAME:NODES``: a preset and its node count, as ``dgx_h100:8``."""


def node_count(nodes: int | str) -> int | str:
    """A node count as typed (``"8"``) as the number a scenario's ``nodes:`` reads; anything
    else as it stands, for the scenario's check to refuse."""
    return int(nodes) if isinstance(nodes, str) and nodes.isdigit() else nodes


@dataclass(frozen=True)
class TopologyWord:
    """A scenario's ``topology:`` mapping for a word, the file its relative file names are
    read beside (a scenario file's; None: the working directory), and a scenario file's
    ``collective:`` and ``nccl:`` as it gives them (``settings``: the defaults of ``nccl``)."""

    topology: Mapping[str, Any]
    beside: str | None = None
    settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def topology_word(text: str, nodes: int | str | None, source: str, field: str) -> TopologyWord:
    """The ``topology:`` ``text`` names, with ``nodes`` hosts where given (else a preset's
    ``NAME:NODES``): NCCL's topology file (``.xml``: ``nccl_xml``), a GraphML file (``kind:
    graph``), a YAML file (a preset's form, ``kind:``; a scenario, whose ``topology:``; an edge
    list, ``nodes:`` and ``edges:``), else a preset's name. InputError (``source``, ``field``)
    where it is none of them, or gives the node count twice."""
    match = _PRESET_NODES.match(text)
    if match and not Path(text).exists():
        if nodes is not None:
            raise InputError([Problem(source, field, (
                f"expected the node count once, got {quoted(text)} and nodes {nodes}"))])
        text, nodes = match["name"], match["nodes"]
    extra: dict[str, Any] = {} if nodes is None else {"nodes": node_count(nodes)}
    path = Path(text)
    if text and path.exists() and not path.is_file():  # '' is no file, though '.' is
        read_bytes(path)  # a directory or a FIFO: it says which
    suffix = path.suffix.lower()
    if path.is_file() and suffix == ".xml":
        return TopologyWord({"nccl_xml": text, **extra})
    if path.is_file() and suffix == ".graphml":
        return TopologyWord({"kind": "graph", "file": text, **extra})
    if path.is_file():
        data = load_yaml_mapping(path)
        if "kind" in data:
            return TopologyWord({"preset": text, **extra})
        if "topology" in data and isinstance(data["topology"], Mapping):
            settings = {key: data[key] for key in ("collective", "nccl") if key in data}
            return TopologyWord({**data["topology"], **extra}, beside=text, settings=settings)
        if "edges" in data:
            return TopologyWord({"kind": "graph", "file": text, **extra})
        raise InputError([Problem(text, "", (
            "expected a topology file (kind: and the builder's parameters), a scenario file "
            "(topology: ...), a YAML edge list (nodes: and edges:), a GraphML file or NCCL's "
            "topology file (.xml)"))])
    if text in preset_names():
        return TopologyWord({"preset": text, **extra})
    if path.suffix or len(path.parts) > 1:
        raise InputError([Problem(source, field, f"no such file {quoted(text)}")])
    raise InputError([Problem(source, field, (
        f"no such preset or file {quoted(text)}; expected a preset ({', '.join(preset_names())}), "
        "optionally with :NODES (dgx_h100:8), or a topology, scenario, graph or NCCL topology "
        "file"))])
