"""Swing's butterfly: the partners of De Sensi, Bonato, Saam & Hoefler, "Swing: Short-cutting
Rings for Higher Bandwidth Allreduce", NSDI 2024, and the block order that keeps each of its
steps' blocks contiguous.

§3 of the paper: on q = 2^L ranks, at step s = 0, 1, …, L-1 rank r exchanges with

    π(r, s) = r + ρ(s) mod q  (r even),   r − ρ(s) mod q  (r odd),
    ρ(s) = Σ_{i=0..s} (−2)^i = (1 − (−2)^{s+1}) / 3 = 1, −1, 3, −5, 11, −21, …

so the partner swings from one side of r to the other at a distance |ρ(s)| ≈ 2^s·2/3 instead of
recursive doubling's 2^s. On a torus of several dimensions (§4) the steps take the dimensions in
turn (step s along the next dimension with steps left, starting with the first), and r's parity
and ρ are those of r's coordinate and step count along that dimension: the authors' libswing
(``SwingBitmapCalculator::get_peer``) does the same.

In the bandwidth-optimal allreduce, rank r sends at step s the blocks of the ranks its partner
reaches in steps s+1, …, L-1 (the paper's bitmaps), and keeps those it reaches itself. These
sets halve at every step, and the authors' contiguous variant (``ALGO_SWING_B_CONT``) numbers the
blocks so that each is one span; :func:`swing_butterfly` does the same, so the phases of
:mod:`simulator.algorithms.phases.recursive` run Swing unchanged.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from simulator.algorithms.phases.recursive import TabledButterfly
from simulator.model.machine import Grid


def rho(step: int) -> int:
    """ρ(s) = Σ_{i=0..s} (−2)^i, the signed distance of Swing's partner at step s.

    >>> [rho(s) for s in range(6)]
    [1, -1, 3, -5, 11, -21]
    """
    return int(1 - (-2) ** (step + 1)) // 3


def swing_dims(size: int, grid: Grid | None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The (dims, cells) Swing runs on for ``size`` ranks: the grid they fill where every one of
    its dimensions is a power of two (the paper's torus, §4), else one dimension of ``size``
    ranks in rank order (``size`` a power of two: the fold's survivors)."""
    if grid is not None and math.prod(grid.dims) == size and all(
            d & (d - 1) == 0 for d in grid.dims):
        return grid.dims, grid.cells
    return (size,), tuple(range(size))


@functools.lru_cache(maxsize=64)
def swing_butterfly(dims: tuple[int, ...], cells: tuple[int, ...]) -> TabledButterfly:
    """Swing's butterfly on ranks in ``cells`` of a torus of ``dims`` (each a power of two).

    Every rank's program asks for it, so it is built once per shape (the cache holds the few
    shapes a run uses; 64 covers a sweep over every power of two to 2^20 and its tori)."""
    q = math.prod(dims)
    rank_of_cell = np.empty(q, dtype=np.int64)
    rank_of_cell[list(cells)] = np.arange(q)
    coords = np.stack(np.unravel_index(np.array(cells, dtype=np.int64), dims), axis=1)
    steps = [d.bit_length() - 1 for d in dims]       # log2 of each dimension
    done = [0] * len(dims)                           # steps taken along each dimension
    partners: list[np.ndarray] = []
    dim = 0
    while done != steps:
        while done[dim] == steps[dim]:               # the next dimension with steps left
            dim = (dim + 1) % len(dims)
        k = done[dim]
        sign = np.where(coords[:, dim] % 2 == 0, 1, -1)
        moved = coords.copy()
        moved[:, dim] = (coords[:, dim] + sign * rho(k)) % dims[dim]
        partners.append(rank_of_cell[np.ravel_multi_index(tuple(moved.T), dims)])
        done[dim] += 1
        dim = (dim + 1) % len(dims)
    # labels[s][r]: the smallest rank r reaches through steps s, …, L-1 (r itself at s = L)
    label = np.arange(q)
    labels = [label]
    for partner in reversed(partners):
        label = np.minimum(label, label[partner])
        labels.append(label)
    order = np.lexsort(labels[:-1]) if partners else np.arange(q)   # by the reach at s = 1, 2, …
    positions = np.empty(q, dtype=np.int64)
    positions[order] = np.arange(q)
    return TabledButterfly(tuple(tuple(int(r) for r in row) for row in partners),
                          tuple(int(x) for x in positions))
