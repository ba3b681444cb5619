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

import functools
import itertools
from collections.abc import Generator, Sequence
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
        return list(_split(self.start, self.stop, parts))


def piece_sizes(count: int, itemsize: int, chunk_bytes: int | None,
                unset_bytes: int | None) -> list[int]:
    """Element counts of the pipeline pieces of ``count`` elements: full pieces of
    ``chunk_bytes`` (or ``unset_bytes`` when the scenario sets none), the last one partial, as
    NCCL steps through a buffer in fixed chunks; one piece when both are None.

    Fixed-size pieces keep time monotone in size: one more element never makes pieces smaller.

    >>> piece_sizes(10, 1, 4, None)
    [4, 4, 2]
    """
    size_bytes = chunk_bytes if chunk_bytes is not None else unset_bytes
    if size_bytes is None or count == 0:
        return [count]
    per_piece = max(1, size_bytes // itemsize)
    full, rest = divmod(count, per_piece)
    return [per_piece] * full + ([rest] if rest else [])


@dataclass(frozen=True)
class Layout:
    """Where ranks sit: the host (machine) of each rank; flat topologies have a single host."""

    hosts: tuple[int, ...]

    def host_ranks(self, rank: int) -> tuple[int, ...]:
        """The ranks on ``rank``'s host, in rank order."""
        return tuple(r for r, host in enumerate(self.hosts) if host == self.hosts[rank])

    def rail(self, rank: int) -> tuple[int, ...]:
        """One rank per host, each with the same local index as ``rank`` on its host."""
        local = self.host_ranks(rank).index(rank)
        hosts = sorted(set(self.hosts))
        by_host = {h: [r for r, host in enumerate(self.hosts) if host == h] for h in hosts}
        return tuple(by_host[h][local] for h in hosts if local < len(by_host[h]))

    def subset(self, members: tuple[int, ...]) -> Layout:
        """The layout of a subgroup (members numbered 0..len-1 in the given order)."""
        return Layout(tuple(self.hosts[m] for m in members))


@functools.lru_cache(maxsize=1 << 16)
def _split(start: int, stop: int, parts: int) -> tuple[Chunk, ...]:
    """Shared by every rank that cuts the same range the same way (p ranks × p chunks would
    otherwise be p² objects for the garbage collector to scan)."""
    base, extra = divmod(stop - start, parts)
    bounds = [start]
    for i in range(parts):
        bounds.append(bounds[-1] + base + (1 if i < extra else 0))
    return tuple(Chunk(a, b) for a, b in itertools.pairwise(bounds))


@dataclass(frozen=True)
class Send:
    """A posted message: ``chunk`` of the sender's buffer goes to ``peer`` (a global rank) on
    ``channel``."""

    peer: int
    chunk: Chunk
    channel: int = 0


@dataclass(frozen=True)
class SwitchContribution:
    """A posted contribution of ``chunk`` to an in-switch reduction among ``group``."""

    group: tuple[int, ...]
    chunk: Chunk


@dataclass(frozen=True)
class Recv:
    """Wait for the next message from ``peer`` (a global rank) on ``channel`` and copy or
    reduce it in."""

    peer: int
    into: Chunk
    op: Combine
    channel: int = 0


@dataclass(frozen=True)
class SwitchResult:
    """Wait for the next in-switch reduction result of ``group`` and copy it into ``into``."""

    group: tuple[int, ...]
    into: Chunk


@dataclass(frozen=True)
class LocalReduce:
    """Combine chunk ``source`` of this rank's buffer into chunk ``into`` (same size)."""

    into: Chunk
    source: Chunk


@dataclass(frozen=True)
class Parallel:
    """Run several programs of one rank at once; done when all are (see :meth:`Comm.parallel`)."""

    programs: tuple[Generator, ...]


Op = Recv | SwitchResult | LocalReduce | Parallel
Posted = Send | SwitchContribution
Program = Generator[Op, None, None]


class Comm:
    """One rank's view of a group: who it is, its buffer, and the verbs it may use.

    Ranks are numbered 0..size-1 within the group; a :meth:`subgroup` is a communicator over
    some of them and a piece of the buffer, so an algorithm can run another one inside it.
    """

    def __init__(self, rank: int, size: int, buffer: Chunk, *, itemsize: int = 1,
                 chunk_bytes: int | None = None, layout: Layout | None = None,
                 members: tuple[int, ...] | None = None, outbox: list[Posted] | None = None,
                 channel: int = 0) -> None:
        self.rank = rank
        self.size = size
        self.buffer = buffer
        self.itemsize = itemsize
        self.chunk_bytes = chunk_bytes
        self.layout = layout if layout is not None else Layout((0,) * size)
        self.members = members if members is not None else tuple(range(size))
        self.channel = channel
        self._outbox: list[Posted] = outbox if outbox is not None else []

    def chunks(self, parts: int) -> list[Chunk]:
        """The buffer cut into ``parts`` nearly equal chunks (see :meth:`Chunk.split`)."""
        return self.buffer.split(parts)

    def pieces(self, chunk: Chunk, unset_bytes: int | None = None) -> list[Chunk]:
        """``chunk`` cut into pipeline pieces of the scenario's ``chunk_size`` bytes, the last
        one partial (:func:`piece_sizes`).

        When the scenario sets no ``chunk_size``, pieces of ``unset_bytes`` (the algorithm's own
        default), or the whole chunk when that is None too. Always at least one piece.
        """
        sizes = piece_sizes(chunk.count, self.itemsize, self.chunk_bytes, unset_bytes)
        if len(sizes) == 1:
            return [chunk]
        starts = itertools.accumulate(sizes, initial=chunk.start)
        return [Chunk(start, start + size) for start, size in zip(starts, sizes, strict=False)]

    def send(self, peer: int, chunk: Chunk) -> None:
        """Post ``chunk`` to ``peer``; returns at once (data are taken as they are now)."""
        self._outbox.append(Send(self._global(peer), chunk, self.channel))

    def recv(self, peer: int, into: Chunk, op: Combine = REDUCE) -> Recv:
        """The operation to yield to receive ``peer``'s next message into ``into``."""
        return Recv(self._global(peer), into, op, self.channel)

    def parallel(self, *programs: Program) -> Parallel:
        """The operation to yield to run ``programs`` at once (each its own thread of this rank,
        sharing its GPU); give each its own :meth:`on_channel` when they talk to the same peer."""
        return Parallel(tuple(programs))

    def on_channel(self, channel: int) -> Comm:
        """This communicator on another channel: a separate connection to every peer (its own
        FIFO and message matching), as NCCL runs each tree or ring on its own channel."""
        view = self.subgroup(range(self.size), self.buffer)
        view.channel = channel
        return view

    def reduce(self, into: Chunk, source: Chunk) -> LocalReduce:
        """The operation to yield to combine ``source`` into ``into`` locally."""
        if into.count != source.count:
            raise AlgorithmError(f"rank {self.members[self.rank]}: local reduce of "
                                 f"{source.count} elements into a chunk of {into.count}")
        return LocalReduce(into, source)

    def switch_reduce(self, chunk: Chunk) -> None:
        """Post ``chunk`` to the group's reducing switch (NVLink SHARP's multimem reduction);
        every member must post the same chunks in the same order."""
        self._outbox.append(SwitchContribution(self.members, chunk))

    def switch_result(self, into: Chunk) -> SwitchResult:
        """The operation to yield to receive the switch's next reduced, multicast chunk."""
        return SwitchResult(self.members, into)

    def subgroup(self, ranks: Sequence[int], buffer: Chunk) -> Comm:
        """A communicator over ``ranks`` (this group's numbering, including this rank) that
        works on ``buffer``, a piece of this one."""
        ranks = tuple(ranks)
        if self.rank not in ranks:
            raise AlgorithmError(f"rank {self.members[self.rank]} is not in subgroup {ranks}")
        return Comm(ranks.index(self.rank), len(ranks), buffer, itemsize=self.itemsize,
                    chunk_bytes=self.chunk_bytes, layout=self.layout.subset(ranks),
                    members=tuple(self.members[r] for r in ranks), outbox=self._outbox,
                    channel=self.channel)

    def take_posted(self) -> list[Posted]:
        """Engine side: what was posted since the last call, in posting order."""
        posted = list(self._outbox)
        self._outbox.clear()
        return posted

    def _global(self, peer: int) -> int:
        if not (0 <= peer < self.size) or peer == self.rank:
            raise AlgorithmError(f"rank {self.members[self.rank]}: peer {peer} is not another "
                                 f"rank of 0..{self.size - 1}")
        return self.members[peer]
