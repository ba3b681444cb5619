"""What a GPU computes in a training step: forward and backward time per layer from FLOPs and a
sustained FLOP rate, and the optimizer's update from the bytes it streams.

Sustained rate = peak (the data sheet's dense tensor-core rate for mixed precision, its FP32 rate
for ``fp32``) × an efficiency measured on real training: a GPU sustains well under its peak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from simulator.training.network import BACKWARD_PER_FORWARD, Layer

T = 1e12


class Precision(Enum):
    """The arithmetic of the matrix products: ``mixed`` (FP16/BF16 tensor cores, as AMP and
    BF16 training run) or ``fp32``."""

    MIXED = "mixed"
    FP32 = "fp32"


class Optimizer(Enum):
    """The update rule, for its memory traffic per parameter (fp32 states): SGD reads weight
    and gradient and writes the weight (12 B); with momentum it also reads and writes the
    momentum (20 B); Adam reads weight, gradient and two moments and writes three (28 B). The
    update is elementwise, so bandwidth bound: time = parameters × bytes / memory bandwidth."""

    SGD = "sgd"
    MOMENTUM = "momentum"
    ADAM = "adam"

    @property
    def bytes_per_parameter(self) -> int:
        """Bytes read and written per parameter by one update."""
        return {Optimizer.SGD: 12, Optimizer.MOMENTUM: 20, Optimizer.ADAM: 28}[self]


@dataclass(frozen=True)
class Accelerator:
    """A GPU's peak rates (per its data sheet), the share of peak training sustains, its
    memory bandwidth (for the optimizer step) and its memory's capacity in bytes (for whether
    a layout fits; None: unknown)."""

    name: str
    mixed_flops: float
    fp32_flops: float
    efficiency: float
    memory_bandwidth: float
    source: str
    memory_capacity: int | None = None

    def flops(self, precision: Precision) -> float:
        """Sustained FLOP/s of the step's matrix products."""
        peak = self.mixed_flops if precision is Precision.MIXED else self.fp32_flops
        return peak * self.efficiency


GB = 10**9
"""A data sheet's gigabyte. The capacities are taken in decimal units as printed: the devices'
HBM is binary (an "80GB" A100 has 80 GiB), so each is 7 % below the physical size, which leaves
room for what :mod:`simulator.training.memory` does not count (CUDA context, workspaces)."""

A100_EFFICIENCY = 0.52
"""Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC21): 163 TFLOP/s per A100 sustained on GPT models, 52 % of the 312 peak."""

ACCELERATORS: dict[str, Accelerator] = {
    "v100": Accelerator(
        "v100", 125 * T, 15.7 * T, 0.30, 900e9,
        "NVIDIA Tesla V100 SXM2 data sheet (125 TFLOPS tensor, 15.7 FP32, 900 GB/s HBM2); 30 %: "
        "Shoeybi et al. 2019 (Megatron-LM), a V100 sustaining 39 TFLOP/s, 30 % of peak",
        memory_capacity=32 * GB),  # V100 SXM2 data sheet: 32 GB HBM2 (the larger of 16 and 32 GB)
    "a100": Accelerator(
        "a100", 312 * T, 19.5 * T, A100_EFFICIENCY, 2039e9,
        "NVIDIA A100 SXM4 80GB data sheet (312 TFLOPS BF16 dense, 19.5 FP32, 2,039 GB/s); 52 %: "
        "Narayanan et al. 2021 (Megatron-LM, SC21)",
        memory_capacity=80 * GB),  # A100 80GB SXM data sheet: 80 GB HBM2e
    "h100": Accelerator(
        "h100", 989 * T, 67 * T, A100_EFFICIENCY, 3.35e12,
        "NVIDIA H100 SXM5 data sheet (989 TFLOPS BF16 dense, 67 FP32, 3.35 TB/s); efficiency "
        "assumed equal to the A100's measured 52 %",
        memory_capacity=80 * GB),  # H100 SXM data sheet: 80 GB HBM3
    "b200": Accelerator(
        "b200", 2250 * T, 75 * T, A100_EFFICIENCY, 8e12,
        "NVIDIA HGX B200 data sheet (18 PFLOPS FP16/BF16 sparse, 600 TFLOPS FP32, 64 TB/s for "
        "8 GPUs: 2.25 PFLOPS dense, 75 TFLOPS, 8 TB/s each); efficiency assumed as the A100's",
        memory_capacity=180 * GB),  # HGX B200 data sheet: 1,440 GB HBM3e for 8 GPUs
    "gb200": Accelerator(
        "gb200", 2500 * T, 80 * T, A100_EFFICIENCY, 8e12,
        "NVIDIA GB200 NVL72 data sheet (180 PFLOPS FP16/BF16 dense, 5,760 TFLOPS FP32, 576 TB/s "
        "for 72 GPUs: 2.5 PFLOPS, 80 TFLOPS, 8 TB/s each); efficiency assumed as the A100's",
        memory_capacity=186 * GB),  # GB200 NVL72 data sheet: 13.4 TB HBM3e for 72 GPUs
}
"""GPU presets of a training scenario's ``gpu`` (docs/training.md)."""


def forward_s(layer: Layer, samples: int, flops: float) -> float:
    """A layer's forward time: 0 when compute is free (``flops`` infinite), else as given, else
    its FLOPs for ``samples`` samples at ``flops`` FLOP/s."""
    if math.isinf(flops):
        return 0.0
    if layer.forward_s is not None:
        return layer.forward_s
    return layer.flops * samples / flops


def backward_s(layer: Layer, samples: int, flops: float) -> float:
    """A layer's backward time: 0 when compute is free, else as given, else
    :data:`BACKWARD_PER_FORWARD` × its forward FLOPs at ``flops`` FLOP/s."""
    if math.isinf(flops):
        return 0.0
    if layer.backward_s is not None:
        return layer.backward_s
    return BACKWARD_PER_FORWARD * layer.flops * samples / flops


def optimizer_s(parameters: int, optimizer: Optimizer, memory_bandwidth: float) -> float:
    """The optimizer step's time: its bytes per parameter over the memory bandwidth."""
    if math.isinf(memory_bandwidth):
        return 0.0
    return parameters * optimizer.bytes_per_parameter / memory_bandwidth


def peak_flops(name: str, precision: Precision, flops: float) -> float:
    """GPU ``name``'s peak FLOP/s at ``precision`` (a preset's data-sheet peak; a GPU given by
    its sustained rate ``flops``: that rate, so MFU is then against it; infinite when compute
    is free)."""
    preset = ACCELERATORS.get(name)
    if preset is None:
        return flops
    return preset.mixed_flops if precision is Precision.MIXED else preset.fp32_flops
