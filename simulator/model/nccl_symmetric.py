"""NCCL's cost model of its symmetric-memory allreduce kernels (NCCL 2.27+), and which one NCCL
launches: inside one NVLink domain, the one-shot kernels ``AllReduce_AGxLL_R`` and
``AllReduce_AGxLLMC_R`` (every GPU gathers every peer's whole buffer by LL loads, or has it
multicast, and reduces locally), the two-shot ``AllReduce_RSxLD_AGxST`` (reduce-scatter by
loads, then allgather by stores) and ``AllReduce_RSxLDMC_AGxSTMC`` (the same through the
NVSwitch's multimem loads and stores).

Their speed is set by the SMs (CTAs, "blocks") they run on, not by the links alone:

    t = baseLat + softplus(busBytes / bw - 1),  bw = softmin(nSMs·smBw·busMul, peakBw, smBw),

smooth versions of ``t = baseLat + busBytes / min(nSMs·smBw·busMul, peakBw)``. NCCL runs one of
them, ahead of its tuner, for an allreduce whose buffers are registered as symmetric windows
(``ncclCommWindowRegister`` with ``NCCL_WIN_COLL_SYMMETRIC``; ``nccl.symmetric: true``), a sum
or average of float32, float16 or bfloat16, on one NVLink domain: the one its model rates best,
SMs charged (:func:`pick`). Every figure below is read from NVIDIA/nccl at commit
5067397c2676d5aed50042fc39e5c8ee96eb0027 (2026-06-11), ``src/sym_kernels.cc`` and
``src/scheduler/symmetric_sched.cc`` unless said otherwise; the formulas are re-derived, not
copied.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from simulator.model.execution import NcclCharges
from simulator.model.machine import Machine
from simulator.model.nccl import Hardware, Protocol, Version
from simulator.model.reduction import ReduceOp
from simulator.model.topology import NVLINK

_GIB_PER_US = (1 << 30) / 1e6
"""NCCL's ``GBps`` unit, bytes per µs in one GiB/s (sym_kernels.cc:410); its bandwidths are in
it, its times in µs."""


class SymKernel(enum.Enum):
    """The allreduce kernels of NCCL's symmetric path that run on one NVLink domain, in NCCL's
    kernel-id order (``ncclSymkKernelId``, src/include/sym_kernels.h), which breaks ties in
    :func:`pick`. The TMA variant (Blackwell, off unless ``NCCL_SYM_TMA_ENABLE``) is not here."""

    ONE_SHOT = "AllReduce_AGxLL_R"
    """Every GPU gathers every peer's buffer by LL loads and reduces locally (``one_shot``)."""
    ONE_SHOT_MULTICAST = "AllReduce_AGxLLMC_R"
    """The same with the LL stores multicast through the NVSwitch (``one_shot`` too)."""
    TWO_SHOT = "AllReduce_RSxLD_AGxST"
    """Reduce-scatter by loads, allgather by stores (``two_shot``)."""
    TWO_SHOT_MULTICAST = "AllReduce_RSxLDMC_AGxSTMC"
    """Reduce-scatter by the switch's ``multimem.ld_reduce``, allgather by ``multimem.st``
    (``two_shot_multicast``)."""

    @property
    def ll(self) -> bool:
        """Whether the kernel runs LL (``kernelMask_LL``)."""
        return self in (SymKernel.ONE_SHOT, SymKernel.ONE_SHOT_MULTICAST)

    @property
    def multicast(self) -> bool:
        """Whether the kernel needs the NVSwitch's multicast (``kernelMask_STMC``)."""
        return self in (SymKernel.ONE_SHOT_MULTICAST, SymKernel.TWO_SHOT_MULTICAST)


LL_BUS_FACTOR = 9
"""An LL kernel moves each byte as 9 bus bytes: "2X the bytes, plus some processing, plus no
unrolling" (sym_kernels.cc:339)."""

MAX_BLOCKS = 64
"""``ncclSymkMaxBlocks``, the most CTAs a symmetric kernel runs on (src/include/sym_kernels.h:25);
NCCL's default ``maxCTAs`` does not lower it, and its default ``minCTAs`` is 1 (init.cc:2412)."""

MULTICAST_BLOCKS_PER_DOMAIN = {False: 16, True: 32}
"""The reduce-scatter-by-multicast kernel runs on at most ⌈16/p⌉ blocks on Hopper and ⌈32/p⌉
on Blackwell (``nMaxBlocksNvls``, sym_kernels.cc queryModel_lsa)."""

BLOCK_TOLERANCE = 1.025
"""NCCL runs the fewest blocks whose modelled time is within 2.5 % of the time on the most
(sym_kernels.cc:424-430)."""

SM_PENALTY = 0.025
"""Between kernels NCCL weighs time × (1 + 2.5 % per block), so that of two kernels about as fast
the one on fewer SMs wins (``smPenalty`` in ``ncclSymkPickKernel``)."""

CELL_BYTES = 1024
"""NCCL rounds each symmetric task up to whole cells of 1,024 bytes before it rates the kernels
(``NCCL_SYM_KERNEL_CELL_SIZE``, src/include/sym_kernels.h:23; symmetric_sched.cc aligns the
count)."""

LL_LIMIT_BYTES = 2 << 30
"""No LL kernel from 2 GiB on: they count elements in 32-bit ints (``ncclSymkMask``, which
``ncclSymkPickKernel`` applies to the size rounded up to whole cells)."""

KERNEL_LIMIT_BYTES = 32 * (2 << 30)
"""No symmetric kernel at all from 64 GiB on (``ncclSymkMask``: unrolled chunks in 32-bit ints;
the size rounded up to whole cells, as for :data:`LL_LIMIT_BYTES`)."""


def bus_bytes(kernel: SymKernel, ranks: int, nbytes: int) -> int:
    """The bytes NCCL's model charges a kernel, max(bytes sent, bytes received) per GPU, in its
    integer arithmetic (sym_kernels.cc queryModel_lsa): p·n·9 for the one-shots (LL, every
    peer's whole buffer), 2·n·(p-1)/p for two-shot, n/p + n for the multicast two-shot."""
    if kernel.ll:
        return ranks * nbytes * LL_BUS_FACTOR
    if kernel is SymKernel.TWO_SHOT:
        return 2 * nbytes * (ranks - 1) // ranks
    return nbytes // ranks + nbytes


def bus_multiplier(kernel: SymKernel, ranks: int) -> float:
    """How many times each block's bandwidth counts: 1.1 for the multicast one-shot ("To beat
    non-MC LL"), p for the multicast two-shot (the switch reduces p loads), else 1."""
    if kernel is SymKernel.ONE_SHOT_MULTICAST:
        return 1.1
    return float(ranks) if kernel is SymKernel.TWO_SHOT_MULTICAST else 1.0


def constants(kernel: SymKernel, *, blackwell: bool = False) -> tuple[float, float, float]:
    """(baseLat µs, smBw bytes/µs per SM, peakBw bytes/µs) of an allreduce kernel. Hopper
    (compute capability < 10.0; sym_kernels.cc:413-415): baseLat 4.5 µs for LL and 7.8 µs
    otherwise, 65 GiB/s per SM for allreduce, peak 320 GiB/s (480 for the multicast two-shot).
    Blackwell (417-419): baseLat 11 µs (LL allreduce) and 19.5 µs (other allreduce), 55 GiB/s
    per SM, peak 600 GiB/s (1,000 for the multicast two-shot)."""
    wide = kernel is SymKernel.TWO_SHOT_MULTICAST
    if blackwell:
        return ((11.0 if kernel.ll else 19.5), 55 * _GIB_PER_US,
                (1000 if wide else 600) * _GIB_PER_US)
    return (4.5 if kernel.ll else 7.8), 65 * _GIB_PER_US, (480 if wide else 320) * _GIB_PER_US


def max_blocks(kernel: SymKernel, ranks: int, *, blackwell: bool = False) -> int:
    """The most blocks NCCL runs ``kernel`` on: :data:`MAX_BLOCKS`, or for the multicast
    two-shot ⌈16/p⌉ (Hopper) or ⌈32/p⌉ (Blackwell)."""
    if kernel is SymKernel.TWO_SHOT_MULTICAST:
        return -(-MULTICAST_BLOCKS_PER_DOMAIN[blackwell] // ranks)
    return MAX_BLOCKS


def _softmin(x: float, ceiling: float, softness: float) -> float:
    """A smooth min(x, ceiling) (sym_kernels.cc:151-154)."""
    return ceiling - softness * math.log1p(math.expm1(ceiling / softness) * math.exp(-x / softness))


def _softplus(x: float) -> float:
    """A smooth max(0, x) of softness 1; x itself from 100 on, where the two agree to double
    precision (sym_kernels.cc:156-160)."""
    return x if x >= 100.0 else math.log1p(math.exp(x))


def _bandwidth(kernel: SymKernel, ranks: int, sms: int, *, blackwell: bool) -> float:
    """The bandwidth NCCL's model gives ``kernel`` on ``sms`` blocks, bytes per µs: smBw per SM
    times the bus multiplier, smoothly capped at peakBw (sym_kernels.cc:162-165)."""
    _, sm_bw, peak = constants(kernel, blackwell=blackwell)
    return _softmin(sms * sm_bw * bus_multiplier(kernel, ranks), peak, sm_bw)


def cells(nbytes: int) -> int:
    """``nbytes`` rounded up to whole :data:`CELL_BYTES` cells, as NCCL rates a task."""
    return -(-nbytes // CELL_BYTES) * CELL_BYTES


def model_us(kernel: SymKernel, ranks: int, nbytes: int, sms: int, *,
             blackwell: bool = False) -> float:
    """NCCL's modelled time in µs of ``kernel`` on ``sms`` blocks for ``nbytes`` as NCCL rates
    them (whole cells: :func:`cells`), t = baseLat + softplus(busBytes/bw - 1)
    (sym_kernels.cc:162-165): bandwidth grows by smBw per SM until it meets peakBw."""
    base = constants(kernel, blackwell=blackwell)[0]
    bw = _bandwidth(kernel, ranks, sms, blackwell=blackwell)
    return base + _softplus(bus_bytes(kernel, ranks, cells(nbytes)) / bw - 1)


def choose(kernel: SymKernel, ranks: int, nbytes: int, *,
           blackwell: bool = False) -> tuple[int, float]:
    """(blocks, µs) as NCCL picks them: the fewest blocks from 1 whose time is within
    :data:`BLOCK_TOLERANCE` of the time on the most (:func:`max_blocks`; sym_kernels.cc:420-430)."""
    most = max_blocks(kernel, ranks, blackwell=blackwell)
    best = model_us(kernel, ranks, nbytes, most, blackwell=blackwell)
    for blocks in range(1, most):
        time = model_us(kernel, ranks, nbytes, blocks, blackwell=blackwell)
        if time <= BLOCK_TOLERANCE * best:
            return blocks, time
    return most, best


@dataclass(frozen=True)
class SymPick:
    """The symmetric kernel NCCL launches for one allreduce, on how many blocks, and its
    modelled time in µs."""

    kernel: SymKernel
    blocks: int
    time_us: float


def pick(kernels: tuple[SymKernel, ...], ranks: int, nbytes: int, *,
         blackwell: bool = False) -> SymPick | None:
    """The kernel of ``kernels`` NCCL launches for ``nbytes``, as ``ncclSymkPickKernel`` weighs
    them: each on its blocks (:func:`choose`), the least time × (1 + :data:`SM_PENALTY` per
    block) winning, the earlier kernel id on a tie; LL kernels only below
    :data:`LL_LIMIT_BYTES`, none from :data:`KERNEL_LIMIT_BYTES` (None then, or when
    ``kernels`` is empty), both limits on the size in whole cells, as NCCL passes the
    cell-aligned count to ``ncclSymkMask`` there (symmetric_sched.cc ``countMax``)."""
    best: SymPick | None = None
    rated = cells(nbytes)
    for kernel in sorted(kernels, key=list(SymKernel).index):
        if rated >= KERNEL_LIMIT_BYTES or (kernel.ll and rated >= LL_LIMIT_BYTES):
            continue
        blocks, time = choose(kernel, ranks, nbytes, blackwell=blackwell)
        if best is None or (time * (1 + SM_PENALTY * blocks)
                            < best.time_us * (1 + SM_PENALTY * best.blocks)):
            best = SymPick(kernel, blocks, time)
    return best


def multicast_available(machine: Machine) -> bool:
    """Whether NCCL's symmetric kernels may multicast on ``machine``: an NVSwitch that reduces
    (NVLS) and more than two GPUs (``hasLsaMultimem = nvlsSupport && nRanks > 2``,
    sym_kernels.cc ``ncclSymkInitOnce``)."""
    return machine.reducing_switch() is not None and machine.ranks > 2


def symmetric_path(machine: Machine) -> str | None:
    """Why NCCL has no symmetric kernel for an allreduce on ``machine`` (None when it has):
    they need every GPU a direct NVLink peer of every other, one NVLink domain
    (``ncclSymkAvailable``: ``comm->isAllDirectNvlink``), and more than one rank (on one, NCCL
    copies the buffer before any kernel is chosen: ``ncclLaunchOneRank``, src/enqueue.cc)."""
    hosts = machine.layout.host_count
    if machine.ranks == 1:
        return "NCCL copies the buffer of a lone rank (ncclLaunchOneRank) instead"
    if hosts > 1:
        return f"they run inside one NVLink domain, and the ranks sit on {hosts} hosts"
    if machine.nvlinks == 0:
        return "they need every GPU on NVLink, and the topology states no nvlinks"
    return _indirect(machine)


def _indirect(machine: Machine) -> str | None:
    """The first pair of ranks that are not direct NVLink peers, said (None if every pair is):
    NCCL's ``isAllDirectNvlink`` is every GPU pair's path at most ``PATH_NVL``
    (``ncclTopoPathAllDirectNVLink``, src/graph/paths.cc), NVLink links only, through NVSwitches
    but through no other GPU (``PATH_NVB``) nor PCIe or the network."""
    routing = machine.routing
    for a in range(machine.ranks):
        for b in range(machine.ranks):
            if a == b:
                continue
            route = machine.route(a, b)
            kinds = {routing.link_kind(link) for link in route.links}
            through = [node for node in route.nodes[1:-1] if routing.node_kind(node) == "gpu"]
            if kinds != {NVLINK} or through:
                how = (f"through GPU {through[0]}" if through
                       else f"over {', '.join(sorted(kinds - {NVLINK}))}")
                return (f"they need every GPU a direct NVLink peer of every other, and rank {a} "
                        f"reaches rank {b} {how}")
    return None


def _blackwell(machine: Machine) -> bool:
    """Whether NCCL rates ``machine``'s GPUs with Blackwell's constants (cudaArch ≥ 1000)."""
    return machine.compute_capability >= 100


def launched(machine: Machine, kernels: tuple[SymKernel, ...], size_bytes: int) -> SymPick | None:
    """The kernel of ``kernels`` NCCL launches on ``machine`` for ``size_bytes`` (:func:`pick`
    among those it can run there: the multicast ones only where :func:`multicast_available`);
    None where it runs none of them."""
    runnable = tuple(kernel for kernel in kernels
                     if not kernel.multicast or multicast_available(machine))
    return pick(runnable, machine.ranks, size_bytes, blackwell=_blackwell(machine))


def wire_share(kernel: SymKernel, ranks: int) -> float:
    """The bytes a GPU's busiest NVLink carries in the simulation for each bus byte NCCL's
    model charges: the one-shots move (p-1)·n down each link against p·n·9 bus bytes (a
    multicast store's single upload is not modelled: the download, which bounds both, is the
    same); two-shot 2·n·(p-1)/p and the multicast two-shot n + n/p each way, their bus bytes."""
    if kernel.ll:
        return (ranks - 1) / (ranks * LL_BUS_FACTOR)
    return 1.0


def protocol_of(kernel: SymKernel) -> Protocol:
    """The protocol a kernel runs: LL for the one-shots (their ``LL`` names), Simple loads and
    stores for the two-shots; what ``nccl.proto`` must leave for ``all`` to run it."""
    return Protocol.LL if kernel.ll else Protocol.SIMPLE


def symmetric_charges(machine: Machine, kernels: tuple[SymKernel, ...],
                      size_bytes: int) -> NcclCharges:
    """What ``execution: nccl`` charges for the symmetric kernel of ``kernels`` NCCL launches for
    ``size_bytes`` per rank (:func:`launched`): NVLink links at the rate NCCL's model gives the
    blocks it picks, scaled by :func:`wire_share` so that the bytes the simulation moves take
    busBytes / bw; no latency per step (the model has none), and the kernel's start the
    modelled time less the x = busBytes / bw the transfers take (baseLat plus the model's
    smoothing and its rounding to whole cells), so that on one NVSwitch the simulated time is
    NCCL's modelled time. ValueError when the machine does not state its GPUs or NCCL runs
    none of ``kernels`` at this size."""
    if machine.compute_capability == 0:
        raise ValueError("needs a topology that states compute_capability, as the dgx_h100, "
                         "dgx_a100 and dgx_b200 presets do")
    chosen = launched(machine, kernels, size_bytes)
    if chosen is None:
        names = ", ".join(kernel.value for kernel in kernels)
        raise ValueError(f"NCCL runs no {names} for {size_bytes} bytes (LL kernels count in "
                         f"32-bit ints below {LL_LIMIT_BYTES} bytes, the others below "
                         f"{KERNEL_LIMIT_BYTES}, the size in whole {CELL_BYTES}-byte cells)")
    kernel, ranks = chosen.kernel, machine.ranks
    bw = _bandwidth(kernel, ranks, chosen.blocks, blackwell=_blackwell(machine))  # bytes per µs
    x = bus_bytes(kernel, ranks, size_bytes) / bw
    return NcclCharges(protocol_of(kernel), (chosen.time_us - x) * 1e-6,
                {hardware: 0.0 for hardware in Hardware},
                {NVLINK: bw * 1e6 * wire_share(kernel, ranks)}, nvswitch_latency_s=0.0)


SYMMETRIC_DTYPES = ("float32", "float16", "bfloat16")
"""The element types NCCL's symmetric allreduce kernels reduce (``ncclSymkImplemented``: floats
but float64; the float8 types it also takes are not among the simulator's dtypes)."""

SYMMETRIC_VERSIONS = (Version.V2_30, Version.V2_31)
"""The NCCL versions whose symmetric kernels this model is: 2.30.7's sym_kernels.cc, whose
queryModel_lsa 2.31's src/tuning/sym_model.cc:181-275 keeps line for line (2.26 has others)."""

SYMMETRIC_OPS = (ReduceOp.SUM, ReduceOp.AVG)
"""The operators they reduce with: sum, and average as a sum divided after
(``ncclDevSumPostDiv``, symmetric_sched.cc ``symkRedOp``)."""


def symmetric_pick(machine: Machine, size_bytes: int, dtype: str, op: ReduceOp, *,
                   registered: bool = True) -> SymPick | None:
    """The symmetric kernel NCCL launches for an allreduce of ``size_bytes`` per rank on
    ``machine`` whose buffers are registered as symmetric windows, ahead of its tuner
    (symmetric_sched.cc: with both buffers registered it never falls back once a kernel is
    available): the best of all four (:func:`launched`); on buffers not ``registered``, the
    best of the LL kernels, the only ones NCCL runs there (NCCL 2.31 dev
    src/tuning/sym_model.cc:300-313). None where NCCL has none for it (more than one NVLink
    domain, another dtype or operator, 64 GiB or more), so that its tuner picks as without
    registration."""
    if symmetric_path(machine) is not None or dtype not in SYMMETRIC_DTYPES:
        return None
    if op not in SYMMETRIC_OPS:
        return None
    kernels = tuple(kernel for kernel in SymKernel if registered or kernel.ll)
    return launched(machine, kernels, size_bytes)
