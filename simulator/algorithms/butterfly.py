"""Allreduce on a butterfly of partners: what Swing and Bine share.

Both are recursive halving and doubling, or whole-vector exchanges, run on 2^⌊log2 p⌋ ranks with
partners of their own (a :class:`~simulator.algorithms.phases.recursive.Butterfly`), other rank
counts brought down to that by the fold (:func:`~simulator.algorithms.phases.recursive.folded`)
as their authors' libraries do. A subclass names the algorithm, its options and its butterfly;
the program, the closed form and the reduction depth are written once, here.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.algorithms.algorithm import Algorithm, ExactOn, RankCounts
from simulator.algorithms.comm import REDUCE, Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.phases.recursive import (
    Butterfly,
    doubling_gather,
    doubling_gather_s,
    fold_s,
    folded,
    halves,
    halving_scatter,
    halving_scatter_s,
    power_of_two_below,
    swap_whole,
    swap_whole_s,
)
from simulator.model.collective import Collective
from simulator.model.machine import Grid, Layout
from simulator.model.span import Span


@dataclass(frozen=True)
class ButterflyOptions:
    """The options a butterfly allreduce takes (``algorithm_options: {NAME: {latency_optimal:
    true}}``)."""

    latency_optimal: bool = False
    """Exchange the whole vector at every step (the latency-optimal variant) instead of the
    reduce-scatter and allgather (the bandwidth-optimal one, the default)."""


@dataclass(frozen=True)
class ButterflyAllreduce(Algorithm):
    """Recursive halving then doubling (bandwidth-optimal), or log2 p whole-vector exchanges
    (latency-optimal), on :meth:`butterfly`'s partners; the fold for p not a power of two.

    T = before + Σ_s [alpha_s + M_s·beta_s + g(M_s)] + Σ_s [alpha_s + M_s·beta_s] + after
    (latency-optimal: before + Σ_s [alpha_s + n·beta_s + g(n)] + after), M_s = n/2^{s+1},
    alpha_s the longest route of step s's pairs, beta_s its busiest link's load over its
    bandwidth (``cost.shared_beta``), before and after the fold's alpha + n·beta (+ g(n)).
    """

    collective = Collective.ALLREDUCE
    composable = True
    options: ButterflyOptions = ButterflyOptions()
    exact_on = (ExactOn("switch", RankCounts.POWERS_OF_TWO),
                ExactOn("fully_connected", RankCounts.POWERS_OF_TWO),
                ExactOn("torus", RankCounts.POWERS_OF_TWO))
    """Exact for p = 2^L on ``switch`` and ``fully_connected`` (every step a perfect matching
    over links nothing else uses) and on a ``torus`` of power-of-two dimensions (a step moves
    along one dimension, every flow crossing as many links, each shared by as many flows): the
    contract tests check it for both butterflies."""

    def butterfly(self, size: int, grid: Grid | None) -> Butterfly:
        """The partners and block positions on ``size`` = 2^L ranks, filling ``grid`` where
        given (the whole machine's torus; None for the fold's survivors)."""
        raise NotImplementedError

    def reduction_depth(self, layout: Layout) -> int:
        """⌈log2 p⌉: a folded rank's contribution is reduced once into its survivor's, then once
        per step of the butterfly (⌊log2 p⌋ of them), in either variant."""
        return (len(layout.hosts) - 1).bit_length()

    def program(self, comm: Comm) -> Program:
        grid = comm.layout.grid

        def run(survivors: Comm) -> Program:
            fly = self.butterfly(survivors.size, grid if survivors is comm else None)
            if self.options.latency_optimal:
                yield from swap_whole(survivors, fly, self.name)
            else:
                blocks = halves(survivors.buffer, survivors.size)
                yield from halving_scatter(survivors, blocks, fly, self.name)
                yield from doubling_gather(survivors, blocks, fly, self.name)

        yield from folded(comm, run, hand_in=lambda _: [comm.buffer], combine=REDUCE,
                          hand_back=lambda _: [comm.buffer])

    def model_s(self, cost: CostInputs, count: int) -> float:
        p = cost.ranks
        q = power_of_two_below(p)
        fly = self.butterfly(q, cost.layout.grid if q == p else None)
        before, after = fold_s(cost, count, True, count)
        if self.options.latency_optimal:
            return before + swap_whole_s(cost, count, fly, shared=True) + after
        blocks = halves(Span(0, count), q)
        return (before + halving_scatter_s(cost, blocks, fly, shared=True)
                + doubling_gather_s(cost, blocks, fly, shared=True) + after)
