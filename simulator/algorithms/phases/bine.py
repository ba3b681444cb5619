"""Bine's butterfly: the partners and block order of De Sensi, Pasqualoni, Piarulli, Bonato, Ba,
Turisini, Domke & Hoefler, "Bine Trees: Enhancing Collective Operations by Optimizing
Communication Locality", SC'25 (arXiv:2508.17311), written in negabinary (base −2).

Bine (binomial negabinary) trees and butterflies pair ranks by the *modulo distance* between
them: on q = 2^L ranks, at step s = 0, 1, …, L-1 of the butterfly rank r exchanges with

    π(r, s) = r + ρ(s) mod q  (r even),   r − ρ(s) mod q  (r odd),
    ρ(s) = nb2rank(1…1, s+1 negabinary ones) = Σ_{i=0..s} (−2)^i = 1, −1, 3, −5, 11, −21, …

so the partner at step s is at most |ρ(s)| ≈ 2^{s+1}/3 ranks away instead of a binomial
butterfly's 2^s: where a job's ranks do not line up with the groups of a fabric (dragonfly
groups, fat-tree pods), about a third fewer pairs cross a group boundary, the paper's "up to
33 % less global-link traffic" (aligned groups of 2^k ranks favour XOR partners instead:
docs/algorithms.md, bine). The
authors' code computes the partner so (``negabinary_to_binary((mask << 1) - 1)`` in
HLC-Lab/pico ``libbine/libbine_allreduce.c`` and ``bine-trees/src/allgather.c``; ``pi`` with
Swing's ``rhos`` in ``libbine_utils.h``): these are the partners of Swing (NSDI'24) on one
dimension, which the Bine butterfly generalises.

What Bine adds to the bandwidth-optimal allreduce is the block order that keeps every step's
blocks one contiguous span: rank r's block lies at ν(r) = reverse_L(gray(nb(r))), where nb(r)
is the L-digit negabinary form of r for odd r and of −r for even r, taken mod q (the authors'
``get_rank_negabinary_representation``, ``remap_rank`` / ``nu`` in ``bine-trees/src/utils.h``,
"nu(r, p) (see the paper)"). At step s, r keeps the half of its current span whose ν has r's
bit s (from the top) and sends its partner the other half (``allreduce_bine_bdw_remap``: keep
the lower half when ν(r) < ν(π(r, s))), so the reduce-scatter is recursive halving on these
partners and positions and :mod:`simulator.algorithms.phases.recursive`'s phases run it
unchanged.
"""

from __future__ import annotations

import functools

from simulator.algorithms.phases.recursive import TabledButterfly


def negabinary(value: int, digits: int) -> int:
    """The lowest ``digits`` digits of ``value`` in base −2, as a bit pattern (digit i is bit i):
    the paper's rank2nb on q = 2^digits ranks, where any value stands for itself mod q (the low
    L digits of a negabinary number keep its value mod 2^L).

    >>> [format(negabinary(v, 3), "03b") for v in (0, 1, 2, 3, -1, -2, 5, 6)]
    ['000', '001', '110', '111', '011', '010', '101', '010']
    """
    pattern = 0
    for i in range(digits):
        digit = value & 1
        pattern |= digit << i
        value = (value - digit) // -2
    return pattern


def from_negabinary(pattern: int, digits: int) -> int:
    """The paper's nb2rank: the rank mod 2^digits that a negabinary bit pattern stands for.

    >>> [from_negabinary((1 << k) - 1, 8) for k in range(1, 6)]   # s+1 ones: ρ(s) mod 256
    [1, 255, 3, 251, 11]
    """
    value = int(sum((-2) ** i for i in range(digits) if pattern >> i & 1))
    return value % (1 << digits)


def rho(step: int) -> int:
    """ρ(s): the signed distance of the partner at step s, the negabinary number of s+1 ones.

    >>> [rho(s) for s in range(6)]
    [1, -1, 3, -5, 11, -21]
    """
    return int(sum((-2) ** i for i in range(step + 1)))


def partner(rank: int, step: int, size: int) -> int:
    """π(rank, step) on ``size`` = 2^L ranks: + ρ(step) from an even rank, − from an odd one."""
    return (rank + rho(step) if rank % 2 == 0 else rank - rho(step)) % size


def nu(rank: int, size: int) -> int:
    """ν(rank): where ``rank``'s block lies, L bits: the negabinary form of rank (odd) or −rank
    (even) mod ``size`` = 2^L, Gray-coded, its bits reversed.

    >>> [nu(r, 8) for r in range(8)]
    [0, 4, 6, 1, 3, 7, 5, 2]
    """
    digits = size.bit_length() - 1
    pattern = negabinary(rank if rank % 2 else -rank, digits)
    gray = pattern ^ (pattern >> 1)
    return int(format(gray, f"0{digits}b")[::-1], 2) if digits else 0


@functools.lru_cache(maxsize=32)
def bine_butterfly(size: int) -> TabledButterfly:
    """Bine's butterfly on ``size`` = 2^L ranks in rank order.

    Every rank's program asks for it, so it is built once per size (the cache holds the few
    sizes a run uses; 32 covers every power of two up to 2^31)."""
    steps = size.bit_length() - 1
    return TabledButterfly(
        tuple(tuple(partner(r, s, size) for r in range(size)) for s in range(steps)),
        tuple(nu(r, size) for r in range(size)))
