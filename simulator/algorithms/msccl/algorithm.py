"""An MSCCL schedule as an algorithm: every rank runs its GPU's threadblocks at once, each a
thread of its program, and each step becomes the communicator's verbs.

========  ==================================================================================
step      the rank's program (on the threadblock's channel; spans are the step's chunks)
========  ==================================================================================
``s``     ``send(send_peer, src)``
``r``     ``recv(recv_peer, into=dst, COPY)``
``rcs``   ``recv(recv_peer, into=dst, COPY)``, then ``send(send_peer, dst)``
``rrc``   ``copy(dst, src)`` unless src is dst, then ``recv(recv_peer, into=dst, REDUCE)``
``rrcs``  as ``rrc``, then ``send(send_peer, dst)``
``rrs``   ``copy(temp, src)``, ``recv(recv_peer, into=temp, REDUCE)``, ``send(send_peer, temp)``
``cpy``   ``copy(dst, src)``
``re``    ``reduce(dst, src)``
``nop``   nothing
========  ==================================================================================

A step with ``depid`` ≥ 0 first waits (``comm.wait``) for the flag that step ``deps`` of
threadblock ``depid`` signals (``comm.signal``) when done, one flag per dependency. A receive
that reduces costs the GPU's reduction as every algorithm's does, a copy nothing.

What the model leaves out: the runtime streams every chunk through the schedule in slices of
its protocol's size, looping over the whole schedule per slice; here the schedule runs once on
whole chunks (the scenario's ``piece_size`` does not apply). Consecutive ``re`` steps into one
chunk, which the runtime fuses into one pass, are one reduction each. The XML's ``proto`` is not
applied: under ``execution: nccl`` the protocol is NCCL's pick for point-to-point (Ring)
kernels, or the scenario's ``protocol``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from simulator.algorithms.algorithm import Algorithm
from simulator.algorithms.comm import COPY, REDUCE, Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.msccl import replay
from simulator.algorithms.msccl.ir import Gpu, Kind, MscclSchedule, Step, Threadblock
from simulator.algorithms.msccl.layout import Layout
from simulator.algorithms.msccl.order import Node, matched, step_at, step_order
from simulator.errors import AlgorithmError
from simulator.model.machine import Machine
from simulator.model.reduction import ReduceOp
from simulator.model.span import Span

Spans = Callable[[int, int], Span]
"""A rank's buffer: chunk position, count of chunks → the span they cover."""


@dataclass(frozen=True)
class _Timed:
    """A step as the closed form walks it: the steps it waits for, and what it costs."""

    node: Node
    before: Node | None
    depends: Node | None
    kind: Kind
    count: int
    message: Node | None
    """The send whose message it takes."""
    sends_to: int | None
    channel: int


class Msccl(Algorithm):
    """An MSCCL schedule read from an XML file (:mod:`simulator.scenario.msccl`), named as the
    scenario names it (``msccl:path/to/algo.xml``).

    T = the longest chain of steps, each starting when the step before it in its threadblock
    and the step it depends on are done, a receive when its message has arrived too, where a
    message posted at t arrives at max(t + alpha, the end of the message before it on its
    connection) + c·beta', and a reducing step then adds g = launch + c·gamma (c: its bytes,
    alpha: its route's latency). beta' = max over the route's links of n_l / bandwidth_l, n_l
    the schedule's connections routed over link l: each message is charged the least share
    max-min fairness gives it were every connection crossing its links busy at once (as
    ``direct``'s closed form charges its steps). A bound of neither kind in general: links
    whose connections do not overlap in time cost less, and reductions queueing on one GPU
    (which the chain leaves out) more. Exact where each link's connections carry their
    messages together and a rank's reductions are ordered by the schedule: the shipped
    all-pairs schedule on ``switch`` and ``fully_connected``, the two-level ring on two DGX
    hosts (``tests/test_msccl.py``). No ``exact_on`` claim: a schedule is written for one
    machine, and the contract tests run the registry's algorithms on many.
    """

    name = "msccl"
    rail_aware = True  # the schedule places its traffic on channels and peers itself

    def __init__(self, schedule: MscclSchedule, name: str) -> None:
        # name and collective are the registry's class constants elsewhere; here the file's
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "collective", schedule.collective)
        self.msccl = schedule
        self.layout = Layout.of(schedule)
        self.flags = {gpu.id: _flags(gpu) for gpu in schedule.gpus}
        self.timed = _timed(schedule)

    def unsupported(self, machine: Machine) -> str | None:
        schedule = self.msccl
        if machine.ranks != schedule.ngpus:
            return (f"{schedule.file}: line {schedule.line}: <algo ngpus=\"{schedule.ngpus}\">: "
                    f"expected ngpus to be the topology's {machine.ranks} ranks")
        return None

    def whole_chunks(self, ranks: int) -> int:
        return self.msccl.chunks

    def workspace_chunks(self) -> int:
        return self.layout.total - self.layout.chunks

    def explain(self, rank: int, chunk: int, op: ReduceOp) -> str | None:
        return replay.explain(self.msccl, rank, chunk, op)

    def program(self, comm: Comm) -> Program:
        layout, schedule = self.layout, self.msccl
        if comm.buffer.count % layout.total:
            raise AlgorithmError(f"{self.name}: a buffer of {comm.buffer.count} elements is no "
                                 f"whole number of the schedule's {layout.total} chunks "
                                 "(workspace included)")
        chunks = comm.buffer.split(layout.total)

        def spans(at: int, count: int) -> Span:
            return Span(chunks[at].start, chunks[at + count - 1].stop)

        gpu = schedule.gpu(comm.rank)
        if layout.input_copy is not None:  # out of place: the input apart from the output
            yield comm.copy(spans(layout.input_copy, schedule.input_chunks),
                            spans(layout.input_at(schedule, comm.rank), schedule.input_chunks))
        threads = [self._threadblock(comm, gpu, tb, spans) for tb in gpu.threadblocks
                   if tb.steps]
        if len(threads) == 1:
            yield from threads[0]
        elif threads:
            yield comm.parallel(*threads)

    def _threadblock(self, comm: Comm, gpu: Gpu, tb: Threadblock, spans: Spans) -> Program:
        """One threadblock's steps in order, on its channel, waiting for and raising flags."""
        link = comm.on_channel(tb.channel)
        waits, signals = self.flags[gpu.id]
        for position, step in enumerate(tb.steps):
            label = f"tb {tb.id} step {position} {step.kind.value}"
            flag = waits.get((tb.id, position))
            if flag is not None and step.depends is not None:
                yield comm.wait(flag, f"tb {tb.id} step {position} waits for tb "
                                      f"{step.depends[0]} step {step.depends[1]}")
            yield from self._step(comm, link, gpu, tb, step, spans, label)
            for flag in signals.get((tb.id, position), ()):
                comm.signal(flag, label)

    def _step(self, comm: Comm, link: Comm, gpu: Gpu, tb: Threadblock, step: Step,
              spans: Spans, label: str) -> Program:
        """One step as the module's table says."""
        kind = step.kind
        if kind is Kind.NOP:
            return
        place = self.layout.place
        src = spans(place(self.msccl, comm.rank, step.src), step.count)
        dst = spans(place(self.msccl, comm.rank, step.dst), step.count)
        if kind is Kind.SEND:
            link.send(tb.send, src, label)
        elif kind is Kind.COPY:
            yield comm.copy(dst, src)
        elif kind is Kind.REDUCE:
            yield comm.reduce(dst, src)
        elif kind in (Kind.RECV, Kind.RECV_COPY_SEND):
            yield link.recv(tb.recv, into=dst, combine=COPY, label=label)
        else:  # receives and reduces: into a temporary chunk (rrs) or dst
            into = (spans(self.layout.temps[(gpu.id, tb.id)], step.count)
                    if kind is Kind.RECV_REDUCE_SEND else dst)
            if into != src:
                yield comm.copy(into, src)
            yield link.recv(tb.recv, into=into, combine=REDUCE, label=label)
            dst = into
        if kind.receives and kind.sends:
            link.send(tb.send, dst, label)

    def model_s(self, cost: CostInputs, count: int) -> float:
        chunk_bytes = cost.nbytes(count // self.msccl.chunks)
        pairs = _shared(cost, {(step.node[0], step.sends_to, step.channel) for step in self.timed
                               if step.sends_to is not None})
        done: dict[Node, float] = {}
        arrives: dict[Node, float] = {}
        injected: dict[tuple[int, int, int], float] = {}
        for step in self.timed:
            nbytes = step.count * chunk_bytes
            t = max(done[step.before] if step.before else 0.0,
                    done[step.depends] if step.depends else 0.0)
            if step.message is not None:
                t = max(t, arrives[step.message])
            if step.kind in (Kind.RECV_REDUCE_SEND, Kind.RECV_REDUCE_COPY,
                             Kind.RECV_REDUCE_COPY_SEND, Kind.REDUCE):
                t += cost.reduce_s(nbytes)
            if step.sends_to is not None:
                pair = (step.node[0], step.sends_to)
                alpha, beta = pairs[pair]
                connection = (*pair, step.channel)
                start = max(t + alpha, injected.get(connection, 0.0))
                arrives[step.node] = injected[connection] = start + nbytes * beta
            done[step.node] = t
        return max(done.values(), default=0.0)


def _shared(cost: CostInputs, connections: set[tuple[int, int, int]]
            ) -> dict[tuple[int, int], tuple[float, float]]:
    """Alpha and beta' of each rank pair the schedule sends on: beta' = max over the links of
    its route of (the schedule's connections routed over the link) / bandwidth, the least share
    of a link max-min fairness gives a flow when every connection crossing it carries one."""
    machine = cost.machine
    crossing: dict[object, int] = {}
    for a, b, _ in connections:
        for link in machine.route(a, b).links:
            crossing[link] = crossing.get(link, 0) + 1
    capacity = machine.routing.capacity_Bps
    found = {}
    for a, b, _ in connections:
        route = machine.route(a, b)
        found[(a, b)] = (route.latency_s, max((crossing[link] / capacity(link)
                                               for link in route.links), default=0.0))
    return found


def _flags(gpu: Gpu) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], list[int]]]:
    """A GPU's flags, one per dependency on another threadblock: the flag each waiting step
    (threadblock id, position) waits for, and the flags each step raises when done."""
    waits: dict[tuple[int, int], int] = {}
    signals: dict[tuple[int, int], list[int]] = {}
    for tb in gpu.threadblocks:
        for position, step in enumerate(tb.steps):
            if step.depends is not None and step.depends[0] != tb.id:  # its own: in order
                waits[(tb.id, position)] = len(waits)
                signals.setdefault(step.depends, []).append(waits[(tb.id, position)])
    return waits, signals


def _timed(schedule: MscclSchedule) -> tuple[_Timed, ...]:
    """Every step in dependency order, as the closed form walks it."""
    ordered, stuck = step_order(schedule)
    if stuck:
        raise AlgorithmError(f"{schedule.file}: steps wait for each other in a circle")
    taken = matched(schedule)
    timed = []
    for node in ordered:
        gpu, tb_id, position = node
        step = step_at(schedule, node)
        tb = schedule.gpu(gpu).threadblock(tb_id)
        assert tb is not None
        timed.append(_Timed(node, (gpu, tb_id, position - 1) if position else None,
                            (gpu, *step.depends) if step.depends else None, step.kind,
                            step.count, taken.get(node) if step.kind.receives else None,
                            tb.send if step.kind.sends else None, tb.channel))
    return tuple(timed)
