"""A step's execution graph run on one fabric: every rank's operations start when what they wait
for has ended, and the communications of every communicator that overlap in time share the links
they cross.

Each communication comes with its **isolated** time (what it takes alone on the fabric, from the
event simulation of its own program and data, :mod:`simulator.trainer.costs`) and its
**demand**: the bytes per second it needs on each link to keep that pace. While several run at
once, their pace is shared by **max-min fairness over the links** (Bertsekas & Gallager, *Data
Networks*, §6.5.2, the rule of :func:`simulator.engine.kernel.max_min_rates`, here weighted by
each one's demand): all progress at the same fraction of their isolated pace until a link fills,
those crossing it stay at that fraction, the others rise on; none beyond its isolated pace. A
communication's fixed latency (its first byte's time) is not stretched; the rest is. So two
communications on disjoint links take their isolated times, and two on one link that each fill
it take twice their transfer time, as the network kernel shares one link between two flows.

**The kernels' SMs.** An NCCL kernel holds one thread block per channel while it runs (its grid
is the plan's channel count: ``src/enqueue.cc``, ``ncclLaunchKernel``), so a compute running
beside it on that GPU runs at ``1 − Σ share`` of its rate, each running kernel's ``share`` being
its channels over the GPU's SMs (:mod:`simulator.trainer.costs`), held at least at
:data:`MIN_COMPUTE_RATE`.

Everything else is the graph's: an operation starts when its dependencies on its rank have
ended; a collective starts when the last member reached it; a message when both its sender and
its receiver have posted (NCCL's point-to-point is a rendezvous); the step ends when the last
operation does. An operation never slowed ends at exactly its start plus its isolated time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from simulator.errors import quoted
from simulator.training.graph import Op, OpKind, StepGraph

MIN_COMPUTE_RATE = 0.1
"""The least share of its rate a compute keeps beside running kernels: a guard, so that kernels
whose channels add up to the GPU's SMs slow compute to a crawl instead of stopping it (an
assumption, not a measurement)."""

EPSILON = 1e-12
"""Work (in seconds at the isolated pace) below which an operation counts as done: rounding."""


@dataclass(frozen=True)
class Demand:
    """What one communication needs: its isolated ``time_s``, the ``latency_s`` of it no
    sharing stretches, the links it crosses (indices into the capacities) and the bytes per
    second it needs on each to keep its isolated pace, and the share of each member GPU's SMs
    its kernel holds while it runs."""

    time_s: float
    latency_s: float
    links: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    rates: np.ndarray = field(default_factory=lambda: np.zeros(0))
    sm_share: float = 0.0


@dataclass(frozen=True)
class Span:
    """One operation as it ran: its rank, id, name, kind and stream, when it started and ended,
    and its isolated time (a compute's duration; what a communication takes alone)."""

    rank: int
    op: int
    name: str
    kind: OpKind
    stream: str
    start_s: float
    end_s: float
    isolated_s: float


@dataclass(frozen=True)
class Execution:
    """A step as it ran: every operation's span (rank by rank, in issue order) and the step's
    time (the last end)."""

    spans: tuple[Span, ...]
    step_s: float


CostOf = Callable[[Op, tuple[int, ...], float], Demand]
"""A communication's demand given one of its operations, the ranks it spans (a collective's
members in group order; a message's sender then receiver) and when it starts."""


class _Job:
    """One running thing: a compute on one rank, or a communication over its ranks."""

    __slots__ = (
        "demand",
        "latency",
        "ops",
        "pure",
        "ranks",
        "rate",
        "start",
        "work",
    )

    def __init__(self, ops: list[tuple[int, Op]], start: float, work: float, latency: float,
                 demand: Demand | None) -> None:
        self.ops, self.start, self.work, self.latency, self.demand = ops, start, work, latency, demand
        self.ranks = tuple(rank for rank, _ in ops)
        self.rate, self.pure = 1.0, True


def execute(graph: StepGraph, capacity: np.ndarray, cost: CostOf) -> Execution:
    """Run ``graph`` on links of ``capacity`` (bytes/s each), each communication's demand from
    ``cost``; ValueError if it cannot end (a dependency cycle through matched operations, a
    collective some member never reaches, a message never matched)."""
    return _Run(graph, capacity, cost).run()


class _Run:
    """The state of one execution (module docstring)."""

    def __init__(self, graph: StepGraph, capacity: np.ndarray, cost: CostOf) -> None:
        self.graph, self.capacity, self.cost = graph, capacity, cost
        self.now = 0.0
        self.waiting = [dict.fromkeys((op.id for op in p.ops), 0) for p in graph.programs]
        self.dependents: list[dict[int, list[Op]]] = [defaultdict(list) for _ in graph.programs]
        for program in graph.programs:
            for op in program.ops:
                self.waiting[program.rank][op.id] = len(set(op.deps))
                for dep in set(op.deps):
                    self.dependents[program.rank][dep].append(op)
        self.issued: dict[tuple[object, ...], int] = defaultdict(int)
        self.arrived: dict[tuple[object, ...], list[tuple[int, Op, float]]] = defaultdict(list)
        self.ends: list[dict[int, float]] = [{} for _ in graph.programs]
        self.active: list[_Job] = []
        self.spans: dict[tuple[int, int], Span] = {}
        self.kernels: dict[int, float] = defaultdict(float)
        self.computing: dict[int, list[_Job]] = defaultdict(list)
        self.flows_moved = False  # a communication began or ended its transfer: share again
        self.kernels_moved: set[int] = set()  # ranks whose kernels changed: slow computes again

    def run(self) -> Execution:
        """Start what is ready, then move from end to end until nothing runs."""
        for program in self.graph.programs:
            for op in program.ops:
                if self.waiting[program.rank][op.id] == 0:
                    self._ready(program.rank, op, 0.0)
        while self.active:
            self._share()
            step = min(map(self._until, self.active))
            self._advance(step)
        total = sum(len(program.ops) for program in self.graph.programs)
        if len(self.spans) < total:
            raise ValueError(self._stuck())
        spans = tuple(self.spans[(p.rank, op.id)] for p in self.graph.programs for op in p.ops)
        return Execution(spans, max((span.end_s for span in spans), default=0.0))

    def _ready(self, rank: int, op: Op, at: float) -> None:
        """``op`` on ``rank`` may start at ``at`` (its last dependency's end): a compute does;
        a communication once matched, when the last of its ranks is ready."""
        if op.kind is OpKind.COMPUTE:
            self._start([(rank, op)], op.duration_s, 0.0, None, at)
            return
        if op.kind is OpKind.COLLECTIVE:
            members = self.graph.group(op.group).ranks
            key: tuple[object, ...] = ("coll", op.group, rank)
            index = self.issued[key]
            self.issued[key] += 1
            meeting: tuple[object, ...] = ("coll", op.group, index)
            need, ranks = len(members), members
        else:
            src, dst = (rank, op.peer) if op.kind is OpKind.SEND else (op.peer, rank)
            key = (op.kind, src, dst, op.tag)
            index = self.issued[key]
            self.issued[key] += 1
            meeting = ("p2p", src, dst, op.tag, index)
            need, ranks = 2, (src, dst)
        self.arrived[meeting].append((rank, op, at))
        if len(self.arrived[meeting]) == need:
            met = sorted(self.arrived.pop(meeting), key=lambda entry: ranks.index(entry[0]))
            start = max(entry[2] for entry in met)
            demand = self.cost(op, ranks, start)
            self._start([(r, o) for r, o, _ in met], demand.time_s - demand.latency_s,
                        demand.latency_s, demand, start)

    def _start(self, ops: list[tuple[int, Op]], work: float, latency: float,
               demand: Demand | None, start: float) -> None:
        job = _Job(ops, start, work, latency, demand)
        self.active.append(job)
        if demand is None:
            self.computing[job.ranks[0]].append(job)
            self._slow(job)
            return
        self.flows_moved = self.flows_moved or latency <= 0
        if demand.sm_share:
            for rank in job.ranks:
                self.kernels[rank] += demand.sm_share
            self.kernels_moved.update(job.ranks)

    def _share(self) -> None:
        """Set the rates that what began or ended since changed: the communications' by
        weighted max-min over the links, the computes' on GPUs whose kernels changed by the SMs
        those hold."""
        if self.flows_moved:
            self.flows_moved = False
            flowing = [job for job in self.active if job.demand is not None and job.latency <= 0]
            for job, rate in zip(flowing, _fill(flowing, self.capacity), strict=True):
                self._set(job, rate)
        for rank in self.kernels_moved:
            for job in self.computing.get(rank, ()):
                self._slow(job)
        self.kernels_moved.clear()

    def _slow(self, job: _Job) -> None:
        """A compute's rate beside the kernels running on its GPU."""
        held = self.kernels.get(job.ranks[0], 0.0)
        self._set(job, max(MIN_COMPUTE_RATE, 1.0 - held) if held > 0 else 1.0)

    @staticmethod
    def _set(job: _Job, rate: float) -> None:
        job.rate = rate
        job.pure = job.pure and rate == 1.0

    @staticmethod
    def _until(job: _Job) -> float:
        """Time until ``job``'s next change: its latency's end, else its work's."""
        return job.latency if job.latency > 0 else job.work / job.rate

    def _advance(self, step: float) -> None:
        """Move every job on by ``step`` seconds, and end those it finishes."""
        self.now = self.now + step
        finished = []
        for job in self.active:
            if job.latency > 0:
                job.latency -= step
                if job.latency <= EPSILON:
                    job.latency, self.flows_moved = 0.0, True
            else:
                job.work -= step * job.rate
            if job.latency <= 0 and job.work <= EPSILON * max(1.0, job.rate):
                finished.append(job)
        if not finished:
            return
        self.active = [job for job in self.active if job not in finished]
        for job in finished:
            self._finish(job)

    def _finish(self, job: _Job) -> None:
        isolated = (job.demand.time_s if job.demand is not None
                    else job.ops[0][1].duration_s)
        end = job.start + isolated if job.pure else self.now
        if job.demand is None:
            self.computing[job.ranks[0]].remove(job)
        else:
            self.flows_moved = True
        if job.demand is not None and job.demand.sm_share:
            for rank in job.ranks:
                self.kernels[rank] -= job.demand.sm_share
                if self.kernels[rank] <= EPSILON:
                    del self.kernels[rank]
            self.kernels_moved.update(job.ranks)
        for rank, op in job.ops:
            self.spans[(rank, op.id)] = Span(rank, op.id, op.name, op.kind, op.stream, job.start,
                                             end, isolated)
            self.ends[rank][op.id] = end
        for rank, op in job.ops:
            for dependent in self.dependents[rank].get(op.id, ()):
                self.waiting[rank][dependent.id] -= 1
                if self.waiting[rank][dependent.id] == 0:
                    at = max(self.ends[rank][dep] for dep in dependent.deps)
                    self._ready(rank, dependent, at)

    def _stuck(self) -> str:
        """Why the step cannot end: the first operation that never ran, and on what it waits."""
        for program in self.graph.programs:
            for op in program.ops:
                if (program.rank, op.id) not in self.spans:
                    what = (f"communicator {quoted(op.group)}" if op.kind is OpKind.COLLECTIVE else
                            f"rank {op.peer}" if op.communicates else "its dependencies")
                    return (f"the step cannot end: rank {program.rank}'s {quoted(op.name)} (op "
                            f"{op.id}) waits forever on {what}")
        return "the step cannot end"


def _fill(jobs: list[_Job], capacity: np.ndarray) -> list[float]:
    """Each job's pace (a fraction of its isolated pace, at most 1) by max-min fairness over the
    links, weighted by each job's demand on them (module docstring): progressive filling, every
    job rising together until a link fills, those crossing it frozen at that level."""
    pace = np.ones(len(jobs))
    demands = [job.demand for job in jobs if job.demand is not None]
    if len(demands) < len(jobs):
        raise ValueError("only communications share links")
    if not demands or not any(len(d.links) for d in demands):
        return pace.tolist()
    job_of = np.repeat(np.arange(len(jobs)), [len(d.links) for d in demands])
    link_of = np.concatenate([d.links for d in demands])
    need = np.concatenate([d.rates for d in demands])
    used = np.bincount(link_of, weights=need, minlength=len(capacity))
    if np.all(used <= capacity * (1 + 1e-12)):
        return pace.tolist()  # nothing is shared beyond what the links hold
    frozen = np.zeros(len(jobs), dtype=bool)
    pace[:] = 0.0
    while not frozen.all():
        rising = ~frozen[job_of]
        load = np.bincount(link_of[~rising], weights=(pace[job_of] * need)[~rising],
                           minlength=len(capacity))
        demand = np.bincount(link_of[rising], weights=need[rising], minlength=len(capacity))
        crossed = demand > 0
        level = np.full(len(capacity), np.inf)
        level[crossed] = (capacity[crossed] - load[crossed]) / demand[crossed]
        tight = min(1.0, float(level.min()))
        if tight >= 1.0:
            pace[~frozen] = 1.0
            break
        full = np.flatnonzero(level <= tight * (1 + 1e-12))
        hit = np.unique(job_of[rising & np.isin(link_of, full)])
        pace[hit] = max(tight, 0.0)
        frozen[hit] = True
    return pace.tolist()
