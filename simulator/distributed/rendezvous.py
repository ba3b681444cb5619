"""The ranks' threads and where their calls meet: each rank runs the ``fn`` of
:func:`~simulator.distributed.spawn` on its own thread, with a :class:`Context` (its
:class:`World` and rank) that the package's calls find (:func:`context`). A collective's call (a
:class:`Call`) is posted and waited in; a send or receive is posted without waiting and waited on
apart (a :class:`Work`), and each rank keeps a clock: where its next call starts in simulated
time. The thread of ``spawn`` acts on the calls (:mod:`~simulator.distributed.coordinator`) and,
when the run stops, each rank waiting in a call leaves it with :class:`Released`, which its own
code cannot catch by mistake."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

import numpy as np

import simulator.limits as limits
from simulator.distributed.coordinator import Coordinator
from simulator.distributed.p2p import Mailbox, Op
from simulator.distributed.watchdog import DEFAULT_TIMEOUT_S
from simulator.errors import InputError, Problem
from simulator.model.collective import ROOT, Collective
from simulator.model.reduction import ReduceOp as ModelOp

SOURCE = "dist.spawn"
"""What error messages about :func:`~simulator.distributed.spawn`'s arguments name as their
source."""

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
    """The ranks' shared state, and the ranks' side of it: :meth:`run` starts a thread per rank,
    and each posts its call and waits, on its own event (a rank is woken alone: one condition
    shared by thousands of ranks woke them all at every post, 9 s a collective at 4096 ranks),
    until the thread of :func:`~simulator.distributed.spawn`, the
    :class:`~simulator.distributed.coordinator.Coordinator`, has acted on it. A rank posts a
    send or receive without waiting (:meth:`post`), and waits on it apart (:meth:`wait_on`).
    ``timeout``: the watchdog's, in seconds (None for none)."""

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
    simulated: int = 0
    """How many collectives ran so far: the index the next one's mismatch names."""
    gate: threading.Event = field(default_factory=threading.Event)
    """Opens once every rank's thread started, so no rank runs unless all can."""
    threads: list[threading.Thread] = field(default_factory=list)

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
            Coordinator(self).run()
        except BaseException as error:  # Ctrl-C while waiting: release the ranks, then raise
            with self.lock:
                self.stop = self.stop or error
                self.release()
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
        """A rank's thread: wait until every rank's thread started, run ``fn``, and record how
        it ended (its value, or what it raised) for the coordinating thread."""
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

    def waiting(self) -> int:
        """How many ranks wait in a call (a collective, a send or receive, a poll)."""
        return len(self.pending) + len(self.blocked) + len(self.polls)

    def release(self) -> None:
        """Wake every rank waiting in a call; still pending, each leaves it with Released."""
        for wake in self.wakes.values():
            wake.set()
