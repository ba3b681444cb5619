"""Runs a scenario: every (algorithm, size) point simulated, verified and set beside its closed form.

The one orchestrator: :func:`simulate` takes a scenario (a path, a mapping or a
:class:`~simulator.scenario.spec.Scenario`) and returns a pandas DataFrame whose columns are
:data:`~simulator.output.results.RESULT_COLUMNS` (docs/results.md), the very frame the command
line writes. :func:`run_points` gives the same rows one by one as they finish (the command line
writes each as it comes), and :func:`outlook` what a run will simulate, by the closed forms,
before it starts. May import every layer but the command line.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.algorithms.algorithm import Algorithm
from simulator.algorithms.channels import on_channels_s, steps_on_channels
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.phases.pieces import PIPELINE_BYTES
from simulator.algorithms.registry import algorithm_names
from simulator.algorithms.schedule import Group
from simulator.engine.payload import Payload, make_inputs
from simulator.engine.record import Recorder
from simulator.engine.run import RunSpec, Timing, run_collective
from simulator.engine.vector import declines, run_schedule
from simulator.errors import InputError, Problem
from simulator.limits import DEFAULT_PROXY_ELEMENTS, MAX_MESSAGES, PROXY_BUDGET_BYTES
from simulator.model.activity import Watch
from simulator.model.collective import Collective
from simulator.model.execution import (
    Execution,
    Plan,
    apply,
    nccl_plan,
    stream_choices,
    system_of,
)
from simulator.model.machine import Machine
from simulator.model.nccl import Protocol, best_protocol, choose, predicted_time_us
from simulator.model.span import Span
from simulator.output.outlook import Outlook, Planned
from simulator.output.results import Result, results_frame
from simulator.scenario.parse import load_scenario, scenario_from_dict
from simulator.scenario.spec import Engine, Scenario


@dataclass(frozen=True)
class Setup:
    """What every point of a scenario shares: the machine, the closed forms' inputs, and the
    algorithms to run (configured with the scenario's options)."""

    machine: Machine
    cost: CostInputs
    algorithms: tuple[Algorithm, ...]


def as_scenario(scenario: str | Path | Mapping[str, Any] | Scenario) -> Scenario:
    """A scenario from a path to a YAML file, a mapping (as :func:`scenario_from_dict`) or itself."""
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, Mapping):
        return scenario_from_dict(scenario)
    return load_scenario(scenario)


def prepare(scenario: Scenario, *, select: bool = True) -> Setup:
    """Build the scenario's topology, place ranks on its GPUs, and (unless ``select`` is False)
    pick its algorithms; InputError if one the scenario names cannot run on its topology."""
    machine = Machine.of(scenario.topology.build(), scenario.gpu)
    cost = CostInputs(machine, itemsize=scenario.dtype.itemsize, piece_bytes=scenario.piece_bytes)
    return Setup(machine, cost, _select(scenario, machine) if select else ())


def _select(scenario: Scenario, machine: Machine) -> tuple[Algorithm, ...]:
    if scenario.algorithms is None:
        registered = [scenario.algorithm(name) for name in algorithm_names(scenario.collective)]
        chosen = [algorithm for algorithm in registered if algorithm.unsupported(machine) is None]
        if not chosen:
            raise InputError([Problem(scenario.source, "algorithms",
                                      f"no {scenario.collective.value} algorithm applies to "
                                      f"topology {scenario.topology.label}")])
        return tuple(chosen)
    problems = []
    for i, name in enumerate(scenario.algorithms):
        reason = scenario.algorithm(name).unsupported(machine)
        if reason:
            problems.append(_cannot_run(scenario, f"algorithms[{i}]", name, reason))
    if problems:
        raise InputError(problems)
    return tuple(scenario.algorithm(name) for name in scenario.algorithms)


def _cannot_run(scenario: Scenario, field: str, name: str, reason: str) -> Problem:
    """The problem of an algorithm the scenario's topology cannot run, and why."""
    return Problem(scenario.source, field, f"{name!r} cannot run on topology "
                                           f"{scenario.topology.label}: {reason}")


def _payload(scenario: Scenario, size_bytes: int, ranks: int, proxy_elements: int,
             channels: int = 1) -> Payload:
    """The point's payload; with ``verify: false`` a timing-only one that moves no data, so
    the memory of a run grows with its messages and not with ranks × chunks."""
    if not scenario.verify:
        return Payload.timing_only(size_bytes, scenario.dtype)
    return Payload.for_size(size_bytes, scenario.dtype, ranks, proxy_elements,
                            scenario.piece_bytes or PIPELINE_BYTES, channels)


def point_payload(scenario: Scenario, setup: Setup, algorithm: Algorithm, size_bytes: int,
                  proxy_elements: int = DEFAULT_PROXY_ELEMENTS) -> Payload:
    """The payload :func:`run_point` moves for this point: its nominal count, and the proxy's
    length that ``inputs`` must have (the whole buffer when ``proxy_elements`` ≥ its count)."""
    channels = channels_for(scenario, setup.machine, algorithm, size_bytes)
    return _payload(scenario, size_bytes, setup.machine.ranks, proxy_elements, channels)


def channels_for(scenario: Scenario, machine: Machine, algorithm: Algorithm,
                 size_bytes: int) -> int:
    """The channels an allreduce of ``size_bytes`` runs on: the scenario's ``channels``, or with
    ``auto`` one per GPU of a host where the ranks span several hosts under ``execution: nccl``
    (each GPU's NIC then carries one channel's crossing, as NCCL's rings use every rail) and one
    otherwise (on one host, on the ideal wire, or for a schedule that spreads over the rails
    itself). Never more than leave each channel an element per rank: NCCL too runs fewer
    channels on small buffers."""
    if scenario.collective is not Collective.ALLREDUCE:
        return 1
    wanted = scenario.channels
    if wanted is None and algorithm.rail_aware:
        wanted = 1
    if wanted is None:
        per_host = machine.layout.ranks_per_host
        several = machine.layout.host_count > 1 and len(per_host) == 1
        nccl = scenario.execution is Execution.NCCL
        wanted = next(iter(per_host)) if several and nccl else 1
    count = size_bytes // scenario.dtype.itemsize
    return max(1, min(wanted, count // machine.ranks))


def check_memory(scenario: Scenario, setup: Setup, proxy_elements: int) -> None:
    """InputError, naming what would help, if a size's proxy buffers exceed the budget."""
    ranks = setup.machine.ranks
    for size in scenario.sizes:
        channels = max((channels_for(scenario, setup.machine, algorithm, size)
                        for algorithm in setup.algorithms), default=1)
        payload = _payload(scenario, size, ranks, proxy_elements, channels)
        need = ranks * payload.proxy_count * scenario.dtype.itemsize
        if need > PROXY_BUDGET_BYTES:
            if payload.proxy_count > max(proxy_elements, 8 * ranks * channels):
                advice = "a larger piece_size (the proxy keeps two elements per pipeline piece)"
            elif payload.proxy_count > proxy_elements:
                advice = "fewer ranks (the proxy keeps eight elements per chunk)"
            else:
                advice = "a smaller --proxy-elements"
            advice += ", or verify: false to run for the time only"
            raise InputError([Problem(scenario.source, "sizes",
                                      f"{size} bytes on {ranks} ranks needs {need >> 20} MiB of "
                                      f"data to verify, more than {PROXY_BUDGET_BYTES >> 20} MiB; "
                                      f"use {advice}")])


def check_run(source: str, seed: int, proxy_elements: int) -> None:
    """InputError unless the input data's seed is ≥ 0 and at least one element is verified."""
    problems = []
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        problems.append(Problem(source, "seed", f"expected a whole number ≥ 0, got {seed!r}"))
    if (isinstance(proxy_elements, bool) or not isinstance(proxy_elements, int)
            or proxy_elements < 1):
        problems.append(Problem(source, "proxy_elements", f"expected a whole number ≥ 1, got "
                                                          f"{proxy_elements!r}"))
    if problems:
        raise InputError(problems)


def run_point(scenario: str | Path | Mapping[str, Any] | Scenario, algorithm: Algorithm | str,
              size_bytes: int, *, seed: int = 0, proxy_elements: int = DEFAULT_PROXY_ELEMENTS,
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
    ``(ranks, proxy)`` (:func:`point_payload` tells the proxy's length) that the run reduces in
    place, so it ends holding every rank's result (how :mod:`simulator.dist` and training steps
    move their own tensors).
    """
    scenario = as_scenario(scenario)
    check_run(scenario.source, seed, proxy_elements)
    setup = setup or prepare(scenario, select=False)
    if isinstance(algorithm, str):
        algorithm = scenario.algorithm(algorithm)
    reason = algorithm.unsupported(setup.machine)
    if reason:
        raise InputError([_cannot_run(scenario, "algorithm", algorithm.name, reason)])
    ranks = setup.machine.ranks
    machine, cost, plan = _executed(scenario, setup, algorithm, size_bytes)
    channels = channels_for(scenario, setup.machine, algorithm, size_bytes)
    payload = _payload(scenario, size_bytes, ranks, proxy_elements, channels)
    if inputs is None:
        buffers = make_inputs(np.random.default_rng([seed, size_bytes]), ranks, payload,
                              scenario.reduce_op)
    elif inputs.shape != (ranks, payload.proxy_count) or inputs.dtype != scenario.dtype:
        raise ValueError(f"inputs of {algorithm.name} at {size_bytes} bytes: expected an array "
                         f"of shape {(ranks, payload.proxy_count)} and dtype {scenario.dtype}, "
                         f"got {inputs.shape} {inputs.dtype}")
    else:
        buffers = inputs
    collective = scenario.collective
    expected = (collective.expected(buffers, scenario.reduce_op, payload.owned(ranks),
                                    summable=inputs is None)
                if scenario.verify else None)
    recorder = Recorder(machine.routing,
                        trace=watch is not None and watch.traces(algorithm.name, size_bytes),
                        offset_s=plan.start_s if plan is not None and ranks > 1 else 0.0)
    timing, engine = _run(scenario, algorithm, machine, buffers,
                          RunSpec(payload, scenario.reduce_op, scenario.piece_bytes, channels,
                                  cost.stream_bytes), recorder)
    if collective.reduces:
        scenario.reduce_op.finalize(buffers, ranks)
    verified, error = expected.check(buffers) if expected is not None else (None, math.nan)
    start = plan.start_s if plan is not None and ranks > 1 else 0.0
    model = _model_s(algorithm, cost, plan, payload.count, channels, ranks)
    time_s = timing.time_s + start
    algbw = size_bytes / time_s / 1e9 if time_s > 0 else math.nan
    nccl_time_s, nccl_pick = (_nccl_view(setup.machine, algorithm, plan.protocol, size_bytes)
                              if plan is not None else (math.nan, None))
    if watch is not None:
        watch.keep(recorder.activity(algorithm.name, size_bytes, time_s, engine.value, note=(
            f"traced, so run on simpy (the scenario's engine: {scenario.engine.value})"
            if recorder.trace and scenario.engine is not Engine.SIMPY else "")))
    top = recorder.bottleneck()
    return Result(
        scenario=scenario.name, topology=scenario.topology.label, ranks=ranks,
        collective=collective.value, algorithm=algorithm.name, size_bytes=size_bytes,
        dtype=scenario.dtype.name, op=scenario.reduce_op.value, sim_time_s=time_s,
        model_time_s=model, algbw_GBps=algbw,
        busbw_GBps=algbw * collective.busbw_factor(ranks), verified=verified,
        max_abs_error=error, count=payload.count, verified_elements=payload.proxy_count,
        messages=timing.messages, events=timing.events, execution=Execution(scenario.execution).value,
        protocol=plan.protocol.value if plan is not None else "", nccl_time_s=nccl_time_s,
        nccl_pick=nccl_pick, channels=channels, engine=engine.value,
        bottleneck_link=top.name if top is not None else "",
        bottleneck_share=top.busy_s / time_s if top is not None and time_s > 0 else math.nan,
    )


def _run(scenario: Scenario, algorithm: Algorithm, machine: Machine, buffers: np.ndarray,
         spec: RunSpec, recorder: Recorder) -> tuple[Timing, Engine]:
    """Simulate one point on the scenario's engine: the vectorised one where the algorithm has a
    hand-written schedule (``auto``) or any (``vector``: its program's trace where it has no
    builder) and the engine does not decline it, else SimPy; InputError for ``vector`` where it
    declines, and for a schedule of more messages than the vectorised engine can hold. A point
    whose timeline is traced runs on SimPy, whatever the scenario's engine."""
    schedule, declined = None, None
    if scenario.engine is not Engine.SIMPY and not recorder.trace:
        group = Group.whole(machine, spec.payload.count, spec.payload.dtype.itemsize,
                            spec.piece_bytes, spec.stream_bytes)
        schedule = steps_on_channels(algorithm, group, machine.layout, spec.channels)
        declined = declines(schedule, machine, asked=scenario.engine is Engine.VECTOR)
    if schedule is None or declined is not None:
        if scenario.engine is Engine.VECTOR and not recorder.trace:
            reason = declined or (f"it has no schedule for the vector engine (those with one: "
                                  f"{', '.join(scheduled_names(scenario))})")
            raise InputError([Problem(scenario.source, "engine",
                                      f"expected auto or simpy for {algorithm.name!r}: {reason}")])
        return run_collective(algorithm, machine, spec, buffers, recorder), Engine.SIMPY
    if schedule.blocks == 1 and schedule.size > MAX_MESSAGES:  # held whole
        raise InputError([Problem(scenario.source, "sizes", (
            f"{spec.payload.count * spec.payload.dtype.itemsize} bytes with {algorithm.name} on "
            f"{machine.ranks} ranks is {schedule.size:,} messages, more than the "
            f"{MAX_MESSAGES:,} the vectorised engine holds at once; use fewer ranks or a "
            "larger piece_size"))])
    vector = run_schedule(schedule, machine, spec.payload, spec.reduce_op, buffers,
                          algorithm.name, recorder)
    return Timing(vector.time_s, vector.messages, vector.instants), Engine.VECTOR


def scheduled_names(scenario: Scenario) -> list[str]:
    """The algorithms of the scenario's collective that have a schedule."""
    group = Group(np.arange(2, dtype=np.int64), Span(0, 2))
    return [name for name in algorithm_names(scenario.collective)
            if scenario.algorithm(name).scheduled(group) is not None]


def _nccl_view(machine: Machine, algorithm: Algorithm, protocol: Protocol,
               size_bytes: int) -> tuple[float, bool]:
    """What NCCL's own cost model says of a point: its predicted time for the algorithm's NCCL
    family and protocol (NaN where the model has none), and whether the point is NCCL's pick
    at this size (the family and protocol NCCL's tuner chooses, run by NCCL's own kernel)."""
    system = system_of(machine)
    predicted = predicted_time_us(system, algorithm.nccl_family, protocol, size_bytes)
    try:
        pick = choose(system, size_bytes)
    except ValueError:  # no NCCL algorithm is modelled on this system
        return math.nan if predicted is None else predicted * 1e-6, False
    picked = (algorithm.nccl_kernel and pick.algorithm is algorithm.nccl_family
              and pick.protocol is protocol)
    return math.nan if predicted is None else predicted * 1e-6, picked


def _executed(scenario: Scenario, setup: Setup, algorithm: Algorithm,
              size_bytes: int) -> tuple[Machine, CostInputs, Plan | None]:
    """The machine and closed-form inputs as the scenario's execution model times them, and the
    NCCL plan (None on the ideal wire): the protocol is the scenario's, or the one NCCL's model
    picks for this algorithm's family at this size."""
    if scenario.execution is Execution.IDEAL:
        return setup.machine, setup.cost, None
    family = algorithm.nccl_family
    protocol = scenario.protocol or best_protocol(system_of(setup.machine), family, size_bytes)
    try:
        plan = nccl_plan(setup.machine, family, protocol, size_bytes)
    except ValueError as error:
        raise InputError([Problem(scenario.source, "protocol", f"{algorithm.name!r}: {error}")]
                         ) from None
    machine = apply(plan, setup.machine)
    cost = replace(setup.cost, machine=machine)
    count = size_bytes // scenario.dtype.itemsize
    channels = channels_for(scenario, setup.machine, algorithm, size_bytes)
    streamed = [replace(cost, stream_bytes=piece) for piece in stream_choices(size_bytes)]
    fastest = min(streamed, key=lambda c: on_channels_s(algorithm, c, count, channels))
    return machine, fastest, plan


def simulate(scenario: str | Path | Mapping[str, Any] | Scenario, *, seed: int = 0,
             proxy_elements: int = DEFAULT_PROXY_ELEMENTS,
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


def run_points(scenario: str | Path | Mapping[str, Any] | Scenario, *, seed: int = 0,
               proxy_elements: int = DEFAULT_PROXY_ELEMENTS,
               setup: Setup | None = None, watch: Watch | None = None) -> Iterator[Result]:
    """:func:`simulate`'s points one at a time, each as soon as it is simulated, in its order
    (algorithms as the scenario has them, then sizes), so a caller can keep or show each one
    as it finishes. The scenario and its checks (:func:`checked_setup`, unless ``setup`` gives
    them done) come first, before anything is simulated."""
    scenario = as_scenario(scenario)
    setup = setup or checked_setup(scenario, seed, proxy_elements)
    return (run_point(scenario, algorithm, size, seed=seed, proxy_elements=proxy_elements,
                      setup=setup, watch=watch)
            for algorithm in setup.algorithms for size in scenario.sizes)


def outlook(scenario: Scenario, setup: Setup) -> Outlook:
    """What :func:`run_points` will simulate, before it does: every point with its closed form
    (the ``model_time_s`` its row will have), in the same order. InputError if a point's NCCL
    plan cannot be made, as its run would raise."""
    return Outlook(scenario.name, len(setup.algorithms), len(scenario.sizes), tuple(
        Planned(algorithm.name, size, closed_form_s(scenario, setup, algorithm, size))
        for algorithm in setup.algorithms for size in scenario.sizes))


def closed_form_s(scenario: Scenario, setup: Setup, algorithm: Algorithm, size_bytes: int) -> float:
    """The point's closed form as its run reports it (``model_time_s``), without simulating."""
    _, cost, plan = _executed(scenario, setup, algorithm, size_bytes)
    channels = channels_for(scenario, setup.machine, algorithm, size_bytes)
    return _model_s(algorithm, cost, plan, size_bytes // scenario.dtype.itemsize, channels,
                    setup.machine.ranks)


def _model_s(algorithm: Algorithm, cost: CostInputs, plan: Plan | None, count: int, channels: int,
             ranks: int) -> float:
    """The closed form of one channel, plus the plan's pipeline fill where ranks talk."""
    start = plan.start_s if plan is not None and ranks > 1 else 0.0
    return on_channels_s(algorithm, cost, count, channels) + start


def checked_setup(scenario: Scenario, seed: int, proxy_elements: int) -> Setup:
    """The scenario's machine and algorithms, after the checks every run of it needs (run
    settings, the proxy's memory): InputError before anything is simulated, and for a training
    scenario, whose step :func:`simulator.trainer.train` runs."""
    if scenario.training is not None:
        raise InputError([Problem(scenario.source, "training", (
            "expected a scenario of sizes here: a training step runs with simulator.train() or "
            "python -m simulator run"))])
    check_run(scenario.source, seed, proxy_elements)
    setup = prepare(scenario)
    check_memory(scenario, setup, proxy_elements)
    return setup
