"""NCCL's tuner as data: one constants record per NCCL version (:class:`Tuning`), picked by a
scenario's ``nccl.version`` (:data:`TUNINGS`).

NCCL's ``src/graph/tuning.cc`` keeps its constants as tables indexed by hardware × algorithm ×
protocol, by GPU generation × node count (``ncclTunerConstants_t``); a record holds the same
tables for one version, each cited to its lines. Where a version's formula differs, and not only
its constants, the record holds that formula as a small named rule (:data:`NvlsRule`,
:data:`CorrectionRule`): the formulas of :mod:`simulator.model.nccl` never ask which version
they run.

NCCL 2.31 moved the tuner into ``src/tuning/`` (one file per algorithm family: ``ring.cc``,
``tree.cc``, ``nvls.cc``, ``pat.cc``, ``collnet.cc``, ``sym_model.cc``, with the tables in
``cost_model.cc`` and the argmin in ``tuning.cc``). Its record, :data:`NCCL_2_31`, reads the
``dev`` branch at 2.31.0a7 (commit 86fa684d): the release 2.31.2 source is not on this machine,
so where the snapshot differs from what a release would ship the record says which it follows.

Adding a version: a :class:`Version` member, a record (a ``replace`` of the one it changed,
naming the tables and rules that differ, each with its source line), its line in
:data:`TUNINGS`, and a new rule only where a formula really changed. ``tests/test_nccl.py``
holds the latest record to the CSV files of docs/reference, and ``tests/test_nccl_version.py``
each older record to its differences.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import Enum

from simulator.model.nccl_terms import (
    Arch,
    Caps,
    CpuVendor,
    Graph,
    Hardware,
    NcclAlgorithm,
    Protocol,
    caps_column,
)


class Version(Enum):
    """Which NCCL's tuner is modelled: its cost model changed at 2.28 (``src/graph/tuning.cc``).

    - ``2.26``: NCCL 2.26 and 2.27 (tuning.cc of v2.26.2-1 to v2.27.7-1): :data:`NCCL_2_26`.
    - ``2.30``: NCCL 2.30.x (v2.30.3 to v2.30.7), the default: :data:`NCCL_2_30`. On Hopper and
      Ampere the tuner is the same from 2.28.9; Blackwell's caps and correction moved between
      2.28.9 and 2.30.3, and 2.28.3-2.28.7 (nvlsEfficiency with the 14 µs step) match neither
      version here.
    - ``2.31``: NCCL 2.31 as its ``dev`` branch has it at 2.31.0a7 (``src/tuning/``):
      :data:`NCCL_2_31`. The 2.31.2 release is not on this machine.

    Only the tuner (NCCL's pick, its protocol, the time it predicts) follows the version; the
    execution model's costs are the latest (2.30.7's), the best estimate of what the kernels do.
    """

    V2_26 = "2.26"
    V2_30 = "2.30"
    V2_31 = "2.31"


LATEST = Version.V2_30
"""The tuner modelled unless a scenario says otherwise (``nccl: {version: ...}``): 2.30, the
newest release whose source is on this machine (2.31's record reads a dev snapshot), and the
version the execution model's costs are."""

_T, _R, _N, _NT = NcclAlgorithm.TREE, NcclAlgorithm.RING, NcclAlgorithm.NVLS, NcclAlgorithm.NVLS_TREE
_P = NcclAlgorithm.PAT
_CD, _CC = NcclAlgorithm.COLLNET_DIRECT, NcclAlgorithm.COLLNET_CHAIN
_LL, _LL128, _S = Protocol.LL, Protocol.LL128, Protocol.SIMPLE
_NVL, _PCI, _NET = Hardware.NVLINK, Hardware.PCI, Hardware.NET

NvlsRule = Callable[["Tuning", NcclAlgorithm, Graph, int, int, int, Arch], float]
"""How a version rates NVLS and NVLSTree: (its record, the algorithm, its graph, nodes, ranks,
the collective's nsteps, the GPUs) to the algorithm bandwidth in GB/s, once NVLS is known to run
there (two channels or more, a GPU with NVLS)."""

ChannelRule = Callable[[NcclAlgorithm, Graph, int], float]
"""How a version takes Ring's, Tree's and PAT's bandwidth per channel from their graph's bwIntra
and bwInter on this many nodes (GB/s)."""

CorrectionRule = Callable[[NcclAlgorithm, Arch, CpuVendor], int]
"""How many leading entries of a version's tree correction apply to an algorithm's AllReduce on
these GPUs and CPU (0: none; ``ncclTopoGetAlgoTime``)."""


@dataclass(frozen=True)
class Tuning:
    """The constants and the version-specific rules of one NCCL version's tuner. Times in µs,
    bandwidths in GB/s (10^9 B/s), as in tuning.cc."""

    source: str
    """The file the record reads, at its tag."""
    base_latency_us: Mapping[tuple[NcclAlgorithm, Protocol], float]
    """``baseLat``: a collective's fixed cost per algorithm and protocol (nccl-model.md §1.1)."""
    hw_latency_us: Mapping[tuple[Hardware, NcclAlgorithm, Protocol], float]
    """``hwLat``: the latency of one step over each kind of path (nccl-model.md §1.1)."""
    ll_max_bw_gbps: Mapping[Arch | CpuVendor, Caps]
    """``llMaxBws``, a total (not per channel) cap on LL. On one node its row is the GPU
    generation; on several it is the CPU vendor, read off the Volta (Intel or other) and Ampere
    (AMD) rows (nccl-model.md §1.2, "the llMaxBws row choice is a trap"); tuning.cc takes the
    AMD row for an AMD (or mixed) CPU and the first for any other, ARM included."""
    per_channel_max_ring_ll128_gbps: Mapping[Arch, Caps]
    """``perChMaxRingLL128Bws``: Ring LL128's cap per channel (nccl-model.md §1.2)."""
    per_channel_max_tree_ll128_gbps: Mapping[Arch, Caps]
    """``perChMaxTreeLL128Bws``: Tree LL128's cap per channel."""
    per_channel_max_tree_gbps: Mapping[Arch, Caps]
    """``perChMaxTreeBws``: Tree AllReduce's cap per channel, any protocol."""
    per_channel_max_nvls_tree_gbps: Mapping[Arch, Caps]
    """``perChMaxNVLSTreeBws``: NVLSTree's cap per channel (empty: the version has none)."""
    nvls_efficiency: Mapping[Arch, float]
    """``nvlsEfficiency``: the share of the NVLS graph's bandwidth in-switch reduction achieves
    (empty: the version has none)."""
    tree_correction: Mapping[Protocol, tuple[float, ...]]
    """``treeCorrectionFactor``: Tree AllReduce's bandwidth is multiplied by entry
    log2(nBytes / 64) "because trees are not perfectly sticking to the model for medium
    sizes"; :attr:`correction` says which entries apply to which algorithm."""
    net_overhead_us: Mapping[CpuVendor, float]
    """``getNetOverhead``: a network step's CPU cost on several nodes (×3 for Simple): 2 µs on
    an AMD x86 CPU, 1 µs on an Intel one and on any other (ARM)."""
    ring_plateau: Mapping[Arch, float]
    """Multi-node Ring Simple AllReduce latency factor (the "plateau effect of ring": 1.9 before
    SM80, 1.4 from it), applied once a rank's share per channel reaches 64 bytes."""
    collnet_arity_us: float
    """CollNetDirect's latency pays this per other GPU of a node, each way ("Add 0.4 us arity
    serialization latency")."""
    collnet_direct_share_sm90: float
    """CollNetDirect's bus bandwidth × this from SM90 on (``if (minCompCap >= 90) busBw *=
    .85``)."""
    pat_bandwidth_share: float
    """PAT's bus bandwidth is its graph's × this (``if (a == NCCL_ALGO_PAT) busBw *= .75``)."""
    pat_level_share: float
    """PAT's latency pays interLat × this per level of log2i(nNodes) ("Log latency")."""
    pat_per_rank_us: float
    """PAT's latency also grows by this per rank ("Still a linear part")."""
    nvls: NvlsRule
    """How NVLS and NVLSTree are rated (:func:`nvls_by_graph`, :func:`nvls_by_efficiency`)."""
    correction: CorrectionRule
    """Which algorithms :attr:`tree_correction` corrects (:func:`tree_corrected`,
    :func:`tree_and_blackwell_nvls_tree_corrected`)."""
    channel_bw: ChannelRule
    """How Ring, Tree and PAT rate a channel (:func:`intra_up_to_two_nodes`,
    :func:`ring_inter_tree_least`)."""
    ppn_one_tree_network: bool
    """Whether, with one GPU per node, a network step of Ring, PAT and CollNet costs Tree's
    ``hwLat`` ("With ppn=1 latencies are fully exposed, use the Tree network latency"), or each
    algorithm's own row."""
    pat_flushes: int
    """How many times PAT's network step pays the NIC's ``latencyInter``: once for the step,
    once more for the flush of Simple (2), or once (1)."""
    ties_to_later: bool
    """Whether two pairs the model times alike go to the later in tuning.cc's order (True) or
    the earlier (False)."""
    symmetric_ll_unregistered: bool
    """Whether, on buffers not registered as symmetric windows, an allreduce NCCL can run a
    symmetric kernel for runs its best one-shot LL kernel wherever the tuner picks LL
    (:func:`simulator.model.nccl_point.nccl_pick`), or always falls back to the tuner's pick."""

    def nvls_GBps(self, algorithm: NcclAlgorithm, graph: Graph, nodes: int, ranks: int,
                  nsteps: int, arch: Arch) -> float:
        """The algorithm bandwidth this version gives NVLS or NVLSTree (:attr:`nvls`)."""
        return self.nvls(self, algorithm, graph, nodes, ranks, nsteps, arch)

    def corrected_entries(self, algorithm: NcclAlgorithm, arch: Arch, cpu: CpuVendor) -> int:
        """How many leading entries of :attr:`tree_correction` apply to ``algorithm``
        (:attr:`correction`)."""
        return self.correction(algorithm, arch, cpu)


def nvls_by_graph(tuning: Tuning, algorithm: NcclAlgorithm, graph: Graph, nodes: int,
                  ranks: int, nsteps: int, arch: Arch) -> float:
    """NVLS and NVLSTree as NCCL 2.26-2.27 rate them (v2.26.2 tuning.cc:251-252 and 293): the
    least of the graph's bwIntra and bwInter per channel (NVLSTree's bwInter halved beyond two
    nodes), × 5/6 to an algorithm bandwidth, whatever the ranks; no nvlsEfficiency, no cap."""
    halved = 2 if algorithm is _NT and nodes > 2 else 1
    bus = graph.channels * min(graph.bw_intra_GBps, graph.bw_inter_GBps / halved)
    return bus * 5 / 6  # "ratio *= 5.0/6.0" for NVLS and NVLSTree


def nvls_by_efficiency(tuning: Tuning, algorithm: NcclAlgorithm, graph: Graph, nodes: int,
                       ranks: int, nsteps: int, arch: Arch) -> float:
    """NVLS and NVLSTree as NCCL 2.28.9 on rates them (v2.30.7 tuning.cc:306-323 and 379;
    nccl-model.md §1.3): bwIntra × nvlsEfficiency × (nChannels-1)/nChannels, ×2 as AllReduce
    pipelines two operations, against bwInter (NVLSTree's doubled on two nodes) and NVLSTree's
    own cap, per channel; × nRanks/nsteps to an algorithm bandwidth."""
    channels = graph.channels
    intra = graph.bw_intra_GBps * tuning.nvls_efficiency[arch] * (channels - 1) / channels
    intra *= 2.0  # AllReduce pipelines two operations
    inter = graph.bw_inter_GBps * (2 if algorithm is _NT and nodes <= 2 else 1)
    cap = (tuning.per_channel_max_nvls_tree_gbps[arch][caps_column(nodes)] if algorithm is _NT
           else math.inf)
    bus = channels * min(intra, inter, cap)
    return bus * ranks / nsteps


def intra_up_to_two_nodes(algorithm: NcclAlgorithm, graph: Graph, nodes: int) -> float:
    """Ring, Tree and PAT as NCCL 2.26-2.30 rate a channel: bwIntra on one or two nodes, bwInter
    from three (v2.30.7 tuning.cc:306, v2.26.2 tuning.cc:250: ``nNodes <= 2 ? bwIntra :
    bwInter``)."""
    return graph.bw_intra_GBps if nodes <= 2 else graph.bw_inter_GBps


def ring_inter_tree_least(algorithm: NcclAlgorithm, graph: Graph, nodes: int) -> float:
    """Ring, Tree and PAT as NCCL 2.31 rates a channel: Ring bwInter on several nodes and bwIntra
    on one (dev src/tuning/ring.cc:35-36: ``nNodes > 1 ? bwInter : bwIntra``); Tree and PAT
    the least of bwIntra and bwInter at any node count (tree.cc:28, pat.cc:41: ``std::min(
    bwInter, bwIntra)``), so two nodes' Tree is no longer rated at bwIntra alone."""
    if algorithm is _R:
        return graph.bw_inter_GBps if nodes > 1 else graph.bw_intra_GBps
    return min(graph.bw_intra_GBps, graph.bw_inter_GBps)


def tree_corrected(algorithm: NcclAlgorithm, arch: Arch, cpu: CpuVendor) -> int:
    """Tree alone, entries 0..22 (buffers of 64 B to just under 512 MiB; v2.26.2 tuning.cc:538,
    v2.30.7 tuning.cc:640: ``logSize < 23``)."""
    return 23 if algorithm is _T else 0


def tree_and_blackwell_nvls_tree_corrected(algorithm: NcclAlgorithm, arch: Arch,
                                           cpu: CpuVendor) -> int:
    """Tree's entries 0..22, and NVLSTree's 0..23 (up to just under 1 GiB) on Blackwell with an
    x86 CPU (v2.30.7 tuning.cc:643-644: ``logSize < 24 && minCompCap >= 100 && cpuArch ==
    X86``)."""
    if algorithm is _NT and arch is Arch.BLACKWELL and cpu is not CpuVendor.ARM:
        return 24
    return tree_corrected(algorithm, arch, cpu)


NCCL_2_30 = Tuning(
    source="NVIDIA/nccl v2.30.7-1 (commit 73cf1122) src/graph/tuning.cc",
    # baseLatencies, tuning.cc:149-155; nccl_model_latency_constants.csv
    base_latency_us={
        (_T, _LL): 6.8, (_T, _LL128): 14.0, (_T, _S): 8.4,
        (_R, _LL): 6.6, (_R, _LL128): 14.0, (_R, _S): 8.4,
        (_N, _S): 0.0, (_NT, _S): 0.0, (_P, _S): 8.0, (_CD, _S): 0.0, (_CC, _S): 0.0,
    },
    # hwLatencies, tuning.cc:156-175; nccl_model_latency_constants.csv (PAT's and CollNet's
    # columns Simple only: CollNetDirect 3.7 µs on NVLink and PCI and 31 on the network,
    # CollNetChain 2.8 and 30, the same from v2.26.2 to v2.30.7)
    hw_latency_us={
        (_NVL, _T, _LL): 0.6, (_NVL, _T, _LL128): 1.25, (_NVL, _T, _S): 4.0,
        (_NVL, _R, _LL): 0.6, (_NVL, _R, _LL128): 1.9, (_NVL, _R, _S): 3.4,
        (_NVL, _N, _S): 25.0, (_NVL, _NT, _S): 25.0, (_NVL, _P, _S): 4.0,
        (_PCI, _T, _LL): 1.0, (_PCI, _T, _LL128): 1.9, (_PCI, _T, _S): 4.0,
        (_PCI, _R, _LL): 1.0, (_PCI, _R, _LL128): 2.5, (_PCI, _R, _S): 5.7,
        (_PCI, _N, _S): 0.0, (_PCI, _NT, _S): 0.0, (_PCI, _P, _S): 4.0,
        (_NET, _T, _LL): 5.0, (_NET, _T, _LL128): 8.5, (_NET, _T, _S): 14.0,
        (_NET, _R, _LL): 2.7, (_NET, _R, _LL128): 4.0, (_NET, _R, _S): 14.0,
        (_NET, _N, _S): 18.0, (_NET, _NT, _S): 20.9, (_NET, _P, _S): 14.0,
        (_NVL, _CD, _S): 3.7, (_NVL, _CC, _S): 2.8,
        (_PCI, _CD, _S): 3.7, (_PCI, _CC, _S): 2.8,
        (_NET, _CD, _S): 31.0, (_NET, _CC, _S): 30.0,
    },
    # llMaxBws, tuning.cc:177-182 (Blackwell's row 2 × Hopper's); nccl_model_bw_caps.csv
    ll_max_bw_gbps={
        Arch.VOLTA: (39.0, 39.0, 20.4), Arch.AMPERE: (87.7, 22.5, 19.0),
        Arch.HOPPER: (141.0, 45.0, 35.0), Arch.BLACKWELL: (282.0, 90.0, 70.0),
        CpuVendor.INTEL: (39.0, 39.0, 20.4), CpuVendor.AMD: (87.7, 22.5, 19.0),
        CpuVendor.ARM: (39.0, 39.0, 20.4),
    },
    # perChMaxRingLL128Bws, tuning.cc:184-189; nccl_model_bw_caps.csv
    per_channel_max_ring_ll128_gbps={
        Arch.VOLTA: (20.0, 20.0, 20.0), Arch.AMPERE: (20.0, 20.0, 20.0),
        Arch.HOPPER: (36.7, 36.7, 36.7), Arch.BLACKWELL: (40.0, 40.0, 40.0),
    },
    # perChMaxTreeLL128Bws, tuning.cc:191-196
    per_channel_max_tree_ll128_gbps={
        Arch.VOLTA: (20.0, 20.0, 20.0), Arch.AMPERE: (20.0, 20.0, 20.0),
        Arch.HOPPER: (36.7, 36.7, 29.0), Arch.BLACKWELL: (55.6, 31.67, 20.0),
    },
    # perChMaxTreeBws, tuning.cc:198-203
    per_channel_max_tree_gbps={
        Arch.VOLTA: (26.5, 18.5, 10.0), Arch.AMPERE: (24.0, 23.6, 17.8),
        Arch.HOPPER: (38.7, 41.4, 36.0), Arch.BLACKWELL: (70.0, 42.8, 24.0),
    },
    # perChMaxNVLSTreeBws, tuning.cc:205-211
    per_channel_max_nvls_tree_gbps={
        Arch.VOLTA: (26.5, 18.5, 10.0), Arch.AMPERE: (24.0, 23.6, 17.8),
        Arch.HOPPER: (0.0, 57.7, 45.5), Arch.BLACKWELL: (0.0, 96.0, 80.0),
    },
    # nvlsEfficiency, tuning.cc:138-144; nccl_model_bw_caps.csv
    nvls_efficiency={Arch.VOLTA: 0.0, Arch.AMPERE: 0.0, Arch.HOPPER: 0.85, Arch.BLACKWELL: 0.74},
    # treeCorrectionFactor[3][24], tuning.cc:620-627 (entries 0..22 for Tree, from 64 B to
    # just under 512 MiB; the 24th only for NVLSTree on Blackwell)
    tree_correction={
        _LL: (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
              1.0, 1.0, 1.0, 1.0),
        _LL128: (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9,
                 .9, .9, 1.0, 1.0, 1.0),
        _S: (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9,
             .9, .9),
    },
    # getNetOverhead, tuning.cc:228-233 (x86 Intel 1.0, x86 AMD 2.0, anything else 1.0)
    net_overhead_us={CpuVendor.INTEL: 1.0, CpuVendor.AMD: 2.0, CpuVendor.ARM: 1.0},
    # ncclTopoGetAlgoTime, tuning.cc:647-649: "minCompCap < 80 ? 1.9 : 1.4"
    ring_plateau={Arch.VOLTA: 1.9, Arch.AMPERE: 1.4, Arch.HOPPER: 1.4, Arch.BLACKWELL: 1.4},
    collnet_arity_us=0.4,  # tuning.cc:420-421
    collnet_direct_share_sm90=0.85,  # tuning.cc:348
    pat_bandwidth_share=0.75,  # tuning.cc:337
    pat_level_share=1 / 3.5,  # tuning.cc:432: "log2i(nNodes) * (interLat / 3.5)"
    pat_per_rank_us=2.8,  # tuning.cc:433: "nRanks * 2.8"
    nvls=nvls_by_efficiency,
    correction=tree_and_blackwell_nvls_tree_corrected,
    channel_bw=intra_up_to_two_nodes,  # tuning.cc:306
    ppn_one_tree_network=True,  # tuning.cc:386-388
    pat_flushes=2,  # tuning.cc:389-391: latencyInter, and again for Simple's flush
    ties_to_later=False,  # enqueue.cc:2032-2041: a later pair must be strictly faster
    symmetric_ll_unregistered=False,  # symmetric_sched.cc:158-172
)
"""NCCL 2.30.x's tuner (v2.30.7; from 2.28.9 on Hopper and Ampere): docs/reference/nccl-model.md
§1.1-§1.5 summarises the file, and its CSV files hold the tables this record is checked
against."""


NCCL_2_26 = replace(
    NCCL_2_30,
    source="NVIDIA/nccl v2.26.2-1 (commit f44ac759) src/graph/tuning.cc",
    # hwLat NET NVLSTree 14 µs (tuning.cc:141; raised to 20.9 in 2.28.9). Its table has no PAT
    # row (zero): PAT's 8 µs base is a literal of its formula (tuning.cc:343, "8 // Base
    # time") and its network step Tree's (ppn is 1), which 2.30's values give alike.
    hw_latency_us={**NCCL_2_30.hw_latency_us, (_NET, _NT, _S): 14.0},
    # Blackwell's rows twice Hopper's (tuning.cc:162, 168, 174: {2*36.7, ...})
    per_channel_max_ring_ll128_gbps={**NCCL_2_30.per_channel_max_ring_ll128_gbps,
                                     Arch.BLACKWELL: (2 * 36.7, 2 * 36.7, 2 * 36.7)},
    per_channel_max_tree_ll128_gbps={**NCCL_2_30.per_channel_max_tree_ll128_gbps,
                                     Arch.BLACKWELL: (2 * 36.7, 2 * 36.7, 2 * 29.0)},
    per_channel_max_tree_gbps={**NCCL_2_30.per_channel_max_tree_gbps,
                               Arch.BLACKWELL: (2 * 38.7, 2 * 41.4, 2 * 36.0)},
    per_channel_max_nvls_tree_gbps={},  # no perChMaxNVLSTreeBws before 2.28
    nvls_efficiency={},  # no nvlsEfficiency before 2.28
    # treeCorrectionFactor[3][23], tuning.cc:524-528: 2.30's rows without their last entry
    tree_correction={protocol: row[:23] for protocol, row in NCCL_2_30.tree_correction.items()},
    nvls=nvls_by_graph,
    correction=tree_corrected,
)
"""NCCL 2.26-2.27's tuner (v2.26.2-1 to v2.27.7-1): 2.30's but for the differences named, each
at its line of v2.26.2's tuning.cc; llMaxBws, the other caps and latencies, the net overhead,
the plateau, CollNet's and PAT's terms are the same there."""


NCCL_2_31 = replace(
    NCCL_2_30,
    source="NVIDIA/nccl dev 2.31.0a7 (commit 86fa684d) src/tuning/*.cc",
    # Ring bwInter on several nodes; Tree and PAT min(bwIntra, bwInter): ring.cc:35-36,
    # tree.cc:28, pat.cc:41
    channel_bw=ring_inter_tree_least,
    # ring.cc:51-53, tree.cc:46-48, collnet.cc:99-101: "With ppn=1 latencies are fully exposed,
    # use the Tree network latency" above interLat = hwLatencies[interHw][algo][proto], each
    # algorithm's own row: the comment survives, the substitution does not; the record follows
    # the code (Ring's LL and LL128 network steps at ppn 1 cost 2.7 and 4 µs, not Tree's 5 and
    # 8.5)
    ppn_one_tree_network=False,
    pat_flushes=1,  # pat.cc:47-48: interLat += latencyInter for Simple only, once
    # tuning.cc:32-38 pushes each result to the front of the list, tuning.cc:153-166 keeps the
    # first strictly faster one walking from the front: ties go to the highest tuning id
    ties_to_later=True,
    # tuning.cc:265-283: an LL symmetric kernel on unregistered buffers falls back to the
    # general tuner's pick only where that pick is not LL (2.30.7 fell back always:
    # symmetric_sched.cc:158-172 asked the tuner only with NCCL_SYM_NOWIN_ENABLE); the
    # symmetric scheduler ranks the symmetric kernels alone (symmetric_sched.cc:144,
    # NCCL_TUNING_MASK_SYM_KERNELS) and enqueue.cc:2007 the general ones alone, so the two are
    # never in one argmin: NCCL_TUNING_MASK_ALL (tuning.h:19) is used nowhere
    symmetric_ll_unregistered=True,
)
"""NCCL 2.31's tuner, from the ``dev`` branch at 2.31.0a7 (commit 86fa684d, src/tuning/); the
2.31.2 release's source is not on this machine. 2.30's but for the rules named. Unchanged, each
checked against its 2.31 line: every table (cost_model.cc:141-226 are tuning.cc:148-211 and
623-627 of v2.30.7), NVLS and NVLSTree (nvls.cc:63-74 and 104 are tuning.cc:311-324 and 379),
the corrections (tree.cc:75, nvls.cc:154-155), the ring plateau (ring.cc:97-100), the network
overhead (ring.cc:14-19), the latencies' formulas, and the symmetric kernels' model
(sym_model.cc:181-275 is v2.30.7 sym_kernels.cc:338-432, queryModel_lsa).

Where the snapshot looks unfinished, the record follows 2.30.7, as a release would that fixed
it: CollNet's AllReduce bandwidth (collnet.cc:35-57) starts from ``busBw = 0.0`` (line 35) and
never reads the graph for AllReduce, so it divides the value the ReduceScatter iteration of the
same loop left (``ppn × min(bwIntra, 0.9 bwInter)``, line 50, or -1 without the plugin's
``ireducescatter``, lines 65-67, which disables CollNet AllReduce altogether); its SM90 share
tests ``compCapIndex >= 90`` (line 56), an index of 0-3, so it never applies; the GPU/NIC factor
(lines 53-55) no longer asks for CollNetDirect. 2.30.7's formula (tuning.cc:306, 324, 340-349)
stands for all three. Not in the snapshot at all: PAT across nodes with NVLS inside each node
(NCCL 2.31.2's, aws/aws-ofi-nccl#1394): pat.cc:17 still runs PAT only with one GPU per node."""


TUNINGS: Mapping[Version, Tuning] = {Version.V2_26: NCCL_2_26, Version.V2_30: NCCL_2_30,
                                     Version.V2_31: NCCL_2_31}
"""Each version's record, which ``System.version`` selects."""
