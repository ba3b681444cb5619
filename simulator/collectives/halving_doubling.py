"""Rabenseifner's allreduce: recursive-halving reduce-scatter, then recursive-doubling allgather.

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in MPICH",
IJHPCA 19(1), 2005, §4 (MPICH's allreduce for long messages). On p = 2^L ranks, the reduce-scatter
halves the data at every step: at distance d = p/2, p/4, …, 1 rank j keeps the half of its current
blocks that its own aligned group of d ranks ends with, sends the other half to rank j XOR d and
reduces the half it receives; after L steps rank j holds block j, fully reduced. The allgather
retraces the steps in reverse (``recursive_doubling.doubling_gather``). Other p use the fold of
``recursive_doubling.folded``.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.collective import Collective
from simulator.collectives.base import Algorithm
from simulator.collectives.phases import swap
from simulator.collectives.recursive_doubling import (
    distances,
    doubling_gather,
    doubling_gather_time,
    fold_pairs,
    fold_time,
    folded,
    group,
    largest_group,
    power_of_two_below,
    step_pairs,
    survivor_blocks,
    transfer_s,
)
from simulator.costmodel import CostInputs
from simulator.program import REDUCE, Chunk, Comm, Program


def halves(buffer: Chunk, parts: int) -> list[Chunk]:
    """``buffer`` halved, the halves halved, … into ``parts`` (a power of two) blocks: the blocks
    of any aligned group differ from those of its sibling group by at most one element, so the two
    messages of every exchange are as equal as they can be.

    >>> halves(Chunk(0, 7), 4)
    [Chunk(start=0, stop=2), Chunk(start=2, stop=4), Chunk(start=4, stop=6), Chunk(start=6, stop=7)]
    """
    if parts == 1:
        return [buffer]
    lower, upper = buffer.split(2)
    return halves(lower, parts // 2) + halves(upper, parts // 2)


def halving_scatter(me: int, comm: Comm, blocks: Sequence[Chunk]) -> Program:
    """Recursive-halving reduce-scatter on q = 2^L ranks: rank j ends with ``blocks[j]`` reduced.

    At d = q/2, …, 1 the partners j and j XOR d split the 2d blocks they share: each sends the
    aligned group of d blocks its partner ends up in and reduces the group it ends up in itself.
    """
    for d in reversed(distances(comm.size)):
        partner = me ^ d
        yield from swap(comm, partner, send=group(blocks, partner, d), into=group(blocks, me, d),
                            op=REDUCE)


def halving_scatter_time(cost: CostInputs, blocks: Sequence[Chunk]) -> float:
    """Σ over d = q/2, …, 1 of alpha + M_d·beta + g(M_d), M_d = the largest group of d blocks."""
    return sum(transfer_s(cost, step_pairs(cost.ranks, d), largest_group(blocks, d), True)
               for d in reversed(distances(len(blocks))))


class HalvingDoublingAllreduce(Algorithm):
    """Rabenseifner's allreduce: recursive-halving reduce-scatter, recursive-doubling allgather.

    Bandwidth-optimal in log2(p) steps each way (Thakur et al. 2005 §4). For p = 2^L and
    blocks of n/p bytes:

        T = 2·L·alpha + 2(p-1)/p·n·beta + (p-1)/p·n·gamma + L·launch

    (in general each step costs alpha + M_d·beta [+ g(M_d)], M_d the largest group of d blocks).
    Otherwise the fold adds alpha + n·beta + g(n) before and alpha + n·beta after, and the
    q = 2^⌊log2 p⌋ survivors split the buffer into q blocks.

    Exact for p = 2^L on ``switch`` and ``fully_connected``: an exchange uses both directions of
    links no other flow uses, and :func:`halves` keeps the two messages of every step within one
    element, which any non-zero latency covers (at zero latency: when q divides n). With the fold
    it is exact on ``fully_connected`` when q divides n (a folded rank's data go out and back
    through every step, so its hand-back is last) and an upper bound otherwise; on ``switch`` the
    survivors that did not fold start at once and share the folded survivors' links, so it is
    not a bound there. On a physical ``ring`` distant partners share links (tests/test_recursive.py).
    """

    name = "halving_doubling"
    collective = Collective.ALLREDUCE

    def program(self, me: int, comm: Comm) -> Program:
        def reduce_scatter_allgather(j: int, group_comm: Comm) -> Program:
            blocks = halves(group_comm.buffer, group_comm.size)
            yield from halving_scatter(j, group_comm, blocks)
            yield from doubling_gather(j, group_comm, blocks)

        yield from folded(me, comm, reduce_scatter_allgather, hand_in=lambda _: [comm.buffer],
                          op=REDUCE, hand_back=lambda _: [comm.buffer])

    def model_time(self, cost: CostInputs, count: int) -> float:
        before, after = fold_time(cost, count, True, count)
        blocks = halves(Chunk(0, count), power_of_two_below(cost.ranks))
        return before + halving_scatter_time(cost, blocks) + doubling_gather_time(cost, blocks) + after


class HalvingDoublingReduceScatter(Algorithm):
    """Recursive-halving reduce-scatter: rank r ends with chunk r, reduced over all ranks.

    Thakur et al. 2005 §3 (MPICH's reduce-scatter for commutative ops). For p = 2^L:

        T = L·alpha + (p-1)/p·n·beta + (p-1)/p·n·gamma + L·launch.

    Otherwise rank 2i < 2r folds its whole buffer into rank 2i+1 (alpha + n·beta + g(n)), whose
    block in the halving is chunks 2i and 2i+1 together (the survivors' blocks stay contiguous
    and in buffer order), and gets its chunk back at the end (alpha + c·beta).

    Exact for p = 2^L on ``switch`` and ``fully_connected`` when the chunks are equal, or when
    the route latency outlasts the transfer of the < p/2 elements by which two messages of a
    step can differ. With the fold: an upper bound on ``fully_connected``, not a bound on ``switch``.
    """

    name = "halving_doubling"
    collective = Collective.REDUCE_SCATTER

    def program(self, me: int, comm: Comm) -> Program:
        chunk = comm.chunks(comm.size)
        blocks = survivor_blocks(comm.buffer, comm.size)

        def scatter(j: int, group_comm: Comm) -> Program:
            yield from halving_scatter(j, group_comm, blocks)

        yield from folded(me, comm, scatter, hand_in=lambda _: [comm.buffer], op=REDUCE,
                          hand_back=lambda rank: [chunk[rank]])

    def model_time(self, cost: CostInputs, count: int) -> float:
        chunk = Chunk(0, count).split(cost.ranks)
        handed_back = max((chunk[a].count for a, _ in fold_pairs(cost.ranks)), default=0)
        before, after = fold_time(cost, count, True, handed_back)
        return before + halving_scatter_time(cost, survivor_blocks(Chunk(0, count), cost.ranks)) + after
