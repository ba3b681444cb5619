"""Schedules traced from programs: every rank's program run once against a recording communicator.

A program (:mod:`simulator.algorithms.comm`) gets nothing back from ``yield``: what it posts and
asks for never depends on when or with what data its requests complete. So running each rank's
generator to its end, recording every request, says everything the SimPy engine would do with
it, and :func:`trace_program` turns that record into the :class:`~simulator.algorithms.schedule.Schedule`
the vectorised engine runs. That makes the trace every algorithm's default schedule
(:meth:`Algorithm.schedule <simulator.algorithms.algorithm.Algorithm.schedule>`); a hand-written
builder is a fast path (numpy for any p instead of Python per message), held equal to the trace
by ``tests/test_trace.py`` through :func:`canonical`.

What each request becomes (the op kinds of a schedule, :class:`~simulator.algorithms.schedule.Op`,
told apart by their endpoints: :attr:`Schedule.kinds`):

- a ``send`` matched to its ``recv`` (the k-th send on a connection, sender to receiver on one
  channel, with the k-th receive on it): a **message** from rank to rank, posted after the
  sender's last request before the send, received after the receiver's last request before the
  receive, queued behind the connection's message before it;
- ``comm.reduce(into, source)``: a **local reduce**, from the rank to itself, reducing: no
  route, so it arrives as it is posted and then holds the GPU as a reducing receive does. It
  reads ``source`` when posted, where the SimPy engine reads it when the reduction ends: the
  same data unless another branch of the rank writes ``source`` in between;
- ``comm.copy(into, source)``: a **local copy**, from the rank to itself, not reducing: it
  reads ``source`` when posted and writes ``into`` as it arrives, at once;
- the end of a ``comm.parallel`` that something follows: **join markers** (from the rank to
  itself, nothing moved, :meth:`Schedule.sequence`'s), one per branch end but the first;
- a flag (``comm.signal`` matched to ``comm.wait``, a message from a rank to itself on a
  connection of its own that moves nothing): a join marker too, posted after the signalling
  thread's last request and received after the waiting thread's;
- ``comm.switch_reduce`` and ``comm.switch_result`` of in-switch reduction (NVLink SHARP, see
  :mod:`simulator.engine.inswitch`): a **switch upload** of each member's span to the group's
  switch (destination ``-1 - g`` for group g of :attr:`Schedule.switches`), queued behind the
  rank's upload before it, and a **switch copy down** of the round's sum to each member (source
  ``-1 - g``), posted when the round's last upload has arrived, queued behind the copy before
  it down that member's link. A round's uploads form one receive chain in the group's order
  (member i's completes after member i-1's), so the chain's last completes when every
  contribution has arrived, as the switch waits for all of them, and sums them in that order.
  Its receivers are every member, or those the contributions name (``switch_reduce(to=...)``,
  ``switch_multicast``): each must take every round's result. A group g of
  :attr:`Schedule.switches` is one series of rounds (contributors, receivers, channel, whether a
  multicast), and it lists the contributors.

Messages are numbered in dependency order (every pointer names an earlier message), by the
longest chain of requests before them, so that a schedule's numbering follows time as a
builder's step-by-step numbering does.

Branches of one ``comm.parallel`` that send to the same peer must do so on channels of their
own (``comm.on_channel``), as :meth:`Comm.parallel <simulator.algorithms.comm.Comm.parallel>`
asks: on one connection, the order of two running branches' sends is decided by time, which a
trace cannot know.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from simulator.algorithms.comm import (
    REDUCE,
    Comm,
    LocalCopy,
    LocalReduce,
    Outbox,
    Parallel,
    Program,
    Recv,
    Send,
    SwitchContribution,
    SwitchKey,
    SwitchResult,
)
from simulator.algorithms.schedule import NONE, Group, Op, Schedule, SwitchEnd
from simulator.errors import AlgorithmError, OverBudget, Wait, deadlock
from simulator.model.machine import Aggregation, Machine
from simulator.model.span import Span

if TYPE_CHECKING:
    from simulator.algorithms.algorithm import Algorithm

_Connection = tuple[int, int, tuple[int, ...]]   # (sender, receiver, channel path)
_Path = tuple[tuple[int, int], ...]               # a thread: (parallel, branch) from the top


_LIMIT: ContextVar[int | None] = ContextVar("trace_limit", default=None)
"""The most ops a trace may record here (None: no limit): :func:`limited`."""


@contextmanager
def limited(ops: int | None) -> Iterator[None]:
    """Traces made inside stop with :class:`~simulator.errors.OverBudget` once they would
    record more than ``ops`` ops (None: no limit): a trace holds Python objects per op until it
    is done, and only running the programs tells how many there are, so the engine bounds the
    memory a trace may take instead of predicting it."""
    token = _LIMIT.set(ops)
    try:
        yield
    finally:
        _LIMIT.reset(token)


def trace(algorithm: Algorithm, group: Group, name: str | None = None) -> Schedule:
    """``algorithm``'s program on every member of ``group``, as a schedule."""
    return trace_program(group, algorithm.program, name or algorithm.name)


def trace_program(group: Group, program: Callable[[Comm], Program], name: str) -> Schedule:
    """The schedule of ``program(comm)`` run by every member of ``group`` (``name`` says whose,
    in errors): AlgorithmError where the programs deadlock or leave messages unreceived, with
    the SimPy engine's words."""
    recording = _Recording(name, group.machine)
    outboxes = [Outbox() for _ in range(group.size)]
    for comm, outbox in zip(group.comms(outboxes), outboxes, strict=True):
        recording.thread(comm.members[comm.rank], outbox, program(comm), NONE, ())
    return recording.schedule()


@dataclass(eq=False)
class _Join:
    """Where a rank stands after a ``comm.parallel`` whose branches ended at several requests:
    the join markers waiting for all of them, made the first time something follows."""

    rank: int
    ends: list[int]
    marker: int | None = None


_Position = int | _Join
"""What a thread's next request waits for: a request (its op number, NONE at the start), or
the ends of the branches of a parallel it ran."""


def _same(a: _Position, b: _Position) -> bool:
    """Whether two positions are one (joins by identity: two joins of equal ends are not)."""
    return a is b if isinstance(a, _Join) or isinstance(b, _Join) else a == b


@dataclass
class _Ops:
    """The ops of a trace as they are recorded, one entry per op in each list (op numbers are
    creation order; :meth:`_Recording.schedule` renumbers them)."""

    name: str
    src: list[int] = field(default_factory=list)
    dst: list[int] = field(default_factory=list)
    send: list[Span] = field(default_factory=list)
    recv: list[Span] = field(default_factory=list)
    reduce: list[bool] = field(default_factory=list)
    posted_after: list[int] = field(default_factory=list)
    connection_previous: list[int] = field(default_factory=list)
    receive_previous: list[int] = field(default_factory=list)
    channel: list[int] = field(default_factory=list)
    limit: int | None = field(default_factory=_LIMIT.get)
    """The most ops it may record (:func:`limited`)."""

    def op(self, src: int, dst: int, send: Span, recv: Span, reduce: bool, posted_after: int,
           receive_previous: int, channel: int = 0) -> int:
        """A new op (its connection predecessor is filled in when messages are matched);
        OverBudget beyond :attr:`limit`."""
        if self.limit is not None and len(self.src) >= self.limit:
            raise OverBudget("entries of a traced schedule", len(self.src) + 1, self.limit)
        self.src.append(src)
        self.dst.append(dst)
        self.send.append(send)
        self.recv.append(recv)
        self.reduce.append(reduce)
        self.posted_after.append(posted_after)
        self.connection_previous.append(NONE)
        self.receive_previous.append(receive_previous)
        self.channel.append(channel)
        return len(self.src) - 1

    def at(self, position: _Position) -> int:
        """The op a request at ``position`` waits for, making a join's markers if need be:
        marker i is posted after end i-1 (or the marker before) and received after end i, so
        the last completes when every end has (:meth:`Schedule.sequence`'s join markers)."""
        if isinstance(position, int):
            return position
        if position.marker is None:
            rank, ends = position.rank, position.ends
            marker = ends[0]
            for end in ends[1:]:
                marker = self.op(rank, rank, Span(0, 0), Span(0, 0), False, marker, end)
            position.marker = marker
        return position.marker

    def schedule(self, reducing_threads: int, threads: np.ndarray | None,
                 switches: tuple[SwitchEnd, ...]) -> Schedule:
        """The ops as a schedule, in creation order (``threads``: each channel number's thread,
        their :attr:`Schedule.thread`; None: one thread)."""

        def column(values: Sequence[int | bool]) -> np.ndarray:
            return np.array(values, dtype=np.int64)

        return Schedule(
            column(self.src), column(self.dst), column([s.start for s in self.send]),
            column([s.stop for s in self.send]), column([s.start for s in self.recv]),
            column([s.stop for s in self.recv]), column(self.reduce).astype(bool),
            column(self.posted_after), column(self.connection_previous),
            column(self.receive_previous), reducing_threads=reducing_threads,
            thread=threads[column(self.channel)] if threads is not None else None,
            switches=switches)


@dataclass
class _Switches:
    """The in-switch reductions of a trace: each series of rounds (contributors, receivers,
    channel) numbered g, its endpoints, and per (group, rank) its uploads and the copies down
    it waits for, as recorded in ``ops``; matched into rounds once every program ended."""

    ops: _Ops
    machine: Machine | None = None
    """Where a group's rounds may reduce over several switches (None: each in one switch)."""
    switches: dict[SwitchKey, int] = field(default_factory=dict)
    """Each series of in-switch rounds (contributors, receivers, channel), numbered g: its
    endpoint, or its tree's root's (:attr:`ends`)."""
    ends: list[SwitchEnd] = field(default_factory=list)
    """Every switch endpoint, numbered as ``-1 - g`` names it."""
    trees: dict[int, tuple[Aggregation, dict[str, tuple[int, int]], dict[int, Aggregation]]] = \
        field(default_factory=dict)
    """Per series g whose rounds reduce over several switches: the tree, for each switch below
    the root its endpoints that sum and send up and that pass the result down, and the switch
    each rank enters by."""
    uploads: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    """Per (group, rank), the upload op of each round, in order."""
    results: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    """Per (group, rank), the copy-down op of each round the rank waits for, in order."""

    @property
    def name(self) -> str:
        """Whose trace (in errors)."""
        return self.ops.name

    def contribute(self, rank: int, post: SwitchContribution, after: int) -> None:
        """An upload of ``post.span`` to the switch of ``post.group``, behind the rank's last."""
        g = self.switch(post.key)
        mine = self.uploads.setdefault((g, rank), [])
        op = self.ops.op(rank, -1 - self.entry(g, rank), post.span, post.span, False, after,
                         NONE)
        self.ops.connection_previous[op] = mine[-1] if mine else NONE
        mine.append(op)

    def result(self, g: int, rank: int, op: int) -> None:
        """Op ``op`` of ``rank`` takes the next result of series g (:meth:`switch`)."""
        self.results.setdefault((g, rank), []).append(op)

    def switch(self, key: SwitchKey) -> int:
        """The number of the in-switch reduction group of the rounds ``key`` (its endpoint, or
        its tree's root's, made with the tree's other endpoints the first time)."""
        if key in self.switches:
            return self.switches[key]
        g = len(self.ends)
        self.switches[key] = g
        group = key[0]
        tree = None if self.machine is None or len(group) < 2 else \
            self.machine.aggregation_for(group, self.name)
        if tree is None or tree.depth == 1:
            self.ends.append(SwitchEnd(group))
            return g
        self.ends.append(SwitchEnd(group, tree.switch.name, _delay(tree)))
        below: dict[str, tuple[int, int]] = {}
        for node, parent in tree.walk():
            if parent is not None:
                below[node.switch.name] = (len(self.ends), len(self.ends) + 1)
                self.ends.append(SwitchEnd(node.ranks, node.switch.name, _delay(node)))
                self.ends.append(SwitchEnd(node.ranks, node.switch.name, 0.0))
        self.trees[g] = (tree, below, tree.leaves())
        return g

    def entry(self, g: int, rank: int) -> int:
        """The endpoint ``rank`` uploads to in series g: the switch it enters the tree by."""
        if g not in self.trees:
            return g
        tree, below, leaf_of = self.trees[g]
        leaf = leaf_of[rank]
        return g if leaf is tree else below[leaf.switch.name][0]

    def match(self) -> None:
        """Round k of a group: every member's k-th upload, chained in the group's order, and
        the copies down to its receivers, who wait for its result, posted after the last
        upload, each behind the copy of round k-1 down the same link."""
        ops = self.ops
        for (group, receivers, *_), g in self.switches.items():
            uploads = [self.uploads.get((g, rank), []) for rank in group]
            rounds = max(len(u) for u in uploads)
            if min(len(u) for u in uploads) < rounds:
                raise AlgorithmError(f"{self.name}: {rounds - min(len(u) for u in uploads)} "
                                     "in-switch reduction(s) missed contributions from some "
                                     "ranks")
            for k in range(rounds):
                span = ops.send[uploads[0][k]]
                for rank, mine in zip(group, uploads, strict=True):
                    if ops.send[mine[k]] != span:
                        raise AlgorithmError(f"{self.name}: rank {rank} contributed "
                                             f"{ops.send[mine[k]]} to in-switch reduction {k}, "
                                             f"others {span}")
                if g not in self.trees:
                    for before, after in itertools.pairwise(mine[k] for mine in uploads):
                        ops.receive_previous[after] = before
            strays = sorted({rank for h, rank in self.results if h == g} - set(receivers))
            if strays:
                raise AlgorithmError(f"{self.name}: deadlock: ranks {strays[:8]} wait for "
                                     "in-switch results never sent to them")
            for rank in receivers:
                results = self.results.get((g, rank), [])
                if len(results) < rounds:
                    raise AlgorithmError(f"{self.name}: rank {rank} takes {len(results)} of the "
                                         f"{rounds} in-switch results sent to it")
                if len(results) > rounds:
                    raise AlgorithmError(f"{self.name}: deadlock: ranks {[rank]} wait for "
                                         "messages that are never sent")
                previous = NONE
                for k, op in enumerate(results):
                    span = ops.send[uploads[0][k]]
                    if span.count != ops.recv[op].count:
                        raise AlgorithmError(f"{self.name}: rank {rank} takes in-switch result "
                                             f"{k} of {span.count} elements into a span of "
                                             f"{ops.recv[op].count}")
                    ops.src[op], ops.send[op] = -1 - g, span
                    ops.posted_after[op] = uploads[-1][k]
                    ops.connection_previous[op] = previous
                    previous = op
            if g in self.trees:
                self.through_tree(g, group, receivers, uploads, rounds)

    def through_tree(self, g: int, group: tuple[int, ...], receivers: tuple[int, ...],
                     uploads: list[list[int]], rounds: int) -> None:
        """Round by round, a series' ops over its tree of switches, as
        :class:`~simulator.engine.inswitch.InSwitchReductions` moves them: each switch sums
        its children's uploads (chained in its children's order) and sends the sum up to its
        parent's endpoint; the root sends the total down to each child switch with receivers
        below it, which passes it on, and to its own receivers; each link down carries one
        copy a round, behind the round before's."""
        ops = self.ops
        tree, below, _ = self.trees[g]
        upload = {rank: mine for rank, mine in zip(group, uploads, strict=True)}
        wanted = set(receivers)
        forwards: dict[str, int] = {}  # the last forward (or copy down) over each switch link
        downs: dict[str, int] = {}

        def summed(node: Aggregation, k: int, span: Span) -> int:
            """Round k's children's ops into ``node``, chained; returns the last."""
            into = g if node is tree else below[node.switch.name][0]
            chained = []
            for child in node.children:
                if isinstance(child, int):
                    chained.append(upload[child][k])
                    continue
                last = summed(child, k, span)
                op = ops.op(-1 - below[child.switch.name][0], -1 - into, span, span, False,
                            last, NONE)
                ops.connection_previous[op] = forwards.get(child.switch.name, NONE)
                forwards[child.switch.name] = op
                chained.append(op)
            for before, after in itertools.pairwise(chained):
                ops.receive_previous[after] = before
            return chained[-1]

        def passed(node: Aggregation, k: int, span: Span, source: int, after: int) -> None:
            """Round k's result from endpoint ``source`` (posted after op ``after``) down to
            ``node``'s receivers, through the switches below it that have some."""
            for child in node.children:
                if isinstance(child, int):
                    if child in wanted:
                        op = self.results[(g, child)][k]
                        ops.src[op], ops.posted_after[op] = -1 - source, after
                    continue
                if not wanted & set(child.ranks):
                    continue
                down = below[child.switch.name][1]
                op = ops.op(-1 - source, -1 - down, span, span, False, after, NONE)
                ops.connection_previous[op] = downs.get(child.switch.name, NONE)
                downs[child.switch.name] = op
                passed(child, k, span, down, op)

        for k in range(rounds):
            span = ops.send[uploads[0][k]]
            passed(tree, k, span, g, summed(tree, k, span))


@dataclass
class _Recording:
    """A trace as its programs run: each thread's requests recorded as ops (:class:`_Ops`),
    sends and receives kept per connection until they are matched, in-switch reductions
    (:class:`_Switches`), and the threads that reduce; :meth:`schedule` turns it into the
    schedule."""

    name: str
    machine: Machine | None = None
    """Where a group's rounds may reduce over several switches (None: each in one switch)."""
    ops: _Ops = field(init=False)
    rounds: _Switches = field(init=False)
    sends: dict[_Connection, list[tuple[Span, int]]] = field(default_factory=dict)
    """Per connection, each posted send's span and what it was posted after, in posting order."""
    receives: dict[_Connection, list[int]] = field(default_factory=dict)
    """Per connection, the op of each receive, in request order."""
    channel_numbers: dict[tuple[int, ...], int] = field(default_factory=dict)
    direct: set[_Path] = field(default_factory=set)
    """Threads that reduce themselves (on any rank)."""
    branches: dict[_Path, dict[int, set[int]]] = field(default_factory=dict)
    """Per thread, each of its parallels' branches (on any rank)."""

    def __post_init__(self) -> None:
        """The ops, and the in-switch reductions recorded among them."""
        self.ops = _Ops(self.name)
        self.rounds = _Switches(self.ops, self.machine)

    def thread(self, rank: int, outbox: Outbox, program: Program, start: _Position,
               path: _Path) -> _Position:
        """Record one thread of ``rank`` (its program, or a branch of a parallel) from
        ``start``; returns where it ends."""
        ops = self.ops
        position = start
        parallels = itertools.count()
        for request in program:
            self.posts(rank, outbox, position)
            if isinstance(request, Parallel):
                k = next(parallels)
                self.branches.setdefault(path, {}).setdefault(k, set()).update(
                    range(len(request.programs)))
                ends: list[int] = []
                for b, branch in enumerate(request.programs):
                    end = self.thread(rank, outbox, branch, position, (*path, (k, b)))
                    if not _same(end, position):
                        ends.extend(end.ends if isinstance(end, _Join) and end.marker is None
                                    else [ops.at(end)])
                position = (position if not ends else ends[0] if len(ends) == 1
                            else _Join(rank, ends))
            elif isinstance(request, Recv):
                after = ops.at(position)
                op = ops.op(request.peer, rank, request.into, request.into,
                            request.combine is REDUCE, NONE, after,
                            self.channel_of(request.channel))
                self.receives.setdefault((request.peer, rank, request.channel), []).append(op)
                position = op
                if request.combine is REDUCE:
                    self.direct.add(path)
            elif isinstance(request, LocalReduce):
                after = ops.at(position)
                position = ops.op(rank, rank, request.source, request.into, True, after, after)
                self.direct.add(path)
            elif isinstance(request, LocalCopy):
                after = ops.at(position)
                position = ops.op(rank, rank, request.source, request.into, False, after, after)
            elif isinstance(request, SwitchResult):
                g = self.rounds.switch(request.key)
                position = ops.op(NONE, rank, request.into, request.into, False, NONE,
                                  ops.at(position))
                self.rounds.result(g, rank, position)
            else:
                raise AlgorithmError(f"{self.name}: rank {rank} yielded {request!r}; expected "
                                     "comm.recv(...), comm.wait(...), comm.reduce(...), "
                                     "comm.copy(...), comm.switch_result(...) or "
                                     "comm.parallel(...)")
        self.posts(rank, outbox, position)
        return position

    def posts(self, rank: int, outbox: Outbox, position: _Position) -> None:
        """Record what ``rank`` posted since its last request, each posted after ``position``."""
        for post in outbox.take():
            after = self.ops.at(position)
            if isinstance(post, Send):
                self.sends.setdefault((rank, post.peer, post.channel), []).append(
                    (post.span, after))
                self.channel_of(post.channel)
            else:
                self.rounds.contribute(rank, post, after)

    def channel_of(self, channel: tuple[int, ...]) -> int:
        """The number of a channel path (first seen first)."""
        return self.channel_numbers.setdefault(channel, len(self.channel_numbers))

    def threads(self) -> np.ndarray | None:
        """Each channel number's :attr:`Schedule.thread` (None: one path): its path's place
        among the paths in order, so that threads sort as their channels do (the order a
        network proxy takes the messages handed it at one time in:
        :class:`simulator.engine.fabric._Proxies`)."""
        if len(self.channel_numbers) <= 1:
            return None
        threads = np.empty(len(self.channel_numbers), dtype=np.int64)
        threads[[self.channel_numbers[path] for path in sorted(self.channel_numbers)]] = \
            np.arange(len(self.channel_numbers))
        return threads

    # -- the schedule --------------------------------------------------------------------------

    def schedule(self) -> Schedule:
        """Match sends to receives and uploads to rounds, check, and number in dependency order
        (:func:`dependency_levels`, creation order among equals); AlgorithmError (a deadlock)
        where ops wait in a circle."""
        self.match_messages()
        self.rounds.match()
        created = self.ops.schedule(self.reducing_threads(), self.threads(),
                                    tuple(self.rounds.ends))
        levels, stuck_ops = dependency_levels(created)
        if stuck_ops.size:
            stuck = sorted({self.ops.dst[m] for m in stuck_ops.tolist() if self.ops.dst[m] >= 0})
            raise deadlock(self.name, stuck, self.first_waits(set(stuck_ops.tolist())))
        return created.renumbered(np.lexsort((np.arange(created.size), levels)))

    def match_messages(self) -> None:
        """The k-th send on each connection is the k-th receive on it (MPI's non-overtaking
        rule): give each receive its sender's span and posting, and its connection's message
        before it."""
        ops = self.ops
        unsent: list[_Connection] = []
        for connection in sorted(set(self.sends) | set(self.receives)):
            sends = self.sends.get(connection, [])
            receives = self.receives.get(connection, [])
            src, dst, _ = connection
            previous = NONE
            for (span, after), op in zip(sends, receives, strict=False):
                if span.count != ops.recv[op].count:
                    raise AlgorithmError(f"{self.name}: rank {dst} received {span.count} "
                                         f"elements from rank {src} into a span of "
                                         f"{ops.recv[op].count}")
                ops.send[op], ops.posted_after[op] = span, after
                ops.connection_previous[op] = previous
                previous = op
            if len(receives) > len(sends):
                unsent.append(connection)
        if unsent:
            waits = [self.wait(connection, k, op) for connection in unsent
                     for k, op in enumerate(self.receives[connection])
                     if k >= len(self.sends.get(connection, []))]
            raise deadlock(self.name, sorted({dst for _, dst, _ in unsent}), waits)
        unreceived = sorted((src, dst) for (src, dst, channel), sends in self.sends.items()
                            for _ in sends[len(self.receives.get((src, dst, channel), [])):])
        if unreceived:
            src, dst = unreceived[0]
            raise AlgorithmError(f"{self.name}: rank {src} sent {len(unreceived)} message(s) "
                                 f"never received (first to rank {dst})")

    def wait(self, connection: _Connection, k: int, op: int) -> Wait:
        """What receive ``op``, the (k+1)-th on ``connection``, waits for."""
        src, dst, channel = connection
        recv = self.ops.recv[op]
        return Wait(dst, src, k + 1, ".".join(map(str, channel)), recv.start, recv.stop)

    def first_waits(self, stuck: set[int]) -> list[Wait]:
        """Each rank's first receive among the ``stuck`` ops: what it waits for."""
        first: dict[int, tuple[int, Wait]] = {}
        for connection, receives in self.receives.items():
            for k, op in enumerate(receives):
                if op in stuck and (connection[1] not in first or op < first[connection[1]][0]):
                    first[connection[1]] = (op, self.wait(connection, k, op))
        return [wait for _, wait in first.values()]

    def reducing_threads(self) -> int:
        """How many threads may reduce at once, as builders count them: a thread that reduces
        counts one, a parallel the sum of its branches that reduce (on any rank), and a thread
        the most of itself and its parallels."""

        def reduces(path: _Path) -> bool:
            return path in self.direct or any(
                reduces((*path, (k, b))) for k, bs in self.branches.get(path, {}).items()
                for b in bs)

        def threads(path: _Path) -> int:
            alone = 1 if path in self.direct else 0
            return max([alone, *(sum(threads((*path, (k, b))) for b in sorted(bs)
                                     if reduces((*path, (k, b))))
                                 for k, bs in self.branches.get(path, {}).items())])

        return max(1, threads(()))


def _delay(node: Aggregation) -> float:
    """What a switch of a reduction's tree waits before sending its sum on: its reduction
    latency where it sums two or more children."""
    return node.switch.reduction_latency_s if len(node.children) > 1 else 0.0


def canonical(schedule: Schedule) -> dict[str, object]:
    """``schedule`` in a numbering of its own, so that two schedules of one program compare
    equal array for array however their builders numbered the messages: every op but the join
    markers (from a rank to itself, reducing nothing), ordered by the longest chain of ops
    before it, then sender, receiver, spans and whether it reduces; its pointers in that
    numbering (local copies are ops, as they move data), a pointer to a join marker (a flag is
    one) as the set of ops the markers wait for (numbered
    after the ops, sets in sorted order), as the markers' order and count say nothing the
    engine could tell apart. ValueError where two ops are alike in all of that (the numbering
    would be ambiguous). Also the switch groups and :attr:`Schedule.reducing_threads` (at
    least one: a schedule that reduces nowhere counts none or one alike); not
    :attr:`Schedule.thread`, which only keeps connections apart when schedules are
    composed."""
    marker = schedule.kinds == Op.JOIN
    pointers = {name: getattr(schedule, name).tolist()
                for name in ("posted_after", "connection_previous", "receive_previous")}
    resolved: dict[int, tuple[int, ...]] = {}

    def waits_for(p: int) -> tuple[int, ...]:
        """The ops (not markers) that pointer ``p`` waits for."""
        if p < 0:
            return ()
        if not marker[p]:
            return (p,)
        if p not in resolved:
            resolved[p] = ()  # a marker circle waits for nothing it could reach
            resolved[p] = tuple(sorted({*waits_for(pointers["posted_after"][p]),
                                        *waits_for(pointers["receive_previous"][p])}))
        return resolved[p]

    real = np.flatnonzero(~marker).tolist()
    waits = {name: {m: waits_for(values[m]) for m in real} for name, values in pointers.items()}
    level = _levels(real, waits)
    columns = ("src", "dst", "send_start", "send_stop", "recv_start", "recv_stop", "reduce")
    values = {name: getattr(schedule, name) for name in columns}
    keys = [(level[m], *(int(values[name][m]) for name in columns)) for m in real]
    order = sorted(range(len(real)), key=keys.__getitem__)
    if any(keys[a] == keys[b] for a, b in itertools.pairwise(order)):
        raise ValueError("two ops are alike in level, endpoints and spans: no canonical order")
    number = {real[i]: n for n, i in enumerate(order)}
    joins = sorted({tuple(sorted(number[m] for m in w)) for by in waits.values()
                    for w in by.values() if len(w) > 1})
    join_number = {join: len(real) + j for j, join in enumerate(joins)}

    def encoded(w: tuple[int, ...]) -> int:
        if not w:
            return NONE
        if len(w) == 1:
            return number[w[0]]
        return join_number[tuple(sorted(number[m] for m in w))]

    ordered = [real[i] for i in order]
    form: dict[str, object] = {name: values[name][ordered] for name in columns}
    for name, by in waits.items():
        form[name] = np.array([encoded(by[m]) for m in ordered], dtype=np.int64)
    form["joins"] = joins
    form["switches"] = schedule.switches
    form["reducing_threads"] = max(1, schedule.reducing_threads)
    return form


def _levels(ops: list[int], waits: dict[str, dict[int, tuple[int, ...]]]) -> dict[int, int]:
    """The longest chain of ops before each of ``ops`` (pointers through markers resolved)."""
    level, circle = chain_levels({m: sorted({p for by in waits.values() for p in by[m]})
                                  for m in ops})
    if circle:
        raise ValueError("the schedule's ops wait for each other in a circle")
    return level


def chain_levels(before: dict[int, list[int]]) -> tuple[dict[int, int], list[int]]:
    """Kahn's algorithm over ops and the ops each waits for (``before``, every op a key): the
    longest chain of ops before each op, and the ops left waiting in a circle (none where an
    order exists)."""
    keys = list(before)
    index = {m: i for i, m in enumerate(keys)}
    earlier = [index[p] for ps in before.values() for p in ps]
    later = [i for i, ps in enumerate(before.values()) for _ in ps]
    level, stuck = wave_levels(len(keys), np.array(earlier, dtype=np.int64),
                               np.array(later, dtype=np.int64))
    return dict(zip(keys, level.tolist(), strict=True)), [keys[i] for i in stuck.tolist()]


def dependency_levels(schedule: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """The longest chain of ops before each op of ``schedule``, through its three pointers,
    and the ops left waiting in a circle (:func:`wave_levels`): a trace numbers its ops by
    this level, creation order among equals, and so must a builder held to its numbering."""
    pointers = (schedule.posted_after, schedule.connection_previous, schedule.receive_previous)
    real = [np.flatnonzero(pointer >= 0) for pointer in pointers]  # the edges alone: memory
    earlier = np.concatenate([pointer[ops] for pointer, ops in zip(pointers, real, strict=True)])
    later = np.concatenate(real)
    del real
    return wave_levels(schedule.size, earlier, later)


def wave_levels(ops: int, earlier: np.ndarray, later: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Kahn's algorithm a wave at a time, as arrays: for ``ops`` ops where op ``later[e]``
    waits for op ``earlier[e]`` (an edge may repeat, and counts each time), the longest chain
    of ops before each op, and the ops left waiting in a circle, in increasing order (none
    where an order exists). Wave w holds the ops whose last wait ends in wave w - 1, so an
    op's wave is its longest chain: one pass of numpy per wave, not a Python step per edge."""
    level = np.full(ops, -1, dtype=np.int64)
    left = np.bincount(later, minlength=ops)
    by_earlier = np.argsort(earlier, kind="stable")
    followers = later[by_earlier]
    first = np.searchsorted(earlier[by_earlier], np.arange(ops + 1, dtype=np.int64))
    wave = np.flatnonzero(left == 0)
    depth = 0
    while wave.size:
        level[wave] = depth
        starts, counts = first[wave], first[wave + 1] - first[wave]
        total = int(counts.sum())
        if not total:
            break
        offsets = np.repeat(starts - np.cumsum(counts) + counts, counts)
        reached, times = np.unique(followers[offsets + np.arange(total)], return_counts=True)
        left[reached] -= times
        wave = reached[left[reached] == 0]
        depth += 1
    return level, np.flatnonzero(level < 0)
