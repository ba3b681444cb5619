"""The ranks' threads and how their calls meet: each rank runs on its own thread and waits in a
call; the thread of :func:`~simulator.dist.spawn` acts whenever every rank still running waits,
so a run never hangs. It checks that the calls match (else :class:`CollectiveMismatch`), has them
simulated and releases the ranks, or stops the run when a rank raised (:class:`RankError`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulator.errors import SimulatorError
from simulator.model.collective import ROOT, Collective
from simulator.model.reduction import ReduceOp as ModelOp


class CollectiveMismatch(SimulatorError, RuntimeError):
    """The ranks made different calls for the same collective (or one returned instead)."""


class RankError(SimulatorError, RuntimeError):
    """A rank's code raised: ``rank`` names it and ``__cause__`` is the exception it raised."""

    def __init__(self, rank: int, error: BaseException) -> None:
        self.rank = rank
        super().__init__(f"rank {rank} raised {type(error).__name__}: {error}")


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
    """The ranks' shared state. Rank threads post their call and wait; the thread of
    :func:`~simulator.dist.spawn` acts whenever every rank still running is waiting in a call: it
    checks that the calls match, hands them (in rank order) to ``simulate`` and releases them, or
    stops the run."""

    size: int
    simulate: Callable[[list[Call]], None]
    lock: threading.Condition = field(default_factory=threading.Condition)
    pending: dict[int, Call] = field(default_factory=dict)
    returned: dict[int, Any] = field(default_factory=dict)
    failed: dict[int, BaseException] = field(default_factory=dict)
    stop: BaseException | None = None
    simulated: int = 0
    """How many collectives ran so far: the index the next one's mismatch names."""

    def run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, ...]:
        """Run ``fn(rank, *args)`` on every rank's thread; each rank's return value, by rank."""
        threads = [threading.Thread(target=self._rank, args=(rank, fn, args), daemon=True,
                                    name=f"dist-rank-{rank}") for rank in range(self.size)]
        for thread in threads:
            thread.start()
        try:
            self._coordinate()
        except BaseException as error:  # Ctrl-C while waiting: release the ranks, then raise
            with self.lock:
                self.stop = self.stop or error
                self.lock.notify_all()
            raise
        for thread in threads:
            thread.join()
        if self.stop is not None:
            raise self.stop
        return tuple(self.returned[rank] for rank in range(self.size))

    def _rank(self, rank: int, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        _local.context = Context(self, rank)
        try:
            value = fn(rank, *args)
        except Released:
            return
        except BaseException as error:
            with self.lock:
                self.failed[rank] = error
                self.lock.notify_all()
        else:
            with self.lock:
                self.returned[rank] = value
                self.lock.notify_all()

    def collect(self, rank: int, call: Call) -> None:
        """Post a rank's call and wait until it is simulated (or the run stops)."""
        with self.lock:
            if self.stop is not None:
                raise Released
            self.pending[rank] = call
            self.lock.notify_all()
            while rank in self.pending:
                if self.stop is not None:
                    raise Released
                self.lock.wait()

    def _coordinate(self) -> None:
        with self.lock:
            while self.stop is None and len(self.returned) < self.size:
                if self.failed:
                    rank = min(self.failed)
                    self.stop = RankError(rank, self.failed[rank])
                    self.stop.__cause__ = self.failed[rank]
                elif self.pending and len(self.pending) + len(self.returned) == self.size:
                    self.stop = self._mismatch()
                    if self.stop is None:
                        try:
                            self.simulate([self.pending[rank] for rank in range(self.size)])
                            self.simulated += 1
                        except Exception as error:
                            self.stop = error
                        self.pending.clear()
                    self.lock.notify_all()
                    continue
                else:
                    self.lock.wait()
            self.lock.notify_all()

    def _mismatch(self) -> CollectiveMismatch | None:
        """The error naming every rank's call, unless all ranks made the same one."""
        said = {rank: f"called {self.pending[rank].signature}" if rank in self.pending
                else "returned" for rank in range(self.size)}
        if len(set(said.values())) == 1:
            return None
        groups: dict[str, list[int]] = {}
        for rank, what in said.items():
            groups.setdefault(what, []).append(rank)
        parts = [f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))} {what}"
                 for what, ranks in groups.items()]
        return CollectiveMismatch(f"collective #{self.simulated} mismatch: " + "; ".join(parts))
