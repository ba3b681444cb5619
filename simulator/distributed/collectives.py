"""How the ranks' matched calls become simulated collectives and messages, and what a run gives
back: the scenario and algorithms :func:`~simulator.dist.spawn`'s arguments name, one
:func:`simulator.plan.plan_point` and :func:`simulator.runner.run_plan` per collective with
every rank's row as its data, the messages on one fabric for the whole run
(:class:`simulator.engine.messages.Network`), and a :class:`CallRecord` of each (start, time,
algorithm, protocol, verified)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

import simulator.limits as limits
from simulator.algorithms.registry import REGISTRY
from simulator.distributed.p2p import Op
from simulator.distributed.rendezvous import SOURCE, Call
from simulator.distributed.tensors import write
from simulator.engine.messages import Message, Network
from simulator.engine.plan import PointPlan
from simulator.errors import InputError, Problem
from simulator.model.collective import ROOT, Collective
from simulator.model.execution import Execution
from simulator.model.nccl import Protocol
from simulator.model.reduction import ReduceOp
from simulator.output.outlook import Outlook, Upcoming
from simulator.plan import Setup, nccl_runs, plan_point, prepare, wall_estimate_s
from simulator.runner import run_plan
from simulator.scenario.fields import choice_problem
from simulator.scenario.parse import scenario_from_dict
from simulator.scenario.spec import Scenario, TopologySpec

NOTHING = "none"
"""The algorithm a record of 0-element tensors names: none ran, as NCCL runs none for a count
of 0 (it returns at once), so no time is taken and nothing is verified."""

DEFAULT_ALGORITHMS = {Collective.ALLTOALL: "direct"}
"""The algorithm a collective runs where ``algorithm`` names none and NCCL's tuner does not
choose (ring for the others): NCCL runs an all-to-all as one send and one receive to every
peer inside a group (nccl-tests ``src/alltoall.cu``), all at once: ``direct``."""

MESSAGE = "p2p"
"""The algorithm a message's record names: one transfer from its sender to its receiver."""

DEFAULT_BANDWIDTH, DEFAULT_LATENCY = "25GB/s", "1us"
"""The default topology's links: a 200 Gb/s NIC per rank (25 GB/s) and 1 us per hop."""


@dataclass(frozen=True)
class CallRecord:
    """One collective or message as simulated: its place in the run (``index`` from 0), the
    function the ranks called (``"send/recv"``, ``"isend/irecv"``, ... for a message: the
    sender's, then the receiver's), the model's collective (None for a message), its size as
    nccl-tests counts it (each rank's whole buffer: the gathered output of an all_gather, the
    input of a reduce_scatter; a message's bytes), the algorithm (``"p2p"`` for a message) and
    NCCL protocol (None on the ideal wire and for messages) that ran it, its simulated time,
    and whether every rank's result matched numpy's, NaN for NaN (a message: whether the
    receiver's tensor holds the sender's bytes). ``start_s`` is when it started on the run's
    clock (a collective: when the last rank called it; a message: when both sides had posted);
    a message names its ``src``, ``dst`` and ``tag``. Tensors of 0 elements move nothing:
    algorithm ``"none"``, time 0 and verified None."""

    index: int
    name: str
    collective: Collective | None
    size_bytes: int
    algorithm: str
    protocol: str | None
    time_s: float
    verified: bool | None
    start_s: float = 0.0
    src: int | None = None
    dst: int | None = None
    tag: int | None = None


@dataclass(frozen=True)
class SpawnResult:
    """What :func:`~simulator.dist.spawn` gives back: each rank's return value (by rank), every
    collective and message, and each rank's clock when it returned (s)."""

    returns: tuple[Any, ...]
    calls: tuple[CallRecord, ...]
    clocks: tuple[float, ...] = ()

    @property
    def time_s(self) -> float:
        """The run's time: when the last rank returned or the last message arrived (compute
        free). With collectives only, their times one after another: their sum."""
        return max([*self.clocks, *(call.start_s + call.time_s for call in self.calls)],
                   default=0.0)


@dataclass
class Simulation:
    """A run's collectives and messages on its topology: :meth:`simulate` runs each set of
    matched calls and keeps its record, in order; the topology is prepared once per dtype.
    :meth:`launch` starts matched sends and receives on the run's network, :meth:`advance` runs
    it to the next arrival and delivers and records the messages arriving then."""

    scenario: Scenario
    algorithms: Mapping[Collective, str]
    records: list[CallRecord] = field(default_factory=list)
    setups: dict[np.dtype[Any], Setup] = field(default_factory=dict)
    network: Network | None = None
    """The messages' network, built at the first message."""
    flying: dict[int, tuple[Op, Op, float]] = field(default_factory=dict)
    """The messages in flight by their network number: send, receive and start (s)."""
    proxy_elements: int | None = None
    """Elements per rank above which a collective's schedule runs on a proxy payload of this
    many, as ``run`` does, and the ranks' tensors get numpy's outcome (:func:`numpy_outcome`);
    None: every collective moves and reduces the whole tensors."""

    def simulate(self, calls: list[Call], start_s: float) -> float:
        """Simulate the collective with every rank's row (``calls`` by rank), write each rank's
        result back and record the call, started at ``start_s``; its time."""
        record = replace(self._record(calls), start_s=start_s)
        self.records.append(record)
        return record.time_s

    @property
    def now(self) -> float:
        """How far the messages' network has run (s): no message still to come starts before."""
        return 0.0 if self.network is None else self.network.now

    @property
    def in_flight(self) -> bool:
        """Whether a message launched has not arrived yet."""
        return self.network is not None and self.network.in_flight

    def launch(self, pairs: list[tuple[Op, Op]]) -> None:
        """Start matched (send, receive) pairs on the network, each when both sides had posted
        (none before :attr:`now`), in the order of their starts and each sender's posts (a
        pair's connection injects in that order)."""
        if self.network is None:
            self.network = Network(self._setup(np.dtype(np.float32)).machine)  # any dtype's
        for send, recv in sorted(pairs, key=lambda pair: (max(pair[0].posted_s, pair[1].posted_s),
                                                          pair[0].rank, pair[0].seq)):
            start = max(send.posted_s, recv.posted_s)
            number = self.network.add(Message(send.rank, recv.rank, send.view.nbytes, start))
            self.flying[number] = (send, recv, start)

    def advance(self) -> list[tuple[Op, Op]]:
        """Run the network to the next arrival and deliver what arrives then: copy each send's
        data into its receive's tensor, set both ops' arrival and partner, record the message;
        the pairs delivered."""
        assert self.network is not None
        delivered = []
        arrived = [(self.flying.pop(number), end) for number, end in self.network.advance()]
        # those arriving at one instant by start, then in each sender's posting order
        for (send, recv, start), end in sorted(arrived, key=lambda each: (each[0][2],
                                                                          each[0][0].rank,
                                                                          each[0][0].seq)):
            assert send.data is not None
            write(recv.view, send.data)
            send.partner, recv.partner = recv, send
            send.end_s = recv.end_s = end
            size_bytes = send.view.nbytes
            self.records.append(CallRecord(
                len(self.records), f"{send.name}/{recv.name}", None, size_bytes,
                MESSAGE if size_bytes else NOTHING, None, end - start,
                recv.view.tobytes() == send.data.tobytes() if size_bytes else None,
                start_s=start, src=send.rank, dst=recv.rank, tag=send.tag))
            send.data = None  # delivered: its copy is no longer needed
            delivered.append((send, recv))
        return delivered

    def _record(self, calls: list[Call]) -> CallRecord:
        first = calls[0]
        total = sum(call.row.nbytes for call in calls)
        if total > limits.PROXY_BUDGET_BYTES:  # the run copies every rank's tensor, whole
            raise InputError([Problem(SOURCE, first.name, (
                f"{len(calls)} ranks × {calls[0].row.nbytes} bytes is {total >> 20} MiB to move "
                f"and check, more than {limits.PROXY_BUDGET_BYTES >> 20} MiB; use smaller "
                "tensors (or a scenario with verify: false to time large sizes)"))])
        buffers = np.stack([call.row for call in calls])
        if first.collective is Collective.BROADCAST:
            buffers[ROOT] = buffers[first.root]
        index, size_bytes = len(self.records), buffers[0].nbytes
        if size_bytes == 0:  # NCCL returns at once for a count of 0: nothing moves, no time
            return CallRecord(index, first.name, first.collective, 0, NOTHING, None, 0.0, None)
        setup = self._setup(buffers.dtype)
        name, protocol = self._algorithm(first.collective, size_bytes, setup)
        scenario = replace(self.scenario, collective=first.collective, sizes=(size_bytes,),
                           dtype=buffers.dtype, reduce_op=first.op, algorithms=(name,))
        elements = buffers.shape[1]
        proxy = elements if self.proxy_elements is None else min(elements, self.proxy_elements)
        proxied = proxy < elements
        settings = replace(scenario.run, proxy_elements=proxy)
        plan = plan_point(scenario, setup, scenario.algorithm(name), size_bytes, settings,
                          protocol=protocol)
        _say_if_slow(first.name, plan)
        with np.errstate(over="ignore", invalid="ignore"):  # a user's NaN or inf, as on a GPU
            result = run_plan(plan, inputs=None if proxied else buffers)
            if proxied:  # timed at the tensors' size, checked on the proxy: numpy's outcome
                numpy_outcome(first.collective, first.op, buffers)
        for call in calls:
            call.deliver(buffers)
        return CallRecord(index, first.name, first.collective, size_bytes, result.algorithm,
                          result.protocol or None, float(result.sim_time_s),
                          None if result.verified is None else bool(result.verified))

    def _setup(self, dtype: np.dtype[Any]) -> Setup:
        if dtype not in self.setups:
            self.setups[dtype] = prepare(replace(self.scenario, dtype=dtype), select=False)
        return self.setups[dtype]

    def _algorithm(self, collective: Collective, size_bytes: int,
                   setup: Setup) -> tuple[str, Protocol | None]:
        """The algorithm (and NCCL protocol, if chosen here) that runs this collective."""
        name = self.algorithms.get(collective)
        if name is not None:
            if name not in REGISTRY[collective]:
                raise InputError([Problem(SOURCE, "algorithm", (
                    f"{name!r} has no {collective.value} (those with one: "
                    f"{', '.join(REGISTRY[collective])}); name one per collective instead, "
                    f"such as algorithm={{'allreduce': {name!r}}}"))])
            return name, None
        if self.scenario.execution is Execution.NCCL and collective is Collective.ALLREDUCE:
            pick = nccl_runs(self.scenario, setup.machine, size_bytes)  # as algorithms: auto
            if pick is None:  # no model here: NCCL's ring
                return "ring", None
            if pick.algorithm.unsupported(setup.machine) is None:
                return pick.algorithm.name, pick.protocol
        return DEFAULT_ALGORITHMS.get(collective, "ring"), None


def _say_if_slow(name: str, plan: PointPlan) -> None:
    """A warning before a collective that may take long to simulate (:meth:`Outlook.slow
    <simulator.output.outlook.Outlook.slow>`): a library prints nothing, so it says so through
    :mod:`warnings`, which Python shows on stderr once a call site by default."""
    upcoming = Upcoming(plan.algorithm.name, plan.size_bytes, plan.model_s,
                        *wall_estimate_s(plan))
    slow = Outlook(SOURCE, 1, 1, (upcoming,)).slow()
    if slow is not None:
        warnings.warn(f"{SOURCE}: {name} on {plan.machine.ranks} ranks {slow}", UserWarning,
                      stacklevel=2)


def base_scenario(world_size: int, topology: str | Mapping[str, Any] | TopologySpec | None,
                  execution: str | Execution | None) -> Scenario:
    """The scenario every call varies: the topology (checked to have world_size ranks)."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise InputError([Problem(SOURCE, "world_size", f"expected a whole number ≥ 1, got "
                                                        f"{world_size!r}")])
    if world_size > limits.MAX_DIST_RANKS:  # before any thread: the process would run out
        raise InputError([Problem(SOURCE, "world_size", (
            f"expected at most {limits.MAX_DIST_RANKS} ranks, one thread each (a process here "
            f"runs out of memory maps near 22,400 threads; simulator.limits.MAX_DIST_RANKS), "
            f"got {world_size}"))])
    if topology is None:
        topology = {"kind": "switch", "ranks": world_size, "bandwidth": DEFAULT_BANDWIDTH,
                    "latency": DEFAULT_LATENCY}
    elif isinstance(topology, str):
        topology = {"preset": topology}
    if not isinstance(topology, TopologySpec):
        topology = scenario_from_dict({"topology": topology, "sizes": [8]}, source=SOURCE).topology
    if topology.ranks != world_size:
        raise InputError([Problem(SOURCE, "topology", (
            f"expected a topology of {world_size} ranks (world_size), got {topology.label} "
            f"with {topology.ranks}; pass world_size={topology.ranks} or a topology of "
            f"{world_size} ranks"))])
    if isinstance(execution, str):
        problem = choice_problem(execution, [e.value for e in Execution], "an execution model")
        if problem:
            raise InputError([Problem(SOURCE, "execution", problem)])
        execution = Execution(execution)
    return Scenario(name="dist", topology=topology, sizes=(8,), source=SOURCE,
                    execution=execution)


def chosen_algorithms(algorithm: str | Mapping[str, str] | None) -> dict[Collective, str]:
    """``algorithm`` as a name per collective; InputError for a name no collective has."""
    if algorithm is None:
        return {}
    if isinstance(algorithm, str):
        known = sorted({name for names in REGISTRY.values() for name in names})
        problem = choice_problem(algorithm, known, "an algorithm")
        if problem:
            raise InputError([Problem(SOURCE, "algorithm", problem)])
        return {collective: algorithm for collective in Collective}
    problems, chosen = [], {}
    for key, name in algorithm.items():
        problem = choice_problem(key, [c.value for c in Collective], "a collective")
        if problem is None:
            problem = choice_problem(name, REGISTRY[Collective(key)], f"an algorithm for {key}")
            chosen[Collective(key)] = name
        if problem:
            problems.append(Problem(SOURCE, f"algorithm.{key}", problem))
    if problems:
        raise InputError(problems)
    return chosen


def numpy_outcome(collective: Collective, op: ReduceOp, buffers: np.ndarray) -> None:
    """``buffers`` (every rank's row, chunk r of each row rank r's) made what ``collective``
    leaves in them, by numpy (:meth:`~simulator.model.collective.Collective.outcome`): a
    reduction in float64 rounded once to the dtype, copies exactly; rows a collective does not
    define (a reduce's other ranks) kept. What a collective on a proxy payload gives the ranks,
    whose schedule is then checked on the proxy, not on their data."""
    ranks, elements = buffers.shape
    chunk = elements // ranks
    owned = [slice(rank * chunk, (rank + 1) * chunk) for rank in range(ranks)]
    result, mask = collective.outcome(buffers, op, owned)
    np.copyto(buffers, np.broadcast_to(result, buffers.shape), casting="unsafe", where=mask)
