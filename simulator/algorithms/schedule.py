"""Schedules: an algorithm's messages as numpy arrays, built for any p in O(steps) Python steps.

A per-rank program (:mod:`simulator.algorithms.comm`) describes an algorithm one message at a
time, which costs the SimPy engine several microseconds of Python per message. A schedule says
the same thing as arrays, one entry per message, so that :mod:`simulator.engine.vector` can run
a million messages with a few thousand numpy operations. Message m goes from global rank
``src[m]`` to ``dst[m]``, reading ``[send_start, send_stop)`` of the sender's buffer as it is when
the message is posted and copying or reducing it into ``[recv_start, recv_stop)`` of the
receiver's. Three pointers (message indices, -1 for none) carry the programs' order:

- ``posted_after[m]``: the receive after whose completion the sender posts m (-1: at the start),
  as a program posts its next sends when its last ``recv`` returns;
- ``connection_previous[m]``: the message posted before m on the same connection (sender,
  receiver, channel), whose bytes m waits behind (the connection's FIFO);
- ``receive_previous[m]``: the receive before m in the receiver's program, which m's receive
  waits for (programs receive in order; the GPU reduces in that order).

A schedule is a description of the same program, not another algorithm: the contract tests run
every algorithm that has one through both engines and require equal times and buffers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from simulator.errors import AlgorithmError
from simulator.model.span import Span

NONE = -1
"""The pointer of a message that has no predecessor of that kind."""

BEFORE = -2
"""In one phase of a :meth:`Schedule.sequence`: the thread's last receive before the phase (for
``posted_after`` and ``receive_previous``), or the connection's last message before it."""

Index = np.ndarray
"""An int64 array of message indices or ranks."""


@dataclass(frozen=True, eq=False)
class Schedule:
    """Every message of a collective, one entry per message in each array (see the module)."""

    src: Index
    dst: Index
    send_start: Index
    send_stop: Index
    recv_start: Index
    recv_stop: Index
    reduce: np.ndarray
    posted_after: Index
    connection_previous: Index
    receive_previous: Index
    reducing_threads: int = 1
    """How many threads of one rank may reduce at once (two for two trees side by side, C for
    C channels): the vectorised engine queues such reductions on the GPU, but breaks ties
    between same-instant requests its own way, so with a GPU cost it leaves them to SimPy."""

    def __post_init__(self) -> None:
        sizes = {name: len(getattr(self, name)) for name in ARRAYS}
        if len(set(sizes.values())) > 1:
            raise AlgorithmError(f"schedule arrays differ in length: {sizes}")

    @property
    def size(self) -> int:
        """How many messages."""
        return len(self.src)

    @staticmethod
    def empty() -> Schedule:
        """No message at all (one rank, or a phase with nothing to move)."""
        none = np.zeros(0, dtype=np.int64)
        return Schedule(none, none, none, none, none, none, np.zeros(0, dtype=bool), none, none,
                        none)

    @staticmethod
    def concat(parts: Sequence[Schedule]) -> Schedule:
        """The messages of ``parts`` side by side (pointers shifted to the joined numbering)."""
        if len(parts) == 1:
            return parts[0]
        offsets = np.cumsum([0, *(part.size for part in parts[:-1])])
        pointers = ("posted_after", "connection_previous", "receive_previous")
        joined: dict[str, Any] = {}
        for name in ARRAYS:
            arrays = [getattr(part, name) for part in parts]
            if name in pointers:
                arrays = [np.where(a >= 0, a + offset, NONE) for a, offset in zip(arrays, offsets,
                                                                                    strict=True)]
            joined[name] = np.concatenate(arrays)
        return Schedule(**joined, reducing_threads=sum(part.reducing_threads for part in parts))


    @staticmethod
    def sequence(phases: Sequence[Schedule], ranks: int) -> Schedule:
        """Phases one after another in every rank's one thread: each phase's :data:`BEFORE`
        pointers resolve to the rank's last receive in the phases before it, and every
        connection's messages queue in phase order."""
        if not phases:
            return Schedule.empty()
        resolved = []
        offset = 0
        last = np.full(ranks, NONE, dtype=np.int64)
        for phase in phases:
            shifted = {name: getattr(phase, name) for name in ARRAYS}
            for name, rank in (("posted_after", phase.src), ("receive_previous", phase.dst)):
                pointer = shifted[name]
                shifted[name] = np.where(pointer == BEFORE, last[rank],
                                         np.where(pointer >= 0, pointer + offset, NONE))
            shifted["connection_previous"] = np.full(phase.size, BEFORE, dtype=np.int64)
            resolved.append(Schedule(**shifted))
            mine = last_receives(phase, ranks)  # BEFORE pointers are negative: not followers
            last = np.where(mine >= 0, mine + offset, last)
            offset += phase.size
        joined: dict[str, Any] = {name: np.concatenate([getattr(step, name) for step in resolved])
                                  for name in ARRAYS}
        joined["reducing_threads"] = max(phase.reducing_threads for phase in phases)
        joined["connection_previous"] = chain(joined["src"] * ranks + joined["dst"])
        return Schedule(**joined)


ARRAYS = tuple(f.name for f in fields(Schedule) if f.name != "reducing_threads")
"""The per-message arrays of a schedule."""


@dataclass(frozen=True, eq=False)
class Group:
    """What a schedule is built for, as a communicator is for a program: the global rank of each
    member (in the group's numbering), the span of the buffer it works on, the element size and
    the scenario's pipeline piece size (None: each algorithm's default)."""

    members: Index
    buffer: Span
    itemsize: int = 1
    piece_bytes: int | None = None

    @property
    def size(self) -> int:
        """How many ranks."""
        return len(self.members)

    def chunks(self, parts: int) -> tuple[Index, Index]:
        """(starts, stops) of the buffer cut into ``parts`` chunks, as :meth:`Span.split`."""
        base, extra = divmod(self.buffer.count, parts)
        sizes = np.full(parts, base, dtype=np.int64)
        sizes[:extra] += 1
        stops = self.buffer.start + np.cumsum(sizes)
        return stops - sizes, stops

    def subgroup(self, positions: Sequence[int] | Index, buffer: Span) -> Group:
        """The group of the members at ``positions`` (this group's numbering), on ``buffer``."""
        return Group(self.members[np.asarray(positions, dtype=np.int64)], buffer, self.itemsize,
                     self.piece_bytes)


def pieces_per_span(counts: Index, itemsize: int, piece_bytes: int | None) -> tuple[Index, int]:
    """(pieces of each span of ``counts`` elements, elements per full piece), as
    :func:`~simulator.model.span.piece_sizes` cuts one span: full pieces, the last partial, and
    one piece when ``piece_bytes`` is None or the span is empty."""
    if piece_bytes is None:
        return np.ones(len(counts), dtype=np.int64), max(1, int(counts.max(initial=1)))
    per_piece = max(1, piece_bytes // itemsize)
    return np.maximum(1, -(-counts // per_piece)), per_piece


def transfers(group: Group, senders: Index, receivers: Index, starts: Index, stops: Index, *,
              reduce: bool, default_bytes: int | None = None, whole: bool = False) -> Schedule:
    """One phase of point-to-point moves, as :func:`~simulator.algorithms.phases.pieces.send_pieces`
    and ``recv_pieces`` make them: row k sends elements [starts[k], stops[k]) from group position
    ``senders[k]`` to ``receivers[k]`` as pipeline pieces, every piece posted at the phase's start
    (after the sender's last receive before it), each receiver taking its rows' pieces in row
    order. Rows of one sender to one receiver queue on their connection in row order. ``whole``
    sends each row as one message, as ``comm.send`` does (direct schedules ignore pieces)."""
    per_row, per_piece = pieces_per_span(stops - starts, group.itemsize,
                                         None if whole else group.piece_bytes
                                         if group.piece_bytes is not None else default_bytes)
    row = np.repeat(np.arange(len(starts), dtype=np.int64), per_row)
    piece = np.arange(len(row), dtype=np.int64) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    first = starts[row] + piece * per_piece
    last = np.minimum(first + per_piece, stops[row])
    receiver = receivers[row]
    previous = chain(receiver)
    previous[previous == NONE] = BEFORE
    src, dst = group.members[senders[row]], group.members[receiver]
    return Schedule(src, dst, first, last, first, last, np.full(len(row), reduce),
                    np.full(len(row), BEFORE, dtype=np.int64),
                    np.full(len(row), BEFORE, dtype=np.int64), previous)


def chain(keys: Index) -> Index:
    """For each entry, the previous entry with the same key in index order (-1 for the first):
    the pointers of messages that queue in index order, such as a connection's FIFO."""
    order = np.argsort(keys, kind="stable")
    previous = np.full(len(keys), NONE, dtype=np.int64)
    same = keys[order[1:]] == keys[order[:-1]]
    previous[order[1:][same]] = order[:-1][same]
    return previous


def last_receives(schedule: Schedule, ranks: int) -> Index:
    """Each rank's last receive in program order (-1 where it receives nothing), for a schedule
    with one thread per rank: the receive no other receive follows."""
    followed = np.zeros(schedule.size, dtype=bool)
    previous = schedule.receive_previous
    followed[previous[previous >= 0]] = True
    last = np.full(ranks, NONE, dtype=np.int64)
    ends = np.flatnonzero(~followed)
    last[schedule.dst[ends]] = ends
    return last
