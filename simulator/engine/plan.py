"""A point's plan: everything about one (algorithm, size) that a run needs, known before it is
simulated.

:func:`simulator.plan.plan_point` makes it once per point from a scenario; the engines
(:mod:`simulator.engine.executor`), :func:`simulator.runner.run_plan` (which makes the point's
results row of it alone), the outlook printed before a run, the trainer and :mod:`simulator.distributed`
all read this one value instead of deriving its parts again. A plain frozen value of the
engine's own types, so that nothing past the plan needs the scenario.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.algorithms.algorithm import Algorithm
from simulator.algorithms.cost import CostInputs
from simulator.engine.payload import Payload
from simulator.engine.run import RunSpec
from simulator.model.collective import Collective
from simulator.model.execution import Execution
from simulator.model.faults import Fault
from simulator.model.machine import Machine
from simulator.model.nccl_point import NcclPoint
from simulator.model.reduction import ReduceOp
from simulator.settings import RunSettings


@dataclass(frozen=True)
class Labels:
    """What a point is, as its results row names it: the ``scenario``'s name, the
    ``topology``'s label, the ``collective``, the data type (``dtype``), the reduction ``op``
    and the ``execution`` model."""

    scenario: str
    topology: str
    collective: Collective
    dtype: np.dtype[Any]
    op: ReduceOp
    execution: Execution


@dataclass(frozen=True)
class PointPlan:
    """One point, planned: everything :func:`simulator.runner.run_plan` needs to simulate it and
    make its results row.

    ``source`` is the scenario's file, to name in errors; ``labels`` name the point
    (:class:`Labels`); ``machine`` and ``cost`` are as the execution model times them (NCCL's
    charges applied, and the fastest of its stream piece sizes for the closed form); ``spec``
    is what the run moves (payload, operator, piece size, channels, stream pieces); ``nccl`` is
    NCCL's answer for the point (its charges, the time NCCL's model predicts and whether it is
    NCCL's pick; None on the ideal wire); ``start_s`` the pipeline fill paid before the first
    byte where ranks talk; ``model_s`` the closed form as the results row reports it
    (``model_time_s``), the start included; ``settings`` how it runs (verified or not, on which
    engine, the inputs' seed); ``healthy`` the machine without the scenario's faults where it
    has some (:mod:`simulator.model.faults`; ``machine`` has them), which the closed form and
    the results' ``healthy_time_s`` are timed on; ``faults`` the faults ``machine`` has (the
    scenario's, or as a training step's bucket sees them).
    """

    source: str
    labels: Labels
    algorithm: Algorithm
    size_bytes: int
    machine: Machine
    cost: CostInputs
    spec: RunSpec
    nccl: NcclPoint | None
    start_s: float
    model_s: float
    settings: RunSettings
    healthy: Machine | None = None
    faults: tuple[Fault, ...] = ()

    @property
    def payload(self) -> Payload:
        """What the run moves: the nominal count, and the proxy actually reduced."""
        return self.spec.payload

    @property
    def channels(self) -> int:
        """The channels the buffer is split over (:func:`simulator.plan.channels_for`)."""
        return self.spec.channels
