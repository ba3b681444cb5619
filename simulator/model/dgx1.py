"""NVIDIA DGX-1 with V100 (DGX-1V): eight GPUs on NVLink 2 in the hybrid cube-mesh, no NVSwitch.

Each V100 has six NVLink 2 links of 25 GB/s per direction, cabled straight to other GPUs:
the eight GPUs sit on the corners of a cube whose twelve edges are NVLink (some doubled), and
two opposite faces, GPUs 0-3 and 4-7, have their diagonals cabled too, so that each quad is
fully connected and GPU i is cabled to GPU i+4 (NVIDIA, "NVIDIA DGX-1 With Tesla V100 System
Architecture", white paper WP-08437-002). Which pairs have one link and which two is
:data:`CUBE_MESH`, read off ``nvidia-smi topo -m`` of a DGX-1 with V100. The double links form
one Hamiltonian cycle (0 3 2 1 5 6 7 4) and the single links another (0 1 3 7 5 4 6 2).

Beside the NVLink, every two GPUs share a PCIe Gen3 switch with one of the four 100 Gb/s EDR
InfiniBand NICs (``PIX`` in the same ``nvidia-smi topo -m``: mlx5_0 with GPUs 0 and 1, and so
on). :func:`dgx1` joins ``nodes`` such machines by their NICs through one leaf switch.

>>> g = dgx1(1, 25e9, 6e-7, 15.75e9, 5e-7, 12.5e9, 8.5e-7)
>>> g.edges["n0.gpu0", "n0.gpu3"]["bandwidth"], g.edges["n0.gpu0", "n0.gpu1"]["links"]
(50000000000.0, 1)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import networkx as nx

from simulator.model.parts import (
    GPU,
    NET_LINK,
    NIC,
    NVLINK,
    PCIE,
    SWITCH,
    Bandwidth,
    Count,
    ParamValue,
    Time,
    cable,
    gpu_place,
)

GPUS = 8
"""GPUs in a DGX-1."""

PCIE_SWITCHES = 4
"""PCIe switches in a DGX-1, GPUs 2s and 2s+1 behind switch s (``PIX`` in nvidia-smi)."""

NIC_COUNTS = (1, 2, 4, 8)
"""NICs a host may have: spread evenly over the PCIe switches, at most one per GPU (the real
machine has 4, one per switch)."""

CUBE_MESH: tuple[tuple[int, int, int], ...] = (
    (0, 1, 1), (0, 2, 1), (0, 3, 2), (0, 4, 2),
    (1, 2, 2), (1, 3, 1), (1, 5, 2),
    (2, 3, 2), (2, 6, 1),
    (3, 7, 1),
    (4, 5, 1), (4, 6, 1), (4, 7, 2),
    (5, 6, 2), (5, 7, 1),
    (6, 7, 2),
)
"""(GPU, GPU, NVLink links) for every cabled pair: ``NV1`` or ``NV2`` in ``nvidia-smi topo -m``
of a DGX-1 with V100, as printed in pytorch/pytorch ``benchmarks/distributed/ddp/README.md``.
Every GPU has 6 links; the 12 pairs not listed have none."""



def _neighbours() -> dict[int, dict[int, int]]:
    table: dict[int, dict[int, int]] = {gpu: {} for gpu in range(GPUS)}
    for a, b, links in CUBE_MESH:
        table[a][b] = table[b][a] = links
    return table


NEIGHBOURS = _neighbours()
"""Each GPU's cabled peers and the NVLink links to each (4 peers, 6 links)."""


@dataclass(frozen=True)
class Dgx1Nics:
    """Where a host's ``count`` NICs sit and which one each GPU uses: ``count // 4`` behind
    every PCIe switch (GPUs spread over them), or with fewer NICs than switches, NIC k behind
    switch 4k / count, used by the GPUs of the 4 / count switches from there on."""

    count: int

    def switch_of(self, nic: int) -> int:
        """The PCIe switch NIC ``nic`` sits behind."""
        if self.count >= PCIE_SWITCHES:
            return nic // (self.count // PCIE_SWITCHES)
        return nic * PCIE_SWITCHES // self.count

    def nic_of(self, gpu: int) -> int:
        """The NIC GPU ``gpu`` sends and receives through."""
        switch = gpu // 2
        if self.count >= PCIE_SWITCHES:
            per_switch = self.count // PCIE_SWITCHES
            return switch * per_switch + (gpu % 2) * per_switch // 2
        return switch * self.count // PCIE_SWITCHES


def nvlink_paths(host: int, a: int, b: int) -> list[tuple[str, ...]]:
    """The shortest NVLink paths between GPUs ``a`` and ``b`` of ``host``: the cable if they
    have one, else the two-hop paths through each GPU cabled to both (every uncabled pair of
    the cube-mesh has two); just ``a`` when a is b."""
    name = [f"n{host}.gpu{gpu}" for gpu in range(GPUS)]
    if a == b:
        return [(name[a],)]
    if b in NEIGHBOURS[a]:
        return [(name[a], name[b])]
    return [(name[a], name[relay], name[b]) for relay in sorted(NEIGHBOURS[a])
            if b in NEIGHBOURS[relay]]


@dataclass(frozen=True)
class Dgx1Paths:
    """Routes of :func:`dgx1` between two GPUs. On one host: over NVLink only, the cable or
    through one GPU cabled to both (NCCL's ``NVB`` path: NVLink through an intermediate GPU),
    never over a PCIe switch two GPUs share (NCCL prefers NVLink). Across hosts: out through
    the GPU's own NIC (:meth:`Dgx1Nics.nic_of`), over PCIe from a GPU behind that NIC's switch,
    reached over NVLink first where the NIC is behind another switch (fewer NICs than
    switches), through the leaf, and in likewise."""

    nics: Dgx1Nics

    def __call__(self, src: str, dst: str) -> Sequence[tuple[str, ...]] | None:
        a, b = gpu_place(src), gpu_place(dst)
        if a is None or b is None or a == b:
            return None
        if a[0] == b[0]:
            return nvlink_paths(a[0], a[1], b[1])
        return [(*up, "leaf", *down[::-1]) for up in self._out(*a) for down in self._out(*b)]

    def _out(self, host: int, gpu: int) -> list[tuple[str, ...]]:
        """The ways from GPU ``gpu`` of ``host`` out to its NIC, ending at the NIC."""
        nic = self.nics.nic_of(gpu)
        switch = self.nics.switch_of(nic)
        tail = (f"n{host}.pcie{switch}", f"n{host}.nic{nic}")
        gateways = (gpu,) if gpu // 2 == switch else (2 * switch, 2 * switch + 1)
        return [(*path, *tail) for gateway in gateways for path in nvlink_paths(host, gpu, gateway)]



def dgx1(
    nodes: Count,
    nvlink_bandwidth: Bandwidth,
    nvlink_latency: Time,
    pcie_bandwidth: Bandwidth,
    pcie_latency: Time,
    nic_bandwidth: Bandwidth,
    nic_latency: Time,
    nics_per_node: Count = 4,
    nic_message_latency: Time = 0.0,
) -> nx.DiGraph:
    """``nodes`` DGX-1 (V100) machines joined by their NICs through one leaf switch.

    **Inside a host**: 8 GPUs cabled to each other in the hybrid cube-mesh (:data:`CUBE_MESH`),
    each cable carrying its links × ``nvlink_bandwidth`` (the bandwidth of **one** NVLink link;
    edge attribute ``links``: 1 or 2) with ``nvlink_latency``; no NVSwitch, so two GPUs without
    a cable talk through a GPU cabled to both. GPUs 2s and 2s+1 sit behind PCIe switch s
    (node ``n{h}.pcie{s}``, tier 0) with the NICs there; each GPU and each NIC has its own PCIe
    link to its switch (``pcie_bandwidth``; ``pcie_latency`` is GPU to NIC, half on each of the
    two links), so the two GPUs sharing a NIC share that NIC's link.

    **NICs**: ``nics_per_node`` of them (1, 2, 4 or 8; the real machine has 4, one per PCIe
    switch), spread evenly over the switches, cabled to the leaf with ``nic_bandwidth`` and
    ``nic_latency``; ``nic_message_latency`` is paid by every transfer crossing a NIC. With
    fewer NICs than switches a GPU without a NIC behind its own switch reaches one over NVLink
    first (:class:`Dgx1Paths`).

    Rank = host × 8 + GPU index (the CUDA device number nvidia-smi prints); GPUs carry
    ``host``. The graph states no ``compute_capability`` or ``nvlinks``: the NCCL execution
    model gives every NVLink link one rate per GPU, as on an NVSwitch, which a cube-mesh of
    single and double cables does not have, so this builder runs ``execution: ideal``.

    >>> g = dgx1(2, 25e9, 6e-7, 15.75e9, 5e-7, 12.5e9, 8.5e-7, nics_per_node=1)
    >>> g.nodes["n1.gpu2"]["rank"], sorted(g.succ["n1.nic0"])
    (10, ['leaf', 'n1.pcie0'])
    """
    nics = Dgx1Nics(nics_per_node)
    graph = nx.DiGraph(name=f"dgx1({nodes}x{GPUS})", paths=Dgx1Paths(nics))
    graph.add_node("leaf", kind=SWITCH, tier=1)
    half = pcie_latency / 2
    for host in range(nodes):
        for gpu in range(GPUS):
            graph.add_node(f"n{host}.gpu{gpu}", kind=GPU, rank=host * GPUS + gpu, host=host)
        for switch in range(PCIE_SWITCHES):
            pcie = f"n{host}.pcie{switch}"
            graph.add_node(pcie, kind=SWITCH, tier=0)
            for gpu in (2 * switch, 2 * switch + 1):
                cable(graph, f"n{host}.gpu{gpu}", pcie, pcie_bandwidth, half, PCIE)
        for nic in range(nics_per_node):
            name = f"n{host}.nic{nic}"
            graph.add_node(name, kind=NIC, latency=float(nic_message_latency))
            cable(graph, name, f"n{host}.pcie{nics.switch_of(nic)}", pcie_bandwidth, half, PCIE)
            cable(graph, name, "leaf", nic_bandwidth, nic_latency, NET_LINK)
        for a, b, links in CUBE_MESH:
            u, v = f"n{host}.gpu{a}", f"n{host}.gpu{b}"
            cable(graph, u, v, links * nvlink_bandwidth, nvlink_latency, NVLINK)
            graph.edges[u, v]["links"] = graph.edges[v, u]["links"] = links
    return graph


def dgx1_ranks(params: Mapping[str, ParamValue]) -> int:
    """GPUs of :func:`dgx1`: 8 per host."""
    nodes = params["nodes"]
    assert isinstance(nodes, int)
    return nodes * GPUS


def dgx1_problems(params: Mapping[str, ParamValue]) -> list[tuple[str, str]]:
    """The NIC count of :func:`dgx1` spreads evenly over its 4 PCIe switches."""
    nics = params["nics_per_node"]
    if nics in NIC_COUNTS:
        return []
    return [("nics_per_node", f"expected 1, 2, 4 or 8 (NICs spread evenly over the "
                              f"{PCIE_SWITCHES} PCIe switches, at most one per GPU), got {nics}")]
