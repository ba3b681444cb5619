"""Direct phases: every message goes in one hop of the schedule straight to the rank that needs
it; each program beside its closed form.

Every rank posts all its sends of a phase first, then receives in a fixed order (peers
me+1, me+2, … mod p), so transfers overlap and results are reproducible. Spans move whole: the
scenario's ``piece_size`` is not used (these schedules are meant for latency-bound sizes).

Closed forms. Each phase puts a message on every pair of its pattern at once, so links are
shared wherever routes meet. A connection carries one message at a time, so a link crossed by
the routes of n_l of the pattern's pairs never carries more than n_l flows, and max-min sharing
gives every flow at least min over its links of bandwidth_l / n_l. Hence each message of m bytes
takes at most alpha + m·beta_shared, with beta_shared = max over used links of n_l / bandwidth_l
(:meth:`~simulator.algorithms.cost.CostInputs.shared_beta`), and the closed forms are upper
bounds on any topology. They are exact where the most loaded link of the largest shard is
saturated by exactly n_l equal flows that start together: on ``fully_connected`` (n_l = 1, no
sharing) and on ``switch``, where every uplink and downlink is crossed by p-1 pairs, so every
flow gets exactly bandwidth/(p-1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from simulator.algorithms.comm import COPY, REDUCE, Combine, Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import EMPTY, Footprint
from simulator.algorithms.schedule import NONE, Group, Schedule
from simulator.model.span import Span

Pair = tuple[int, int]


def peers(me: int, p: int) -> list[int]:
    """The other ranks in the fixed order me+1, me+2, … (mod p)."""
    return [(me + k) % p for k in range(1, p)]


def exchange(comm: Comm, sends: Sequence[tuple[int, Span]], recvs: Sequence[tuple[int, Span]],
             combine: Combine, label: str = "") -> Program:
    """One direct step: post every ``(peer, span)`` send, then receive each ``(peer, into)`` in
    the given order, combining with ``combine``. Posting all sends before the first receive lets
    every transfer of the step run at once."""
    for peer, span in sends:
        comm.send(peer, span, label)
    for peer, into in recvs:
        yield comm.recv(peer, into=into, combine=combine, label=label)


def direct_reduce_scatter(comm: Comm, chunks: Sequence[Span]) -> Program:
    """Send chunk c straight to its owner c; reduce the p-1 shards of my own chunk."""
    me, others = comm.rank, peers(comm.rank, comm.size)
    yield from exchange(comm, [(owner, chunks[owner]) for owner in others],
                        [(peer, chunks[me]) for peer in others], REDUCE, "direct reduce-scatter")


def direct_allgather(comm: Comm, chunks: Sequence[Span]) -> Program:
    """Send my own chunk straight to every other rank; copy in every other owner's."""
    me, others = comm.rank, peers(comm.rank, comm.size)
    yield from exchange(comm, [(peer, chunks[me]) for peer in others],
                        [(owner, chunks[owner]) for owner in others], COPY, "direct allgather")


def exchange_schedule(group: Group, *, reduce: bool, transpose: bool = False) -> Schedule:
    """:func:`direct_reduce_scatter` (``reduce``) or :func:`direct_allgather` as one phase of a
    schedule (:meth:`Schedule.sequence`): message a·(p-1) + k-1 goes from position a to its k-th
    peer d = a+k, every one posted at the phase's start; d receives from its peers d+1, d+2, …,
    so the sender's k-th message is its receiver's (p-k)-th receive. ``transpose``: a direct
    all-to-all's instead (copies; a sends its block d into d's block a)."""
    p = group.size
    sender = np.repeat(np.arange(p, dtype=np.int64), p - 1)
    k = np.tile(np.arange(1, p, dtype=np.int64), p)
    receiver = (sender + k) % p
    order = p - k                                    # which receive of the receiver's it is
    before = (receiver + order - 1) % p              # the sender of its previous receive
    previous = np.where(order == 1, NONE, before * (p - 1) + (p - order))
    starts, stops = group.chunks(p)
    chunk = receiver if reduce else sender
    into = sender if transpose else chunk
    chunk = receiver if transpose else chunk
    return Schedule(group.members[sender], group.members[receiver], starts[chunk], stops[chunk],
                    starts[into], stops[into], np.full(len(k), reduce and not transpose),
                    np.full(len(k), NONE, dtype=np.int64), np.full(len(k), NONE, dtype=np.int64),
                    previous)


def exchange_footprint(group: Group, phases: int = 1) -> Footprint:
    """``phases`` :func:`exchange_schedule` phases in sequence, counted: p(p-1) messages each,
    between the same p(p-1) pairs, every rank receiving in one chain."""
    p = group.size
    if p == 1:
        return EMPTY
    return Footprint.whole(phases * p * (p - 1), p * (p - 1), ends=p)


def all_pairs(p: int) -> list[Pair]:
    """Every ordered pair of distinct ranks: the pattern of a direct reduce-scatter or allgather."""
    return [(a, b) for a in range(p) for b in range(p) if a != b]


def largest_chunk_bytes(cost: CostInputs, count: int) -> int:
    """Bytes of the largest of the p chunks (⌈count/p⌉ elements)."""
    return cost.nbytes(math.ceil(count / cost.ranks))


def direct_reduce_scatter_s(cost: CostInputs, count: int) -> float:
    """Closed form of :func:`direct_reduce_scatter`: alpha + c·beta_shared + (p-1)·g, with
    c = ⌈count/p⌉·itemsize and g = launch + c·gamma (the p-1 shards of the largest chunk arrive
    together and their reductions queue on the owner's GPU)."""
    p = cost.ranks
    if p == 1:
        return 0.0
    pairs, c = all_pairs(p), largest_chunk_bytes(cost, count)
    return cost.alpha(pairs) + c * cost.shared_beta(pairs) + (p - 1) * cost.reduce_s(c)


def direct_allgather_s(cost: CostInputs, count: int) -> float:
    """Closed form of :func:`direct_allgather`: alpha + c·beta_shared, c = ⌈count/p⌉·itemsize."""
    if cost.ranks == 1:
        return 0.0
    pairs = all_pairs(cost.ranks)
    return cost.alpha(pairs) + largest_chunk_bytes(cost, count) * cost.shared_beta(pairs)
