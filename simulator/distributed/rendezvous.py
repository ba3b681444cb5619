"""The ranks' threads and how their calls meet: each rank runs on its own thread and waits in a
call; the thread of :func:`~simulator.distributed.spawn` acts whenever every rank still running
waits, so a run never hangs on a mistake in the calls. It first matches the sends and receives
posted (:mod:`~simulator.distributed.p2p`), starts those messages and releases the ranks whose
messages arrived; failing that, it answers the ranks polling a work; failing that, every rank being in a
collective, it checks that their calls match (else :class:`CollectiveMismatch`), has it
simulated and releases them; failing that, it runs the messages to their next arrival; and a
rank waiting on a message none will send stops the run with :class:`Stalled`. It also stops
the run when a rank raised (:class:`RankError`). Each rank keeps a clock: where its
next call starts in simulated time. A rank stuck on something else (a lock, a barrier of its own,
a queue) is the watchdog's: when every rank left either waits in a call or has sat still for
``timeout`` seconds, the run stops with :class:`Stalled`, naming who waits for whom."""

from __future__ import annotations

import contextlib
import math
import os
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from types import FrameType
from typing import Any, Protocol

import numpy as np

import simulator.limits as limits
from simulator.distributed.p2p import Mailbox, Op, whom
from simulator.errors import InputError, Problem, SimulatorError
from simulator.model.collective import ROOT, Collective
from simulator.model.reduction import ReduceOp as ModelOp

SOURCE = "dist.spawn"
"""What error messages about :func:`~simulator.distributed.spawn`'s arguments name as their
source."""

DEFAULT_TIMEOUT_S = 60.0
"""How long every rank not in a call must sit still before the watchdog stops a run. A rank
that computes (its thread uses CPU time) or runs Python code is never still, however slow, so
this bounds only waiting on something outside the simulator (a lock, a barrier, a queue, a
sleep, input): a minute ends a stuck run promptly yet spares any wait meant to end. PyTorch's
NCCL default is 10 minutes, but it times whole collectives, slow or not."""

WATCH_PERIOD_S = 1.0
"""The longest time between two looks of the watchdog at the ranks (a quarter of the timeout
when that is shorter): a look reads every running rank's CPU clock and Python frame, measured
here at a median of 14 ms for 4,096 ranks and 60 ms for 16,384, so a look a second costs at
most 6 % of the thread that waits."""

MIN_WATCH_PERIOD_S = 0.01
"""The shortest time between two looks, so that a tiny timeout does not make the watchdog spin."""

BUSY_SHARE = 0.1
"""The share of a core that the process's other threads (all but the watching one) must use
between two looks for every rank to count as moving: a rank may wait on threads that compute
for it (OpenBLAS's workers while its thread waits for them: here a 2000 × 2000 matmul uses 0.17
s of its calling thread's CPU in 0.51 s; torch's pool; a pool of its own). A thread that
computes uses a whole core, one that only polls (tqdm's monitor, a heartbeat) well under 1 %."""

MAX_PLACES = 4
"""A stall names at most this many places where ranks sit still, then counts the rest."""


class CollectiveMismatch(SimulatorError, RuntimeError):
    """The ranks made different calls for the same collective (or one returned instead)."""


class MessageMismatch(CollectiveMismatch):
    """A send and the receive it matched differ (dtype or shape), or every rank returned with a
    send or receive never matched: the ranks' calls mismatch, as a collective's do."""


class RankError(SimulatorError, RuntimeError):
    """A rank's code raised (or called ``sys.exit``): ``rank`` names it and ``__cause__`` is the
    exception it raised."""

    def __init__(self, rank: int, error: BaseException) -> None:
        self.rank = rank
        super().__init__(f"rank {rank} {what_it_did(error)}")


class Stalled(SimulatorError, RuntimeError):
    """No rank can move: every rank that has not returned waits in a call or has sat still,
    outside any, for the timeout. ``idle`` names the ranks outside a call, ``waiting`` those in
    one."""

    def __init__(self, message: str, idle: tuple[int, ...], waiting: tuple[int, ...]) -> None:
        self.idle, self.waiting = idle, waiting
        super().__init__(message)


def what_it_did(error: BaseException) -> str:
    """How a rank's exception reads after "rank 1": ``raised ValueError: boom``, or ``called
    sys.exit(3)``, since a rank's sys.exit ends only that rank, and only with this error."""
    if isinstance(error, SystemExit):
        return "called sys.exit()" if error.code is None else f"called sys.exit({error.code!r})"
    text = str(error)
    return f"raised {type(error).__name__}" + (f": {text}" if text else "")


def ranks_text(ranks: Iterable[int]) -> str:
    """``rank 3``, ``ranks 0, 1`` or ``ranks 0-2, 5``: runs of three or more as a range, so a
    message about thousands of ranks stays a line."""
    ordered = sorted(ranks)
    parts, start = [], 0
    while start < len(ordered):
        stop = start
        while stop + 1 < len(ordered) and ordered[stop + 1] == ordered[stop] + 1:
            stop += 1
        if stop - start >= 2:
            parts.append(f"{ordered[start]}-{ordered[stop]}")
        else:
            parts.extend(str(rank) for rank in ordered[start:stop + 1])
        start = stop + 1
    return f"rank{'s' if len(ordered) > 1 else ''} {', '.join(parts)}"


def as_timeout(timeout: object) -> float | None:
    """spawn's ``timeout`` in seconds (a number or a timedelta, as torch.distributed takes
    it), or None for no watchdog; InputError for anything else."""
    if isinstance(timeout, timedelta):
        timeout = timeout.total_seconds()
    if timeout is None:
        return None
    if (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
            or not math.isfinite(timeout) or timeout <= 0):
        raise InputError([Problem(SOURCE, "timeout", (
            f"expected seconds > 0 (a number or a timedelta), or None for no watchdog, got "
            f"{timeout!r}"))])
    return float(timeout)


@dataclass(frozen=True)
class Call:
    """One rank's call: what it called (``signature``, which every rank's must equal), its row of
    the simulation's buffers, and how to write that rank's result back (given all rows after)."""

    name: str
    signature: str
    collective: Collective
    op: ModelOp
    row: np.ndarray
    deliver: Callable[[np.ndarray], None]
    root: int = ROOT


@dataclass(frozen=True)
class Context:
    """What the thread of one rank knows: its world and its rank."""

    world: World
    rank: int

    def collect(self, call: Call) -> None:
        """Post this rank's call and wait until it is simulated (or the run stops)."""
        self.world.collect(self.rank, call)

    def post(self, sends: bool, peer: int | None, tag: int, view: np.ndarray, name: str,
             signature: str) -> Work:
        """Post a send (of ``view``'s data as it is now) or a receive (into ``view``), without
        waiting: the work to wait on."""
        return Work(self, self.world.post(self.rank, sends, peer, tag, view, name, signature))


class Work:
    """``torch.distributed``'s request for an ``isend`` or ``irecv``: :meth:`wait` until its
    message arrived; :meth:`is_completed` says whether it has, without waiting for it."""

    def __init__(self, context: Context, op: Op) -> None:
        self._context, self._op = context, op

    def wait(self, timeout: object = None) -> bool:
        """Wait until the message arrived (the rank's clock moves on to its arrival); True, as
        torch's. ``timeout`` is accepted and unused: spawn's watchdog ends a wait that cannot."""
        self._owner("wait")
        self._context.world.wait_on(self._context.rank, self._op, poll=False)
        return True

    def is_completed(self) -> bool:
        """Whether the message arrived. Not yet: the rank waits until no rank can move and the
        messages that match then start; False moves its clock on to how far the messages ran
        (it polled meanwhile), and asked again with nothing done in between, the messages first
        run to their next arrival, so polling in a loop moves the run on. True moves the rank's
        clock on to the arrival, as polling until then would."""
        self._owner("is_completed")
        return self._context.world.wait_on(self._context.rank, self._op, poll=True)

    def source_rank(self) -> int:
        """The rank whose message a completed receive got (torch's ``_source_rank``)."""
        partner = self._op.partner
        if partner is None or self._op.end_s is None:
            raise RuntimeError(f"source_rank(): {self._op.signature} has not completed; wait() "
                               "for it first")
        return partner.rank

    def _owner(self, what: str) -> None:
        """RuntimeError unless called by the rank that posted the work."""
        if current() is not self._context:
            raise RuntimeError(f"{what}() of rank {self._context.rank}'s "
                               f"{self._op.signature} called from another thread: only the rank "
                               "that posted it may wait on it")


class Simulator(Protocol):
    """What simulates a world's calls (:class:`~simulator.distributed.collectives.Simulation`):
    each collective at once, and the messages on a network that runs forward as far as it is
    told."""

    @property
    def now(self) -> float:
        """How far the messages' network has run (s): no message still to come starts before."""

    @property
    def in_flight(self) -> bool:
        """Whether a message launched has not arrived yet."""

    def simulate(self, calls: list[Call], start_s: float) -> float:
        """Simulate a collective (``calls`` by rank) from ``start_s`` on; its time (s)."""

    def launch(self, pairs: list[tuple[Op, Op]]) -> None:
        """Start matched (send, receive) pairs, each when both sides had posted."""

    def advance(self) -> list[tuple[Op, Op]]:
        """Run the messages to the next arrival and deliver those arriving then (each op's
        ``end_s`` and ``partner`` set, the data copied); the pairs delivered."""


_local = threading.local()


class Released(BaseException):
    """Leaves a rank's code when the run stops (another rank failed or the calls mismatched);
    a BaseException, so that ``except Exception`` in the rank's code does not catch it."""


def current() -> Context | None:
    """The context of the rank whose code runs on this thread; None outside
    :func:`~simulator.distributed.spawn`."""
    context: Context | None = getattr(_local, "context", None)
    return context


def context(what: str) -> Context:
    """This thread's rank, for the function ``what``; RuntimeError outside
    :func:`~simulator.distributed.spawn`."""
    found = current()
    if found is None:
        raise RuntimeError(f"{what}() called outside simulator.dist.spawn: it works only in the "
                           f"code that spawn(fn, world_size) runs for each rank")
    return found


@dataclass
class World:
    """The ranks' shared state. Rank threads post their call and wait, each on its own event (a
    rank is woken alone: one condition shared by thousands of ranks woke them all at every
    post, 9 s a collective at 4096 ranks); the thread of :func:`~simulator.distributed.spawn`
    acts whenever every rank still running is waiting in a call: it hands the sends and
    receives that match to the simulator to start and releases the ranks whose messages
    arrived, or else checks that the collective calls match, hands them (in rank order) to the
    simulator and releases them, or runs the messages to their next arrival, or stops the run.
    Between, it watches the ranks outside a call (``timeout`` seconds, None for never). A rank
    posts a send or receive without waiting (:meth:`post`), and waits on it apart
    (:meth:`wait_on`)."""

    size: int
    simulator: Simulator
    timeout: float | None = DEFAULT_TIMEOUT_S
    lock: threading.Condition = field(default_factory=threading.Condition)
    """Guards all below; only the coordinating thread waits on it."""
    pending: dict[int, Call] = field(default_factory=dict)
    wakes: dict[int, threading.Event] = field(default_factory=dict)
    """Each pending rank's event: set when its call was simulated (its rank no longer pending)
    or the run stopped (its rank still pending)."""
    returned: dict[int, Any] = field(default_factory=dict)
    failed: dict[int, BaseException] = field(default_factory=dict)
    stop: BaseException | None = None
    mailbox: Mailbox = field(default_factory=Mailbox)
    blocked: dict[int, Op] = field(default_factory=dict)
    """The ranks waiting on a send or receive (``send``, ``recv``, a work's ``wait``)."""
    polls: dict[int, Op] = field(default_factory=dict)
    """The ranks asking ``is_completed`` of a work not completed yet."""
    clocks: list[float] = field(default_factory=list)
    """Each rank's simulated time (s): where its next call starts."""
    posts: dict[int, int] = field(default_factory=dict)
    """How many sends and receives each rank posted."""
    held: int = 0
    """Bytes the sends posted and not yet delivered hold: each keeps a copy of its data."""
    changes: int = 0
    """Counts what the ranks did (a call, a post, a return) and what the run did for them."""
    answered: int = -1
    """``changes`` when the polls were last answered "not completed": polls asked again with
    nothing changed since can never be completed."""
    simulated: int = 0
    """How many collectives ran so far: the index the next one's mismatch names."""
    gate: threading.Event = field(default_factory=threading.Event)
    """Opens once every rank's thread started, so no rank runs unless all can."""
    threads: list[threading.Thread] = field(default_factory=list)
    still: dict[int, tuple[tuple[Any, ...], float]] = field(default_factory=dict)
    """Each rank outside a call, as the watchdog last saw it: what it was doing (CPU time, frame,
    instruction) and since when it has been doing exactly that."""
    mark: tuple[int, int, float] | None = None
    """The process's CPU time, the watching thread's, and the clock, at the watchdog's last look."""

    def run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
        """Run ``fn(rank, *args)`` on every rank's thread; each rank's return value, by rank."""
        self.clocks = [0.0] * self.size
        try:
            for rank in range(self.size):
                thread = threading.Thread(target=self._rank, args=(rank, fn, args), daemon=True,
                                          name=f"dist-rank-{rank}")
                thread.start()
                self.threads.append(thread)
        except RuntimeError as error:  # "can't start new thread": the process has no room left
            self.stop = error
            self.gate.set()
            for thread in self.threads:
                thread.join()
            raise InputError([Problem(SOURCE, "world_size", (
                f"could not start the thread of rank {len(self.threads)} of {self.size} "
                f"({error}), so no rank ran; use fewer ranks, or end threads this process no "
                "longer needs"))]) from error
        self.gate.set()
        try:
            self._coordinate()
        except BaseException as error:  # Ctrl-C while waiting: release the ranks, then raise
            with self.lock:
                self.stop = self.stop or error
                self._release()
            raise
        # the ranks that end at once: returned, failed or released from a call; one still
        # outside a call ends at its next call (or its return), and one stuck is left behind
        for rank in sorted({*self.returned, *self.failed, *self.pending, *self.blocked,
                            *self.polls}):
            self.threads[rank].join()
        if self.stop is not None:
            raise self.stop
        return tuple(self.returned[rank] for rank in range(self.size))

    def _rank(self, rank: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        _local.context = Context(self, rank)
        self.gate.wait()
        if self.stop is not None:  # another rank's thread could not start
            return
        try:
            value = fn(rank, *args)
        except Released:
            return
        except BaseException as error:  # sys.exit and KeyboardInterrupt too: a RankError
            with self.lock:
                self.failed[rank] = error
                self.lock.notify()
        else:
            with self.lock:
                self.returned[rank] = value
                self.changes += 1
                self.lock.notify()

    def collect(self, rank: int, call: Call) -> None:
        """Post a rank's call and wait until it is simulated (or the run stops)."""
        wake = threading.Event()
        with self.lock:
            if self.stop is not None:
                raise Released
            self.pending[rank], self.wakes[rank] = call, wake
            self.changes += 1
            self.lock.notify()
        wake.wait()
        with self.lock:
            if rank in self.pending:  # woken by a stop, its call not simulated
                raise Released

    def post(self, rank: int, sends: bool, peer: int | None, tag: int, view: np.ndarray,
             name: str, signature: str) -> Op:
        """Post a rank's send or receive at its clock, without waiting; the op to wait on."""
        with self.lock:
            if self.stop is not None:
                raise Released
            if sends and self.held + view.nbytes > limits.PROXY_BUDGET_BYTES:
                self.stop = InputError([Problem(SOURCE, name, (
                    f"rank {rank} posted {view.nbytes} bytes to send while the sends not yet "
                    f"received hold {self.held >> 20} MiB, more than "
                    f"{limits.PROXY_BUDGET_BYTES >> 20} MiB together (each keeps a copy of its "
                    "data); use smaller tensors, or wait on sends before posting more"))])
                self.lock.notify()
                raise Released
            self.held += view.nbytes if sends else 0
            seq = self.posts.get(rank, 0)
            self.posts[rank] = seq + 1
            op = Op(rank, seq, sends, peer, tag, view, view.copy() if sends else None, name,
                    signature, self.clocks[rank])
            self.mailbox.post(op)
            self.changes += 1
            return op

    def wait_on(self, rank: int, op: Op, poll: bool) -> bool:
        """Wait until ``op``'s message arrived and move the rank's clock on to its arrival;
        with ``poll``, only until no rank can move, then say whether it arrived."""
        wake = threading.Event()
        with self.lock:
            if self.stop is not None:
                raise Released
            if op.end_s is None:
                (self.polls if poll else self.blocked)[rank], self.wakes[rank] = op, wake
                if not poll:
                    self.changes += 1
                self.lock.notify()
        if op.end_s is None:
            wake.wait()
        with self.lock:
            if rank in self.blocked or rank in self.polls:  # woken by a stop
                raise Released
            if op.end_s is None:
                return False
            self.clocks[rank] = max(self.clocks[rank], op.end_s)
            return True

    def _coordinate(self) -> None:
        period = None if self.timeout is None else max(min(self.timeout / 4, WATCH_PERIOD_S),
                                                         MIN_WATCH_PERIOD_S)
        look = time.monotonic()
        with self.lock:
            while self.stop is None and len(self.returned) < self.size:
                if self.failed:
                    rank = min(self.failed)
                    self.stop = RankError(rank, self.failed[rank])
                    self.stop.__cause__ = self.failed[rank]
                elif self._waiting() and self._waiting() + len(self.returned) == self.size:
                    self._meet()
                elif period is None:
                    self.lock.wait()
                elif (now := time.monotonic()) >= look:
                    look = now + period
                    self.stop = self._look(now)
                else:
                    self.lock.wait(look - now)
            if self.stop is None:  # every rank returned: their messages still go, or mismatch
                self.stop = self._progress()
                while self.stop is None and self.simulator.in_flight:
                    self.stop = self._advance()
                self.stop = self.stop or self._unmatched()
            self._release()

    def _waiting(self) -> int:
        """How many ranks wait in a call (a collective, a send or receive, a poll)."""
        return len(self.pending) + len(self.blocked) + len(self.polls)

    def _meet(self) -> None:
        """Every rank still running waits in a call. The sends and receives that match start,
        and the ranks whose messages arrived are released; else the polls are answered; else,
        every rank in a collective, it is simulated and they are released (or the calls
        differ); else the messages run to the next arrival; else no rank can move."""
        before = self.changes
        self.stop = self._progress()
        if self.stop is not None or self.changes != before:
            return
        if self.polls and self.changes != self.answered:
            self.answered = self.changes
            for rank in list(self.polls):  # it polled while the network ran to now
                self.clocks[rank] = max(self.clocks[rank], self.simulator.now)
                del self.polls[rank]
                self.wakes.pop(rank).set()
            return
        if not self.blocked and not self.polls:
            self._collective()
        elif self.simulator.in_flight:
            self.stop = self._advance()
        else:
            self.stop = self._deadlock()

    def _collective(self) -> None:
        """Every rank still running waits in a collective: simulate it from the latest clock and
        release them, or stop the run (the calls differ, or the simulation raised)."""
        self.stop = self._mismatch()
        if self.stop is not None:
            return
        start = max(self.clocks)
        try:
            took = self.simulator.simulate([self.pending[rank] for rank in range(self.size)],
                                           start)
        except Exception as error:
            self.stop = error
            return
        self.clocks = [start + took] * self.size
        self.simulated += 1
        self.changes += 1
        self.still.clear()  # the ranks released start afresh
        self.pending.clear()
        for wake in self.wakes.values():
            wake.set()
        self.wakes.clear()

    def _progress(self) -> BaseException | None:
        """Start the messages whose send and receive match now and release the ranks whose
        messages arrived; the error that stops the run, if any."""
        pairs = self.mailbox.match()
        for send, recv in pairs:
            if send.view.dtype != recv.view.dtype or send.view.shape != recv.view.shape:
                return MessageMismatch(
                    f"send/recv mismatch: rank {send.rank} called {send.signature}; rank "
                    f"{recv.rank} called {recv.signature}: expected the same dtype and shape "
                    "on both sides")
        if pairs:
            try:
                self.simulator.launch(pairs)
            except Exception as error:
                return error
            self.changes += 1
        for waiting in (self.blocked, self.polls):
            for rank, op in list(waiting.items()):
                if op.end_s is not None:
                    del waiting[rank]
                    self.wakes.pop(rank).set()
                    self.still.pop(rank, None)
                    self.changes += 1
        return None

    def _advance(self) -> BaseException | None:
        """Run the messages to their next arrival, which no message still to come can change:
        each starts when a rank posts it, and every rank that could still post waits for an
        arrival (or a match, or every rank in a collective) first."""
        try:
            delivered = self.simulator.advance()
        except Exception as error:
            return error
        self.held -= sum(send.view.nbytes for send, _ in delivered)
        self.changes += 1
        return None

    def _unmatched(self) -> MessageMismatch | None:
        """The error naming the sends and receives never matched once every rank returned."""
        left = self.mailbox.unmatched()
        if not left:
            return None
        parts = [f"rank {op.rank} called {op.signature}, for {whom(op, self.returned, self.size)}"
                 for op in left[:MAX_PLACES]]
        if len(left) > MAX_PLACES:
            parts.append(f"{len(left) - MAX_PLACES} more sends or receives never matched")
        return MessageMismatch("every rank returned with sends or receives never matched: "
                               + "; ".join(parts))

    def _p2p_waits(self) -> list[str]:
        """What each rank waiting on a send or receive (or polling one) waits for."""
        texts: dict[tuple[str, str], list[int]] = {}
        for rank in sorted({*self.blocked, *self.polls}):
            op, verb = ((self.blocked[rank], "wait") if rank in self.blocked
                        else (self.polls[rank], "poll"))
            what = f"in {op.signature}" if verb == "wait" else f"is_completed() of {op.signature}"
            texts.setdefault((verb, f"{what} for {whom(op, self.returned, self.size)}"),
                             []).append(rank)
        return _groups([(f"{verb}{'s' if len(ranks) == 1 else ''} {what}", ranks)
                        for (verb, what), ranks in texts.items()], "in other sends or receives")

    def _collective_waits(self, others: Iterable[int]) -> list[str]:
        """What the ranks waiting in a collective wait for: those of ``others`` not in it."""
        others = sorted(others)
        calls: dict[str, list[int]] = {}
        for rank in sorted(self.pending):
            calls.setdefault(self.pending[rank].signature, []).append(rank)
        return _groups([(f"wait{'s' if len(ranks) == 1 else ''} in collective "
                         f"#{self.simulated}, {signature}, for "
                         f"{ranks_text(r for r in others if r not in ranks)}", ranks)
                        for signature, ranks in calls.items()], "in other calls")

    def _deadlock(self) -> Stalled:
        """No rank can move: each waits for a message or a partner that will never come."""
        running = [rank for rank in range(self.size) if rank not in self.returned]
        parts = self._p2p_waits() + self._collective_waits(running)
        if self.returned:
            parts.append(f"{ranks_text(self.returned)} returned")
        return Stalled("spawn stalled, no rank can move: " + "; ".join(parts), (),
                       tuple(sorted({*self.pending, *self.blocked, *self.polls})))

    def _release(self) -> None:
        """Wake every rank waiting in a call; still pending, each leaves it with Released."""
        for wake in self.wakes.values():
            wake.set()

    def _busy(self, now: float) -> bool:
        """Whether the process's threads but this one used BUSY_SHARE of a core since the last
        look: then every rank counts as moving, since any may be waiting on them."""
        process, own = time.process_time_ns(), time.thread_time_ns()
        last, self.mark = self.mark, (process, own, now)
        if last is None:
            return False
        others = (process - last[0]) - (own - last[1])
        return others >= BUSY_SHARE * (now - last[2]) * 1e9

    def _look(self, now: float) -> Stalled | None:
        """The watchdog's look at the ranks outside a call: Stalled if every one of them has sat
        still (no CPU time used, not a Python instruction run) for the timeout, else None."""
        assert self.timeout is not None
        frames = sys._current_frames()
        outside = [rank for rank in range(self.size) if rank not in self.pending
                   and rank not in self.blocked and rank not in self.polls
                   and rank not in self.returned]
        busy = self._busy(now)
        for rank in outside:
            doing = _doing(self.threads[rank], frames)
            seen = self.still.get(rank)
            if busy or seen is None or seen[0] != doing:
                self.still[rank] = (doing, now)
        if not outside or any(now - self.still[rank][1] < self.timeout for rank in outside):
            return None
        runnable = [rank for rank in outside if _runnable(self.threads[rank])]
        if runnable:  # starved of a CPU on a busy machine, not waiting: moving
            for rank in runnable:
                self.still[rank] = (self.still[rank][0], now)
            return None
        places: dict[str, list[int]] = {}
        for rank in outside:
            ident = self.threads[rank].ident
            frame = None if ident is None else frames.get(ident)
            places.setdefault(_place(frame), []).append(rank)
        parts = _groups([(f"{'has' if len(ranks) == 1 else 'have'} not returned and "
                          f"{'is' if len(ranks) == 1 else 'are'} not in a collective ({place})",
                          ranks) for place, ranks in places.items()], "elsewhere")
        parts += self._p2p_waits()
        parts += self._collective_waits([*outside, *self.blocked, *self.polls])
        if self.returned:
            parts.append(f"{ranks_text(self.returned)} returned")
        return Stalled(f"spawn stalled for timeout={self.timeout:g} s: " + "; ".join(parts),
                       tuple(outside), tuple(sorted({*self.pending, *self.blocked, *self.polls})))

    def _mismatch(self) -> CollectiveMismatch | None:
        """The error naming every rank's call, unless all ranks made the same one."""
        said = {rank: f"called {self.pending[rank].signature}" if rank in self.pending
                else "returned" for rank in range(self.size)}
        if len(set(said.values())) == 1:
            return None
        groups: dict[str, list[int]] = {}
        for rank, what in said.items():
            groups.setdefault(what, []).append(rank)
        parts = [f"{ranks_text(ranks)} {what}" for what, ranks in groups.items()]
        return CollectiveMismatch(f"collective #{self.simulated} mismatch: " + "; ".join(parts))


_CPU_CLOCK = hasattr(time, "pthread_getcpuclockid")
"""Whether a thread's CPU time can be read (Linux, most Unixes; not macOS): without it, a rank
in one long call into C (numpy, torch) looks still, as its Python frame does not move."""

_PATHS = sysconfig.get_paths()
_OURS, _STDLIB = os.path.dirname(__file__), _PATHS["stdlib"]
_SITE = tuple({_PATHS["purelib"], _PATHS["platlib"]})


def _library(filename: str) -> bool:
    """Whether a stall's message looks past this code to name the user's line: this package and
    the standard library (a rank stuck in ``threading.Barrier.wait`` is named where it called
    it), but not the packages installed beside it, which may sit inside the standard library's
    directory."""
    if filename.startswith(_OURS):
        return True
    if filename.startswith(_SITE):
        return False
    return filename.startswith((_STDLIB, "<frozen "))


def _doing(thread: threading.Thread, frames: dict[int, FrameType]) -> tuple[Any, ...]:
    """What a rank's thread is doing, to compare between two looks: its CPU time and its Python
    frame and instruction. Called under the world's lock, while the thread is alive (it takes
    the lock to record its end), as pthread_getcpuclockid requires."""
    ident = thread.ident
    assert ident is not None
    cpu = None
    if _CPU_CLOCK:
        with contextlib.suppress(OSError):
            cpu = time.clock_gettime_ns(time.pthread_getcpuclockid(ident))
    frame = frames.get(ident)
    return cpu, id(frame), -1 if frame is None else frame.f_lasti


def _runnable(thread: threading.Thread) -> bool:
    """Whether the kernel holds the thread runnable (state R in /proc: running or waiting only
    for a CPU), so that a rank starved of a CPU on a loaded machine is never called still; False
    where /proc cannot say (another system, a thread gone)."""
    try:
        with open(f"/proc/self/task/{thread.native_id}/stat", encoding="ascii",
                  errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "R"
    except (OSError, IndexError):
        return False


def _place(frame: FrameType | None) -> str:
    """Where a still rank sits, in its own code: ``still in Barrier.wait, called at
    train.py:12 in step``, or ``still at train.py:12 in step`` when it sits in C (a sleep, a
    lock's acquire, a long computation without Python)."""
    stack = []
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    for depth, each in enumerate(stack):
        name = each.f_code.co_filename
        if not _library(name):
            where = f"at {os.path.basename(name)}:{each.f_lineno} in {each.f_code.co_qualname}"
            if depth == 0:
                return f"still {where}"
            return f"still in {stack[depth - 1].f_code.co_qualname}, called {where}"
    return f"still in {stack[0].f_code.co_qualname}" if stack else "not started"


def _groups(groups: list[tuple[str, list[int]]], rest: str) -> list[str]:
    """``ranks 0-2 <what>`` for the first MAX_PLACES groups, then how many ranks are elsewhere."""
    parts = [f"{ranks_text(ranks)} {what}" for what, ranks in groups[:MAX_PLACES]]
    more = sum(len(ranks) for _, ranks in groups[MAX_PLACES:])
    if more:
        parts.append(f"{more} more rank{'s' if more > 1 else ''} {rest}")
    return parts
