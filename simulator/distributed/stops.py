"""Why a run stops, in words: the errors :func:`~simulator.distributed.spawn` raises when the
ranks' calls differ (:class:`CollectiveMismatch`, :class:`MessageMismatch`), a rank raised
(:class:`RankError`) or no rank can move (:class:`Stalled`), and the messages that name who waits
for whom. Ranks are named in runs (``ranks 0-2, 5``) and at most :data:`MAX_PLACES` places are
named before the rest are counted, so that a message about thousands of ranks stays a line. The
functions read a :class:`~simulator.distributed.rendezvous.World` as it stands, under its lock,
and change nothing."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from simulator.distributed.p2p import whom
from simulator.errors import SimulatorError

if TYPE_CHECKING:
    from simulator.distributed.rendezvous import World

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


def groups(found: list[tuple[str, list[int]]], rest: str) -> list[str]:
    """``ranks 0-2 <what>`` for the first MAX_PLACES groups, then how many ranks are elsewhere."""
    parts = [f"{ranks_text(ranks)} {what}" for what, ranks in found[:MAX_PLACES]]
    more = sum(len(ranks) for _, ranks in found[MAX_PLACES:])
    if more:
        parts.append(f"{more} more rank{'s' if more > 1 else ''} {rest}")
    return parts


def mismatch(world: World) -> CollectiveMismatch | None:
    """The error naming every rank's call, unless all ranks made the same one."""
    said = {rank: f"called {world.pending[rank].signature}" if rank in world.pending
            else "returned" for rank in range(world.size)}
    if len(set(said.values())) == 1:
        return None
    alike: dict[str, list[int]] = {}
    for rank, what in said.items():
        alike.setdefault(what, []).append(rank)
    parts = [f"{ranks_text(ranks)} {what}" for what, ranks in alike.items()]
    return CollectiveMismatch(f"collective #{world.simulated} mismatch: " + "; ".join(parts))


def unmatched(world: World) -> MessageMismatch | None:
    """The error naming the sends and receives never matched once every rank returned."""
    left = world.mailbox.unmatched()
    if not left:
        return None
    parts = [f"rank {op.rank} called {op.signature}, for {whom(op, world.returned, world.size)}"
             for op in left[:MAX_PLACES]]
    if len(left) > MAX_PLACES:
        parts.append(f"{len(left) - MAX_PLACES} more sends or receives never matched")
    return MessageMismatch("every rank returned with sends or receives never matched: "
                           + "; ".join(parts))


def p2p_waits(world: World) -> list[str]:
    """What each rank waiting on a send or receive (or polling one) waits for."""
    texts: dict[tuple[str, str], list[int]] = {}
    for rank in sorted({*world.blocked, *world.polls}):
        op, verb = ((world.blocked[rank], "wait") if rank in world.blocked
                    else (world.polls[rank], "poll"))
        what = f"in {op.signature}" if verb == "wait" else f"is_completed() of {op.signature}"
        texts.setdefault((verb, f"{what} for {whom(op, world.returned, world.size)}"),
                         []).append(rank)
    return groups([(f"{verb}{'s' if len(ranks) == 1 else ''} {what}", ranks)
                   for (verb, what), ranks in texts.items()], "in other sends or receives")


def collective_waits(world: World, others: Iterable[int]) -> list[str]:
    """What the ranks waiting in a collective wait for: those of ``others`` not in it."""
    others = sorted(others)
    calls: dict[str, list[int]] = {}
    for rank in sorted(world.pending):
        calls.setdefault(world.pending[rank].signature, []).append(rank)
    return groups([(f"wait{'s' if len(ranks) == 1 else ''} in collective "
                    f"#{world.simulated}, {signature}, for "
                    f"{ranks_text(r for r in others if r not in ranks)}", ranks)
                   for signature, ranks in calls.items()], "in other calls")


def who_returned(world: World) -> list[str]:
    """``ranks 0-2 returned``, or nothing if no rank has."""
    return [f"{ranks_text(world.returned)} returned"] if world.returned else []


def deadlock(world: World) -> Stalled:
    """No rank can move: each waits for a message or a partner that will never come."""
    running = [rank for rank in range(world.size) if rank not in world.returned]
    parts = p2p_waits(world) + collective_waits(world, running) + who_returned(world)
    return Stalled("spawn stalled, no rank can move: " + "; ".join(parts), (),
                   in_calls(world))


def in_calls(world: World) -> tuple[int, ...]:
    """The ranks waiting in a call (a collective, a send or receive, a poll), in order."""
    return tuple(sorted({*world.pending, *world.blocked, *world.polls}))
