"""Recursive phases: partners at distance 1, 2, 4, … (recursive doubling and halving), and the
fold that lets them run on any number of ranks; each program beside its closed form.

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in MPICH",
IJHPCA 19(1), 2005. On p = 2^L ranks, recursive doubling takes L steps; in the step at distance
d = 1, 2, …, p/2 rank j exchanges with rank j XOR d (both partners send at once); recursive
halving runs the distances the other way round, halving the data each step. For other p the
paper's §4 *fold* first brings the ranks down to q = 2^⌊log2 p⌋: with r = p - q, the first 2r
ranks pair up (2i, 2i+1); rank 2i hands its data to rank 2i+1 and sits out, the q survivors run
the power-of-two algorithm, and each rank 2i+1 hands the result back to rank 2i at the end
(:func:`folded`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from simulator.algorithms.comm import COPY, REDUCE, Combine, Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import Footprint, piece_counts
from simulator.algorithms.phases.pieces import recv_pieces, send_pieces, swap
from simulator.algorithms.schedule import Group, Schedule, transfers
from simulator.model.span import Span

SurvivorProgram = Callable[[Comm], Program]
"""A power-of-two program, run on the survivors' communicator."""


def power_of_two_below(p: int) -> int:
    """2^⌊log2 p⌋: the number of ranks left after the fold (p itself when p is a power of two)."""
    return 1 << (p.bit_length() - 1)


def survivors(p: int) -> list[int]:
    """The ranks that stay in after the fold, in the order they are renumbered 0..q-1:
    the odd ranks 1, 3, …, 2r-1 of the first 2r (each now also standing in for the even rank
    before it), then ranks 2r..p-1 (MPICH's renumbering, Thakur et al. 2005 §4)."""
    extra = p - power_of_two_below(p)
    return [2 * i + 1 for i in range(extra)] + list(range(2 * extra, p))


def survivor_blocks(buffer: Span, p: int) -> list[Span]:
    """Per survivor (new numbering), its own chunk of ``buffer.split(p)`` joined with the chunk of
    the rank it stands in for: contiguous, in buffer order, tiling the buffer."""
    chunk = buffer.split(p)
    extra = p - power_of_two_below(p)
    return [Span(chunk[2 * i].start, chunk[2 * i + 1].stop) for i in range(extra)] + chunk[2 * extra:]


def group(blocks: Sequence[Span], rank: int, size: int) -> Span:
    """The blocks of the aligned group of ``size`` ranks containing ``rank``, as one span."""
    first = rank - rank % size
    return Span(blocks[first].start, blocks[first + size - 1].stop)


def distances(q: int) -> list[int]:
    """1, 2, 4, …, q/2: the partner distances of recursive doubling on q = 2^L ranks."""
    return [1 << k for k in range(q.bit_length() - 1)]


def halves(buffer: Span, parts: int) -> list[Span]:
    """``buffer`` halved, the halves halved, … into ``parts`` (a power of two) blocks: the blocks
    of any aligned group differ from those of its sibling group by at most one element, so the two
    messages of every exchange are as equal as they can be.

    >>> halves(Span(0, 7), 4)
    [Span(start=0, stop=2), Span(start=2, stop=4), Span(start=4, stop=6), Span(start=6, stop=7)]
    """
    if parts == 1:
        return [buffer]
    lower, upper = buffer.split(2)
    return halves(lower, parts // 2) + halves(upper, parts // 2)


@dataclass(frozen=True)
class Butterfly:
    """Who exchanges with whom in a butterfly of q = 2^L ranks, and where each rank's block lies.

    A step is named by d = q/2, …, 2, 1, the number of blocks each partner ends up owning for
    the pair of groups it splits in the reduce-scatter (or gathers in the allgather). This base
    class is recursive doubling's: the partner at d is rank XOR d and rank j owns block j, so its
    groups are aligned groups of ranks. Another butterfly (Swing's,
    :mod:`simulator.algorithms.phases.swing`, or Bine's, :mod:`simulator.algorithms.phases.bine`)
    only changes :meth:`partner` and :meth:`position`, so that every phase below runs it
    unchanged."""

    def partner(self, rank: int, d: int) -> int:
        """The rank that ``rank`` exchanges with in the step at d."""
        return rank ^ d

    def position(self, rank: int) -> int:
        """The index of ``rank``'s block: the ranks a rank's data reach through the steps at
        d and below hold an aligned group of d blocks."""
        return rank

    def whole_distances(self, q: int) -> list[int]:
        """The steps of the whole-buffer allreduce (:func:`swap_whole`), in the order taken."""
        return distances(q)


XOR = Butterfly()
"""Recursive doubling and halving's butterfly (Thakur et al. 2005)."""


@dataclass(frozen=True)
class TabledButterfly(Butterfly):
    """A butterfly given by tables, nearest partners first: ``partners[s][r]`` is rank r's
    partner in step s = 0, …, L-1 and ``positions[r]`` where its block lies (the ranks r reaches
    through steps s, …, L-1 hold an aligned group of 2^{L-s} positions). The step at d is
    s = L − 1 − log2 d, so the reduce-scatter runs s = 0, 1, … (its largest messages to the
    nearest partners), the allgather the other way round, and the whole-buffer exchanges take
    s = 0, 1, … too. Swing's and Bine's butterflies are such tables
    (:mod:`simulator.algorithms.phases.swing`, :mod:`simulator.algorithms.phases.bine`)."""

    partners: tuple[tuple[int, ...], ...]
    positions: tuple[int, ...]

    def partner(self, rank: int, d: int) -> int:
        return self.partners[len(self.partners) - d.bit_length()][rank]

    def position(self, rank: int) -> int:
        return self.positions[rank]

    def whole_distances(self, q: int) -> list[int]:
        return distances(q)[::-1]


# ---- programs -------------------------------------------------------------------------------

def folded(comm: Comm, inner: SurvivorProgram, *, hand_in: Callable[[int], list[Span]],
           combine: Combine, hand_back: Callable[[int], list[Span]]) -> Program:
    """Run ``inner`` on the q = 2^⌊log2 p⌋ survivors of the fold (Thakur et al. 2005 §4).

    Rank 2i < 2r sends ``hand_in(2i)`` to rank 2i+1, which copies or reduces it in
    (``combine``); the survivors run ``inner`` renumbered as :func:`survivors` lists them; rank
    2i+1 then sends ``hand_back(2i)`` to rank 2i, which has waited for it. For a power of two
    nobody folds and this is just ``inner`` on the whole group.
    """
    me, p = comm.rank, comm.size
    extra = p - power_of_two_below(p)
    if me < 2 * extra and me % 2 == 0:          # hand my data in, sit out, get the result back
        for span in hand_in(me):
            send_pieces(comm, me + 1, span, label="fold in")
        for span in hand_back(me):
            yield from recv_pieces(comm, me + 1, span, COPY, label="fold back")
        return
    if me < 2 * extra:                          # take my partner's data in
        for span in hand_in(me - 1):
            yield from recv_pieces(comm, me - 1, span, combine, label="fold in")
    yield from inner(comm if extra == 0 else comm.subgroup(survivors(p), comm.buffer))
    if me < 2 * extra:                          # hand the result back
        for span in hand_back(me - 1):
            send_pieces(comm, me - 1, span, label="fold back")


def doubling_gather(comm: Comm, blocks: Sequence[Span], fly: Butterfly = XOR,
                    name: str = "doubling") -> Program:
    """Recursive-doubling allgather on q = 2^L ranks: rank j starts with its block final and at
    d = 1, 2, …, q/2 swaps everything gathered so far (its aligned group of d blocks) with its
    partner (rank j XOR d for :data:`XOR`), so every rank ends with every block."""
    me, steps = comm.rank, distances(comm.size)
    for k, d in enumerate(steps):
        partner = fly.partner(me, d)
        yield from swap(comm, partner, send=group(blocks, fly.position(me), d),
                        into=group(blocks, fly.position(partner), d), combine=COPY,
                        label=f"{name} allgather step {k + 1}/{len(steps)}")


def halving_scatter(comm: Comm, blocks: Sequence[Span], fly: Butterfly = XOR,
                    name: str = "halving") -> Program:
    """Recursive-halving reduce-scatter on q = 2^L ranks: rank j ends with its block reduced.

    At d = q/2, …, 1 the partners (j and j XOR d for :data:`XOR`) split the 2d blocks they share:
    each sends the aligned group of d blocks its partner ends up in and reduces the group it ends
    up in itself.
    """
    me, steps = comm.rank, distances(comm.size)[::-1]
    for k, d in enumerate(steps):
        partner = fly.partner(me, d)
        yield from swap(comm, partner, send=group(blocks, fly.position(partner), d),
                        into=group(blocks, fly.position(me), d), combine=REDUCE,
                        label=f"{name} reduce-scatter step {k + 1}/{len(steps)}")


def swap_whole(comm: Comm, fly: Butterfly = XOR, name: str = "doubling") -> Program:
    """The recursive-doubling allreduce core on q = 2^L ranks: at every step (d = 1, 2, …, q/2
    for :data:`XOR`) swap the whole buffer with the partner, both partners reducing."""
    steps = fly.whole_distances(comm.size)
    for k, d in enumerate(steps):
        yield from swap(comm, fly.partner(comm.rank, d), send=comm.buffer, into=comm.buffer,
                        combine=REDUCE, label=f"{name} allreduce step {k + 1}/{len(steps)}")


# ---- schedules --------------------------------------------------------------------------------

Bounds = tuple[np.ndarray, np.ndarray]
"""(starts, stops) of several spans."""

SurvivorSchedule = Callable[[Group], list[Schedule]]
"""The phases of a power-of-two program, built on the survivors' group."""


def halves_bounds(buffer: Span, parts: int) -> Bounds:
    """:func:`halves` as arrays, one halving per level (the lower half takes the odd element)."""
    starts, stops = np.array([buffer.start], dtype=np.int64), np.array([buffer.stop], dtype=np.int64)
    while len(starts) < parts:
        middle = starts + (stops - starts + 1) // 2
        starts = np.stack([starts, middle], axis=1).ravel()
        stops = np.stack([middle, stops], axis=1).ravel()
    return starts, stops


def group_bounds(blocks: Bounds, ranks: np.ndarray, size: int) -> Bounds:
    """:func:`group` for each of ``ranks``: its aligned group of ``size`` blocks as one span."""
    first = ranks - ranks % size
    return blocks[0][first], blocks[1][first + size - 1]


def survivor_bounds(buffer: Span, p: int) -> Bounds:
    """:func:`survivor_blocks` as arrays."""
    blocks = survivor_blocks(buffer, p)
    return (np.array([b.start for b in blocks], dtype=np.int64),
            np.array([b.stop for b in blocks], dtype=np.int64))


def swap_schedule(survivors: Group, d: int, send: Bounds, *, reduce: bool) -> Schedule:
    """One step of :func:`swap` at distance d: position j sends span ``send[j]`` to j XOR d,
    which takes it into the same span."""
    q = np.arange(survivors.size, dtype=np.int64)
    return transfers(survivors, q, q ^ d, send[0], send[1], reduce=reduce)


def halving_scatter_schedule(survivors: Group, blocks: Bounds) -> list[Schedule]:
    """:func:`halving_scatter` as phases: at d = q/2, …, 1 send the partner's group."""
    q = np.arange(survivors.size, dtype=np.int64)
    return [swap_schedule(survivors, d, group_bounds(blocks, q ^ d, d), reduce=True)
            for d in reversed(distances(survivors.size))]


def doubling_gather_schedule(survivors: Group, blocks: Bounds) -> list[Schedule]:
    """:func:`doubling_gather` as phases: at d = 1, …, q/2 send one's own group."""
    q = np.arange(survivors.size, dtype=np.int64)
    return [swap_schedule(survivors, d, group_bounds(blocks, q, d), reduce=False)
            for d in distances(survivors.size)]


def swap_whole_schedule(survivors: Group) -> list[Schedule]:
    """:func:`swap_whole` as phases: the whole buffer, reduced, at every distance."""
    whole = (np.full(survivors.size, survivors.buffer.start, dtype=np.int64),
             np.full(survivors.size, survivors.buffer.stop, dtype=np.int64))
    return [swap_schedule(survivors, d, whole, reduce=True) for d in distances(survivors.size)]


def folded_schedule(group: Group, inner: SurvivorSchedule, *,
                    hand_in: Callable[[np.ndarray], tuple[np.ndarray, Bounds]], reduce: bool,
                    hand_back: Callable[[np.ndarray], tuple[np.ndarray, Bounds]]) -> Schedule:
    """:func:`folded` as a schedule: the hand-in phase, ``inner``'s phases on the survivors, the
    hand-back phase. ``hand_in(ranks)`` and ``hand_back(ranks)`` give, for the sitting-out ranks
    2i, rows (index into ``ranks``, span bounds) in the order the program sends them."""
    p = group.size
    extra = p - power_of_two_below(p)
    ranks = group.ranks
    if extra == 0:
        return Schedule.sequence(inner(group), ranks)
    out = np.arange(extra, dtype=np.int64) * 2
    row, (starts, stops) = hand_in(out)
    phases = [transfers(group, out[row], out[row] + 1, starts, stops, reduce=reduce)]
    phases += inner(group.subgroup(survivors(p), group.buffer))
    row, (starts, stops) = hand_back(out)
    phases.append(transfers(group, out[row] + 1, out[row], starts, stops, reduce=False))
    return Schedule.sequence(phases, ranks)


def own_chunk(group: Group) -> Callable[[np.ndarray], tuple[np.ndarray, Bounds]]:
    """The rows of a hand-in or hand-back of each sitting-out rank's own chunk."""
    chunks = group.chunks(group.size)

    def rows(out: np.ndarray) -> tuple[np.ndarray, Bounds]:
        return np.arange(len(out), dtype=np.int64), (chunks[0][out], chunks[1][out])
    return rows


def whole_buffer(group: Group) -> Callable[[np.ndarray], tuple[np.ndarray, Bounds]]:
    """The rows of a hand-in or hand-back of the whole buffer, one per sitting-out rank."""
    def rows(out: np.ndarray) -> tuple[np.ndarray, Bounds]:
        return (np.arange(len(out), dtype=np.int64),
                (np.full(len(out), group.buffer.start, dtype=np.int64),
                 np.full(len(out), group.buffer.stop, dtype=np.int64)))
    return rows


# ---- footprints: the schedules above, counted ------------------------------------------------

SurvivorFootprint = Callable[[Group], list[Footprint]]
"""The phases of a power-of-two schedule, counted on the survivors' group."""


def swap_footprint(survivors: Group, send: Bounds) -> Footprint:
    """:func:`swap_schedule` counted: span ``send[j]``'s pieces from each position j to its
    partner, q pairs, each position receiving in one chain."""
    q = survivors.size
    return Footprint.whole(int(piece_counts(survivors, send[1] - send[0]).sum()), q, ends=q)


def halving_scatter_footprint(survivors: Group, blocks: Bounds) -> list[Footprint]:
    """:func:`halving_scatter_schedule` counted."""
    q = np.arange(survivors.size, dtype=np.int64)
    return [swap_footprint(survivors, group_bounds(blocks, q ^ d, d))
            for d in reversed(distances(survivors.size))]


def doubling_gather_footprint(survivors: Group, blocks: Bounds) -> list[Footprint]:
    """:func:`doubling_gather_schedule` counted."""
    q = np.arange(survivors.size, dtype=np.int64)
    return [swap_footprint(survivors, group_bounds(blocks, q, d)) for d in distances(survivors.size)]


def swap_whole_footprint(survivors: Group) -> list[Footprint]:
    """:func:`swap_whole_schedule` counted: q messages of the whole buffer's pieces a step."""
    q = survivors.size
    k = int(piece_counts(survivors, np.array([survivors.buffer.count]))[0])
    return [Footprint.whole(q * k, q, ends=q) for _ in distances(q)]


def folded_footprint(group: Group, inner: SurvivorFootprint, *,
                     hand_in: Callable[[np.ndarray], tuple[np.ndarray, Bounds]],
                     hand_back: Callable[[np.ndarray], tuple[np.ndarray, Bounds]]) -> Footprint:
    """:func:`folded_schedule` counted: the hand-in's and hand-back's rows as their pieces
    between the r folded pairs, and ``inner``'s phases on the survivors; in sequence, so every
    rank ends receiving in one chain."""
    p = group.size
    extra = p - power_of_two_below(p)
    if extra == 0:
        phases = inner(group)
    else:
        out = np.arange(extra, dtype=np.int64) * 2
        moves = []
        for rows in (hand_in, hand_back):
            _, (starts, stops) = rows(out)
            moves.append(Footprint.whole(int(piece_counts(group, stops - starts).sum()), extra,
                                         ends=extra))
        phases = [moves[0], *inner(group.subgroup(survivors(p), group.buffer)), moves[1]]
    return Footprint.joined(phases, ends=p if phases else 0)


# ---- closed forms ---------------------------------------------------------------------------

def fold_pairs(p: int) -> list[tuple[int, int]]:
    """The (sitting-out rank, survivor) pairs of the fold."""
    return [(2 * i, 2 * i + 1) for i in range(p - power_of_two_below(p))]


def step_pairs(p: int, d: int, fly: Butterfly = XOR) -> list[tuple[int, int]]:
    """The (sender, receiver) rank pairs of the survivors' step at d."""
    ranks = survivors(p)
    return [(ranks[j], ranks[fly.partner(j, d)]) for j in range(len(ranks))]


def transfer_s(cost: CostInputs, pairs: list[tuple[int, int]], count: int, reduce: bool,
               shared: bool = False) -> float:
    """One message of ``count`` elements over the worst of ``pairs``, reduced on arrival or not;
    beta is ``cost.beta(pairs)``, or with ``shared`` ``cost.shared_beta(pairs)`` (all of the
    pairs' messages at once, sharing the links their routes have in common).

    Copied: alpha + n·beta (its pipeline pieces share one connection, so their latencies
    overlap). Reduced: the pieces c_1..c_k arrive back to back and the GPU reduces each as it
    comes (a two-stage flow shop), so the last reduction ends at
    max over i of alpha + (c_1 + … + c_i)·beta + g(c_i) + … + g(c_k),  g(c) = launch + c·gamma;
    alpha + n·beta + g(n) for one piece.
    """
    if not pairs:
        return 0.0
    alpha = cost.alpha(pairs)
    beta = cost.shared_beta(pairs) if shared else cost.beta(pairs)
    if not reduce:
        return alpha + cost.nbytes(count) * beta
    sizes = [cost.nbytes(piece) for piece in cost.pieces(count)]
    arrived = list(itertools.accumulate(size * beta for size in sizes))
    reducing = list(itertools.accumulate(cost.reduce_s(size) for size in reversed(sizes)))[::-1]
    return alpha + max(a + g for a, g in zip(arrived, reducing, strict=True))


def largest_group(blocks: Sequence[Span], size: int) -> int:
    """Elements in the largest aligned group of ``size`` blocks: the longest message of a step
    that moves such groups (the step every rank waits for, in a lock-step schedule)."""
    return max(group(blocks, j, size).count for j in range(0, len(blocks), size))


def fold_s(cost: CostInputs, hand_in: int, reduce: bool, hand_back: int) -> tuple[float, float]:
    """(before, after): the fold's hand-in of ``hand_in`` elements (reduced or copied) and its
    hand-back of ``hand_back`` elements; both 0 when p is a power of two."""
    pairs = fold_pairs(cost.ranks)
    back = [(b, a) for a, b in pairs]
    return transfer_s(cost, pairs, hand_in, reduce), transfer_s(cost, back, hand_back, False)


def doubling_gather_s(cost: CostInputs, blocks: Sequence[Span], fly: Butterfly = XOR,
                      shared: bool = False) -> float:
    """Closed form of :func:`doubling_gather` by the survivors of p = ``cost.ranks``:
    Σ over d = 1, 2, …, q/2 of alpha + M_d·beta, M_d = the largest group of d blocks
    (``shared``: :func:`transfer_s`'s shared beta)."""
    return sum(transfer_s(cost, step_pairs(cost.ranks, d, fly), largest_group(blocks, d), False,
                          shared)
               for d in distances(len(blocks)))


def halving_scatter_s(cost: CostInputs, blocks: Sequence[Span], fly: Butterfly = XOR,
                      shared: bool = False) -> float:
    """Closed form of :func:`halving_scatter` by the survivors of p = ``cost.ranks``:
    Σ over d = q/2, …, 1 of alpha + M_d·beta + g(M_d), M_d = the largest group of d blocks
    (``shared``: :func:`transfer_s`'s shared beta)."""
    return sum(transfer_s(cost, step_pairs(cost.ranks, d, fly), largest_group(blocks, d), True,
                          shared)
               for d in reversed(distances(len(blocks))))


def swap_whole_s(cost: CostInputs, count: int, fly: Butterfly = XOR,
                 shared: bool = False) -> float:
    """Closed form of :func:`swap_whole` by the survivors: Σ_d alpha + n·beta + g(n) (with
    pieces, each swap's reductions overlap its transfer: :func:`transfer_s`)."""
    return sum(transfer_s(cost, step_pairs(cost.ranks, d, fly), count, True, shared)
               for d in distances(power_of_two_below(cost.ranks)))
