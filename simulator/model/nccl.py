"""NCCL's own cost model: the time NCCL predicts for each algorithm and protocol, from which it
picks what to run (``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``, NVIDIA/nccl tag
v2.30.7-1, commit 73cf1122, ``src/graph/tuning.cc``).

The formulas are here; their constants are data, one record per NCCL version
(:mod:`simulator.model.nccl_versions`, selected by :attr:`System.version`), taken from
docs/reference/nccl-model.md (§1.1 latencies, §1.2 bandwidth caps, §1.3-§1.5 the formulas),
which summarises that file; tests/test_nccl.py checks the tables against the CSV files beside
it, and the predicted times here against the worked examples there. A formula that differs
between versions is a rule of the record, so nothing here asks which version it runs.
The model needs what NCCL's topology search found (:class:`Graph`: channels and per-channel
bandwidth per algorithm), which is not in the topology graph: a :class:`System` states it.

Scope: AllReduce with Ring, Tree, NVLS and NVLSTree, the algorithms a node of NVLink GPUs with a
NIC each can run, CollNetDirect and CollNetChain where the network reduces in its switches
(InfiniBand SHARP, with NVLS across nodes beside them), and ReduceScatter and AllGather with Ring
and PAT (one GPU per node); NVLS's and CollNet's ReduceScatter and AllGather are not
modelled. Times are in µs and bandwidths in GB/s (10^9 B/s) as in tuning.cc.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from simulator.model.collective import Collective
from simulator.model.nccl_terms import NVLS_ARCHS, caps_column
from simulator.model.nccl_terms import Arch as Arch
from simulator.model.nccl_terms import CpuVendor as CpuVendor
from simulator.model.nccl_terms import Graph as Graph
from simulator.model.nccl_terms import Hardware as Hardware
from simulator.model.nccl_terms import NcclAlgorithm as NcclAlgorithm
from simulator.model.nccl_terms import Protocol as Protocol
from simulator.model.nccl_versions import LATEST as LATEST
from simulator.model.nccl_versions import TUNINGS, Tuning
from simulator.model.nccl_versions import Version as Version

_T, _R, _N, _NT = NcclAlgorithm.TREE, NcclAlgorithm.RING, NcclAlgorithm.NVLS, NcclAlgorithm.NVLS_TREE
_P = NcclAlgorithm.PAT
_CD, _CC = NcclAlgorithm.COLLNET_DIRECT, NcclAlgorithm.COLLNET_CHAIN
_LL, _LL128, _S = Protocol.LL, Protocol.LL128, Protocol.SIMPLE
_Item = TypeVar("_Item")


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

    @property
    def tuning(self) -> Tuning:
        """The constants and rules of :attr:`version`'s tuner."""
        return TUNINGS[self.version]

    def _column(self) -> int:
        return caps_column(self.nodes)


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
    ReduceScatter and AllGather); NVLS and NVLSTree as the version's rule rates them
    (:attr:`~simulator.model.nccl_versions.Tuning.nvls`). PAT runs only with one GPU per node
    (``ncclPatEnable``)."""
    graph = _graph(system, algorithm)
    if graph is None or (algorithm, protocol) not in CANDIDATES.get(collective, ()):
        return 0.0
    tuning = system.tuning
    if algorithm is _P:
        if system.nodes != system.ranks:
            return 0.0
        bw = tuning.channel_bw(algorithm, graph, system.nodes)
        return graph.channels * bw * tuning.pat_bandwidth_share
    if algorithm in (_N, _NT):
        if not _nvls_enabled(system, algorithm, graph):
            return 0.0
        return tuning.nvls_GBps(algorithm, graph, system.nodes, system.ranks,
                                steps(collective, system.ranks), system.arch)
    if algorithm in (_CD, _CC):
        return _collnet_GBps(system, algorithm, graph)
    if protocol is _LL128 and not system.ll128:
        return 0.0
    column, arch, channels = system._column(), system.arch, graph.channels
    bus = channels * tuning.channel_bw(algorithm, graph, system.nodes)
    ll_max = tuning.ll_max_bw_gbps[arch if system.nodes == 1 else system.cpu][column]
    if algorithm is _R and protocol is _LL:
        bus = min(ll_max, 0.5 * bus)
    if algorithm is _R and protocol is _LL128:
        bus = min(0.92 * bus, channels * tuning.per_channel_max_ring_ll128_gbps[arch][column])
    if algorithm is _T:
        bus = min(0.92 * bus, channels * tuning.per_channel_max_tree_gbps[arch][column])
        if protocol is _LL:
            bus = min(bus / 3.8, ll_max)
        if protocol is _LL128:
            bus = min(bus * (7 / 9 if system.nodes == 1 else 120 / 128),
                      channels * tuning.per_channel_max_tree_ll128_gbps[arch][column])
        if graph.plain_tree:
            bus *= 0.85
        return bus * 0.5
    return bus * system.ranks / steps(collective, system.ranks)  # Ring


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
            bus *= system.tuning.collnet_direct_share_sm90
    return bus * 0.5


def latency_us(system: System, algorithm: NcclAlgorithm, protocol: Protocol,
               collective: Collective = Collective.ALLREDUCE) -> float:
    """The latency NCCL's model charges ``collective``, per nccl-model.md §1.4: a ring's
    nsteps (nNodes-1 of them across nodes for ReduceScatter and AllGather), PAT's
    baseLat + log2i(nNodes)·interLat/3.5 + 2.8·nRanks. A network step costs the NIC's
    latencyInter once more for Simple's flush (PAT's only where the version's
    :attr:`~simulator.model.nccl_versions.Tuning.pat_flushes` says), and Tree's ``hwLat`` with
    one GPU per node where the version substitutes it
    (:attr:`~simulator.model.nccl_versions.Tuning.ppn_one_tree_network`)."""
    graph = _graph(system, algorithm)
    assert graph is not None, algorithm
    tuning = system.tuning
    intra = tuning.hw_latency_us[graph.intra, algorithm, protocol]
    exposed = tuning.ppn_one_tree_network and system.per_node == 1
    net_algorithm = _T if exposed and algorithm in (_T, _R, _P, _CD, _CC) else algorithm
    inter = tuning.hw_latency_us[Hardware.NET, net_algorithm, protocol] + graph.latency_inter_us
    if protocol is _S and (algorithm is not _P or tuning.pat_flushes > 1):
        inter += graph.latency_inter_us  # the flush
    base = tuning.base_latency_us[algorithm, protocol]
    levels = system.nodes.bit_length() - 1  # log2i: floor of log2
    if algorithm is _R:
        ring_steps = steps(collective, system.ranks)
        inter_steps = (2 if collective is Collective.ALLREDUCE else 1) * (system.nodes - 1)
        overhead = 0.0
        if system.nodes > 1:
            overhead = tuning.net_overhead_us[system.cpu] * (3 if protocol is _S else 1)
        return base + (ring_steps - inter_steps) * max(intra, overhead) + inter_steps * inter
    if algorithm is _P:
        return base + levels * inter * tuning.pat_level_share + system.ranks * tuning.pat_per_rank_us
    if algorithm is _T:
        return base + 2 * ((system.per_node - 1) * intra + levels * inter)
    if algorithm is _N:
        return intra + (inter if system.nodes > 1 else 0.0)
    others = system.per_node - 1
    if algorithm is _CD:
        return base + 2 * (min(1.0, others) * intra + others * tuning.collnet_arity_us) + inter
    if algorithm is _CC:
        return base + 2 * others * intra + inter
    return base + intra + 2 * levels * inter  # NVLSTree


def predicted_time_us(system: System, algorithm: NcclAlgorithm, protocol: Protocol,
                      size_bytes: int,
                      collective: Collective = Collective.ALLREDUCE) -> float | None:
    """``ncclTopoGetAlgoTime`` for one ``collective`` of ``size_bytes`` (the whole buffer, as
    ncclFuncMaxSendRecvCount counts it; None: not available): latency + bytes / bandwidth,
    with AllReduce's Tree correction (where the version's rule applies it: Tree below 512 MiB,
    and from 2.28.9 NVLSTree too on Blackwell with an x86 CPU, below 1 GiB) and Ring plateau
    (§1.5). None on one rank: NCCL runs no algorithm there (it copies the buffer,
    ``ncclLaunchOneRank``), and the model's nsteps would be 0."""
    if system.ranks == 1:
        return None
    bw = bandwidth_GBps(system, algorithm, protocol, collective)
    if bw <= 0:
        return None
    tuning = system.tuning
    lat = latency_us(system, algorithm, protocol, collective)
    log_size = (size_bytes >> 6).bit_length() - 1  # log2i(nBytes >> 6); -1 below 64 bytes
    if 0 <= log_size < tuning.corrected_entries(algorithm, system.arch, system.cpu):
        bw *= tuning.tree_correction[protocol][log_size]
    graph = _graph(system, algorithm)
    assert graph is not None, algorithm
    if (algorithm is _R and protocol is _S and system.nodes > 1
            and collective is Collective.ALLREDUCE
            and size_bytes / (graph.channels * system.ranks) >= 64):
        lat *= tuning.ring_plateau[system.arch]
    return lat + size_bytes / (1000 * bw)


def choose(system: System, size_bytes: int, enabled: Enabled = EVERYTHING,
           collective: Collective = Collective.ALLREDUCE) -> Choice:
    """The (algorithm, protocol) with the lowest predicted time for ``collective`` among those
    ``enabled``, as NCCL picks it; ties go to the earlier pair in tuning.cc's order (Tree before
    Ring before PAT, LL before Simple), or from 2.31 the later
    (:attr:`~simulator.model.nccl_versions.Tuning.ties_to_later`). ValueError when no enabled
    pair is available on ``system``."""
    best: Choice | None = None
    for algorithm, protocol in _in_rank_order(system, CANDIDATES.get(collective, ())):
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
        return min(_in_rank_order(system, tuple(known)), key=lambda protocol: known[protocol])
    return _S if _S in protocols else protocols[0]


def _in_rank_order(system: System, items: tuple[_Item, ...]) -> tuple[_Item, ...]:
    """``items`` (in tuning.cc's order) in the order the version's argmin meets them, so that a
    strict ``<`` keeps the pair it breaks ties for: as given, or reversed where ties go to the
    later (NCCL 2.31's list, pushed to the front as it is built: dev src/tuning/tuning.cc:32-38
    and 153-166)."""
    return items[::-1] if system.tuning.ties_to_later else items


def _nvls_enabled(system: System, algorithm: NcclAlgorithm, graph: Graph) -> bool:
    """NVLS needs GPUs with NVLink SHARP (:data:`~simulator.model.nccl_terms.NVLS_ARCHS`) and
    two channels; NVLSTree is off on one node, and NVLS across nodes needs CollNet (tuning.cc:
    disabled "if collnet is not supported"). A communicator with one GPU on each node has no
    NVLS at all (``ncclNvlsInit`` returns with ``gpuCount < 2``, src/transport/nvls.cc:262 of
    v2.30.7): a data-parallel group of one GPU per node, under model parallelism."""
    if system.arch not in NVLS_ARCHS or graph.channels < 2 or system.per_node < 2:
        return False
    return system.nodes > 1 if algorithm is _NT else system.nodes == 1 or system.collnet
