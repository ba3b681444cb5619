"""The ranks' threads and how their calls meet: each rank runs on its own thread and waits in a
call; the thread of :func:`~simulator.dist.spawn` acts whenever every rank still running waits,
so a run never hangs on a mistake in the calls. It checks that the calls match (else
:class:`CollectiveMismatch`), has them simulated and releases the ranks, or stops the run when a
rank raised (:class:`RankError`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulator.errors import InputError, Problem, SimulatorError
from simulator.model.collective import ROOT, Collective
from simulator.model.reduction import ReduceOp as ModelOp

SOURCE = "dist.spawn"
"""What error messages about :func:`~simulator.dist.spawn`'s arguments name as their source."""

class CollectiveMismatch(SimulatorError, RuntimeError):
    """The ranks made different calls for the same collective (or one returned instead)."""


class RankError(SimulatorError, RuntimeError):
    """A rank's code raised (or called ``sys.exit``): ``rank`` names it and ``__cause__`` is the
    exception it raised."""

    def __init__(self, rank: int, error: BaseException) -> None:
        self.rank = rank
        super().__init__(f"rank {rank} {what_it_did(error)}")


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


_local = threading.local()


class Released(BaseException):
    """Leaves a rank's code when the run stops (another rank failed or the calls mismatched);
    a BaseException, so that ``except Exception`` in the rank's code does not catch it."""


def current() -> Context | None:
    """The context of the rank whose code runs on this thread; None outside
    :func:`~simulator.dist.spawn`."""
    context: Context | None = getattr(_local, "context", None)
    return context


def context(what: str) -> Context:
    """This thread's rank, for the function ``what``; RuntimeError outside
    :func:`~simulator.dist.spawn`."""
    found = current()
    if found is None:
        raise RuntimeError(f"{what}() called outside simulator.dist.spawn: it works only in the "
                           f"code that spawn(fn, world_size) runs for each rank")
    return found


@dataclass
class World:
    """The ranks' shared state. Rank threads post their call and wait, each on its own event (a
    rank is woken alone: one condition shared by thousands of ranks woke them all at every
    post, 9 s a collective at 4096 ranks); the thread of :func:`~simulator.dist.spawn` acts
    whenever every rank still running is waiting in a call: it checks that the calls match,
    hands them (in rank order) to ``simulate`` and releases them, or stops the run."""

    size: int
    simulate: Callable[[list[Call]], None]
    lock: threading.Condition = field(default_factory=threading.Condition)
    """Guards all below; only the coordinating thread waits on it."""
    pending: dict[int, Call] = field(default_factory=dict)
    wakes: dict[int, threading.Event] = field(default_factory=dict)
    """Each pending rank's event: set when its call was simulated (its rank no longer pending)
    or the run stopped (its rank still pending)."""
    returned: dict[int, Any] = field(default_factory=dict)
    failed: dict[int, BaseException] = field(default_factory=dict)
    stop: BaseException | None = None
    simulated: int = 0
    """How many collectives ran so far: the index the next one's mismatch names."""
    gate: threading.Event = field(default_factory=threading.Event)
    """Opens once every rank's thread started, so no rank runs unless all can."""
    threads: list[threading.Thread] = field(default_factory=list)
    def run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
        """Run ``fn(rank, *args)`` on every rank's thread; each rank's return value, by rank."""
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
        # outside a call ends at its next call (or its return): not waited for, it may be stuck
        for rank in sorted({*self.returned, *self.failed, *self.pending}):
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
                self.lock.notify()

    def collect(self, rank: int, call: Call) -> None:
        """Post a rank's call and wait until it is simulated (or the run stops)."""
        wake = threading.Event()
        with self.lock:
            if self.stop is not None:
                raise Released
            self.pending[rank], self.wakes[rank] = call, wake
            self.lock.notify()
        wake.wait()
        with self.lock:
            if rank in self.pending:  # woken by a stop, its call not simulated
                raise Released

    def _coordinate(self) -> None:
        with self.lock:
            while self.stop is None and len(self.returned) < self.size:
                if self.failed:
                    rank = min(self.failed)
                    self.stop = RankError(rank, self.failed[rank])
                    self.stop.__cause__ = self.failed[rank]
                elif self.pending and len(self.pending) + len(self.returned) == self.size:
                    self._meet()
                else:
                    self.lock.wait()
            self._release()

    def _meet(self) -> None:
        """Every rank still running waits in a call: simulate them together and release them,
        or stop the run (the calls differ, or the simulation raised)."""
        self.stop = self._mismatch()
        if self.stop is not None:
            return
        try:
            self.simulate([self.pending[rank] for rank in range(self.size)])
        except Exception as error:
            self.stop = error
            return
        self.simulated += 1
        self.pending.clear()
        for wake in self.wakes.values():
            wake.set()
        self.wakes.clear()

    def _release(self) -> None:
        """Wake every rank waiting in a call; still pending, each leaves it with Released."""
        for wake in self.wakes.values():
            wake.set()

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

