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

Why the closed forms are upper bounds everywhere and exact on ``switch`` and
``fully_connected``: see :mod:`simulator.algorithms.phases.direct`.
"""

from __future__ import annotations

import numpy as np

from simulator.algorithms.algorithm import Algorithm, ExactOn
from simulator.algorithms.comm import COPY, REDUCE, Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import EMPTY, Footprint
from simulator.algorithms.phases.direct import (
    all_pairs,
    direct_allgather,
    direct_allgather_s,
    direct_reduce_scatter,
    direct_reduce_scatter_s,
    exchange,
    exchange_footprint,
    exchange_schedule,
    largest_chunk_bytes,
    peers,
)
from simulator.algorithms.schedule import Group, Schedule, transfers
from simulator.model.collective import ROOT, Collective
from simulator.model.nccl_point import NcclBinding
from simulator.model.rccl import MSCCL_ALGORITHM

_FLAT = (ExactOn("switch"), ExactOn("fully_connected"))
"""Flows share every link evenly there: none on ``fully_connected``, p-1 per up- and downlink
on ``switch``."""


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
    exact_on = _FLAT
    composable = True
    nccl = NcclBinding(msccl=MSCCL_ALGORITHM)  # RCCL's MSCCL allreduce_pairs (model/rccl.py)

    def program(self, comm: Comm) -> Program:
        chunks = comm.chunks(comm.size)
        yield from direct_reduce_scatter(comm, chunks)
        yield from direct_allgather(comm, chunks)

    def schedule(self, group: Group) -> Schedule:
        return Schedule.sequence([exchange_schedule(group, reduce=True),
                                  exchange_schedule(group, reduce=False)], group.ranks)

    def footprint(self, group: Group) -> Footprint:
        return exchange_footprint(group, phases=2)

    def model_s(self, cost: CostInputs, count: int) -> float:
        p = cost.ranks
        if p == 1:
            return 0.0
        pairs, c = all_pairs(p), largest_chunk_bytes(cost, count)
        return 2 * (cost.alpha(pairs) + c * cost.shared_beta(pairs)) + (p - 1) * cost.reduce_s(c)


class DirectReduceScatter(Algorithm):
    """Direct reduce-scatter: shard c straight to owner c, which reduces the p-1 it receives.

    T = alpha + c·beta_shared + (p-1)·g  (c, g as for :class:`DirectAllreduce`).
    """

    name = "direct"
    collective = Collective.REDUCE_SCATTER
    exact_on = _FLAT

    def program(self, comm: Comm) -> Program:
        yield from direct_reduce_scatter(comm, comm.chunks(comm.size))

    def schedule(self, group: Group) -> Schedule:
        return Schedule.sequence([exchange_schedule(group, reduce=True)], group.ranks)

    def footprint(self, group: Group) -> Footprint:
        return exchange_footprint(group)

    def model_s(self, cost: CostInputs, count: int) -> float:
        return direct_reduce_scatter_s(cost, count)


class DirectAllgather(Algorithm):
    """Direct allgather: every rank sends its own chunk straight to every other rank.

    T = alpha + c·beta_shared,  c = ⌈count/p⌉·itemsize.
    """

    name = "direct"
    collective = Collective.ALLGATHER
    exact_on = _FLAT

    def program(self, comm: Comm) -> Program:
        yield from direct_allgather(comm, comm.chunks(comm.size))

    def schedule(self, group: Group) -> Schedule:
        return Schedule.sequence([exchange_schedule(group, reduce=False)], group.ranks)

    def footprint(self, group: Group) -> Footprint:
        return exchange_footprint(group)

    def model_s(self, cost: CostInputs, count: int) -> float:
        return direct_allgather_s(cost, count)


class DirectBroadcast(Algorithm):
    """Flat-tree broadcast: the root sends its whole buffer straight to every other rank.

    T = alpha + n·beta_shared: n·beta on ``fully_connected``, (p-1)·n·beta on ``switch`` (the
    root's uplink carries all p-1 copies).
    """

    name = "direct"
    collective = Collective.BROADCAST
    exact_on = _FLAT

    def program(self, comm: Comm) -> Program:
        whole = comm.buffer
        if comm.rank == ROOT:
            yield from exchange(comm, [(peer, whole) for peer in peers(ROOT, comm.size)], [], COPY)
        else:
            yield from exchange(comm, [], [(ROOT, whole)], COPY)

    def schedule(self, group: Group) -> Schedule:
        return _one_to_all(group, reduce=False)

    def footprint(self, group: Group) -> Footprint:
        return _one_to_all_footprint(group, reduce=False)

    def model_s(self, cost: CostInputs, count: int) -> float:
        pairs = [(ROOT, peer) for peer in peers(ROOT, cost.ranks)]
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
    exact_on = _FLAT

    def program(self, comm: Comm) -> Program:
        whole = comm.buffer
        if comm.rank == ROOT:
            yield from exchange(comm, [], [(peer, whole) for peer in peers(ROOT, comm.size)],
                                REDUCE)
        else:
            yield from exchange(comm, [(ROOT, whole)], [], REDUCE)

    def schedule(self, group: Group) -> Schedule:
        return _one_to_all(group, reduce=True)

    def footprint(self, group: Group) -> Footprint:
        return _one_to_all_footprint(group, reduce=True)

    def model_s(self, cost: CostInputs, count: int) -> float:
        p = cost.ranks
        if p == 1:
            return 0.0
        pairs = [(peer, ROOT) for peer in peers(ROOT, p)]
        n = cost.nbytes(count)
        return cost.alpha(pairs) + n * cost.shared_beta(pairs) + (p - 1) * cost.reduce_s(n)


def _one_to_all(group: Group, *, reduce: bool) -> Schedule:
    """The flat tree as a schedule: the root sends the whole buffer to every other rank
    (broadcast), or every other rank sends it to the root, which reduces them in the order
    root+1, root+2, … (reduce); one message each, all posted at the start."""
    others = np.array(peers(ROOT, group.size), dtype=np.int64)
    root = np.full(len(others), ROOT, dtype=np.int64)
    starts = np.full(len(others), group.buffer.start, dtype=np.int64)
    stops = np.full(len(others), group.buffer.stop, dtype=np.int64)
    senders, receivers = (others, root) if reduce else (root, others)
    return Schedule.sequence([transfers(group, senders, receivers, starts, stops, reduce=reduce,
                                        whole=True)], group.ranks)


def _one_to_all_footprint(group: Group, *, reduce: bool) -> Footprint:
    """:func:`_one_to_all` counted: one message between the root and each other rank, which
    receive in a chain each (broadcast) or the root in one (reduce)."""
    others = group.size - 1
    return Footprint.whole(others, others, ends=1 if reduce else others) if others else EMPTY
