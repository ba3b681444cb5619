"""The ``nccl_xml`` builder: hosts as NCCL's topology file draws them, where no other builder
does (a PCIe-only server, GPUs cabled to each other by NVLink, NICs shared between GPUs):
the file's own CPUs, PCIe switches, GPUs, NICs and NVLinks, each host's NICs cabled to one
leaf switch. ``topology: {nccl_xml: FILE}`` gives it its parameters (:mod:`.ncclhost`).

Nodes, per host ``h``: ``n{h}.cpu{i}`` (a CPU's root complex, a tier-0 switch, in the file's
order), ``n{h}.pcie{j}`` (PCIe switches, in the file's order), ``n{h}.gpu{r}`` (GPUs by rank),
``n{h}.nic{k}`` (NIC ports by ``dev``; a NIC of several ports is a switch ``n{h}.nicpci{j}``
above them), ``n{h}.nvswitch`` (the NVSwitches, one node as NCCL and the other builders draw
them), and ``leaf``. Links: each ``<pci>``'s link up at its ``link_speed`` x ``link_width``
(latency ``pcie_latency`` / 2, so a GPU reaches a NIC behind its switch in ``pcie_latency``,
as in the ``cluster`` builder); a GPU's NVLinks at their count x the link rate of its
generation, to the NVSwitch (``nvlink_latency``) or another GPU (one direction per
``<nvlink>``, as NCCL adds them; ``2 x nvlink_latency``, a whole NVLink step) or its CPU; CPUs
joined pairwise (NCCL's inter-CPU figure, ``pcie_latency`` / 2: ASSUMED, no figure is cited
for it); NIC ports to the leaf at their speed (``nic_latency``).

Routes (:class:`XmlPaths`): within a host over NVLink where two GPUs share an NVSwitch or a
cable (as NCCL prefers NVLink), else the least-latency path the search finds (through PCIe
switches and CPUs, as NCCL's P2P and SHM transports go); across hosts, each GPU out through its
NIC (:meth:`~.ncclhost.HostShape.of`) and the leaf.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

from simulator.errors import InputError
from simulator.model.ncclhost import HostShape
from simulator.model.ncclxml import read_topology
from simulator.model.parts import (
    GPU,
    NET_LINK,
    NIC,
    NVLINK,
    PCIE,
    SWITCH,
    Count,
    CpuName,
    File,
    Flag,
    HostParams,
    ParamValue,
    Time,
    TransportName,
    cable,
    gpu_place,
)


@dataclass(frozen=True)
class XmlPaths:
    """Routes of :func:`nccl_xml` between two GPUs (module docstring): ``up`` is each local
    GPU's way out (node names without the host prefix), ``cabled`` the (a, b) local pairs
    joined by an NVLink cable a to b, ``switched`` the local GPUs on the NVSwitch."""

    up: tuple[tuple[str, ...], ...]
    cabled: frozenset[tuple[int, int]]
    switched: frozenset[int]

    def __call__(self, src: str, dst: str) -> Sequence[tuple[str, ...]] | None:
        a, b = gpu_place(src), gpu_place(dst)
        if a is None or b is None or a == b:
            return None
        if a[0] != b[0]:
            out = tuple(f"n{a[0]}.{node}" for node in self.up[a[1]])
            back = tuple(f"n{b[0]}.{node}" for node in reversed(self.up[b[1]]))
            return [(*out, "leaf", *back)]
        paths: list[tuple[str, ...]] = []
        if (a[1], b[1]) in self.cabled:
            paths.append((src, dst))
        if a[1] in self.switched and b[1] in self.switched:
            paths.append((src, f"n{a[0]}.nvswitch", dst))
        return paths or None



def nccl_xml(
    file: File,
    nodes: Count = 1,
    nvlink_latency: Time = 300e-9,
    pcie_latency: Time = 500e-9,
    nic_latency: Time = 850e-9,
    nvswitch_reduction: Flag = False,
    nvswitch_reduction_latency: Time = 0.0,
    compute_capability: Count = 0,
    nvlinks: Count = 0,
    transport: TransportName = "ib",
    cpu: CpuName = "intel",
    nccl_net_latency: Time = 0.0,
    sharp: Flag = False,
    sharp_latency: Time = 0.0,
) -> nx.DiGraph:
    """``nodes`` hosts as NCCL's topology ``file`` describes one (module docstring), their NIC
    ports on one leaf switch. The latencies default to the constants of :mod:`.ncclhost`;
    ``nvswitch_reduction``, ``compute_capability``, ``nvlinks``, ``transport``, ``cpu``,
    ``nccl_net_latency`` and ``sharp`` are the ``dgx`` builder's, which ``nccl_xml:`` fills
    from the file (``compute_capability`` and ``nvlinks`` only where NVSwitches join the
    GPUs: the NCCL execution model gives a GPU's whole NVLink rate to each NVLink link, right
    for a link to an NVSwitch alone, as dgx1_v100.yaml explains).

    >>> server = Path(__file__).parents[2] / "tests" / "data" / "nccl" / "pcie_4gpu.xml"
    >>> g = nccl_xml(str(server), nodes=2)
    >>> g.nodes["n1.gpu0"]["rank"], sorted(g.succ["n0.gpu0"])
    (4, ['n0.pcie0'])
    """
    shape = HostShape.of(read_topology(file))
    rate = shape.nvlink_rate()
    names = _names(shape)
    gpus = len(shape.gpus)
    hosts = HostParams(nvswitch_reduction=nvswitch_reduction,
                       nvswitch_reduction_latency=nvswitch_reduction_latency,
                       compute_capability=compute_capability, nvlinks=nvlinks,
                       transport=transport, cpu=cpu, nccl_net_latency=nccl_net_latency,
                       sharp=sharp, sharp_latency=sharp_latency)
    graph = nx.DiGraph(name=f"nccl_xml({Path(file).name} x{nodes})", paths=_paths(shape, names),
                       **hosts.graph_attributes())
    hosts.add_network_switch(graph, "leaf", 1)
    for host in range(nodes):
        def at(key: str, host: int = host) -> str:
            return f"n{host}.{names[key][0]}"

        for name, kind in dict.fromkeys(names.values()):
            if kind == GPU:
                r = int(name[3:])
                graph.add_node(f"n{host}.{name}", kind=GPU, rank=host * gpus + r, host=host,
                               nic=at(shape.paths[r][-1]))
            else:
                graph.add_node(f"n{host}.{name}", kind=kind, **(
                    {"latency": 0.0} if kind == NIC else {"tier": 0}))
        for a, b, bandwidth in shape.tree.edges(data="bandwidth"):
            if bandwidth == float("inf") and at(a) != at(b):  # a port of a NIC of several
                port = shape.ports[int((a if a.startswith("port") else b)[4:])]
                cable(graph, at(a), at(b), port.net.speed, 0.0, PCIE)
            elif at(a) != at(b):  # (a NIC's one port is the NIC itself)
                cable(graph, at(a), at(b), bandwidth, pcie_latency / 2, PCIE)
        for r in range(gpus):
            for (to, far), count in _nvlinks(shape, r).items():
                gpu, far = f"n{host}.gpu{r}", f"n{host}.{far}"
                if to == "gpu":  # one direction per <nvlink>, as NCCL adds them
                    graph.add_edge(gpu, far, bandwidth=count * rate, latency=2 * nvlink_latency,
                                   link=NVLINK)
                    continue
                if to == "nvswitch" and far not in graph:
                    hosts.add_nvswitch(graph, host)
                cable(graph, gpu, far, count * rate, nvlink_latency, NVLINK)
        for k, port in enumerate(shape.ports):
            cable(graph, at(f"port{k}"), "leaf", port.net.speed, nic_latency, NET_LINK)
    return graph


def _nvlinks(shape: HostShape, rank: int) -> dict[tuple[str, str], int]:
    """GPU ``rank``'s NVLink links by what they lead to (``to``, and the node in its host:
    ``nvswitch``, ``gpu{r}`` or ``cpu{i}``), counts summed: every NVSwitch is the one node, and
    NCCL adds up links to one target too (topo.cc ``ncclTopoConnectNodes``)."""
    device = shape.gpus[rank]
    assert device.gpu is not None
    busid = {d.busid.lower(): r for r, d in enumerate(shape.gpus)}
    counts: dict[tuple[str, str], int] = {}
    for link in device.gpu.nvlinks:
        far = {"nvswitch": "nvswitch", "cpu": f"cpu{device.cpu}"}.get(
            link.to, f"gpu{busid.get(link.target.lower())}")
        counts[link.to, far] = counts.get((link.to, far), 0) + link.count
    return counts


def _names(shape: HostShape) -> dict[str, tuple[str, str]]:
    """Each node of the host's tree (``cpu{i}``, ``dev{j}``, ``port{k}``): its name in a host
    (without the ``n{h}.`` prefix) and kind. A NIC of one port is that port's node."""
    topology = shape.topology
    names: dict[str, tuple[str, str]] = {f"cpu{i}": (f"cpu{i}", SWITCH)
                                         for i in range(len(topology.cpus))}
    switches = 0
    for j, device in enumerate(topology.devices):
        if device.kind == "switch":
            names[f"dev{j}"] = (f"pcie{switches}", SWITCH)
            switches += 1
        elif device.kind == "nic" and len(device.nets) > 1:
            names[f"dev{j}"] = (f"nicpci{j}", SWITCH)
    for r, device in enumerate(shape.gpus):
        names[f"dev{topology.devices.index(device)}"] = (f"gpu{r}", GPU)
    for k, port in enumerate(shape.ports):
        names[f"port{k}"] = (f"nic{k}", NIC)
        if port.device is not None and f"dev{port.device}" not in names:
            names[f"dev{port.device}"] = (f"nic{k}", NIC)
    return names


def _paths(shape: HostShape, names: Mapping[str, tuple[str, str]]) -> XmlPaths:
    """The routes of a host (:class:`XmlPaths`) from its shape."""
    up = []
    for path in shape.paths:
        hops: list[str] = []
        for key in path:
            if not hops or hops[-1] != names[key][0]:
                hops.append(names[key][0])
        up.append(tuple(hops))
    busid = {d.busid.lower(): r for r, d in enumerate(shape.gpus)}
    cabled, switched = set(), set()
    for r, device in enumerate(shape.gpus):
        assert device.gpu is not None
        for link in device.gpu.nvlinks:
            if link.to == "gpu":
                cabled.add((r, busid[link.target.lower()]))
            elif link.to == "nvswitch":
                switched.add(r)
    return XmlPaths(tuple(up), frozenset(cabled), frozenset(switched))


def nccl_xml_ranks(params: Mapping[str, ParamValue]) -> int:
    """How many GPUs ``nodes`` hosts of the file hold (0 when it cannot be read)."""
    try:
        topology = read_topology(str(params["file"]))
    except InputError:
        return 0
    nodes = params["nodes"]
    assert isinstance(nodes, int)
    return nodes * len(topology.gpus)


def nccl_xml_problems(params: Mapping[str, ParamValue]) -> list[tuple[str, str]]:
    """What is wrong with the file, each problem as (``file``, its line): the file, the
    element and its line in the message."""
    try:
        HostShape.of(read_topology(str(params["file"]))).nvlink_rate()
    except InputError as error:
        return [("file", str(problem)) for problem in error.problems]
    return []
