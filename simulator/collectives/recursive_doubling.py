"""Recursive doubling, and the fold that lets recursive algorithms run on any number of ranks.

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in MPICH",
IJHPCA 19(1), 2005. On p = 2^L ranks, recursive doubling takes L steps; in the step at distance
d = 1, 2, …, p/2 rank j exchanges with rank j XOR d (both partners send at once). For other p the
paper's §4 *fold* first brings the ranks down to q = 2^⌊log2 p⌋: with r = p - q, the first 2r
ranks pair up (2i, 2i+1); rank 2i hands its data to rank 2i+1 and sits out, the q survivors run
the power-of-two algorithm, and each rank 2i+1 hands the result back to rank 2i at the end.
:func:`folded` is that wrapper, shared by this file and ``halving_doubling.py``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from simulator.collective import Collective
from simulator.collectives.base import Algorithm
from simulator.collectives.phases import recv_pieces, send_pieces, swap
from simulator.costmodel import CostInputs
from simulator.program import COPY, REDUCE, Chunk, Combine, Comm, Program

Inner = Callable[[int, Comm], Program]
"""A power-of-two program: (my rank in the survivors' group, that group's communicator)."""


def power_of_two_below(p: int) -> int:
    """2^⌊log2 p⌋: the number of ranks left after the fold (p itself when p is a power of two)."""
    return 1 << (p.bit_length() - 1)


def survivors(p: int) -> list[int]:
    """The ranks that stay in after the fold, in the order they are renumbered 0..q-1:
    the odd ranks 1, 3, …, 2r-1 of the first 2r (each now also standing in for the even rank
    before it), then ranks 2r..p-1 (MPICH's renumbering, Thakur et al. 2005 §4)."""
    extra = p - power_of_two_below(p)
    return [2 * i + 1 for i in range(extra)] + list(range(2 * extra, p))


def survivor_blocks(buffer: Chunk, p: int) -> list[Chunk]:
    """Per survivor (new numbering), its own chunk of ``buffer.split(p)`` joined with the chunk of
    the rank it stands in for: contiguous, in buffer order, tiling the buffer."""
    chunk = buffer.split(p)
    extra = p - power_of_two_below(p)
    return [Chunk(chunk[2 * i].start, chunk[2 * i + 1].stop) for i in range(extra)] + chunk[2 * extra:]


def group(blocks: Sequence[Chunk], rank: int, size: int) -> Chunk:
    """The blocks of the aligned group of ``size`` ranks containing ``rank``, as one range."""
    first = rank - rank % size
    return Chunk(blocks[first].start, blocks[first + size - 1].stop)


def distances(q: int) -> list[int]:
    """1, 2, 4, …, q/2: the partner distances of recursive doubling on q = 2^L ranks."""
    return [1 << k for k in range(q.bit_length() - 1)]


def folded(me: int, comm: Comm, inner: Inner, *, hand_in: Callable[[int], list[Chunk]],
           op: Combine, hand_back: Callable[[int], list[Chunk]]) -> Program:
    """Run ``inner`` on the q = 2^⌊log2 p⌋ survivors of the fold (Thakur et al. 2005 §4).

    Rank 2i < 2r sends ``hand_in(2i)`` to rank 2i+1, which copies or reduces it in (``op``);
    the survivors run ``inner`` renumbered as :func:`survivors` lists them; rank 2i+1 then sends
    ``hand_back(2i)`` to rank 2i, which has waited for it. For a power of two nobody folds and
    this is just ``inner`` on the whole group.
    """
    p = comm.size
    extra = p - power_of_two_below(p)
    if me < 2 * extra and me % 2 == 0:          # hand my data in, sit out, get the result back
        for chunk in hand_in(me):
            send_pieces(comm, me + 1, chunk)
        for chunk in hand_back(me):
            yield from recv_pieces(comm, me + 1, chunk, COPY)
        return
    if me < 2 * extra:                          # take my partner's data in
        for chunk in hand_in(me - 1):
            yield from recv_pieces(comm, me - 1, chunk, op)
    if extra == 0:
        yield from inner(me, comm)
    else:
        group_comm = comm.subgroup(survivors(p), comm.buffer)
        yield from inner(group_comm.rank, group_comm)
    if me < 2 * extra:                          # hand the result back
        for chunk in hand_back(me - 1):
            send_pieces(comm, me - 1, chunk)


def doubling_gather(me: int, comm: Comm, blocks: Sequence[Chunk]) -> Program:
    """Recursive-doubling allgather on q = 2^L ranks: rank j starts with ``blocks[j]`` final and
    at distance d = 1, 2, …, q/2 swaps everything gathered so far (its aligned group of d blocks)
    with rank j XOR d, so every rank ends with every block."""
    for d in distances(comm.size):
        partner = me ^ d
        yield from swap(comm, partner, send=group(blocks, me, d), into=group(blocks, partner, d),
                            op=COPY)


# ---- closed forms ---------------------------------------------------------------------------

def fold_pairs(p: int) -> list[tuple[int, int]]:
    """The (sitting-out rank, survivor) pairs of the fold."""
    return [(2 * i, 2 * i + 1) for i in range(p - power_of_two_below(p))]


def step_pairs(p: int, d: int) -> list[tuple[int, int]]:
    """The (sender, receiver) rank pairs of the survivors' step at distance d."""
    ranks = survivors(p)
    return [(ranks[j], ranks[j ^ d]) for j in range(len(ranks))]


def transfer_s(cost: CostInputs, pairs: list[tuple[int, int]], count: int, reduce: bool) -> float:
    """One message of ``count`` elements over the worst of ``pairs``, reduced on arrival or not.

    Copied: alpha + n·beta (its pipeline pieces share one connection, so their latencies
    overlap). Reduced: the pieces c_1..c_k arrive back to back and the GPU reduces each as it
    comes (a two-stage flow shop), so the last reduction ends at
    max over i of alpha + (c_1 + … + c_i)·beta + g(c_i) + … + g(c_k),  g(c) = launch + c·gamma;
    alpha + n·beta + g(n) for one piece.
    """
    if not pairs:
        return 0.0
    alpha, beta = cost.alpha(pairs), cost.beta(pairs)
    if not reduce:
        return alpha + cost.nbytes(count) * beta
    sizes = [cost.nbytes(piece) for piece in cost.pieces(count)]
    arrived = list(itertools.accumulate(size * beta for size in sizes))
    reducing = list(itertools.accumulate(cost.reduce_s(size) for size in reversed(sizes)))[::-1]
    return alpha + max(a + g for a, g in zip(arrived, reducing, strict=True))


def largest_group(blocks: Sequence[Chunk], size: int) -> int:
    """Elements in the largest aligned group of ``size`` blocks: the longest message of a step
    that moves such groups (the step every rank waits for, in a lock-step schedule)."""
    return max(group(blocks, j, size).count for j in range(0, len(blocks), size))


def fold_time(cost: CostInputs, hand_in: int, reduce: bool, hand_back: int) -> tuple[float, float]:
    """(before, after): the fold's hand-in of ``hand_in`` elements (reduced or copied) and its
    hand-back of ``hand_back`` elements; both 0 when p is a power of two."""
    pairs = fold_pairs(cost.ranks)
    back = [(b, a) for a, b in pairs]
    return transfer_s(cost, pairs, hand_in, reduce), transfer_s(cost, back, hand_back, False)


def doubling_gather_time(cost: CostInputs, blocks: Sequence[Chunk]) -> float:
    """Σ over d = 1, 2, …, q/2 of alpha + M_d·beta, M_d = the largest group of d blocks."""
    return sum(transfer_s(cost, step_pairs(cost.ranks, d), largest_group(blocks, d), False)
               for d in distances(len(blocks)))


# ---- the algorithms -------------------------------------------------------------------------

def _swap_and_reduce(me: int, comm: Comm) -> Program:
    """The power-of-two core: at d = 1, 2, …, q/2 swap the whole buffer with rank me XOR d."""
    for d in distances(comm.size):
        yield from swap(comm, me ^ d, send=comm.buffer, into=comm.buffer, op=REDUCE)


class RecursiveDoublingAllreduce(Algorithm):
    """Recursive-doubling allreduce: log2(p) swaps of the whole buffer, both partners reducing.

    Latency-optimal (Thakur et al. 2005 §4; MPICH's choice for short messages). For p = 2^L:

        T = L·(alpha + n·beta + g(n)),   g(n) = launch + n·gamma

    (Thakur's log2(p)·(alpha + n·beta + n·gamma) plus a launch per reduction). Otherwise the fold
    adds a hand-in (alpha + n·beta + g(n)) before and a hand-back (alpha + n·beta) after
    L = ⌊log2 p⌋ steps. With ``chunk_size`` each swap overlaps its pieces' reductions with their
    transfer (:func:`transfer_s`).

    Every message is the whole buffer, so for p = 2^L all ranks move in lock step and the
    simulation meets T exactly on ``switch`` and ``fully_connected`` (each swap uses both
    directions of links nothing else uses). With the fold the survivors that did not fold start
    at once: T is then an upper bound on ``fully_connected`` (the hand-back is often hidden),
    and on ``switch`` their early messages share the folded survivors' links.
    """

    name = "recursive_doubling"
    collective = Collective.ALLREDUCE

    def program(self, me: int, comm: Comm) -> Program:
        yield from folded(me, comm, _swap_and_reduce, hand_in=lambda _: [comm.buffer], op=REDUCE,
                          hand_back=lambda _: [comm.buffer])

    def model_time(self, cost: CostInputs, count: int) -> float:
        p = cost.ranks
        before, after = fold_time(cost, count, True, count)
        steps = sum(transfer_s(cost, step_pairs(p, d), count, True)
                    for d in distances(power_of_two_below(p)))
        return before + steps + after



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

    def program(self, me: int, comm: Comm) -> Program:
        chunk = comm.chunks(comm.size)
        blocks = survivor_blocks(comm.buffer, comm.size)

        def rest(rank: int) -> list[Chunk]:  # the buffer around rank's own chunk
            before, after = Chunk(comm.buffer.start, chunk[rank].start), Chunk(chunk[rank].stop,
                                                                               comm.buffer.stop)
            return [part for part in (before, after) if part.count > 0]

        def gather(j: int, group_comm: Comm) -> Program:
            yield from doubling_gather(j, group_comm, blocks)

        yield from folded(me, comm, gather, hand_in=lambda rank: [chunk[rank]], op=COPY,
                          hand_back=rest)

    def model_time(self, cost: CostInputs, count: int) -> float:
        chunk = Chunk(0, count).split(cost.ranks)
        handed = [chunk[a].count for a, _ in fold_pairs(cost.ranks)] or [0]
        before, after = fold_time(cost, max(handed), False, count - min(handed))
        if count == min(handed):  # the only rank that folded owns the whole buffer
            after = 0.0
        blocks = survivor_blocks(Chunk(0, count), cost.ranks)
        return before + doubling_gather_time(cost, blocks) + after
