"""Runs a scenario: every (algorithm, size) point simulated, verified and set beside its closed form.

The one orchestrator: :func:`simulate` takes a scenario (a path, a mapping or a
:class:`~simulator.scenario.spec.Scenario`) and returns a pandas DataFrame whose columns are
:data:`~simulator.output.results.RESULT_COLUMNS` (docs/results.md), the very frame the command
line writes. :func:`run_points` gives the same rows one by one as they finish (the command line
writes each as it comes), and :func:`outlook` what a run will simulate, by the closed forms,
before it starts. Each point is planned once (:func:`simulator.plan.plan_point`) and
:func:`run_plan` runs the plan behind the engine's seam (:func:`simulator.engine.executor.run`),
then checks it and makes its row. May import every layer but the command line, the sweep and
the trainer.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.algorithms.against_nccl import differences
from simulator.algorithms.algorithm import Algorithm
from simulator.engine import executor
from simulator.engine.payload import Payload, exactly_summable, make_inputs
from simulator.engine.plan import PointPlan
from simulator.engine.record import Recorder
from simulator.errors import InputError, Problem
from simulator.model.activity import Watch
from simulator.model.collective import Expected
from simulator.model.faults import Fault, caveats
from simulator.model.nccl_point import pick_problem
from simulator.model.reduction import ReduceOp
from simulator.model.span import Span
from simulator.output.outlook import Outlook, Upcoming
from simulator.output.results import Result, results_frame
from simulator.plan import (
    LeftOut,
    Setup,
    as_scenario,
    check_memory,
    plan_point,
    points_of,
    prepare,
    traced_problem,
    wall_estimate_s,
)
from simulator.scenario.spec import Scenario
from simulator.settings import Engine, RunSettings

__all__ = ["LeftOut", "Plans", "Setup", "as_scenario", "checked_setup", "outlook", "plan_points", "points_of",
           "prepare", "run_plan", "run_point", "run_points", "settings_of", "simulate"]


def settings_of(scenario: Scenario, seed: int | None = None,
                proxy_elements: int | None = None) -> RunSettings:
    """The scenario's run settings (``Scenario.run``) with the caller's seed and proxy length
    where given (None: the scenario's); InputError unless the seed is ≥ 0 and at least one
    element is verified."""
    run = scenario.run
    settings = replace(run, seed=run.seed if seed is None else seed,
                       proxy_elements=run.proxy_elements if proxy_elements is None
                       else proxy_elements)
    problems = settings.problems(scenario.source)
    if problems:
        raise InputError(problems)
    return settings


def run_point(scenario: str | Path | Mapping[str, Any] | Scenario, algorithm: Algorithm | str,
              size_bytes: int, *, seed: int | None = None, proxy_elements: int | None = None,
              setup: Setup | None = None, watch: Watch | None = None,
              inputs: np.ndarray | None = None) -> Result:
    """Simulate one collective of ``size_bytes`` per rank and check it against numpy.

    ``algorithm`` is a registry name (configured with the scenario's options) or an algorithm;
    InputError if it cannot run on the scenario's topology. Inputs are drawn from a generator
    seeded by ``(seed, size_bytes)``, so every algorithm of a scenario reduces the same data at
    the same size, and reruns are identical. ``setup`` lets a caller running many points build
    the machine once. ``watch`` gets the point's :class:`~simulator.model.activity.Activity`
    (link usage, and the timeline if it traces the point, which then runs on SimPy).
    ``inputs`` gives the ranks' data instead of the seeded draw: an array of shape
    ``(ranks, proxy)`` (the plan's payload tells the proxy's length) that the run reduces in
    place, so it ends holding every rank's result (how :mod:`simulator.distributed` and training steps
    move their own tensors).
    """
    scenario = as_scenario(scenario)
    settings = settings_of(scenario, seed, proxy_elements)
    setup = setup or prepare(scenario, select=False)
    if isinstance(algorithm, str):
        algorithm = scenario.algorithm(algorithm)
    plan = plan_point(scenario, setup, algorithm, size_bytes, settings)
    return run_plan(plan, watch=watch, inputs=inputs)


def run_plan(plan: PointPlan, *, watch: Watch | None = None,
             inputs: np.ndarray | None = None) -> Result:
    """Simulate a planned point (:func:`~simulator.plan.plan_point`) and check it, and make its
    results row of the plan alone: :func:`run_point` once the point is planned. ``watch`` and
    ``inputs`` as :func:`run_point` takes them."""
    algorithm, size_bytes, payload, labels = (plan.algorithm, plan.size_bytes, plan.payload,
                                              plan.labels)
    ranks, op = plan.machine.ranks, labels.op
    if inputs is None:
        buffers = make_inputs(np.random.default_rng([plan.settings.seed, size_bytes]), ranks,
                              payload, op)
    elif inputs.shape != (ranks, payload.proxy_count) or inputs.dtype != labels.dtype:
        raise ValueError(f"inputs of {algorithm.name} at {size_bytes} bytes: expected an array "
                         f"of shape {(ranks, payload.proxy_count)} and dtype {labels.dtype}, "
                         f"got {inputs.shape} {inputs.dtype}")
    else:
        buffers = inputs
    collective = labels.collective
    summable = inputs is None and exactly_summable(labels.dtype, op)
    expected = (collective.expected(buffers, op, payload.owned(ranks),
                                    summable=summable,
                                    depth=algorithm.reduction_depth(plan.machine.layout))
                if plan.settings.verify else None)
    recorder = Recorder(plan.machine.routing,
                        trace=watch is not None and watch.traces(algorithm.name, size_bytes),
                        offset_s=plan.start_s)
    timing, engine = executor.run(plan, buffers, recorder)
    if collective.reduces:
        op.finalize(buffers, ranks)
    check = expected.check(buffers) if expected is not None else None
    mismatch = (where_wrong(algorithm, payload, ranks, op, expected, buffers)
                if expected is not None and check is not None and check.verified is False
                else "")
    time_s = timing.time_s + plan.start_s
    algbw = size_bytes / time_s / 1e9 if time_s > 0 else math.nan
    nccl = plan.nccl
    if watch is not None:
        watch.keep(recorder.activity(algorithm.name, size_bytes, time_s, engine.value, note=(
            f"traced, so run on simpy (the scenario's engine: {plan.settings.engine.value})"
            if recorder.trace and plan.settings.engine is not Engine.SIMPY else "")))
    top = recorder.bottleneck()
    healthy_s = _healthy_s(plan) if plan.healthy is not None else math.nan
    return Result(
        scenario=labels.scenario, topology=labels.topology, ranks=ranks,
        collective=collective.value, algorithm=algorithm.name, size_bytes=size_bytes,
        dtype=labels.dtype.name, op=op.value, sim_time_s=time_s,
        model_time_s=plan.model_s, algbw_GBps=algbw,
        busbw_GBps=algbw * collective.busbw_factor(ranks),
        verified=check.verified if check is not None else None,
        max_abs_error=check.max_abs_error if check is not None else math.nan,
        count=payload.count, verified_elements=payload.proxy_count,
        messages=timing.messages, events=timing.events, execution=labels.execution.value,
        protocol=nccl.protocol.value if nccl is not None else "",
        nccl_time_s=nccl.predicted_s if nccl is not None else math.nan,
        nccl_pick=nccl.picked if nccl is not None else None, channels=plan.channels,
        engine=engine.value,
        bottleneck_link=top.name if top is not None else "",
        bottleneck_share=top.busy_s / time_s if top is not None and time_s > 0 else math.nan,
        faults=fault_labels(plan.faults, timing.time_s),
        healthy_time_s=healthy_s,
        fault_slowdown=time_s / healthy_s if healthy_s > 0 else math.nan,
        max_ulp_error=check.max_ulp_error if check is not None else math.nan,
        mean_ulp_error=check.mean_ulp_error if check is not None else math.nan,
        ranks_identical=check.ranks_identical if check is not None else None,
        mismatch=mismatch, model_kind=algorithm.model_kind.value,
    )


def where_wrong(algorithm: Algorithm, payload: Payload, ranks: int, op: ReduceOp,
                expected: Expected, buffers: np.ndarray) -> str:
    """Where a run that failed verification came out wrong first, in one phrase: the rank and
    the chunk (of the algorithm's :meth:`~Algorithm.whole_chunks`, else of the p chunks the
    collective owns), and what the chunk holds where the algorithm can tell
    (:meth:`~Algorithm.explain`)."""
    wrong = expected.first_wrong(buffers)
    if wrong is None:
        return ""
    rank, element = wrong
    chunks = algorithm.whole_chunks(ranks) if algorithm.whole_chunks(ranks) > 1 else ranks
    views = [payload.view(span) for span in Span(0, payload.count).split(chunks)]
    chunk = next(c for c, view in enumerate(views) if view.start <= element < view.stop)
    said = algorithm.explain(rank, chunk, op)
    return f"rank {rank} chunk {chunk} " + (said if said else (
        f"of {chunks} differs from numpy's {op.value}, first at element {element} of the "
        f"{payload.proxy_count} verified"))


def _healthy_s(plan: PointPlan) -> float:
    """The point's time without the scenario's faults: its plan on the healthy machine, timed
    only (no data moves: the times do not depend on it)."""
    assert plan.healthy is not None
    payload = Payload.timing_only(plan.size_bytes, plan.payload.dtype)
    healthy = replace(plan, machine=plan.healthy, healthy=None,
                      spec=replace(plan.spec, payload=payload))
    buffers = np.zeros((plan.healthy.ranks, 0), dtype=payload.dtype)
    timing, _ = executor.run(healthy, buffers, Recorder(plan.healthy.routing))
    return timing.time_s + plan.start_s


def fault_labels(faults: Sequence[Fault], run_s: float) -> str:
    """The faults of a point as the results' ``faults`` column says them: each one's label,
    "(did not act)" after a link fault that struck after the run's last event (``run_s``,
    from the first byte) or a straggler late by nothing."""
    return "; ".join(fault.label() + ("" if fault.acted(run_s) else " (did not act)")
                     for fault in faults)


def simulate(scenario: str | Path | Mapping[str, Any] | Scenario, *, seed: int | None = None,
             proxy_elements: int | None = None,
             watch: Watch | None = None) -> pd.DataFrame:
    """Every (algorithm, size) point of ``scenario``, one row each, columns RESULT_COLUMNS.

    ``scenario`` is a path to a YAML file, a mapping (as in a file) or a Scenario. The frame is
    the one the command line writes to ``<output>/<name>.csv``. A :class:`Watch` given as
    ``watch`` collects every point's link usage and, where it asks, timeline (docs/results.md).

    Ring allreduce of 4 KiB on 4 GPUs of a switch: 2(p-1) = 6 steps of alpha + c·beta, alpha two
    1 us hops, c = 1 KiB at 25 GB/s, so 6 × (2 us + 40.96 ns) = 12.24576 us:

    >>> frame = simulate({"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s",
    ...                                "latency": "1us"}, "algorithms": ["ring"], "sizes": [4096]})
    >>> round(float(frame.loc[0, "sim_time_s"]) * 1e6, 5), bool(frame.loc[0, "verified"])
    (12.24576, True)
    """
    return results_frame(run_points(scenario, seed=seed, proxy_elements=proxy_elements,
                                    watch=watch))


def run_points(scenario: str | Path | Mapping[str, Any] | Scenario, *, seed: int | None = None,
               proxy_elements: int | None = None, setup: Setup | None = None,
               watch: Watch | None = None,
               plans: Sequence[PointPlan] | None = None) -> Iterator[Result]:
    """:func:`simulate`'s points one at a time, each as soon as it is simulated, in its order
    (algorithms as the scenario has them, then sizes; with ``algorithms: auto`` NCCL's pick at
    each size), so a caller can keep or show each one as it finishes. The scenario and its
    checks (:func:`checked_setup`, unless ``setup`` gives them done) and every point's plan
    (unless ``plans`` gives them, as :func:`plan_points` of ``setup``) come first, before
    anything is simulated."""
    scenario = as_scenario(scenario)
    settings = settings_of(scenario, seed, proxy_elements)
    setup = setup or checked_setup(scenario, settings)
    plans = plans if plans is not None else plan_points(scenario, setup, settings).plans
    return (run_plan(plan, watch=watch) for plan in plans)


@dataclass(frozen=True)
class Plans:
    """A run's points, planned, in :func:`run_points`' order, and a note (one line) for each
    point ``all`` or ``auto`` leaves out because it cannot be planned at its size, and for each
    size where NCCL's model picks nothing."""

    plans: tuple[PointPlan, ...]
    left_out: tuple[LeftOut, ...] = ()


def plan_points(scenario: Scenario, setup: Setup, settings: RunSettings) -> Plans:
    """Every point of the scenario (:func:`~simulator.plan.points_of`) planned, in
    :func:`run_points`' order. Under ``all`` and ``auto`` a point that cannot be planned (an
    InputError of :func:`~simulator.plan.plan_point`: one_shot's LL kernels from 2 GiB, a
    count its chunks do not divide), or NCCL's pick planned at another protocol than NCCL
    runs it with (``protocol`` forces one), is left out with a note, and InputError (a line
    for each note) where that leaves none; a scenario that names its algorithms gets the
    InputError."""
    points, notes = points_of(scenario, setup)
    plans, left_out = [], list(notes)
    for point in points:
        try:
            plan = plan_point(scenario, setup, point.algorithm, point.size_bytes, settings)
            if (too_large := traced_problem(plan)) is not None:  # before it allocates them
                raise InputError([Problem(scenario.source, "sizes", too_large)])
        except InputError as error:
            if scenario.algorithms is not None:
                raise
            left_out.append(point.left_out("; ".join(
                f"{problem.field}: {problem.message}" for problem in error.problems)))
            continue
        if point.protocol is not None and plan.nccl is not None and not plan.nccl.picked:
            # NCCL's model picks the family's protocol as its tuner picks the pair: only a
            # protocol the scenario forces runs the pick with another
            assert scenario.protocol is not None, point.label
            left_out.append(point.left_out(f"protocol: NCCL runs it with "
                                           f"{point.protocol.value}, the scenario every point "
                                           f"with {scenario.protocol.value}"))
            continue
        plans.append(plan)
    if not plans and left_out:  # nothing to simulate, nor a table or figure to make
        raise InputError([Problem(scenario.source, "algorithms", f"no point left to simulate: "
                                                                 f"{note.note}")
                          for note in left_out])
    return Plans(tuple(plans), tuple(left_out))


def outlook(scenario: Scenario, setup: Setup, plans: Plans) -> Outlook:
    """What :func:`run_points` will simulate, before it does: every point with its closed form
    (the ``model_time_s`` its row will have), in the same order, read off its ``plans``
    (:func:`plan_points`), what NCCL runs at each size (each plan's NCCL pick, under
    ``execution: nccl``), where NCCL's own view differs from the assumed one, the points
    left out, and each fault whose outcome is not NCCL's (:meth:`Fault.caveat`)."""
    view = scenario.nccl.view
    notes = () if view is None else tuple(
        f"{view.source} ({scenario.nccl.view_key}): {line}"
        for line in differences(setup.machine, view, scenario.nccl_enabled))
    planned = tuple(Upcoming(plan.algorithm.name, plan.size_bytes, plan.model_s,
                             *wall_estimate_s(plan)) for plan in plans.plans)
    picked = {plan.size_bytes: plan.nccl.pick.label for plan in plans.plans
              if plan.nccl is not None and plan.nccl.pick is not None}
    algorithms = (len({point.algorithm for point in planned}) if scenario.nccl_choice
                  else len(setup.algorithms))
    return Outlook(scenario.name, algorithms, len(scenario.sizes), planned,
                   notes + tuple(left.note for left in plans.left_out) + caveats(scenario.faults),
                   nccl_pick=scenario.nccl_choice,
                   picks=tuple((size, picked[size]) for size in scenario.sizes
                               if size in picked))


def checked_setup(scenario: Scenario, settings: RunSettings) -> Setup:
    """The scenario's machine and algorithms, after the checks every run of it needs (the proxy's
    memory of the points it runs; ``settings`` come from :func:`settings_of`, checked):
    InputError before anything is simulated, and for a training scenario, whose step
    :func:`simulator.trainer.train` runs."""
    if scenario.training is not None:
        raise InputError([Problem(scenario.source, "training", (
            "expected a scenario of sizes here: a training step runs with simulator.train() or "
            "python -m simulator run"))])
    setup = prepare(scenario)
    if scenario.nccl_choice:  # auto runs NCCL's pick: its model must pick here
        found = pick_problem(setup.machine, scenario.sizes[0], scenario.collective,
                             scenario.nccl, scenario.topology.label)
        if found is not None:
            raise InputError([Problem(scenario.source, *found)])
    # all and auto leave out a point whose schedule is too large (its plan says so, one note)
    check_memory(scenario, setup, settings, points=points_of(scenario, setup)[0],
                 footprints=scenario.algorithms is not None)
    return setup
