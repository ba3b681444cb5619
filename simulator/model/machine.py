"""The machine a collective runs on: where each rank sits, its GPU, the switches that reduce.

Built once per scenario from the topology graph (:meth:`Machine.of`); algorithms, closed forms
and the engine see this value, never the graph. Graph attribute names (``rank``, ``host``,
``reduction``, ``reduction_latency``) are read here and in the builders only.

Words: a **rank** is a participant 0..p-1; a **GPU** is the graph node a rank runs on
(:attr:`Machine.placement`); a **host** is the machine (server) a GPU sits in, numbered 0..N-1
(what cluster people call a "node"; the ``dgx`` builder's parameter is still ``nodes``); a
**grid** is the torus or mesh the ranks fill, where they do (graph attribute ``dims``), and a
**line** of it the ranks that differ in one coordinate only.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import networkx as nx
import numpy as np

from simulator.errors import AlgorithmError, quoted
from simulator.model.nccl import LATEST, CpuVendor, Graph, NcclAlgorithm, Version
from simulator.model.nccl_terms import AMD_ARCHS, Library
from simulator.model.routing import Route, Routing
from simulator.model.topology import GPU, SWITCH, torus_coords
from simulator.model.transport import Transport

Bytes = TypeVar("Bytes", float, np.ndarray)
"""One size in bytes, or an array of them."""


@dataclass(frozen=True)
class GpuSpec:
    """A GPU's reducer, what combines a received span into its buffer, one reduction at a time,
    first come first served (docs/design.md §1, "Words": not an engine, which is what simulates
    a point): ``reduce_bandwidth_Bps`` (None = free) and a launch latency."""

    reduce_bandwidth_Bps: float | None = None
    launch_latency_s: float = 0.0

    def reduce_s(self, size_bytes: Bytes) -> Bytes:
        """Time to reduce ``size_bytes`` into a buffer: ``launch + size·gamma`` (0 when unset);
        element-wise for an array of sizes."""
        gamma = 0.0 if self.reduce_bandwidth_Bps is None else 1.0 / self.reduce_bandwidth_Bps
        return self.launch_latency_s + size_bytes * gamma


@dataclass(frozen=True)
class Grid:
    """Ranks that fill a torus or mesh of ``dims``: rank r sits in cell ``cells[r]``, the cell's
    number in row-major order (the last dimension fastest, as
    :func:`~simulator.model.topology.torus_coords`). On the whole machine rank r is in cell r;
    a group that takes every rank in another order (a channel's) keeps the grid, renumbered.

    >>> Grid((2, 3), tuple(range(6))).line(4, 1)
    (3, 4, 5)
    """

    dims: tuple[int, ...]
    cells: tuple[int, ...]

    def __post_init__(self) -> None:
        if sorted(self.cells) != list(range(math.prod(self.dims))):
            raise ValueError(f"a grid of {self.dims} needs one rank in each of its "
                             f"{math.prod(self.dims)} cells, got cells {self.cells}")

    @staticmethod
    def whole(dims: Sequence[int]) -> Grid:
        """Ranks 0..p-1 in cells 0..p-1 of a grid of ``dims``."""
        return Grid(tuple(dims), tuple(range(math.prod(dims))))

    @functools.cached_property
    def _ranks(self) -> np.ndarray:
        """The rank in every cell, an array of shape ``dims`` (built once)."""
        ranks = np.empty(len(self.cells), dtype=np.int64)
        ranks[list(self.cells)] = np.arange(len(self.cells), dtype=np.int64)
        return ranks.reshape(self.dims)

    def line(self, rank: int, dim: int) -> tuple[int, ...]:
        """The ranks on ``rank``'s line along dimension ``dim`` (0 the first): those whose
        coordinates differ from its own in coordinate ``dim`` alone, ``rank`` among them, in the
        order of that coordinate."""
        at: list[int | slice] = list(torus_coords(self.cells[rank], self.dims))
        at[dim] = slice(None)
        return tuple(int(r) for r in self._ranks[tuple(at)])

    def lines(self, dim: int) -> np.ndarray:
        """Every line along dimension ``dim``, one a row (each as :meth:`line` orders it), the
        rows in row-major order of the other coordinates."""
        lines: np.ndarray = np.moveaxis(self._ranks, dim, -1).reshape(-1, self.dims[dim])
        return lines

    def subgroup(self, members: Sequence[int]) -> Grid | None:
        """The grid seen by a subgroup (members numbered 0..len-1 in the given order): the same
        grid where the members are every rank, in any order; None for any other subgroup, which
        fills no grid."""
        if len(members) != len(self.cells) or set(members) != set(range(len(self.cells))):
            return None
        return Grid(self.dims, tuple(self.cells[m] for m in members))


@dataclass(frozen=True)
class Layout:
    """Where ranks sit: the host of each rank (flat topologies have a single host), and the
    grid they fill on a torus or mesh (None elsewhere)."""

    hosts: tuple[int, ...]
    grid: Grid | None = None
    rings: tuple[tuple[int, ...], ...] = ()
    """NCCL's rings where its log gave them (:mod:`simulator.model.nccl_view`), each a cycle of
    every rank, by channel; empty: the rotated host order of :meth:`channel_order`."""

    @property
    def dims(self) -> tuple[int, ...]:
        """The dimensions of the torus or mesh the ranks fill; () where they fill none."""
        return () if self.grid is None else self.grid.dims

    def line(self, rank: int, dim: int) -> tuple[int, ...]:
        """The ranks on ``rank``'s line along dimension ``dim`` of the grid, in coordinate order
        (:meth:`Grid.line`); ValueError where the ranks fill no grid."""
        if self.grid is None:
            raise ValueError("these ranks fill no torus or mesh: they have no lines")
        return self.grid.line(rank, dim)

    @functools.cached_property
    def _by_host(self) -> dict[int, tuple[int, ...]]:
        """The ranks of every host, hosts in order, ranks in rank order (built once)."""
        by_host: dict[int, list[int]] = {}
        for rank, host in enumerate(self.hosts):
            by_host.setdefault(host, []).append(rank)
        return {host: tuple(by_host[host]) for host in sorted(by_host)}

    @property
    def host_groups(self) -> tuple[tuple[int, ...], ...]:
        """Every host's ranks, hosts in order (by host number), each host's ranks in rank order."""
        return tuple(self._by_host.values())

    def host_ranks(self, rank: int) -> tuple[int, ...]:
        """The ranks on ``rank``'s host, in rank order."""
        return self._by_host[self.hosts[rank]]

    def rail(self, rank: int) -> tuple[int, ...]:
        """One rank per host, each with the same local index as ``rank`` on its host."""
        local = self.host_ranks(rank).index(rank)
        return tuple(ranks[local] for ranks in self._by_host.values() if local < len(ranks))

    def channel_order(self, channel: int) -> tuple[int, ...]:
        """Every rank, hosts in order, each host's ranks rotated left by ``channel``: the order
        of NCCL's channel ``channel``, whose ring or tree enters and leaves each host through
        other GPUs (and so other NICs, one rail each) than channel 0's. Where NCCL's log gave
        its rings, channel c's is ring c (modulo their number) instead."""
        if self.rings:
            return self.rings[channel % len(self.rings)]
        return self.assumed_order(channel)

    def assumed_order(self, channel: int) -> tuple[int, ...]:
        """:meth:`channel_order` as assumed without NCCL's rings: hosts in order, each host's
        ranks rotated left by ``channel``."""
        order: list[int] = []
        for ranks in self._by_host.values():
            shift = channel % len(ranks)
            order.extend(ranks[shift:] + ranks[:shift])
        return tuple(order)

    def subgroup(self, members: Sequence[int]) -> Layout:
        """The layout of a subgroup (members numbered 0..len-1 in the given order); it keeps the
        grid only where the members are every rank (:meth:`Grid.subgroup`)."""
        return Layout(tuple(self.hosts[m] for m in members),
                      None if self.grid is None else self.grid.subgroup(members))

    @property
    def host_count(self) -> int:
        """How many hosts the ranks span."""
        return len(self._by_host)

    @property
    def ranks_per_host(self) -> frozenset[int]:
        """The distinct numbers of ranks per host (one value when every host has as many)."""
        return frozenset(len(ranks) for ranks in self._by_host.values())


@dataclass(frozen=True)
class ReducingSwitch:
    """A switch that reduces in its datapath: its node, its fixed reduction latency, the GPUs
    whose contributions it takes, its tier, and whether it is a network switch. A switch GPUs
    are cabled to (an NVSwitch: NVLink SHARP) takes those cabled to it in both directions; a
    network switch (InfiniBand SHARP) those whose own NIC (a GPU node's ``nic``) is cabled to
    it, as NCCL's CollNet enters the network by each GPU's NIC."""

    name: str
    reduction_latency_s: float
    gpus: frozenset[str]
    tier: int = 0
    network: bool = False
    up: tuple[str, ...] = ()
    """The reducing switches of a higher tier cabled to this one both ways (a leaf's spines),
    where a reduction over several of these switches sends its partial sums."""


@dataclass(frozen=True)
class Aggregation:
    """An in-switch reduction's tree of switches, as InfiniBand SHARP aggregates across a fabric:
    ``switch`` sums what its ``children`` send up, in their order (global ranks, or the trees
    below it), then sends the sum up to its parent, or at the root back down the tree. A
    reduction within one switch is a tree of one switch whose children are the ranks."""

    switch: ReducingSwitch
    children: tuple[int | Aggregation, ...]

    @property
    def ranks(self) -> tuple[int, ...]:
        """The ranks under this switch, in the order the tree sums them."""
        return tuple(rank for child in self.children
                     for rank in ((child,) if isinstance(child, int) else child.ranks))

    def walk(self) -> list[tuple[Aggregation, Aggregation | None]]:
        """Every switch of the tree with its parent (None at the root), breadth first, each
        switch's children in their order."""
        nodes: list[tuple[Aggregation, Aggregation | None]] = [(self, None)]
        for node, _ in nodes:  # grows as it goes: breadth first
            nodes.extend((child, node) for child in node.children
                         if isinstance(child, Aggregation))
        return nodes

    def leaves(self) -> dict[int, Aggregation]:
        """The switch each rank enters the tree by."""
        return {rank: node for node, _ in self.walk() for rank in node.children
                if isinstance(rank, int)}

    @property
    def depth(self) -> int:
        """Switches from a rank's up to the root, this one included: 1 for one switch."""
        return 1 + max((child.depth for child in self.children if isinstance(child, Aggregation)),
                       default=0)


def _no_switch(ranks: Sequence[int], name: str) -> AlgorithmError:
    """The error, the same for both engines, where no switch reduces for ``ranks``."""
    return AlgorithmError(f"{name}: ranks {list(ranks)} share no switch that reduces (a switch "
                          "node with reduction: true)")


def _reducing(graph: nx.DiGraph, node: str, placement: Sequence[str]) -> ReducingSwitch:
    """The :class:`ReducingSwitch` of switch ``node``: the GPUs of ``placement`` cabled to it
    both ways, or, where none is (a network switch), those whose NIC is."""
    data = graph.nodes[node]

    def cabled(other: object) -> bool:
        return other is not None and graph.has_edge(other, node) and graph.has_edge(node, other)

    gpus = frozenset(g for g in placement if cabled(g))
    network = not gpus
    if network:
        gpus = frozenset(g for g in placement if cabled(graph.nodes[g].get("nic")))
    tier = int(data.get("tier", 0))
    up = tuple(sorted(other for other in graph.succ[node] if cabled(other)
                      and graph.nodes[other].get("kind") == SWITCH
                      and graph.nodes[other].get("reduction")
                      and int(graph.nodes[other].get("tier", 0)) > tier))
    return ReducingSwitch(node, float(data.get("reduction_latency", 0.0)), gpus, tier, network,
                          up)


@dataclass(frozen=True)
class NcclFacts:
    """What NCCL achieves on a machine, as measured or fitted (0: let the NCCL execution model
    derive it): the NVLink rate per GPU and direction, the rate of NVLS, and a launch latency
    beyond NCCL's base latency; and what NCCL's model reads of the hosts and the fabric: the
    network's transport and the host CPU's vendor (its network overhead, its LL cap); and, as
    fitted to a multi-node log, the rate NCCL achieves per NIC and a latency per network step
    beyond NCCL's and the transport's (0: derive, none); and which NCCL's tuner picks (a
    scenario's ``nccl.version``); and how many GPUs one thread launches it on."""

    nvlink_Bps: float = 0.0
    nvls_Bps: float = 0.0
    launch_s: float = 0.0
    transport: Transport = Transport.IB
    cpu: CpuVendor = CpuVendor.INTEL
    net_Bps: float = 0.0
    net_latency_s: float = 0.0
    version: Version = LATEST
    graphs: tuple[tuple[NcclAlgorithm, Graph], ...] = ()
    """The graphs NCCL's search found here, where its graph dump or log says
    (:mod:`simulator.model.nccl_view`); empty: those :data:`~simulator.model.nccl.DEFAULT_GRAPHS`
    assumes."""
    gpus_per_thread: int = 1
    """How many GPUs one thread launches the collective on (a scenario's
    ``nccl.gpus_per_thread``, nccl-tests' ``-g``): each beyond the first delays its end by a
    launch (:mod:`simulator.model.launch`)."""


@dataclass(frozen=True)
class CapacityEvent:
    """From ``at_s`` on, directed link ``link`` (from node, to node) carries ``factor`` times its
    nominal bandwidth (the graph's): 0.5 halves it, 1 restores it, 0 stops it for a while (the
    flows crossing it wait, keeping their route and the bytes they moved, until a later event
    gives it capacity again, which :class:`Machine` requires; a link that fails for good is an
    :class:`Outage`). A link's capacity is thus a step function of time, which both engines
    apply at its instants (:class:`simulator.engine.kernel.CapacityTimeline`); the closed forms
    see the nominal graph.

    >>> CapacityEvent(("gpu0", "sw"), 1e-3, 0.5).factor
    0.5
    """

    link: tuple[str, str]
    at_s: float
    factor: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.at_s) and self.at_s >= 0):
            raise ValueError(f"a capacity event's time must be finite and at least 0, got "
                             f"{quoted(self.at_s)}")
        if not (math.isfinite(self.factor) and self.factor >= 0):
            raise ValueError(f"a capacity event's factor must be finite and at least 0, got "
                             f"{quoted(self.factor)}")


@dataclass(frozen=True)
class Outage:
    """From ``at_s`` on, directed link ``link`` carries nothing: the flows that cross it are
    re-routed over what remains (:meth:`~simulator.model.routing.Routing.rerouted`), their
    bytes already sent kept, and no later message takes it. Both engines apply it at its
    instant; the closed forms see the healthy graph.

    >>> Outage(("leaf0", "spine0"), 1e-5).at_s
    1e-05
    """

    link: tuple[str, str]
    at_s: float

    def __post_init__(self) -> None:
        if not (math.isfinite(self.at_s) and self.at_s >= 0):
            raise ValueError(f"an outage's time must be finite and at least 0, got "
                             f"{quoted(self.at_s)}")


def _check_stops_end(events: Sequence[CapacityEvent]) -> None:
    """ValueError where a link's last capacity event (the last listed among those at its
    time, as :class:`~simulator.engine.kernel.CapacityTimeline` applies them) leaves it at 0:
    its flows would wait for ever."""
    if all(event.factor for event in events):
        return
    last: dict[tuple[str, str], CapacityEvent] = {}
    for event in events:
        if event.link not in last or event.at_s >= last[event.link].at_s:
            last[event.link] = event
    for link, event in last.items():
        if not event.factor:
            raise ValueError(f"capacity event on {link[0]}->{link[1]}: it carries nothing from "
                             f"{quoted(event.at_s)} s on; a later event must restore it (a link that "
                             "fails for good is an Outage)")


@dataclass(frozen=True)
class Machine:
    """Ranks placed on a topology: the GPU node of each rank, their hosts, the GPU's reduction
    engine, the routes between nodes and the switches that can reduce."""

    placement: tuple[str, ...]
    layout: Layout
    gpu: GpuSpec
    routing: Routing
    reducing_switches: tuple[ReducingSwitch, ...] = ()
    compute_capability: int = 0
    """The GPUs' compute capability (e.g. 90 for H100); 0 when the topology does not say."""
    nvlinks: int = 0
    """NVLink links per GPU; 0 when the topology does not say."""
    nccl: NcclFacts = NcclFacts()
    """What NCCL achieves here, where the topology states it (calibrated presets do)."""
    capacity_events: tuple[CapacityEvent, ...] = ()
    """Changes of link capacity over the run, in any order (none: every link keeps its
    bandwidth); each names a link of the topology."""
    outages: tuple[Outage, ...] = ()
    """Links that fail during the run, in any order (none: no link fails); each names a link
    of the topology."""
    entry_s: tuple[float, ...] = ()
    """When each rank enters the collective (none: every rank at 0; a straggler later,
    :mod:`simulator.model.faults`): it posts nothing and takes no message before."""
    gpus: tuple[GpuSpec, ...] = ()
    """Each rank's GPU where some differ from ``gpu`` (a slow GPU; none: every rank's is
    ``gpu``)."""

    def __post_init__(self) -> None:
        for name in ("entry_s", "gpus"):
            if getattr(self, name) and len(getattr(self, name)) != len(self.placement):
                raise ValueError(f"{name}: expected one entry per rank ({len(self.placement)}), "
                                 f"got {len(getattr(self, name))}")
        if self.capacity_events or self.outages:
            links = self.routing.capacities()
            events: tuple[CapacityEvent | Outage, ...] = (*self.capacity_events, *self.outages)
            for event in events:
                if event.link not in links:
                    what = "outage" if isinstance(event, Outage) else "capacity event"
                    raise ValueError(f"{what} on {event.link[0]}->{event.link[1]}: the "
                                     "topology has no such link")
            _check_stops_end(self.capacity_events)

    @classmethod
    def of(cls, graph: nx.DiGraph, gpu: GpuSpec = GpuSpec()) -> Machine:
        """The machine of a topology graph, rank r on the GPU node whose ``rank`` is r.

        >>> from simulator.model.topology import switch
        >>> Machine.of(switch(3, 1e9, 0.0)).placement
        ('gpu0', 'gpu1', 'gpu2')
        """
        by_rank = {data["rank"]: node for node, data in graph.nodes(data=True)
                   if data.get("kind") == GPU}
        if sorted(by_rank) != list(range(len(by_rank))):
            raise ValueError(f"GPU ranks must be 0..p-1, got {sorted(by_rank)}")
        placement = tuple(by_rank[r] for r in range(len(by_rank)))
        hosts = tuple(int(graph.nodes[gpu_node].get("host", 0)) for gpu_node in placement)
        dims = tuple(int(size) for size in graph.graph.get("dims", ()))
        if dims and math.prod(dims) != len(placement):
            raise ValueError(f"a grid of dims {dims} holds {math.prod(dims)} GPUs, got "
                             f"{len(placement)}")
        grid = Grid.whole(dims) if dims else None
        switches = tuple(sorted(
            (_reducing(graph, node, placement) for node, data in graph.nodes(data=True)
             if data.get("kind") == SWITCH and data.get("reduction")),
            key=lambda switch: (switch.tier, switch.name)))
        facts = NcclFacts(float(graph.graph.get("nccl_nvlink_bandwidth", 0.0)),
                          float(graph.graph.get("nccl_nvls_bandwidth", 0.0)),
                          float(graph.graph.get("nccl_launch_latency", 0.0)),
                          Transport(graph.graph.get("transport", Transport.IB.value)),
                          CpuVendor(graph.graph.get("cpu", CpuVendor.INTEL.value)),
                          float(graph.graph.get("nccl_net_bandwidth", 0.0)),
                          float(graph.graph.get("nccl_net_latency", 0.0)))
        return cls(placement, Layout(hosts, grid), gpu, Routing(graph), switches,
                   int(graph.graph.get("compute_capability", 0)), int(graph.graph.get("nvlinks", 0)),
                   facts)

    @property
    def ranks(self) -> int:
        """How many ranks take part."""
        return len(self.placement)

    @property
    def library(self) -> Library:
        """The collective library the GPUs run: RCCL on AMD Instinct (compute capability 942,
        gfx942), NCCL on any other (issue 38)."""
        amd = {arch.value for arch in AMD_ARCHS}
        return Library.RCCL if self.compute_capability in amd else Library.NCCL

    def gpu_of(self, rank: int) -> GpuSpec:
        """Rank ``rank``'s GPU."""
        return self.gpus[rank] if self.gpus else self.gpu

    def entry_of(self, rank: int) -> float:
        """When rank ``rank`` enters the collective."""
        return self.entry_s[rank] if self.entry_s else 0.0

    def route(self, a: int, b: int) -> Route:
        """The route from rank ``a``'s GPU to rank ``b``'s."""
        return self.routing.route(self.placement[a], self.placement[b])

    def reducing_switch(self, ranks: Sequence[int] | None = None) -> ReducingSwitch | None:
        """The first switch (lowest tier, then by name) that reduces and takes the
        contributions of every one of ``ranks`` (all ranks when None), if any."""
        gpus = {self.placement[r] for r in (range(self.ranks) if ranks is None else ranks)}
        return next((s for s in self.reducing_switches if gpus <= s.gpus), None)

    def sharp_unsupported(self) -> str | None:
        """Why the network cannot sum across this machine's hosts in its switches (InfiniBand
        SHARP, for NCCL's CollNet), or None when it can: the ranks must span several hosts of
        equally many GPUs, and the h-th GPUs of every host (a rail) must reach, by their NICs,
        network switches that reduce up to one joining them (:meth:`aggregation`)."""
        layout = self.layout
        if layout.host_count < 2:
            return ("it needs GPUs on two or more hosts (CollNet sums across hosts in the "
                    "network), such as dgx_h100 with nodes ≥ 2")
        if len(layout.ranks_per_host) > 1:
            return "it needs the same number of GPUs on every host"
        for rank in layout.host_groups[0]:
            rail = layout.rail(rank)
            tree = self.aggregation(rail)
            if tree is None or not tree.switch.network:
                return ("it needs network switches that reduce (sharp: true on the topology, "
                        "InfiniBand SHARP) from the NICs of the h-th GPU of every host up to "
                        f"one that joins them; none does for ranks {list(rail)}")
        return None

    def aggregation(self, ranks: Sequence[int]) -> Aggregation | None:
        """The switches that reduce for ``ranks``, as a tree (None: none can): the one switch
        of :meth:`reducing_switch`, or where none takes them all, the network switch each rank
        enters by its NIC (its leaf), then level by level the first switch (lowest tier, then
        by name) cabled above every switch of the level, or else above each (a pod's spine),
        as SHARP's aggregation tree climbs a Clos fabric to the lowest tier joining them."""
        single = self.reducing_switch(ranks)
        if single is not None:
            return Aggregation(single, tuple(ranks))
        leaves: dict[str, list[int]] = {}
        by_name = {switch.name: switch for switch in self.reducing_switches}
        for rank in ranks:
            leaf = next((switch for switch in self.reducing_switches
                         if switch.network and self.placement[rank] in switch.gpus), None)
            if leaf is None:
                return None
            leaves.setdefault(leaf.name, []).append(rank)
        level = [Aggregation(by_name[leaf], tuple(members)) for leaf, members in leaves.items()]

        def first(names: set[str] | tuple[str, ...]) -> str:
            """The switch of the lowest tier, then the first by name."""
            return min(names, key=lambda name: (by_name[name].tier, name))

        while len(level) > 1:
            common = set.intersection(*(set(node.switch.up) for node in level))
            if common:
                return Aggregation(by_name[first(common)], tuple(level))
            if any(not node.switch.up for node in level):
                return None
            parents: dict[str, list[int | Aggregation]] = {}
            for node in level:
                parents.setdefault(first(node.switch.up), []).append(node)
            level = [Aggregation(by_name[parent], tuple(children))
                     for parent, children in parents.items()]
        return level[0]

    def aggregation_for(self, ranks: Sequence[int], name: str) -> Aggregation:
        """:meth:`aggregation` of ``ranks`` for an in-switch reduction of algorithm ``name``;
        AlgorithmError, the same for both engines, where no switch reduces for them."""
        tree = self.aggregation(ranks)
        if tree is None:
            raise _no_switch(ranks, name)
        return tree

    def switch_for(self, ranks: Sequence[int], name: str) -> ReducingSwitch:
        """:meth:`reducing_switch` of ``ranks`` for an in-switch reduction of algorithm ``name``;
        AlgorithmError, the same for both engines, where none is cabled to all of them."""
        switch = self.reducing_switch(ranks)
        if switch is None:
            raise _no_switch(ranks, name)
        return switch

    def subgroup(self, ranks: Sequence[int]) -> Machine:
        """The same machine seen by a subgroup (ranks renumbered 0..len-1 in the given order)."""
        return replace(self, placement=tuple(self.placement[r] for r in ranks),
                       layout=self.layout.subgroup(ranks))
