"""Custom fabrics read from a file (``kind: graph``): a GraphML file or a YAML edge list.

A YAML edge list::

    nodes:
      - {name: gpu0, kind: gpu, rank: 0}        # kind: gpu, nic or switch; GPUs need a rank
      - {name: gpu1, kind: gpu, rank: 1, host: 0}
      - {name: sw, kind: switch}
    edges:                                      # a full-duplex cable unless duplex: false
      - {from: gpu0, to: sw, bandwidth: 25GB/s, latency: 1us}
      - {from: gpu1, to: sw, bandwidth: 25GB/s, latency: 1us, link: nvlink}

GraphML carries the same attributes on its nodes (``kind``, ``rank``, ``host``, ``latency``)
and edges (``bandwidth``, ``latency``, ``link``); an undirected GraphML graph is full duplex,
a directed one is taken edge by edge. Bandwidths and latencies are numbers in SI units
(bytes/s, s) or strings with units (``25GB/s``, ``1us``). Everything is checked before a graph
is built, each problem named by its place in the file (``edges[3].bandwidth``): unknown
nodes, a missing or zero bandwidth, duplicate ranks, ranks that are not 0..p-1, a rank on a
switch, GPUs that cannot reach each other. Routes are searched per pair, lazily, and cached
(:class:`~simulator.model.routing.Routing`): nothing is computed for all pairs up front.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx
import yaml

from simulator.errors import InputError, UnitError, quoted
from simulator.inputs import check_yaml_shape, note_read, read_text
from simulator.model.parts import GPU, NET_LINK, NIC, NVLINK, PCIE, SWITCH, File, ParamValue
from simulator.units import parse_bandwidth, parse_time
from simulator.xmlsafe import parse_xml

KINDS = (GPU, NIC, SWITCH)
LINKS = (NVLINK, PCIE, NET_LINK)
SUFFIXES = (".graphml", ".yaml", ".yml")


@dataclass(frozen=True)
class GraphFile:
    """A custom fabric as read: the graph when the file is valid, else what is wrong with it,
    each as (field, what was expected)."""

    graph: nx.DiGraph | None
    problems: tuple[tuple[str, str], ...]


def graph(file: File) -> nx.DiGraph:
    """The fabric described by ``file`` (GraphML or a YAML edge list; module docstring).

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "pair.yaml"
    >>> _ = path.write_text("nodes: [{name: a, kind: gpu, rank: 0}, {name: b, kind: gpu, rank: 1}]"
    ...                     "\\nedges: [{from: a, to: b, bandwidth: 25GB/s, latency: 1us}]")
    >>> sorted(graph(str(path)).edges)
    [('a', 'b'), ('b', 'a')]
    """
    read = read_graph_file(file)
    if read.graph is None:
        field, message = read.problems[0]
        raise ValueError(f"{file}: {field}: {message}")
    return read.graph.copy()


def graph_problems(params: Mapping[str, ParamValue]) -> list[tuple[str, str]]:
    """What is wrong with a ``kind: graph`` topology's file, as (parameter, message) pairs
    whose message names the file and the field in it."""
    file = str(params["file"])
    return [("file", f"{file}: {field}: {message}" if field else f"{file}: {message}")
            for field, message in read_graph_file(file).problems]


def graph_ranks(params: Mapping[str, ParamValue]) -> int:
    """How many GPUs the file describes (0 when it is invalid)."""
    read = read_graph_file(str(params["file"]))
    return 0 if read.graph is None else sum(
        1 for _, kind in read.graph.nodes(data="kind") if kind == GPU)


def read_graph_file(file: str) -> GraphFile:
    """The file read and checked, cached per path and modification time (a scenario's checks,
    its rank count and its build all read the file once)."""
    path = Path(file)
    try:
        stat = path.stat()
    except OSError:
        return GraphFile(None, (("", "no such file"),))
    note_read(path, stat)  # read once per version: each run that names it reads it
    return _read(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _read(file: str, mtime_ns: int, size: int) -> GraphFile:
    path = Path(file)
    if path.suffix.lower() not in SUFFIXES:
        return GraphFile(None, (("", f"expected a .graphml, .yaml or .yml file, got "
                                    f"{quoted(path.name)}"),))
    reader = _Reader()
    try:
        text = read_text(path)
        if path.suffix.lower() == ".graphml":  # read safely first: entities, depth, control
            parse_xml(text, file, "GraphML")   # characters, as every XML input is
        else:
            with contextlib.suppress(yaml.YAMLError):  # the YAML reader below says where
                check_yaml_shape(text, file, yaml.SafeLoader)
    except InputError as error:
        return GraphFile(None, tuple((p.field, p.message) for p in error.problems))
    if path.suffix.lower() == ".graphml":
        try:
            source = nx.parse_graphml(text)
        except (nx.NetworkXError, ValueError, SyntaxError) as error:
            return GraphFile(None, (("", f"expected GraphML ({error})"),))
        built = reader.from_graphml(source)
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            return GraphFile(None, (("", f"expected a YAML edge list (unreadable{where})"),))
        built = reader.from_yaml(data)
    if not reader.problems:
        reader.check_ranks(built)
    built.graph["name"] = f"graph({path.name})"
    return GraphFile(None if reader.problems else built, tuple(reader.problems))


class _Reader:
    """Builds the graph while collecting every problem with its field path."""

    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []

    def problem(self, field: str, message: str) -> None:
        self.problems.append((field, message))

    def from_yaml(self, data: object) -> nx.DiGraph:
        graph = nx.DiGraph()
        if not isinstance(data, Mapping):
            self.problem("", "expected a mapping with 'nodes' and 'edges'")
            return graph
        unknown = sorted(str(key) for key in data if key not in ("nodes", "edges"))
        for key in unknown:
            self.problem(key, "unknown key; expected nodes and edges")
        nodes, edges = data.get("nodes"), data.get("edges")
        if not isinstance(nodes, list) or not nodes:
            self.problem("nodes", "expected a list of nodes ({name, kind, rank})")
            nodes = []
        if not isinstance(edges, list) or not edges:
            self.problem("edges", "expected a list of edges ({from, to, bandwidth, latency})")
            edges = []
        for i, node in enumerate(nodes):
            where = f"nodes[{i}]"
            if not isinstance(node, Mapping) or not isinstance(node.get("name"), str):
                self.problem(where, "expected a mapping with a 'name'")
                continue
            self._node(graph, where, node["name"], node, ("name",))
        for i, edge in enumerate(edges):
            where = f"edges[{i}]"
            if not isinstance(edge, Mapping):
                self.problem(where, "expected a mapping {from, to, bandwidth, latency}")
                continue
            ends = [self._end(graph, f"{where}.{key}", edge.get(key)) for key in ("from", "to")]
            duplex = edge.get("duplex", True)
            if not isinstance(duplex, bool):
                self.problem(f"{where}.duplex", f"expected true or false, got {quoted(duplex)}")
            if ends[0] is not None and ends[1] is not None:
                self._edge(graph, where, ends[0], ends[1], edge, ("from", "to", "duplex"),
                           duplex is not False)
        return graph

    def from_graphml(self, source: nx.Graph) -> nx.DiGraph:
        graph = nx.DiGraph()
        for name, data in source.nodes(data=True):
            self._node(graph, f"node {quoted(name)}", str(name), data, ())
        for a, b, data in source.edges(data=True):
            self._edge(graph, f"edge {quoted(a)}-{quoted(b)}", str(a), str(b), data, (),
                       not source.is_directed())
        return graph

    def _node(self, graph: nx.DiGraph, where: str, name: str, data: Mapping[str, Any],
              skip: tuple[str, ...]) -> None:
        for key in data:
            if key not in (*skip, "kind", "rank", "host", "latency"):
                self.problem(f"{where}.{key}", "unknown key; expected kind, rank, host, latency")
        if name in graph:
            self.problem(f"{where}.name", f"expected each node once, got {quoted(name)} twice")
            return
        kind = data.get("kind")
        if kind not in KINDS:
            self.problem(f"{where}.kind", f"expected one of {', '.join(KINDS)}, got {quoted(kind)}")
            graph.add_node(name)  # known by name, so that its edges are not reported too
            return
        attributes: dict[str, Any] = {"kind": kind}
        rank = data.get("rank")
        if kind == GPU:
            if _whole(rank) is None:
                self.problem(f"{where}.rank", f"expected a rank (a whole number ≥ 0) on a GPU, "
                                              f"got {quoted(rank)}")
            else:
                attributes["rank"] = _whole(rank)
        elif rank is not None:
            self.problem(f"{where}.rank", f"expected no rank on a {kind} (only GPUs have ranks)")
        if "host" in data:
            if _whole(data["host"]) is None or kind != GPU:
                self.problem(f"{where}.host", "expected a host (a whole number ≥ 0) on a GPU")
            else:
                attributes["host"] = _whole(data["host"])
        if "latency" in data:
            attributes["latency"] = self._value(f"{where}.latency", data["latency"], parse_time)
        graph.add_node(name, **attributes)

    def _end(self, graph: nx.DiGraph, where: str, name: object) -> str | None:
        if not isinstance(name, str) or name not in graph:
            self.problem(where, f"expected a node named in nodes, got {quoted(name)}")
            return None
        return name

    def _edge(self, graph: nx.DiGraph, where: str, a: str, b: str, data: Mapping[str, Any],
              skip: tuple[str, ...], duplex: bool) -> None:
        for key in data:
            if key not in (*skip, "bandwidth", "latency", "link"):
                self.problem(f"{where}.{key}", "unknown key; expected bandwidth, latency, link")
        values: dict[str, Any] = {}
        for key, parse in (("bandwidth", parse_bandwidth), ("latency", parse_time)):
            if key not in data:
                self.problem(f"{where}.{key}", "required but missing")
            else:
                values[key] = self._value(f"{where}.{key}", data[key], parse)
        link = data.get("link", NVLINK)
        if link not in LINKS:
            self.problem(f"{where}.link", f"expected one of {', '.join(LINKS)}, got {quoted(link)}")
        if a == b:
            self.problem(where, f"expected two different nodes, got {quoted(a)} twice")
        if len(values) < 2:
            return
        for u, v in ((a, b), (b, a)) if duplex else ((a, b),):
            if graph.has_edge(u, v):
                self.problem(where, f"expected each link once, got {u} -> {v} twice")
            graph.add_edge(u, v, bandwidth=values["bandwidth"], latency=values["latency"],
                           link=link)

    def _value(self, where: str, value: object, parse: Any) -> float:
        """A bandwidth or latency: a number in SI units or a string with units."""
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        bandwidth = parse is parse_bandwidth
        if is_number:
            assert isinstance(value, (int, float))
            if math.isfinite(value) and (value > 0 if bandwidth else value >= 0):
                return float(value)
            self.problem(where, f"expected a {'positive bandwidth' if bandwidth else 'time ≥ 0'}"
                                f", got {quoted(value)}")
            return 0.0
        try:
            return float(parse(value))
        except UnitError as error:
            self.problem(where, str(error))
            return 0.0

    def check_ranks(self, graph: nx.DiGraph) -> None:
        """GPU ranks are 0..p-1, each once, and every GPU reaches every other."""
        by_rank: dict[int, str] = {}
        for name, rank in sorted(graph.nodes(data="rank"), key=lambda item: str(item[0])):
            if rank is None:
                continue
            if rank in by_rank:
                self.problem("nodes", f"expected each rank once, got rank {rank} on "
                                      f"{by_rank[rank]} and {name}")
            by_rank[rank] = name
        if not by_rank:
            self.problem("nodes", "expected at least one GPU")
            return
        if sorted(by_rank) != list(range(len(by_rank))):
            self.problem("nodes", f"expected GPU ranks 0..{len(by_rank) - 1}, got "
                                  f"{sorted(by_rank)}")
            return
        first = by_rank[0]
        onward, back = nx.descendants(graph, first), nx.ancestors(graph, first)
        for rank in sorted(by_rank)[1:]:
            name = by_rank[rank]
            if name not in onward:
                self.problem("edges", f"expected every GPU to reach every other; rank {rank} "
                                      f"({name}) cannot be reached from rank 0 ({first})")
                return
            if name not in back:
                self.problem("edges", f"expected every GPU to reach every other; rank {rank} "
                                      f"({name}) cannot reach rank 0 ({first})")
                return


def _whole(value: object) -> int | None:
    """``value`` as a whole number ≥ 0 (GraphML may type it as a float: 3.0 counts), or None."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
