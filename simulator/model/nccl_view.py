"""NCCL's own view of a machine, read from what NCCL writes: the graphs its topology search
found (``NCCL_GRAPH_DUMP_FILE``'s XML, or the ``Pattern ...`` lines of an ``NCCL_DEBUG=INFO``
log), the rings it built (the log's ``Channel NN/MM :`` lines) and its trees (``Trees [c]
d0/d1/d2->rank->up``). A scenario's ``nccl: {graph: FILE}`` or ``nccl: {log: FILE}`` puts them in
place of the graphs :data:`~simulator.model.nccl.DEFAULT_GRAPHS` assumes
(docs/scenarios.md#nccls-own-view).

The formats are NCCL's (v2.30, src/graph/search.cc ``ncclTopoGetXmlFromGraphs`` and
``ncclTopoPrintGraph``, src/graph/rings.cc, src/init.cc): a graph's ``id`` is the algorithm it
serves (0 Ring, 1 Tree, 2 CollNetChain, 3 NVLS, 4 CollNetDirect), ``speedintra`` and
``speedinter`` its per-channel speeds in GB/s, after ``ncclTopoDupChannels`` doubled the channels
where it does; the tuner rates NVLS and NVLSTree on the NVLS graph and PAT on the tree's
(src/graph/tuning.cc, ``graphs[]``). A log prints every rank's lines; the first process's are
read, and the ring lines of the rank that prints them (rank 0), else every rank's ``Ring NN :
prev -> rank -> next`` chained; with ``NCCL_DEBUG_SUBSYS`` including TUNING, rank 0's line per
call says what NCCL ran (src/enqueue.cc), which the run compares with its model's pick, and
NCCL 2.31's ``Input``/``Best tuning`` lines what its cost model predicted
(:mod:`simulator.model.nccl_tuning_log`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from simulator.errors import InputError, Problem, quoted
from simulator.inputs import control_problem, read_text
from simulator.limits import MAX_LOG_CHANNELS
from simulator.model.machine import Layout, Machine
from simulator.model.nccl import Graph, Hardware, NcclAlgorithm, Protocol
from simulator.model.nccl_tuning_log import (
    TUNING_ALGORITHMS,
    TUNING_PROTOCOLS,
    TuningLineError,
    TuningLines,
)
from simulator.model.nccl_tuning_log import Tuned as Tuned
from simulator.units import finite_in
from simulator.xmlsafe import XmlElement, read_xml

GRAPH_IDS = {0: (NcclAlgorithm.RING,), 1: (NcclAlgorithm.TREE,),
             2: (NcclAlgorithm.COLLNET_CHAIN,), 3: (NcclAlgorithm.NVLS, NcclAlgorithm.NVLS_TREE),
             4: (NcclAlgorithm.COLLNET_DIRECT,)}
"""The algorithms each of NCCL's graph ids serves (src/init.cc: ringGraph id 0, treeGraph 1,
collNetChainGraph 2, nvlsGraph 3, collNetDirectGraph 4; tuning.cc rates NVLSTree on nvlsGraph)."""

PLAIN_TREE = 3
"""``NCCL_TOPO_PATTERN_TREE`` (src/include/graph.h): all of a tree's NIC traffic through one GPU,
which tuning.cc rates at ×0.85 (:attr:`Graph.plain_tree`)."""

NVLINK_TYPE = "NVL"
"""``typeintra`` of a graph whose channels cross NVLink inside a node (topoPathTypeStr)."""


@dataclass(frozen=True)
class SearchedGraph:
    """One graph NCCL's search found: its id (:data:`GRAPH_IDS`), pattern, channels, speeds
    (GB/s per channel inside and across nodes), path types, and each channel's GPUs by rank
    (a graph dump lists them; a log's ``Pattern`` line does not)."""

    id: int
    pattern: int
    channels: int
    bw_intra_GBps: float
    bw_inter_GBps: float
    type_intra: str
    type_inter: str
    channel_ranks: tuple[tuple[int, ...], ...] = ()

    def graph(self) -> Graph:
        """As NCCL's cost model reads it (:class:`~simulator.model.nccl.Graph`)."""
        return Graph(self.channels, self.bw_intra_GBps, self.bw_inter_GBps,
                     Hardware.NVLINK if self.type_intra == NVLINK_TYPE else Hardware.PCI,
                     plain_tree=self.id == 1 and self.pattern == PLAIN_TREE)


@dataclass(frozen=True)
class Pick:
    """What NCCL ran for one collective call, as rank 0's ``NCCL_DEBUG_SUBSYS=TUNING`` line says
    it (src/enqueue.cc: ``AllReduce: 1048576 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..11}``):
    the collective (NCCL's name), its bytes, the algorithm and protocol, and its channels."""

    collective: str
    size_bytes: int
    algorithm: NcclAlgorithm
    protocol: Protocol
    channels: int


@dataclass(frozen=True)
class NcclView:
    """What a graph dump or a log says of a machine: the graphs NCCL searched, the rings it
    built (each a cycle of every rank, by channel), its trees (per channel, each rank's parent,
    -1 at a root, where the log printed them), and ``source``, the file read."""

    source: str
    graphs: tuple[SearchedGraph, ...]
    rings: tuple[tuple[int, ...], ...] = ()
    trees: tuple[tuple[tuple[int, int], ...], ...] = field(default=())
    """Per channel, (rank, parent) pairs as the log's ``Trees`` lines give them."""
    picks: tuple[Pick, ...] = ()
    """What NCCL ran per call, where the log has ``TUNING`` lines (rank 0's)."""
    tunings: tuple[Tuned, ...] = ()
    """What NCCL 2.31's cost model said per call (its ``Best tuning {`` lines, the first
    process's; :mod:`simulator.model.nccl_tuning_log`)."""

    def by_algorithm(self) -> dict[NcclAlgorithm, Graph]:
        """The cost model's graph per algorithm, for every graph with channels."""
        return {algorithm: searched.graph() for searched in self.graphs if searched.channels > 0
                for algorithm in GRAPH_IDS.get(searched.id, ())}


_PREFIX = r"^(?P<who>\S+ \[\d+\]) NCCL INFO "
_PATTERN = re.compile(_PREFIX + r"Pattern (?P<pattern>\d+), crossNic \d+, nChannels (?P<n>\d+), "
                      r"bw (?P<intra>[\d.]+)/(?P<inter>[\d.]+), type (?P<ti>\w+)/(?P<te>\w+), "
                      r"sameChannels \d+\s*$")
_CHANNEL = re.compile(_PREFIX + r"Channel (?P<c>\d+)/(?P<n>\d+) :(?P<ranks>(?:\s+\d+)+)\s*$")
_TREES = re.compile(_PREFIX + r"Trees(?P<trees>(?: \[\d+\] -?\d+/-?\d+/-?\d+->\d+->-?\d+)+)\s*$")
_TREE = re.compile(r"\[(\d+)\] (-?\d+)/(-?\d+)/(-?\d+)->(\d+)->(-?\d+)")
_RING = re.compile(_PREFIX + r"Ring (?P<c>\d+) : (?P<prev>\d+) -> (?P<rank>\d+) -> (?P<next>\d+)\s*$")
_PICK = re.compile(_PREFIX + r"(?P<func>\w+): (?P<bytes>\d+) Bytes -> Algo (?P<algo>\w+) proto "
                   r"(?P<proto>\w+) channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\}\s*$")


def read_log(path: Path) -> NcclView:
    """The view an ``NCCL_DEBUG=INFO`` log gives (``NCCL_DEBUG_SUBSYS`` including INIT and
    GRAPH, the defaults): its first process's ``Pattern`` lines in search order (Ring, Tree, the
    CollNet graphs where enabled, NVLS: src/init.cc), rank 0's ``Channel NN/MM`` rings, and every
    rank's ``Trees`` line. InputError naming the file and line where a line is malformed or
    the log holds none of them."""
    source = str(path)
    lines = read_text(path, "an NCCL_DEBUG=INFO log").splitlines()
    first: str | None = None
    searched: list[tuple[int, re.Match[str]]] = []
    rings: dict[int, tuple[int, ...]] = {}
    ring_count = 0
    parents: dict[int, dict[int, int]] = {}
    following: dict[int, dict[int, int]] = {}  # per channel, each rank's next (Ring lines)
    picks: list[Pick] = []
    tuning = TuningLines([])
    for number, line in enumerate(lines, 1):
        if "NCCL INFO" not in line:
            continue
        text = line.strip()
        if problem := control_problem(text):  # a NUL would hide the line from every pattern
            raise _error(source, number, problem)
        try:
            if tuning.take(text):
                continue
        except TuningLineError as error:
            raise _error(source, number, str(error)) from None
        if (found := _PICK.match(text)) is not None:
            algorithm = TUNING_ALGORITHMS.get(found["algo"])
            protocol = TUNING_PROTOCOLS.get(found["proto"])
            if algorithm is None or protocol is None:
                raise _error(source, number, f"expected an algorithm of "
                                             f"{', '.join(TUNING_ALGORITHMS)} and a protocol of "
                                             f"{', '.join(TUNING_PROTOCOLS)}, got "
                                             f"{found['algo']} {found['proto']}")
            low, high = (_channel(source, number, found[key], f"channel {name} of "
                                  "'channel{Lo..Hi}'", least=0) for key, name in (("lo", "Lo"),
                                                                                   ("hi", "Hi")))
            picks.append(Pick(found["func"], int(found["bytes"]), algorithm, protocol,
                              high - low + 1))
        elif (found := _RING.match(text)) is not None:
            following.setdefault(int(found["c"]), {})[int(found["rank"])] = int(found["next"])
        elif (found := _PATTERN.match(text)) is not None:
            first = first or found["who"]
            if found["who"] == first:
                searched.append((number, found))
        elif (found := _CHANNEL.match(text)) is not None:
            c = _channel(source, number, found["c"], "channel NN of 'Channel NN/MM'", least=0)
            ring_count = _channel(source, number, found["n"], "channel count MM of 'Channel NN/MM'")
            rings[c] = tuple(int(rank) for rank in found["ranks"].split())
        elif (found := _TREES.match(text)) is not None:
            for c, *_downs, rank, up in _TREE.findall(found["trees"]):
                parents.setdefault(int(c), {})[int(rank)] = int(up)
        elif " Pattern " in text or " Trees [" in text or re.search(r" Channel \d+/\d+ :", text):
            raise _error(source, number, f"expected NCCL's format ({_expected(text)}), got "
                                         f"{quoted(text[text.index('NCCL INFO') + 10:])}")
    if not rings and following:  # no rank 0 lines: every rank's Ring line, chained
        ring_count = len(following)
        rings = {c: _chained(source, c, following[c]) for c in following}
    if not searched and not rings and not picks and not tuning.tuned:
        raise _error(source, 0, "expected NCCL_DEBUG=INFO lines: 'Pattern ...' graphs, "
                                "'Channel NN/MM :' rings or TUNING picks; found none (was "
                                "NCCL_DEBUG=INFO set?)")
    if rings and sorted(rings) != list(range(ring_count)):
        raise _error(source, 0, f"expected {ring_count} rings 'Channel 00/{ring_count:02d}' to "
                                f"'Channel {ring_count - 1:02d}/{ring_count:02d}', got channels "
                                f"{sorted(rings)}")
    graphs = _identified(source, searched)
    trees = tuple(tuple(sorted(parents[c].items())) for c in sorted(parents))
    return NcclView(source, graphs, tuple(rings[c] for c in range(ring_count)), trees,
                    tuple(picks), tuple(tuning.tuned))


def _channel(source: str, number: int, digits: str, what: str, least: int = 1) -> int:
    """A channel's number or a count of channels on line ``number``: at most
    MAX_LOG_CHANNELS (NCCL runs at most MAXCHANNELS), so that nothing is made per channel for a
    count no NCCL prints; InputError naming the file, the line and the field otherwise."""
    value = int(digits) if len(digits) <= len(str(MAX_LOG_CHANNELS)) else None
    if value is None or not least <= value <= MAX_LOG_CHANNELS:
        shown = digits if len(digits) <= 20 else digits[:20] + "…"
        raise _error(source, number, f"expected the {what} to be from {least} to "
                                     f"{MAX_LOG_CHANNELS} (NCCL runs at most MAXCHANNELS, 64; "
                                     f"simulator/limits.py), got {shown}")
    return value


def _chained(source: str, channel: int, following: dict[int, int]) -> tuple[int, ...]:
    """Ring ``channel`` from every rank's ``Ring NN : prev -> rank -> next`` line: from rank 0,
    next after next, until it closes; InputError where it does not close over every rank."""
    ring = [0]
    while len(ring) <= len(following):
        after = following.get(ring[-1])
        if after is None or after == 0:
            break
        ring.append(after)
    if sorted(ring) != sorted(following) or following.get(ring[-1]) != 0:
        raise _error(source, 0, f"expected the 'Ring {channel:02d}' lines of every rank to close "
                                f"one ring, got {len(following)} ranks whose next from 0 goes "
                                f"{' -> '.join(str(r) for r in ring[:8])}")
    return tuple(ring)


def read_graph_dump(path: Path) -> NcclView:
    """The view ``NCCL_GRAPH_DUMP_FILE``'s XML gives: ``<graphs version>`` holding a ``<graph id
    pattern crossnic nchannels speedintra speedinter latencyinter typeintra typeinter
    samechannels>`` per graph, each ``<channel>`` listing its ``<gpu dev rank>`` in order (between
    ``<net dev>`` ends across nodes). The GPUs are those of one node (the dumping rank's): a
    ring's channel is that node's order, which every node follows with its own ranks (NCCL's
    ``sameChannels``). Read through :mod:`simulator.xmlsafe`; InputError naming the file, the
    element and its line."""
    source = str(path)
    root = read_xml(path, "NCCL_GRAPH_DUMP_FILE's XML")
    if root.tag != "graphs":
        raise _refused(source, root, f"expected <graphs> (NCCL_GRAPH_DUMP_FILE's root), got "
                                     f"<{root.tag}>")
    graphs = []
    for element in root.children:
        if element.tag != "graph":
            raise _refused(source, element, f"expected <graph> inside <graphs>, got "
                                             f"<{element.tag}>")
        graph_id = _number(source, element, "id", int)
        if graph_id not in GRAPH_IDS:
            raise _refused(source, element, f"expected a graph id of {sorted(GRAPH_IDS)} (0 Ring, "
                                             f"1 Tree, 2 CollNetChain, 3 NVLS, 4 CollNetDirect), "
                                             f"got {graph_id}")
        channels = []
        for channel in element.children:
            if channel.tag != "channel":
                raise _refused(source, channel, f"expected <channel> inside <graph>, got "
                                                f"<{channel.tag}>")
            for end in channel.children:
                if end.tag not in ("gpu", "net"):
                    raise _refused(source, end, f"expected <gpu> or <net> inside <channel>, got "
                                                f"<{end.tag}>")
            channels.append(tuple(_number(source, gpu, "rank", int)
                                  for gpu in channel.children if gpu.tag == "gpu"))
        nchannels = _number(source, element, "nchannels", int)
        if nchannels and len(channels) != nchannels:
            raise _refused(source, element, f"nchannels says {nchannels}, its <channel> elements "
                                             f"are {len(channels)}")
        graphs.append(SearchedGraph(
            graph_id, _number(source, element, "pattern", int), nchannels,
            _number(source, element, "speedintra", float),
            _number(source, element, "speedinter", float), _text(source, element, "typeintra"),
            _text(source, element, "typeinter"), tuple(channels)))
    if not graphs:
        raise _refused(source, root, "expected <graph> elements inside <graphs>, found none")
    return NcclView(source, tuple(graphs))


def _refused(source: str, element: XmlElement, message: str) -> InputError:
    return InputError([element.problem(source, message)])


def _text(source: str, element: XmlElement, key: str) -> str:
    """Attribute ``key`` of ``element``, required."""
    if key not in element.attrs:
        raise _refused(source, element, f"required attribute {quoted(key)} is missing")
    return element.attrs[key]


def _number(source: str, element: XmlElement, key: str, kind: type[int] | type[float]) -> Any:
    """Attribute ``key`` of ``element`` as a finite number at least 0."""
    text = _text(source, element, key)
    try:
        value = kind(text)
    except ValueError:
        raise _refused(source, element, f"expected {key} a {'whole ' if kind is int else ''}"
                                        f"number, got {quoted(text)}") from None
    if not (math.isfinite(value) and value >= 0):
        raise _refused(source, element, f"expected {key} a finite number at least 0, got "
                                        f"{quoted(text)}")
    return value


MAX_GRAPH_BANDWIDTH = 10_000.0
"""The most GB/s a searched graph's channel may say it carries: NCCL's search speeds top out
two orders of magnitude below (96 GB/s, ``sm100SpeedArrayInter``, src/graph/search.cc:1064 of
v2.30.7), so anything above is a damaged line, not a machine."""


def _bandwidth(source: str, number: int, text: str) -> float:
    """A Pattern line's ``bw`` figure as GB/s: finite, at most :data:`MAX_GRAPH_BANDWIDTH`
    (a 400-digit figure is refused, not read as infinity), quoted as an error quotes a value."""
    value = finite_in(text, 0, MAX_GRAPH_BANDWIDTH)
    if value is None:
        raise _error(source, number, f"expected bw in GB/s of at most "
                                     f"{MAX_GRAPH_BANDWIDTH:,.0f}, got {quoted(text)}")
    return value


def _identified(source: str, searched: list[tuple[int, re.Match[str]]]
                ) -> tuple[SearchedGraph, ...]:
    """The ``Pattern`` lines as graphs: the first is the ring's (pattern 4), the second the
    tree's, then CollNetChain's (pattern 3) and CollNetDirect's (6) where CollNet is enabled,
    and NVLS's (5), in the order src/init.cc searches them."""
    graphs = []
    for position, (number, found) in enumerate(searched):
        pattern = int(found["pattern"])
        if position == 0 and pattern != 4:
            raise _error(source, number, f"expected the ring's graph first (Pattern 4), got "
                                         f"Pattern {pattern}")
        graph_id = (0 if position == 0 else 1 if position == 1 else 3 if pattern == 5
                    else 4 if pattern == 6 else 2 if pattern == PLAIN_TREE else -1)
        if graph_id < 0:
            raise _error(source, number, f"expected a CollNet or NVLS graph after the tree's "
                                         f"(Pattern 3, 5 or 6), got Pattern {pattern}")
        intra, inter = (_bandwidth(source, number, found[key]) for key in ("intra", "inter"))
        graphs.append(SearchedGraph(graph_id, pattern, int(found["n"]), intra, inter,
                                    found["ti"], found["te"]))
    return tuple(graphs)


def _expected(text: str) -> str:
    if " Pattern " in text:
        return "'Pattern P, crossNic C, nChannels N, bw INTRA/INTER, type T/T, sameChannels S'"
    if " Trees [" in text:
        return "'Trees [c] d0/d1/d2->rank->up ...'"
    return "'Channel NN/MM : rank rank ...'"


def _error(source: str, line: int, message: str) -> InputError:
    return InputError([Problem(source, f"line {line}" if line else "", message)])


def rings_of(view: NcclView, layout: Layout) -> tuple[tuple[int, ...], ...]:
    """The view's rings over every rank of ``layout``: the log's as printed, or the graph dump's
    ring graph, whose channels list one node's GPUs, repeated on every node with its own ranks
    in the same local order, nodes in order (empty where neither says)."""
    if view.rings:
        return view.rings
    ring = next((graph for graph in view.graphs if graph.id == 0 and graph.channel_ranks), None)
    if ring is None:
        return ()
    hosts = layout.host_groups
    rings = []
    for channel in ring.channel_ranks:
        home = next((host for host in hosts if set(channel) == set(host)), None)
        if home is None:
            raise ValueError(f"ring channel {list(channel)} is not the ranks of one node of the "
                             f"topology's ({', '.join(str(list(h)) for h in hosts[:2])} ...)")
        local = [home.index(rank) for rank in channel]
        rings.append(tuple(host[i] for host in hosts for i in local))
    return tuple(rings)


def with_view(machine: Machine, view: NcclView, source: str, field_name: str) -> Machine:
    """``machine`` with NCCL's own view: the graphs its search found in place of those assumed
    (:attr:`NcclFacts.graphs <simulator.model.machine.NcclFacts>`) and its rings as the
    channels' orders (:attr:`Layout.rings <simulator.model.machine.Layout>`); InputError naming
    the scenario's field where the view does not fit the machine (rings of other ranks)."""
    try:
        rings = rings_of(view, machine.layout)
    except ValueError as error:
        raise InputError([Problem(source, field_name, f"{view.source}: {error}")]) from None
    everyone = set(range(machine.ranks))
    for c, ring in enumerate(rings):
        if len(ring) != machine.ranks or set(ring) != everyone:
            raise InputError([Problem(source, field_name, (
                f"{view.source}: ring {c} holds ranks {_span(ring)}, expected each of the "
                f"topology's {machine.ranks} ranks once (a log of this machine's job)"))])
    graphs = tuple(view.by_algorithm().items())
    return replace(machine, nccl=replace(machine.nccl, graphs=graphs),
                   layout=replace(machine.layout, rings=rings))


def _span(ranks: tuple[int, ...]) -> str:
    shown = ", ".join(str(rank) for rank in ranks[:8])
    return f"[{shown}{', ...' if len(ranks) > 8 else ''}] ({len(ranks)})"
