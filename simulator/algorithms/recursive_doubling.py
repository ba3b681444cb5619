"""Recursive doubling: log2(p) exchanges with partner rank XOR 2^k (Thakur, Rabenseifner &
Gropp, IJHPCA 19(1), 2005), on any p through the fold of
:func:`~simulator.algorithms.phases.recursive.folded`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simulator.algorithms.algorithm import Algorithm, ExactOn, RankCounts
from simulator.algorithms.comm import COPY, REDUCE, Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import Footprint
from simulator.algorithms.phases.recursive import (
    Bounds,
    doubling_gather,
    doubling_gather_footprint,
    doubling_gather_s,
    doubling_gather_schedule,
    fold_pairs,
    fold_s,
    folded,
    folded_footprint,
    folded_schedule,
    own_chunk,
    survivor_blocks,
    survivor_bounds,
    swap_whole,
    swap_whole_footprint,
    swap_whole_s,
    swap_whole_schedule,
    whole_buffer,
)
from simulator.algorithms.schedule import Group, Schedule
from simulator.model.collective import Collective
from simulator.model.machine import Layout
from simulator.model.span import Span

_POWERS_OF_TWO = (ExactOn("switch", RankCounts.POWERS_OF_TWO),
                  ExactOn("fully_connected", RankCounts.POWERS_OF_TWO))


class RecursiveDoublingAllreduce(Algorithm):
    """Recursive-doubling allreduce: log2(p) swaps of the whole buffer, both partners reducing.

    Latency-optimal (Thakur et al. 2005 §4; MPICH's choice for short messages). For p = 2^L:

        T = L·(alpha + n·beta + g(n)),   g(n) = launch + n·gamma

    (Thakur's log2(p)·(alpha + n·beta + n·gamma) plus a launch per reduction). Otherwise the fold
    adds a hand-in (alpha + n·beta + g(n)) before and a hand-back (alpha + n·beta) after
    L = ⌊log2 p⌋ steps. With ``piece_size`` each swap overlaps its pieces' reductions with their
    transfer (:func:`~simulator.algorithms.phases.recursive.transfer_s`).

    Every message is the whole buffer, so for p = 2^L all ranks move in lock step and the
    simulation meets T exactly on ``switch`` and ``fully_connected`` (each swap uses both
    directions of links nothing else uses). With the fold the survivors that did not fold start
    at once: T is then an upper bound on ``fully_connected`` (the hand-back is often hidden),
    and on ``switch`` their early messages share the folded survivors' links.
    """

    name = "recursive_doubling"
    collective = Collective.ALLREDUCE
    exact_on = _POWERS_OF_TWO

    def program(self, comm: Comm) -> Program:
        yield from folded(comm, swap_whole, hand_in=lambda _: [comm.buffer], combine=REDUCE,
                          hand_back=lambda _: [comm.buffer])

    def schedule(self, group: Group) -> Schedule:
        return folded_schedule(group, swap_whole_schedule, hand_in=whole_buffer(group),
                               reduce=True, hand_back=whole_buffer(group))

    def reduction_depth(self, layout: Layout) -> int:
        """⌈log2 p⌉: a folded rank's contribution is reduced once into its survivor's, then
        every one is reduced once per swap (⌊log2 p⌋ of them)."""
        return (len(layout.hosts) - 1).bit_length()

    def footprint(self, group: Group) -> Footprint:
        return folded_footprint(group, swap_whole_footprint, hand_in=whole_buffer(group),
                                hand_back=whole_buffer(group))

    def model_s(self, cost: CostInputs, count: int) -> float:
        before, after = fold_s(cost, count, True, count)
        return before + swap_whole_s(cost, count) + after


class RecursiveDoublingAllgather(Algorithm):
    """Recursive-doubling allgather: log2(p) swaps of everything gathered so far.

    Thakur et al. 2005 §3 (MPICH's allgather for short messages). For p = 2^L with chunks of
    n/p bytes, the message doubles every step:

        T = L·alpha + (p-1)/p·n·beta

    (in general Σ_d alpha + M_d·beta, M_d the largest aligned group of d chunks). Otherwise the
    fold: rank 2i hands its chunk to rank 2i+1 (alpha + c·beta), the survivors gather blocks of
    one or two chunks, and rank 2i+1 hands back everything but rank 2i's own chunk
    (alpha + (n - c)·beta, two messages on one connection).

    Exact for p = 2^L on ``switch`` and ``fully_connected`` when the chunks are equal, or when
    the route latency outlasts the transfer of the < p/2 elements by which two messages of a
    step can differ (else a rank's next message starts while its last one is still going out).
    With the fold: an upper bound on ``fully_connected``, not a bound on ``switch``.
    """

    name = "recursive_doubling"
    collective = Collective.ALLGATHER
    exact_on = _POWERS_OF_TWO

    def program(self, comm: Comm) -> Program:
        chunk = comm.chunks(comm.size)
        blocks = survivor_blocks(comm.buffer, comm.size)

        def rest(rank: int) -> list[Span]:  # the buffer around rank's own chunk
            before = Span(comm.buffer.start, chunk[rank].start)
            after = Span(chunk[rank].stop, comm.buffer.stop)
            return [part for part in (before, after) if part.count > 0]

        def gather(survivors: Comm) -> Program:
            yield from doubling_gather(survivors, blocks)

        yield from folded(comm, gather, hand_in=lambda rank: [chunk[rank]], combine=COPY,
                          hand_back=rest)

    def schedule(self, group: Group) -> Schedule:
        blocks = survivor_bounds(group.buffer, group.size)
        return folded_schedule(group, lambda s: doubling_gather_schedule(s, blocks),
                               hand_in=own_chunk(group), reduce=False, hand_back=_rest(group))

    def footprint(self, group: Group) -> Footprint:
        blocks = survivor_bounds(group.buffer, group.size)
        return folded_footprint(group, lambda s: doubling_gather_footprint(s, blocks),
                                hand_in=own_chunk(group), hand_back=_rest(group))

    def model_s(self, cost: CostInputs, count: int) -> float:
        chunk = Span(0, count).split(cost.ranks)
        handed = [chunk[a].count for a, _ in fold_pairs(cost.ranks)] or [0]
        before, after = fold_s(cost, max(handed), False, count - min(handed))
        if count == min(handed):  # the only rank that folded owns the whole buffer
            after = 0.0
        blocks = survivor_blocks(Span(0, count), cost.ranks)
        return before + doubling_gather_s(cost, blocks) + after


def _rest(group: Group) -> Callable[[np.ndarray], tuple[np.ndarray, Bounds]]:
    """The rows of the allgather's hand-back: the buffer before each sitting-out rank's own
    chunk, then after it, each where it is not empty."""
    chunks = group.chunks(group.size)

    def rows(out: np.ndarray) -> tuple[np.ndarray, Bounds]:
        start, stop = group.buffer.start, group.buffer.stop
        row = np.repeat(np.arange(len(out), dtype=np.int64), 2)
        starts = np.stack([np.full(len(out), start), chunks[1][out]], axis=1).ravel()
        stops = np.stack([chunks[0][out], np.full(len(out), stop)], axis=1).ravel()
        kept = stops > starts
        return row[kept], (starts[kept], stops[kept])
    return rows
