"""The seam between a planned point and the engine that times it, in the spirit of httpx's
transport: an :class:`Executor` says whether it ``declines`` a plan and ``run``\\ s it; :func:`run`
picks one by the plan's ``engine`` and returns the timing and which engine gave it.

Two executors: :class:`Simpy` runs every rank's program on the SimPy fabric (the reference; it
declines nothing and is the only one that records timelines), :class:`Vector` runs the
algorithm's schedule (its builder's, or its program's trace) with numpy
(:mod:`simulator.engine.vector`) and declines what :func:`simulator.engine.vector.declines` says
only SimPy orders, and, unless ``engine: vector`` asks for it, a schedule that is only a trace.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

import numpy as np

from simulator.algorithms.channels import blocks_on_channels
from simulator.algorithms.schedule import Blocks, Group
from simulator.algorithms.trace import limited
from simulator.engine.plan import PointPlan
from simulator.engine.record import Recorder
from simulator.engine.run import Timing, run_collective
from simulator.engine.vector import declines as vector_declines
from simulator.engine.vector import declines_trace, run_schedule
from simulator.errors import InputError, OverBudget, Problem
from simulator.limits import (
    MEMORY_BUDGET_BYTES,
    SIMPY_HELD_BYTES,
    TRACE_ENTRY_BYTES,
    VECTOR_ENTRY_BYTES,
)
from simulator.settings import Engine


class Executor(Protocol):
    """An engine behind the seam."""

    engine: Engine

    def declines(self, plan: PointPlan) -> str | None:
        """Why this engine cannot run ``plan`` (a sentence a user can act on), or None."""

    def run(self, plan: PointPlan, buffers: np.ndarray, recorder: Recorder) -> Timing:
        """Simulate ``plan``; ``buffers`` (ranks × proxy) end holding its result, before the
        operator's ``finalize``."""


class Simpy:
    """The SimPy engine (:mod:`simulator.engine.run`): runs any plan."""

    engine = Engine.SIMPY

    def declines(self, plan: PointPlan) -> str | None:
        """Nothing: every algorithm has a program."""
        return None

    def run(self, plan: PointPlan, buffers: np.ndarray, recorder: Recorder) -> Timing:
        """Every rank's program on the fabric, stopped (OverBudget) once it holds more
        messages in flight and flow timers than the memory budget allows."""
        return run_collective(plan.algorithm, plan.machine, plan.spec, buffers, recorder,
                              limit=MEMORY_BUDGET_BYTES // SIMPY_HELD_BYTES)


class Vector:
    """The vectorised engine (:mod:`simulator.engine.vector`): runs a plan's schedule, built once
    per plan (``declines`` builds it and ``run`` reuses it)."""

    engine = Engine.VECTOR

    def __init__(self) -> None:
        self._planned: tuple[PointPlan, Blocks] | None = None

    def blocks(self, plan: PointPlan) -> Blocks:
        """The plan's schedule on its channels; a trace stopped (OverBudget) once it records
        more entries than the memory budget allows."""
        if self._planned is None or self._planned[0] is not plan:
            spec = plan.spec
            group = Group.whole(plan.machine, spec.payload.count, spec.payload.dtype.itemsize,
                                spec.piece_bytes, spec.stream_bytes)
            with limited(MEMORY_BUDGET_BYTES // TRACE_ENTRY_BYTES):
                schedule = blocks_on_channels(plan.algorithm, group, plan.machine.layout,
                                              spec.channels)
            self._planned = (plan, schedule)
        return self._planned[1]

    def declines(self, plan: PointPlan) -> str | None:
        """Why the schedule runs on SimPy instead (:func:`simulator.engine.vector.declines`);
        an algorithm without a builder is not traced only to be declined."""
        asked = plan.settings.engine is Engine.VECTOR or plan.algorithm.trace_vectorised
        untraced = None if plan.algorithm.has_builder() else declines_trace(asked=asked)
        return untraced or vector_declines(self.blocks(plan), plan.machine, asked=asked)

    def run(self, plan: PointPlan, buffers: np.ndarray, recorder: Recorder) -> Timing:
        """The schedule with numpy; OverBudget for one held whole beyond the memory budget
        (one whose algorithm does not count it before it is built: :func:`simulator.plan.
        plan_point` refuses the others before)."""
        blocks = self.blocks(plan)
        limit = MEMORY_BUDGET_BYTES // VECTOR_ENTRY_BYTES
        if blocks.count == 1 and blocks.size > limit:  # held whole
            raise OverBudget("schedule entries on the vectorised engine", blocks.size,
                             limit)
        vector = run_schedule(blocks, plan.machine, plan.payload, plan.spec.reduce_op, buffers,
                              plan.algorithm.name, recorder,
                              fast_forward=plan.settings.fast_forward)
        return Timing(vector.time_s, vector.messages, vector.instants, vector.held)


def run(plan: PointPlan, buffers: np.ndarray, recorder: Recorder) -> tuple[Timing, Engine]:
    """Simulate ``plan`` on the engine it asks for: the vectorised one where it does not decline
    (``auto``, ``vector``), else SimPy; InputError for ``vector`` on a plan it declines, and
    for a point that turns out to need more memory than a run may take (a trace, the SimPy
    engine's messages in flight: what no count tells before). A point whose timeline the
    recorder traces runs on SimPy, whatever the plan's engine (only it records timelines).
    The timing, and which engine gave it (the results' ``engine``).

    A plan with a workspace (``RunSpec.workspace``) runs on buffers widened past the
    collective's by it, zeros at the start, which the engines see as one buffer (the program's
    ``comm.buffer`` spans both); ``buffers`` then take back the collective's part."""
    if plan.spec.workspace:
        wide = plan.payload.widened(plan.spec.workspace)
        widened = np.zeros((buffers.shape[0], wide.proxy_count), dtype=buffers.dtype)
        widened[:, :buffers.shape[1]] = buffers
        done = run(replace(plan, spec=replace(plan.spec, payload=wide, workspace=0)), widened,
                   recorder)
        buffers[...] = widened[:, :buffers.shape[1]]
        return done
    try:
        return _run(plan, buffers, recorder)
    except OverBudget as error:
        raise InputError([Problem(plan.source, "algorithms", (
            f"{plan.algorithm.name!r} at {plan.size_bytes} bytes on {plan.machine.ranks} ranks "
            f"came to hold {error.held:,} {error.what}, more than the {error.limit:,} that fit "
            f"in the {MEMORY_BUDGET_BYTES >> 30} GiB a point may take (simulator/limits.py); "
            "use fewer ranks, a larger piece_size or another algorithm"))]) from None


def _run(plan: PointPlan, buffers: np.ndarray, recorder: Recorder) -> tuple[Timing, Engine]:
    """:func:`run`, OverBudget as it comes."""
    executor: Executor = Simpy()
    if plan.settings.engine is not Engine.SIMPY and not recorder.trace:
        vector = Vector()
        declined = vector.declines(plan)
        if declined is None:
            executor = vector
        elif plan.settings.engine is Engine.VECTOR:
            raise InputError([Problem(plan.source, "engine", f"expected auto or simpy for "
                                                             f"{plan.algorithm.name!r}: "
                                                             f"{declined}")])
    return executor.run(plan, buffers, recorder), executor.engine
