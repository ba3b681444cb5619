"""Schedules: an algorithm's messages as numpy arrays, built for any p in O(steps) Python steps.

A per-rank program (:mod:`simulator.algorithms.comm`) describes an algorithm one message at a
time, which costs the SimPy engine tens of microseconds of Python per message (7 events each).
A schedule says the same thing as arrays, one entry per message, so that
:mod:`simulator.engine.vector` can run a million messages with a few thousand numpy operations.
Message m goes from global rank ``src[m]`` to ``dst[m]``, reading ``[send_start, send_stop)``
of the sender's buffer as it is when the message is posted and copying or reducing it into
``[recv_start, recv_stop)`` of the receiver's. Three pointers (message indices, -1 for none)
carry the programs' order:

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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from enum import IntEnum
from typing import Any

import numpy as np

from simulator.algorithms.comm import Comm, Outbox
from simulator.errors import AlgorithmError
from simulator.model.machine import Grid, Layout, Machine
from simulator.model.span import Span

NONE = -1
"""The pointer of a message that has no predecessor of that kind: it is posted, or received,
at its thread's start (in a phase of a :meth:`Schedule.sequence`, after the rank's last receive
before the phase), or is the first on its connection."""

Index = np.ndarray
"""An int64 array of message indices or ranks."""


class Op(IntEnum):
    """What one schedule entry is, as its endpoints tell (:attr:`Schedule.kinds`)."""

    MESSAGE = 0
    """From a rank to another: moved over the route, then copied or reduced in."""
    LOCAL_REDUCE = 1
    """From a rank to itself, reducing (``comm.reduce``): no route, GPU time only."""
    JOIN = 2
    """From a rank to itself, nothing moved: a join marker, or a flag between two threads of the
    rank (``comm.signal``/``comm.wait``; no time, no data)."""
    SWITCH_UPLOAD = 3
    """From a rank to endpoint ``-1 - g``: its span up to group g's reducing switch."""
    SWITCH_COPY_DOWN = 4
    """From endpoint ``-1 - g`` to a rank: the round's sum down from group g's switch."""
    LOCAL_COPY = 5
    """From a rank to itself, not reducing, moving data (``comm.copy``): no route, no time."""


@dataclass(frozen=True)
class SwitchEnd:
    """A switch endpoint of a schedule: ``-1 - g`` in ``src`` or ``dst`` is
    :attr:`Schedule.switches` [g]. ``members`` are the ranks whose rounds it serves;
    ``switch`` the switch's node and ``delay_s`` what it waits before sending on (its
    reduction latency where it reduces), None: the switch the machine names for ``members``
    and its latency, none for one member (an in-switch round in one switch). A reduction over
    several switches (:class:`~simulator.model.machine.Aggregation`) has an endpoint for its
    root, and two for each switch below it: one that sums and sends up, one that passes the
    result down."""

    members: tuple[int, ...]
    switch: str | None = None
    delay_s: float | None = None


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
    thread: Index | None = None
    """Which of the schedule's side-by-side threads each message belongs to (None: all one):
    :meth:`sequence` keeps the connections of different threads apart, as channels do."""
    switches: tuple[SwitchEnd, ...] = ()
    """Each switch endpoint: ``-1 - g`` in ``src`` or ``dst`` is endpoint g, so that a message
    to it is a switch upload and one from it a switch copy down (both: between two switches of
    a reduction's tree; :mod:`simulator.algorithms.trace`)."""

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

    @property
    def threads(self) -> Index:
        """:attr:`thread`, zeros where it is None."""
        return self.thread if self.thread is not None else np.zeros(self.size, dtype=np.int64)

    @staticmethod
    def apart(parts: Sequence[Schedule]) -> Schedule:
        """Schedules of disjoint sets of ranks side by side: one thread per rank still."""
        joined = Schedule.concat(parts)
        threads = [part.threads for part in parts]
        return replace(joined, reducing_threads=max((p.reducing_threads for p in parts),
                                                    default=1),
                       thread=np.concatenate(threads) if len(parts) > 1 else joined.thread)

    @staticmethod
    def concat(parts: Sequence[Schedule]) -> Schedule:
        """The messages of ``parts`` side by side (pointers shifted to the joined numbering)."""
        if not parts:
            return Schedule.empty()
        if len(parts) == 1:
            return parts[0]
        offsets = np.cumsum([0, *(part.size for part in parts[:-1])])
        joined: dict[str, Any] = {}
        for name in ARRAYS:
            arrays = [getattr(part, name) for part in parts]
            if name in POINTERS:
                arrays = [np.where(a >= 0, a + offset, NONE) for a, offset in zip(arrays, offsets,
                                                                                    strict=True)]
            joined[name] = np.concatenate(arrays)
        thread, base = [], 0
        for part in parts:  # each part's threads numbered after the previous parts'
            thread.append(part.threads + base)
            base += int(part.threads.max(initial=0)) + 1
        switches: list[SwitchEnd] = []
        for part, offset in zip(parts, offsets, strict=True):  # groups after the parts' before
            if part.switches:
                at = slice(offset, offset + part.size)
                for name in ("src", "dst"):
                    ends = joined[name][at]
                    ends[ends < 0] -= len(switches)
                switches.extend(part.switches)
        return Schedule(**joined, thread=np.concatenate(thread),
                        reducing_threads=sum(part.reducing_threads for part in parts
                                             if part.reduce.any()), switches=tuple(switches))


    @staticmethod
    def sequence(phases: Sequence[Schedule | Together], ranks: int) -> Schedule:
        """Phases one after another in every rank's program. A phase's messages posted or
        received at its start (pointers :data:`NONE`) wait for the rank's last
        receive before the phase; where a phase leaves a rank several threads (a
        :class:`Together`, two trees), a chain of join markers (messages from a rank to itself,
        which take no time and move nothing) waits for all of them, as ``comm.parallel`` returns
        when every branch has. Each connection's first message in a phase queues behind its last
        one in the phases before, on the same channel (a :class:`Together`'s branches run on
        channels of their own)."""
        parts: list[Schedule] = []
        offset, threads = 0, 1
        last = np.full(ranks, NONE, dtype=np.int64)
        tails = _Tails()
        steps = [step.branches if isinstance(step, Together) else (step,) for step in phases]
        width = 1 + max((int(b.threads.max(initial=0)) for s in steps for b in s), default=0)
        for phase in phases:
            branches = phase.branches if isinstance(phase, Together) else (phase,)
            channel_of = phase.channels if isinstance(phase, Together) else (0,)
            threads = max(threads, sum(b.reducing_threads for b in branches if b.reduce.any()))
            ends = []
            for branch, channel in zip(branches, channel_of, strict=True):
                key = ((channel * width + branch.threads) * ranks + branch.src) * ranks + branch.dst
                shifted = {name: getattr(branch, name) for name in ARRAYS}
                for name, rank in (("posted_after", branch.src),
                                   ("receive_previous", branch.dst)):
                    pointer = shifted[name]
                    shifted[name] = np.where(pointer < 0, last[rank], pointer + offset)
                connection = branch.connection_previous
                shifted["connection_previous"] = np.where(connection < 0, tails.behind(key),
                                                          connection + offset)
                tail = np.flatnonzero(_last_of_chains(connection))
                tails.update(key[tail], tail + offset)
                ends.append(_ends(branch, offset))
                parts.append(Schedule(**shifted))
                offset += branch.size
            joins, joined_last = _joins(np.concatenate(ends), offset)
            parts.append(joins)
            offset += joins.size
            for finished in (*ends, joined_last):  # joins last: they win
                last[finished[:, 0]] = finished[:, 1]
        if offset == 0:
            return Schedule.empty()
        joined: dict[str, Any] = {name: np.concatenate([getattr(part, name) for part in parts])
                                  for name in ARRAYS}
        return Schedule(**joined, reducing_threads=threads)

    def renumbered(self, order: Index) -> Schedule:
        """The same messages numbered in ``order`` (message ``order[i]`` becomes message i),
        pointers and threads following them: how a trace, or a builder that must number its
        messages as the trace does, puts them in dependency order."""
        number = np.empty(self.size, dtype=np.int64)
        number[order] = np.arange(self.size, dtype=np.int64)
        columns: dict[str, Any] = {}
        for name in ARRAYS:
            values = getattr(self, name)[order]
            if name in POINTERS:
                values = np.where(values >= 0, number[np.maximum(values, 0)], NONE)
            columns[name] = values
        return replace(self, **columns, thread=None if self.thread is None else self.thread[order])

    @property
    def markers(self) -> np.ndarray:
        """Which entries go from a rank to itself (join markers, flags, local reduces and
        copies): no route, so no message the fabric counts."""
        is_marker: np.ndarray = self.src == self.dst
        return is_marker

    @property
    def kinds(self) -> np.ndarray:
        """Each entry's :class:`Op`, as its endpoints tell."""
        kinds = np.full(self.size, Op.MESSAGE, dtype=np.int64)
        markers = self.markers
        moved = self.recv_stop[markers] > self.recv_start[markers]
        kinds[markers] = np.where(self.reduce[markers], Op.LOCAL_REDUCE,
                                  np.where(moved, Op.LOCAL_COPY, Op.JOIN))
        kinds[self.dst < 0] = Op.SWITCH_UPLOAD
        kinds[self.src < 0] = Op.SWITCH_COPY_DOWN
        return kinds


@dataclass(frozen=True)
class Blocks:
    """A schedule produced a block at a time, for runs too large to hold whole: ``block(k)``
    builds block k (k = 0 .. ``count`` - 1, in order), whose messages follow block k-1's in
    the one numbering of the whole schedule, pointers included (into block k or before). A
    message's ``posted_after`` reaches back at most ``reach`` blocks, and only blocks 0 to
    ``reach`` post messages at the start, so the vectorised engine holds a window of blocks:
    it loads blocks 0 to ``reach`` first, then block k+reach once a message of block k is
    posted, before any message can release it, and drops received ones. Memory then follows
    the messages in flight, not the schedule (a ring of 4096 ranks is 33.5 million
    messages)."""

    count: int
    size: int
    reach: int
    block: Callable[[int], Schedule]
    reducing_threads: int = 1
    ends_in_reach: bool = True
    """Whether every rank's last receive lies in the last ``reach`` blocks (the last block of a
    ring pass holds every rank's last step), so that a phase after it reaches back no further."""
    traced: bool = False
    """Whether the schedule is a program's trace (:mod:`simulator.algorithms.trace`) because
    the algorithm has no hand-written builder: ``engine: auto`` leaves those to SimPy, as it did
    before traces existed (:func:`simulator.engine.vector.declines`)."""
    reduces: bool = True
    """Whether a block holds a reducing message, known without building them: channels side
    by side (:meth:`channels`) count the reducing threads of those that reduce only, as
    :meth:`Schedule.concat` does."""

    @staticmethod
    def whole(schedule: Schedule, traced: bool = False) -> Blocks:
        """A schedule built at once, as one block."""
        return Blocks(1, schedule.size, 0, lambda _: schedule, schedule.reducing_threads,
                      traced=traced, reduces=bool(schedule.reduce.any()))

    @staticmethod
    def apart(parts: Sequence[Blocks]) -> Blocks:
        """:meth:`Schedule.apart` a block at a time: block k joins every part's block k (the
        parts' own numberings mapped to the joint one)."""
        if all(part.count == 1 for part in parts):
            return Blocks.whole(Schedule.apart([part.block(0) for part in parts]))
        count = max(part.count for part in parts)
        aligned = all(part.count == count and part.ends_in_reach for part in parts)
        return Blocks(count, sum(part.size for part in parts), max(part.reach for part in parts),
                      _Apart(parts), max((part.reducing_threads for part in parts), default=1),
                      aligned, reduces=any(part.reduces for part in parts))

    @staticmethod
    def channels(parts: Sequence[Blocks]) -> Blocks:
        """:meth:`Schedule.concat` of channels' schedules, each of one thread, a block at a
        time: block k joins every channel's block k, channel c's messages on thread c and its
        own connections, so that C channels of a ring hold a window of blocks each, not their
        whole schedules (a 1,024-GPU ring on 8 channels is 16.8 million messages). The
        reducing threads are counted as :meth:`Schedule.concat` counts them, over the
        channels that reduce."""
        count = max(part.count for part in parts)
        aligned = all(part.count == count and part.ends_in_reach for part in parts)
        return Blocks(count, sum(part.size for part in parts), max(part.reach for part in parts),
                      _Apart(parts, threaded=True),
                      sum(part.reducing_threads for part in parts if part.reduces), aligned,
                      reduces=any(part.reduces for part in parts))

    @staticmethod
    def sequence(phases: Sequence[Schedule | Blocks], ranks: int) -> Blocks:
        """:meth:`Schedule.sequence` of phases of one thread per rank, a block at a time: a
        phase's opening pointers (:data:`NONE`) go to the rank's last receive, and a
        connection's first message to the end of its chain, in the phases before. A phase's
        first block reaches back over the phase before it: ``reach`` blocks where that phase
        ends in reach (:attr:`Blocks.ends_in_reach`), else all of it. So every rank of a phase
        must receive in the phase before, and only a phase's first block may open (as in
        ``hierarchical``); the engine refuses, with an AlgorithmError, a block that reaches
        further."""
        blocks = [phase if isinstance(phase, Blocks) else Blocks.whole(phase) for phase in phases
                  if phase.size > 0]
        if all(phase.count == 1 for phase in blocks):
            return Blocks.whole(Schedule.sequence([phase.block(0) for phase in blocks], ranks))
        reach = max(1, *(phase.reach for phase in blocks),
                    *(phase.reach if phase.ends_in_reach else phase.count
                      for phase in blocks[:-1]))
        return Blocks(sum(phase.count for phase in blocks), sum(phase.size for phase in blocks),
                      reach, _Sequence(blocks, ranks),
                      max(phase.reducing_threads for phase in blocks), blocks[-1].ends_in_reach,
                      reduces=any(phase.reduces for phase in blocks))

    def schedule(self) -> Schedule:
        """Every block, as one schedule (for tests and composition)."""
        if self.count == 1:
            return self.block(0)
        parts = [self.block(k) for k in range(self.count)]
        joined: dict[str, Any] = {name: np.concatenate([getattr(part, name) for part in parts])
                                  for name in ARRAYS}
        thread = (None if all(part.thread is None for part in parts)
                  else np.concatenate([part.threads for part in parts]))
        return Schedule(**joined, reducing_threads=self.reducing_threads, thread=thread)


class _InOrder:
    """Blocks built in order, each from the state the blocks before it left: block 0 starts
    over (:meth:`_reset`), any other must be the next one."""

    made = 0

    def _reset(self) -> None:
        raise NotImplementedError

    def _build(self, k: int) -> Schedule:
        raise NotImplementedError

    def __call__(self, k: int) -> Schedule:
        if k == 0:
            self._reset()
        if k != self.made:
            raise AlgorithmError(f"blocks are built in order: asked for block {k} after "
                                 f"{self.made}")
        self.made += 1
        return self._build(k)


class _Apart(_InOrder):
    """The blocks of :meth:`Blocks.apart`, built in order (block 0 starts over); ``threaded``,
    those of :meth:`Blocks.channels`: part c's messages on thread c."""

    def __init__(self, parts: Sequence[Blocks], threaded: bool = False) -> None:
        self.parts = parts
        self.threaded = threaded
        self.reach = max(part.reach for part in parts)
        self._reset()

    def _reset(self) -> None:
        self.made = 0
        # per part, where each of its blocks so far starts, in its own numbering and the joint
        # one (a sequence's first message on a connection follows one many blocks back)
        self.own = [np.zeros(part.count + 1, dtype=np.int64) for part in self.parts]
        self.joint = [np.zeros(part.count, dtype=np.int64) for part in self.parts]
        self.end = 0

    def _build(self, k: int) -> Schedule:
        blocks: list[Schedule] = []
        threads: list[Index] = []
        for c, (part, own, joint) in enumerate(zip(self.parts, self.own, self.joint,
                                                   strict=True)):
            if k >= part.count:
                continue
            block = part.block(k)
            joint[k], own[k + 1] = self.end, own[k] + block.size
            self.end += block.size
            starts, at = own[:k + 1], joint[:k + 1]
            posted = block.posted_after
            if ((posted >= 0) & (posted < starts[max(0, k - self.reach)])).any():
                raise AlgorithmError(f"a part of Blocks.apart reaches back more than its "
                                     f"{self.reach} blocks")

            def mapped(pointer: Index, starts: Index = starts, at: Index = at) -> Index:
                which = np.maximum(np.searchsorted(starts, pointer, side="right") - 1, 0)
                joined: Index = np.where(pointer >= 0, at[which] + pointer - starts[which], NONE)
                return joined

            blocks.append(replace(block, posted_after=mapped(posted),
                                  connection_previous=mapped(block.connection_previous),
                                  receive_previous=mapped(block.receive_previous)))
            threads.append(np.full(block.size, c, dtype=np.int64) if self.threaded
                           else block.threads)
            if self.threaded and block.threads.any():
                raise AlgorithmError("Blocks.channels takes channels of one thread each")
        if not blocks:
            return Schedule.empty()
        joined: dict[str, Any] = {name: np.concatenate([getattr(b, name) for b in blocks])
                                  for name in ARRAYS}
        return Schedule(**joined, thread=np.concatenate(threads))


class _Sequence(_InOrder):
    """The blocks of :meth:`Blocks.sequence`, built in order (block 0 starts over)."""

    def __init__(self, phases: Sequence[Blocks], ranks: int) -> None:
        self.phases = phases
        self.ranks = ranks
        self._reset()

    def _reset(self) -> None:
        self.made = 0
        self.phase, self.within, self.offset = 0, 0, 0  # phase, its block, its first message
        self.next = 0  # the first message of the next block
        self.last = np.full(self.ranks, NONE, dtype=np.int64)  # before the phase
        self.ends = self.last.copy()  # in the phase so far
        self.tails, self.phase_tails = _Tails(), _Tails()

    def _build(self, k: int) -> Schedule:
        while self.within == self.phases[self.phase].count:  # the phase is over: open the next
            self.last = np.where(self.ends >= 0, self.ends, self.last)
            self.tails.update(self.phase_tails.keys, self.phase_tails.index)
            self.phase_tails = _Tails()
            self.phase, self.within, self.offset = self.phase + 1, 0, self.next
        block = self.phases[self.phase].block(self.within)
        self.within += 1
        if block.threads.any():
            raise AlgorithmError("Blocks.sequence takes phases of one thread per rank")
        key = block.src * self.ranks + block.dst
        offset = self.offset

        def opened(pointer: Index, rank: Index, before: Callable[[Index], Index]) -> Index:
            """Pointers in the joint numbering; the phase's opening ones (NONE) to ``before``."""
            shifted: Index = pointer + offset
            none = pointer < 0
            if none.any():
                shifted[none] = before(rank[none])
            return shifted

        def last(rank: Index) -> Index:
            before: Index = self.last[rank]
            return before

        connection = opened(block.connection_previous, key, self.tails.behind)
        index = self.next + np.arange(block.size, dtype=np.int64)
        here = self.next - offset  # the block's first message, in the phase's numbering
        tail = np.flatnonzero(_last_of_chains(block.connection_previous - here))
        self.phase_tails.update(key[tail], index[tail])  # a later block's chain end wins
        ending = np.flatnonzero(_last_of_chains(block.receive_previous - here))
        self.ends[block.dst[ending]] = index[ending]
        self.next += block.size
        return Schedule(block.src, block.dst, block.send_start, block.send_stop,
                        block.recv_start, block.recv_stop, block.reduce,
                        opened(block.posted_after, block.src, last), connection,
                        opened(block.receive_previous, block.dst, last))


@dataclass(frozen=True)
class Together:
    """Phases run at once, each as its own thread of every rank in it (``comm.parallel``), on
    channels of their own (separate connections); a :meth:`Schedule.sequence` step."""

    branches: tuple[Schedule, ...]
    channels: tuple[int, ...]


def _ends(schedule: Schedule, offset: int) -> np.ndarray:
    """(rank, message index + offset) of every receive no other receive of its thread follows:
    where each thread of each rank ends."""
    last = np.flatnonzero(_last_of_chains(schedule.receive_previous))
    return np.stack([schedule.dst[last], last + offset], axis=1)


def _last_of_chains(previous: Index) -> np.ndarray:
    """Which entries no other entry names as its predecessor: the last of each chain."""
    followed = np.zeros(len(previous), dtype=bool)
    followed[previous[previous >= 0]] = True
    last: np.ndarray = ~followed
    return last


def _joins(ends: np.ndarray, offset: int) -> tuple[Schedule, np.ndarray]:
    """For each rank that ends several threads, join markers numbered from ``offset``: marker i
    is posted after the rank's thread end i (or its marker before) and received after thread end
    i+1, so the rank's last marker completes when every thread has. Returns the markers and
    (rank, last marker) of each joined rank."""
    none = (Schedule.empty(), np.zeros((0, 2), dtype=np.int64))
    if len(ends) == 0:
        return none
    ends = ends[np.lexsort((ends[:, 1], ends[:, 0]))]
    rank, end = ends[:, 0], ends[:, 1]
    first = np.r_[True, rank[1:] != rank[:-1]]
    joined = np.flatnonzero(~first)  # every end but each rank's first gets a marker
    if joined.size == 0:
        return none
    index = offset + np.arange(joined.size, dtype=np.int64)
    chained = ~first[joined - 1]  # the end before was itself joined: follow its marker
    posted = np.where(chained, index - 1, end[joined - 1])
    who = rank[joined]
    nothing = np.zeros(joined.size, dtype=np.int64)
    markers = Schedule(who, who, nothing, nothing, nothing, nothing,
                       np.zeros(joined.size, dtype=bool), posted,
                       np.full(joined.size, NONE, dtype=np.int64), end[joined])
    final = np.r_[who[1:] != who[:-1], True]
    return markers, np.stack([who[final], index[final]], axis=1)


class _Tails:
    """The last message so far on each (channel, sender, receiver) key, kept as sorted arrays."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, dtype=np.int64)
        self.index = np.zeros(0, dtype=np.int64)

    def behind(self, keys: np.ndarray) -> np.ndarray:
        """The last message on each of ``keys`` (-1 where none)."""
        if len(self.keys) == 0:
            return np.full(len(keys), NONE, dtype=np.int64)
        at = np.searchsorted(self.keys, keys)
        found = at < len(self.keys)
        found[found] = self.keys[at[found]] == keys[found]
        behind: np.ndarray = np.where(found, self.index[np.minimum(at, len(self.keys) - 1)], NONE)
        return behind

    def update(self, keys: np.ndarray, index: np.ndarray) -> None:
        """Record ``index`` as the last message on each of ``keys`` (the largest wins)."""
        if len(self.keys):  # keys met before: in place (a ring's every block meets the same)
            at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
            known = self.keys[at] == keys
            slots, latest = at[known], index[known]
            self.index[slots] = np.maximum(self.index[slots], latest)
            if (self.index[slots] < latest).any():  # a key twice: the largest must win
                np.maximum.at(self.index, slots, latest)
            keys, index = keys[~known], index[~known]
            if len(keys) == 0:
                return
        keys, index = np.concatenate([self.keys, keys]), np.concatenate([self.index, index])
        if len(keys) == 0:
            return
        order = np.lexsort((index, keys))
        keys, index = keys[order], index[order]
        latest = np.r_[keys[1:] != keys[:-1], True]
        self.keys, self.index = keys[latest], index[latest]


ARRAYS = tuple(f.name for f in fields(Schedule)
               if f.name not in ("reducing_threads", "thread", "switches"))
"""The per-message arrays of a schedule."""

POINTERS = ("posted_after", "connection_previous", "receive_previous")
"""The arrays of :data:`ARRAYS` that hold message indices (:data:`NONE` for none)."""


@dataclass(frozen=True, eq=False)
class Group:
    """The ranks a collective runs on, what a schedule is built for: the global rank of each
    member (in the group's numbering), the span of the buffer it works on, the element size, the
    scenario's pipeline piece size (None: each algorithm's default), each member's host (None:
    one host), the pieces the execution model streams phases in (``Comm.stream_bytes``) and the
    torus or mesh the members fill, as :attr:`Layout.grid <simulator.model.machine.Layout>`
    (None: none). A program runs on one member's view of it, a
    :class:`~simulator.algorithms.comm.Comm` (:meth:`comms`)."""

    members: Index
    buffer: Span
    itemsize: int = 1
    piece_bytes: int | None = None
    hosts: Index | None = None
    stream_bytes: int | None = None
    grid: Grid | None = None
    machine: Machine | None = None
    """The machine, where a trace must know which switches reduce for a group (None: each
    round in one switch, which the engine finds)."""
    owned: tuple[Span, ...] | None = None
    """Each member's chunk where it is not the buffer's contiguous split (:attr:`Comm.owned
    <simulator.algorithms.comm.Comm.owned>`: a channel's part of every member's chunk)."""
    block_share: int = 1
    """How many groups' blocks run joined into one (C channels side by side,
    :meth:`Blocks.channels`): a ring pass cuts its blocks that many times smaller, so that the
    joined block, and the window of them the engine holds, stays the size of one group's."""

    @property
    def size(self) -> int:
        """How many ranks."""
        return len(self.members)

    @classmethod
    def whole(cls, machine: Machine, count: int, itemsize: int, piece_bytes: int | None = None,
              stream_bytes: int | None = None) -> Group:
        """Every rank of ``machine``, in rank order, on a buffer of ``count`` elements."""
        return cls(np.arange(machine.ranks, dtype=np.int64), Span(0, count), itemsize,
                   piece_bytes, np.array(machine.layout.hosts, dtype=np.int64), stream_bytes,
                   machine.layout.grid, machine)

    @property
    def layout(self) -> Layout:
        """Where the members sit, in the group's numbering: their hosts and grid; the whole
        machine's layout where the group is every rank in rank order (NCCL's rings with it)."""
        machine = self.machine
        if (machine is not None and machine.layout.rings and self.size == machine.ranks
                and bool((self.members == np.arange(self.size)).all())):
            return machine.layout
        return Layout(tuple((self.hosts if self.hosts is not None
                             else np.zeros(self.size, dtype=np.int64)).tolist()), self.grid)

    def comms(self, outboxes: Sequence[Outbox]) -> list[Comm]:
        """Every member's view of this group, in the group's order: member i's communicator
        (rank i of :attr:`size`, this group's buffer, pieces, hosts and grid, the members' global
        ranks) posting to ``outboxes[i]``."""
        layout = self.layout
        members = tuple(self.members.tolist())
        comms = []
        for position, outbox in enumerate(outboxes):
            comm = Comm(position, self.size, self.buffer, itemsize=self.itemsize,
                        piece_bytes=self.piece_bytes, layout=layout, outbox=outbox,
                        stream_bytes=self.stream_bytes)
            comm.members = members
            comm.owned = self.owned
            comms.append(comm)
        return comms

    @property
    def ranks(self) -> int:
        """How many global ranks per-rank arrays must cover (the largest member, plus one)."""
        return int(self.members.max(initial=0)) + 1

    def chunks(self, parts: int) -> tuple[Index, Index]:
        """(starts, stops) of the buffer cut into ``parts`` chunks, as :meth:`Span.split`, or of
        the members' :attr:`owned` chunks, as :meth:`Comm.chunks
        <simulator.algorithms.comm.Comm.chunks>`."""
        if self.owned is not None:
            if parts != len(self.owned):
                raise AlgorithmError(f"{parts} chunks of a channel that holds a part of each of "
                                     f"{len(self.owned)} chunks")
            return (np.array([span.start for span in self.owned], dtype=np.int64),
                    np.array([span.stop for span in self.owned], dtype=np.int64))
        base, extra = divmod(self.buffer.count, parts)
        sizes = np.full(parts, base, dtype=np.int64)
        sizes[:extra] += 1
        stops = self.buffer.start + np.cumsum(sizes)
        return stops - sizes, stops

    def subgroup(self, positions: Sequence[int] | Index, buffer: Span,
                 owned: Sequence[Span] | None = None) -> Group:
        """The group of the members at ``positions`` (this group's numbering), on ``buffer`` or
        on the members' ``owned`` chunks within it (:attr:`owned`); it keeps the grid only where
        the positions are every member (:meth:`Grid.subgroup
        <simulator.model.machine.Grid.subgroup>`)."""
        chosen = np.asarray(positions, dtype=np.int64)
        return Group(self.members[chosen], buffer, self.itemsize, self.piece_bytes,
                     None if self.hosts is None else self.hosts[chosen], self.stream_bytes,
                     None if self.grid is None else self.grid.subgroup(chosen.tolist()),
                     self.machine, None if owned is None else tuple(owned))


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
    sender, receiver = senders[row], receivers[row]
    src, dst = group.members[sender], group.members[receiver]
    return Schedule(src, dst, first, last, first, last, np.full(len(row), reduce),
                    np.full(len(row), NONE, dtype=np.int64),
                    chain(sender * group.size + receiver), chain(receiver))


def chain(keys: Index) -> Index:
    """For each entry, the previous entry with the same key in index order (-1 for the first):
    the pointers of messages that queue in index order, such as a connection's FIFO."""
    order = np.argsort(keys, kind="stable")
    previous = np.full(len(keys), NONE, dtype=np.int64)
    same = keys[order[1:]] == keys[order[:-1]]
    previous[order[1:][same]] = order[:-1][same]
    return previous


