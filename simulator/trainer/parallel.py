"""A training step under a parallel layout, simulated as one run: the layout's graph
(:mod:`simulator.training.traffic`), each distinct collective simulated with its data on its
communicator's machine (:mod:`simulator.trainer.costs`), and every rank's operations run
together on the one fabric (:mod:`simulator.training.execute`); then where the step's time went
(:class:`~simulator.training.results.Breakdown`).

Faults (the step is then run rank by rank, not folded, since its ranks no longer run alike): a
straggler's rank starts the step ``delay`` late; a slow GPU reduces slowly in every collective
it is a member of; a link fault strikes the collectives running when it does, timed from the
step's start as a DDP step times them (:func:`~simulator.model.faults.seen_by_bucket`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from simulator.errors import InputError, Problem
from simulator.model.faults import Fault, Straggler, seen_by_bucket
from simulator.plan import Setup
from simulator.scenario.spec import Scenario
from simulator.settings import RunSettings
from simulator.trainer.buckets import check_layout_step, ddp_buckets
from simulator.trainer.costs import StepCosts
from simulator.training.compute import backward_s, forward_s, optimizer_s
from simulator.training.ddp_graph import ddp_plan
from simulator.training.execute import Demand, Execution, Span, execute
from simulator.training.graph import Op, OpKind, Program, StepGraph
from simulator.training.layout import Parallelism
from simulator.training.memory import layout_memory
from simulator.training.results import Breakdown, ParallelRun, Step
from simulator.training.spec import TrainingSpec
from simulator.training.timeline import Interval, Timeline
from simulator.training.traffic import StepInputs, StepPlan, step_plan

EXPOSED = ("tp", "pp", "dp", "ep")
"""The communication streams a breakdown charges, in the order it charges overlapping ones."""


def simulate_parallel_step(scenario: Scenario, setup: Setup, settings: RunSettings,
                           spec: TrainingSpec, layout: Parallelism,
                           faults: tuple[Fault, ...]) -> Step:
    """One step of ``spec``'s model under ``layout`` on ``setup``'s machine, with ``faults``."""
    plan = _plan(scenario, spec, layout, folded=not faults)  # faulted ranks run unlike the rest
    return run_plan_graph(scenario, setup, settings, spec, plan, faults)


def step_graph(scenario: Scenario, spec: TrainingSpec, layout: Parallelism) -> StepGraph:
    """The step of ``spec`` under ``layout`` as a graph of every rank (ranks and communicators
    named globally): what :func:`simulator.output.chakra.write_chakra` writes as Chakra
    execution traces, and :func:`simulate_traced_step` runs back."""
    return _plan(scenario, spec, layout, folded=False).graph


def simulate_traced_step(scenario: Scenario, setup: Setup, settings: RunSettings,
                         spec: TrainingSpec, graph: StepGraph) -> Step:
    """The step a Chakra trace's ``graph`` gives (one program per rank of the machine; its
    communicators as the trace declares them) on ``setup``'s machine, with the scenario's
    faults; InputError if the trace's ranks are not the machine's."""
    ranks = setup.machine.ranks
    if graph.ranks != ranks:
        raise InputError([Problem(scenario.source, "training.chakra", (
            f"traces of {graph.ranks} ranks for topology {setup.topology.label} of {ranks} "
            f"GPUs: expected one trace per GPU"))])
    plan = StepPlan(graph, tuple(range(ranks)), Parallelism(dp=ranks), graph.groups,
                    folded=False)
    return run_plan_graph(scenario, setup, settings, spec, plan, scenario.faults)


def run_plan_graph(scenario: Scenario, setup: Setup, settings: RunSettings, spec: TrainingSpec,
                   plan: StepPlan, faults: tuple[Fault, ...]) -> Step:
    """``plan``'s graph executed on ``setup``'s machine with ``faults`` (a straggler's rank
    starts late; the others strike its collectives as they run), and where its time went."""
    layout = plan.layout
    late = {f.rank: f.delay_s for f in faults if isinstance(f, Straggler)}
    if late:
        plan = replace(plan, graph=_late(plan.graph, late))
    costs = StepCosts(scenario, setup, settings, gpu=spec.compute.name,
                      sm_share=layout.sm_contention)
    others = tuple(f for f in faults if not isinstance(f, Straggler))

    def demand(op: Op, units: tuple[int, ...], start_s: float) -> Demand:
        if op.kind is OpKind.COLLECTIVE:
            ranks = plan.members(op.group)
        else:
            ranks = tuple(plan.unit_ranks[unit] for unit in units)
        seen = seen_by_bucket(others, start_s, start_s) if others else ()
        return costs.demand(op, ranks, plan.copies(ranks), seen)

    execution = execute(plan.graph, costs.capacity, demand)
    unit = _busiest(execution, plan.graph.ranks)
    mfu = spec.mfu(layout.dp, layout.gpus, execution.step_s) if spec.chakra is None else math.nan
    breakdown = _breakdown(execution, unit, mfu)
    mine = [span for span in execution.spans if span.rank == unit]
    compute = [Interval(s.name, s.start_s, s.end_s) for s in mine if s.kind is OpKind.COMPUTE]
    talk = [Interval(s.name, s.start_s, s.end_s) for s in mine if s.kind is not OpKind.COMPUTE]
    runs = costs.runs
    verified = (all(run.result.verified for run in runs) if settings.verify and runs else None)
    return Step(
        scenario=scenario.name, topology=setup.topology.label, ranks=setup.machine.ranks,
        model=spec.network.name, batch=spec.batch, bucket_cap=spec.cap,
        first_bucket=spec.first_limit() if layout.plain else spec.cap, overlap=spec.overlap,
        forward_s=_sum(mine, "forward"), backward_s=_sum(mine, "backward"),
        optimizer_s=_sum(mine, "optimizer"),
        communication_s=sum(i.duration_s for i in talk), exposed_s=execution.step_s
        - breakdown.compute_s, step_s=execution.step_s, buckets=(),
        timeline=Timeline(tuple(compute), tuple(talk), ()), verified=verified,
        identical=(all(bool(run.result.ranks_identical) for run in runs)
                   if verified is not None else None),
        max_abs_error=max((run.result.max_abs_error for run in runs), default=math.nan),
        checked_tensors=0, whole=None, breakdown=breakdown,
        parallel=ParallelRun(layout, plan.graph, execution, plan.unit_ranks, tuple(
            (run.collective.value, run.nbytes, run.group, run.result.algorithm,
             run.result.protocol, float(run.result.sim_time_s), run.result.verified)
            for run in runs), _memory(spec, layout), spec.compute.memory))


def _memory(spec: TrainingSpec, layout: Parallelism) -> int | None:
    """The busiest GPU's bytes under ``layout`` (None: no transformer shape to count)."""
    shape = spec.network.shape
    if shape is None:
        return None
    return layout_memory(shape, layout, microbatch=spec.batch // layout.microbatches,
                         optimizer=spec.optimizer).total


def _plan(scenario: Scenario, spec: TrainingSpec, layout: Parallelism, *,
          folded: bool) -> StepPlan:
    """The step's graph: DDP's, from the network's layers, for plain data parallelism; else the
    layout's, from the model's transformer shape."""
    if layout.plain:
        network, compute = spec.network, spec.compute
        layers = [(layer.name, forward_s(layer, spec.batch, compute.flops),
                   backward_s(layer, spec.batch, compute.flops)) for layer in network.layers]
        layer_of = [i for i, layer in enumerate(network.layers) for _ in layer.tensors]
        buckets = ddp_buckets(scenario, spec)
        update = spec.optimizer_s if spec.optimizer_s is not None else optimizer_s(
            network.numel, spec.optimizer, compute.memory_bandwidth)
        return ddp_plan(layers, layer_of, buckets, update, layout, overlap=spec.overlap,
                        folded=folded)
    shape = spec.network.shape
    assert shape is not None  # the reader refuses model parallelism without a shape
    inputs = StepInputs(shape, spec.batch, spec.compute.flops, spec.compute.memory_bandwidth,
                        spec.optimizer, scenario.dtype.itemsize, spec.cap, spec.optimizer_s)
    plan = step_plan(inputs, layout, folded=folded)
    check_layout_step(scenario, plan.graph)
    return plan


def _late(graph: StepGraph, late: dict[int, float]) -> StepGraph:
    """``graph`` (one unit per rank) with each late rank's first operations waiting for a
    compute of its delay: the rank enters the step that late."""
    programs = []
    for program in graph.programs:
        delay = late.get(program.rank)
        if delay is None:
            programs.append(program)
            continue
        start = max((op.id for op in program.ops), default=-1) + 1
        wait = Op(start, "late start", OpKind.COMPUTE, duration_s=delay, stream="late")
        ops = [wait] + [replace(op, deps=op.deps or (start,)) for op in program.ops]
        programs.append(Program(program.rank, tuple(ops)))
    return StepGraph(tuple(programs), graph.groups)


def _sum(spans: Sequence[Span], prefix: str) -> float:
    """Summed time of the computes whose name starts with ``prefix``."""
    return sum(s.end_s - s.start_s for s in spans
               if s.kind is OpKind.COMPUTE and s.name.startswith(prefix))


def _busiest(execution: Execution, units: int) -> int:
    """The unit computing longest (the lowest on a tie)."""
    busy = [0.0] * units
    for span in execution.spans:
        if span.kind is OpKind.COMPUTE and span.stream != "late":
            busy[span.rank] += span.end_s - span.start_s
    return max(range(units), key=lambda unit: (busy[unit], -unit))


def _kind(stream: str) -> str:
    """What a communication stream's time counts as: a parallelism of :data:`EXPOSED` (a
    communicator named ``tp:...`` counts as TP, and so on), any other communicator of a trace
    as DP (what a data-parallel trace holds)."""
    if stream in EXPOSED:
        return stream
    head = stream.split(":")[0]
    return head if head in EXPOSED else "dp"


def _breakdown(execution: Execution, unit: int, mfu: float) -> Breakdown:
    """Unit ``unit``'s step cut at every span's edge: each piece is compute if a compute runs,
    else the first of :data:`EXPOSED` whose communication runs, else bubble (a sweep over the
    edges, counting what runs)."""
    changes: list[tuple[float, int, str]] = []
    for s in execution.spans:
        if s.rank == unit and s.end_s > s.start_s and s.stream != "late":
            kind = "compute" if s.kind is OpKind.COMPUTE else _kind(s.stream)
            changes += [(s.start_s, 1, kind), (s.end_s, -1, kind)]
    changes.sort()
    running = dict.fromkeys(("compute", *EXPOSED), 0)
    charged = dict.fromkeys(("compute", *EXPOSED, "bubble"), 0.0)
    at = 0.0
    for when, change, kind in [*changes, (execution.step_s, 0, "compute")]:
        if when > at:
            what = next((k for k in ("compute", *EXPOSED) if running[k]), "bubble")
            charged[what] += when - at
            at = when
        running[kind] += change
    return Breakdown(charged["compute"], charged["tp"], charged["pp"], charged["dp"],
                     charged["ep"], charged["bubble"], mfu)
