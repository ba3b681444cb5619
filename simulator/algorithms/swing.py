"""Swing allreduce: recursive doubling and halving with partners that swing from side to side.

De Sensi, Bonato, Saam & Hoefler, "Swing: Short-cutting Rings for Higher Bandwidth Allreduce",
NSDI 2024 (arXiv:2401.09356), §3 (the algorithm on one dimension), §4 (tori of several
dimensions). Its pseudocode, on q = 2^L ranks, with π(r, s) = r ± ρ(s) mod q (+ for even r),
ρ(s) = Σ_{i=0..s} (−2)^i:

    latency-optimal:   for s = 0 .. L-1: exchange the whole vector with π(r, s), reduce
    bandwidth-optimal: for s = 0 .. L-1: send to π(r, s) the blocks π(r, s) reaches in steps
                          s+1 .. L-1, reduce those r reaches itself            (reduce-scatter)
                       for s = L-1 .. 0: send π(r, s) the blocks r has, take its own (allgather)

The partners and the block order are :mod:`simulator.algorithms.phases.swing`'s; the phases are
recursive halving and doubling's (:mod:`simulator.algorithms.phases.recursive`), run on Swing's
butterfly. Other rank counts use the fold of those phases: the authors' libswing likewise brings
a non-power-of-two count down to the power of two below it before Swing runs and hands the
result back after (``shrink_non_power_of_two`` / ``enlarge_non_power_of_two``; it does so one
torus dimension at a time, the fold pairs ranks 2i, 2i+1 in rank order).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simulator.algorithms.butterfly import ButterflyAllreduce, ButterflyOptions
from simulator.algorithms.phases.recursive import Butterfly
from simulator.algorithms.phases.swing import swing_butterfly, swing_dims
from simulator.model.machine import Grid


@dataclass(frozen=True)
class SwingOptions(ButterflyOptions):
    """Swing's scenario options (``algorithm_options: {swing: {latency_optimal: true}}``):
    ``latency_optimal`` runs the paper's latency-optimal Swing, the default its
    bandwidth-optimal one."""


@dataclass(frozen=True)
class SwingAllreduce(ButterflyAllreduce):
    """Swing allreduce (De Sensi et al., NSDI 2024): recursive halving then doubling, or whole
    vector exchanges, with partner π(r, s) = r ± ρ(s), ρ(s) = (1 − (−2)^{s+1})/3.

    Bandwidth-optimal (the default), on p = 2^L ranks with n bytes:

        T = Σ_{s=0..L-1} [alpha_s + M_s·beta_s + g(M_s)] + Σ_s [alpha_s + M_s·beta_s]
          = 2·L·alpha + 2(p-1)/p·n·beta + (p-1)/p·n·gamma + L·launch   (one hop per pair)

    with M_s = n/2^{s+1} the step's message, alpha_s the longest route of its pairs, and beta_s
    the step's busiest link (the pairs of a step all send at once: ``cost.shared_beta``). The
    paper's §3.2 form is the first line, log2 p·alpha + 2(p−1)/p·n·beta per half, on a network
    where pairs do not share links; on a torus its congestion term is this beta_s: on one
    dimension step s's even ranks all send the same way over |ρ(s)| hops, so each link carries
    (|ρ(s)| + 1)/2 of them, against 2^s for recursive doubling's distance 2^s (the paper's
    "short-cutting"). Latency-optimal: T = Σ_s alpha_s + n·beta_s + g(n).

    Other p use the fold (as ``halving_doubling``): alpha + n·beta + g(n) before and
    alpha + n·beta after, Swing on one dimension of the 2^⌊log2 p⌋ survivors in between.

    Exact for p = 2^L on ``switch`` and ``fully_connected`` (every step a perfect matching over
    links nothing else uses, as recursive halving and doubling), and on ``torus`` where every
    dimension is a power of two: a step moves along one dimension, every flow of it crosses the
    same number of links, each shared by as many flows, so each flow's rate is
    bandwidth/(flows on its links) throughout (tests/test_swing.py).
    """

    name = "swing"
    Options = SwingOptions
    options: SwingOptions = field(default_factory=SwingOptions)

    def butterfly(self, size: int, grid: Grid | None) -> Butterfly:
        """Swing's butterfly on ``size`` = 2^L ranks, over the grid they fill where it has
        power-of-two dimensions (:func:`~simulator.algorithms.phases.swing.swing_dims`)."""
        return swing_butterfly(*swing_dims(size, grid))
