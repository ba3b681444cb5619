"""One host of NCCL's topology file as a builder's parameters: the ``dgx`` builder's (or the
``cluster`` builder's, for a Clos fabric) where the host is what those builders draw, else the
``nccl_xml`` builder's (:mod:`.ncclgraph`), which draws the file's own PCIe tree.

What the file states is taken from it: the GPUs (by rank), their compute capability, NVLink
counts and targets, every PCIe link's speed and width, the NICs and their speeds, the CPU
vendor, the NICs' class (InfiniBand or Ethernet) and advertised latency. What it does not state
comes from the constants below, each cited: an NVLink link's rate (from the GPU's generation),
every latency (NCCL's per-step latencies split over hops as the presets split them), whether an
NVSwitch reduces. Each GPU goes out through its nearest NIC (:meth:`HostShape.of`).

A host is drawn by ``dgx`` when its GPUs all reach every other over NVSwitches alone (the
``dgx`` builder draws them as one NVSwitch, as NCCL merges them into one node, topo.cc
``ncclTopoAddNvLinks``), with the same NVLink count and compute capability, and each GPU has a
NIC of its own, all of one speed and class, over a PCIe path no other GPU's path shares, all of
one bottleneck bandwidth: then a GPU's PCIe path to its NIC is the ``dgx`` builder's one
GPU-NIC cable (``pcie_bandwidth``, the path's narrowest link; ``pcie_latency``, GPU to NIC,
whatever switches it crosses), which carries exactly the same traffic.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import networkx as nx
import numpy as np

from simulator.errors import InputError, Problem
from simulator.model.nccltopo import Device, NcclTopology, Net
from simulator.model.ncclxml import read_topology
from simulator.model.parts import ParamValue
from simulator.model.transport import LATENCY_US, Transport

NVLINK_LATENCY = 300e-9
"""A hop between a GPU and an NVSwitch: half of NCCL's NVLink step latency, two hops a step
(NCCL v2.30.7 tuning.cc hwLat NVLink 0.6 us; dgx_h100.yaml [3]). A GPU-to-GPU NVLink cable is
a whole step, 0.6 us (dgx1_v100.yaml [4])."""
PCIE_LATENCY = 500e-9
"""GPU to NIC over PCIe: half of NCCL's PCI step latency (hwLat PCI 1.0 us), a network step
crossing two such paths (dgx_h100.yaml [3]); each PCIe link takes half of it, as the
``cluster`` builder's GPU-switch and switch-NIC links do."""
NET_LATENCY = 850e-9
"""A NIC-switch cable: (NCCL's NET step 2.7 us - 2 x 0.5 us PCIe) / 2 network hops
(dgx_h100.yaml [3])."""
NVLS_LATENCY = 25e-6
"""An in-switch reduction's wait: NCCL's NVLS latency on NVLink (hwLat NVLS/Simple = 25 us;
dgx_h100.yaml [3])."""
NVLS_FROM_SM = 90
"""NVSwitches reduce in the switch (NVLink SHARP) from the third generation, the H100's on
(NVIDIA H100 Tensor Core GPU Architecture whitepaper, 2022; the A100's second-generation
NVSwitch only switches: dgx_a100.yaml [4])."""


def nvlink_rate(sm: int) -> float | None:
    """One NVLink link's bandwidth per direction (bytes/s) on a GPU of compute capability
    ``sm``, as the presets cite the spec sheets; None where no figure is cited here. NCCL's
    own, achievable per-link figures (topo.h ``SM90_NVLINK_BW`` 20.6 GB/s, ...) are what the
    NCCL execution model applies on top (``compute_capability``, ``nvlinks``)."""
    if sm >= 100:
        return 50e9   # NVLink 5: 1.8 TB/s bidirectional / 18 links (dgx_b200.yaml [1])
    if sm >= 90:
        return 25e9   # NVLink 4: 900 GB/s bidirectional / 18 links (dgx_h100.yaml [1])
    if 80 <= sm < 86:
        return 25e9   # NVLink 3: 600 GB/s bidirectional / 12 links (dgx_a100.yaml [1])
    if 70 <= sm < 80:
        return 25e9   # NVLink 2: 25 GB/s per direction a link (dgx1_v100.yaml [1])
    if 60 <= sm < 70:
        return 20e9   # NVLink 1: 4 links, 160 GB/s bidirectional (NVIDIA Tesla P100 whitepaper)
    return None


def inter_cpu_bandwidth(vendor: str, family: int, model: int) -> float:
    """The link between two CPUs of a host (QPI/UPI, Infinity Fabric), bytes/s: NCCL's own
    figures (topo.h ``*_QPI_BW``, ``AMD_BW``, ``ARM_BW``, chosen by CPU model as topo.cc
    ``ncclTopoAddCpu`` does), the only ones at hand; only a host no builder draws has it."""
    if vendor == "amd":
        return 16e9
    if vendor == "arm":
        return 6e9
    if family == 6 and model >= 0xCF:
        return 40e9  # Emerald Rapids
    if family == 6 and model >= 0x8F:
        return 22e9  # Sapphire Rapids
    return 10e9 if family == 6 and model >= 0x55 else 6e9  # Skylake and later; Broadwell


@dataclass(frozen=True)
class Port:
    """A NIC port (a ``<net>``) and where it hangs: on device ``device`` or on CPU ``cpu``."""

    net: Net
    device: int | None
    cpu: int


@dataclass(frozen=True)
class HostShape:
    """A host's PCIe tree as a graph (``tree``: nodes ``cpu{i}``, ``dev{j}``, ``port{k}``;
    each edge's ``bandwidth``), its GPU devices by rank, its NIC ports by ``dev``, and each
    GPU's NIC port (an index in ``ports``) with the path to it."""

    topology: NcclTopology
    tree: nx.Graph
    gpus: tuple[Device, ...]
    ports: tuple[Port, ...]
    nic_of: tuple[int, ...]
    paths: tuple[tuple[str, ...], ...]

    @classmethod
    def of(cls, topology: NcclTopology) -> HostShape:
        """The shape of ``topology``. Each GPU, in rank order, takes its nearest NIC port
        (fewest links in the tree); among equally near ones, the one the fewest GPUs took so
        far, then the lowest ``dev``: GPUs spread over equally near NICs, as NCCL spreads its
        channels (paths.cc, search.cc pick NICs by path type and bandwidth)."""
        tree = nx.Graph()
        tree.add_nodes_from(f"cpu{i}" for i in range(len(topology.cpus)))
        for a, b in itertools.combinations(range(len(topology.cpus)), 2):
            one = topology.cpus[a]
            tree.add_edge(f"cpu{a}", f"cpu{b}", bandwidth=inter_cpu_bandwidth(
                one.vendor, one.family, one.model))
        for j, device in enumerate(topology.devices):
            up = f"cpu{device.cpu}" if device.parent is None else f"dev{device.parent}"
            tree.add_edge(f"dev{j}", up, bandwidth=device.bandwidth)
        ports = sorted([Port(net, j, d.cpu) for j, d in enumerate(topology.devices)
                        for net in d.nets] + [Port(net, None, i) for i, c in
                                              enumerate(topology.cpus) for net in c.nets],
                       key=lambda port: port.net.dev)
        for k, port in enumerate(ports):
            if port.device is None:  # a NIC on the CPU: no PCIe link stated, its port's speed
                tree.add_edge(f"port{k}", f"cpu{port.cpu}", bandwidth=port.net.speed)
            else:  # the device's link up carries every port of the NIC
                tree.add_edge(f"port{k}", f"dev{port.device}", bandwidth=float("inf"))
        gpus = topology.gpus
        index = {id(device): j for j, device in enumerate(topology.devices)}
        chains = _Chains(topology, ports)
        taken = np.zeros(len(ports), dtype=np.int64)
        devs = np.array([port.net.dev for port in ports], dtype=np.int64)
        nic_of, paths = [], []
        for device in gpus:
            chain = chains.of(f"dev{index[id(device)]}")
            hops, shared = chains.hops(chain)
            near = np.flatnonzero(hops == hops.min())
            best = int(near[np.lexsort((devs[near], taken[near]))[0]])
            taken[best] += 1
            nic_of.append(best)
            paths.append(chains.path(chain, best, int(shared[best])))
        return cls(topology, tree, gpus, tuple(ports), tuple(nic_of), tuple(paths))

    def bottleneck(self, path: tuple[str, ...]) -> float:
        """The narrowest link of a path of the tree."""
        return min(float(self.tree.edges[a, b]["bandwidth"]) for a, b in itertools.pairwise(path))

    def nvswitch_links(self) -> int | None:
        """NVLink links per GPU when every GPU's links all lead to NVSwitches, as many each;
        None otherwise (a GPU without NVLink, one linked to another GPU or to the CPU)."""
        counts = set()
        for device in self.gpus:
            assert device.gpu is not None
            links = device.gpu.nvlinks
            if not links or any(link.to != "nvswitch" for link in links):
                return None
            counts.add(sum(link.count for link in links))
        return counts.pop() if len(counts) == 1 else None

    def nvlink_rate(self) -> float:
        """One NVLink link's bandwidth on these GPUs (:func:`nvlink_rate`); InputError naming
        the first ``<nvlink>`` where no figure is cited for their generation (0.0 without any
        NVLink)."""
        first = self.gpus[0].gpu
        assert first is not None
        links = [link for d in self.gpus if d.gpu is not None for link in d.gpu.nvlinks]
        rate = nvlink_rate(first.sm)
        if links and rate is None:
            raise InputError([Problem(self.topology.file, f"<nvlink> at line {links[0].line}", (
                f"no NVLink rate is known here for sm {first.sm}; expected a GPU of sm 60 to 85, "
                "or 90 and up"))])
        return rate or 0.0

    def why_not_dgx(self) -> str:
        """Why the ``dgx`` builder does not draw this host ('' when it does)."""
        if self.nvswitch_links() is None:
            return "its GPUs are not all joined by NVSwitches alone, with as many links each"
        if len(self.ports) != len(self.gpus):
            return f"it has {len(self.ports)} NIC ports for {len(self.gpus)} GPUs, not one each"
        if len({(p.net.speed, p.net.ethernet, p.net.verbs) for p in self.ports}) > 1:
            return "its NICs differ in speed or class"
        if len(set(self.nic_of)) != len(self.gpus):
            return "two GPUs share their nearest NIC"
        crossed = Counter(frozenset(link) for path in self.paths
                          for link in set(map(frozenset, itertools.pairwise(path))))
        if any(count > 1 for count in crossed.values()):
            return "two GPUs' PCIe paths to their NICs share a link"
        if len({self.bottleneck(path) for path in self.paths}) > 1:
            return "its GPUs' PCIe paths to their NICs differ in bandwidth"
        return ""


class _Chains:
    """Each node of a host's tree as its chain from its CPU (``cpu{i}``, then each ``dev{j}``
    down to it), the NIC ports' held side by side as one array, so that a GPU's links to every
    port are counted at once: within a CPU, down from the last node both chains share; across
    CPUs, up to its CPU, over to the other (the CPUs are joined pairwise) and down. The tree is
    a forest below the CPUs, so each such path is the only shortest one, the one a
    breadth-first search finds (as one did per GPU, which cost GPUs x nodes: 62 s at 2,000
    GPUs; this costs GPUs x ports x depth, in numpy)."""

    def __init__(self, topology: NcclTopology, ports: list[Port]) -> None:
        self.topology = topology
        self.known: dict[str, tuple[str, ...]] = {}
        self.ports = [(*self.of(f"dev{port.device}"), f"port{k}") if port.device is not None
                      else (f"cpu{port.cpu}", f"port{k}") for k, port in enumerate(ports)]
        ids: dict[str, int] = {}
        width = max((len(chain) for chain in self.ports), default=1)
        self.table = np.full((len(ports), width), -1, dtype=np.int64)
        for k, chain in enumerate(self.ports):
            self.table[k, :len(chain)] = [ids.setdefault(node, len(ids)) for node in chain]
        self.ids = ids
        self.lengths = np.array([len(chain) for chain in self.ports], dtype=np.int64)

    def of(self, node: str) -> tuple[str, ...]:
        """The chain of ``dev{j}`` from its CPU down to it."""
        if node not in self.known:
            chain, j = [node], int(node[3:])
            while (parent := self.topology.devices[j].parent) is not None:
                chain.append(f"dev{parent}")
                j = parent
            chain.append(f"cpu{self.topology.devices[j].cpu}")
            self.known[node] = tuple(reversed(chain))
        return self.known[node]

    def hops(self, chain: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        """The links from the end of ``chain`` to each port, and how many nodes of their
        chains they share (0: under another CPU)."""
        width = self.table.shape[1]
        mine = np.full(width, -2, dtype=np.int64)
        head = [self.ids.get(node, -2) for node in chain[:width]]
        mine[:len(head)] = head
        shared = np.cumprod(self.table == mine, axis=1).sum(axis=1)
        apart = np.where(shared > 0, len(chain) + self.lengths - 2 * shared,
                         len(chain) + self.lengths - 1)
        return apart, shared

    def path(self, chain: tuple[str, ...], port: int, shared: int) -> tuple[str, ...]:
        """The nodes from the end of ``chain`` to port ``port``, sharing ``shared`` of their
        chains: up to the last shared node (or to its CPU), then down."""
        down = self.ports[port]
        if shared:
            return tuple(reversed(chain[shared - 1:])) + down[shared:]
        return tuple(reversed(chain)) + down


@dataclass(frozen=True)
class Mapped:
    """A host mapped onto a builder: its ``kind`` and parameters, and why ``dgx`` does not
    draw it where it does not (``why``)."""

    kind: str
    params: Mapping[str, ParamValue]
    why: str = ""


CLOS_KEYS = ("nodes_per_unit", "rail_optimized", "spines", "oversubscription", "units_per_pod",
             "cores", "core_oversubscription", "uplink_latency", "ecmp", "ecmp_seed")
"""The ``cluster`` builder's network parameters a ``fabric: {kind: clos}`` may give."""


def host_builder(file: str, nodes: int, fabric: Mapping[str, ParamValue],
                 clos: bool = False) -> Mapped:
    """The builder and parameters of ``nodes`` hosts as ``file`` describes one, joined by one
    leaf switch (``dgx``; ``nccl_xml`` where ``dgx`` does not draw the host), or by the Clos
    network of the ``cluster`` builder with ``clos`` (the host must then be one ``dgx``
    draws). ``fabric`` holds builder parameters: ``nic_latency``, ``transport``, ``sharp``,
    ``sharp_latency`` and, with ``clos``, those of :data:`CLOS_KEYS`. InputError naming the
    file's element and line where the file is wrong."""
    shape = HostShape.of(read_topology(file))
    params = host_params(shape, fabric)
    why = shape.why_not_dgx()
    if why:
        params.pop("gpus_per_node")
        for key in ("nvlink_bandwidth", "pcie_bandwidth", "nic_bandwidth"):
            params.pop(key)
        return Mapped("nccl_xml", {"file": file, "nodes": nodes, **params}, why)
    params["nodes"] = nodes
    if not clos:
        return Mapped("dgx", params)
    uplink = fabric.get("uplink_latency", params["nic_latency"])
    return Mapped("cluster", {**params, **{key: fabric[key] for key in CLOS_KEYS if key in fabric},
                              "uplink_latency": uplink})


def host_params(shape: HostShape, fabric: Mapping[str, ParamValue]) -> dict[str, ParamValue]:
    """The parameters the ``dgx`` builder takes, from the file and the cited constants (the
    bandwidths only meaningful where :meth:`HostShape.why_not_dgx` is '')."""
    first = shape.gpus[0].gpu
    assert first is not None
    links, rate = shape.nvswitch_links(), shape.nvlink_rate()
    port = shape.ports[shape.nic_of[0]].net
    transport = str(fabric.get("transport", _transport(shape)))
    cpu = shape.topology.cpus[0].vendor
    advertised = max(p.net.latency_us for p in shape.ports)
    reduction = bool(links) and first.sm >= NVLS_FROM_SM
    return {
        "gpus_per_node": len(shape.gpus),
        "nvlink_bandwidth": (links or 0) * rate,
        "nvlink_latency": NVLINK_LATENCY,
        "pcie_bandwidth": shape.bottleneck(shape.paths[0]),
        "pcie_latency": PCIE_LATENCY,
        "nic_bandwidth": port.speed,
        "nic_latency": fabric.get("nic_latency", NET_LATENCY),
        "nvswitch_reduction": reduction,
        "nvswitch_reduction_latency": NVLS_LATENCY if reduction else 0.0,
        "compute_capability": first.sm if links else 0,
        "nvlinks": links or 0,
        "transport": transport,
        "cpu": cpu,
        # the plugin's advertised latency is NCCL's latencyInter (search.cc: graph->latencyInter
        # = net->net.latency), which the transport's own figure already holds in part
        "nccl_net_latency": max(0.0, advertised - LATENCY_US[Transport(transport)]) * 1e-6,
        "sharp": fabric.get("sharp", False),
        "sharp_latency": fabric.get("sharp_latency", 0.0),
    }


def _transport(shape: HostShape) -> str:
    """InfiniBand NICs run NCCL's verbs transport (``ib``); Ethernet ones RoCE through the same
    transport where the port has a GUID (a verbs device), else NCCL's sockets (``tcp``)."""
    port = shape.ports[shape.nic_of[0]].net
    if not port.ethernet:
        return Transport.IB.value
    return Transport.ROCE.value if port.verbs else Transport.TCP.value
