"""PAT's order: the p-1 binomial trees of a reduce-scatter or allgather, walked in aggregated
steps over connections to ranks ±2^d; the programs and their closed form.

NCCL 2.23+ (``PatRSAlgorithm`` and ``PatAGAlgorithm`` in src/include/collectives.h, run by
src/device/reduce_scatter.h and all_gather.h through ``patReduce``/``patCopy`` of
src/device/prims_simple.h). Every rank runs the same program in *offsets*: at rank ``me``,
offset s names chunk (me + s) mod p. Each chunk's reduction is a binomial tree over offsets:
the node at offset s hands its partial sum to rank me + low(s) (low(s) = 2^⌊tz(s)⌋, its lowest set
bit), where that chunk sits at offset s - low(s); offset 0, the chunk's owner, is the root. So
a reduce-scatter message travels on "dimension" d = tz(s) to rank me + 2^d, and an allgather
runs the same trees downwards, to rank me - 2^d. Every rank sends p-1 pieces a pass, as the ring
does, but to log2(p) peers.

The order (NCCL's, told in our words) groups the nodes that share a dimension so that they move
together, with an *aggregation factor* A (a power of two ≤ P/2, P = 2^⌈log2 p⌉) and G = P/A:

- reduce-scatter: for every residue r = G-1, …, 1 (mod G) its A nodes {r + m·G} move as one
  aggregated step: the odd residues' leaves are sent on dimension 0, the children of residue r
  are received on dimension tz(r) and, when r is odd (the last child), their parents are sent
  on. Then the high dimensions one at a time, Bruck-like: at d = log2 G, log2 G + 1, …, the
  A/2, A/4, …, 1 nodes of trailing zeros d take their last child (dimension 0) and are sent, and
  their parents receive them; last, the owner takes its dimension-0 child.
- allgather: the high dimensions first (1, 2, …, A/2 pieces a step), then the residues in the
  preorder of their binomial tree (children by decreasing dimension), each node forwarding its
  data to its children; a node's data are taken from its connection in arrival order.

Bounded buffers: NCCL accumulates a node's children straight into the FIFO slot it will send
(NCCL_STEPS slots per connection), and posts a slot every ``F`` (postFreq) nodes; A is F times up
to NCCL_STEPS more, so that several slots are in flight. Here a posted group is F receives then
F sends, one message per node piece (back-to-back messages on a connection cost one latency, as
one slot does); NCCL's parallel factor (up to 16 worker groups taking consecutive ops of a
group) does not change when a group's messages are posted. Flow control (a full FIFO blocks
the sender) is not modelled. Larger buffers run in pipelined passes of one piece per chunk.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from simulator.algorithms.comm import COPY, REDUCE, Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.model.execution import NCCL_STEPS
from simulator.model.span import Span

PAT_CHUNK_BYTES = 512 * 1024
"""PAT's chunk before shrinking: a Simple step, NCCL_BUFFSIZE / NCCL_STEPS = 4 MiB / 8
(``calcCollChunking`` in src/enqueue.cc: stepSize = buffSizes[SIMPLE] / NCCL_STEPS, chunkSteps 1
for PAT)."""

PAT_MIN_CHUNK_BYTES = 64 * 1024
"""The least chunk ``calcCollChunking`` halves PAT's to (``chunkSize > 65536``)."""

_SHRINK = {True: 16, False: 32}
"""``calcCollChunking`` halves PAT's chunk while chunk · channels · 16 (reduce-scatter) or 32
(allgather) exceeds the buffer (src/enqueue.cc)."""


def low(s: int) -> int:
    """The lowest set bit of ``s`` > 0: the distance its node's message travels."""
    return s & -s


def dim(s: int) -> int:
    """The dimension ``s``'s message travels on: log2 :func:`low`."""
    return low(s).bit_length() - 1


def pat_chunk_bytes(buffer_bytes: int, reduce_scatter: bool) -> int:
    """NCCL's PAT chunk for a channel's buffer of ``buffer_bytes``: 512 KiB, halved while 16
    (reduce-scatter) or 32 (allgather) chunks exceed the buffer, down to 64 KiB.

    >>> pat_chunk_bytes(1 << 30, True), pat_chunk_bytes(1 << 20, True), pat_chunk_bytes(1, False)
    (524288, 65536, 65536)
    """
    chunk = PAT_CHUNK_BYTES
    while chunk * _SHRINK[reduce_scatter] > buffer_bytes and chunk > PAT_MIN_CHUNK_BYTES:
        chunk //= 2
    return chunk


@dataclass(frozen=True)
class Aggregation:
    """How many nodes move per aggregated step (``factor``, NCCL's aggFactor) and per posted
    slot (``post``, NCCL's postFreq)."""

    factor: int
    post: int


def aggregation(p: int, chunk_bytes: int, rank_bytes: int) -> Aggregation:
    """NCCL's aggregation for ``p`` ranks, a chunk (stepSize) of ``chunk_bytes`` and
    ``rank_bytes`` per rank and channel (the ``PatRSAlgorithm`` constructor): double while a
    slot holds two more pieces (and the factor stays below p/2); that is the post frequency;
    then double up to NCCL_STEPS times more, slots in flight.

    >>> aggregation(16, 512 * 1024, 4096), aggregation(16, 512 * 1024, 1 << 20)
    (Aggregation(factor=8, post=8), Aggregation(factor=8, post=1))
    """
    factor = 1
    while chunk_bytes // (max(rank_bytes, 1) * factor) >= 2 and factor < p // 2:
        factor *= 2
    post, depth = factor, NCCL_STEPS
    while depth > 1 and factor < p // 2:
        depth //= 2
        factor *= 2
    return Aggregation(factor, post)


@dataclass(frozen=True)
class Post:
    """One posted group of the order: receive ``recv`` one after another, then post ``send``
    (offsets; what they mean depends on the collective, see :func:`reduce_scatter_order` and
    :func:`allgather_order`)."""

    recv: tuple[int, ...]
    send: tuple[int, ...]


def _mirror(count: int) -> list[int]:
    """NCCL's ``mirrorInvert`` over 0..count-1: index a's bits complemented and reversed, so
    the odd multiples come first, then those of 2, 4, …, then 0 (the order the owner's and the
    high dimensions' last children are taken in).

    >>> _mirror(4)
    [3, 1, 2, 0]
    """
    bits = count.bit_length() - 1
    return [int(format(count - 1 - a, f"0{bits}b")[::-1], 2) if bits else 0 for a in range(count)]


def _posted(ops: Sequence[tuple[int | None, int | None]], every: int) -> Iterator[Post]:
    """Ops (a receive, a send; None where skipped) in groups of ``every``, the empty left out."""
    for first in range(0, len(ops), every):
        group = ops[first:first + every]
        post = Post(tuple(r for r, _ in group if r is not None),
                    tuple(s for _, s in group if s is not None))
        if post.recv or post.send:
            yield post


@functools.lru_cache(maxsize=256)
def reduce_scatter_order(p: int, factor: int, post: int) -> tuple[Post, ...]:
    """One pass of PAT's reduce-scatter on ``p`` ranks. A receive c takes the partial sum of
    offset c from rank me - low(c) and reduces it into offset c - low(c); a send s posts offset
    s to rank me + low(s). Offsets ≥ p do not exist and are skipped, as NCCL skips them."""
    size = 1 << (p - 1).bit_length()
    residues = size // factor

    def real(s: int) -> int | None:
        return s if s < p else None

    order: list[Post] = []
    for r in range(residues - 1, 0, -1):              # the low dimensions, residue by residue
        nodes = [m * residues + r for m in _mirror(factor)]
        if r % 2:                                     # leaves go out on dimension 0
            order += _posted([(None, real(s)) for s in nodes], post)
        if r >= 2:                                    # children in; the last child sends on
            order += _posted([(real(c), real(c - 1) if r % 2 else None) for c in nodes], post)
    scale = 1
    while scale < factor:                             # the high dimensions, Bruck-like
        unit = scale * residues
        nodes = [(2 * m + 1) * unit for m in _mirror(factor // (2 * scale))]
        order += _posted([(real(s + 1), real(s)) for s in nodes], post)
        order += _posted([(real(c), None) for c in nodes], post)
        scale *= 2
    order += _posted([(real(1), None)], post)         # the owner's last child
    return tuple(order)


def _preorder(node: int, below: int) -> Iterator[int]:
    """The nodes under ``node`` of a binomial tree whose children differ from their parent by
    a power of two below ``below``, larger differences first, each before its own children."""
    step = below // 2
    while step:
        yield node + step
        yield from _preorder(node + step, step)
        step //= 2


@functools.lru_cache(maxsize=256)
def allgather_order(p: int, factor: int, post: int) -> tuple[Post, ...]:
    """One pass of PAT's allgather on ``p`` ranks. A send s posts the data of offset
    s - low(s) to rank me - low(s), where they are offset s; a receive q takes offset q's data
    from rank me + low(q). A node is received where it is first needed (forwarded, or a leaf
    taken), together with every node that arrived before it on its connection."""
    size = 1 << (p - 1).bit_length()
    residues = size // factor
    ops: list[list[tuple[int | None, int | None]]] = []   # per phase: (node needed, child sent)
    scale = factor // 2
    while scale:                                          # the high dimensions, Bruck-like
        unit = scale * residues
        children = [(2 * a + 1) * unit for a in range(factor // (2 * scale))]
        ops.append([(s - unit, s) if s < p else (None, None) for s in children])
        scale //= 2
    for r in _preorder(0, residues):                      # the low dimensions, in preorder
        children = [a * residues + r for a in range(factor)]
        ops.append([(s - low(r), s) if s < p else
                    (s - low(r), None) if low(r) == 1 and s - low(r) < p else (None, None)
                    for s in children])
        if r % 2:                                         # the leaves of residue r arrive
            ops.append([(s, None) if s < p else (None, None) for s in children])
    arrivals: dict[int, deque[int]] = {}                  # per dimension, in sending order
    for phase in ops:
        for _, s in phase:
            if s is not None:
                arrivals.setdefault(dim(s), deque()).append(s)
    have = {0}
    order: list[Post] = []
    for phase in ops:
        for first in range(0, len(phase), post):
            recv: list[int] = []
            send: list[int] = []
            for need, s in phase[first:first + post]:
                while need is not None and need not in have:   # take it, in arrival order
                    taken = arrivals[dim(need)].popleft()
                    have.add(taken)
                    recv.append(taken)
                if s is not None:
                    send.append(s)
            if recv or send:
                order.append(Post(tuple(recv), tuple(send)))
    return tuple(order)


# ---- programs -------------------------------------------------------------------------------

@dataclass(frozen=True)
class PatPasses:
    """What a PAT run on one communicator moves: each chunk's pipeline pieces (one per pass)
    and the pass's order."""

    pieces: tuple[tuple[Span, ...], ...]
    order: tuple[Post, ...]

    @property
    def passes(self) -> int:
        """How many passes the largest chunk takes."""
        return max(len(pieces) for pieces in self.pieces)

    def piece(self, me: int, s: int, k: int) -> Span | None:
        """Rank ``me``'s piece of pass ``k`` of offset ``s`` (None: that chunk has no such
        piece, and its whole tree sits the pass out)."""
        pieces = self.pieces[(me + s) % len(self.pieces)]
        return pieces[k] if k < len(pieces) else None


def pat_passes(comm: Comm, reduce_scatter: bool) -> PatPasses:
    """The pieces and order of PAT on ``comm`` (NCCL's chunk unless the scenario sets
    ``piece_size``)."""
    chunks = comm.chunks(comm.size)
    default = pat_chunk_bytes(comm.buffer.count * comm.itemsize, reduce_scatter)
    pieces = tuple(tuple(comm.pieces(chunk, default)) for chunk in chunks)
    chunk_bytes = comm.piece_bytes if comm.piece_bytes is not None else default
    rank_bytes = max(chunk.count for chunk in chunks) * comm.itemsize
    spread = aggregation(comm.size, chunk_bytes, rank_bytes)
    make = reduce_scatter_order if reduce_scatter else allgather_order
    return PatPasses(pieces, make(comm.size, spread.factor, spread.post))


def pat_reduce_scatter(comm: Comm) -> Program:
    """PAT reduce-scatter: rank me ends with chunk me reduced over every rank."""
    me, p = comm.rank, comm.size
    if p == 1:
        return
    run = pat_passes(comm, True)
    for k in range(run.passes):
        for post in run.order:
            for c in post.recv:
                into = run.piece(me, c - low(c), k)
                if into is not None:
                    yield comm.recv((me - low(c)) % p, into, REDUCE,
                                    label=f"pat reduce-scatter dim {dim(c)}")
            for s in post.send:
                span = run.piece(me, s, k)
                if span is not None:
                    comm.send((me + low(s)) % p, span, label=f"pat reduce-scatter dim {dim(s)}")


def pat_allgather(comm: Comm) -> Program:
    """PAT allgather: every rank ends with every rank's chunk."""
    me, p = comm.rank, comm.size
    if p == 1:
        return
    run = pat_passes(comm, False)
    for k in range(run.passes):
        for post in run.order:
            for q in post.recv:
                into = run.piece(me, q, k)
                if into is not None:
                    yield comm.recv((me + low(q)) % p, into, COPY,
                                    label=f"pat allgather dim {dim(q)}")
            for s in post.send:
                span = run.piece(me, s - low(s), k)
                if span is not None:
                    comm.send((me - low(s)) % p, span, label=f"pat allgather dim {dim(s)}")


# ---- closed form ----------------------------------------------------------------------------

def pat_s(cost: CostInputs, count: int, reduce_scatter: bool) -> float:
    """PAT's time for ``count`` elements per rank, its order evaluated along its dependency
    chain on every rank at once (numpy over ranks).

    A message of b bytes that rank i posts at t on dimension d arrives at
    max(t + alpha_d, the connection's previous arrival) + b·beta_d (back-to-back messages share
    one latency), and a rank's clock moves to max(clock, arrival) + g(b) at each receive
    (g = launch + b·gamma for a reduce-scatter, 0 for an allgather), its sends posted at its
    clock. alpha_d and beta_d are the worst over the pairs (i, i ± 2^d). With full aggregation
    on p = 2^L ranks this is L·alpha + (3p/4 - 1)·c·beta (c the chunk's bytes, p ≥ 4,
    reductions free): the dimension-0 leaves stream while the higher steps go, so it beats the
    lock-step Bruck bound L·alpha + (p-1)·c·beta. Exact wherever no two connections share a
    link: on ``fully_connected``, for any p.
    """
    p = cost.ranks
    if p == 1:
        return 0.0
    chunks = Span(0, count).split(p)
    default = pat_chunk_bytes(count * cost.itemsize, reduce_scatter)
    pieces = [cost.pieces(chunk.count, default) for chunk in chunks]
    chunk_bytes = cost.piece_bytes if cost.piece_bytes is not None else default
    spread = aggregation(p, chunk_bytes, max(c.count for c in chunks) * cost.itemsize)
    make = reduce_scatter_order if reduce_scatter else allgather_order
    order = make(p, spread.factor, spread.post)
    sign = 1 if reduce_scatter else -1                 # where a dimension-d message goes
    ranks = np.arange(p)
    alpha, beta = {}, {}
    for d in range((p - 1).bit_length()):
        pairs = [(i, (i + sign * (1 << d)) % p) for i in range(p)]
        alpha[d], beta[d] = cost.alpha(pairs), cost.beta(pairs)
    clock = np.zeros(p)
    last = {d: np.zeros(p) for d in alpha}             # per sender: its connection's last arrival
    queue: dict[int, deque[np.ndarray]] = {d: deque() for d in alpha}
    for k in range(max(len(c) for c in pieces)):
        size = np.array([cost.nbytes(c[k]) if k < len(c) else 0 for c in pieces], dtype=float)
        present = np.array([k < len(c) for c in pieces])
        reduce = np.vectorize(cost.reduce_s, otypes=[float])(size) if reduce_scatter else None
        for post in order:
            for r in post.recv:
                d = dim(r)
                held = (ranks + (r - low(r) if reduce_scatter else r)) % p
                arrived = np.roll(queue[d].popleft(), sign * low(r))  # from rank me ∓ 2^d
                done = np.maximum(clock, arrived) + (0.0 if reduce is None else reduce[held])
                clock = np.where(present[held], done, clock)
            for s in post.send:
                d = dim(s)
                held = (ranks + (s if reduce_scatter else s - low(s))) % p
                sent = np.maximum(clock + alpha[d], last[d]) + size[held] * beta[d]
                last[d] = np.where(present[held], sent, last[d])
                queue[d].append(sent)
    return float(clock.max())
