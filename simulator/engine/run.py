"""The SimPy engine: runs every rank's program on the fabric, moving and reducing real data.

Each rank is a SimPy process that steps through its algorithm's generator. Posted sends become
transfers on the :class:`~simulator.engine.fabric.Fabric` carrying a copy of the span's data; a
``recv`` waits for the matching message, then copies it in or reduces it in on the rank's GPU,
whose reducer serves one reduction at a time, first come first served (the kernel's
rule, :mod:`simulator.engine.kernel`). The run's time is
when the last rank finishes its program.

A *connection* (an ordered pair of ranks on one channel) injects one message at a time, in
posting order, as an NCCL channel's per-peer FIFO does; latencies overlap, so k back-to-back
pieces of c bytes cost ``alpha + k·c·beta`` and a d-hop store-and-forward pipeline
``d·alpha + (k+d-1)·c·beta``.
Messages on different connections run concurrently and share links max-min fairly. A rank may
run several programs at once (``comm.parallel``), each usually on its own channel.

Given a :class:`~simulator.engine.record.Recorder`, the fabric records what each link carried;
one that traces also gets a slice for every send (first byte out to arrival), receive-wait (the
receive asked for to the message's arrival), reduction on a GPU and in-switch step, labelled as
the program labelled the message (``comm.send(..., label=)``).
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Generator
from dataclasses import dataclass

import numpy as np
import simpy

from simulator.algorithms.algorithm import Algorithm
from simulator.algorithms.channels import on_channels
from simulator.algorithms.comm import (
    COPY,
    Comm,
    LocalCopy,
    LocalReduce,
    Outbox,
    Parallel,
    Program,
    Recv,
    SwitchContribution,
    SwitchResult,
)
from simulator.engine.fabric import Fabric, Holding
from simulator.engine.inswitch import InSwitchReductions
from simulator.engine.kernel import serve_next
from simulator.engine.payload import Payload
from simulator.engine.record import Recorder
from simulator.errors import AlgorithmError, Wait, deadlock
from simulator.model.machine import GpuSpec, Machine
from simulator.model.reduction import ReduceOp
from simulator.model.span import Span

_Connection = tuple[int, int, tuple[int, ...]]  # (sender, receiver, channel path)
_Key = tuple[int, int, tuple[int, ...], int]     # a connection and a message's sequence number


@dataclass(frozen=True)
class RunSpec:
    """What one run moves: the payload, the reduction operator, the scenario's pipeline
    ``piece_size`` (None: each algorithm's default), the channels the buffer is split over
    (:mod:`simulator.algorithms.channels`), the pieces the execution model streams phases
    in (``Comm.stream_bytes``), and the elements of the algorithm's workspace past the buffer
    (``Algorithm.workspace_chunks``; the executor runs such a plan on the widened buffer,
    :func:`simulator.engine.executor.run`)."""

    payload: Payload
    reduce_op: ReduceOp
    piece_bytes: int | None = None
    channels: int = 1
    stream_bytes: int | None = None
    workspace: int = 0


@dataclass(frozen=True)
class Timing:
    """What one simulated collective cost: time, and counters that explain it (``events``:
    the SimPy events the run processed, the capacity timeline's own instants and the proxies'
    rounds left out;
    ``held``: the most the engine held at once, messages in flight and flow timers on SimPy
    (:class:`~simulator.engine.fabric.Holding`), messages on the vectorised engine)."""

    time_s: float
    messages: int
    events: int
    held: int = 0


@dataclass(frozen=True)
class _Message:
    span: Span
    data: np.ndarray


@dataclass(frozen=True)
class _Deliver:
    """Callback: when a transfer ends, hand its message to the receiver's matching slot."""

    slot: simpy.Event
    message: _Message

    def __call__(self, _event: simpy.Event) -> None:
        self.slot.succeed(self.message)


class _Gpu:
    """A GPU's reducer: reducing ``n`` bytes holds it for ``launch + n / bandwidth``,
    one reduction at a time, first come, first served (:func:`~simulator.engine.kernel.serve_next`,
    the vectorised engine's rule too). A reduction that must wait resumes when the one queued
    before it ends, an event at exactly the time the rule gives."""

    def __init__(self, env: simpy.Environment, spec: GpuSpec) -> None:
        self.env = env
        self.spec = spec
        self.free_at = 0.0
        self._last_end: simpy.Event | None = None  # the end of the reduction queued last

    def reduce(self, size_bytes: float, done: Callable[[float, float], None] | None = None
               ) -> Generator[simpy.Event, object, None]:
        """Hold the reducer for the reduction; then ``done(start, end)`` if given."""
        duration = self.spec.reduce_s(size_bytes)
        if duration <= 0:
            return
        start, self.free_at = serve_next(self.free_at, self.env.now, duration)
        before, ended = self._last_end, self.env.event()
        self._last_end = ended
        if start > self.env.now:
            assert before is not None
            yield before  # ends at ``start``
        yield self.env.timeout(duration)
        ended.succeed()
        if done is not None:
            done(start, self.env.now)


class _Run:
    """One collective on one fabric: the rank processes and the messages between them."""

    def __init__(self, algorithm: Algorithm, machine: Machine, spec: RunSpec,
                 buffers: np.ndarray, recorder: Recorder | None = None,
                 limit: int | None = None) -> None:
        self.env = simpy.Environment()
        self.algorithm = algorithm
        self.placement = machine.placement
        self.holding = Holding(limit)
        self.fabric = Fabric(self.env, machine.routing, recorder, machine.capacity_events,
                             machine.outages, machine.placement, self.holding)
        self.trace = recorder if recorder is not None and recorder.trace else None
        self.gpus = [_Gpu(self.env, machine.gpu_of(rank)) for rank in range(machine.ranks)]
        self.entry = [machine.entry_of(rank) for rank in range(machine.ranks)]
        self.payload = spec.payload
        self.channels = spec.channels
        self.buffers = buffers
        self.reduce_op = spec.reduce_op
        self.in_switch = InSwitchReductions(self.env, self.fabric, machine, spec.payload,
                                            spec.reduce_op, algorithm.name)
        ranks = machine.ranks
        self.outboxes = [Outbox() for _ in range(ranks)]
        self.comms = [Comm(rank, ranks, Span(0, spec.payload.count),
                           itemsize=spec.payload.dtype.itemsize, piece_bytes=spec.piece_bytes,
                           layout=machine.layout, outbox=self.outboxes[rank],
                           stream_bytes=spec.stream_bytes)
                      for rank in range(ranks)]
        self.finished: dict[int, float] = {}
        self._waits: dict[tuple[int, object], Wait] = {}
        """What each rank waits for now (rank, the wait's key): the watchdog's words."""
        self._slots: dict[_Key, simpy.Event] = {}
        self._sent: dict[_Connection, int] = {}
        self._received: dict[_Connection, int] = {}

    def run(self) -> Timing:
        for rank in range(len(self.placement)):
            self.env.process(self._rank(rank))
        events = 0
        collecting = gc.isenabled()
        gc.disable()  # the run allocates no cycles; scanning its many live objects cost ~25%
        try:
            while True:
                try:
                    self.env.step()
                except simpy.core.EmptySchedule:
                    break
                events += 1
        finally:
            if collecting:
                gc.enable()
        self._check_complete()
        return Timing(time_s=float(max(self.finished.values(), default=0.0)),
                      messages=self.fabric.stats.transfers,
                      events=events - self.fabric.stats.capacity_steps
                      - self.fabric.stats.proxy_rounds, held=self.holding.most)

    def _rank(self, rank: int) -> Generator[simpy.Event, object, None]:
        if self.entry[rank] > 0:  # a straggler enters late
            yield self.env.timeout(self.entry[rank])
        yield from self._steps(rank, on_channels(self.algorithm, self.comms[rank], self.channels))
        self.finished[rank] = self.env.now

    def _steps(self, rank: int, program: Program) -> Generator[simpy.Event, object, None]:
        """Step through one program (or one of a rank's parallel programs)."""
        for request in program:
            self._post_sends(rank)
            if isinstance(request, Recv):
                yield from self._recv(rank, request)
            elif isinstance(request, LocalReduce):
                yield from self._local_reduce(rank, request)
            elif isinstance(request, LocalCopy):
                self._local_copy(rank, request)
            elif isinstance(request, SwitchResult):
                self._check_span(rank, request.into)
                asked = self.env.now
                wait = (rank, request)
                self._waits[wait] = Wait(rank, None, self.in_switch.taken(rank, request) + 1, "",
                                         request.into.start, request.into.stop, request.label)
                data = yield from self.in_switch.result(rank, request)
                del self._waits[wait]
                self.buffers[rank, self.payload.view(request.into)] = data
                if self.trace is not None:
                    self.trace.add_slice(f"rank {rank}", rank, "in-switch", request.label, asked,
                                         self.env.now, "switch",
                                         self.payload.nbytes(request.into))
            elif isinstance(request, Parallel):
                yield self.env.all_of([self.env.process(self._steps(rank, branch))
                                       for branch in request.programs])
            else:
                raise AlgorithmError(f"{self.algorithm.name}: rank {rank} yielded {request!r}; "
                                     "expected comm.recv(...), comm.wait(...), "
                                     "comm.reduce(...), comm.copy(...), "
                                     "comm.switch_result(...) or comm.parallel(...)")
        self._post_sends(rank)

    def _post_sends(self, rank: int) -> None:
        for send in self.outboxes[rank].take():
            self._check_span(rank, send.span)
            data = self.buffers[rank, self.payload.view(send.span)].copy()  # as it is now
            if isinstance(send, SwitchContribution):
                self.in_switch.contribute(rank, send, data)
                continue
            connection = (rank, send.peer, send.channel)
            seq = self._sent.get(connection, 0)
            self._sent[connection] = seq + 1
            if send.peer == rank:  # a flag (comm.signal): to the rank's own waiting thread, now
                self._slot((*connection, seq)).succeed(_Message(send.span, data))
                continue
            nbytes = self.payload.nbytes(send.span)
            moved = None if self.trace is None else functools.partial(
                self.trace.add_slice, f"rank {rank}", rank, "send", send.label,
                peer=f"rank {send.peer}", size_bytes=nbytes)
            transfer = self.fabric.transfer(self.placement[rank], self.placement[send.peer],
                                            nbytes, connection=connection, moved=moved,
                                            turn=send.channel)
            self.holding.take()  # its data copy and events, until it is received
            transfer.callbacks.append(_Deliver(self._slot((*connection, seq)),
                                               _Message(send.span, data)))

    def _slot(self, key: _Key) -> simpy.Event:
        if key not in self._slots:
            self._slots[key] = self.env.event()
        return self._slots[key]

    def _recv(self, rank: int, recv: Recv) -> Generator[simpy.Event, object, None]:
        self._check_span(rank, recv.into)
        connection = (recv.peer, rank, recv.channel)
        seq = self._received.get(connection, 0)
        self._received[connection] = seq + 1
        asked = self.env.now
        wait = (rank, (*connection, seq))
        self._waits[wait] = Wait(rank, recv.peer, seq + 1, ".".join(map(str, recv.channel)),
                                 recv.into.start, recv.into.stop, recv.label)
        message = yield self._slot((*connection, seq))
        self.holding.give()
        del self._waits[wait]
        assert isinstance(message, _Message)
        del self._slots[(*connection, seq)]
        if message.span.count != recv.into.count:
            raise AlgorithmError(f"{self.algorithm.name}: rank {rank} received {message.span.count} "
                                 f"elements from rank {recv.peer} into a span of {recv.into.count}")
        target = self.buffers[rank, self.payload.view(recv.into)]
        if target.shape != message.data.shape:
            raise AlgorithmError(f"{self.algorithm.name}: the proxy payload cannot represent a "
                                 f"move of {message.span} into {recv.into}; rerun with a larger "
                                 "proxy")
        done = None
        if self.trace is not None:
            nbytes = self.payload.nbytes(recv.into)
            if self.env.now > asked:
                self.trace.add_slice(f"rank {rank}", rank, "recv-wait", recv.label, asked,
                                     self.env.now, f"rank {recv.peer}", nbytes)
            done = functools.partial(self.trace.add_slice, f"rank {rank}", rank, "reduce",
                                     recv.label, peer=f"rank {recv.peer}", size_bytes=nbytes)
        if recv.combine is COPY:
            target[...] = message.data
        else:
            yield from self.gpus[rank].reduce(self.payload.nbytes(recv.into), done)
            self.reduce_op.combine(target, message.data)

    def _local_reduce(self, rank: int, local: LocalReduce) -> Generator[simpy.Event, object, None]:
        self._check_span(rank, local.into)
        self._check_span(rank, local.source)
        row = self.buffers[rank]
        into, source = row[self.payload.view(local.into)], row[self.payload.view(local.source)]
        if into.shape != source.shape:
            raise AlgorithmError(f"{self.algorithm.name}: the proxy payload cannot represent a "
                                 f"reduce of {local.source} into {local.into}; rerun with a larger "
                                 "proxy")
        nbytes = self.payload.nbytes(local.into)
        done = None if self.trace is None else functools.partial(
            self.trace.add_slice, f"rank {rank}", rank, "reduce", "local", peer="",
            size_bytes=nbytes)
        yield from self.gpus[rank].reduce(nbytes, done)
        self.reduce_op.combine(into, source.copy())

    def _local_copy(self, rank: int, local: LocalCopy) -> None:
        """``local.source`` over ``local.into`` on the rank's buffer, at once (no GPU time)."""
        self._check_span(rank, local.into)
        self._check_span(rank, local.source)
        row = self.buffers[rank]
        into, source = self.payload.view(local.into), self.payload.view(local.source)
        if into.stop - into.start != source.stop - source.start:
            raise AlgorithmError(f"{self.algorithm.name}: the proxy payload cannot represent a "
                                 f"copy of {local.source} into {local.into}; rerun with a larger "
                                 "proxy")
        row[into] = row[source].copy()

    def _check_span(self, rank: int, span: Span) -> None:
        if not (0 <= span.start <= span.stop <= self.payload.count):
            raise AlgorithmError(f"{self.algorithm.name}: rank {rank} used {span}, outside its "
                                 f"buffer of {self.payload.count} elements")

    def _check_complete(self) -> None:
        """The watchdog, when no event is left: every rank must have finished, every round
        have all its contributions and every message have been received; otherwise
        AlgorithmError, a deadlock saying, a line per blocked rank, what it waits for."""
        stuck = [r for r in range(len(self.placement)) if r not in self.finished]
        if stuck:
            raise deadlock(self.algorithm.name, stuck, list(self._waits.values()), self.env.now)
        if self.in_switch.unfinished():
            raise AlgorithmError(f"{self.algorithm.name}: {self.in_switch.unfinished()} in-switch "
                                 "reduction(s) missed contributions from some ranks")
        if self._slots:
            src, dst, _, _ = min(self._slots)
            raise AlgorithmError(f"{self.algorithm.name}: rank {src} sent {len(self._slots)} "
                                 f"message(s) never received (first to rank {dst})")


def run_collective(algorithm: Algorithm, machine: Machine, spec: RunSpec,
                   buffers: np.ndarray, recorder: Recorder | None = None,
                   limit: int | None = None) -> Timing:
    """Simulate ``algorithm`` on every rank of ``machine``; ``buffers`` (ranks × proxy) end
    holding its result (before ``reduce_op.finalize``, which the caller applies where the
    collective reduces). ``recorder`` (optional) records the links' use, and the timeline
    when it traces. OverBudget where the run comes to hold more than ``limit`` messages in
    flight and flow timers (:class:`~simulator.engine.fabric.Holding`; None: no limit)."""
    return _Run(algorithm, machine, spec, buffers, recorder, limit).run()
