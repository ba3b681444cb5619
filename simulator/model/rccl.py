"""RCCL's tuner as data, beside NCCL's versions: the record of the constants RCCL's own cost
model uses on AMD Instinct MI300 GPUs (gfx942), its formulas, the rings its topology model
gives an 8-GPU all-xGMI node, and the MSCCL all-pairs schedules it runs ahead of its tuner.

Source: ROCm/rccl at commit 0cbce2a7 (develop, 2024-10-24; the snapshot in
/work/.mirror/ROCm+rccl). RCCL is a fork of NCCL 2.21 whose ``src/graph/tuning.cc`` keeps
NCCL's shape (``baseLat + nsteps · hwLat``, ``nChannels · bw``) but, built for AMD
(``__HIP_PLATFORM_AMD__``), replaces NCCL's refinements (LL caps, per-channel ceilings, ×0.92,
the plateau) by a table of bandwidth ratios and two per-size correction tables, one
``tuningModel`` per machine type (tuning.cc:67-252), which the machine's topology model selects
(``tuning=N`` in ``src/graph/rome_models.cc``). Every 8-GPU all-xGMI node (MI300X, MI325X)
selects model 5:

- on one node RCCL trims the NICs from its topology when every GPU pair is xGMI
  (src/graph/paths.cc:779-814), so the node matches ``rome_model_79`` (8 GPUs, no NIC, 7 links
  a GPU, all-to-all; rome_models.cc:549-560), whose options are ``tuning=5`` and
  ``mscclEnabled=1`` (rome_models.cc:559); across nodes ``rome_model_81`` (8 NICs,
  rome_models.cc:815) and ``rome_model_84`` (16 NICs, rome_models.cc:828) select model 5 too.

What RCCL runs, by size, for an out-of-place allreduce of 8 ranks (:func:`rccl_pick`):

1. MSCCL++ (``mscclpp_ncclAllReduce``, up to ``RCCL_MSCCLPP_THRESHOLD`` = 1 MiB, src/init.cc:105)
   only while a HIP graph is being captured (src/misc/msccl/msccl_lifecycle.cc:524); rccl-tests
   without ``-G`` captures none, so it is not modelled.
2. Else MSCCL's scheduler (msccl_lifecycle.cc:547 before the tuner; :data:`MSCCL_ALLPAIRS`)
   picks an ``allreduce_pairs`` schedule whose size range holds the buffer and whose chunks
   divide its count (msccl_lifecycle.cc:331-338), op not avg (msccl_lifecycle.cc:308): the
   all-pairs schedule, registered here as ``direct``.
3. Else the tuner (:func:`choose`): Ring or Tree with LL or Simple.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from simulator.model.collective import Collective
from simulator.model.nccl_terms import CpuVendor, Graph, Hardware, NcclAlgorithm, Protocol

_T, _R = NcclAlgorithm.TREE, NcclAlgorithm.RING
_LL, _LL128, _S = Protocol.LL, Protocol.LL128, Protocol.SIMPLE
_NVL, _PCI, _NET = Hardware.NVLINK, Hardware.PCI, Hardware.NET

CORRECTIONS = 27
"""Entries of RCCL's correction tables: log2(nBytes / 64) from 0 to 26 (64 B to 4 GiB and up;
tuning.cc:70-71, 648-657: an index of 27 or more takes the last entry)."""


@dataclass(frozen=True)
class MscclSchedule:
    """One MSCCL ``allreduce_pairs`` schedule RCCL ships (``tools/msccl-algorithms``): the
    buffer sizes it runs (bytes, inclusive), its protocol, channels and chunks per loop (the
    element count must be a multiple of them), whether it runs out of place."""

    min_bytes: int
    max_bytes: int
    protocol: Protocol
    channels: int
    chunks: int
    out_of_place: bool

    def runs(self, size_bytes: int, itemsize: int, out_of_place: bool) -> bool:
        """Whether MSCCL's scheduler takes this schedule for an allreduce of ``size_bytes``
        (msccl_lifecycle.cc:331-338: count > 0, count % nChunksPerLoop == 0, minBytes ≤ nBytes ≤
        maxBytes, in place or out of place as the schedule says)."""
        count = size_bytes // itemsize
        return (count > 0 and count % self.chunks == 0 and self.out_of_place == out_of_place
                and self.min_bytes <= size_bytes <= self.max_bytes)


MSCCL_ALLPAIRS: tuple[MscclSchedule, ...] = (
    MscclSchedule(0, 65536, _LL, 4, 256, True),  # allreduce-allpairs-8n-ll-32tb-op.xml:1
    MscclSchedule(0, 65536, _LL, 4, 256, False),  # allreduce-allpairs-8n-ll-32tb.xml:1
    MscclSchedule(65537, 524287, _LL, 8, 512, True),  # allreduce-allpairs-8n-ll-64tb-op.xml:1
    MscclSchedule(65537, 524287, _LL, 8, 512, False),  # allreduce-allpairs-8n-ll-64tb.xml:1
    MscclSchedule(524288, 16777216, _S, 8, 512, True),  # allreduce-allpairs-8n-simple-op.xml:1
    MscclSchedule(524288, 11534336, _S, 8, 512, False),  # allreduce-allpairs-8n-simple.xml:1
    MscclSchedule(14680065, 16777216, _S, 8, 512, False),  # allreduce-allpairs-8n-simple_2.xml:1
)
"""RCCL's MSCCL all-pairs allreduce schedules for 8 ranks (ROCm/rccl 0cbce2a7,
tools/msccl-algorithms/allreduce-allpairs-8n-*.xml, each file's first line: ``ngpus="8"``,
``name="allreduce_pairs"``)."""

MSCCL_ALGORITHM = "allreduce_pairs"
"""The name RCCL's MSCCL schedules give the all-pairs allreduce (their ``<algo name=...>``),
which a registered algorithm's ``NcclBinding.msccl`` claims."""


@dataclass(frozen=True)
class RcclTuning:
    """The constants of RCCL's tuner for one ``tuningModel`` (µs and GB/s as in tuning.cc), and
    the facts of its topology model on the machine type that selects it."""

    source: str
    base_latency_us: Mapping[tuple[NcclAlgorithm, Protocol], float]
    """``baseLat``, shared by every tuning model (tuning.cc:57-60)."""
    hw_latency_us: Mapping[tuple[Hardware, NcclAlgorithm, Protocol], float]
    """The model's ``hwLat`` (xGMI counts as NVLink: ``LINK_NVL``)."""
    bw_ratio: Mapping[tuple[int, NcclAlgorithm, Protocol], float]
    """The model's ``bwRatio``: row 0 for one or two nodes, row 1 for more (tuning.cc:377-380),
    multiplying ``nChannels · bw``; 0 rules the pair out."""
    tree_correction: Mapping[Protocol, tuple[float, ...]]
    """The model's ``treeCorrectionFactor``, applied to Tree at every node count
    (tuning.cc:651-653)."""
    ring_correction: Mapping[Protocol, tuple[float, ...]]
    """The model's ``ringCorrectionFactor``, applied to Ring on several nodes (tuning.cc:655-657)."""
    net_overhead_us: Mapping[CpuVendor, float]
    """``getNetOverhead`` (tuning.cc:294-301): 2 µs on an AMD x86 CPU, 1 on others."""
    tree_simple_one_node: bool
    """Whether Tree runs Simple on one node: not on gfx94x (tuning.cc:365)."""
    ll128: bool
    """Whether LL128 is enabled by default: only on gfx90a with its rome model's
    ``ll128Enabled`` (tuning.cc:510-516), and only on an all-xGMI node (src/enqueue.cc:1598)."""
    xgmi_link_GBps: float
    """RCCL's bandwidth of one xGMI link on this GPU (``GFX94X_XGMI_WIDTH``, src/graph/topo.h:33;
    ``ncclTopoXGMISpeed``, topo.h:258-265), which its topology connects each peer with
    (src/graph/topo.cc:592-593)."""
    rings: tuple[tuple[int, ...], ...]
    """The rings of the matched rome model on one node (``ringBase``), one a channel."""
    net_rings: tuple[tuple[int, ...], ...]
    """The distinct orders of the node's GPUs in the rome model's rings across nodes, each
    entering by one GPU's NIC and leaving by another's; odd hosts run them reversed."""

    def graph(self, gpus: int) -> Graph:
        """RCCL's ring (and tree) graph on one node of ``gpus`` all-xGMI GPUs: its rings, each
        at ``system->totalBw / nChannels`` (src/graph/rome_models.cc:1229), totalBw a GPU's
        links × the xGMI speed (src/graph/search.cc:52): 28 × 12 GB/s on MI300X."""
        channels = len(self.rings)
        return Graph(channels, (gpus - 1) * self.xgmi_link_GBps / channels,
                     (gpus - 1) * self.xgmi_link_GBps / channels)


def _ring(text: str) -> tuple[tuple[int, ...], ...]:
    """RCCL's ``ringBase`` syntax: rings of GPU indexes separated by ``|``."""
    return tuple(tuple(int(gpu) for gpu in ring.split()) for ring in text.split("|"))


_ROME_79_RINGS = ("0 1 2 3 4 5 6 7|0 1 2 3 4 5 7 6|0 2 4 1 3 6 5 7|0 2 4 6 1 7 3 5|0 3 1 5 2 7 4 6|"
                  "0 3 5 1 6 2 7 4|0 4 1 7 3 6 2 5|7 6 5 4 3 2 1 0|6 7 5 4 3 2 1 0|7 5 6 3 1 4 2 0|"
                  "5 3 7 1 6 4 2 0|6 4 7 2 5 1 3 0|4 7 2 6 1 5 3 0|5 2 6 3 7 1 4 0")
"""rome_model_79's ringBase (src/graph/rome_models.cc:558): these 14 rings, twice; together
they cross every directed xGMI link of the node exactly twice."""

_ROME_81_RINGS = ("0 1 2 3 4 5 6 7|1 0 2 4 3 5 7 6|2 5 0 3 6 1 7 4|3 7 0 4 2 1 6 5|"
                  "4 6 2 7 3 0 5 1|5 4 7 1 3 2 6 0|6 3 1 4 0 7 5 2|7 2 0 6 4 1 5 3")
"""rome_model_81's ringBase (8 GPUs, 8 NICs; src/graph/rome_models.cc:598-605), its NIC
markers left out (ring i enters by GPU i's NIC and leaves by the last GPU's): 8 orders that
cross every directed xGMI link of a node once; its other 56 rings rotate these. For an even
number of nodes RCCL runs them forward on even hosts and reversed on odd ones
(rome_models.cc:1871-1873), so that a ring leaves one host and enters the next on one rail."""

GFX942 = RcclTuning(
    source="ROCm/rccl 0cbce2a7 src/graph/tuning.cc, tuning_model_5 (rome_models.cc:559)",
    base_latency_us={
        (_T, _LL): 12.0, (_T, _LL128): 12.0, (_T, _S): 17.0,  # tuning.cc:58
        (_R, _LL): 12.0, (_R, _LL128): 12.0, (_R, _S): 17.0,
    },
    hw_latency_us={  # tuning_model_5 .hwLat, tuning.cc:225-232
        (_NVL, _T, _LL): 0.9, (_NVL, _T, _LL128): 0.0, (_NVL, _T, _S): 2.3,
        (_NVL, _R, _LL): 0.8, (_NVL, _R, _LL128): 0.0, (_NVL, _R, _S): 2.1,
        (_PCI, _T, _LL): 2.2, (_PCI, _T, _LL128): 2.2, (_PCI, _T, _S): 5.7,
        (_PCI, _R, _LL): 2.2, (_PCI, _R, _LL128): 2.2, (_PCI, _R, _S): 5.7,
        (_NET, _T, _LL): 10.5, (_NET, _T, _LL128): 0.0, (_NET, _T, _S): 25.0,
        (_NET, _R, _LL): 9.5, (_NET, _R, _LL128): 0.0, (_NET, _R, _S): 320.0,
    },
    bw_ratio={  # tuning_model_5 .bwRatio, tuning.cc:234-239
        (0, _T, _LL): 0.06, (0, _T, _LL128): 0.0, (0, _T, _S): 0.11,
        (0, _R, _LL): 0.08, (0, _R, _LL128): 0.0, (0, _R, _S): 1.0,
        (1, _T, _LL): 0.06, (1, _T, _LL128): 0.0, (1, _T, _S): 0.59,
        (1, _R, _LL): 0.08, (1, _R, _LL128): 0.0, (1, _R, _S): 1.0,
    },
    tree_correction={  # tuning_model_5 .treeCorrectionFactor, tuning.cc:241-245
        _LL: (.1, .1, .1, .1, .1, .1, 1., 1., 1., 1., 1., .6, 1., .9, 1., 1., .1, .1, .1, .1,
              .1, .1, .1, .1, .1, .1, .1),
        _LL128: (0.0,) * CORRECTIONS,
        _S: (.1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .7, 1., 1., 1., 1., 1.,
             1., 1., 1., 1., 1., .8),
    },
    ring_correction={  # tuning_model_5 .ringCorrectionFactor, tuning.cc:247-251
        _LL: (.1, .1, .1, .1, .1, .1, .1, .1, .1, .1, .1, 1., .2, 1., .4, .4, .1, .2, .2, .1,
              .1, .1, .1, .1, .1, .1, .1),
        _LL128: (0.0,) * CORRECTIONS,
        _S: (.1,) * 23 + (.8, 1., 1., 1.),
    },
    net_overhead_us={CpuVendor.INTEL: 1.0, CpuVendor.AMD: 2.0, CpuVendor.ARM: 1.0},
    tree_simple_one_node=False,
    ll128=False,
    xgmi_link_GBps=48.0,
    rings=_ring(_ROME_79_RINGS) * 2,
    net_rings=_ring(_ROME_81_RINGS),
)
"""RCCL's tuner on MI300-series nodes of 8 all-xGMI GPUs (gfx942: MI300X, MI325X)."""

CANDIDATES: tuple[tuple[NcclAlgorithm, Protocol], ...] = tuple(
    (a, p) for a in (_T, _R) for p in Protocol)
"""The pairs RCCL's tuner rates for an allreduce on AMD, in its loop order (tuning.cc:362-364,
enqueue.cc:1590-1597: ties go to the earlier): no NVLS, no CollNet without a SHARP network."""


@dataclass(frozen=True)
class RcclSystem:
    """RCCL's view of a communicator: ranks, nodes, host CPU, its graphs for Ring and Tree
    (channels, GB/s a channel, ``latencyInter``), and the tuning model's record."""

    ranks: int
    nodes: int
    graphs: Mapping[NcclAlgorithm, Graph]
    cpu: CpuVendor
    tuning: RcclTuning = GFX942


def bandwidth_GBps(system: RcclSystem, algorithm: NcclAlgorithm, protocol: Protocol,
                   collective: Collective = Collective.ALLREDUCE) -> float:
    """The algorithm bandwidth RCCL's tuner gives an allreduce (0: not run), tuning.cc:365-424:
    ``nChannels · bw`` (bwIntra on one or two nodes, bwInter beyond) × ``bwRatio``, then ×
    nRanks/nsteps for Ring and × 0.5 for Tree; Tree Simple skipped on one gfx94x node, LL128
    off where the record says so."""
    graph = system.graphs.get(algorithm)
    tuning = system.tuning
    if graph is None or collective is not Collective.ALLREDUCE or (algorithm, protocol) not in CANDIDATES:
        return 0.0
    if protocol is _LL128 and not tuning.ll128:
        return 0.0
    if algorithm is _T and protocol is _S and system.nodes == 1 and not tuning.tree_simple_one_node:
        return 0.0
    bw = graph.bw_intra_GBps if system.nodes <= 2 else graph.bw_inter_GBps
    bus = graph.channels * bw * tuning.bw_ratio[0 if system.nodes <= 2 else 1, algorithm, protocol]
    if algorithm is _R:
        return bus * system.ranks / (2 * (system.ranks - 1))
    return bus * 0.5


def latency_us(system: RcclSystem, algorithm: NcclAlgorithm, protocol: Protocol) -> float:
    """The latency RCCL's tuner charges an allreduce (tuning.cc:429-466): ``baseLat`` plus, for
    Ring, (nsteps − nInterSteps) intra steps (each no cheaper than the network overhead on
    several nodes, ×3 for Simple) and nInterSteps = 2·nNodes network steps (RCCL's count,
    tuning.cc:354; NCCL's is 2(nNodes−1)); for Tree, 2((ppn−1) intra + log2(nNodes) network)
    steps. A network step is the graph's ``latencyInter`` where set, else hwLat NET, and Simple
    adds latencyInter again (the flush)."""
    graph = system.graphs[algorithm]
    tuning = system.tuning
    intra_hw = graph.intra
    intra = tuning.hw_latency_us[intra_hw, algorithm, protocol]
    inter = graph.latency_inter_us or tuning.hw_latency_us[_NET, algorithm, protocol]
    if protocol is _S:
        inter += graph.latency_inter_us
    base = tuning.base_latency_us[algorithm, protocol]
    if algorithm is _R:
        steps = 2 * (system.ranks - 1)
        inter_steps = 2 * system.nodes if system.nodes > 1 else 0
        if system.nodes > 1:
            overhead = tuning.net_overhead_us[system.cpu] * (3 if protocol is _S else 1)
            intra = max(intra, overhead)
        return base + (steps - inter_steps) * intra + inter_steps * inter
    levels = system.nodes.bit_length() - 1  # log2i
    return base + 2 * ((system.ranks // system.nodes - 1) * intra + levels * inter)


def predicted_time_us(system: RcclSystem, algorithm: NcclAlgorithm, protocol: Protocol,
                      size_bytes: int,
                      collective: Collective = Collective.ALLREDUCE) -> float | None:
    """``ncclTopoGetAlgoTime`` as RCCL builds it for AMD (tuning.cc:637-662): latency +
    nBytes / (1000 · bw), bw × the Tree correction at every node count and × the Ring
    correction on several nodes, at index log2i(nBytes >> 6) (log2i(0) = 0, src/include/
    utils.h:46), at most 26; no plateau factor. None where the pair is not run."""
    if system.ranks == 1:
        return None
    bw = bandwidth_GBps(system, algorithm, protocol, collective)
    if bw <= 0:
        return None
    index = min(max((size_bytes >> 6).bit_length() - 1, 0), CORRECTIONS - 1)
    if algorithm is _T:
        bw *= system.tuning.tree_correction[protocol][index]
    elif system.nodes > 1:
        bw *= system.tuning.ring_correction[protocol][index]
    if bw <= 0:
        return None
    return latency_us(system, algorithm, protocol) + size_bytes / (1000 * bw)


@dataclass(frozen=True)
class RcclChoice:
    """What RCCL runs for one allreduce: the tuner's algorithm and protocol with its predicted
    time (µs), or an MSCCL schedule (``msccl``: its name; the algorithm is then the RCCL
    algorithm whose kernel costs it is charged, Ring, and the time NaN)."""

    algorithm: NcclAlgorithm
    protocol: Protocol
    time_us: float
    msccl: str = ""


def choose(system: RcclSystem, size_bytes: int,
           allowed: frozenset[tuple[NcclAlgorithm, Protocol]] | None = None) -> RcclChoice:
    """RCCL's tuner's pick (:data:`CANDIDATES` in order, the least predicted time) among the
    ``allowed`` pairs (None: all); ValueError where none runs."""
    best: RcclChoice | None = None
    for algorithm, protocol in CANDIDATES:
        if allowed is not None and (algorithm, protocol) not in allowed:
            continue
        time = predicted_time_us(system, algorithm, protocol, size_bytes)
        if time is not None and (best is None or time < best.time_us):
            best = RcclChoice(algorithm, protocol, time)
    if best is None:
        raise ValueError("no RCCL algorithm is available on this system")
    return best


def msccl_schedule(ranks: int, nodes: int, size_bytes: int, itemsize: int, op_is_avg: bool,
                   out_of_place: bool = True) -> MscclSchedule | None:
    """The MSCCL all-pairs schedule RCCL runs ahead of its tuner, or None: on one node of 8
    ranks (the schedules' ``ngpus``, and ``mscclEnabled`` only from rome_model_79, the
    NIC-less single node), not for avg (msccl_lifecycle.cc:308), where a schedule's range and
    chunks take the buffer (:meth:`MscclSchedule.runs`)."""
    if ranks != 8 or nodes != 1 or op_is_avg:
        return None
    return next((schedule for schedule in MSCCL_ALLPAIRS
                 if schedule.runs(size_bytes, itemsize, out_of_place)), None)


def rccl_pick(system: RcclSystem, size_bytes: int, itemsize: int, op_is_avg: bool,
              allowed: frozenset[tuple[NcclAlgorithm, Protocol]] | None = None) -> RcclChoice:
    """What RCCL runs for an out-of-place allreduce (rccl-tests' first column): the MSCCL
    all-pairs schedule where one takes the buffer, whatever NCCL_ALGO and NCCL_PROTO say
    (MSCCL's scheduler runs before the tuner reads them, msccl_lifecycle.cc:547; RCCL's
    ``RCCL_MSCCL_ENABLE=0`` turns it off, msccl_lifecycle.cc:29), else the tuner's pick among
    the ``allowed`` pairs."""
    schedule = msccl_schedule(system.ranks, system.nodes, size_bytes, itemsize, op_is_avg)
    if schedule is not None:
        return RcclChoice(_R, schedule.protocol, math.nan, MSCCL_ALGORITHM)
    return choose(system, size_bytes, allowed)
