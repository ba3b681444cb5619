"""AMD Instinct nodes: GPUs joined pairwise by xGMI (AMD Infinity Fabric) links, no switch, each
GPU with its own NIC, on the Clos fabrics of :func:`~simulator.model.clos.cluster`.

An MI300X or MI325X platform (AMD Instinct MI300X / MI325X data sheets; AMD CDNA 3 white paper)
has 8 GPUs, each with 7 Infinity Fabric links, one to each peer: a fully connected mesh, so a
GPU reaches any peer in one hop at one link's bandwidth, never more (no NVSwitch to pool a GPU's
links). Across hosts it is :func:`~simulator.model.clos.cluster`'s network: one NIC per GPU
behind its own PCIe switch, rail-optimised leaves and spines.

>>> g = xgmi(1, 8, 64e9, 1e-6, 63e9, 5e-7, 50e9, 8.5e-7, 8.5e-7)
>>> g.edges["n0.gpu0", "n0.gpu7"]["bandwidth"], len([n for n in g.succ["n0.gpu0"]])
(64000000000.0, 8)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import networkx as nx

from simulator.model.clos import (
    ClusterPaths,
    ClusterShape,
    _default_spines,
    _leaf_ports,
    _spine_problems,
    _spread,
    _uplinks,
)
from simulator.model.parts import (
    GPU,
    HOST_DEFAULTS,
    NET_LINK,
    NVLINK,
    PCIE,
    SWITCH,
    Bandwidth,
    Count,
    Flag,
    HostParams,
    ParamValue,
    Ratio,
    Seed,
    Time,
    cable,
)


@dataclass(frozen=True)
class XgmiPaths:
    """Routes of :func:`xgmi`: between GPUs of one host, their own xGMI link (RCCL's peer-to-peer
    transport takes the direct link, never a relay through a third GPU); across hosts those of
    :class:`~simulator.model.clos.ClusterPaths` (each GPU's own NIC, leaves, spines)."""

    shape: ClusterShape

    def __call__(self, src: str, dst: str) -> Sequence[tuple[str, ...]] | None:
        a, b = self.shape.place(src), self.shape.place(dst)
        if a is None or b is None or a == b:
            return None
        if a[0] == b[0]:
            return [(src, dst)]
        return ClusterPaths(self.shape)(src, dst)


def xgmi(
    nodes: Count,
    gpus_per_node: Count,
    xgmi_bandwidth: Bandwidth,
    xgmi_latency: Time,
    pcie_bandwidth: Bandwidth,
    pcie_latency: Time,
    nic_bandwidth: Bandwidth,
    nic_latency: Time,
    uplink_latency: Time,
    nodes_per_unit: Count = 0,
    rail_optimized: Flag = True,
    spines: Count = 0,
    oversubscription: Ratio = 1.0,
    ecmp: Flag = True,
    ecmp_seed: Seed = 0,
    hosts: HostParams = HOST_DEFAULTS,
) -> nx.DiGraph:
    """``nodes`` hosts of ``gpus_per_node`` GPUs, every GPU pair of a host cabled by one xGMI
    link (``xgmi_bandwidth`` per direction, ``xgmi_latency``; link kind ``nvlink``, the kind of
    a GPU-to-GPU fabric link), each GPU with its own NIC behind its own PCIe switch
    (``pcie_*``), NICs on :func:`~simulator.model.clos.cluster`'s leaves and spines
    (``nic_*``, ``uplink_latency``, ``nodes_per_unit``, ``rail_optimized``, ``spines``,
    ``oversubscription``, ``ecmp``). ``hosts`` as there: the presets state
    ``compute_capability: 942`` (gfx942, which selects RCCL) and ``nvlinks`` (xGMI links a GPU).
    Rank = host × gpus_per_node + local index."""
    unit = nodes_per_unit or nodes
    spines = spines or _default_spines(_leaf_ports(unit, gpus_per_node, rail_optimized),
                                       oversubscription)
    shape = ClusterShape(nodes, gpus_per_node, gpus_per_node, 1, unit, bool(rail_optimized),
                         spines, 0, 0)
    graph = nx.DiGraph(name=f"xgmi({nodes}x{gpus_per_node})", paths=XgmiPaths(shape),
                       **hosts.graph_attributes())
    _spread(graph, ecmp, ecmp_seed)
    for host in range(nodes):
        for local in range(gpus_per_node):
            gpu, pcie, nic = shape.up(host, local)
            graph.add_node(gpu, kind=GPU, rank=host * gpus_per_node + local, host=host, nic=nic)
            graph.add_node(pcie, kind=SWITCH, tier=0)
            hosts.add_nic(graph, nic)
            cable(graph, gpu, pcie, pcie_bandwidth, pcie_latency / 2, PCIE)
            cable(graph, nic, pcie, pcie_bandwidth, pcie_latency / 2, PCIE)
            leaf = shape.leaf(host, local)
            hosts.add_network_switch(graph, leaf, 1)
            cable(graph, nic, leaf, nic_bandwidth, nic_latency, NET_LINK)
        for local in range(gpus_per_node):
            for peer in range(local + 1, gpus_per_node):
                cable(graph, f"n{host}.gpu{local}", f"n{host}.gpu{peer}", xgmi_bandwidth,
                      xgmi_latency, NVLINK)
    _uplinks(graph, shape, nic_bandwidth, oversubscription, 1.0, uplink_latency, hosts)
    return graph


def xgmi_problems(params: Mapping[str, ParamValue]) -> list[tuple[str, str]]:
    """The wiring rules of :func:`xgmi` that its parameters' kinds cannot say: a GPU's
    xGMI links reach 7 peers at most (8 GPUs a host), the spines as on a cluster."""
    gpus, nodes, unit = params["gpus_per_node"], params["nodes"], params["nodes_per_unit"]
    assert isinstance(gpus, int) and isinstance(nodes, int) and isinstance(unit, int)
    problems = []
    if gpus > 8:
        problems.append(("gpus_per_node", f"expected at most 8 GPUs a host (each MI300-series "
                                          f"GPU has 7 xGMI links, one a peer), got {gpus}"))
    ratio = params["oversubscription"]
    assert isinstance(ratio, (int, float))
    ports = _leaf_ports(unit or nodes, gpus, params["rail_optimized"])
    spines = params["spines"] or _default_spines(ports, float(ratio))
    problems += _spine_problems({**params, "spines": spines}, ports)
    return problems
