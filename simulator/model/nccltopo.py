"""One host as NCCL's topology file describes it (:mod:`.ncclxml` reads the file): its CPUs,
the PCIe tree below them (switches, GPUs, NICs), each GPU's NVLinks and each NIC's ports, as
plain frozen values with the line each came from.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NvLink:
    """A GPU's NVLink links to one target: ``to`` is ``nvswitch``, ``gpu`` or ``cpu``."""

    to: str
    target: str
    count: int
    line: int


@dataclass(frozen=True)
class Gpu:
    """A ``<gpu>``: its NCCL rank and CUDA device at dump time, compute capability, NVLinks."""

    rank: int
    dev: int
    sm: int
    busid: str
    nvlinks: tuple[NvLink, ...]
    line: int


@dataclass(frozen=True)
class Net:
    """A ``<net>``: one network port; ``speed`` in bytes/s, ``latency_us`` as the plugin
    advertised it, ``ethernet`` from its PCI class, ``verbs`` where it has a GUID."""

    name: str
    dev: int
    speed: float
    latency_us: float
    ethernet: bool
    verbs: bool
    line: int


@dataclass(frozen=True)
class Device:
    """A node of the PCIe tree: a switch, a GPU or a NIC (``kind``), under its parent device
    (an index in :attr:`NcclTopology.devices`) or directly under CPU ``cpu``; ``bandwidth`` is
    its link up (bytes/s, per direction)."""

    kind: str
    busid: str
    cpu: int
    parent: int | None
    bandwidth: float
    line: int
    gpu: Gpu | None = None
    nets: tuple[Net, ...] = ()


@dataclass(frozen=True)
class Cpu:
    """A ``<cpu>`` (a NUMA node): its vendor as the NCCL model names it (``intel``, ``amd``,
    ``arm``), the x86 family and model (0 elsewhere), and NICs hung on it directly."""

    numaid: int
    vendor: str
    family: int
    model: int
    nets: tuple[Net, ...]
    line: int


@dataclass(frozen=True)
class NcclTopology:
    """One host as NCCL's topology file describes it."""

    file: str
    cpus: tuple[Cpu, ...]
    devices: tuple[Device, ...]

    @property
    def gpus(self) -> tuple[Device, ...]:
        """The GPU devices, by rank."""
        gpus = [d for d in self.devices if d.gpu is not None]
        return tuple(sorted(gpus, key=lambda d: d.gpu.rank if d.gpu else 0))
