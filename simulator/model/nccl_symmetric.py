"""NCCL's cost model of its symmetric-memory allreduce kernels (NCCL 2.27+): the one-shot
kernel ``AllReduce_AGxLL_R`` (every GPU gathers every peer's whole buffer by LL loads and reduces
locally) and the two-shot kernel ``AllReduce_RSxLD_AGxST`` (reduce-scatter by loads, then
allgather by stores), both inside one NVLink domain.

Their speed is set by the SMs (CTAs, "blocks") they run on, not by the links alone:

    t = baseLat + softplus(busBytes / bw - 1),  bw = softmin(nSMs·smBw·busMul, peakBw, smBw),

smooth versions of ``t = baseLat + busBytes / min(nSMs·smBw·busMul, peakBw)``. Every figure
below is read from NVIDIA/nccl at commit 5067397c2676d5aed50042fc39e5c8ee96eb0027 (2026-06-11),
``src/sym_kernels.cc`` unless said otherwise; the formulas are re-derived, not copied.
"""

from __future__ import annotations

import enum
import math

from simulator.model.execution import Plan
from simulator.model.machine import Machine
from simulator.model.nccl import Hardware, Protocol
from simulator.model.topology import NVLINK

_GIB_PER_US = (1 << 30) / 1e6
"""NCCL's ``GBps`` unit, bytes per µs in one GiB/s (sym_kernels.cc:410); its bandwidths are in
it, its times in µs."""


class SymKernel(enum.Enum):
    """The two intra-node allreduce kernels the simulator runs as ``one_shot`` and ``two_shot``."""

    ONE_SHOT = "AllReduce_AGxLL_R"
    TWO_SHOT = "AllReduce_RSxLD_AGxST"


LL_BUS_FACTOR = 9.0
"""An LL kernel moves each byte as 9 bus bytes: "2X the bytes, plus some processing, plus no
unrolling" (sym_kernels.cc:339)."""

MAX_BLOCKS = 64
"""``ncclSymkMaxBlocks``, the most CTAs a symmetric kernel runs on (src/include/sym_kernels.h:25);
NCCL's default ``maxCTAs`` does not lower it."""

BLOCK_TOLERANCE = 1.025
"""NCCL runs the fewest blocks whose modelled time is within 2.5 % of the time on the most
(sym_kernels.cc:424-430)."""


def bus_bytes(kernel: SymKernel, ranks: int, nbytes: int) -> float:
    """The bytes NCCL's model charges a kernel, max(bytes sent, bytes received) per GPU:
    p·n·9 for one-shot (LL, every peer's whole buffer), 2·n·(p-1)/p for two-shot
    (sym_kernels.cc:352-362)."""
    if kernel is SymKernel.ONE_SHOT:
        return ranks * nbytes * LL_BUS_FACTOR
    return 2 * nbytes * (ranks - 1) / ranks


def constants(kernel: SymKernel, *, blackwell: bool = False) -> tuple[float, float, float]:
    """(baseLat µs, smBw bytes/µs per SM, peakBw bytes/µs) of an allreduce kernel. Hopper
    (compute capability < 10.0; sym_kernels.cc:413-415): baseLat 4.5 µs for LL (one-shot) and
    7.8 µs otherwise, 65 GiB/s per SM for allreduce, peak 320 GiB/s. Blackwell (417-419):
    baseLat 11 µs (LL allreduce) and 19.5 µs (other allreduce), 55 GiB/s per SM, peak
    600 GiB/s."""
    ll = kernel is SymKernel.ONE_SHOT
    if blackwell:
        return (11.0 if ll else 19.5), 55 * _GIB_PER_US, 600 * _GIB_PER_US
    return (4.5 if ll else 7.8), 65 * _GIB_PER_US, 320 * _GIB_PER_US


def _softmin(x: float, ceiling: float, softness: float) -> float:
    """A smooth min(x, ceiling) (sym_kernels.cc:151-154)."""
    return ceiling - softness * math.log1p(math.expm1(ceiling / softness) * math.exp(-x / softness))


def _softplus(x: float) -> float:
    """A smooth max(0, x) of softness 1; x itself from 100 on, where the two agree to double
    precision (sym_kernels.cc:156-160)."""
    return x if x >= 100.0 else math.log1p(math.exp(x))


def model_us(kernel: SymKernel, ranks: int, nbytes: int, sms: int, *,
             blackwell: bool = False) -> float:
    """NCCL's modelled time in µs of ``kernel`` on ``sms`` blocks (sym_kernels.cc:162-165):
    bandwidth grows by smBw per SM until it meets peakBw."""
    base, sm_bw, peak = constants(kernel, blackwell=blackwell)
    bw = _softmin(sms * sm_bw, peak, sm_bw)
    return base + _softplus(bus_bytes(kernel, ranks, nbytes) / bw - 1)


def choose(kernel: SymKernel, ranks: int, nbytes: int, *,
           blackwell: bool = False) -> tuple[int, float]:
    """(blocks, µs) as NCCL picks them: the fewest blocks from 1 whose time is within
    :data:`BLOCK_TOLERANCE` of the time on :data:`MAX_BLOCKS` (sym_kernels.cc:420-430)."""
    best = model_us(kernel, ranks, nbytes, MAX_BLOCKS, blackwell=blackwell)
    for blocks in range(1, MAX_BLOCKS):
        time = model_us(kernel, ranks, nbytes, blocks, blackwell=blackwell)
        if time <= BLOCK_TOLERANCE * best:
            return blocks, time
    return MAX_BLOCKS, best


def wire_share(kernel: SymKernel, ranks: int) -> float:
    """The bytes a GPU's NVLink carries in the simulation for each bus byte NCCL's model charges:
    one-shot moves (p-1)·n per link against p·n·9 bus bytes, two-shot 2·n·(p-1)/p against the
    same."""
    if kernel is SymKernel.ONE_SHOT:
        return (ranks - 1) / (ranks * LL_BUS_FACTOR)
    return 1.0


def protocol_of(kernel: SymKernel) -> Protocol:
    """The protocol a kernel runs: LL for one-shot (its ``_LL`` name), Simple loads and stores
    for two-shot; what ``nccl.proto`` must leave for ``all`` and ``auto`` to run it."""
    return Protocol.LL if kernel is SymKernel.ONE_SHOT else Protocol.SIMPLE


def symmetric_plan(machine: Machine, kernel: SymKernel, size_bytes: int) -> Plan:
    """``execution: nccl``'s plan for a symmetric kernel of ``size_bytes`` per rank: NVLink
    links at the rate NCCL's model gives the blocks it picks (:func:`choose`), scaled by
    :func:`wire_share` so that the bytes the simulation moves take busBytes / bw; no latency per
    step (the model has none), and the kernel's start its baseLat plus the smoothing of the
    model (softplus(x-1) - x, x = busBytes / bw), so that on one NVSwitch the simulated time is
    NCCL's modelled time. ValueError when the machine does not state its GPUs."""
    if machine.compute_capability == 0:
        raise ValueError("needs a topology that states compute_capability, as the dgx_h100 and "
                         "dgx_b200 presets do")
    blackwell = machine.compute_capability >= 100  # cudaArch < 1000: Hopper's constants
    ranks = machine.ranks
    blocks, _ = choose(kernel, ranks, size_bytes, blackwell=blackwell)
    base, sm_bw, peak = constants(kernel, blackwell=blackwell)
    bw = _softmin(blocks * sm_bw, peak, sm_bw)                 # bytes per µs
    x = bus_bytes(kernel, ranks, size_bytes) / bw
    return Plan(protocol_of(kernel), (base + _softplus(x - 1) - x) * 1e-6,
                {hardware: 0.0 for hardware in Hardware},
                {NVLINK: bw * 1e6 * wire_share(kernel, ranks)})
