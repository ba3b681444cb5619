"""Execution models: what a collective's messages cost beyond the wire the topology describes.

``ideal`` is the graph as it stands: every closed form is exact where no link is shared. ``nccl``
is what NCCL's kernels achieve on that wire, applied in one place, as a transform of the
:class:`~simulator.model.machine.Machine` (:func:`apply`), so the engine and every closed form
get it without a special case:

- a collective starts after NCCL's base latency for its algorithm and protocol (``baseLat``),
  and, where one thread launches it on several GPUs (nccl-tests' ``-g``), after the launches of
  the GPUs before the last (:mod:`~simulator.model.launch`);
- a message between two ranks pays the step latency of the slowest kind of path it crosses
  (``hwLat``: NVLink, PCI or NET), in place of the graph's wire latencies; a network step also
  pays the transport's latency (``latencyInter``, twice for Simple: the flush;
  :mod:`~simulator.model.transport`), and on several hosts a multi-node Ring Simple's
  latencies are NCCL's "plateau" factor larger (``ring_plateau`` of :data:`KERNELS`);
- on several hosts, the network proxy of a message's sending GPU spends NCCL's ``netOverhead``
  (×3 for Simple) on each message it posts (:attr:`NcclCharges.proxy_s`): a GPU posts a network
  message at most that often, which is what makes a multi-node ring pay ``nsteps ·
  netOverhead`` (tuning.cc: "Inter-node rings still have to launch nsteps * net overhead");
- links carry data at what NCCL achieves on them: NVLink at NCCL's own per-link bandwidth
  (``topo.h``: 20.0 GB/s on SM80, 20.6 on SM90, 40.1 on SM100) times the links per GPU, the network at 12 GB/s
  per 100 Gb/s of wire (``NET_BW``); each times the protocol's share (LL 0.5 of 16-byte lines,
  LL128 0.92, Simple 1; tuning.cc's refinements), LL capped at ``llMaxBw``; NVLink SHARP at the
  share :data:`NVLS_SHARE` fitted to Hopper measurements (:func:`nvls_share` on other GPUs),
  NVLSTree at that rate with its heads' share and NCCL's per-channel ceiling
  (:func:`nvls_tree_nvlink_Bps`);
- reductions happen inside the copy (``recvReduceSend``) and cost no time of their own: the GPU's
  memory bandwidth (1.1 TB/s usable on H100, 0.68 on A100) exceeds the links' rate.

Constants: docs/reference/nccl-model.md (§1.1 latencies, §1.2 caps and topo.h bandwidths); NCCL's
own are the latest version's record (:data:`KERNELS`, :mod:`~simulator.model.nccl_versions`).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import Enum

from simulator.model.launch import thread_skew_s
from simulator.model.machine import GpuSpec, Machine
from simulator.model.nccl import (
    DEFAULT_GRAPHS,
    Arch,
    Graph,
    Hardware,
    NcclAlgorithm,
    Protocol,
    System,
)
from simulator.model.nccl_channels import NVLS_CHANNELS
from simulator.model.nccl_terms import caps_column
from simulator.model.nccl_versions import LATEST, TUNINGS
from simulator.model.routing import LinkId, Route, Routing
from simulator.model.topology import GPU, NET_LINK, NIC, NVLINK, PCIE
from simulator.model.transport import latency_inter_us

KERNELS = TUNINGS[LATEST]
"""The NCCL whose constants time the kernels, whatever the tuner's version: the latest, the best
estimate of what they do (:class:`~simulator.model.nccl.Version`)."""


class Execution(Enum):
    """How messages are timed: on the ideal wire, or as NCCL's kernels run them."""

    IDEAL = "ideal"
    NCCL = "nccl"


NVLINK_GBPS_PER_LINK: Mapping[Arch, float] = {
    Arch.VOLTA: 20.0, Arch.AMPERE: 20.0, Arch.HOPPER: 20.6, Arch.BLACKWELL: 40.1}
"""NCCL's bandwidth of one NVLink link, per direction (``topo.h`` SM70-SM100; nccl-model.md §1.2:
"NCCL's bw per link already includes the ~80% protocol efficiency")."""

NET_SHARE = 12.0 / 12.5
"""NCCL's ``NET_BW`` of 12 GB/s for a 100 Gb/s (12.5 GB/s) NIC (``topo.h``)."""

PROTOCOL_SHARE: Mapping[Protocol, float] = {Protocol.LL: 0.5, Protocol.LL128: 0.92,
                                            Protocol.SIMPLE: 1.0}
"""The share of a link's rate each protocol moves as data: LL's 8 data bytes per 16-byte line
(tuning.cc: Ring LL busBw × 0.5), LL128's 120 of 128 (tuning.cc uses 0.92), Simple all."""

PER_CHANNEL_CAPS: Mapping[tuple[NcclAlgorithm, Protocol], Mapping[Arch, tuple[float, ...]]] = {
    (NcclAlgorithm.RING, Protocol.LL128): KERNELS.per_channel_max_ring_ll128_gbps,
    (NcclAlgorithm.TREE, Protocol.LL128): KERNELS.per_channel_max_tree_ll128_gbps,
    (NcclAlgorithm.TREE, Protocol.LL): KERNELS.per_channel_max_tree_gbps,
    (NcclAlgorithm.TREE, Protocol.SIMPLE): KERNELS.per_channel_max_tree_gbps,
}
"""NCCL's per-channel bandwidth caps (tuning.cc ``perChMaxRingLL128Bws``, ``perChMaxTreeLL128Bws``,
``perChMaxTreeBws``; nccl-model.md §1.2), times the channels of NCCL's graph: a ceiling on the
NVLink rate of those algorithms and protocols (binding only where a calibrated NVLink rate
exceeds it; on the shipped presets the protocol's share is lower)."""

NVLS_SHARE = 0.741
"""The share of the NVLink rate (links × NCCL's per-link bandwidth) that NVLS's in-switch
reduction moves on Hopper, FITTED to docs/reference/nccl-tests-h200.csv: the measured algbw at
1 GiB and above (264-275 GB/s) over 18 × 20.6 GB/s = 370.8 GB/s, at 16 GiB (274.69 / 370.8 =
0.741). NCCL's own nvlsEfficiency (0.85) applies to its graph's bandwidth, which no published log
states; other generations scale the fitted share by nvlsEfficiency (:func:`nvls_share`)."""


def nvls_share(arch: Arch) -> float:
    """The share of the NVLink rate NVLS moves on ``arch``: :data:`NVLS_SHARE`, fitted on Hopper,
    times NCCL's own ratio of in-switch efficiency between ``arch`` and Hopper (tuning.cc
    ``nvlsEfficiency``: 0.74 on Blackwell against 0.85, so 0.645 there). Derived, not fitted: no
    Blackwell measurement went into it, and none checks it (the GB200 NVL72 rack sweep once
    compared with it ran with NVLS off: docs/model.md). Where NCCL runs no NVLS (Volta, Ampere:
    efficiency 0) the share is Hopper's, a rate nothing uses but a calibration's starting
    point."""
    efficiency = KERNELS.nvls_efficiency
    if efficiency[arch] <= 0:
        return NVLS_SHARE
    return NVLS_SHARE * efficiency[arch] / efficiency[Arch.HOPPER]


def nvls_tree_nvlink_Bps(machine: Machine, nvls_Bps: float, arch: Arch | None = None) -> float:
    """The NVLink rate NVLSTree's program moves at, from NVLS's rate ``nvls_Bps``.

    NCCL's NVLS and NVLSTree kernels move the same bytes over a host's NVLink: every GPU puts
    its buffer into the switch and takes the result back, and each head (L per host, one per
    GPU) also pulls the host's sum of its chunk out (``multimem.ld_reduce``) and stores the
    total back in (``multimem.st``), 1/L more each way (src/device/all_reduce.h). The ``nvls``
    program moves only the first part, so NVLS's rate (:data:`NVLS_SHARE`, fitted to it) is
    the kernel's rate over those bytes; ``nvls_tree`` moves the heads' part too, so its link
    rate is that × (L+1)/L (0.741 × 9/8 = 0.834 on 8 GPUs, against nvlsEfficiency's 0.85).
    Derived, not fitted.

    Where NCCL's graph for NVLSTree on ``arch`` is known, the rate is capped by NCCL's own
    ceiling on the NVLSTree kernel, ``perChMaxNVLSTreeBws`` (tuning.cc: 57.7 GB/s of bus
    bandwidth per channel on two Hopper nodes, 45.5 on more), times the graph's channels, as
    :data:`PER_CHANNEL_CAPS` caps the other kernels: converted to this program's link rate,
    busbw × p / (2(p-1)) (algbw) × (L+1)/L. On 2 × 8 H100 that is 8 × 57.7 × 16/30 × 9/8 =
    277 GB/s, below the 309 GB/s of NVLS's rate."""
    heads = max(machine.layout.ranks_per_host)
    rate = nvls_Bps * (heads + 1) / heads
    graph = None if arch is None else DEFAULT_GRAPHS.get(arch, {}).get(NcclAlgorithm.NVLS_TREE)
    if arch is None or graph is None or machine.ranks < 2:
        return rate
    nodes = machine.layout.host_count
    bus = graph.channels * KERNELS.per_channel_max_nvls_tree_gbps[arch][caps_column(nodes)] * 1e9
    return min(rate, bus * machine.ranks / (2 * (machine.ranks - 1)) * (heads + 1) / heads)


MAX_STREAM_PIECES = 64
"""The most pieces a multi-phase schedule (``hierarchical``) streams a buffer in under NCCL's
execution: its fill and drain then cost about 2/64 of its time, and the simulation stays small."""


def stream_choices(size_bytes: int) -> tuple[int, ...]:
    """The piece sizes a buffer of ``size_bytes`` may stream through phases in under ``nccl``:
    the whole buffer, halves, quarters, ... down to 1/:data:`MAX_STREAM_PIECES`. The runner takes
    the one the algorithm's closed form finds fastest, as NCCL sizes its chunks per message
    (``calcCollChunking`` in src/enqueue.cc shrinks them for smaller messages): more pieces
    overlap the phases better, each costs its steps' latencies again."""
    pieces = 1
    choices = []
    while pieces <= MAX_STREAM_PIECES:
        choices.append(-(-size_bytes // pieces))
        pieces *= 2
    return tuple(dict.fromkeys(choices))


NCCL_STEPS = 8
"""Slots of a connection's buffer (``NCCL_STEPS``, src/include/device.h)."""

RING_CHUNK_BYTES = 2 << 20
"""Ring Simple's chunk: ``ALLREDUCE_CHUNKSTEPS`` (NCCL_STEPS/2 = 4) steps of NCCL_BUFFSIZE /
NCCL_STEPS = 4 MiB / 8 = 512 KiB (``calcCollChunking`` in src/enqueue.cc, ``DEFAULT_BUFFSIZE``
in src/init.cc); a ring smaller than a loop (channels × ranks × chunk) runs chunks of
⌈S / (channels · ranks)⌉ (``runRing`` in src/device/all_reduce.h)."""

NVLS_CHUNK_BYTES = 128 << 10
"""NVLS's chunk (``NCCL_NVLS_CHUNKSIZE``, 128 KiB, src/transport/nvls.cc), which
``calcCollChunking`` shrinks for smaller buffers (:func:`nvls_chunk_bytes`)."""


def nvls_chunk_bytes(size_bytes: int, channels: int) -> int:
    """NVLS's chunk for an allreduce of ``size_bytes`` on ``channels`` channels, as
    ``calcCollChunking`` (src/enqueue.cc) sets it: 64 KiB below 64 chunks a channel, 32 KiB below
    8, 16 KiB below 2."""
    chunk = NVLS_CHUNK_BYTES
    for chunks, smaller in ((64, 64 << 10), (8, 32 << 10), (2, 16 << 10)):
        if size_bytes < chunks * channels * chunk and chunk > smaller:
            chunk = smaller
    return chunk


NVLS_TREE_MAX_CHUNK_BYTES = 64 << 10
"""NVLSTree's chunk ceiling on 4 nodes or more (``NCCL_NVLSTREE_MAX_CHUNKSIZE`` unset: 64 KiB
where ``nNodes >= 4``, else NVLS's chunk; src/transport/nvls.cc:229 at 2.30.7, the same rule
in src/enqueue.cc:1894-1896 at 2.26.2 and at nvls.cc:229 of the 2.31 dev branch, 86fa684d)."""


def nvls_tree_chunk_bytes(channel_bytes: int, nodes: int, heads: int) -> int:
    """NVLSTree's chunk on ``nodes`` Hopper nodes for one NVLS channel's part of an allreduce,
    ``channel_bytes``, shared by ``heads`` heads: ``calcCollChunking`` runs once per channel, with
    ``nChannels`` 1 and that channel's bytes (src/enqueue.cc:725-737 at 2.30.7), and sets it
    (enqueue.cc:2276-2285) to NVLS's 128 KiB, at most :data:`NVLS_TREE_MAX_CHUNK_BYTES` from 4
    nodes, then cut to 256, 128, 64 and 32 KiB where the part holds fewer than 32, 16, 4 and 1
    chunks a head (the first two never apply from at most 128 KiB)."""
    chunk = NVLS_TREE_MAX_CHUNK_BYTES if nodes >= 4 else NVLS_CHUNK_BYTES
    for loops, smaller in ((32, 256 << 10), (16, 128 << 10), (4, 64 << 10), (1, 32 << 10)):
        if channel_bytes < loops * heads * chunk and chunk > smaller:
            chunk = smaller
    return chunk


def nvls_tree_piece_bytes(machine: Machine, size_bytes: int) -> int | None:
    """The pipeline piece of ``nvls_tree`` (a head's chunk of one tree's half) as NCCL's kernel
    moves it on ``machine``: channel c runs tree c % 2 (``connectNvls``, src/graph/connect.cc:312),
    so each tree has half the NVLS channels, each moving a chunk of every head's part in step
    with the others (:func:`nvls_tree_chunk_bytes`, of a channel's share of the buffer, rounded
    up as NCCL's channels but the last get it); one piece stands for those channels' chunks,
    which cross each hop together in the time the piece does at their summed rate. From 4 DGX
    H100 nodes and 8 MiB that is 8 × 64 KiB, the 512 KiB the schedule takes by default; on 2 and 3
    nodes NVLS's 128 KiB chunk makes it 1 MiB from 64 MiB; below 8 MiB it is 8 × 32 KiB. Each
    channel of ``channels: k`` takes the same pieces. None (the schedule's default) on Blackwell,
    whose NVLSTree channels and chunk across nodes ``ncclNvlsTreeSm100Tuning`` sets (not
    modelled: :mod:`~simulator.model.nccl_channels`), and where the hosts differ in size."""
    return _nvls_tree_piece(machine, system_of(machine).graphs.get(NcclAlgorithm.NVLS_TREE),
                            size_bytes)


def _nvls_tree_piece(machine: Machine, graph: Graph | None, size_bytes: int) -> int | None:
    """:func:`nvls_tree_piece_bytes` with NCCL's NVLSTree graph (its channels are the heads)
    already at hand, as :func:`nccl_charges` has it."""
    layout = machine.layout
    if arch_of(machine.compute_capability) is not Arch.HOPPER or graph is None \
            or layout.host_count < 2 or len(layout.ranks_per_host) != 1:
        return None
    channels = NVLS_CHANNELS[Arch.HOPPER]
    chunk = nvls_tree_chunk_bytes(-(-size_bytes // channels), layout.host_count, graph.channels)
    return channels // 2 * chunk


def fill_s(family: NcclAlgorithm, protocol: Protocol, size_bytes: int, ranks: int,
           channels: int, rate_Bps: float) -> float:
    """The time NCCL's pipeline takes to fill, beyond the bandwidth term, for an allreduce of
    ``size_bytes`` over ``channels`` channels moving ``rate_Bps`` in all (0 for LL and LL128,
    which forward data line by line, and for Tree). Like the base latency it is charged to every
    schedule of the family, each run by kernels that move NCCL's chunks.

    - Ring Simple forwards a chunk only once it has arrived (one synchronisation a step): the
      pipeline starts a chunk's time late on its channel, chunk = min(2 MiB, S / (channels ·
      ranks)) at ``rate_Bps / channels``.
    - NVLS reduces in the switch and multicasts back in two halves that overlap only once the
      buffer holds ``NCCL_STEPS`` chunks on every channel: the first min(S, 8 · chunk · channels)
      bytes cross without overlap.

    Derived from NCCL's chunk sizes, not fitted. Against the data (docs/fidelity.md) it brings
    the A100 ring from 256 MiB within 0.3-3.1 % (was 3.2-5.8 %), NVLS on H200 at 2-64 MiB within
    -10..+9 % (was +14..+39 %), and the H200 sweep's geometric mean error from 12.4 % to 5.8 %.
    """
    if protocol is not Protocol.SIMPLE or size_bytes <= 0 or rate_Bps <= 0:
        return 0.0
    if family is NcclAlgorithm.RING:
        chunk = min(RING_CHUNK_BYTES, -(-size_bytes // (channels * ranks)))
        return chunk * channels / rate_Bps
    if family is NcclAlgorithm.NVLS:
        in_flight = NCCL_STEPS * nvls_chunk_bytes(size_bytes, channels) * channels
        return min(size_bytes, in_flight) / rate_Bps
    return 0.0


@dataclass(frozen=True)
class NcclCharges:
    """What NCCL's execution of one algorithm and protocol charges beyond the wire (the machine
    as :func:`apply` times it): a start delay (NCCL's base
    latency and the pipeline's fill at this size), the latency of a step by kind of path, each
    kind of link's rate (None: the graph's), and the time a GPU's network proxy spends posting
    each network message (0 on one host)."""

    protocol: Protocol
    base_latency_s: float
    step_latency_s: Mapping[Hardware, float]
    link_rate_Bps: Mapping[str, float | None]
    fill_s: float = 0.0
    proxy_s: float = 0.0
    net_share: float = NET_SHARE
    """The share of a network link's rate NCCL achieves (``NET_BW``'s, or a calibrated one)."""
    piece_bytes: int | None = None
    """The pipeline piece NCCL's kernel of the family moves at this size where the model knows
    it (NVLSTree on Hopper: :func:`nvls_tree_piece_bytes`); None: the schedule's default."""
    nvswitch_latency_s: float | None = None
    """The latency of a reduction in a host's NVSwitch under these charges (None: the machine's,
    the presets' NVLS step of NCCL's model, and the wire's hops to and from the switch); 0 for
    a symmetric kernel, whose model has no latency but its base latency, and then its hops
    over NVLink to and from the switch take none either."""

    @property
    def start_s(self) -> float:
        """How much later than on the wire alone the collective ends: base latency and fill."""
        return self.base_latency_s + self.fill_s


def nccl_charges(machine: Machine, family: NcclAlgorithm, protocol: Protocol,
                 size_bytes: int = 0, kernel: bool = True) -> NcclCharges:
    """What NCCL algorithm ``family`` with ``protocol`` charges on ``machine`` for an allreduce
    of ``size_bytes`` (0: no pipeline fill, no plateau), run by NCCL's own kernel for the
    family (``kernel``, ``NcclBinding.kernel``) or by another schedule timed as that family;
    ValueError when the machine does not state its GPUs (compute capability and NVLink links)
    or the pair does not exist (NVLS runs Simple only). The host CPU and the network's
    transport are the machine's (:class:`~simulator.model.machine.NcclFacts`)."""
    if machine.compute_capability == 0 or machine.nvlinks == 0:
        raise ValueError("needs a topology that states compute_capability and nvlinks, as the "
                         "dgx_h100 and dgx_a100 presets do")
    if (family, protocol) not in KERNELS.base_latency_us:
        raise ValueError(f"NCCL runs {family.value} with the Simple protocol only")
    arch = arch_of(machine.compute_capability)
    if arch not in NVLINK_GBPS_PER_LINK:  # AMD: simulator.model.rccl_execution.rccl_charges
        raise ValueError(f"NCCL does not run on {arch.name} GPUs: RCCL's model times them")
    nodes = machine.layout.host_count
    facts = machine.nccl
    cpu = facts.cpu
    achieved = facts.nvlink_Bps or machine.nvlinks * NVLINK_GBPS_PER_LINK[arch] * 1e9
    if family is NcclAlgorithm.NVLS:
        nvlink = facts.nvls_Bps or nvls_share(arch) * achieved
        if nodes > 1:  # with SHARP across hosts the heads' part moves too, as NVLSTree's
            heads = max(machine.layout.ranks_per_host)
            nvlink *= (heads + 1) / heads
    elif family is NcclAlgorithm.NVLS_TREE:
        nvlink = nvls_tree_nvlink_Bps(machine, facts.nvls_Bps or nvls_share(arch) * achieved, arch)
    else:
        nvlink = achieved * PROTOCOL_SHARE[protocol]
    cap = KERNELS.ll_max_bw_gbps[arch if nodes == 1 else cpu][caps_column(nodes)] * 1e9
    per_channel = PER_CHANNEL_CAPS.get((family, protocol))
    graph = system_of(machine).graphs.get(family)
    if per_channel is not None and graph is not None:
        nvlink = min(nvlink, graph.channels * per_channel[arch][caps_column(nodes)] * 1e9)
    rates: dict[str, float | None] = {NVLINK: nvlink, PCIE: None, NET_LINK: None}
    if protocol is Protocol.LL:
        rates[NVLINK] = min(nvlink, cap)
    channels, rate = (graph.channels if graph is not None else 1), rates[NVLINK] or nvlink
    nic = nic_Bps(machine)
    net_share = min(facts.net_Bps / nic, 1.0) if facts.net_Bps and nic else NET_SHARE  # ≤ wire
    if nodes > 1 and nic:  # across hosts a channel runs at one NIC's pace, one channel a rail
        channels = max(machine.layout.ranks_per_host)
        rate = channels * nic * net_share * PROTOCOL_SHARE[protocol]
    base, steps = latencies(machine, family, protocol, size_bytes, kernel)
    proxy_s = KERNELS.net_overhead_us[cpu] * (3 if protocol is Protocol.SIMPLE else 1) * 1e-6 \
        if nodes > 1 else 0.0  # getNetOverhead, ×3 for Simple (tuning.cc:405-408)
    start = base + facts.launch_s + thread_skew_s(facts.gpus_per_thread)
    piece = _nvls_tree_piece(machine, graph, size_bytes) \
        if family is NcclAlgorithm.NVLS_TREE and kernel and size_bytes > 0 else None
    return NcclCharges(protocol, start, steps, rates,
                fill_s(family, protocol, size_bytes, machine.ranks, channels, rate), proxy_s,
                net_share, piece_bytes=piece)


def latencies(machine: Machine, family: NcclAlgorithm, protocol: Protocol, size_bytes: int,
              kernel: bool = True) -> tuple[float, dict[Hardware, float]]:
    """NCCL's base latency and the latency of a step by kind of path (s) for ``family`` and
    ``protocol`` on ``machine`` (``kernel``: run by NCCL's own kernel of the family), as
    tuning.cc builds its latencies:

    - a network step pays ``hwLat`` NET plus the transport's ``latencyInter``, twice for Simple
      ("the flush extra latency", tuning.cc:389-391; :mod:`~simulator.model.transport`);
    - with one GPU per host a Ring or Tree network step pays the Tree's NET latency ("With
      ppn=1 latencies are fully exposed, use the Tree network latency", tuning.cc:386);
    - NCCL's multi-node ring kernel, Simple, at 64 bytes per rank and channel or more, has all
      its latencies ×1.4 (×1.9 before SM80), the "plateau effect of ring" of
      ``ncclTopoGetAlgoTime`` (a figure of NCCL's ring kernel: other schedules timed as Ring
      do not get it)."""
    arch, nodes = arch_of(machine.compute_capability), machine.layout.host_count
    simple = protocol is Protocol.SIMPLE
    inter_us = network_latency_us(machine) * (2 if simple else 1)
    exposed = (family in (NcclAlgorithm.RING, NcclAlgorithm.TREE) and nodes > 1
               and max(machine.layout.ranks_per_host) == 1)
    net = KERNELS.hw_latency_us[Hardware.NET, NcclAlgorithm.TREE if exposed else family, protocol]
    steps_us = {hw: KERNELS.hw_latency_us[hw, family, protocol] for hw in Hardware}
    steps_us[Hardware.NET] = net + inter_us
    factor = 1.0
    ring = DEFAULT_GRAPHS.get(arch, {}).get(NcclAlgorithm.RING)
    if (kernel and family is NcclAlgorithm.RING and simple and nodes > 1 and ring is not None
            and size_bytes / (ring.channels * machine.ranks) >= 64):
        factor = KERNELS.ring_plateau[arch]
    base = KERNELS.base_latency_us[family, protocol] * factor * 1e-6
    return base, {hw: latency * factor * 1e-6 for hw, latency in steps_us.items()}


def apply(charges: NcclCharges, machine: Machine) -> Machine:
    """``machine`` as ``charges`` time it: its routes through :class:`NcclRouting`, its GPU's
    reductions free, as they happen inside the copy, and a reduction in a network switch
    (SHARP) a network step of the charges' (``hwLat`` NET of the algorithm, 31 µs for
    CollNetDirect, 30 for CollNetChain, 18 for NVLS, plus the transport's latency, twice for
    Simple), in place of the switch's own latency, as NCCL's model charges CollNet's
    ``interLat`` once each way up and down the network; a reduction in an NVSwitch the charges'
    :attr:`NcclCharges.nvswitch_latency_s` where it sets one."""
    net, nvswitch = charges.step_latency_s[Hardware.NET], charges.nvswitch_latency_s
    switches = tuple(replace(switch, reduction_latency_s=net) if switch.network
                     else switch if nvswitch is None
                     else replace(switch, reduction_latency_s=nvswitch)
                     for switch in machine.reducing_switches)
    return replace(machine, routing=NcclRouting(machine.routing, charges), gpu=GpuSpec(),
                   reducing_switches=switches)


class NcclRouting(Routing):
    """The routes of a topology as NCCL's charges time them: the same paths, rank-to-rank
    latencies by the kind of path, and link rates by the kind of link, never above the wire's
    (network and PCIe links keep their rate times NET_SHARE and the protocol's share). The
    paths are the wire's, except where NCCL's PXN relays a send over NVLink to keep it on its
    rail (:meth:`_pxn`)."""

    def __init__(self, base: Routing, charges: NcclCharges) -> None:
        super().__init__(base._graph, base.down)
        self._base = base
        self._charges = charges
        self._by_host: dict[object, list[str]] = {}

    def route(self, src: str, dst: str) -> Route:
        key = (src, dst)
        if key not in self._cache:
            base = self._pxn(src, dst)
            latency, proxy = base.latency_s, 0.0
            if self._base.is_gpu(src) and self._base.is_gpu(dst) and src != dst:
                hardware = self.hardware(base)
                latency = self._charges.step_latency_s[hardware]
                proxy = self._charges.proxy_s if hardware is Hardware.NET else 0.0
            elif (self._charges.nvswitch_latency_s is not None and src != dst
                  and self.hardware(base) is Hardware.NVLINK):  # a GPU's hop to the NVSwitch
                latency = 0.0
            bottleneck = min((self.capacity_Bps(link) for link in base.links), default=float("inf"))
            self._cache[key] = Route(base.nodes, base.links, latency, bottleneck, proxy)
        return self._cache[key]

    def without(self, down: frozenset[LinkId]) -> Routing:
        return NcclRouting(self._base.without(down), self._charges)

    def _pxn(self, src: str, dst: str) -> Route:
        """The path NCCL's PXN takes (NCCL ≥ 2.12, on unless ``NCCL_PXN_DISABLE=1``): a send
        to another host whose route would climb above the leaves (a GPU on another rail of a
        rail-optimised fabric) first crosses NVLink to the GPU of its own host that shares a
        leaf with the destination, and leaves through that GPU's NIC, so that inter-host
        traffic stays on its rail. Where no GPU of the host shares a leaf with the destination
        (between scalable units), the send still leaves through the NIC on the destination's
        rail (:meth:`_rail`): a channel enters and leaves a host on one NIC, "NET n -> GPU a ->
        .. -> GPU x -> NET n" (NCCL 5067397c ``src/graph/search.cc:827``), the next host's
        chain starting at the GPU nearest that NIC, and GPU x reaches NET n by PXN
        (``src/graph/paths.cc:819-836``), whatever the tiers above the leaves; a send without a
        channel's graph takes the NIC its peer prefers (``NCCL_P2P_PXN_LEVEL`` 2, by default,
        ``search.cc:1397-1440``). Any other route is the wire's."""
        base = self._base.route(src, dst)
        if not self._climbs(base) or not (self.is_gpu(src) and self.is_gpu(dst)):
            return base
        host = self._graph.nodes[src].get("host")
        relays = [gpu for gpu in self._host_gpus(host) if gpu != src]
        below = (gpu for gpu in relays if not self._climbs(self._base.route(gpu, dst)))
        first = next(below, None)  # routed lazily: the first that takes the send wins
        rail = self._rail(dst)
        on_rail = ([] if rail is None or self._rail(src) == rail
                   else [gpu for gpu in relays if self._rail(gpu) == rail])
        for relay in on_rail if first is None else itertools.chain([first], below):
            hop = self._base.route(src, relay)
            if any(self.link_kind(link) != NVLINK for link in hop.links):
                continue
            onward = self._base.route(relay, dst)
            return Route(hop.nodes + onward.nodes[1:], hop.links + onward.links,
                         hop.latency_s + onward.latency_s,
                         min(hop.bottleneck_Bps, onward.bottleneck_Bps))
        return base

    def _rail(self, gpu: str) -> str | None:
        """The rail of a GPU's NIC: the NIC's name within its host (``nic3`` of ``n5.nic3``),
        the same on every host of a rail-optimised fabric; None where the GPU names no NIC."""
        nic = self._graph.nodes[gpu].get("nic")
        return nic.partition(".")[2] or None if isinstance(nic, str) else None

    def _climbs(self, route: Route) -> bool:
        """Whether a route crosses a switch above the leaves (tier 2 or more)."""
        return any(int(self._graph.nodes[node].get("tier", 0)) >= 2 for node in route.nodes)

    def _host_gpus(self, host: object) -> list[str]:
        """The GPUs of ``host``, in name order (none when GPUs have no host)."""
        if not self._by_host:  # built once, on the first route that climbs
            for node, data in self._graph.nodes(data=True):
                if data.get("kind") == GPU and data.get("host") is not None:
                    self._by_host.setdefault(data["host"], []).append(node)
            for gpus in self._by_host.values():
                gpus.sort()
        return self._by_host.get(host, [])

    def capacity_Bps(self, link: LinkId) -> float:
        kind = self.link_kind(link)
        rate = self._charges.link_rate_Bps.get(kind)
        if rate is not None:  # never above the wire: NCCL's model of its multicast two-shot
            return min(rate, self._base.capacity_Bps(link))  # rates 515 GB/s, NVLink is 450
        charges = self._charges
        share = PROTOCOL_SHARE[charges.protocol] * (charges.net_share if kind == NET_LINK
                                                    else 1.0)
        return self._base.capacity_Bps(link) * share

    def capacities(self) -> dict[LinkId, float]:
        return {link: self.capacity_Bps(link) for link in self._base.capacities()}

    def hardware(self, route: Route) -> Hardware:
        """The slowest kind of path a route crosses: the network, else PCIe, else NVLink."""
        kinds = {self.link_kind(link) for link in route.links}
        if NET_LINK in kinds:
            return Hardware.NET
        return Hardware.PCI if PCIE in kinds else Hardware.NVLINK


def system_of(machine: Machine) -> System:
    """NCCL's view of ``machine`` for its cost model: ranks, hosts, GPU generation, host CPU,
    the tuner's version, and the graphs its search found there (``machine.nccl.graphs``, read
    from its graph dump or log) or is assumed to find (:data:`~simulator.model.nccl.
    DEFAULT_GRAPHS`), each with the transport's latency as its ``latencyInter``
    (src/graph/search.cc:745)."""
    arch, nodes = arch_of(machine.compute_capability), machine.layout.host_count
    inter = network_latency_us(machine)
    if machine.nccl.graphs:  # what NCCL's search found here (its graph dump or log)
        graphs = {algorithm: replace(graph, latency_inter_us=inter)
                  for algorithm, graph in machine.nccl.graphs}
        collnet = NcclAlgorithm.COLLNET_DIRECT in graphs or NcclAlgorithm.COLLNET_CHAIN in graphs
        return System(ranks=machine.ranks, nodes=nodes, arch=arch, graphs=graphs,
                      cpu=machine.nccl.cpu, version=machine.nccl.version, collnet=collnet)
    graphs = {algorithm: _across(machine, algorithm, replace(graph, latency_inter_us=inter))
              for algorithm, graph in DEFAULT_GRAPHS.get(arch, {}).items()}
    collnet = machine.sharp_unsupported() is None and NcclAlgorithm.RING in graphs
    if collnet:
        graphs.update(collnet_graphs(machine, graphs[NcclAlgorithm.RING].channels, inter))
    return System(ranks=machine.ranks, nodes=nodes, arch=arch, graphs=graphs,
                  cpu=machine.nccl.cpu, version=machine.nccl.version, collnet=collnet)


MAX_DIRECT_HEADS = 8
"""CollNetDirect's heads a node at most: ``NCCL_MAX_DIRECT_ARITY + 1`` (src/include/device.h:
arity 7), the search's ``maxChannels`` for ``NCCL_TOPO_PATTERN_COLLNET_DIRECT``."""


def collnet_graphs(machine: Machine, ring_channels: int,
                   latency_inter_us: float) -> dict[NcclAlgorithm, Graph]:
    """The CollNet graphs NCCL's search finds where the network reduces (src/graph/search.cc,
    ``ncclTopoCompute``; src/init.cc sets their channel limits), derived as :func:`_across`
    derives Ring's and Tree's, ASSUMED (no published log prints them):

    - CollNetDirect: a channel per head, min(8, GPUs a host) heads (``maxChannels``); each
      head's channel takes its NVLink both ways to every other GPU at 1/(L-1) of its speed
      (``ncclTopoSearchTryCollnetDirect``, ``mul = 1/(ngpus-1)``), so a GPU's NVLink carries
      twice the speed (its own head's and its share of the others'); the speed is the fastest
      inter-node speed a NIC carries (its wire rate) with 2 × speed within NVLink;
    - CollNetChain: a tree-pattern graph with as many channels as the ring
      (``collNetChainGraph->minChannels = maxChannels = ringGraph->nChannels``), at the
      fastest inter-node speed the NICs carry that many channels at;
    - both: pass 2 raises bwIntra alone while it is below twice bwInter ("increase bwIntra for
      trees (2 nodes or collnet)") and NVLink carries it: on Hopper not above 48 GB/s, sm90's
      top speed; on Blackwell to 96.

    DGX H100 (8 NICs of 400 Gb/s): Direct 8 × 48/48, Chain 8 × 48/48; DGX B200: 8 × 96/48."""
    budget = _SearchBudget.of(machine)
    if budget is None:
        return {}
    wire, nics, total, tree_total = budget.wire, budget.nics, budget.nvlink, budget.tree_nvlink
    speeds = SPEEDS_INTER[budget.arch]
    fits = [speed for speed in speeds if speed <= wire]
    heads = min(MAX_DIRECT_HEADS, budget.local)
    graphs = {}
    direct = next((speed for speed in fits if 2 * speed <= total), None)
    if direct is not None:
        graphs[NcclAlgorithm.COLLNET_DIRECT] = Graph(
            heads, _raised(speeds, direct, lambda s: 2 * s <= total), direct,
            latency_inter_us=latency_inter_us)
    chain = next((speed for speed in fits if ring_channels <= nics * math.floor(wire / speed)
                  and ring_channels * speed <= tree_total), None)
    if chain is not None:
        graphs[NcclAlgorithm.COLLNET_CHAIN] = Graph(
            ring_channels, _raised(speeds, chain, lambda s: ring_channels * s <= tree_total),
            chain, latency_inter_us=latency_inter_us)
    return graphs


def _raised(speeds: tuple[float, ...], inter: float, fits: Callable[[float], bool]) -> float:
    """Pass 2 of the search for a CollNet graph at ``inter``: bwIntra raised speed by speed
    while below twice ``inter`` and the next faster speed still ``fits``."""
    intra = inter
    faster = [speed for speed in reversed(speeds) if speed > inter]
    for speed in faster:
        if intra >= 2 * inter or not fits(speed):
            break
        intra = speed
    return intra


SPEEDS_INTER: Mapping[Arch, tuple[float, ...]] = {
    Arch.VOLTA: (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0,
                 3.0, 2.4, 1.2, 0.24, 0.12),
    Arch.AMPERE: (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0,
                  3.0, 2.4, 1.2, 0.24, 0.12),
    Arch.HOPPER: (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
                  2.4, 1.2, 0.24, 0.12),
    Arch.BLACKWELL: (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                     15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12),
}
"""The speeds (GB/s a channel) NCCL's topology search tries across nodes, fastest first
(``speedArrayInter``, ``sm90SpeedArrayInter``, ``sm100SpeedArrayInter`` of src/graph/search.cc,
v2.30.7)."""


@dataclass(frozen=True)
class _SearchBudget:
    """What NCCL's search may spend on a multi-node graph (GB/s): a NIC's wire rate, the NICs
    a host, a GPU's NVLink (``totalBw``: links × NCCL's per-link rate; ×L/(L-1) for a tree of
    L GPUs a host, as ``ncclTopoCompute`` raises it for any pattern but the ring), and the GPUs
    a host."""

    arch: Arch
    wire: float
    nics: int
    nvlink: float
    local: int

    @property
    def tree_nvlink(self) -> float:
        """NVLink's budget for a tree pattern."""
        local = self.local
        return self.nvlink * (local / (local - 1)) if local > 1 else self.nvlink

    @classmethod
    def of(cls, machine: Machine) -> _SearchBudget | None:
        """The budget on ``machine``; None without NICs or without NVLink."""
        ports = nic_ports(machine)
        if not ports or machine.nvlinks == 0:
            return None
        arch = arch_of(machine.compute_capability)
        return cls(arch, min(ports) / 1e9, max(1, len(ports) // machine.layout.host_count),
                   machine.nvlinks * NVLINK_GBPS_PER_LINK[arch],
                   max(machine.layout.ranks_per_host))


def _across(machine: Machine, algorithm: NcclAlgorithm, graph: Graph) -> Graph:
    """``graph`` as NCCL's search finds it on several hosts, for a Ring or a Tree (search.cc,
    ``ncclTopoCompute``): each channel then starts at a NIC and ends at one, so

    - its speed is one of the inter-node speeds no faster than a GPU's path to a NIC
      (``maxBw``; the NIC's wire rate, speed / 8000 GB/s: 50 for 400 Gb/s, so 48 GB/s on the
      speed array, 24 for 200 Gb/s; PCIe Gen5's 48 is never below it here);
    - a NIC carries as many channels as its wire rate holds at that speed (one at 48, two at
      24 on 400 Gb/s: the search subtracts each channel's speed from the NIC's);
    - a GPU's NVLink (``totalBw``: links × NCCL's per-link rate) carries channels × speed; ×
      L/(L-1) for a tree of L GPUs a host, as ``ncclTopoCompute`` raises totalBw for any pattern
      but the ring ("algo other than RING do not need to close to the starting NET");
    - the search keeps the graph with the most channels × speed (``ncclTopoCompareGraphs``),
      the faster speed on a tie, and duplicates channels only at 25 GB/s or more, and from SM90
      only at 50 or more with over four channels (``ncclTopoDupChannels``).

    DGX H100 (8 NICs of 400 Gb/s, 370.8 GB/s of NVLink): Ring 8 × 45 GB/s, Tree 8 × 48; DGX
    A100 (200 Gb/s): 8 × 24; DGX B200: 8 × 48. Derived from search.cc, ASSUMED: no published
    multi-node log prints these graphs. Another reading of the search's per-link bookkeeping
    (a GPU's NVLink carries every ring channel but the one it leaves by the network, 7 × 48 ≤
    370.8) gives the H100 ring 8 × 48; the measurements side with 8 × 45: with 384 GB/s the
    tuner would pick Ring over NVLSTree from 1 GiB on 8 H100 nodes, where NVIDIA reports
    NVLSTree as the multi-node default and nccl-tests#309's 8-node times are NVLSTree's
    (docs/fidelity.md). Not modelled: the second pass raising a tree's bwIntra
    on two nodes (it cannot above 48 GB/s on Hopper, sm90's top speed; on Blackwell, whose
    speeds go above 48, it would). The wire rate is the NIC's, not a calibrated rate: the
    search never sees what NCCL achieves. On one host, without NICs or without NVLink, the
    graph is unchanged."""
    hosts = machine.layout.host_count
    if hosts < 2 or algorithm not in (NcclAlgorithm.RING, NcclAlgorithm.TREE):
        return graph
    budget = _SearchBudget.of(machine)
    if budget is None:
        return graph
    arch, wire, nics = budget.arch, budget.wire, budget.nics
    total = budget.tree_nvlink if algorithm is NcclAlgorithm.TREE else budget.nvlink
    speeds = [speed for speed in SPEEDS_INTER[arch] if speed <= wire]
    options = [(min(nics * math.floor(wire / speed), math.floor(total / speed)), speed)
               for speed in speeds if speed / speeds[0] > 0.49]
    options = [(channels, speed) for channels, speed in options if channels > 0]
    if not options:
        return graph
    channels, speed = max(options, key=lambda option: (option[0] * option[1], option[1]))
    if speed >= 25.0 and not (arch.value > 80 and speed < 50.0 and channels > 4):
        channels, speed = 2 * channels, speed / 2
    return replace(graph, channels=channels, bw_intra_GBps=speed, bw_inter_GBps=speed)


def nic_ports(machine: Machine) -> tuple[float, ...]:
    """The wire rate of every NIC port of the machine (a NIC's link to the network)."""
    return _nic_ports(machine.routing)


@functools.lru_cache(maxsize=16)
def _nic_ports(routing: Routing) -> tuple[float, ...]:
    """:func:`nic_ports` of one routing, found once: every point of a sweep asks NCCL's model
    (14 ms a time over the links of 64 DGX H100 on their superpod fabric)."""
    return tuple(bw for link, bw in routing.capacities().items()
                 if routing.link_kind(link) == NET_LINK and routing.node_kind(link[0]) == NIC)


def nic_Bps(machine: Machine) -> float:
    """The wire rate of the machine's slowest NIC port (its link to the network, not an
    uplink), 0 without NICs."""
    return min(nic_ports(machine), default=0.0)


def network_latency_us(machine: Machine) -> float:
    """``latencyInter`` on ``machine`` (µs): the transport's latency
    (:func:`~simulator.model.transport.latency_inter_us`) plus any calibrated
    ``nccl_net_latency``; 0 on one host."""
    nodes = machine.layout.host_count
    extra = machine.nccl.net_latency_s * 1e6 if nodes > 1 else 0.0
    return latency_inter_us(machine.nccl.transport, nodes) + extra


def arch_of(compute_capability: int) -> Arch:
    """The generation of a compute capability (80-89 Ampere, 90-99 Hopper, ...)."""
    for arch in sorted(Arch, key=lambda a: -a.value):
        if compute_capability >= arch.value:
            return arch
    raise ValueError(f"compute capability {compute_capability} is older than Volta (70)")
