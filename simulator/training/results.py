"""What a training step simulated gives: each bucket's allreduce, the step's times and its
check, and a scenario's steps with its sweeps (made by :mod:`simulator.trainer`, written and
drawn by :mod:`simulator.output.training`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.training.execute import Execution
from simulator.training.graph import StepGraph
from simulator.training.layout import Parallelism
from simulator.training.spec import TrainingSpec
from simulator.training.timeline import Timeline


@dataclass(frozen=True)
class BucketRun:
    """One bucket's allreduce in a step: what it held, when it was ready, when it ran, what ran
    it (algorithm and, under ``execution: nccl``, protocol), its closed form, and its check;
    where the scenario has faults, those it saw (as the results' ``faults`` column says them)
    and its time without them (NaN without faults)."""

    index: int
    tensors: int
    nbytes: int
    ready_s: float
    start_s: float
    end_s: float
    algorithm: str
    protocol: str
    time_s: float
    model_time_s: float
    verified: bool | None
    faults: str = ""
    healthy_time_s: float = math.nan
    model_kind: str = "bound"
    """What ``model_time_s`` is, as the results' ``model_kind`` says (issue 38)."""


@dataclass(frozen=True)
class Breakdown:
    """Where a step's time goes on its busiest rank (the one computing longest): computing,
    waiting on each parallelism's communication with nothing computing (``exposed``: TP, PP,
    DP, EP, in that order where several run at once), and idle in the pipeline's bubble, which
    add up to the step's time; and the model FLOP utilisation, the model's FLOPs per step
    (3 × forward, recomputation not counted) over the step's time × GPUs × peak FLOP/s."""

    compute_s: float
    exposed_tp_s: float
    exposed_pp_s: float
    exposed_dp_s: float
    exposed_ep_s: float
    bubble_s: float
    mfu: float


@dataclass(frozen=True)
class ParallelRun:
    """A parallel step's own: its layout, the graph it ran and how it ran (every rank's spans,
    or every stage's when folded; ``unit_ranks`` the global rank of each), each distinct
    collective simulated (kind, bytes, the communicator it stood for, algorithm, protocol,
    time, check), and the busiest GPU's memory against its capacity."""

    layout: Parallelism
    graph: StepGraph
    execution: Execution
    unit_ranks: tuple[int, ...]
    collectives: tuple[tuple[str, int, str, str, str, float, bool | None], ...]
    memory_bytes: int | None = None
    """What the busiest GPU holds (:func:`~simulator.training.memory.layout_memory`; None: the
    model has no transformer shape to count)."""
    capacity_bytes: int | None = None
    """The GPU's memory (None: not known, so not checked)."""

    @property
    def fits(self) -> bool:
        """Whether the layout fits the GPU's memory (True when either is unknown)."""
        return (self.memory_bytes is None or self.capacity_bytes is None
                or self.memory_bytes <= self.capacity_bytes)


@dataclass(frozen=True)
class Step:
    """One training step on ``ranks`` GPUs: its compute (forward, backward, optimizer), its
    allreduces, the part of them not hidden behind compute (``exposed_s``), the step's time, and
    the scaling efficiency against one GPU (the same step without communication).
    ``first_bucket`` is the first bucket's limit the step used. ``verified`` says every rank's
    gradients ended equal to numpy's average of all ranks' (None: not checked), ``identical``
    that all ranks ended bit for bit the same, ``max_abs_error`` the largest difference from
    numpy's average; the check covers the elements moved, every one when ``whole``, else a
    proxy of each bucket reaching ``checked_tensors`` gradient tensors."""

    scenario: str
    topology: str
    ranks: int
    model: str
    batch: int
    bucket_cap: int
    first_bucket: int
    overlap: bool
    forward_s: float
    backward_s: float
    optimizer_s: float
    communication_s: float
    exposed_s: float
    step_s: float
    buckets: tuple[BucketRun, ...]
    timeline: Timeline
    verified: bool | None
    identical: bool | None
    max_abs_error: float
    checked_tensors: int
    whole: bool | None
    healthy_step_s: float = math.nan
    """The step's time with every bucket's healthy time (NaN: the scenario has no faults)."""
    breakdown: Breakdown | None = None
    """Where the step's time goes (None: not computed, a step without a model's FLOPs)."""
    parallel: ParallelRun | None = None
    """The layout's run, for a step under ``parallelism`` (None: DDP's step)."""

    @property
    def compute_s(self) -> float:
        """The step's compute: what one GPU alone takes."""
        return self.forward_s + self.backward_s + self.optimizer_s

    @property
    def efficiency(self) -> float:
        """One GPU's step time over this one's (weak scaling: the same batch per GPU)."""
        return self.compute_s / self.step_s if self.step_s > 0 else 1.0


@dataclass(frozen=True)
class LayoutRow:
    """One layout of a layout sweep: the layout, the batch per replica it runs (the global batch
    over its DP), its busiest GPU's memory and the GPU's capacity (None: unknown), and its step
    (None: it does not fit, so it was not simulated)."""

    layout: Parallelism
    batch: int
    memory_bytes: int
    capacity_bytes: int | None
    step: Step | None


@dataclass(frozen=True)
class Training:
    """A training scenario's results: its name and training section, how each bucket's
    algorithm was chosen (``policy``), its step, and the steps of its sweeps (bucket caps, in
    the order given; GPU counts, likewise, on healthy machines), and its faults."""

    scenario: str
    spec: TrainingSpec
    policy: str
    step: Step
    cap_sweep: tuple[Step, ...]
    scale_sweep: tuple[Step, ...]
    faults: str = ""
    """The scenario's faults, labelled as the results' ``faults`` column (empty: none)."""
    layouts: tuple[LayoutRow, ...] = ()
    """The layout sweep's layouts, best first (empty: none asked for)."""
