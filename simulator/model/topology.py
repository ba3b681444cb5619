"""Topology builders: plain functions that return an annotated ``networkx.DiGraph``.

Every full-duplex cable is two directed edges, each with its own ``bandwidth`` (bytes/s) and
``latency`` (s). Nodes carry ``kind`` (``gpu``, ``nic`` or ``switch``); GPUs carry their ``rank``
and, on multi-node topologies, the ``host`` (machine) they sit in; switches carry their ``tier``
(0 inside a host: NVSwitch, PCIe switch; 1 leaf, edge or router; 2 spine or aggregation; 3
core). Any node may carry a per-message ``latency`` (s) that every transfer crossing it pays
once (e.g. a NIC's processing time). The small builders are here; the Clos fabrics (leaf/spine,
fat-tree, GPU clusters) in :mod:`.clos`, the dragonfly in :mod:`.dragonfly`, the DGX-1's
NVLink cube-mesh in :mod:`.dgx1`. Builders are
registered by name in :data:`BUILDERS`; each parameter's kind (a count, a bandwidth, ...) is
read off the builder's type annotations and its optional parameters off its
defaults, and each registration says how many GPUs the parameters make, so scenario files are
validated, rank limits included, before anything is built. Adding a topology = one builder
function + one :class:`Builder` line; a builder that knows its shortest paths attaches them
(graph attribute ``paths``, :class:`~simulator.model.routing.Paths`) so that routes on large
fabrics need no graph search.

>>> g = switch(ranks=4, bandwidth=25e9, latency=500e-9)
>>> sorted(g.nodes(data="rank"))[:2]
[('gpu0', 0), ('gpu1', 1)]
>>> g.edges["gpu0", "switch"]["bandwidth"]
25000000000.0
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields, is_dataclass
from typing import Annotated, Any, TypeGuard, get_args, get_origin, get_type_hints

import networkx as nx

from simulator.limits import MAX_FULLY_CONNECTED, MAX_RANKS
from simulator.model.clos import (
    cluster,
    cluster_problems,
    fat_tree,
    fat_tree_problems,
    leaf_spine,
    leaf_spine_problems,
)
from simulator.model.dgx1 import dgx1, dgx1_problems, dgx1_ranks
from simulator.model.dragonfly import dragonfly, dragonfly_problems
from simulator.model.graphfile import graph, graph_problems, graph_ranks
from simulator.model.ncclgraph import nccl_xml, nccl_xml_problems, nccl_xml_ranks
from simulator.model.parts import (
    GPU,
    HOST_DEFAULTS,
    NET_LINK,
    NIC,
    NVLINK,
    PCIE,
    SWITCH,
    Bandwidth,
    Count,
    Counts,
    File,
    Flag,
    HostParams,
    Param,
    ParamValue,
    Ratio,
    Seed,
    Time,
    cable,
)
from simulator.model.xgmi import xgmi, xgmi_problems

__all__ = [
    "BUILDERS",
    "GPU",
    "NET_LINK",
    "NIC",
    "NVLINK",
    "PCIE",
    "SWITCH",
    "Bandwidth",
    "Builder",
    "Count",
    "Counts",
    "File",
    "Flag",
    "HostParams",
    "Param",
    "ParamValue",
    "Ratio",
    "Seed",
    "Time",
    "cluster",
    "dgx",
    "dgx1",
    "dragonfly",
    "fat_tree",
    "fully_connected",
    "graph",
    "leaf_spine",
    "mesh",
    "nccl_xml",
    "ring",
    "switch",
    "torus",
]

@dataclass(frozen=True)
class StarPaths:
    """Routes of :func:`switch`: GPU, switch, GPU (the only path between two GPUs)."""

    def __call__(self, src: str, dst: str) -> Sequence[tuple[str, ...]] | None:
        if src.startswith("gpu") and dst.startswith("gpu") and src != dst:
            return [(src, "switch", dst)]
        return None


@dataclass(frozen=True)
class RingPaths:
    """Routes of :func:`ring`: the clockwise and the counter-clockwise way round (a route is
    the shorter of the two by latency, then hops, then names, as the search would find)."""

    ranks: int

    def __call__(self, src: str, dst: str) -> Sequence[tuple[str, ...]] | None:
        if not (src.startswith("gpu") and dst.startswith("gpu")) or src == dst:
            return None
        a, b, p = int(src[3:]), int(dst[3:]), self.ranks
        forward = tuple(f"gpu{(a + i) % p}" for i in range((b - a) % p + 1))
        backward = tuple(f"gpu{(a - i) % p}" for i in range((a - b) % p + 1))
        return [forward, backward]


@dataclass(frozen=True)
class DgxPaths:
    """Routes of :func:`dgx` between two GPUs: on one host through the NVSwitch, or out through
    the source's own NIC, the leaf switch and the destination's NIC (the only candidates: any
    other path adds NVLink and PCIe hops to one of these, and latencies are non-negative)."""

    def __call__(self, src: str, dst: str) -> Sequence[tuple[str, ...]] | None:
        a, b = src.split("."), dst.split(".")
        if (src == dst or len(a) != 2 or len(b) != 2
                or not (a[1].startswith("gpu") and b[1].startswith("gpu"))):
            return None
        network = (src, f"{a[0]}.nic{a[1][3:]}", "leaf", f"{b[0]}.nic{b[1][3:]}", dst)
        if a[0] == b[0]:
            return [(src, f"{a[0]}.nvswitch", dst), network]
        return [network]


def _gpus(graph: nx.DiGraph, ranks: int) -> list[str]:
    names = [f"gpu{r}" for r in range(ranks)]
    for rank, name in enumerate(names):
        graph.add_node(name, kind=GPU, rank=rank)
    return names


def switch(ranks: Count, bandwidth: Bandwidth, latency: Time) -> nx.DiGraph:
    """``ranks`` GPUs, each on its own full-duplex link to one non-blocking switch.

    A rank-to-rank route is two hops (GPU → switch → GPU).

    >>> switch(3, 25e9, 1e-6).number_of_edges()
    6
    """
    graph = nx.DiGraph(name=f"switch({ranks})", paths=StarPaths())
    graph.add_node("switch", kind=SWITCH, tier=1)
    for gpu in _gpus(graph, ranks):
        cable(graph, gpu, "switch", bandwidth, latency)
    return graph


def ring(ranks: Count, bandwidth: Bandwidth, latency: Time) -> nx.DiGraph:
    """``ranks`` GPUs, GPU i cabled to GPU (i+1) mod ranks.

    With two ranks the ring is a single cable (a DiGraph holds one edge per direction).

    >>> sorted(ring(4, 25e9, 1e-6).successors("gpu0"))
    ['gpu1', 'gpu3']
    """
    graph = nx.DiGraph(name=f"ring({ranks})", paths=RingPaths(ranks))
    gpus = _gpus(graph, ranks)
    if ranks > 1:
        for i, gpu in enumerate(gpus):
            cable(graph, gpu, gpus[(i + 1) % ranks], bandwidth, latency)
    return graph


def fully_connected(ranks: Count, bandwidth: Bandwidth, latency: Time) -> nx.DiGraph:
    """``ranks`` GPUs with a cable between every pair.

    >>> fully_connected(4, 25e9, 1e-6).number_of_edges()
    12
    """
    graph = nx.DiGraph(name=f"fully_connected({ranks})")
    gpus = _gpus(graph, ranks)
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            cable(graph, a, b, bandwidth, latency)
    return graph


def dgx(
    nodes: Count,
    gpus_per_node: Count,
    nvlink_bandwidth: Bandwidth,
    nvlink_latency: Time,
    pcie_bandwidth: Bandwidth,
    pcie_latency: Time,
    nic_bandwidth: Bandwidth,
    nic_latency: Time,
    hosts: HostParams = HOST_DEFAULTS,
) -> nx.DiGraph:
    """``nodes`` DGX-style machines joined by one leaf switch.

    In each machine ``gpus_per_node`` GPUs sit on one non-blocking NVSwitch (a GPU's link to it
    carries the GPU's whole NVLink bandwidth), and each GPU has its own NIC over PCIe. Every NIC is
    cabled to a single non-blocking leaf switch (a rail-optimised fabric collapsed into one
    switch). Rank = node × gpus_per_node + local index; GPUs carry ``host`` = node index.
    ``hosts`` holds the rest (:class:`~simulator.model.parts.HostParams`, flat parameters of a
    scenario file): ``nic_message_latency`` is a per-message cost paid by every transfer
    crossing a NIC. ``nvswitch_reduction`` marks the NVSwitches as able to reduce in the switch
    (NVLink SHARP, node attribute ``reduction``), which the ``nvls`` algorithm needs; each
    in-switch reduction then waits ``nvswitch_reduction_latency`` (node attribute
    ``reduction_latency``) before its result is multicast. ``compute_capability`` (e.g. 90 for
    H100) and ``nvlinks`` (NVLink links per GPU) say what the NCCL execution model needs to know
    of the GPUs (graph attributes of the same names; 0: not stated). The ``nccl_*`` parameters
    override what that model derives (0: derive): the NVLink rate NCCL achieves per GPU, the
    rate of NVLS, and a launch latency added to NCCL's base latency; ``python -m simulator
    calibrate`` fits them to measurements. ``transport`` (``ib``, ``roce``, ``tcp``, ``tcpxo``,
    ``efa``) and ``cpu`` (``intel``, ``amd``) are the network's transport and the hosts' CPU vendor,
    which set the network's per-message costs under ``execution: nccl`` (graph attributes of the
    same names; :mod:`~simulator.model.transport`); ``nccl_net_bandwidth`` (the rate NCCL
    achieves per NIC, 0: derived) and ``nccl_net_latency`` (a latency per network step beyond
    NCCL's and the transport's) are what ``calibrate --nodes`` fits to a multi-node log.
    ``sharp`` makes the leaf reduce in the switch (InfiniBand SHARP, which NCCL's CollNet
    algorithms need), each reduction waiting ``sharp_latency``; a GPU's node names its NIC
    (attribute ``nic``), the port its in-network reductions enter by.

    >>> g = dgx(2, 8, 450e9, 3e-7, 64e9, 3.5e-7, 50e9, 1e-6, HostParams(compute_capability=90))
    >>> g.nodes["n1.gpu0"]["rank"], g.nodes["n1.gpu0"]["host"], g.graph["compute_capability"]
    (8, 1, 90)
    """
    graph = nx.DiGraph(name=f"dgx({nodes}x{gpus_per_node})", paths=DgxPaths(),
                       **hosts.graph_attributes())
    hosts.add_network_switch(graph, "leaf", 1)
    for host in range(nodes):
        nvswitch = hosts.add_nvswitch(graph, host)
        for local in range(gpus_per_node):
            gpu, nic = f"n{host}.gpu{local}", f"n{host}.nic{local}"
            graph.add_node(gpu, kind=GPU, rank=host * gpus_per_node + local, host=host, nic=nic)
            hosts.add_nic(graph, nic)
            cable(graph, gpu, nvswitch, nvlink_bandwidth, nvlink_latency, NVLINK)
            cable(graph, gpu, nic, pcie_bandwidth, pcie_latency, PCIE)
            cable(graph, nic, "leaf", nic_bandwidth, nic_latency, NET_LINK)
    return graph


@dataclass(frozen=True)
class GridPaths:
    """Routes of :func:`torus` and :func:`mesh`: dimension-order routing, as such networks
    route (TPU pods, Blue Gene): each dimension in turn, first to last; on a torus the shorter
    way round (forward on a tie). One of the shortest paths (every hop costs the same), but not
    necessarily the one whose node names sort first: the one the hardware takes."""

    dims: tuple[int, ...]
    wrap: bool

    def __call__(self, src: str, dst: str) -> Sequence[tuple[str, ...]] | None:
        if not (src.startswith("gpu") and dst.startswith("gpu")) or src == dst:
            return None
        at = list(torus_coords(int(src[3:]), self.dims))
        to = torus_coords(int(dst[3:]), self.dims)
        path = [src]
        for d, size in enumerate(self.dims):
            forward, backward = (to[d] - at[d]) % size, (at[d] - to[d]) % size
            if not self.wrap:  # no way round: straight there
                forward, backward = max(to[d] - at[d], 0), max(at[d] - to[d], 0)
            step, hops = (1, forward) if 0 < forward <= backward or backward == 0 else (
                -1, backward)
            for _ in range(hops):
                at[d] = (at[d] + step) % size
                path.append(f"gpu{torus_rank(at, self.dims)}")
        return [tuple(path)]


def torus_coords(rank: int, dims: Sequence[int]) -> tuple[int, ...]:
    """The coordinates of ``rank`` on a torus of ``dims`` (the last dimension varies fastest).

    >>> torus_coords(11, (4, 4))
    (2, 3)
    """
    coords = []
    for size in reversed(dims):
        rank, c = divmod(rank, size)
        coords.append(c)
    return tuple(reversed(coords))


def torus_rank(coords: Sequence[int], dims: Sequence[int]) -> int:
    """The rank at ``coords`` on a torus of ``dims`` (inverse of :func:`torus_coords`)."""
    rank = 0
    for c, size in zip(coords, dims, strict=True):
        rank = rank * size + c
    return rank


def torus(dims: Counts, bandwidth: Bandwidth, latency: Time) -> nx.DiGraph:
    """GPUs on a k-dimensional torus of ``dims`` (e.g. ``[4, 4]`` or ``[4, 4, 4]``), each cabled
    to its two neighbours along every dimension with wrap-around, as in TPU pods (Jouppi et al.,
    "TPU v4", ISCA 2023: a 3-D torus of ICI links). A dimension of size 2 is one cable, of size 1
    none. Rank r sits at :func:`torus_coords` (r); GPUs carry ``coords``. Routes follow
    dimension order (:class:`GridPaths`).

    >>> g = torus((4, 4), 50e9, 1e-6)
    >>> g.number_of_nodes(), g.number_of_edges(), sorted(g.successors("gpu0"))
    (16, 64, ['gpu1', 'gpu12', 'gpu3', 'gpu4'])
    """
    return _grid("torus", dims, bandwidth, latency, wrap=True)


def mesh(dims: Counts, bandwidth: Bandwidth, latency: Time) -> nx.DiGraph:
    """GPUs on a k-dimensional mesh of ``dims``: a :func:`torus` without the wrap-around
    cables, so that GPUs on an edge have fewer neighbours. Routes follow dimension order.

    >>> g = mesh((4, 4), 50e9, 1e-6)
    >>> g.number_of_edges(), sorted(g.successors("gpu0"))
    (48, ['gpu1', 'gpu4'])
    """
    return _grid("mesh", dims, bandwidth, latency, wrap=False)


def _grid(kind: str, dims: Sequence[int], bandwidth: float, latency: float,
          wrap: bool) -> nx.DiGraph:
    graph = nx.DiGraph(name=f"{kind}({'x'.join(map(str, dims))})", dims=tuple(dims),
                       wrap=wrap, paths=GridPaths(tuple(dims), wrap))
    gpus = _gpus(graph, math.prod(dims))
    for rank, gpu in enumerate(gpus):
        coords = torus_coords(rank, dims)
        graph.nodes[gpu]["coords"] = coords
        for d, size in enumerate(dims):
            if size > 1 and (wrap or coords[d] + 1 < size):
                onward = list(coords)
                onward[d] = (coords[d] + 1) % size
                cable(graph, gpu, gpus[torus_rank(onward, dims)], bandwidth, latency)
    return graph


@dataclass(frozen=True)
class Builder:
    """A registered topology builder: its function, how many GPUs given parameters make, the
    most GPUs it may be asked for (what a run fits in; :mod:`simulator.limits`), and the rules
    its parameters follow together beyond their kinds (``problems``: (parameter, what was
    expected) pairs, checked before anything is built)."""

    name: str
    function: Callable[..., nx.DiGraph]
    rank_count: Callable[[Mapping[str, ParamValue]], int]
    max_ranks: int = MAX_RANKS
    problems: Callable[[Mapping[str, ParamValue]], list[tuple[str, str]]] | None = None

    @property
    def params(self) -> dict[str, Param]:
        """Every parameter and its kind, in signature order (from the ``Annotated`` hints); a
        block of parameters (:class:`HostParams`) gives its fields, in their order, in its
        place."""
        kinds = {}
        for name, (hint, _) in self._signature().items():
            if _is_block(hint):
                kinds.update(_block_kinds(hint))
            elif get_origin(hint) is Annotated:
                kinds[name] = next(arg for arg in get_args(hint)[1:] if isinstance(arg, Param))
            else:
                raise TypeError(f"builder {self.name}: parameter {name} needs a kind (Count, ...)")
        return kinds

    @property
    def defaults(self) -> dict[str, ParamValue]:
        """The optional parameters and their default values (a block's, field by field)."""
        defaults: dict[str, ParamValue] = {}
        for name, (hint, default) in self._signature().items():
            if _is_block(hint):
                defaults.update({f.name: f.default for f in fields(hint)
                                 if f.default is not MISSING})
            elif default is not inspect.Parameter.empty:
                defaults[name] = default
        return defaults

    def build(self, **params: ParamValue) -> nx.DiGraph:
        """The graph of ``params`` named flat, as a scenario file names them: each block's
        fields gathered into its dataclass, passed once. TypeError naming an unknown one."""
        unknown = sorted(set(params) - set(self.params))
        if unknown:
            raise TypeError(f"builder {self.name}: unknown parameters {', '.join(unknown)}")
        call: dict[str, object] = {}
        for name, (hint, _) in self._signature().items():
            if _is_block(hint):
                call[name] = hint(**{f.name: params[f.name] for f in fields(hint)
                                     if f.name in params})
            elif name in params:
                call[name] = params[name]
        return self.function(**call)

    def _signature(self) -> dict[str, tuple[object, Any]]:
        """Each parameter of the function, in order: its type hint and its default."""
        hints = get_type_hints(self.function, include_extras=True)
        return {name: (hints.get(name), p.default)
                for name, p in inspect.signature(self.function).parameters.items()}

    @property
    def optional(self) -> frozenset[str]:
        """Parameters with a default value."""
        return frozenset(self.defaults)


def _is_block(hint: object) -> TypeGuard[type[Any]]:
    """Whether a builder's parameter is a block of parameters (a dataclass of them)."""
    return isinstance(hint, type) and is_dataclass(hint)


def _block_kinds(block: type[Any]) -> dict[str, Param]:
    """A block's fields and their kinds, in their order."""
    hints = get_type_hints(block, include_extras=True)
    return {f.name: next(arg for arg in get_args(hints[f.name])[1:] if isinstance(arg, Param))
            for f in fields(block)}


def _count(params: Mapping[str, ParamValue], key: str) -> int:
    value = params[key]
    assert isinstance(value, int)
    return value


def _flat_ranks(params: Mapping[str, ParamValue]) -> int:
    return _count(params, "ranks")


def _grid_ranks(params: Mapping[str, ParamValue]) -> int:
    dims = params["dims"]
    assert isinstance(dims, tuple)
    return math.prod(dims)


def _host_ranks(params: Mapping[str, ParamValue]) -> int:
    return _count(params, "nodes") * _count(params, "gpus_per_node")


def _leaf_ranks(params: Mapping[str, ParamValue]) -> int:
    return _count(params, "leaves") * _count(params, "gpus_per_leaf")


def _fat_tree_ranks(params: Mapping[str, ParamValue]) -> int:
    return _count(params, "k") ** 3 // 4


def _dragonfly_ranks(params: Mapping[str, ParamValue]) -> int:
    return _count(params, "groups") * _count(params, "routers") * _count(params, "gpus_per_router")


BUILDERS: dict[str, Builder] = {
    b.name: b
    for b in (
        Builder("switch", switch, _flat_ranks),
        Builder("ring", ring, _flat_ranks),
        Builder("fully_connected", fully_connected, _flat_ranks, max_ranks=MAX_FULLY_CONNECTED),
        Builder("dgx", dgx, _host_ranks),
        Builder("dgx1", dgx1, dgx1_ranks, problems=dgx1_problems),
        Builder("torus", torus, _grid_ranks),
        Builder("mesh", mesh, _grid_ranks),
        Builder("leaf_spine", leaf_spine, _leaf_ranks, problems=leaf_spine_problems),
        Builder("fat_tree", fat_tree, _fat_tree_ranks, problems=fat_tree_problems),
        Builder("dragonfly", dragonfly, _dragonfly_ranks, problems=dragonfly_problems),
        Builder("cluster", cluster, _host_ranks, problems=cluster_problems),
        Builder("xgmi", xgmi, _host_ranks, problems=xgmi_problems),
        Builder("graph", graph, graph_ranks, problems=graph_problems),
        Builder("nccl_xml", nccl_xml, nccl_xml_ranks, problems=nccl_xml_problems),
    )
}
