"""Ring phases: passing chunks around a logical ring, and streaming a buffer down a chain;
each program beside its closed form.

Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
JPDC 69(2), 2009: the schedule NCCL's ring uses (nccl-tests' busbw assumes its traffic).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from simulator.algorithms.comm import COPY, REDUCE, Comm, Program, piece_label
from simulator.algorithms.cost import CostInputs, pipeline_s, proportionate_pipeline_s
from simulator.algorithms.footprint import EMPTY, Footprint, chunk_counts, piece_counts
from simulator.algorithms.phases.pieces import PIPELINE_BYTES
from simulator.algorithms.schedule import NONE, Blocks, Group, Schedule, pieces_per_span
from simulator.model.span import Span


def ring_pass(comm: Comm, ring: Sequence[int], chunks: Sequence[Span], *, start: int,
              steps: int, reducing_steps: int, default_bytes: int | None = None) -> Program:
    """Pass chunks around ``ring`` for ``steps`` steps (Patarasuk & Yuan 2009).

    The rank at position i first sends chunk (i + start); at step s it receives chunk
    (i + start - s - 1) from its left neighbour, reducing it during the first ``reducing_steps``
    steps and copying it afterwards, and passes it on to the right unless s is the last step.
    With start = 0, steps = p-1 and no reducing step this is an allgather; with p-1 reducing
    steps more, an allreduce, after whose reduce-scatter half position i holds chunk i + 1.
    """
    if steps == 0:
        return
    n, i = len(ring), ring.index(comm.rank)
    right, left = ring[(i + 1) % n], ring[(i - 1) % n]
    first = comm.pieces(chunks[(i + start) % n], default_bytes)
    labels = _ring_labels(steps, reducing_steps)
    for j, piece in enumerate(first):
        comm.send(right, piece, piece_label(labels[0], j, len(first)))
    for step in range(steps):
        combine = REDUCE if step < reducing_steps else COPY
        label, onward = labels[step], labels[step + 1]
        pieces = comm.pieces(chunks[(i + start - step - 1) % n], default_bytes)
        k = len(pieces)
        for j, piece in enumerate(pieces):
            yield comm.recv(left, into=piece, combine=combine,
                            label=label if k == 1 else piece_label(label, j, k))
            if step < steps - 1:
                comm.send(right, piece, onward if k == 1 else piece_label(onward, j, k))


@functools.lru_cache(maxsize=256)  # every rank's program asks for the same: make them once
def _ring_labels(steps: int, reducing_steps: int) -> tuple[str, ...]:
    """Every step's :func:`ring_step_label`, and "" after the last."""
    return (*(ring_step_label(step, steps, reducing_steps) for step in range(steps)), "")


def ring_step_label(step: int, steps: int, reducing_steps: int) -> str:
    """What step ``step`` of a ring pass is: a reduce-scatter step while it reduces, an
    allgather step after, each counted from 1 within its half.

    >>> ring_step_label(0, 6, 3), ring_step_label(3, 6, 3)
    ('reduce-scatter step 1/3', 'allgather step 1/3')
    """
    if step < reducing_steps:
        return f"reduce-scatter step {step + 1}/{reducing_steps}"
    return f"allgather step {step - reducing_steps + 1}/{steps - reducing_steps}"


def ring_pass_schedule(group: Group, *, start: int, steps: int, reducing_steps: int,
                       default_bytes: int | None = None) -> Schedule:
    """:func:`ring_pass` around the group's order 0 → 1 → … → n-1 → 0 on its n chunks, as a
    schedule built in O(1) numpy operations.

    Message (t, i, j) is the t-th send of position i, piece j of chunk (i + start - t) mod n:
    posted at the start for t = 0, else after position i received piece j at step t-1, which is
    message (t-1, i-1, j); it is received at step t of position i+1, reduced when
    t < ``reducing_steps``. Messages are numbered in (t, i, j) order, so the message before one
    on its connection, and the receive before it in its receiver's program, is the one before it
    in (t, j) order at the same position.
    """
    n = group.size
    if steps == 0 or n == 1:
        return Schedule.empty()
    starts, stops = group.chunks(n)
    pieces, per_piece = pieces_per_span(stops - starts, group.itemsize,
                                        group.piece_bytes if group.piece_bytes is not None
                                        else default_bytes)
    position = np.arange(n, dtype=np.int64)
    sends = np.arange(steps, dtype=np.int64)[:, None]
    chunk = ((position[None, :] + start - sends) % n).ravel()       # per block (t, i)
    if pieces.max() == 1:
        return _whole_chunks(group, chunk, starts, stops, reducing_steps)
    return _pieces(group, chunk, starts, stops, pieces, per_piece, reducing_steps)


BLOCK_MESSAGES = 1 << 14
"""Messages per block of :func:`ring_pass_blocks` (whole steps, at least one): enough for numpy
to amortise each block's Python, few enough that a window of blocks stays a few MiB. A group
whose blocks run joined with others' (:attr:`Group.block_share
<simulator.algorithms.schedule.Group.block_share>`: channels) takes its share of them."""


def _steps_per_block(group: Group) -> int:
    """Whole steps in a block of :func:`ring_pass_blocks` on ``group`` (at least one)."""
    return max(1, BLOCK_MESSAGES // (group.size * group.block_share))


def ring_pass_blocks(group: Group, *, start: int, steps: int, reducing_steps: int,
                     default_bytes: int | None = None) -> Blocks:
    """:func:`ring_pass_schedule` a block of whole steps at a time where every chunk is one
    message (step t's messages point only at step t-1's, so a block reaches back one block);
    where pieces pipeline the chunks, the whole schedule as one block."""
    n = group.size
    starts, stops = group.chunks(n)
    pieces, _ = pieces_per_span(stops - starts, group.itemsize,
                                group.piece_bytes if group.piece_bytes is not None
                                else default_bytes)
    if steps == 0 or n == 1 or pieces.max() > 1:
        return Blocks.whole(ring_pass_schedule(group, start=start, steps=steps,
                                               reducing_steps=reducing_steps,
                                               default_bytes=default_bytes))
    per_block = _steps_per_block(group)
    position = np.arange(n, dtype=np.int64)

    def block(k: int) -> Schedule:
        sends = np.arange(k * per_block, min(steps, (k + 1) * per_block), dtype=np.int64)
        chunk = ((position[None, :] + start - sends[:, None]) % n).ravel()
        return _whole_chunks(group, chunk, starts, stops, reducing_steps, int(sends[0]))

    return Blocks(-(-steps // per_block), steps * n, 1, block, reduces=reducing_steps > 0)


def ring_pass_footprint(group: Group, *, steps: int, default_bytes: int | None = None,
                        blocks: bool = True) -> Footprint:
    """:func:`ring_pass_blocks` (``blocks``) or :func:`ring_pass_schedule` counted: every step
    moves each of the n chunks once, as its pieces, between the n pairs of neighbours, and
    every position receives in one chain; a block at a time where :func:`ring_pass_blocks`
    gives several blocks."""
    n = group.size
    if steps == 0 or n == 1:
        return EMPTY
    per_chunk = piece_counts(group, chunk_counts(group, n), default_bytes)
    entries = steps * int(per_chunk.sum())
    if blocks and per_chunk.max() == 1 and steps > _steps_per_block(group):
        return Footprint(entries, n, 0, windowed=True, ends=n)
    return Footprint.whole(entries, n, ends=n)


def _pieces(group: Group, chunk: np.ndarray, starts: np.ndarray, stops: np.ndarray,
            pieces: np.ndarray, per_piece: int, reducing_steps: int) -> Schedule:
    """:func:`ring_pass_schedule`'s messages for blocks (t, i) moving chunk ``chunk[t·n + i]``
    as ``pieces`` pieces of ``per_piece`` elements."""
    n = group.size
    per_block = pieces[chunk]
    block_start = np.cumsum(per_block) - per_block
    block = np.repeat(np.arange(len(chunk), dtype=np.int64), per_block)
    index = np.arange(len(block), dtype=np.int64)
    piece = index - block_start[block]
    send, where = np.divmod(block, n)
    c = chunk[block]
    first = starts[c] + piece * per_piece
    last = np.minimum(first + per_piece, stops[c])
    src, dst = group.members[where], group.members[(where + 1) % n]
    earlier = np.where(send > 0, block - n, 0)                      # block (t-1, i)
    left_earlier = np.where(send > 0, (send - 1) * n + (where - 1) % n, 0)  # block (t-1, i-1)
    posted_after = np.where(send > 0, block_start[left_earlier] + piece, NONE)
    previous = np.where(piece > 0, index - 1,
                        np.where(send > 0, block_start[earlier] + per_block[earlier] - 1, NONE))
    return Schedule(src, dst, first, last, first, last, send < reducing_steps, posted_after,
                    previous, previous)


def _whole_chunks(group: Group, chunk: np.ndarray, starts: np.ndarray, stops: np.ndarray,
                  reducing_steps: int, first_step: int = 0) -> Schedule:
    """:func:`_pieces` where every chunk is one piece: message (t, i) is number
    t·n + i, so it is posted after message (t-1, i-1) (number t·n + i - n - 1, or t·n - 1 for
    i = 0) and follows message (t-1, i) on its connection; the same schedule in a few passes
    over the messages instead of the general case's two dozen (a 4096-rank ring is 33.5
    million messages). ``chunk`` covers steps ``first_step`` onwards, numbered as in the
    whole pass."""
    n, m = group.size, len(chunk)
    index = np.arange(first_step * n, first_step * n + m, dtype=np.int64)
    where = np.tile(np.arange(n, dtype=np.int64), m // n)
    src = group.members[where]
    dst = np.roll(group.members, -1)[where]
    posted_after = index - n - 1
    posted_after[where == 0] += n
    previous = index - n
    if first_step == 0:
        posted_after[:n] = NONE
        previous[:n] = NONE
    reduce = index < reducing_steps * n
    first, last = starts[chunk], stops[chunk]
    return Schedule(src, dst, first, last, first, last, reduce, posted_after, previous, previous)


def ring_pairs(size: int) -> list[tuple[int, int]]:
    """The (sender, receiver) pairs of the logical ring 0 → 1 → … → size-1 → 0."""
    return [(r, (r + 1) % size) for r in range(size)]


def ring_pass_s(cost: CostInputs, count: int, steps: int, reducing_steps: int) -> float:
    """Closed form of :func:`ring_pass` around ranks 0..p-1 with chunks of ⌈count/p⌉ elements,
    each moved as pieces (one unless the scenario sets ``piece_size``).

    One piece per chunk: steps·(alpha + c·beta) + reducing_steps·g on identical hops (see
    :func:`_unpipelined_ring_s` for hops that differ). Several pieces: every rank runs the
    same schedule, so one rank's recurrence is the whole ring's (:func:`_pipelined_ring_s`).
    """
    p = cost.ranks
    if p == 1 or steps == 0:
        return 0.0
    pieces = [cost.nbytes(n) for n in cost.pieces(math.ceil(count / p))]
    paced = _proxy_paced_s(cost, steps * len(pieces), pieces[-1])
    if len(pieces) == 1:
        return max(_unpipelined_ring_s(cost, pieces[0], steps, reducing_steps), paced)
    return max(_pipelined_ring_s(cost.alpha(ring_pairs(p)), cost.beta(ring_pairs(p)), pieces,
                                 [cost.reduce_s(c) for c in pieces], steps, reducing_steps),
               paced)


def _proxy_paced_s(cost: CostInputs, messages: int, c: int) -> float:
    """The bound a network proxy sets on a ring pass of ``messages`` messages a hop, the last of
    c bytes: a hop whose sender's proxy spends g per network message (``Route.proxy_s``, NCCL's
    netOverhead under ``execution: nccl``) posts them no faster than one per g, so its last
    arrives no sooner than (messages − 1)·g + alpha_h + c·beta_h (0 without such a hop). It is
    NCCL's ``nsteps · netOverhead`` of a ring across hosts (tuning.cc), and binding where the
    proxy is slower than a step."""
    routes = [cost.machine.route(a, b) for a, b in ring_pairs(cost.ranks)]
    return max(((messages - 1) * r.proxy_s + r.latency_s + c / r.bottleneck_Bps
                for r in routes if r.proxy_s > 0), default=0.0)


def _pipelined_ring_s(alpha: float, beta: float, pieces: list[int], reduce_s: list[float],
                      steps: int, reducing_steps: int) -> float:
    """The pipelined ring pass as a max-plus recurrence over (step s, piece j), exact when every
    rank moves the same pieces over identical hops (each rank's left neighbour then runs the very
    same schedule, so what it sends arrives when this rank's own send would):

        send posted  P(s, j) = 0 for s = 0, else R(s-1, j)   (forward once received)
        bytes start  I(s, j) = max(P(s, j) + alpha, E(previous message on the connection))
        arrival      E(s, j) = I(s, j) + c_j·beta
        received     R(s, j) = max(E(s, j), R(previous receive)) + g_j on reducing steps

    T = R(steps-1, k-1). Messages go in (s, j) order on the connection and receives complete in
    that order (one program, one GPU reducer), hence the two "previous" terms; the
    reduction g_j = launch + c_j·gamma may be slower than the link (then the GPU sets the pace).
    """
    injected = received = 0.0
    posted = [0.0] * len(pieces)
    for step in range(steps):
        reduces = step < reducing_steps
        for j, size in enumerate(pieces):
            injected = max(posted[j] + alpha, injected) + size * beta
            received = max(injected, received) + (reduce_s[j] if reduces else 0.0)
            posted[j] = received
    return received


def _unpipelined_ring_s(cost: CostInputs, c: int, steps: int, reducing_steps: int) -> float:
    """Ring pass with whole chunks of c bytes on hops that may differ (e.g. NVLink and network).

    Each chunk crosses ``steps`` consecutive hops, paying alpha_h + c·beta_h on each (plus its
    reductions); a slow hop h must also carry ``steps`` chunks one after another. The time is the
    larger of the two bounds, max_i Σ_{h=i}^{i+steps-1} (alpha_h + c·beta_h) + reducing_steps·g
    and max_h (alpha_h + steps·c·beta_h); on identical hops the first is the textbook
    steps·(alpha + c·beta) + reducing_steps·g and is exact.
    """
    p = cost.ranks
    hop = np.array([cost.alpha([pair]) + c * cost.beta([pair]) for pair in ring_pairs(p)])
    laps, rest = divmod(steps, p)  # steps consecutive hops from i: whole laps, then a window
    window = np.concatenate([[0.0], np.cumsum(np.concatenate([hop, hop]))])
    longest = float((laps * hop.sum() + window[np.arange(p) + rest] - window[:p]).max())
    throughput = max(cost.alpha([pair]) + steps * c * cost.beta([pair]) for pair in ring_pairs(p))
    return max(longest + reducing_steps * cost.reduce_s(c), throughput)


def chain(comm: Comm, order: Sequence[int], *, reduce: bool,
          default_bytes: int | None = PIPELINE_BYTES) -> Program:
    """Stream the buffer down the chain ``order[0] → order[1] → …``, piece by piece.

    Each rank but the first receives a piece from its predecessor (copying it, or reducing it
    into its own when ``reduce``) and passes it on unless it is last: a pipelined broadcast
    from ``order[0]``, or a pipelined reduce to ``order[-1]``.
    """
    position = order.index(comm.rank)
    pieces = comm.pieces(comm.buffer, default_bytes)
    phase = "reduce chain" if reduce else "broadcast chain"
    for j, piece in enumerate(pieces):
        label = piece_label(phase, j, len(pieces))
        if position > 0:
            yield comm.recv(order[position - 1], into=piece, combine=REDUCE if reduce else COPY,
                            label=label)
        if position < len(order) - 1:
            comm.send(order[position + 1], piece, label)


def chain_s(cost: CostInputs, count: int, reduce: bool,
            default_bytes: int | None = PIPELINE_BYTES) -> float:
    """Closed form of :func:`chain` along ranks 0 → 1 → … → p-1 (in either direction: every
    hop has the same alpha and beta where the closed form is exact).

    d = p-1 hops, pieces c_1..c_k: a broadcast takes d·alpha + Σ_j c_j·beta + (d-1)·c_max·beta
    (exact for any piece sizes: every stage is a link); a reduce d·alpha + d·(c·beta + g) +
    (k-1)·max(c·beta, g) with c the largest piece (exact for equal pieces, else an upper bound).
    """
    p = cost.ranks
    if p == 1:
        return 0.0
    hops = ring_pairs(p)[:-1]
    alpha, beta = cost.alpha(hops), cost.beta(hops)
    pieces = cost.pieces(count, default_bytes)
    if not reduce:
        return proportionate_pipeline_s((p - 1) * alpha, p - 1,
                                        [cost.nbytes(n) * beta for n in pieces])
    c = cost.nbytes(max(pieces))
    return pipeline_s((p - 1) * alpha, [c * beta, cost.reduce_s(c)] * (p - 1), len(pieces))
