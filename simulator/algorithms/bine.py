"""Bine allreduce: reduce-scatter and allgather on Bine's butterfly, whose partners stay close in
rank order, or whole-vector exchanges on it.

De Sensi, Pasqualoni, Piarulli, Bonato, Ba, Turisini, Domke & Hoefler, "Bine Trees: Enhancing
Collective Operations by Optimizing Communication Locality", SC'25 (arXiv:2508.17311). The
butterfly (partners π(r, s) = r ± ρ(s), ρ(s) the negabinary number of s+1 ones, and block
positions ν(r)) is :mod:`simulator.algorithms.phases.bine`'s. On q = 2^L ranks:

    latency-optimal:   for s = 0 .. L-1: exchange the whole vector with π(r, s), reduce
    bandwidth-optimal: for s = 0 .. L-1: keep the half of the span whose positions share ν(r)'s
                          top s+1 bits, send the other half to π(r, s), reduce (reduce-scatter)
                       for s = L-1 .. 0: send π(r, s) the span r holds, take its (allgather)

as the authors' ``allreduce_bine_lat`` and ``allreduce_bine_bdw_remap`` (HLC-Lab/pico,
``libbine/libbine_allreduce.c``) run them. The phases are recursive halving and doubling's
(:mod:`simulator.algorithms.phases.recursive`) on Bine's butterfly. Other rank counts use the
fold, as ``allreduce_bine_lat`` does: the first 2r ranks (r = p − 2^⌊log2 p⌋) pair up, rank 2i
hands its vector to 2i+1 and gets the result back, and the survivors are renumbered (2i+1 → i,
the rest − r), the same renumbering as :func:`~simulator.algorithms.phases.recursive.survivors`.
The authors' bandwidth-optimal variants for other counts (block by block for any even p) are
not modelled: they send one message per block.

The butterfly runs on ranks in rank order (the authors' ``src/`` and ``libbine`` code), except
on a torus of several dimensions, each a power of two, filled by the ranks: there it steps one
dimension at a time, Bine's π and ρ along each, as the authors' torus port does
(HLC-Lab/bine_trees_fugaku, built on libswing's per-dimension peers), and that butterfly is
Swing's (:func:`~simulator.algorithms.phases.swing.swing_butterfly`): on tori ``bine`` and
``swing`` run the same exchanges.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simulator.algorithms.butterfly import ButterflyAllreduce, ButterflyOptions
from simulator.algorithms.phases.bine import bine_butterfly
from simulator.algorithms.phases.recursive import Butterfly
from simulator.algorithms.phases.swing import swing_butterfly, swing_dims
from simulator.model.machine import Grid


@dataclass(frozen=True)
class BineOptions(ButterflyOptions):
    """Bine's scenario options (``algorithm_options: {bine: {latency_optimal: true}}``):
    ``latency_optimal`` runs the authors' ``allreduce_bine_lat``, the default their
    ``allreduce_bine_bdw_remap``."""


@dataclass(frozen=True)
class BineAllreduce(ButterflyAllreduce):
    """Bine allreduce (De Sensi et al., SC'25): recursive halving then doubling on Bine's
    butterfly, or whole-vector exchanges on it.

    Bandwidth-optimal (the default), on p = 2^L ranks with n bytes:

        T = Σ_{s=0..L-1} [alpha_s + M_s·beta_s + g(M_s)] + Σ_s [alpha_s + M_s·beta_s]
          = 2·L·alpha + 2(p-1)/p·n·beta + (p-1)/p·n·gamma + L·launch   (one hop per pair)

    with M_s = n/2^{s+1} the step's message, alpha_s the longest route of its pairs and beta_s
    the step's busiest link (its pairs all send at once: ``cost.shared_beta``). The second line
    is the cost the paper gives its butterflies: log2 p steps each way moving 2(p−1)/p·n in all,
    as a binomial butterfly; what Bine changes is which links the steps cross (step s's
    partners |ρ(s)| ≤ 2^{s+1}/3 + 1 ranks apart rather than 2^s), which beta_s and alpha_s carry
    here. Latency-optimal: T = Σ_s alpha_s + n·beta_s + g(n).

    Other p: the fold, alpha + n·beta + g(n) before and alpha + n·beta after, Bine on the
    2^⌊log2 p⌋ survivors in between.

    Exact for p = 2^L on ``switch`` and ``fully_connected`` (every step a perfect matching over
    links nothing else uses, as recursive halving and doubling) and on ``torus`` where every
    dimension is a power of two (a step moves along one dimension, each of its flows crossing as
    many links, each shared by as many flows, as ``swing``): tests/test_contract.py.
    """

    name = "bine"
    Options = BineOptions
    options: BineOptions = field(default_factory=BineOptions)

    def butterfly(self, size: int, grid: Grid | None) -> Butterfly:
        """Bine's butterfly on ``size`` = 2^L ranks: per dimension on a torus of several
        power-of-two dimensions that they fill (the authors' torus port), else in rank order."""
        dims, cells = swing_dims(size, grid)
        return swing_butterfly(dims, cells) if len(dims) > 1 else bine_butterfly(size)
