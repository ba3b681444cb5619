"""Data-parallel training steps: a scenario's ``training:`` section run on its fabric.

Each DDP bucket's allreduce is planned and simulated on the scenario's topology like any point of
a run (:func:`simulator.plan.plan_point`, :func:`simulator.runner.run_plan`), with the bucket's
own data: every rank's gradients (seeded, exactly summable), divided by the world size as DDP does
before its allreduce, summed over the fabric, and checked to end averaged and identical on every
rank. The durations then go on the step's two streams (:mod:`simulator.training.timeline`). Sweeps
over the bucket cap and the GPU count rerun the step for the time only (``verify: false``), each
distinct bucket size once, on the fastest engine that runs it. Under ``parallelism:``, the
step of the layout instead (:mod:`.parallel`): its collectives priced on their communicators'
machines (:mod:`.costs`, :mod:`.collective_run`) and its graph executed on the one fabric.

May import: :mod:`simulator.plan`, :mod:`simulator.runner`, :mod:`simulator.training`,
:mod:`simulator.scenario`, :mod:`simulator.algorithms`, :mod:`simulator.model`,
:mod:`simulator.engine`, :mod:`simulator.output`, :mod:`simulator.settings`,
:mod:`simulator.units`, :mod:`simulator.limits`, :mod:`simulator.errors`; never the command
line.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from simulator.engine.payload import Payload, make_inputs
from simulator.engine.plan import PointPlan
from simulator.errors import InputError, Problem
from simulator.model.faults import Fault, seen_by_bucket
from simulator.model.reduction import ReduceOp
from simulator.model.span import Span
from simulator.output.results import Result
from simulator.plan import Setup, as_scenario, check_memory, prepare
from simulator.runner import settings_of
from simulator.scenario.chakra import read_chakra
from simulator.scenario.parallelism import REST, resolve
from simulator.scenario.spec import Scenario
from simulator.scenario.training import Imports
from simulator.settings import RunSettings
from simulator.trainer.buckets import ddp_buckets
from simulator.trainer.collective_run import collective_run
from simulator.trainer.layouts import sweep_layouts
from simulator.trainer.parallel import simulate_parallel_step, simulate_traced_step, step_graph
from simulator.training.buckets import Bucket
from simulator.training.compute import backward_s, forward_s, optimizer_s
from simulator.training.graph import StepGraph
from simulator.training.layout import Parallelism, layout_problems
from simulator.training.network import Tensor
from simulator.training.results import BucketRun, Step, Training
from simulator.training.spec import TrainingSpec
from simulator.training.timeline import step_timeline
from simulator.training.traffic import model_problems
from simulator.units import format_size


def train(scenario: str | Path | Mapping[str, Any] | Scenario, *, seed: int | None = None,
          proxy_elements: int | None = None,
          progress: Callable[[str], None] | None = None,
          imports: Imports = Imports.REFUSE) -> Training:
    """Simulate the scenario's training step (verified, if the scenario verifies) and its
    sweeps; ``progress`` hears of each step as it starts. InputError if the scenario has no
    ``training:`` section. A model given as ``{torch: MODULE:FACTORY}`` in a file or mapping is
    imported (its code run) only with ``imports=Imports.ALLOW``."""
    scenario = as_scenario(scenario, imports=imports)
    spec = _spec(scenario)
    settings = settings_of(scenario, seed, proxy_elements)
    setup = prepare(scenario)
    say = progress or (lambda _: None)
    say(f"step on {setup.machine.ranks} GPUs")
    if spec.chakra is not None:
        graph = read_chakra(spec.chakra)
        return Training(scenario.name, spec, _policy(scenario, setup), simulate_traced_step(
            scenario, setup, settings, spec, graph), (), (),
            "; ".join(fault.label() for fault in scenario.faults))
    if spec.parallelism is not None or spec.sweep_layouts:
        return _train_parallel(scenario, spec, setup, settings, say)
    step = simulate_step(scenario, setup, settings)
    timed = replace(settings, verify=False)
    cache: dict[tuple[int, tuple[Fault, ...]], Result] = {}
    caps = []
    for cap in spec.sweep_caps:
        say(f"step with buckets of {format_size(cap)}")
        caps.append(simulate_step(scenario, setup, timed, cap=cap, cache=cache))
    scaled = []
    for topology in scenario.scaled_topologies():  # healthy: a fault names the scenario's nodes
        say(f"step on {topology.ranks} GPUs")
        scaled.append(simulate_step(scenario, prepare(scenario, topology=topology, faults=()),
                                    timed, faults=()))
    return Training(scenario.name, spec, _policy(scenario, setup), step, tuple(caps),
                    tuple(scaled), "; ".join(fault.label() for fault in scenario.faults))


def _train_parallel(scenario: Scenario, spec: TrainingSpec, setup: Setup,
                    settings: RunSettings, say: Callable[[str], None]) -> Training:
    """The scenario's step under its layout, and its sweeps (bucket caps; GPU counts, DP taking
    the GPUs TP and PP leave), each distinct collective simulated once per step."""
    layout = parallel_layout(scenario, spec, setup, spec.parallelism or Parallelism(dp=REST))
    step = simulate_parallel_step(scenario, setup, settings, spec, layout, scenario.faults)
    timed = replace(settings, verify=False)
    if scenario.faults:  # the same step healthy, as a DDP step's healthy_step_s
        # the setup holds no fault (a point applies them as it is planned): the same machine
        healthy = simulate_parallel_step(scenario, setup, timed, spec, layout, ())
        step = replace(step, healthy_step_s=healthy.step_s)
    caps = []
    for cap in spec.sweep_caps:
        say(f"step with buckets of {format_size(cap)}")
        caps.append(simulate_parallel_step(scenario, setup, timed, replace(spec, bucket_cap=cap),
                                           layout, scenario.faults))
    scaled = []
    for topology in scenario.scaled_topologies():
        other = prepare(scenario, topology=topology, faults=())
        say(f"step on {other.machine.ranks} GPUs")
        scaled.append(simulate_parallel_step(
            scenario, other, timed, spec,
            parallel_layout(scenario, spec, other, replace(layout, dp=REST)), ()))
    layouts = (sweep_layouts(scenario, setup, timed, spec, layout, say) if spec.sweep_layouts
               else ())
    return Training(scenario.name, spec, _policy(scenario, setup), step, tuple(caps),
                    tuple(scaled), "; ".join(fault.label() for fault in scenario.faults),
                    layouts)


def chakra_graph(scenario: str | Path | Mapping[str, Any] | Scenario, *,
                 imports: Imports = Imports.REFUSE) -> StepGraph:
    """The scenario's training step under its layout (plain DDP without one) as an execution
    graph of every rank, to write as Chakra traces
    (:func:`simulator.output.chakra.write_chakra`) and run back with ``training: {chakra:
    DIR}``: an export of the step other simulators can read."""
    scenario = as_scenario(scenario, imports=imports)
    spec = _spec(scenario)
    setup = prepare(scenario)
    layout = parallel_layout(scenario, spec, setup, spec.parallelism or Parallelism(dp=REST))
    return step_graph(scenario, spec, layout)


def parallel_layout(scenario: Scenario, spec: TrainingSpec, setup: Setup,
                    layout: Parallelism) -> Parallelism:
    """``layout`` on ``setup``'s machine (``dp`` left out: the GPUs TP and PP leave), or an
    InputError naming each field that does not fit the machine or the model."""
    machine = setup.machine
    layout = resolve(layout, machine.ranks)
    per_node = max(len(ranks) for ranks in machine.layout.host_groups)
    shape = spec.network.shape
    found = [*layout_problems(layout, machine.ranks, per_node),
             *(model_problems(shape, layout, spec.batch) if shape is not None else [])]
    if found:
        raise InputError([Problem(scenario.source, f"training.parallelism.{field}".rstrip("."),
                                  expected) for field, expected in found])
    return layout


def _policy(scenario: Scenario, setup: Setup) -> str:
    """How each bucket's allreduce is chosen, in words
    (:func:`~simulator.trainer.collective_run.collective_run` does it)."""
    names = [algorithm.name for algorithm in setup.algorithms]
    if setup.machine.ranks == 1:
        return "none (one GPU)"
    if scenario.nccl_choice:
        return "NCCL's choice (where no algorithm runs NCCL's pick: the fastest simulated)"
    return names[0] if len(names) == 1 else f"the fastest of {', '.join(names)}"


def _spec(scenario: Scenario) -> TrainingSpec:
    if scenario.training is None:
        raise InputError([Problem(scenario.source, "training", "required but missing: a "
                                                               "training step needs a training "
                                                               "section (docs/training.md)")])
    network = scenario.training.network
    # a model without layers was read with Imports.SKIP (a trace gives the step instead)
    if not network.layers and scenario.training.chakra is None:
        raise InputError([Problem(scenario.source, "training.model", (
            f"expected a model to train, got {network.source}; read the scenario with "
            f"imports=Imports.ALLOW to import it"))])
    return scenario.training


def simulate_step(scenario: Scenario, setup: Setup, settings: RunSettings, *,
                  cap: int | None = None,
                  cache: dict[tuple[int, tuple[Fault, ...]], Result] | None = None,
                  faults: tuple[Fault, ...] | None = None) -> Step:
    """One step of the scenario's training on ``setup``'s machine (its topology), with DDP's
    bucket cap ``cap`` (None: the scenario's). Each distinct bucket size (and faults it sees) is
    simulated once and its later buckets share that run (issue 36: "buckets of equal size share
    one plan and one result"). With ``settings.verify`` the run moves its first bucket's own
    gradients and the averages are checked; without, it is timed only (in ``cache``, if given,
    across calls on the same machine). The buckets' allreduces lie on one timeline: the scenario's faults (or
    ``faults``: ``()`` for a healthy step on another topology), timed from the backward pass's
    start, strike the allreduces that run when they do
    (:func:`~simulator.model.faults.seen_by_bucket`), and the step is timed again with every
    bucket's healthy time (``healthy_step_s``)."""
    spec = _spec(scenario)
    network, compute = spec.network, spec.compute
    tensors = network.tensors
    buckets = ddp_buckets(scenario, spec, cap)
    first = spec.first_limit(cap)
    cap = spec.cap if cap is None else cap
    layer_of = [i for i, layer in enumerate(network.layers) for _ in layer.tensors]
    forward = [forward_s(layer, spec.batch, compute.flops) for layer in network.layers]
    backward = [backward_s(layer, spec.batch, compute.flops) for layer in network.layers]
    update = spec.optimizer_s if spec.optimizer_s is not None else optimizer_s(
        network.numel, spec.optimizer, compute.memory_bandwidth)
    ranks = setup.machine.ranks
    if settings.verify:
        check_memory(scenario, setup, settings, tuple(sorted({b.nbytes for b in buckets})))
    runs: list[Result] = []
    check = _Check()
    # one run per bucket size and faults seen: a later bucket of the same size takes the same
    # schedule on the same links, and the engine's timing never reads the data it moves, so
    # it shares the first one's run (time and verification) rather than simulating it again
    memo = cache if cache is not None and not settings.verify else {}
    backward_start = sum(forward)
    suffered = scenario.faults if faults is None else faults

    def allreduce_s(position: int, ready_s: float, start_s: float) -> float:
        bucket = buckets[position]
        seen = seen_by_bucket(suffered, start_s - backward_start, ready_s - backward_start)
        key = (bucket.nbytes, seen)
        if key not in memo:
            memo[key] = (_verified_allreduce(scenario, setup, settings, bucket, tensors, check,
                                             seen) if settings.verify else
                         collective_run(scenario, setup, settings, bucket.nbytes, faults=seen))
        runs.append(memo[key])
        return float(runs[-1].sim_time_s)

    names = [layer.name for layer in network.layers]
    timeline = step_timeline(names, forward, backward, layer_of, buckets, allreduce_s, update,
                             overlap=spec.overlap)
    healthy_s = [float(run.sim_time_s if math.isnan(run.healthy_time_s) else run.healthy_time_s)
                 for run in runs]
    healthy_step_s = step_timeline(names, forward, backward, layer_of, buckets, healthy_s, update,
                                   overlap=spec.overlap).step_s if suffered else math.nan
    bucket_runs = tuple(
        BucketRun(bucket.index, len(bucket.tensors), bucket.nbytes, ready, interval.start_s,
                  interval.end_s, run.algorithm, run.protocol, float(run.sim_time_s),
                  float(run.model_time_s), run.verified, run.faults,
                  float(run.healthy_time_s), run.model_kind)
        for bucket, ready, interval, run in zip(buckets, timeline.ready_s,
                                                timeline.communication, runs, strict=True))
    verified = check.verified and all(run.verified for run in runs) if settings.verify else None
    return Step(
        scenario=scenario.name, topology=setup.topology.label, ranks=ranks,
        model=network.name, batch=spec.batch, bucket_cap=cap, first_bucket=first,
        overlap=spec.overlap, forward_s=sum(forward), backward_s=sum(backward),
        optimizer_s=update, communication_s=timeline.communication_s,
        exposed_s=timeline.exposed_s, step_s=timeline.step_s, buckets=bucket_runs,
        timeline=timeline, verified=verified, identical=check.identical if settings.verify
        else None, max_abs_error=check.error if settings.verify else math.nan,
        checked_tensors=check.tensors, whole=check.whole if settings.verify else None,
        healthy_step_s=healthy_step_s)


class _Check:
    """The gradients' check over a step's buckets: every rank ends with exactly numpy's average
    of all ranks' gradients, and every rank with the same bits. Exactly, because gradients are
    drawn as world size × (multiples of 2^-6 small enough to sum exactly in any order): the
    division DDP makes is then exact, and so is every partial sum, so that a missing or doubled
    contribution can never hide in a rounding tolerance. ``tensors`` counts the gradient tensors
    the proxies reached, ``whole`` says whether every element was moved (no proxy)."""

    def __init__(self) -> None:
        self.verified, self.identical, self.whole = True, True, True
        self.error, self.tensors = 0.0, 0

    def bucket(self, gradients: np.ndarray, averaged: np.ndarray, views: list[slice],
               whole: bool) -> None:
        """Check one bucket: ``gradients`` as drawn, ``averaged`` after the allreduce (both
        ranks × proxy), ``views`` its gradient tensors' proxy elements."""
        mean = gradients.astype(np.float64).mean(axis=0)
        error = np.abs(averaged.astype(np.float64) - mean)
        self.error = max(self.error, float(error.max(initial=0.0)))
        self.verified = self.verified and bool(np.all(error == 0.0))
        self.identical = self.identical and bool(np.all(averaged == averaged[:1]))
        self.tensors += sum(1 for view in views if view.stop > view.start)
        self.whole = self.whole and whole


def _verified_allreduce(scenario: Scenario, setup: Setup, settings: RunSettings, bucket: Bucket,
                        tensors: tuple[Tensor, ...], check: _Check,
                        faults: tuple[Fault, ...]) -> Result:
    """The bucket's allreduce on its own gradients: drawn per rank (seeded by the bucket, as
    :class:`_Check` needs them), divided by the world size (DDP divides each gradient before
    the allreduce, so that the sum is the average), summed over the fabric, then checked."""
    ranks = setup.machine.ranks
    held: dict[str, tuple[Payload, np.ndarray, np.ndarray]] = {}

    def inputs(plan: PointPlan) -> np.ndarray:
        name, payload = plan.algorithm.name, plan.payload
        if name not in held:
            drawn = make_inputs(np.random.default_rng([settings.seed, bucket.index]), ranks,
                                payload, ReduceOp.SUM, summable=True)
            gradients = drawn * scenario.dtype.type(ranks)  # exact: small multiples of 2^-6
            held[name] = (payload, gradients, gradients / scenario.dtype.type(ranks))
        return held[name][2]

    result = collective_run(scenario, setup, settings, bucket.nbytes, inputs, faults=faults)
    payload, gradients, averaged = held[result.algorithm]
    offsets = np.cumsum([0, *(tensors[t].numel for t in bucket.tensors)])
    views = [payload.view(Span(int(a), int(b))) for a, b in itertools.pairwise(offsets)]
    check.bucket(gradients, averaged, views, payload.exact)
    return result
