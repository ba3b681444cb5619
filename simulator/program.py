"""What an algorithm's per-rank program sees: its chunks and a tiny communicator.

A program is a generator (SimPy's own idea: its local variables are its state). It *posts* sends
with :meth:`Comm.send`, which never block, and *yields* the operations it waits for:
:meth:`Comm.recv` (data from a peer, copied or reduced into a chunk of its buffer) and
:meth:`Comm.reduce` (a local combine). An engine interprets these operations: the SimPy engine
times them on the fabric, and any other interpreter could check or trace them. Programs never see
SimPy, the network or numpy arrays: a :class:`Chunk` is a range of buffer elements.

Messages between one pair of ranks are matched in order (MPI's non-overtaking rule): the k-th
``recv`` from a peer takes the k-th message that peer sent to this rank.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator
from dataclasses import dataclass
from enum import Enum

from simulator.errors import AlgorithmError


class Combine(Enum):
    """How received data meet the chunk they arrive into."""

    COPY = "copy"      # overwrite: the data are already final
    REDUCE = "reduce"  # combine with the reduction operator (costs GPU reduction time)


COPY, REDUCE = Combine.COPY, Combine.REDUCE


@dataclass(frozen=True, order=True)
class Chunk:
    """Elements ``start`` to ``stop`` (exclusive) of a rank's buffer."""

    start: int
    stop: int

    @property
    def count(self) -> int:
        """Number of elements."""
        return self.stop - self.start

    def split(self, parts: int) -> list[Chunk]:
        """``parts`` contiguous slices whose sizes differ by at most one element.

        The first ``count % parts`` slices get the extra element (as ``numpy.array_split``; NCCL
        likewise splits a buffer that does not divide evenly into nearly equal pieces).

        >>> Chunk(0, 10).split(4)
        [Chunk(start=0, stop=3), Chunk(start=3, stop=6), Chunk(start=6, stop=8), Chunk(start=8, stop=10)]
        """
        if parts < 1:
            raise ValueError(f"cannot split into {parts} parts")
        base, extra = divmod(self.count, parts)
        bounds = [self.start]
        for i in range(parts):
            bounds.append(bounds[-1] + base + (1 if i < extra else 0))
        return [Chunk(a, b) for a, b in itertools.pairwise(bounds)]


@dataclass(frozen=True)
class Send:
    """A posted message: ``chunk`` of the sender's buffer goes to ``peer``."""

    peer: int
    chunk: Chunk


@dataclass(frozen=True)
class Recv:
    """Wait for the next message from ``peer`` and copy or reduce it into ``into``."""

    peer: int
    into: Chunk
    op: Combine


@dataclass(frozen=True)
class LocalReduce:
    """Combine chunk ``source`` of this rank's buffer into chunk ``into`` (same size)."""

    into: Chunk
    source: Chunk


Op = Recv | LocalReduce
Program = Generator[Op, None, None]


class Comm:
    """One rank's view of the group: who it is, its buffer, and the verbs it may use."""

    def __init__(self, rank: int, size: int, count: int) -> None:
        self.rank = rank
        self.size = size
        self.buffer = Chunk(0, count)
        self._posted: list[Send] = []

    def chunks(self, parts: int) -> list[Chunk]:
        """The whole buffer cut into ``parts`` nearly equal chunks (see :meth:`Chunk.split`)."""
        return self.buffer.split(parts)

    def send(self, peer: int, chunk: Chunk) -> None:
        """Post ``chunk`` to ``peer``; returns at once (data are taken as they are now)."""
        self._check_peer(peer)
        self._posted.append(Send(peer, chunk))

    def recv(self, peer: int, into: Chunk, op: Combine = REDUCE) -> Recv:
        """The operation to yield to receive ``peer``'s next message into ``into``."""
        self._check_peer(peer)
        return Recv(peer, into, op)

    def reduce(self, into: Chunk, source: Chunk) -> LocalReduce:
        """The operation to yield to combine ``source`` into ``into`` locally."""
        if into.count != source.count:
            raise AlgorithmError(f"rank {self.rank}: local reduce of {source.count} elements "
                                 f"into a chunk of {into.count}")
        return LocalReduce(into, source)

    def take_posted(self) -> list[Send]:
        """Engine side: the sends posted since the last call, in posting order."""
        posted, self._posted = self._posted, []
        return posted

    def _check_peer(self, peer: int) -> None:
        if not (0 <= peer < self.size) or peer == self.rank:
            raise AlgorithmError(f"rank {self.rank}: peer {peer} is not another rank of "
                                 f"0..{self.size - 1}")
