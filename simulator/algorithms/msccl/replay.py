"""What every chunk of an MSCCL schedule holds when it ends, as contributions: which rank's
initial chunk, how many times. It names what a wrong schedule got wrong ("rank 3 chunk 5 holds
the sum of ranks 0-2 (missing 3)") once the numpy check of a run (the verification) found it.

The replay runs the steps in dependency order (:func:`~.order.step_order`), each on sets of
contributions instead of numbers: a reduction adds them, a copy or a receive replaces them, a
send takes them as they are when it runs, as the engines take a message's data when it is
posted. Where no dependency orders two threadblocks that touch one chunk (a race), the run's
order may differ from this one: :func:`explain` then says so.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache

from simulator.algorithms.msccl.ir import Kind, MscclSchedule
from simulator.algorithms.msccl.layout import Layout
from simulator.algorithms.msccl.order import matched, step_at, step_order
from simulator.errors import rank_spans
from simulator.model.collective import ROOT, Collective
from simulator.model.reduction import ReduceOp

Contributions = Counter[tuple[int, int]]
"""(rank, chunk) of the collective's buffer at the start → how many times it is in."""

UNSET = (-1, -1)
"""The contribution of a workspace chunk nothing wrote before it was read."""

_OPS = {ReduceOp.SUM: "sum", ReduceOp.PROD: "product", ReduceOp.MAX: "maximum",
        ReduceOp.MIN: "minimum", ReduceOp.AVG: "sum"}
"""How a message names the reduction of several contributions (an average is the sum, divided
by p at the end)."""


@lru_cache(maxsize=8)  # a run that failed asks once per point: the sizes of one schedule
def replay(schedule: MscclSchedule) -> dict[tuple[int, int], Contributions]:
    """What (rank, chunk) of every rank's collective buffer holds at the end."""
    layout = Layout.of(schedule)
    n = schedule.chunks
    slots = [[Counter({(rank, c): 1}) if c < n else Counter({UNSET: 1})
              for c in range(layout.total)] for rank in range(schedule.ngpus)]
    if layout.input_copy is not None:
        for rank in range(schedule.ngpus):
            at = layout.input_at(schedule, rank)
            for c in range(schedule.input_chunks):
                slots[rank][layout.input_copy + c] = Counter(slots[rank][at + c])
    taken = matched(schedule)
    messages: dict[tuple[int, int, int], list[Contributions]] = {}
    ordered, _ = step_order(schedule)
    for node in ordered:
        rank = node[0]
        step = step_at(schedule, node)
        if step.kind is Kind.NOP:
            continue
        mine = slots[rank]
        src = range(layout.place(schedule, rank, step.src),
                    layout.place(schedule, rank, step.src) + step.count)
        dst = range(layout.place(schedule, rank, step.dst),
                    layout.place(schedule, rank, step.dst) + step.count)
        got = messages.pop(taken[node]) if step.kind.receives else []
        kind = step.kind
        if kind is Kind.SEND:
            sent = [Counter(mine[c]) for c in src]
        elif kind in (Kind.RECV, Kind.RECV_COPY_SEND):
            sent = got
        elif kind in (Kind.RECV_REDUCE_SEND, Kind.RECV_REDUCE_COPY, Kind.RECV_REDUCE_COPY_SEND):
            sent = [mine[c] + g for c, g in zip(src, got, strict=True)]
        elif kind is Kind.COPY:
            sent = [Counter(mine[c]) for c in src]
        else:  # Kind.REDUCE
            sent = [mine[d] + mine[c] for d, c in zip(dst, src, strict=True)]
        if kind.writes:
            for d, value in zip(dst, sent, strict=True):
                mine[d] = Counter(value)
        if kind.sends:
            messages[node] = sent
    return {(rank, c): slots[rank][c] for rank in range(schedule.ngpus) for c in range(n)}


def wanted(schedule: MscclSchedule, rank: int, chunk: int) -> Contributions | None:
    """What (rank, chunk) must hold at the end for the schedule's collective, or None where
    the collective leaves it undefined."""
    p, share = schedule.ngpus, schedule.chunks // schedule.ngpus
    every = Counter({(q, chunk): 1 for q in range(p)})
    collective = schedule.collective
    if collective is Collective.ALLREDUCE:
        return every
    if collective is Collective.REDUCE_SCATTER:
        return every if chunk // share == rank else None
    if collective is Collective.REDUCE:
        return every if rank == ROOT else None
    if collective is Collective.ALLGATHER:
        return Counter({(chunk // share, chunk): 1})
    return Counter({(ROOT, chunk): 1})  # broadcast


def explain(schedule: MscclSchedule, rank: int, chunk: int, op: ReduceOp) -> str | None:
    """What chunk ``chunk`` of rank ``rank`` holds after the schedule, where that is not what
    the collective wants: ``holds the sum of ranks 0-2 (missing 3)``; for a chunk the replay
    gets right, that the run's order differed (a race); None where the chunk is undefined."""
    want = wanted(schedule, rank, chunk)
    if want is None:
        return None
    got = replay(schedule)[(rank, chunk)]
    if got == want:
        return ("is wrong, though the schedule's dependencies give it the right data: "
                "threadblocks that no dependency orders write it or what it is made of (a race)")
    return "holds " + _holds(got, want, chunk, op)


def _holds(got: Contributions, want: Contributions, chunk: int, op: ReduceOp) -> str:
    """``got`` said against ``want``, both contributions to chunk ``chunk``."""
    if UNSET in got:
        return "data from a workspace chunk nothing wrote (uninitialised scratch)"
    chunks = sorted({c for _, c in got})
    if chunks != [chunk]:
        parts = []
        for c in chunks:
            ranks = sorted({q for q, d in got if d == c})
            parts.append(f"rank {ranks[0]}'s chunk {c}" if len(ranks) == 1
                         else f"chunk {c} of ranks {rank_spans(ranks)}")
        return f"{_list(parts)} (expected chunk {chunk})"
    ranks = [q for q, _ in got.elements()]
    wanted_ranks = sorted(q for q, _ in want)
    what = (f"rank {ranks[0]}'s data alone" if len(ranks) == 1 else
            f"the {_OPS[op]} of ranks {rank_spans(sorted(set(ranks)))}")
    notes = []
    missing = sorted(set(wanted_ranks) - set(ranks))
    if missing:
        notes.append(f"missing {rank_spans(missing)}")
    twice = sorted({q for q in ranks if got[(q, chunk)] > 1})
    for q in twice:
        notes.append(f"rank {q} {_times(got[(q, chunk)])}")
    strays = sorted(set(ranks) - set(wanted_ranks))
    if strays and len(wanted_ranks) == 1:
        notes.append(f"expected rank {wanted_ranks[0]}'s alone")
    elif strays:
        notes.append(f"ranks {rank_spans(strays)} not expected")
    return what + (f" ({', '.join(notes)})" if notes else "")


def _times(count: int) -> str:
    return "twice" if count == 2 else f"{count} times"


def _list(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
