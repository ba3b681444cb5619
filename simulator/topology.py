"""Topology builders: plain functions that return an annotated ``networkx.DiGraph``.

Every full-duplex cable is two directed edges, each with its own ``bandwidth`` (bytes/s) and
``latency`` (s). Nodes carry ``kind`` (``gpu``, ``nic`` or ``switch``); GPUs carry their ``rank``
and, on multi-node topologies, the ``host`` (machine) they sit in. Any node may carry a
per-message ``latency`` (s) that every transfer crossing it pays once (e.g. a NIC's processing
time). Builders are registered by name in :data:`BUILDERS` with the kind of each parameter, so that
scenario files can be validated before anything is built.

>>> g = switch(ranks=4, bandwidth=25e9, latency=500e-9)
>>> sorted(g.nodes(data="rank"))[:2]
[('gpu0', 0), ('gpu1', 1)]
>>> g.edges["gpu0", "switch"]["bandwidth"]
25000000000.0
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import networkx as nx

GPU, NIC, SWITCH = "gpu", "nic", "switch"


def _cable(graph: nx.DiGraph, a: str, b: str, bandwidth: float, latency: float) -> None:
    """Add a full-duplex cable: two directed edges with the same bandwidth and latency."""
    graph.add_edge(a, b, bandwidth=float(bandwidth), latency=float(latency))
    graph.add_edge(b, a, bandwidth=float(bandwidth), latency=float(latency))


def _gpus(graph: nx.DiGraph, ranks: int) -> list[str]:
    names = [f"gpu{r}" for r in range(ranks)]
    for rank, name in enumerate(names):
        graph.add_node(name, kind=GPU, rank=rank)
    return names


def switch(ranks: int, bandwidth: float, latency: float) -> nx.DiGraph:
    """``ranks`` GPUs, each on its own full-duplex link to one non-blocking switch.

    A rank-to-rank route is two hops (GPU → switch → GPU).

    >>> switch(3, 25e9, 1e-6).number_of_edges()
    6
    """
    graph = nx.DiGraph(name=f"switch({ranks})")
    graph.add_node("switch", kind=SWITCH)
    for gpu in _gpus(graph, ranks):
        _cable(graph, gpu, "switch", bandwidth, latency)
    return graph


def ring(ranks: int, bandwidth: float, latency: float) -> nx.DiGraph:
    """``ranks`` GPUs, GPU i cabled to GPU (i+1) mod ranks.

    With two ranks the ring is a single cable (a DiGraph holds one edge per direction).

    >>> sorted(ring(4, 25e9, 1e-6).successors("gpu0"))
    ['gpu1', 'gpu3']
    """
    graph = nx.DiGraph(name=f"ring({ranks})")
    gpus = _gpus(graph, ranks)
    if ranks > 1:
        for i, gpu in enumerate(gpus):
            _cable(graph, gpu, gpus[(i + 1) % ranks], bandwidth, latency)
    return graph


def fully_connected(ranks: int, bandwidth: float, latency: float) -> nx.DiGraph:
    """``ranks`` GPUs with a cable between every pair.

    >>> fully_connected(4, 25e9, 1e-6).number_of_edges()
    12
    """
    graph = nx.DiGraph(name=f"fully_connected({ranks})")
    gpus = _gpus(graph, ranks)
    for i, a in enumerate(gpus):
        for b in gpus[i + 1:]:
            _cable(graph, a, b, bandwidth, latency)
    return graph


def dgx(
    nodes: int,
    gpus_per_node: int,
    nvlink_bandwidth: float,
    nvlink_latency: float,
    pcie_bandwidth: float,
    pcie_latency: float,
    nic_bandwidth: float,
    nic_latency: float,
    nic_message_latency: float = 0.0,
    nvswitch_reduction: bool = False,
    nvswitch_reduction_latency: float = 0.0,
) -> nx.DiGraph:
    """``nodes`` DGX-style machines joined by one leaf switch.

    In each machine ``gpus_per_node`` GPUs sit on one non-blocking NVSwitch (a GPU's link to it
    carries the GPU's whole NVLink bandwidth), and each GPU has its own NIC over PCIe. Every NIC is
    cabled to a single non-blocking leaf switch (a rail-optimised fabric collapsed into one
    switch). Rank = node × gpus_per_node + local index; GPUs carry ``host`` = node index.
    ``nic_message_latency`` is a per-message cost paid by every transfer crossing a NIC.
    ``nvswitch_reduction`` marks the NVSwitches as able to reduce in the switch (NVLink SHARP,
    node attribute ``reduction``), which the ``nvls`` algorithm needs; each in-switch reduction
    then waits ``nvswitch_reduction_latency`` (node attribute ``reduction_latency``) before its
    result is multicast.

    >>> g = dgx(2, 8, 450e9, 3e-7, 64e9, 3.5e-7, 50e9, 1e-6)
    >>> g.nodes["n1.gpu0"]["rank"], g.nodes["n1.gpu0"]["host"]
    (8, 1)
    """
    graph = nx.DiGraph(name=f"dgx({nodes}x{gpus_per_node})")
    graph.add_node("leaf", kind=SWITCH)
    for host in range(nodes):
        nvswitch = f"n{host}.nvswitch"
        graph.add_node(nvswitch, kind=SWITCH, reduction=bool(nvswitch_reduction),
                       reduction_latency=float(nvswitch_reduction_latency))
        for local in range(gpus_per_node):
            gpu, nic = f"n{host}.gpu{local}", f"n{host}.nic{local}"
            graph.add_node(gpu, kind=GPU, rank=host * gpus_per_node + local, host=host)
            graph.add_node(nic, kind=NIC, latency=float(nic_message_latency))
            _cable(graph, gpu, nvswitch, nvlink_bandwidth, nvlink_latency)
            _cable(graph, gpu, nic, pcie_bandwidth, pcie_latency)
            _cable(graph, nic, "leaf", nic_bandwidth, nic_latency)
    return graph


class Param(Enum):
    """The kind of a builder parameter, which decides how a scenario value is parsed."""

    COUNT = "a whole number ≥ 1"
    BANDWIDTH = "a bandwidth like '25GB/s'"
    TIME = "a time like '500ns'"
    FLAG = "true or false"


@dataclass(frozen=True)
class Builder:
    """A registered topology builder and the kinds of its parameters (all required unless
    listed in ``optional``)."""

    name: str
    build: Callable[..., nx.DiGraph]
    params: dict[str, Param]
    optional: frozenset[str] = frozenset()


_FLAT = {"ranks": Param.COUNT, "bandwidth": Param.BANDWIDTH, "latency": Param.TIME}

BUILDERS: dict[str, Builder] = {
    b.name: b
    for b in (
        Builder("switch", switch, _FLAT),
        Builder("ring", ring, _FLAT),
        Builder("fully_connected", fully_connected, _FLAT),
        Builder(
            "dgx",
            dgx,
            {
                "nodes": Param.COUNT,
                "gpus_per_node": Param.COUNT,
                "nvlink_bandwidth": Param.BANDWIDTH,
                "nvlink_latency": Param.TIME,
                "pcie_bandwidth": Param.BANDWIDTH,
                "pcie_latency": Param.TIME,
                "nic_bandwidth": Param.BANDWIDTH,
                "nic_latency": Param.TIME,
                "nic_message_latency": Param.TIME,
                "nvswitch_reduction": Param.FLAG,
                "nvswitch_reduction_latency": Param.TIME,
            },
            optional=frozenset({"nic_message_latency", "nvswitch_reduction",
                                "nvswitch_reduction_latency"}),
        ),
    )
}


def reducing_switch(graph: nx.DiGraph, gpus: list[str]) -> str | None:
    """The switch with ``reduction: true`` cabled directly to every GPU in ``gpus``, if any.

    >>> g = switch(2, 1e9, 0.0); g.nodes["switch"]["reduction"] = True
    >>> reducing_switch(g, ["gpu0", "gpu1"])
    'switch'
    """
    candidates = sorted(node for node, data in graph.nodes(data=True)
                        if data.get("kind") == SWITCH and data.get("reduction"))
    for node in candidates:
        if all(graph.has_edge(gpu, node) and graph.has_edge(node, gpu) for gpu in gpus):
            return node
    return None


def hosts(graph: nx.DiGraph, gpus: tuple[str, ...]) -> tuple[int, ...]:
    """The ``host`` (machine) of each GPU; 0 for topologies without hosts."""
    return tuple(int(graph.nodes[gpu].get("host", 0)) for gpu in gpus)


def placement(graph: nx.DiGraph) -> tuple[str, ...]:
    """The GPU node of each rank, in rank order (ranks are 0..p-1, one per GPU).

    >>> placement(ring(3, 1e9, 0.0))
    ('gpu0', 'gpu1', 'gpu2')
    """
    by_rank = {data["rank"]: node for node, data in graph.nodes(data=True) if data.get("kind") == GPU}
    if sorted(by_rank) != list(range(len(by_rank))):
        raise ValueError(f"GPU ranks must be 0..p-1, got {sorted(by_rank)}")
    return tuple(by_rank[r] for r in range(len(by_rank)))
