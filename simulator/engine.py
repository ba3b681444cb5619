"""The SimPy engine: runs every rank's program on the fabric, moving and reducing real data.

Each rank is a SimPy process that steps through its algorithm's generator. Posted sends become
transfers on the :class:`~simulator.network.Fabric` carrying a copy of the chunk's data; a
``recv`` waits for the matching message, then copies it in or reduces it in on the rank's GPU,
whose reduction engine is a capacity-1 resource (concurrent reductions queue). The run's time is
when the last rank finishes its program.

A *connection* (an ordered pair of ranks on one channel) injects one message at a time, in
posting order, as an NCCL channel's per-peer FIFO does; latencies overlap, so k back-to-back
pieces of c bytes cost ``alpha + k·c·beta`` and a d-hop store-and-forward pipeline
``d·alpha + (k+d-1)·c·beta``.
Messages on different connections run concurrently and share links max-min fairly. A rank may
run several programs at once (``comm.parallel``), each usually on its own channel.
"""

from __future__ import annotations

import gc
from collections.abc import Generator
from dataclasses import dataclass

import numpy as np
import simpy

from simulator.collectives.base import Algorithm
from simulator.costmodel import GpuSpec
from simulator.data import Payload
from simulator.errors import AlgorithmError
from simulator.inswitch import InSwitchReductions
from simulator.network import Fabric, Routing
from simulator.program import (
    COPY,
    Chunk,
    Comm,
    Layout,
    LocalReduce,
    Parallel,
    Program,
    Recv,
    SwitchContribution,
    SwitchResult,
)
from simulator.reduction import ReduceOp
from simulator.topology import hosts

_Connection = tuple[int, int, int]  # (sender, receiver, channel)
_Key = tuple[int, int, int, int]     # a connection and a message's sequence number on it


@dataclass(frozen=True)
class Timing:
    """What one simulated collective cost: time, and counters that explain it."""

    time_s: float
    messages: int
    bytes_moved: float
    events: int


@dataclass(frozen=True)
class _Message:
    chunk: Chunk
    data: np.ndarray


@dataclass(frozen=True)
class _Deliver:
    """Callback: when a transfer ends, hand its message to the receiver's matching slot."""

    slot: simpy.Event
    message: _Message

    def __call__(self, _event: simpy.Event) -> None:
        self.slot.succeed(self.message)


class _Gpu:
    """A GPU's reduction engine: reducing ``n`` bytes holds it for ``launch + n / bandwidth``."""

    def __init__(self, env: simpy.Environment, spec: GpuSpec) -> None:
        self.env = env
        self.spec = spec
        self.engine = simpy.Resource(env, capacity=1)

    def reduce(self, size_bytes: float) -> Generator[simpy.Event, object, None]:
        duration = self.spec.reduce_s(size_bytes)
        if duration <= 0:
            return
        with self.engine.request() as turn:
            yield turn
            yield self.env.timeout(duration)


class _Run:
    """One collective on one fabric: the rank processes and the messages between them."""

    def __init__(self, algorithm: Algorithm, placement: tuple[str, ...], routing: Routing,
                 gpu: GpuSpec, payload: Payload, buffers: np.ndarray, op: ReduceOp,
                 chunk_bytes: int | None) -> None:
        self.env = simpy.Environment()
        self.algorithm = algorithm
        self.placement = placement
        self.fabric = Fabric(self.env, routing)
        self.gpus = [_Gpu(self.env, gpu) for _ in placement]
        self.payload = payload
        self.buffers = buffers
        self.op = op
        self.in_switch = InSwitchReductions(self.env, self.fabric, placement, payload, op,
                                            algorithm.name)
        ranks = len(placement)
        layout = Layout(hosts(routing.graph, placement))
        self.comms = [Comm(rank, ranks, Chunk(0, payload.count), itemsize=payload.dtype.itemsize,
                           chunk_bytes=chunk_bytes, layout=layout) for rank in range(ranks)]
        self.finished: dict[int, float] = {}
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
                      bytes_moved=self.fabric.stats.bytes_moved, events=events)

    def _rank(self, rank: int) -> Generator[simpy.Event, object, None]:
        yield from self._steps(rank, self.algorithm.program(rank, self.comms[rank]))
        self.finished[rank] = self.env.now

    def _steps(self, rank: int, program: Program) -> Generator[simpy.Event, object, None]:
        """Step through one program (or one of a rank's parallel programs)."""
        comm = self.comms[rank]
        for op in program:
            self._post_sends(rank, comm)
            if isinstance(op, Recv):
                yield from self._recv(rank, op)
            elif isinstance(op, LocalReduce):
                yield from self._local_reduce(rank, op)
            elif isinstance(op, SwitchResult):
                self._check_chunk(rank, op.into)
                data = yield from self.in_switch.result(rank, op)
                self.buffers[rank, self.payload.view(op.into)] = data
            elif isinstance(op, Parallel):
                yield self.env.all_of([self.env.process(self._steps(rank, branch))
                                       for branch in op.programs])
            else:
                raise AlgorithmError(f"{self.algorithm.name}: rank {rank} yielded {op!r}; "
                                     "expected comm.recv(...), comm.reduce(...), "
                                     "comm.switch_result(...) or comm.parallel(...)")
        self._post_sends(rank, comm)

    def _post_sends(self, rank: int, comm: Comm) -> None:
        for send in comm.take_posted():
            self._check_chunk(rank, send.chunk)
            data = self.buffers[rank, self.payload.view(send.chunk)].copy()  # as it is now
            if isinstance(send, SwitchContribution):
                self.in_switch.contribute(rank, send, data)
                continue
            connection = (rank, send.peer, send.channel)
            seq = self._sent.get(connection, 0)
            self._sent[connection] = seq + 1
            transfer = self.fabric.transfer(self.placement[rank], self.placement[send.peer],
                                            self.payload.nbytes(send.chunk), connection=connection)
            transfer.callbacks.append(_Deliver(self._slot((*connection, seq)),
                                               _Message(send.chunk, data)))

    def _slot(self, key: _Key) -> simpy.Event:
        if key not in self._slots:
            self._slots[key] = self.env.event()
        return self._slots[key]

    def _recv(self, rank: int, op: Recv) -> Generator[simpy.Event, object, None]:
        self._check_chunk(rank, op.into)
        connection = (op.peer, rank, op.channel)
        seq = self._received.get(connection, 0)
        self._received[connection] = seq + 1
        message = yield self._slot((*connection, seq))
        del self._slots[(*connection, seq)]
        if message.chunk.count != op.into.count:
            raise AlgorithmError(f"{self.algorithm.name}: rank {rank} received {message.chunk.count} "
                                 f"elements from rank {op.peer} into a chunk of {op.into.count}")
        target = self.buffers[rank, self.payload.view(op.into)]
        if target.shape != message.data.shape:
            raise AlgorithmError(f"{self.algorithm.name}: the proxy payload cannot represent a "
                                 f"move of {message.chunk} into {op.into}; rerun with a larger proxy")
        if op.op is COPY:
            target[...] = message.data
        else:
            yield from self.gpus[rank].reduce(self.payload.nbytes(op.into))
            self.op.combine(target, message.data)

    def _local_reduce(self, rank: int, op: LocalReduce) -> Generator[simpy.Event, object, None]:
        self._check_chunk(rank, op.into)
        self._check_chunk(rank, op.source)
        yield from self.gpus[rank].reduce(self.payload.nbytes(op.into))
        row = self.buffers[rank]
        self.op.combine(row[self.payload.view(op.into)], row[self.payload.view(op.source)].copy())

    def _check_chunk(self, rank: int, chunk: Chunk) -> None:
        if not (0 <= chunk.start <= chunk.stop <= self.payload.count):
            raise AlgorithmError(f"{self.algorithm.name}: rank {rank} used {chunk}, outside its "
                                 f"buffer of {self.payload.count} elements")

    def _check_complete(self) -> None:
        stuck = [r for r in range(len(self.placement)) if r not in self.finished]
        if stuck:
            raise AlgorithmError(f"{self.algorithm.name}: deadlock: ranks {stuck[:8]} wait for "
                                 "messages that are never sent")
        if self.in_switch.unfinished():
            raise AlgorithmError(f"{self.algorithm.name}: {self.in_switch.unfinished()} in-switch "
                                 "reduction(s) missed contributions from some ranks")
        if self._slots:
            src, dst, _, _ = min(self._slots)
            raise AlgorithmError(f"{self.algorithm.name}: rank {src} sent {len(self._slots)} "
                                 f"message(s) never received (first to rank {dst})")


def run_collective(algorithm: Algorithm, placement: tuple[str, ...], routing: Routing,
                   gpu: GpuSpec, payload: Payload, buffers: np.ndarray, op: ReduceOp,
                   chunk_bytes: int | None = None) -> Timing:
    """Simulate ``algorithm`` on every rank; ``buffers`` (ranks × proxy) end holding its result
    (before ``op.finalize``, which the caller applies where the collective reduces).
    ``chunk_bytes`` is the scenario's pipelining ``chunk_size`` (None: unset)."""
    return _Run(algorithm, placement, routing, gpu, payload, buffers, op, chunk_bytes).run()
