"""The thread of :func:`~simulator.distributed.spawn`, while the ranks run: it acts whenever every
rank still running waits in a call, so a run never hangs on a mistake in the calls. It first
matches the sends and receives posted (:mod:`~simulator.distributed.p2p`), starts those messages
and releases the ranks whose messages arrived; failing that, it answers the ranks polling a work;
failing that, every rank being in a collective, it checks that their calls match, has it
simulated from the latest clock and releases them; failing that, it runs the messages to their
next arrival; and a rank waiting on a message none will send stops the run
(:mod:`~simulator.distributed.stops` says why). It also stops the run when a rank raised. Between
its acts, the watchdog (:mod:`~simulator.distributed.watchdog`) looks at the ranks outside a
call. Everything here runs under the world's lock, the one thread that waits on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from simulator.distributed import watchdog
from simulator.distributed.stops import (
    MessageMismatch,
    RankError,
    deadlock,
    mismatch,
    unmatched,
)
from simulator.distributed.watchdog import Watchdog

if TYPE_CHECKING:
    from simulator.distributed.rendezvous import World


@dataclass
class Coordinator:
    """Acts for a world's ranks until every rank returned or the run stops (``world.stop``),
    then lets the messages still flying arrive and releases the ranks left waiting."""

    world: World
    watchdog: Watchdog = field(init=False)
    answered: int = -1
    """``world.changes`` when the polls were last answered "not completed": polls asked again
    with nothing changed since can never be completed."""

    def __post_init__(self) -> None:
        self.watchdog = Watchdog(self.world.timeout)

    def run(self) -> None:
        """Act whenever every rank still running waits in a call, watch the ranks between, and
        end as the world's ``stop`` says (None: every rank returned and every message arrived)."""
        world, period = self.world, self.watchdog.period
        look = watchdog.watch_clock()
        with world.lock:
            while world.stop is None and len(world.returned) < world.size:
                if world.failed:
                    rank = min(world.failed)
                    world.stop = RankError(rank, world.failed[rank])
                    world.stop.__cause__ = world.failed[rank]
                elif world.waiting() and world.waiting() + len(world.returned) == world.size:
                    self._meet()
                elif period is None:
                    world.lock.wait()
                elif (now := watchdog.watch_clock()) >= look:
                    look = now + period
                    world.stop = self.watchdog.look(world, now)
                else:
                    world.lock.wait(look - now)
            if world.stop is None:  # every rank returned: their messages still go, or mismatch
                world.stop = self._progress()
                while world.stop is None and world.simulator.in_flight:
                    world.stop = self._advance()
                world.stop = world.stop or unmatched(world)
            world.release()

    def _meet(self) -> None:
        """Every rank still running waits in a call. The sends and receives that match start,
        and the ranks whose messages arrived are released; else the polls are answered; else,
        every rank in a collective, it is simulated and they are released (or the calls
        differ); else the messages run to the next arrival; else no rank can move."""
        world = self.world
        before = world.changes
        world.stop = self._progress()
        if world.stop is not None or world.changes != before:
            return
        if world.polls and world.changes != self.answered:
            self.answered = world.changes
            for rank in list(world.polls):  # it polled while the network ran to now
                world.clocks[rank] = max(world.clocks[rank], world.simulator.now)
                del world.polls[rank]
                world.wakes.pop(rank).set()
            return
        if not world.blocked and not world.polls:
            self._collective()
        elif world.simulator.in_flight:
            world.stop = self._advance()
        else:
            world.stop = deadlock(world)

    def _collective(self) -> None:
        """Every rank still running waits in a collective: simulate it from the latest clock and
        release them, or stop the run (the calls differ, or the simulation raised)."""
        world = self.world
        world.stop = mismatch(world)
        if world.stop is not None:
            return
        start = max(world.clocks)
        try:
            took = world.simulator.simulate([world.pending[rank] for rank in range(world.size)],
                                            start)
        except Exception as error:
            world.stop = error
            return
        world.clocks = [start + took] * world.size
        world.simulated += 1
        world.changes += 1
        self.watchdog.all_moved()  # the ranks released start afresh
        world.pending.clear()
        for wake in world.wakes.values():
            wake.set()
        world.wakes.clear()

    def _progress(self) -> BaseException | None:
        """Start the messages whose send and receive match now and release the ranks whose
        messages arrived; the error that stops the run, if any."""
        world = self.world
        pairs = world.mailbox.match()
        for send, recv in pairs:
            if send.view.dtype != recv.view.dtype or send.view.shape != recv.view.shape:
                return MessageMismatch(
                    f"send/recv mismatch: rank {send.rank} called {send.signature}; rank "
                    f"{recv.rank} called {recv.signature}: expected the same dtype and shape "
                    "on both sides")
        if pairs:
            try:
                world.simulator.launch(pairs)
            except Exception as error:
                return error
            world.changes += 1
        for waiting in (world.blocked, world.polls):
            for rank, op in list(waiting.items()):
                if op.end_s is not None:
                    del waiting[rank]
                    world.wakes.pop(rank).set()
                    self.watchdog.moved(rank)
                    world.changes += 1
        return None

    def _advance(self) -> BaseException | None:
        """Run the messages to their next arrival, which no message still to come can change:
        each starts when a rank posts it, and every rank that could still post waits for an
        arrival (or a match, or every rank in a collective) first."""
        world = self.world
        try:
            delivered = world.simulator.advance()
        except Exception as error:
            return error
        world.held -= sum(send.view.nbytes for send, _ in delivered)
        world.changes += 1
        return None
