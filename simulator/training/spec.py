"""A scenario's ``training:`` section, validated: the model, the GPU's compute, DDP's settings and
the sweeps (docs/training.md; the section is read by :mod:`simulator.scenario.training`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from simulator.training.buckets import BUCKET_CAP_BYTES, FIRST_BUCKET_BYTES
from simulator.training.compute import Optimizer, Precision, peak_flops
from simulator.training.layout import Parallelism
from simulator.training.network import Network


@dataclass(frozen=True)
class Compute:
    """The GPU as the step's compute sees it: its name (a preset of
    :data:`~simulator.training.compute.ACCELERATORS`, ``custom``, or ``free``), the sustained
    FLOP/s of the matrix products and the memory bandwidth the optimizer streams at (both
    infinite when compute is ``free``), and its memory's capacity in bytes (None: unknown, so
    whether a layout fits is not checked)."""

    name: str
    flops: float
    memory_bandwidth: float
    memory: int | None = None

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
    time given); gradients in DDP buckets of ``bucket_cap`` bytes (None: DDP's default) with a
    first bucket of ``first_bucket`` bytes, or ``cap`` (as large as the others), or None: as
    DDP chooses (:meth:`first_limit`); allreduced during the backward pass when ``overlap``
    (else after it). ``sweep_caps`` and ``sweep_topology`` ask for sweeps over the bucket cap
    (each as if given) and over the GPU count."""

    network: Network
    batch: int
    compute: Compute
    precision: Precision = Precision.MIXED
    optimizer: Optimizer = Optimizer.ADAM
    optimizer_s: float | None = None
    bucket_cap: int | None = None
    first_bucket: int | Literal["cap"] | None = None
    overlap: bool = True
    sweep_caps: tuple[int, ...] = ()
    sweep_topology: TopologySweep | None = None
    parallelism: Parallelism | None = None
    """The layout (None: DDP over every GPU, the step of :mod:`simulator.trainer`)."""
    sweep_layouts: bool = False
    """``sweep: {parallelism: auto}``: rank every layout that runs on the machine."""
    chakra: Path | None = None
    """A directory of Chakra execution traces that give the step (None: the model does)."""

    @property
    def cap(self) -> int:
        """The bucket cap in bytes: as given, else DDP's default."""
        return BUCKET_CAP_BYTES if self.bucket_cap is None else self.bucket_cap

    def first_limit(self, cap: int | None = None) -> int:
        """The first bucket's limit with a bucket cap of ``cap`` bytes (None: the spec's): as
        given; else as DDP does, 1 MiB with the default cap and the cap itself once a user
        sets ``bucket_cap_mb`` (``_BucketCapacityConfig.create`` in torch/nn/parallel/
        distributed.py, torch 2.13). A swept cap counts as set."""
        given = cap is not None or self.bucket_cap is not None
        cap = self.cap if cap is None else cap
        if self.first_bucket == "cap":
            return cap
        if self.first_bucket is not None:
            return self.first_bucket
        return cap if given else FIRST_BUCKET_BYTES

    def mfu(self, replicas: int, gpus: int, step_s: float) -> float:
        """Model FLOP utilisation of a step of ``step_s`` on ``gpus`` GPUs training ``replicas``
        data-parallel replicas of ``batch`` samples each: the model's FLOPs (3 × forward per
        sample: forward and backward, recomputation not counted, as Chowdhery et al. 2022,
        PaLM, App. B, count them) over step × GPUs × the GPU's peak (NaN when compute is
        free or the step takes no time)."""
        peak = peak_flops(self.compute.name, self.precision, self.compute.flops)
        if math.isinf(peak) or step_s <= 0:
            return math.nan
        return 3.0 * self.network.flops * self.batch * replicas / (step_s * gpus * peak)
