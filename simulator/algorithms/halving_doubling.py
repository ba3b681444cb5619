"""Rabenseifner's allreduce: recursive-halving reduce-scatter, then recursive-doubling allgather.

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in MPICH",
IJHPCA 19(1), 2005, §4 (MPICH's allreduce for long messages). On p = 2^L ranks, the reduce-scatter
halves the data at every step: at distance d = p/2, p/4, …, 1 rank j keeps the half of its current
blocks that its own aligned group of d ranks ends with, sends the other half to rank j XOR d and
reduces the half it receives; after L steps rank j holds block j, fully reduced. The allgather
retraces the steps in reverse. Other p use the fold. The phases and their closed forms are in
:mod:`simulator.algorithms.phases.recursive`.
"""

from __future__ import annotations

from simulator.algorithms.algorithm import Algorithm, ExactOn, RankCounts
from simulator.algorithms.comm import REDUCE, Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import Footprint
from simulator.algorithms.phases.recursive import (
    doubling_gather,
    doubling_gather_footprint,
    doubling_gather_s,
    doubling_gather_schedule,
    fold_pairs,
    fold_s,
    folded,
    folded_footprint,
    folded_schedule,
    halves,
    halves_bounds,
    halving_scatter,
    halving_scatter_footprint,
    halving_scatter_s,
    halving_scatter_schedule,
    own_chunk,
    power_of_two_below,
    survivor_blocks,
    survivor_bounds,
    whole_buffer,
)
from simulator.algorithms.schedule import Group, Schedule
from simulator.model.collective import Collective
from simulator.model.machine import Layout
from simulator.model.span import Span

_POWERS_OF_TWO = (ExactOn("switch", RankCounts.POWERS_OF_TWO),
                  ExactOn("fully_connected", RankCounts.POWERS_OF_TWO))


class HalvingDoublingAllreduce(Algorithm):
    """Rabenseifner's allreduce: recursive-halving reduce-scatter, recursive-doubling allgather.

    Bandwidth-optimal in log2(p) steps each way (Thakur et al. 2005 §4). For p = 2^L and
    blocks of n/p bytes:

        T = 2·L·alpha + 2(p-1)/p·n·beta + (p-1)/p·n·gamma + L·launch

    (in general each step costs alpha + M_d·beta [+ g(M_d)], M_d the largest group of d blocks).
    Otherwise the fold adds alpha + n·beta + g(n) before and alpha + n·beta after, and the
    q = 2^⌊log2 p⌋ survivors split the buffer into q blocks.

    Exact for p = 2^L on ``switch`` and ``fully_connected``: an exchange uses both directions of
    links no other flow uses, and :func:`~simulator.algorithms.phases.recursive.halves` keeps the
    two messages of every step within one element, which any non-zero latency covers (at zero
    latency: when q divides n). With the fold it is exact on ``fully_connected`` when q divides
    n (a folded rank's data go out and back through every step, so its hand-back is last) and an
    upper bound otherwise; on ``switch`` the survivors that did not fold start at once and share
    the folded survivors' links, so it is not a bound there. On a physical ``ring`` distant
    partners share links (tests/test_recursive.py).
    """

    name = "halving_doubling"
    collective = Collective.ALLREDUCE
    exact_on = _POWERS_OF_TWO
    composable = True

    def program(self, comm: Comm) -> Program:
        def reduce_scatter_allgather(survivors: Comm) -> Program:
            blocks = halves(survivors.buffer, survivors.size)
            yield from halving_scatter(survivors, blocks)
            yield from doubling_gather(survivors, blocks)

        yield from folded(comm, reduce_scatter_allgather, hand_in=lambda _: [comm.buffer],
                          combine=REDUCE, hand_back=lambda _: [comm.buffer])

    def schedule(self, group: Group) -> Schedule:
        def reduce_scatter_allgather(survivors: Group) -> list[Schedule]:
            blocks = halves_bounds(survivors.buffer, survivors.size)
            return (halving_scatter_schedule(survivors, blocks)
                    + doubling_gather_schedule(survivors, blocks))
        return folded_schedule(group, reduce_scatter_allgather, hand_in=whole_buffer(group),
                               reduce=True, hand_back=whole_buffer(group))

    def reduction_depth(self, layout: Layout) -> int:
        """⌈log2 p⌉: a folded rank's contribution is reduced once into its survivor's, then
        every one is reduced once per halving step (⌊log2 p⌋ of them)."""
        return (len(layout.hosts) - 1).bit_length()

    def footprint(self, group: Group) -> Footprint:
        def reduce_scatter_allgather(survivors: Group) -> list[Footprint]:
            blocks = halves_bounds(survivors.buffer, survivors.size)
            return (halving_scatter_footprint(survivors, blocks)
                    + doubling_gather_footprint(survivors, blocks))
        return folded_footprint(group, reduce_scatter_allgather, hand_in=whole_buffer(group),
                                hand_back=whole_buffer(group))

    def model_s(self, cost: CostInputs, count: int) -> float:
        before, after = fold_s(cost, count, True, count)
        blocks = halves(Span(0, count), power_of_two_below(cost.ranks))
        return before + halving_scatter_s(cost, blocks) + doubling_gather_s(cost, blocks) + after


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
    exact_on = _POWERS_OF_TWO

    def program(self, comm: Comm) -> Program:
        chunk = comm.chunks(comm.size)
        blocks = survivor_blocks(comm.buffer, comm.size)

        def scatter(survivors: Comm) -> Program:
            yield from halving_scatter(survivors, blocks)

        yield from folded(comm, scatter, hand_in=lambda _: [comm.buffer], combine=REDUCE,
                          hand_back=lambda rank: [chunk[rank]])

    def schedule(self, group: Group) -> Schedule:
        blocks = survivor_bounds(group.buffer, group.size)
        return folded_schedule(group, lambda survivors: halving_scatter_schedule(survivors, blocks),
                               hand_in=whole_buffer(group), reduce=True,
                               hand_back=own_chunk(group))

    def reduction_depth(self, layout: Layout) -> int:
        """⌈log2 p⌉: a folded rank's contribution is reduced once into its survivor's, then
        every one is reduced once per halving step (⌊log2 p⌋ of them)."""
        return (len(layout.hosts) - 1).bit_length()

    def footprint(self, group: Group) -> Footprint:
        blocks = survivor_bounds(group.buffer, group.size)
        return folded_footprint(group,
                                lambda survivors: halving_scatter_footprint(survivors, blocks),
                                hand_in=whole_buffer(group), hand_back=own_chunk(group))

    def model_s(self, cost: CostInputs, count: int) -> float:
        chunk = Span(0, count).split(cost.ranks)
        handed_back = max((chunk[a].count for a, _ in fold_pairs(cost.ranks)), default=0)
        before, after = fold_s(cost, count, True, handed_back)
        blocks = survivor_blocks(Span(0, count), cost.ranks)
        return before + halving_scatter_s(cost, blocks) + after
