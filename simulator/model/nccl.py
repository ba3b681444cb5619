"""NCCL's own cost model: the time NCCL predicts for each algorithm and protocol, from which it
picks what to run (``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``, NVIDIA/nccl tag
v2.30.7-1, commit 73cf1122, ``src/graph/tuning.cc``).

Every constant is taken from docs/reference/nccl-model.md (§1.1 latencies, §1.2 bandwidth caps,
§1.3-§1.5 the formulas), which summarises that file; tests/test_nccl.py checks the tables here
against the CSV files beside it, and the predicted times against the worked examples there.
The model needs what NCCL's topology search found (:class:`Graph`: channels and per-channel
bandwidth per algorithm), which is not in the topology graph: a :class:`System` states it.

Scope: AllReduce with Ring, Tree, NVLS and NVLSTree, the algorithms a node of NVLink GPUs with a
NIC each can run, CollNetDirect and CollNetChain where the network reduces in its switches
(InfiniBand SHARP, with NVLS across nodes beside them), and ReduceScatter and AllGather with Ring
and PAT (one GPU per node); NVLS's and CollNet's ReduceScatter and AllGather are not
modelled. Times are in µs and bandwidths in GB/s (10^9 B/s) as in tuning.cc.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from simulator.model.collective import Collective


class NcclAlgorithm(Enum):
    """NCCL's algorithms, in tuning.cc's index order (``nccl_tuner.h``)."""

    TREE = "Tree"
    RING = "Ring"
    COLLNET_DIRECT = "CollNetDirect"
    COLLNET_CHAIN = "CollNetChain"
    NVLS = "NVLS"
    NVLS_TREE = "NVLSTree"
    PAT = "PAT"


class Protocol(Enum):
    """NCCL's protocols: LL (8 data bytes per 16-byte line with its flag), LL128 (120 of every
    128 bytes), Simple (all bytes, with a synchronisation per step)."""

    LL = "LL"
    LL128 = "LL128"
    SIMPLE = "Simple"


class Version(Enum):
    """Which NCCL's tuner is modelled: its cost model changed at 2.28 (``src/graph/tuning.cc``).

    - ``2.26``: NCCL 2.26 and 2.27 (tuning.cc of v2.26.2-1 to v2.27.7-1): NVLS and NVLSTree
      rated at min(bwIntra, bwInter) per channel (NVLSTree's bwInter halved beyond two nodes),
      × 5/6 to an algorithm bandwidth; NVLSTree's network step 14 µs; Blackwell's per-channel
      caps twice Hopper's.
    - ``2.30``: NCCL 2.30.x (v2.30.3 to v2.30.7), the default: NVLS and NVLSTree from
      ``nvlsEfficiency`` and NVLSTree's own caps (``perChMaxNVLSTreeBws``), × nRanks/nsteps;
      NVLSTree's network step 20.9 µs; Blackwell's own caps, and its NVLSTree tree correction
      on x86. On Hopper and Ampere the tuner is the same from 2.28.9; Blackwell's caps and
      correction moved between 2.28.9 and 2.30.3, and 2.28.3-2.28.7 (nvlsEfficiency with the
      14 µs step) match neither version here.

    Only the tuner (NCCL's pick, its protocol, the time it predicts) follows the version; the
    execution model's costs are the latest (2.30.7's), the best estimate of what the kernels do.
    """

    V2_26 = "2.26"
    V2_30 = "2.30"


LATEST = Version.V2_30
"""The tuner modelled unless a scenario says otherwise (``nccl: {version: ...}``)."""


class Hardware(Enum):
    """The kind of path a step crosses, which sets its latency (tuning.cc ``hwLat``)."""

    NVLINK = "NVLink"
    PCI = "PCI"
    NET = "NET"


class Arch(Enum):
    """GPU generation (compute capability), which selects rows of the caps."""

    VOLTA = 70
    AMPERE = 80
    HOPPER = 90
    BLACKWELL = 100


class CpuVendor(Enum):
    """The host CPU, which selects the multi-node LL cap and the network overhead (NCCL's
    ``cpuVendor`` on x86, and its ``cpuArch`` where that is ARM)."""

    INTEL = "intel"  # and any other non-AMD x86 CPU
    AMD = "amd"
    ARM = "arm"  # NVIDIA Grace (GB200): not x86, the non-AMD LL row and network overhead


_T, _R, _N, _NT = NcclAlgorithm.TREE, NcclAlgorithm.RING, NcclAlgorithm.NVLS, NcclAlgorithm.NVLS_TREE
_P = NcclAlgorithm.PAT
_CD, _CC = NcclAlgorithm.COLLNET_DIRECT, NcclAlgorithm.COLLNET_CHAIN
_LL, _LL128, _S = Protocol.LL, Protocol.LL128, Protocol.SIMPLE

BASE_LATENCY_US: Mapping[tuple[NcclAlgorithm, Protocol], float] = {
    (_T, _LL): 6.8, (_T, _LL128): 14.0, (_T, _S): 8.4,
    (_R, _LL): 6.6, (_R, _LL128): 14.0, (_R, _S): 8.4,
    (_N, _S): 0.0, (_NT, _S): 0.0, (_P, _S): 8.0, (_CD, _S): 0.0, (_CC, _S): 0.0,
}
"""``baseLat``: a collective's fixed cost per algorithm and protocol (nccl-model.md §1.1)."""

HW_LATENCY_US: Mapping[tuple[Hardware, NcclAlgorithm, Protocol], float] = {
    (Hardware.NVLINK, _T, _LL): 0.6, (Hardware.NVLINK, _T, _LL128): 1.25, (Hardware.NVLINK, _T, _S): 4.0,
    (Hardware.NVLINK, _R, _LL): 0.6, (Hardware.NVLINK, _R, _LL128): 1.9, (Hardware.NVLINK, _R, _S): 3.4,
    (Hardware.NVLINK, _N, _S): 25.0, (Hardware.NVLINK, _NT, _S): 25.0, (Hardware.NVLINK, _P, _S): 4.0,
    (Hardware.PCI, _T, _LL): 1.0, (Hardware.PCI, _T, _LL128): 1.9, (Hardware.PCI, _T, _S): 4.0,
    (Hardware.PCI, _R, _LL): 1.0, (Hardware.PCI, _R, _LL128): 2.5, (Hardware.PCI, _R, _S): 5.7,
    (Hardware.PCI, _N, _S): 0.0, (Hardware.PCI, _NT, _S): 0.0, (Hardware.PCI, _P, _S): 4.0,
    (Hardware.NET, _T, _LL): 5.0, (Hardware.NET, _T, _LL128): 8.5, (Hardware.NET, _T, _S): 14.0,
    (Hardware.NET, _R, _LL): 2.7, (Hardware.NET, _R, _LL128): 4.0, (Hardware.NET, _R, _S): 14.0,
    (Hardware.NET, _N, _S): 18.0, (Hardware.NET, _NT, _S): 20.9, (Hardware.NET, _P, _S): 14.0,
    (Hardware.NVLINK, _CD, _S): 3.7, (Hardware.NVLINK, _CC, _S): 2.8,
    (Hardware.PCI, _CD, _S): 3.7, (Hardware.PCI, _CC, _S): 2.8,
    (Hardware.NET, _CD, _S): 31.0, (Hardware.NET, _CC, _S): 30.0,
}
"""``hwLat``: the latency of one step over each kind of path (nccl-model.md §1.1; PAT's and
CollNet's columns from tuning.cc's ``ncclTunerConstantsDefaults``, Simple only: CollNetDirect
3.7 µs on NVLink and PCI and 31 on the network, CollNetChain 2.8 and 30, the same from v2.26.2
to v2.30.7)."""

COLLNET_ARITY_US = 0.4
"""CollNetDirect's latency pays 0.4 µs per other GPU of a node, each way (tuning.cc: "Add 0.4 us
arity serialization latency")."""

COLLNET_DIRECT_SHARE_SM90 = 0.85
"""CollNetDirect's bus bandwidth × 0.85 from SM90 on (tuning.cc: ``if (minCompCap >= 90) busBw
*= .85``)."""

PAT_BANDWIDTH_SHARE = 0.75
"""PAT's bus bandwidth is its graph's × 0.75 (tuning.cc ``ncclTopoTuneModel``:
``if (a == NCCL_ALGO_PAT) busBw *= .75``)."""

PAT_LEVEL_SHARE = 1 / 3.5
"""PAT's latency pays interLat / 3.5 per level of log2i(nNodes) (tuning.cc, "Log latency")."""

PAT_PER_RANK_US = 2.8
"""PAT's latency also grows by 2.8 µs per rank (tuning.cc: "Still a linear part")."""

_NODES = (1, 2, 3)
"""Column of the caps: one node, two nodes, three or more."""

LL_MAX_BW_GBPS: Mapping[Arch | CpuVendor, tuple[float, float, float]] = {
    Arch.VOLTA: (39.0, 39.0, 20.4), Arch.AMPERE: (87.7, 22.5, 19.0),
    Arch.HOPPER: (141.0, 45.0, 35.0), Arch.BLACKWELL: (282.0, 90.0, 70.0),
    CpuVendor.INTEL: (39.0, 39.0, 20.4), CpuVendor.AMD: (87.7, 22.5, 19.0),
    CpuVendor.ARM: (39.0, 39.0, 20.4),
}
"""``llMaxBws``, a total (not per channel) cap on LL. On one node its row is the GPU
generation; on several it is the CPU vendor, read off the Volta (Intel or other) and Ampere
(AMD) rows (nccl-model.md §1.2, "the llMaxBws row choice is a trap"); tuning.cc takes the AMD
row for an AMD (or mixed) CPU and the first for any other, ARM included."""

PER_CHANNEL_MAX_RING_LL128_GBPS: Mapping[Arch, tuple[float, float, float]] = {
    Arch.VOLTA: (20.0, 20.0, 20.0), Arch.AMPERE: (20.0, 20.0, 20.0),
    Arch.HOPPER: (36.7, 36.7, 36.7), Arch.BLACKWELL: (40.0, 40.0, 40.0),
}
PER_CHANNEL_MAX_TREE_LL128_GBPS: Mapping[Arch, tuple[float, float, float]] = {
    Arch.VOLTA: (20.0, 20.0, 20.0), Arch.AMPERE: (20.0, 20.0, 20.0),
    Arch.HOPPER: (36.7, 36.7, 29.0), Arch.BLACKWELL: (55.6, 31.67, 20.0),
}
PER_CHANNEL_MAX_TREE_GBPS: Mapping[Arch, tuple[float, float, float]] = {
    Arch.VOLTA: (26.5, 18.5, 10.0), Arch.AMPERE: (24.0, 23.6, 17.8),
    Arch.HOPPER: (38.7, 41.4, 36.0), Arch.BLACKWELL: (70.0, 42.8, 24.0),
}
PER_CHANNEL_MAX_NVLS_TREE_GBPS: Mapping[Arch, tuple[float, float, float]] = {
    Arch.VOLTA: (26.5, 18.5, 10.0), Arch.AMPERE: (24.0, 23.6, 17.8),
    Arch.HOPPER: (0.0, 57.7, 45.5), Arch.BLACKWELL: (0.0, 96.0, 80.0),
}
"""Per-channel caps, multiplied by the channel count (nccl-model.md §1.2)."""

NVLS_EFFICIENCY: Mapping[Arch, float] = {
    Arch.VOLTA: 0.0, Arch.AMPERE: 0.0, Arch.HOPPER: 0.85, Arch.BLACKWELL: 0.74,
}
"""``nvlsEfficiency``: the share of the NVLS graph's bandwidth in-switch reduction achieves."""

TREE_CORRECTION: Mapping[Protocol, tuple[float, ...]] = {
    _LL: (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
          1.0, 1.0, 1.0, 1.0),
    _LL128: (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9,
             .9, 1.0, 1.0, 1.0),
    _S: (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9,
         .9, .9),
}
"""``treeCorrectionFactor[3][24]`` of v2.30.7: Tree AllReduce's bandwidth is multiplied by entry
log2(nBytes / 64) (entries 0..22, so 64 B up to 512 MiB) "because trees are not perfectly
sticking to the model for medium sizes"."""

NET_OVERHEAD_US: Mapping[CpuVendor, float] = {CpuVendor.INTEL: 1.0, CpuVendor.AMD: 2.0,
                                              CpuVendor.ARM: 1.0}
"""``getNetOverhead``: a network step's CPU cost on several nodes (×3 for Simple): 2 µs on an
AMD x86 CPU, 1 µs on an Intel one and on any other (ARM)."""

RING_PLATEAU = {Arch.VOLTA: 1.9, Arch.AMPERE: 1.4, Arch.HOPPER: 1.4, Arch.BLACKWELL: 1.4}
"""Multi-node Ring Simple AllReduce latency factor (the "plateau effect of ring": 1.9 before
SM80, 1.4 from it), applied once a rank's share per channel reaches 64 bytes."""


@dataclass(frozen=True)
class Graph:
    """What NCCL's topology search found for one algorithm: its channels, each channel's bandwidth
    inside a node and across nodes (GB/s), the kind of path inside a node, the NIC's advertised
    latency, and whether a tree uses the plain TREE pattern (Tree bandwidth ×0.85)."""

    channels: int
    bw_intra_GBps: float
    bw_inter_GBps: float
    intra: Hardware = Hardware.NVLINK
    latency_inter_us: float = 0.0
    plain_tree: bool = False


@dataclass(frozen=True)
class System:
    """NCCL's view of a communicator: ranks, nodes, GPU generation, host CPU, and the graph it
    found for each algorithm it may run (an algorithm without a graph is not available)."""

    ranks: int
    nodes: int
    arch: Arch
    graphs: Mapping[NcclAlgorithm, Graph] = field(default_factory=dict)
    cpu: CpuVendor = CpuVendor.INTEL
    ll128: bool = True  # enabled by default where the intra path is NVLink and the NIC close
    version: Version = LATEST
    collnet: bool = False
    """Whether CollNet is on: the network reduces in its switches (SHARP, with NCCL's
    ``NCCL_COLLNET_ENABLE=1`` and its plugin), which also enables NVLS across nodes."""

    @property
    def per_node(self) -> float:
        """Ranks per node (``ppn``)."""
        return self.ranks / self.nodes

    def _column(self) -> int:
        return min(self.nodes, 3) - 1


@dataclass(frozen=True)
class Choice:
    """An algorithm and protocol, and the time NCCL's model predicts for them (µs)."""

    algorithm: NcclAlgorithm
    protocol: Protocol
    time_us: float


ALLREDUCE_CANDIDATES = (*((a, p) for a in (_T, _R) for p in Protocol), (_CD, _S), (_CC, _S),
                        (_N, _S), (_NT, _S))
"""AllReduce's (algorithm, protocol) pairs this model covers; NVLS and CollNet run Simple only
(tuning.cc: CollNet's other protocols get ``busBw = 0``, "Not used")."""

GATHER_CANDIDATES = (*((_R, p) for p in Protocol), (_P, _S))
"""ReduceScatter's and AllGather's pairs this model covers: Ring, and PAT with Simple only
(tuning.cc skips PAT's other protocols; NVLS and CollNetDirect are not modelled)."""

CANDIDATES: Mapping[Collective, tuple[tuple[NcclAlgorithm, Protocol], ...]] = {
    Collective.ALLREDUCE: ALLREDUCE_CANDIDATES, Collective.REDUCE_SCATTER: GATHER_CANDIDATES,
    Collective.ALLGATHER: GATHER_CANDIDATES}
"""The pairs per collective, in tuning.cc's order (ties go to the earlier)."""


def steps(collective: Collective, ranks: int) -> int:
    """tuning.cc's ``nsteps``: 2(p-1) for AllReduce, p-1 for ReduceScatter and AllGather."""
    return 2 * (ranks - 1) if collective is Collective.ALLREDUCE else ranks - 1


def _graph(system: System, algorithm: NcclAlgorithm) -> Graph | None:
    """The graph an algorithm runs on: PAT's is the tree's, and NVLS's across nodes the one
    NVLSTree runs on, as both run on NCCL's NVLS graph, which the search builds from the
    network there (src/init.cc: ``graphs[]``; :data:`DEFAULT_GRAPHS`)."""
    if algorithm is _N and system.nodes > 1:
        return system.graphs.get(_NT)
    return system.graphs.get(_T if algorithm is _P else algorithm)


@dataclass(frozen=True)
class Enabled:
    """The algorithms and protocols NCCL's tuner may choose from: all of them by default, fewer
    where ``NCCL_ALGO`` / ``NCCL_PROTO`` say so (tuning.cc ``algoEnable``, ``protoEnable``; their
    list syntax is :mod:`simulator.model.nccl_env`'s)."""

    algorithms: frozenset[NcclAlgorithm] = frozenset(NcclAlgorithm)
    protocols: frozenset[Protocol] = frozenset(Protocol)

    def allows(self, algorithm: NcclAlgorithm, protocol: Protocol) -> bool:
        """Whether the tuner may pick ``algorithm`` with ``protocol``."""
        return algorithm in self.algorithms and protocol in self.protocols


EVERYTHING = Enabled()
"""NCCL's defaults: no algorithm or protocol ruled out."""


DEFAULT_GRAPHS: Mapping[Arch, Mapping[NcclAlgorithm, Graph]] = {
    Arch.HOPPER: {_R: Graph(12, 30.0, 30.0), _T: Graph(12, 30.0, 30.0), _N: Graph(16, 24.0, 24.0),
                  _NT: Graph(8, 40.0, 48.0)},
    Arch.AMPERE: {_R: Graph(12, 20.0, 20.0), _T: Graph(12, 20.0, 20.0)},
    Arch.BLACKWELL: {_R: Graph(16, 45.0, 45.0), _T: Graph(16, 45.0, 45.0),
                     _N: Graph(24, 30.0, 30.0), _NT: Graph(8, 80.0, 48.0)},
}
"""ASSUMED graphs of NCCL's topology search on a node of 8 GPUs on NVSwitch: no published log
states them (docs/reference/published-measurements.md §2.4). Ring and tree: 12 channels ×
30 GB/s (Hopper, 18 × 20.6 = 370.8 GB/s of NVLink) or × 20 GB/s (Ampere, 12 × 20), search.cc's
speeds after channel duplication; NVLS: 16 channels (NCCL_NVLS_NCHANNELS) × 24 GB/s. With them
the model picks what NCCL is reported to pick (tests/test_fidelity.py).

NVLSTree: NCCL's tuner rates it on the NVLS graph (src/init.cc: ``graphs[] = {tree, ring,
collNetDirect, collNetChain, nvls, nvls, tree}``), which on several nodes the search
(src/graph/search.cc) builds from the network: one channel per head, a GPU and its NIC
(``maxChannels = min(NCCL_MAX_NVLS_ARITY, GPUs)``: 8 on a DGX H100); bwIntra 40 GB/s, the
largest of sm90SpeedArrayInter's speeds that NVLink carries when each GPU is the head of one
channel and a member of seven (``ncclTopoSearchTryNvls`` takes twice the speed on the head:
9 × 40 ≤ 18 × 20.6 = 370.8 GB/s, 9 × 42 is not); bwInter 48 GB/s, the speed array's top, which
a 400 Gb/s NIC carries (pass 2 raises bwInter alone). ASSUMED, derived from search.cc: no
published multi-node log prints this graph. With it (and the multi-node Ring and Tree graphs of
``execution._across``) the tuner picks NVLSTree on 2 × 8 H100 from 4 MiB (Tree below), as
NCCL's default is reported to be across H100 nodes (nccl-tests#309).

Blackwell (SM100), derived the same way for a host of 8 GPUs on NVLink 5 (DGX B200: 18 links ×
SM100_NVLINK_BW 40.1 GB/s = 721.8 GB/s a GPU, topo.h), ASSUMED: no published log prints them.
Ring and tree: sm100SpeedArrayIntra's top speed, 90 GB/s, on 8 channels (8 × 90 = 720 ≤ 721.8),
duplicated by ``ncclTopoDupChannels`` into 16 × 45. NVLS: by analogy with the Hopper graph,
whose 16 channels are NVLS's CTAs (``NVLS_NCHANNELS_SM90``, src/transport/nvls.cc) at the speed
that fills NVLink, 24 channels (``NVLS_NCHANNELS_SM100_NVL``) at 30 GB/s (24 × 30 = 720); the
search itself caps the NVLS graph at min(NCCL_MAX_NVLS_ARITY, GPUs) heads (8 × 80 by the rule
below), which the Hopper graph, kept because it reproduces the measured H200 picks, does not
follow either. NVLSTree: 8 heads; bwIntra 80 GB/s, the largest of sm100SpeedArrayInter's
speeds with 9 × 80 ≤ 721.8 (each GPU the head of one channel and a member of seven, as on
Hopper); bwInter 48 GB/s, the largest a 400 Gb/s NIC carries. The GB200 NVL72 rack (72 GPUs in
one NVLink domain) is given the same graphs: its NVLS search would find 32 heads
(``NCCL_MAX_NVLS_ARITY``) at 20 GB/s, which this per-generation table does not tell apart."""


def bandwidth_GBps(system: System, algorithm: NcclAlgorithm, protocol: Protocol,
                   collective: Collective = Collective.ALLREDUCE) -> float:
    """The algorithm bandwidth NCCL's model gives ``collective`` (0 when it cannot run), per
    nccl-model.md §1.3: the graph's bus bandwidth, its refinements, then algbw (Ring's
    × nRanks/nsteps; PAT's stays its bus bandwidth, as tuning.cc converts only Ring's for
    ReduceScatter and AllGather). PAT runs only with one GPU per node (``ncclPatEnable``)."""
    graph = _graph(system, algorithm)
    if graph is None or (algorithm, protocol) not in CANDIDATES.get(collective, ()):
        return 0.0
    if algorithm is _P:
        if system.nodes != system.ranks:
            return 0.0
        bw = graph.bw_intra_GBps if system.nodes <= 2 else graph.bw_inter_GBps
        return graph.channels * bw * PAT_BANDWIDTH_SHARE
    if algorithm in (_N, _NT) and not _nvls_enabled(system, algorithm, graph):
        return 0.0
    if algorithm in (_CD, _CC):
        return _collnet_GBps(system, algorithm, graph)
    if protocol is _LL128 and not system.ll128:
        return 0.0
    column, arch, channels = system._column(), system.arch, graph.channels
    bw = graph.bw_intra_GBps if system.nodes <= 2 else graph.bw_inter_GBps
    old = system.version is Version.V2_26
    if algorithm in (_N, _NT) and old:  # v2.26.2 tuning.cc: no nvlsEfficiency, no NVLSTree cap
        bw = min(graph.bw_intra_GBps, graph.bw_inter_GBps / (2 if algorithm is _NT
                                                             and system.nodes > 2 else 1))
    elif algorithm in (_N, _NT):
        intra = graph.bw_intra_GBps * NVLS_EFFICIENCY[arch] * (channels - 1) / channels
        intra *= 2.0  # AllReduce pipelines two operations
        inter = graph.bw_inter_GBps * (2 if algorithm is _NT and system.nodes <= 2 else 1)
        bw = min(intra, inter, PER_CHANNEL_MAX_NVLS_TREE_GBPS[arch][column]
                 if algorithm is _NT else math.inf)
    bus = channels * bw
    ll_max = LL_MAX_BW_GBPS[arch if system.nodes == 1 else system.cpu][column]
    if algorithm is _R and protocol is _LL:
        bus = min(ll_max, 0.5 * bus)
    if algorithm is _R and protocol is _LL128:
        bus = min(0.92 * bus, channels * _cap(system, PER_CHANNEL_MAX_RING_LL128_GBPS))
    if algorithm is _T:
        bus = min(0.92 * bus, channels * _cap(system, PER_CHANNEL_MAX_TREE_GBPS))
        if protocol is _LL:
            bus = min(bus / 3.8, ll_max)
        if protocol is _LL128:
            bus = min(bus * (7 / 9 if system.nodes == 1 else 120 / 128),
                      channels * _cap(system, PER_CHANNEL_MAX_TREE_LL128_GBPS))
        if graph.plain_tree:
            bus *= 0.85
        return bus * 0.5
    if algorithm in (_N, _NT) and old:
        return bus * 5 / 6  # v2.26.2: "ratio *= 5.0/6.0" for NVLS and NVLSTree
    return bus * system.ranks / steps(collective, system.ranks)  # Ring, NVLS, NVLSTree


def _collnet_GBps(system: System, algorithm: NcclAlgorithm, graph: Graph) -> float:
    """CollNet's algorithm bandwidth (tuning.cc, ``ncclTopoTuneModel``): its graph's channels ×
    bwIntra (CollNet's is rated inside the node, whatever the node count); CollNetDirect's
    divided by the GPU/NIC factor ppn/channels - (that - 1)/2 ("Collnet+Direct requires all
    GPUs to have a local NIC to work at full speed") and × 0.85 from SM90; × 0.5 to an
    algorithm bandwidth, as the Tree's. 0 without CollNet or on one node."""
    if not system.collnet or system.nodes < 2:
        return 0.0
    bus = graph.channels * graph.bw_intra_GBps
    if algorithm is _CD:
        factor = system.per_node / graph.channels
        bus /= factor - (factor - 1) / 2
        if system.arch.value >= Arch.HOPPER.value:
            bus *= COLLNET_DIRECT_SHARE_SM90
    return bus * 0.5


def _cap(system: System, table: Mapping[Arch, tuple[float, float, float]]) -> float:
    """A per-channel cap of ``table`` for ``system``'s GPUs and node count (its column); NCCL
    2.26-2.27 had Blackwell's at twice Hopper's (``{2*36.7, ...}`` in v2.26.2's tuning.cc)."""
    if system.version is Version.V2_26 and system.arch is Arch.BLACKWELL:
        return 2 * table[Arch.HOPPER][system._column()]
    return table[system.arch][system._column()]


def _hw_latency_us(system: System, hardware: Hardware, algorithm: NcclAlgorithm,
                   protocol: Protocol) -> float:
    """``hwLat`` of a step over ``hardware`` in ``system``'s NCCL: NVLSTree's network step was
    14 µs before 2.28.9 (v2.26.2 to v2.28.7), 20.9 µs since."""
    if (system.version is Version.V2_26 and hardware is Hardware.NET and algorithm is _NT
            and protocol is _S):
        return 14.0
    return HW_LATENCY_US[hardware, algorithm, protocol]


def latency_us(system: System, algorithm: NcclAlgorithm, protocol: Protocol,
               collective: Collective = Collective.ALLREDUCE) -> float:
    """The latency NCCL's model charges ``collective``, per nccl-model.md §1.4: a ring's
    nsteps (nNodes-1 of them across nodes for ReduceScatter and AllGather), PAT's
    baseLat + log2i(nNodes)·interLat/3.5 + 2.8·nRanks."""
    graph = _graph(system, algorithm)
    assert graph is not None, algorithm
    intra = _hw_latency_us(system, graph.intra, algorithm, protocol)
    net_algorithm = _T if system.per_node == 1 and algorithm in (_T, _R, _P, _CD, _CC) else algorithm
    inter = _hw_latency_us(system, Hardware.NET, net_algorithm, protocol) + graph.latency_inter_us
    if protocol is _S:
        inter += graph.latency_inter_us  # the flush
    base = BASE_LATENCY_US[algorithm, protocol]
    levels = system.nodes.bit_length() - 1  # log2i: floor of log2
    if algorithm is _R:
        ring_steps = steps(collective, system.ranks)
        inter_steps = (2 if collective is Collective.ALLREDUCE else 1) * (system.nodes - 1)
        overhead = 0.0
        if system.nodes > 1:
            overhead = NET_OVERHEAD_US[system.cpu] * (3 if protocol is _S else 1)
        return base + (ring_steps - inter_steps) * max(intra, overhead) + inter_steps * inter
    if algorithm is _P:
        return base + levels * inter * PAT_LEVEL_SHARE + system.ranks * PAT_PER_RANK_US
    if algorithm is _T:
        return base + 2 * ((system.per_node - 1) * intra + levels * inter)
    if algorithm is _N:
        return intra + (inter if system.nodes > 1 else 0.0)
    others = system.per_node - 1
    if algorithm is _CD:
        return base + 2 * (min(1.0, others) * intra + others * COLLNET_ARITY_US) + inter
    if algorithm is _CC:
        return base + 2 * others * intra + inter
    return base + intra + 2 * levels * inter  # NVLSTree


def predicted_time_us(system: System, algorithm: NcclAlgorithm, protocol: Protocol,
                      size_bytes: int,
                      collective: Collective = Collective.ALLREDUCE) -> float | None:
    """``ncclTopoGetAlgoTime`` for one ``collective`` of ``size_bytes`` (the whole buffer, as
    ncclFuncMaxSendRecvCount counts it; None: not available): latency + bytes / bandwidth,
    with AllReduce's Tree correction (NVLSTree's too on Blackwell with an x86 CPU, up to
    512 MiB) and Ring plateau (§1.5). None on one rank: NCCL runs no algorithm there (it copies
    the buffer, ``ncclLaunchOneRank``), and the model's nsteps would be 0."""
    if system.ranks == 1:
        return None
    bw = bandwidth_GBps(system, algorithm, protocol, collective)
    if bw <= 0:
        return None
    lat = latency_us(system, algorithm, protocol, collective)
    log_size = (size_bytes >> 6).bit_length() - 1  # log2i(nBytes >> 6); -1 below 64 bytes
    if algorithm is _T and 0 <= log_size < 23:
        bw *= TREE_CORRECTION[protocol][log_size]
    if (algorithm is _NT and 0 <= log_size < len(TREE_CORRECTION[protocol])
            and system.arch is Arch.BLACKWELL and system.cpu is not CpuVendor.ARM
            and system.version is not Version.V2_26):
        bw *= TREE_CORRECTION[protocol][log_size]  # v2.30.7: NVLSTree on Blackwell and x86 only
    graph = _graph(system, algorithm)
    assert graph is not None, algorithm
    if (algorithm is _R and protocol is _S and system.nodes > 1
            and collective is Collective.ALLREDUCE
            and size_bytes / (graph.channels * system.ranks) >= 64):
        lat *= RING_PLATEAU[system.arch]
    return lat + size_bytes / (1000 * bw)


def choose(system: System, size_bytes: int, enabled: Enabled = EVERYTHING,
           collective: Collective = Collective.ALLREDUCE) -> Choice:
    """The (algorithm, protocol) with the lowest predicted time for ``collective`` among those
    ``enabled``, as NCCL picks it; ties go to the earlier pair in tuning.cc's order (Tree before
    Ring before PAT, LL before Simple). ValueError when no enabled pair is available on
    ``system``."""
    best: Choice | None = None
    for algorithm, protocol in CANDIDATES.get(collective, ()):
        if not enabled.allows(algorithm, protocol):
            continue
        time = predicted_time_us(system, algorithm, protocol, size_bytes, collective)
        if time is not None and (best is None or time < best.time_us):
            best = Choice(algorithm, protocol, time)
    if best is None:
        raise ValueError("no NCCL algorithm is available on this system")
    return best


def protocols_of(algorithm: NcclAlgorithm, enabled: Enabled = EVERYTHING,
                 collective: Collective = Collective.ALLREDUCE) -> tuple[Protocol, ...]:
    """The protocols NCCL runs ``algorithm`` with for ``collective`` (NVLS, NVLSTree and PAT
    Simple only), those ``enabled`` leave, in tuning.cc's order."""
    return tuple(protocol for protocol in Protocol if protocol in enabled.protocols
                 and (algorithm, protocol) in CANDIDATES.get(collective, ()))


def best_protocol(system: System, algorithm: NcclAlgorithm, size_bytes: int,
                  enabled: Enabled = EVERYTHING,
                  collective: Collective = Collective.ALLREDUCE) -> Protocol:
    """The protocol NCCL's model picks for ``algorithm`` at ``size_bytes`` among those
    ``enabled`` (as when NCCL_ALGO forces the algorithm); Simple, or the first protocol left,
    when the model has nothing to say for it. ValueError when ``enabled`` leaves none the
    algorithm runs with (NCCL_PROTO=LL128 for NVLS)."""
    runs = protocols_of(algorithm, collective=collective) or tuple(Protocol)  # else: any
    protocols = tuple(protocol for protocol in runs if protocol in enabled.protocols)
    if not protocols:
        raise ValueError(f"NCCL runs {algorithm.value} with "
                         f"{' or '.join(p.value for p in runs)} only")
    times = {protocol: predicted_time_us(system, algorithm, protocol, size_bytes, collective)
             for protocol in protocols}
    known = {protocol: time for protocol, time in times.items() if time is not None}
    if known:
        return min(known, key=lambda protocol: known[protocol])
    return _S if _S in protocols else protocols[0]


def _nvls_enabled(system: System, algorithm: NcclAlgorithm, graph: Graph) -> bool:
    """NVLS needs a reducing switch (an efficiency above 0) and two channels; NVLSTree is off on
    one node, and NVLS across nodes needs CollNet (tuning.cc: disabled "if collnet is not
    supported")."""
    if NVLS_EFFICIENCY[system.arch] <= 0 or graph.channels < 2:
        return False
    return system.nodes > 1 if algorithm is _NT else system.nodes == 1 or system.collnet
