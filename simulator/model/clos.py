"""Clos fabrics: a leaf/spine, a k-ary fat-tree, and multi-node GPU clusters built on them.

A Clos network (Clos 1953; Al-Fares et al., "A scalable, commodity data center network
architecture", SIGCOMM 2008) joins every switch of a tier to switches of the tier above, so that
between two leaves there are as many equal-cost paths as switches above them. These builders
give every one of those paths as route candidates and set the graph attribute ``ecmp_seed``
(unless ``ecmp: false``), so that routing spreads flows over them as ECMP does
(:mod:`simulator.model.routing`). Parallel cables between two switches are drawn as one link of
their summed bandwidth: the flows hashed onto them are treated as perfectly balanced.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import networkx as nx

from simulator.errors import quoted
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


def _spread(graph: nx.DiGraph, ecmp: bool, ecmp_seed: int) -> None:
    """Mark a multi-path fabric for ECMP (seeded), or for first-by-name routing."""
    graph.graph["ecmp_seed"] = int(ecmp_seed) if ecmp else None


def _rank_of(name: str) -> int | None:
    """The rank in a flat GPU name (``gpu12`` -> 12), None for any other node."""
    return int(name[3:]) if name.startswith("gpu") and name[3:].isdigit() else None


@dataclass(frozen=True)
class LeafSpinePaths:
    """Routes of :func:`leaf_spine`: through the shared leaf, or up to each spine and down."""

    gpus_per_leaf: int
    spines: int

    def __call__(self, src: str, dst: str) -> Sequence[tuple[str, ...]] | None:
        a, b = _rank_of(src), _rank_of(dst)
        if a is None or b is None or a == b:
            return None
        up, down = f"leaf{a // self.gpus_per_leaf}", f"leaf{b // self.gpus_per_leaf}"
        if up == down:
            return [(src, up, dst)]
        return [(src, up, f"spine{s}", down, dst) for s in range(self.spines)]


def leaf_spine(leaves: Count, gpus_per_leaf: Count, spines: Count, bandwidth: Bandwidth,
               latency: Time, oversubscription: Ratio = 1.0, ecmp: Flag = True,
               ecmp_seed: Seed = 0) -> nx.DiGraph:
    """``leaves`` leaf switches of ``gpus_per_leaf`` GPUs each (cables of ``bandwidth``), every
    leaf cabled to each of ``spines`` spine switches. ``oversubscription`` is a leaf's downlink
    capacity over its uplink capacity (3 or '3:1': the spines carry a third of what the GPUs
    could send), so each leaf-to-spine link carries gpus_per_leaf·bandwidth / (oversubscription
    · spines). Rank r sits on leaf r // gpus_per_leaf. Between leaves there are ``spines``
    equal-cost paths (ECMP, seeded by ``ecmp_seed``; ``ecmp: false``: the first spine by name).

    >>> g = leaf_spine(4, 8, 2, 50e9, 1e-6, oversubscription=2.0)
    >>> g.number_of_nodes(), g.edges["leaf0", "spine1"]["bandwidth"]
    (38, 100000000000.0)
    """
    graph = nx.DiGraph(name=f"leaf_spine({leaves}x{gpus_per_leaf},{spines})",
                       paths=LeafSpinePaths(gpus_per_leaf, spines))
    _spread(graph, ecmp, ecmp_seed)
    uplink = gpus_per_leaf * bandwidth / (oversubscription * spines)
    for s in range(spines if leaves > 1 else 0):  # one leaf needs no spines
        graph.add_node(f"spine{s}", kind=SWITCH, tier=2)
    for leaf in range(leaves):
        name = f"leaf{leaf}"
        graph.add_node(name, kind=SWITCH, tier=1)
        for local in range(gpus_per_leaf):
            rank = leaf * gpus_per_leaf + local
            graph.add_node(f"gpu{rank}", kind=GPU, rank=rank)
            cable(graph, f"gpu{rank}", name, bandwidth, latency, NET_LINK)
        if leaves > 1:
            for s in range(spines):
                cable(graph, name, f"spine{s}", uplink, latency, NET_LINK)
    return graph


def leaf_spine_problems(params: Mapping[str, ParamValue]) -> list[tuple[str, str]]:
    """A leaf's uplink to each spine is at least one cable: spines ≤ its uplink cables."""
    return _spine_problems(params, params["gpus_per_leaf"])


def _spine_problems(params: Mapping[str, ParamValue], ports: object) -> list[tuple[str, str]]:
    """Spines at most a leaf's uplink cables (its ``ports`` over the oversubscription), so that
    each leaf-to-spine link, their capacity shared evenly, is at least one cable's worth."""
    spines, ratio = params["spines"], params["oversubscription"]
    assert isinstance(spines, int) and isinstance(ratio, (int, float)) and isinstance(ports, int)
    cables = ports / float(ratio)
    if cables < 1 - 1e-9:
        return [("oversubscription", f"expected at most {ports} (a leaf's {ports} ports over at "
                                     f"least one uplink cable), got {float(ratio):g}")]
    if spines > cables + 1e-9:
        return [("spines", f"expected at most {math.floor(cables + 1e-9)} (a leaf's uplink "
                           f"cables: {ports} ports / oversubscription {ratio:g}), got {spines}")]
    return []


@dataclass(frozen=True)
class FatTreePaths:
    """Routes of :func:`fat_tree`: through the shared edge switch; within a pod up to each of
    its k/2 aggregation switches and down; across pods up through aggregation switch j to each
    of the k/2 core switches it reaches, and down through aggregation switch j of the other pod
    ((k/2)² equal-cost paths)."""

    k: int

    def __call__(self, src: str, dst: str) -> Sequence[tuple[str, ...]] | None:
        a, b = _rank_of(src), _rank_of(dst)
        if a is None or b is None or a == b:
            return None
        half = self.k // 2
        (pod_a, edge_a), (pod_b, edge_b) = _fat_tree_place(a, half), _fat_tree_place(b, half)
        up, down = f"pod{pod_a}.edge{edge_a}", f"pod{pod_b}.edge{edge_b}"
        if up == down:
            return [(src, up, dst)]
        if pod_a == pod_b:
            return [(src, up, f"pod{pod_a}.agg{j}", down, dst) for j in range(half)]
        return [(src, up, f"pod{pod_a}.agg{j}", f"core{j * half + m}", f"pod{pod_b}.agg{j}", down,
                 dst) for j in range(half) for m in range(half)]


def _fat_tree_place(rank: int, half: int) -> tuple[int, int]:
    """(pod, edge switch) of a rank on a fat-tree with ``half`` = k/2."""
    return rank // (half * half), (rank // half) % half


def fat_tree(k: Count, bandwidth: Bandwidth, latency: Time, ecmp: Flag = True,
             ecmp_seed: Seed = 0) -> nx.DiGraph:
    """The k-ary fat-tree of Al-Fares et al. (SIGCOMM 2008), every cable of ``bandwidth``: k
    pods of k/2 edge and k/2 aggregation switches, each edge switch with k/2 GPUs and a cable to
    every aggregation switch of its pod, and (k/2)² core switches, aggregation switch j of every
    pod cabled to cores j·k/2 .. j·k/2 + k/2 - 1. k³/4 GPUs, full bisection bandwidth; k even.
    Equal-cost paths: k/2 within a pod, (k/2)² across pods (ECMP as in :func:`leaf_spine`).

    >>> g = fat_tree(4, 50e9, 1e-6)
    >>> sum(1 for _, kind in g.nodes(data="kind") if kind == "gpu"), g.number_of_edges()
    (16, 96)
    """
    half = k // 2
    graph = nx.DiGraph(name=f"fat_tree(k={k})", paths=FatTreePaths(k))
    _spread(graph, ecmp, ecmp_seed)
    for c in range(half * half):
        graph.add_node(f"core{c}", kind=SWITCH, tier=3)
    for pod in range(k):
        for j in range(half):
            agg = f"pod{pod}.agg{j}"
            graph.add_node(agg, kind=SWITCH, tier=2)
            for m in range(half):
                cable(graph, agg, f"core{j * half + m}", bandwidth, latency, NET_LINK)
        for e in range(half):
            edge = f"pod{pod}.edge{e}"
            graph.add_node(edge, kind=SWITCH, tier=1)
            for j in range(half):
                cable(graph, edge, f"pod{pod}.agg{j}", bandwidth, latency, NET_LINK)
            for h in range(half):
                rank = (pod * half + e) * half + h
                graph.add_node(f"gpu{rank}", kind=GPU, rank=rank)
                cable(graph, f"gpu{rank}", edge, bandwidth, latency, NET_LINK)
    return graph


def fat_tree_problems(params: Mapping[str, ParamValue]) -> list[tuple[str, str]]:
    """A fat-tree's k is even (k/2 GPUs, aggregation and core switches per switch)."""
    k = params["k"]
    return [] if isinstance(k, int) and k % 2 == 0 else [
        ("k", f"expected an even whole number ≥ 2 (k/2 ports down, k/2 up), got {quoted(k)}")]


@dataclass(frozen=True)
class ClusterShape:
    """How a :func:`cluster` is wired, computed once and shared by the builder and its routes:
    which PCIe switch and NIC each GPU uses, which leaf each NIC is cabled to, and the spines
    and cores above."""

    nodes: int
    gpus_per_node: int
    nics_per_node: int
    gpus_per_pcie_switch: int
    nodes_per_unit: int
    rail_optimized: bool
    spines: int
    units_per_pod: int
    cores: int

    @property
    def nics_per_pcie_switch(self) -> int:
        """NICs behind each PCIe switch (the GPUs behind it share them)."""
        return self.nics_per_node * self.gpus_per_pcie_switch // self.gpus_per_node

    def nic(self, local: int) -> int:
        """The NIC (index in its host) that GPU ``local`` sends and receives through: one of
        the NICs behind its own PCIe switch, GPUs spread evenly over them."""
        k, m = self.gpus_per_pcie_switch, self.nics_per_pcie_switch
        return (local // k) * m + (local % k) * m // k

    def unit(self, host: int) -> int:
        """The scalable unit (group of hosts under one set of leaves) of ``host``."""
        return host // self.nodes_per_unit

    @property
    def units(self) -> int:
        return math.ceil(self.nodes / self.nodes_per_unit)

    @property
    def leaves_per_unit(self) -> int:
        """One leaf per rail (NIC index) when rail-optimised, else one per unit (top of rack)."""
        return self.nics_per_node if self.rail_optimized else 1

    def leaf(self, host: int, nic: int) -> str:
        """The leaf NIC ``nic`` of ``host`` is cabled to."""
        unit = self.unit(host)
        return f"u{unit}.leaf{nic}" if self.rail_optimized else f"u{unit}.leaf"

    @property
    def three_tier(self) -> bool:
        return self.units_per_pod > 0

    def pod(self, host: int) -> int:
        """The pod (group of units sharing spines) of ``host``; 0 on a two-tier fabric."""
        return self.unit(host) // self.units_per_pod if self.three_tier else 0

    def spine(self, pod: int, s: int) -> str:
        return f"p{pod}.spine{s}" if self.three_tier else f"spine{s}"

    def cores_of(self, s: int) -> range:
        """The core switches spine ``s`` of every pod is cabled to (cores / spines of them)."""
        group = self.cores // self.spines
        return range(s * group, (s + 1) * group)

    def place(self, name: str) -> tuple[int, int] | None:
        """(host, local index) of a GPU node name ``n{host}.gpu{local}``, None otherwise."""
        host, _, local = name.partition(".gpu")
        if not (host.startswith("n") and host[1:].isdigit() and local.isdigit()):
            return None
        return int(host[1:]), int(local)

    def up(self, host: int, local: int) -> tuple[str, ...]:
        """A GPU's way out to the network: the GPU, its PCIe switch, its NIC."""
        return (f"n{host}.gpu{local}", f"n{host}.pcie{local // self.gpus_per_pcie_switch}",
                f"n{host}.nic{self.nic(local)}")


@dataclass(frozen=True)
class ClusterPaths:
    """Routes of :func:`cluster` between two GPUs. On one host: through the NVSwitch (GPUs
    never talk over the PCIe switch they may share while NVLink joins them, as NCCL prefers
    NVLink; and never relay for others). Across hosts: each GPU sends and receives through its
    own NIC (:meth:`ClusterShape.nic`, as NCCL gives each GPU its nearest NIC), even where
    another NIC behind the same PCIe switch sits on the other GPU's rail: up through the PCIe
    switch and NIC,
    through the shared leaf, or up to every spine above the source leaf (and, on three tiers,
    every core above it) and down (the equal-cost paths ECMP picks among)."""

    shape: ClusterShape

    def __call__(self, src: str, dst: str) -> Sequence[tuple[str, ...]] | None:
        shape = self.shape
        a, b = shape.place(src), shape.place(dst)
        if a is None or b is None or a == b:
            return None
        if a[0] == b[0]:
            return [(src, f"n{a[0]}.nvswitch", dst)]
        up, down = shape.up(*a), shape.up(*b)[::-1]
        leaf_a, leaf_b = shape.leaf(a[0], shape.nic(a[1])), shape.leaf(b[0], shape.nic(b[1]))
        if leaf_a == leaf_b:
            return [(*up, leaf_a, *down)]
        pod_a, pod_b = shape.pod(a[0]), shape.pod(b[0])
        if pod_a == pod_b:
            return [(*up, leaf_a, shape.spine(pod_a, s), leaf_b, *down)
                    for s in range(shape.spines)]
        return [(*up, leaf_a, shape.spine(pod_a, s), f"core{c}", shape.spine(pod_b, s), leaf_b,
                 *down) for s in range(shape.spines) for c in shape.cores_of(s)]


def cluster(
    nodes: Count,
    gpus_per_node: Count,
    nvlink_bandwidth: Bandwidth,
    nvlink_latency: Time,
    pcie_bandwidth: Bandwidth,
    pcie_latency: Time,
    nic_bandwidth: Bandwidth,
    nic_latency: Time,
    uplink_latency: Time,
    nics_per_node: Count = 0,
    gpus_per_pcie_switch: Count = 1,
    nodes_per_unit: Count = 0,
    rail_optimized: Flag = True,
    spines: Count = 0,
    oversubscription: Ratio = 1.0,
    units_per_pod: Count = 0,
    cores: Count = 0,
    core_oversubscription: Ratio = 1.0,
    ecmp: Flag = True,
    ecmp_seed: Seed = 0,
    hosts: HostParams = HOST_DEFAULTS,
) -> nx.DiGraph:
    """A multi-node GPU cluster on a two- or three-tier Clos network, as training clusters are
    built (NVIDIA DGX SuperPOD reference architectures: rail-optimised leaves, full-bisection
    spines).

    **Inside a host** (as :func:`~simulator.model.topology.dgx`): ``gpus_per_node`` GPUs on one
    NVSwitch (``nvlink_*``; ``nvswitch_reduction`` as there). Every ``gpus_per_pcie_switch``
    GPUs share a PCIe switch (node ``n{h}.pcie{i}``, tier 0) with ``nics_per_node`` ·
    gpus_per_pcie_switch / gpus_per_node NICs behind it (``nics_per_node`` 0: one per GPU);
    each GPU and each NIC has its own PCIe link to the switch (``pcie_bandwidth``;
    ``pcie_latency`` is GPU to NIC, half on each of the two links), so GPUs sharing a NIC share
    that NIC's link: the PCIe switch is the shared resource it is. GPUs spread evenly over
    their switch's NICs.

    **The network.** Hosts are grouped into scalable units of ``nodes_per_unit`` (0: one unit
    of all). ``rail_optimized``: NIC i of every host in a unit is cabled to the unit's leaf i
    (one leaf per rail, ``u{u}.leaf{i}``), so that same-index GPUs of different hosts meet
    after one switch; otherwise all NICs of a unit go to its one top-of-rack leaf
    (``u{u}.leaf``). NIC cables: ``nic_bandwidth``, ``nic_latency``. A leaf has a port for
    each NIC of a full unit (populated or not), and ``oversubscription`` = its port capacity
    over its uplink capacity; the uplinks are spread evenly over ``spines`` spines (0: one per
    uplink cable; at most that many, so that each leaf-spine link is at least one cable). With
    ``units_per_pod`` > 0 there is a third tier: each pod of that many units has its own
    spines, and spine s of every pod is cabled to cores s·c .. s·c+c-1 of ``cores``
    (c = cores / spines), ``core_oversubscription`` likewise. Uplinks have ``uplink_latency``.
    Routes: :class:`ClusterPaths` (ECMP as in :func:`leaf_spine`).

    Rank = host × gpus_per_node + local index; GPUs carry ``host`` and ``nic`` (the NIC they
    send through). ``hosts`` (:class:`~simulator.model.parts.HostParams`: the NIC's message
    latency, the NVSwitch's reduction, the NCCL facts ``compute_capability``, ``nvlinks``,
    ``nccl_*``, ``transport`` and ``cpu``) is :func:`dgx`'s; its ``sharp`` makes every network
    switch (leaves, spines, cores) reduce in the switch (InfiniBand SHARP, for NCCL's CollNet),
    each reduction waiting ``sharp_latency``.

    >>> g = cluster(4, 8, 450e9, 3e-7, 63e9, 5e-7, 50e9, 8.5e-7, 6e-7, nodes_per_unit=2)
    >>> sorted(n for n in g.succ["n3.nic5"])
    ['n3.pcie5', 'u1.leaf5']
    """
    nics, unit = nics_per_node or gpus_per_node, nodes_per_unit or nodes
    spines = spines or _default_spines(_leaf_ports(unit, nics, rail_optimized), oversubscription)
    shape = ClusterShape(nodes, gpus_per_node, nics, gpus_per_pcie_switch, unit,
                         bool(rail_optimized), spines, units_per_pod, cores)
    graph = nx.DiGraph(name=f"cluster({nodes}x{gpus_per_node})", paths=ClusterPaths(shape),
                       **hosts.graph_attributes())
    _spread(graph, ecmp, ecmp_seed)
    for host in range(nodes):
        _host(graph, shape, host, hosts, nvlink_bandwidth, nvlink_latency, pcie_bandwidth,
              pcie_latency / 2)
        for nic in range(shape.nics_per_node):
            leaf = shape.leaf(host, nic)
            hosts.add_network_switch(graph, leaf, 1)
            cable(graph, f"n{host}.nic{nic}", leaf, nic_bandwidth, nic_latency, NET_LINK)
    _uplinks(graph, shape, nic_bandwidth, oversubscription, core_oversubscription,
             uplink_latency, hosts)
    return graph


def _host(graph: nx.DiGraph, shape: ClusterShape, host: int, hosts: HostParams,
          nvlink_bandwidth: float, nvlink_latency: float, pcie_bandwidth: float,
          pcie_half_latency: float) -> None:
    """One host: its NVSwitch, GPUs, PCIe switches and NICs, cabled inside."""
    nvswitch = hosts.add_nvswitch(graph, host)
    for i in range(shape.gpus_per_node // shape.gpus_per_pcie_switch):
        graph.add_node(f"n{host}.pcie{i}", kind=SWITCH, tier=0)
    for nic in range(shape.nics_per_node):
        name = f"n{host}.nic{nic}"
        hosts.add_nic(graph, name)
        cable(graph, name, f"n{host}.pcie{nic // shape.nics_per_pcie_switch}", pcie_bandwidth,
              pcie_half_latency, PCIE)
    for local in range(shape.gpus_per_node):
        gpu, pcie, _ = shape.up(host, local)
        graph.add_node(gpu, kind=GPU, rank=host * shape.gpus_per_node + local, host=host,
                       nic=f"n{host}.nic{shape.nic(local)}")
        cable(graph, gpu, nvswitch, nvlink_bandwidth, nvlink_latency, NVLINK)
        cable(graph, gpu, pcie, pcie_bandwidth, pcie_half_latency, PCIE)


def _uplinks(graph: nx.DiGraph, shape: ClusterShape, nic_bandwidth: float,
             oversubscription: float, core_oversubscription: float, latency: float,
             hosts: HostParams) -> None:
    """Leaves to spines (per pod on three tiers), spines to cores; no spines over one leaf.
    Uplinks are sized by the switches' ports, not by how many hosts are populated: a leaf has
    a port for each NIC of a full unit, a spine one for each leaf of a full pod."""
    leaves_of_unit = [sorted({shape.leaf(unit * shape.nodes_per_unit, nic)
                              for nic in range(shape.nics_per_node)})
                      for unit in range(shape.units)]
    if sum(len(leaves) for leaves in leaves_of_unit) < 2:
        return
    ports = _leaf_ports(shape.nodes_per_unit, shape.nics_per_node, shape.rail_optimized)
    leaf_up = ports * nic_bandwidth / (oversubscription * shape.spines)
    pods: dict[int, list[str]] = {}
    for unit, leaves in enumerate(leaves_of_unit):
        pods.setdefault(unit // shape.units_per_pod if shape.three_tier else 0, []).extend(leaves)
    for pod, members in sorted(pods.items()):
        for s in range(shape.spines):
            spine = shape.spine(pod, s)
            hosts.add_network_switch(graph, spine, 2)
            for leaf in members:
                cable(graph, leaf, spine, leaf_up, latency, NET_LINK)
            if shape.three_tier:
                group = shape.cores_of(s)
                spine_down = shape.units_per_pod * shape.leaves_per_unit * leaf_up
                for c in group:
                    hosts.add_network_switch(graph, f"core{c}", 3)
                    cable(graph, spine, f"core{c}",
                          spine_down / (core_oversubscription * len(group)), latency, NET_LINK)


def _leaf_ports(nodes_per_unit: int, nics_per_node: int, rail_optimized: object) -> int:
    """A leaf's ports down: one per NIC of a full unit on its rail, or on its rack."""
    return nodes_per_unit * (1 if rail_optimized else nics_per_node)


def _default_spines(ports: int, oversubscription: float) -> int:
    """Spines when unstated: one per uplink cable of a leaf (ports / oversubscription), as in a
    folded Clos where every leaf has one cable to every spine."""
    return max(1, math.floor(ports / oversubscription + 1e-9))


def cluster_problems(params: Mapping[str, ParamValue]) -> list[tuple[str, str]]:
    """The wiring rules of :func:`cluster` that its parameters' kinds cannot say."""
    def count(key: str) -> int:
        value = params[key]
        assert isinstance(value, int)
        return value

    gpus, per_switch = count("gpus_per_node"), count("gpus_per_pcie_switch")
    nics = count("nics_per_node") or gpus
    problems = []
    if gpus % per_switch:
        problems.append(("gpus_per_pcie_switch", f"expected a divisor of gpus_per_node ({gpus}), "
                                                 f"got {per_switch}"))
    elif nics > gpus:
        problems.append(("nics_per_node", f"expected at most one NIC per GPU ({gpus}), got "
                                          f"{nics}"))
    elif (nics * per_switch) % gpus:
        problems.append(("nics_per_node", f"expected a whole number of NICs behind each PCIe "
                                          f"switch ({gpus // per_switch} switches), got {nics}"))
    ratio = params["oversubscription"]
    assert isinstance(ratio, (int, float))
    ports = _leaf_ports(count("nodes_per_unit") or count("nodes"), nics, params["rail_optimized"])
    spines = count("spines") or _default_spines(ports, float(ratio))
    problems += _spine_problems({**params, "spines": spines}, ports)
    if count("cores") and not count("units_per_pod"):
        problems.append(("cores", "expected no cores without units_per_pod (the third tier "
                                  "joins pods of units)"))
    if count("units_per_pod"):
        cores = count("cores")
        if not cores or cores % spines:
            problems.append(("cores", f"expected a multiple of the spines per pod ({spines}) "
                                      f"with units_per_pod set, got {cores}"))
    return problems
