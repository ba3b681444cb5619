"""The words NCCL's tuner is written in: the indexes of its tables (algorithm, protocol, kind of
path, GPU generation, host CPU) and the graph its topology search hands it.

Kept apart from the tuner's constants (:mod:`.nccl_versions`) and formulas (:mod:`.nccl`) so
that both index by the same enums without importing each other; :mod:`.nccl` re-exports them,
the name every other module imports them by.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


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


class Hardware(Enum):
    """The kind of path a step crosses, which sets its latency (tuning.cc ``hwLat``)."""

    NVLINK = "NVLink"
    PCI = "PCI"
    NET = "NET"


class Arch(Enum):
    """GPU generation (compute capability), which selects rows of the caps. ``CDNA3`` is AMD's
    MI300 series (``gfx942``, AMD's gcnArchName, stated as compute capability 942): NCCL's
    tables have no row for it, RCCL's tuner (:mod:`simulator.model.rccl`) times it."""

    VOLTA = 70
    AMPERE = 80
    HOPPER = 90
    BLACKWELL = 100
    CDNA3 = 942


class Library(Enum):
    """The collective library a machine's GPUs run: NCCL on NVIDIA GPUs, RCCL (ROCm's fork of
    NCCL) on AMD Instinct; a scenario's ``nccl.library`` names it (issue 38)."""

    NCCL = "nccl"
    RCCL = "rccl"


AMD_ARCHS = frozenset({Arch.CDNA3})
"""The AMD GPU generations, which run RCCL."""


def library_of(arch: Arch) -> Library:
    """The library ``arch``'s GPUs run.

    >>> library_of(Arch.HOPPER).value, library_of(Arch.CDNA3).value
    ('nccl', 'rccl')
    """
    return Library.RCCL if arch in AMD_ARCHS else Library.NCCL


class CpuVendor(Enum):
    """The host CPU, which selects the multi-node LL cap and the network overhead (NCCL's
    ``cpuVendor`` on x86, and its ``cpuArch`` where that is ARM)."""

    INTEL = "intel"  # and any other non-AMD x86 CPU
    AMD = "amd"
    ARM = "arm"  # NVIDIA Grace (GB200): not x86, the non-AMD LL row and network overhead


NVLS_ARCHS = frozenset({Arch.HOPPER, Arch.BLACKWELL})
"""The GPUs NCCL runs NVLS on at all: those with NVLink SHARP's multicast objects, from Hopper
(SM90) on (NCCL's ``nvlsSupport`` is the device's ``CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED``,
src/transport/nvls.cc:273 of v2.30.7; tuning.cc's ``nvlsEfficiency`` is 0 on Volta and
Ampere, nccl-model.md §1.2). A fact of the hardware, whatever the tuner's version."""

Caps = tuple[float, float, float]
"""A row of tuning.cc's caps: one node, two nodes, three or more (its ``index2``)."""


def caps_column(nodes: int) -> int:
    """The column of :data:`Caps` for ``nodes`` nodes (tuning.cc: ``index2 = nNodes <= 2 ?
    nNodes - 1 : 2``).

    >>> caps_column(1), caps_column(2), caps_column(16)
    (0, 1, 2)
    """
    return min(nodes, 3) - 1


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
