"""Direct algorithms: every message goes in one hop of the schedule straight to the rank that
needs it (all-to-all for allreduce, reduce-scatter and allgather; one-to-all and all-to-one for
broadcast and reduce).

The allreduce is the "all-pairs" schedule of MSCCL (Cowan et al., "MSCCLang: Microsoft
Collective Communication Language", ASPLOS 2023; msccl-tools ``allreduce_allpairs``): every rank
sends shard c straight to its owner c, each owner reduces the p-1 shards it receives, then sends
the reduced shard straight back to everyone: a direct reduce-scatter and a direct allgather, two
message latencies in all, against 2(p-1) for the ring. Broadcast and reduce are the flat-tree
("linear") algorithms of MPI libraries (Pjesivac-Grbovic et al., "Performance analysis of MPI
collective operations", Cluster Computing 10(2), 2007). Custom allreduce kernels for NVLink
(TensorRT-LLM, vLLM) call this schedule "two-shot"; there "one-shot" names a variant in which
every rank pulls and reduces whole buffers.

Every rank posts all its sends of a phase first, then receives in a fixed order (peers
me+1, me+2, … mod p), so transfers overlap and results are reproducible. Shards move whole: the
scenario's ``chunk_size`` is not used (these schedules are meant for latency-bound sizes).

Closed forms. Each phase puts a message on every pair of its pattern at once, so links are
shared wherever routes meet. A connection carries one message at a time, so a link crossed by
the routes of n_l of the pattern's pairs never carries more than n_l flows, and max-min sharing
gives every flow at least min over its links of bandwidth_l / n_l. Hence each message of m bytes
takes at most alpha + m·beta_shared, with beta_shared = max over used links of n_l / bandwidth_l
(:meth:`CostInputs.shared_beta`), and the closed forms below are upper bounds on any topology. They are
exact where the most loaded link of the largest shard is saturated by exactly n_l equal flows
that start together: on ``fully_connected`` (n_l = 1, no sharing) and on ``switch``, where every
uplink and downlink is crossed by p-1 pairs, so every flow gets exactly bandwidth/(p-1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from simulator.collective import ROOT, Collective
from simulator.collectives.base import Algorithm
from simulator.costmodel import CostInputs
from simulator.program import COPY, REDUCE, Chunk, Combine, Comm, Program

Pair = tuple[int, int]


def _peers(me: int, p: int) -> list[int]:
    """The other ranks in the fixed order me+1, me+2, … (mod p)."""
    return [(me + k) % p for k in range(1, p)]


def exchange(comm: Comm, sends: Sequence[tuple[int, Chunk]], recvs: Sequence[tuple[int, Chunk]],
             op: Combine) -> Program:
    """One direct step: post every ``(peer, chunk)`` send, then receive each ``(peer, into)`` in
    the given order, combining with ``op``. Posting all sends before the first receive lets every
    transfer of the step run at once."""
    for peer, chunk in sends:
        comm.send(peer, chunk)
    for peer, into in recvs:
        yield comm.recv(peer, into=into, op=op)


def direct_reduce_scatter(me: int, comm: Comm, chunks: Sequence[Chunk]) -> Program:
    """Send chunk c straight to its owner c; reduce the p-1 shards of my own chunk ``chunks[me]``."""
    peers = _peers(me, comm.size)
    yield from exchange(comm, [(owner, chunks[owner]) for owner in peers],
                        [(peer, chunks[me]) for peer in peers], REDUCE)


def direct_allgather(me: int, comm: Comm, chunks: Sequence[Chunk]) -> Program:
    """Send my chunk ``chunks[me]`` straight to every other rank; copy in every other owner's."""
    peers = _peers(me, comm.size)
    yield from exchange(comm, [(peer, chunks[me]) for peer in peers],
                        [(owner, chunks[owner]) for owner in peers], COPY)


def _all_pairs(p: int) -> list[Pair]:
    return [(a, b) for a in range(p) for b in range(p) if a != b]


def _shard_bytes(cost: CostInputs, count: int) -> int:
    """Bytes of the largest of the p chunks (⌈count/p⌉ elements)."""
    return cost.nbytes(math.ceil(count / cost.ranks))


class DirectAllreduce(Algorithm):
    """Direct (all-pairs) allreduce: a direct reduce-scatter, then a direct allgather.

    T = 2·alpha + 2·c·beta_shared + (p-1)·g,  c = ⌈count/p⌉·itemsize,  g = launch + c·gamma,

    i.e. 2·(alpha + c·beta) + (p-1)·g on ``fully_connected`` and 2·alpha + 2(p-1)·c·beta + (p-1)·g
    on ``switch`` (beta_shared = (p-1)·beta: p-1 flows on every up- and downlink). The p-1 shards
    of the largest chunk reach their owner at the same instant (equal messages on equally shared
    routes), so its p-1 reductions never overlap an arrival and queue on the GPU one after the
    other. Smaller owners finish earlier and may start their allgather while the largest shards
    are still arriving; they never slow the largest owner's flows, which always get their share.
    """

    name = "direct"
    collective = Collective.ALLREDUCE

    def program(self, me: int, comm: Comm) -> Program:
        chunks = comm.chunks(comm.size)
        yield from direct_reduce_scatter(me, comm, chunks)
        yield from direct_allgather(me, comm, chunks)

    def model_time(self, cost: CostInputs, count: int) -> float:
        p = cost.ranks
        if p == 1:
            return 0.0
        pairs, c = _all_pairs(p), _shard_bytes(cost, count)
        return 2 * (cost.alpha(pairs) + c * cost.shared_beta(pairs)) + (p - 1) * cost.reduce_s(c)


class DirectReduceScatter(Algorithm):
    """Direct reduce-scatter: shard c straight to owner c, which reduces the p-1 it receives.

    T = alpha + c·beta_shared + (p-1)·g  (c, g as for :class:`DirectAllreduce`).
    """

    name = "direct"
    collective = Collective.REDUCE_SCATTER

    def program(self, me: int, comm: Comm) -> Program:
        yield from direct_reduce_scatter(me, comm, comm.chunks(comm.size))

    def model_time(self, cost: CostInputs, count: int) -> float:
        p = cost.ranks
        if p == 1:
            return 0.0
        pairs, c = _all_pairs(p), _shard_bytes(cost, count)
        return cost.alpha(pairs) + c * cost.shared_beta(pairs) + (p - 1) * cost.reduce_s(c)


class DirectAllgather(Algorithm):
    """Direct allgather: every rank sends its own chunk straight to every other rank.

    T = alpha + c·beta_shared,  c = ⌈count/p⌉·itemsize.
    """

    name = "direct"
    collective = Collective.ALLGATHER

    def program(self, me: int, comm: Comm) -> Program:
        yield from direct_allgather(me, comm, comm.chunks(comm.size))

    def model_time(self, cost: CostInputs, count: int) -> float:
        if cost.ranks == 1:
            return 0.0
        pairs = _all_pairs(cost.ranks)
        return cost.alpha(pairs) + _shard_bytes(cost, count) * cost.shared_beta(pairs)


class DirectBroadcast(Algorithm):
    """Flat-tree broadcast: the root sends its whole buffer straight to every other rank.

    T = alpha + n·beta_shared: n·beta on ``fully_connected``, (p-1)·n·beta on ``switch`` (the
    root's uplink carries all p-1 copies).
    """

    name = "direct"
    collective = Collective.BROADCAST

    def program(self, me: int, comm: Comm) -> Program:
        whole = comm.buffer
        if me == ROOT:
            yield from exchange(comm, [(peer, whole) for peer in _peers(ROOT, comm.size)], [], COPY)
        else:
            yield from exchange(comm, [], [(ROOT, whole)], COPY)

    def model_time(self, cost: CostInputs, count: int) -> float:
        pairs = [(ROOT, peer) for peer in _peers(ROOT, cost.ranks)]
        return cost.alpha(pairs) + cost.nbytes(count) * cost.shared_beta(pairs)


class DirectReduce(Algorithm):
    """Flat-tree reduce: every rank sends its whole buffer straight to the root, which reduces
    the p-1 buffers one after the other, receiving from ranks 1, 2, … in turn.

    T = alpha + n·beta_shared + (p-1)·g(n): all p-1 buffers arrive together on ``switch`` (the
    root's downlink shared p-1 ways) and on ``fully_connected`` (one cable each), so the
    reductions queue after the arrival.
    """

    name = "direct"
    collective = Collective.REDUCE

    def program(self, me: int, comm: Comm) -> Program:
        whole = comm.buffer
        if me == ROOT:
            yield from exchange(comm, [], [(peer, whole) for peer in _peers(ROOT, comm.size)], REDUCE)
        else:
            yield from exchange(comm, [(ROOT, whole)], [], REDUCE)

    def model_time(self, cost: CostInputs, count: int) -> float:
        p = cost.ranks
        if p == 1:
            return 0.0
        pairs = [(peer, ROOT) for peer in _peers(ROOT, p)]
        n = cost.nbytes(count)
        return cost.alpha(pairs) + n * cost.shared_beta(pairs) + (p - 1) * cost.reduce_s(n)
