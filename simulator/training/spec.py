"""A scenario's ``training:`` section, validated: the model, the GPU's compute, DDP's settings and
the sweeps (docs/training.md; the section is read by :mod:`simulator.scenario.training`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.training.buckets import BUCKET_CAP_BYTES, FIRST_BUCKET_BYTES
from simulator.training.compute import Optimizer, Precision
from simulator.training.network import Network


@dataclass(frozen=True)
class Compute:
    """The GPU as the step's compute sees it: its name (a preset of
    :data:`~simulator.training.compute.ACCELERATORS`, ``custom``, or ``free``), the sustained
    FLOP/s of the matrix products and the memory bandwidth the optimizer streams at (both
    infinite when compute is ``free``)."""

    name: str
    flops: float
    memory_bandwidth: float

    @property
    def free(self) -> bool:
        """Whether compute costs nothing (a study of the communication alone)."""
        return math.isinf(self.flops)


@dataclass(frozen=True)
class TopologySweep:
    """A sweep over one topology parameter (``nodes``, ``ranks`` ...), to scale the GPU count."""

    param: str
    values: tuple[int, ...]


@dataclass(frozen=True)
class TrainingSpec:
    """One data-parallel training step: ``network`` trained on ``batch`` samples per GPU, its
    matrix products at ``precision`` on ``compute``, then ``optimizer`` (or ``optimizer_s``, a
    time given); gradients in DDP buckets of ``bucket_cap`` bytes with a first bucket of
    ``first_bucket`` (None: ``bucket_cap`` too), allreduced during the backward pass when
    ``overlap`` (else after it). ``sweep_caps`` and ``sweep_topology`` ask for sweeps over the
    bucket cap and over the GPU count."""

    network: Network
    batch: int
    compute: Compute
    precision: Precision = Precision.MIXED
    optimizer: Optimizer = Optimizer.ADAM
    optimizer_s: float | None = None
    bucket_cap: int = BUCKET_CAP_BYTES
    first_bucket: int | None = FIRST_BUCKET_BYTES
    overlap: bool = True
    sweep_caps: tuple[int, ...] = ()
    sweep_topology: TopologySweep | None = None
