"""What an algorithm's per-rank program sees: its buffer as spans, and a tiny communicator.

A program is a generator (SimPy's own idea: its local variables are its state). It *posts* sends
with :meth:`Comm.send`, which never block, and *yields* the requests it waits for:
:meth:`Comm.recv` (data from a peer, copied or reduced into a span of its buffer) and
:meth:`Comm.reduce` (a local combine). An engine interprets these requests: the SimPy engine
times them on the fabric, and any other interpreter could check or trace them. Programs never see
SimPy, the network or numpy arrays: a :class:`~simulator.model.span.Span` is a range of buffer
elements.

Messages between one pair of ranks are matched in order (MPI's non-overtaking rule): the k-th
``recv`` from a peer takes the k-th message that peer sent to this rank.

Threads of one rank (the branches of a :meth:`Comm.parallel`) may also order each other:
one posts a flag (:meth:`Comm.signal`), another waits for it (:meth:`Comm.wait`). A flag is a
message from the rank to itself on a connection of its own that moves nothing and takes no
time, so both engines and the trace treat it as they treat any message (the vectorised engine
and the trace see a join marker). MSCCL's dependencies between threadblocks are such flags
(:mod:`simulator.algorithms.msccl`).

A send or receive may carry a ``label`` saying where in the algorithm it is (``reduce-scatter
step 2/7 piece 1/4``); the shared phases set one, and a traced run names its timeline's slices
with it. It changes nothing else.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from enum import Enum

from simulator.errors import AlgorithmError
from simulator.model.machine import Layout
from simulator.model.span import Span, piece_sizes


class Combine(Enum):
    """How received data meet the span they arrive into."""

    COPY = "copy"      # overwrite: the data are already final
    REDUCE = "reduce"  # combine with the reduction operator (costs GPU reduction time)


COPY, REDUCE = Combine.COPY, Combine.REDUCE


@dataclass(frozen=True)
class Send:
    """A posted message: ``span`` of the sender's buffer goes to ``peer`` (a global rank) on
    ``channel`` (its path: the channel inside each enclosing channel, outermost first)."""

    peer: int
    span: Span
    channel: tuple[int, ...] = (0,)
    label: str = ""


@dataclass(frozen=True)
class SwitchContribution:
    """A posted contribution of ``span`` to an in-switch reduction among ``group``, whose sum
    the switch multicasts to ``to`` (global ranks; empty: to every member of ``group``), on
    ``channel`` (a channel path, as a :class:`Send`'s: each (group, to, channel) has its own
    rounds and connections)."""

    group: tuple[int, ...]
    span: Span
    label: str = ""
    to: tuple[int, ...] = ()
    channel: tuple[int, ...] = (0,)
    multicast: bool = False
    """A :meth:`Comm.switch_multicast`: rounds of their own, even where a group of one rank
    would reduce to the same receivers."""

    @property
    def key(self) -> SwitchKey:
        """The rounds this contribution joins."""
        return self.group, self.to or self.group, self.channel, self.multicast


@dataclass(frozen=True)
class Recv:
    """Wait for the next message from ``peer`` (a global rank) on ``channel`` and copy or
    reduce it into ``into``."""

    peer: int
    into: Span
    combine: Combine
    channel: tuple[int, ...] = (0,)
    label: str = ""


@dataclass(frozen=True)
class SwitchResult:
    """Wait for the next in-switch reduction result of ``group`` sent to ``to`` (empty: to every
    member) on ``channel``, and copy it into ``into``."""

    group: tuple[int, ...]
    into: Span
    label: str = ""
    to: tuple[int, ...] = ()
    channel: tuple[int, ...] = (0,)
    multicast: bool = False

    @property
    def key(self) -> SwitchKey:
        """The rounds this result comes from."""
        return self.group, self.to or self.group, self.channel, self.multicast


SwitchKey = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], bool]
"""An in-switch reduction's series of rounds: (contributors, receivers, channel path, whether
a multicast), ranks global; round k is every contributor's k-th contribution to it."""


@dataclass(frozen=True)
class LocalReduce:
    """Combine span ``source`` of this rank's buffer into span ``into`` (same size)."""

    into: Span
    source: Span


@dataclass(frozen=True)
class LocalCopy:
    """Copy span ``source`` of this rank's buffer over span ``into`` (same size): no time (the
    model charges a GPU for reductions, not for moving data within its memory)."""

    into: Span
    source: Span


@dataclass(frozen=True)
class Parallel:
    """Run several programs of one rank at once; done when all are (see :meth:`Comm.parallel`)."""

    programs: tuple[Program, ...]


Request = Recv | SwitchResult | LocalReduce | LocalCopy | Parallel
"""What a program yields: something to wait for."""

Posted = Send | SwitchContribution
"""What a program posts without waiting."""

Program = Generator[Request, None, None]
"""A rank's program: a generator of requests."""


def piece_label(label: str, piece: int, pieces: int) -> str:
    """``label`` with the piece (counted from 1) when a span moves as several.

    >>> piece_label("allgather step 2/3", 0, 4), piece_label("allgather step 2/3", 0, 1)
    ('allgather step 2/3 piece 1/4', 'allgather step 2/3')
    """
    return f"{label} piece {piece + 1}/{pieces}" if pieces > 1 and label else label


class Outbox:
    """Engine side: what one rank has posted and the engine has not yet started, in order."""

    def __init__(self) -> None:
        self._posted: list[Posted] = []

    def post(self, item: Posted) -> None:
        """Append a send or a switch contribution."""
        self._posted.append(item)

    def take(self) -> list[Posted]:
        """Everything posted since the last call, in posting order."""
        posted, self._posted = self._posted, []
        return posted


class Comm:
    """One rank's view of a group (a :class:`~simulator.algorithms.schedule.Group`, which
    :meth:`Group.comms <simulator.algorithms.schedule.Group.comms>` views from each member): who
    it is, its buffer, and the verbs it may use.

    Ranks are numbered 0..size-1 within the group; a :meth:`subgroup` is a communicator over
    some of them and a span of the buffer, so an algorithm can run another one inside it.
    ``piece_bytes`` is the scenario's pipeline piece size (None: each algorithm's default).
    """

    def __init__(self, rank: int, size: int, buffer: Span, *, itemsize: int = 1,
                 piece_bytes: int | None = None, layout: Layout | None = None,
                 outbox: Outbox | None = None, stream_bytes: int | None = None) -> None:
        self.rank = rank
        self.size = size
        self.buffer = buffer
        self.itemsize = itemsize
        self.piece_bytes = piece_bytes
        self.stream_bytes = stream_bytes
        """The pieces the execution model streams a multi-phase schedule in (None: every phase
        moves its whole span before the next starts, as on the ideal wire)."""
        self.layout = layout if layout is not None else Layout((0,) * size)
        self.members: tuple[int, ...] = tuple(range(size))
        """The global rank of each member of this group."""
        self.channel = 0
        self.owned: tuple[Span, ...] | None = None
        """Each member's chunk, where it is not the buffer's contiguous split: on a channel of a
        reduce-scatter or allgather, the channel's part of every member's chunk
        (:meth:`Span.split_chunks`), in this group's numbering (None: the split)."""
        self._enclosing: tuple[int, ...] = ()
        self._outbox = outbox if outbox is not None else Outbox()

    def chunks(self, parts: int) -> list[Span]:
        """The buffer cut into ``parts`` nearly equal chunks (see :meth:`Span.split`), or each
        member's :attr:`owned` chunk where it has one (then ``parts`` must be the members)."""
        if self.owned is None:
            return self.buffer.split(parts)
        if parts != len(self.owned):
            raise AlgorithmError(f"rank {self.members[self.rank]}: {parts} chunks of a channel "
                                 f"that holds a part of each of {len(self.owned)} chunks")
        return list(self.owned)

    def pieces(self, span: Span, default_bytes: int | None = None) -> list[Span]:
        """``span`` cut into pipeline pieces of the scenario's ``piece_size`` bytes, the last
        one partial (:func:`~simulator.model.span.piece_sizes`).

        When the scenario sets no piece size, pieces of ``default_bytes`` (the algorithm's own
        default), or the whole span when that is None too. Always at least one piece.
        """
        return span.cut(piece_sizes(span.count, self.itemsize, self.piece_bytes, default_bytes))

    def streams(self, span: Span) -> list[Span]:
        """``span`` cut into the pieces the execution model streams phases in
        (:attr:`stream_bytes`): one piece on the ideal wire."""
        return span.cut(piece_sizes(span.count, self.itemsize, None, self.stream_bytes))

    def send(self, peer: int, span: Span, label: str = "") -> None:
        """Post ``span`` to ``peer``; returns at once (data are taken as they are now)."""
        self._outbox.post(Send(self._global(peer), span, (*self._enclosing, self.channel), label))

    def recv(self, peer: int, into: Span, combine: Combine = REDUCE, label: str = "") -> Recv:
        """The request to yield to receive ``peer``'s next message into ``into``."""
        return Recv(self._global(peer), into, combine, (*self._enclosing, self.channel), label)

    def signal(self, flag: int, label: str = "") -> None:
        """Post flag ``flag`` of this rank: the thread of this rank that waits for it
        (:meth:`wait`) may go on. Nothing moves and no time passes; the k-th wait for a flag
        takes its k-th signal, so give every ordering between two threads a flag of its own."""
        me = self.members[self.rank]
        self._outbox.post(Send(me, self._nowhere(), self._flag(flag), label))

    def wait(self, flag: int, label: str = "") -> Recv:
        """The request to yield to wait until flag ``flag`` of this rank is signalled
        (:meth:`signal`), by another thread of the rank."""
        me = self.members[self.rank]
        return Recv(me, self._nowhere(), COPY, self._flag(flag), label)

    def _nowhere(self) -> Span:
        """The empty span a flag carries."""
        return Span(self.buffer.start, self.buffer.start)

    def _flag(self, flag: int) -> tuple[int, ...]:
        """The channel path of flag ``flag``: its own connection from this rank to itself, which
        no message between two ranks shares."""
        if flag < 0:
            raise AlgorithmError(f"rank {self.members[self.rank]}: flag {flag} is negative")
        return (*self._path(), flag)

    def parallel(self, *programs: Program) -> Parallel:
        """The request to yield to run ``programs`` at once (each its own thread of this rank,
        sharing its GPU); give each its own :meth:`on_channel` when they talk to the same peer."""
        return Parallel(tuple(programs))

    def on_channel(self, channel: int) -> Comm:
        """This communicator on another channel: a separate connection to every peer (its own
        FIFO and message matching), as NCCL runs each tree or ring on its own channel."""
        view = self._view(self.rank, self.size, self.buffer, self.layout, self.members,
                          self.owned)
        view.channel = channel
        return view

    def within_channel(self, channel: int) -> Comm:
        """This communicator inside channel ``channel``: every channel a program running on it
        opens (channel 0 first, then its :meth:`on_channel` numbers) lies inside that one, so
        whole algorithms can run side by side on their own connections, as NCCL runs one ring
        or tree per channel."""
        view = self._view(self.rank, self.size, self.buffer, self.layout, self.members,
                          self.owned)
        view._enclosing = (*self._enclosing, self.channel, channel)
        view.channel = 0
        return view

    def reduce(self, into: Span, source: Span) -> LocalReduce:
        """The request to yield to combine ``source`` into ``into`` locally."""
        if into.count != source.count:
            raise AlgorithmError(f"rank {self.members[self.rank]}: local reduce of "
                                 f"{source.count} elements into a span of {into.count}")
        return LocalReduce(into, source)

    def copy(self, into: Span, source: Span) -> LocalCopy:
        """The request to yield to copy ``source`` over ``into`` locally (no time)."""
        if into.count != source.count:
            raise AlgorithmError(f"rank {self.members[self.rank]}: local copy of "
                                 f"{source.count} elements into a span of {into.count}")
        return LocalCopy(into, source)

    def switch_reduce(self, span: Span, label: str = "", *, to: int | None = None) -> None:
        """Post ``span`` to the group's reducing switch (NVLink SHARP's multimem reduction);
        every member must post the same spans in the same order. The sum goes down to every
        member, or only to member ``to`` (a reduce-scatter's head, as NCCL's NVLS heads pull
        their chunk with ``multimem.ld_reduce``)."""
        self._outbox.post(SwitchContribution(self.members, span, label, self._receivers(to),
                                             self._path()))

    def switch_multicast(self, span: Span, label: str = "") -> None:
        """Post ``span`` to the switch alone, which copies it down to every member (NVLS's
        ``multimem.st``): a round of one contribution, which reduces nothing."""
        self._outbox.post(SwitchContribution((self.members[self.rank],), span, label,
                                             self.members, self._path(), multicast=True))

    def switch_result(self, into: Span, label: str = "", *, to: int | None = None,
                      multicast_from: int | None = None) -> SwitchResult:
        """The request to yield to receive the switch's next span: the group's sum (to every
        member, or to member ``to`` as :meth:`switch_reduce` said), or member
        ``multicast_from``'s :meth:`switch_multicast`."""
        group = self.members if multicast_from is None else (self.members[multicast_from],)
        receivers = self.members if multicast_from is not None else self._receivers(to)
        return SwitchResult(group, into, label, receivers, self._path(),
                            multicast=multicast_from is not None)

    def _receivers(self, to: int | None) -> tuple[int, ...]:
        """The global ranks an in-switch sum goes down to: member ``to``, or () for all."""
        return () if to is None else (self.members[to],)

    def _path(self) -> tuple[int, ...]:
        """This communicator's channel path (as a :class:`Send` carries it)."""
        return (*self._enclosing, self.channel)

    def subgroup(self, ranks: Sequence[int], buffer: Span,
                 owned: Sequence[Span] | None = None) -> Comm:
        """A communicator over ``ranks`` (this group's numbering, including this rank) that
        works on ``buffer``, a span of this one, or on the members' ``owned`` chunks
        (:attr:`owned`, in the subgroup's numbering) within it."""
        ranks = tuple(ranks)
        if self.rank not in ranks:
            raise AlgorithmError(f"rank {self.members[self.rank]} is not in subgroup {ranks}")
        return self._view(ranks.index(self.rank), len(ranks), buffer, self.layout.subgroup(ranks),
                          tuple(self.members[r] for r in ranks),
                          None if owned is None else tuple(owned))

    def _view(self, rank: int, size: int, buffer: Span, layout: Layout,
              members: tuple[int, ...], owned: tuple[Span, ...] | None = None) -> Comm:
        view = Comm(rank, size, buffer, itemsize=self.itemsize, piece_bytes=self.piece_bytes,
                    layout=layout, outbox=self._outbox, stream_bytes=self.stream_bytes)
        view.members = members
        view.owned = owned
        view.channel = self.channel
        view._enclosing = self._enclosing
        return view

    def _global(self, peer: int) -> int:
        if not (0 <= peer < self.size) or peer == self.rank:
            raise AlgorithmError(f"rank {self.members[self.rank]}: peer {peer} is not another "
                                 f"rank of 0..{self.size - 1}")
        return self.members[peer]
