"""Ring algorithms around the logical ring 0 → 1 → … → p-1 → 0, and chains along it.

Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
JPDC 69(2), 2009: the schedule NCCL's ring uses (nccl-tests' busbw assumes its traffic).
"""

from __future__ import annotations

import math

from simulator.collective import ROOT, Collective
from simulator.collectives.base import Algorithm
from simulator.collectives.phases import PIPELINE_BYTES, chain, ring_pass
from simulator.costmodel import CostInputs, pipeline_s, proportionate_pipeline_s
from simulator.program import Comm, Program


def _ring(size: int) -> list[tuple[int, int]]:
    return [(r, (r + 1) % size) for r in range(size)]


def ring_pass_time(cost: CostInputs, count: int, steps: int, reducing_steps: int) -> float:
    """Closed form of :func:`~simulator.collectives.phases.ring_pass` with chunks of
    ⌈count/p⌉ elements, each moved as pieces (one unless ``chunk_size`` is set).

    One piece per chunk: steps·(alpha + c·beta) + reducing_steps·g on identical hops (see
    :func:`_unpipelined_ring_time` for hops that differ). Several pieces: every rank runs the
    same schedule, so one rank's recurrence is the whole ring's (:func:`_pipelined_ring_time`).
    """
    p = cost.ranks
    if p == 1 or steps == 0:
        return 0.0
    pieces = [cost.nbytes(n) for n in cost.pieces(math.ceil(count / p))]
    if len(pieces) == 1:
        return _unpipelined_ring_time(cost, pieces[0], steps, reducing_steps)
    return _pipelined_ring_time(cost.alpha(_ring(p)), cost.beta(_ring(p)), pieces,
                                [cost.reduce_s(c) for c in pieces], steps, reducing_steps)


def _pipelined_ring_time(alpha: float, beta: float, pieces: list[int], reduce_s: list[float],
                         steps: int, reducing_steps: int) -> float:
    """The pipelined ring pass as a max-plus recurrence over (step s, piece j), exact when every
    rank moves the same pieces over identical hops (each rank's left neighbour then runs the very
    same schedule, so what it sends arrives when this rank's own send would):

        send posted  P(s, j) = 0 for s = 0, else R(s-1, j)   (forward once received)
        bytes start  I(s, j) = max(P(s, j) + alpha, E(previous message on the connection))
        arrival      E(s, j) = I(s, j) + c_j·beta
        received     R(s, j) = max(E(s, j), R(previous receive)) + g_j on reducing steps

    T = R(steps-1, k-1). Messages go in (s, j) order on the connection and receives complete in
    that order (one program, one GPU reduction engine), hence the two "previous" terms; the
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


class RingAllreduce(Algorithm):
    """Ring allreduce: a reduce-scatter, then an allgather, each of p-1 steps of one chunk.

    T = 2(p-1)·alpha + 2(p-1)·c·beta + (p-1)·(c·gamma + launch),  c = ⌈count/p⌉·itemsize,

    the textbook 2(p-1)·alpha + 2(p-1)/p·n·beta + (p-1)/p·n·gamma when p divides n (pipelined
    form with ``chunk_size``: :func:`ring_pass_time`). Each chunk travels its own chain of hops,
    so with one flow per link (``switch``, ``fully_connected``) the simulation meets it exactly.
    """

    name = "ring"
    collective = Collective.ALLREDUCE

    def program(self, me: int, comm: Comm) -> Program:
        p = comm.size
        yield from ring_pass(me, comm, range(p), comm.chunks(p), start=0, steps=2 * (p - 1),
                             reducing_steps=p - 1)

    def model_time(self, cost: CostInputs, count: int) -> float:
        p = cost.ranks
        return ring_pass_time(cost, count, steps=2 * (p - 1), reducing_steps=p - 1)


class RingReduceScatter(Algorithm):
    """Ring reduce-scatter: p-1 reducing steps, after which rank r holds chunk r.

    T = (p-1)·(alpha + c·beta + c·gamma + launch)  (Patarasuk & Yuan 2009; :func:`ring_pass_time`).
    """

    name = "ring"
    collective = Collective.REDUCE_SCATTER

    def program(self, me: int, comm: Comm) -> Program:
        p = comm.size
        yield from ring_pass(me, comm, range(p), comm.chunks(p), start=-1, steps=p - 1,
                             reducing_steps=p - 1)

    def model_time(self, cost: CostInputs, count: int) -> float:
        return ring_pass_time(cost, count, steps=cost.ranks - 1, reducing_steps=cost.ranks - 1)


class RingAllgather(Algorithm):
    """Ring allgather: p-1 steps passing every rank's own chunk on.

    T = (p-1)·(alpha + c·beta)  (Patarasuk & Yuan 2009; :func:`ring_pass_time`).
    """

    name = "ring"
    collective = Collective.ALLGATHER

    def program(self, me: int, comm: Comm) -> Program:
        p = comm.size
        yield from ring_pass(me, comm, range(p), comm.chunks(p), start=0, steps=p - 1,
                             reducing_steps=0)

    def model_time(self, cost: CostInputs, count: int) -> float:
        return ring_pass_time(cost, count, steps=cost.ranks - 1, reducing_steps=0)


def _unpipelined_ring_time(cost: CostInputs, c: int, steps: int, reducing_steps: int) -> float:
    """Ring pass with whole chunks of c bytes on hops that may differ (e.g. NVLink and network).

    Each chunk crosses ``steps`` consecutive hops, paying alpha_h + c·beta_h on each (plus its
    reductions); a slow hop h must also carry ``steps`` chunks one after another. The time is the
    larger of the two bounds, max_i Σ_{h=i}^{i+steps-1} (alpha_h + c·beta_h) + reducing_steps·g
    and max_h (alpha_h + steps·c·beta_h); on identical hops the first is the textbook
    steps·(alpha + c·beta) + reducing_steps·g and is exact.
    """
    p = cost.ranks
    hop = [cost.alpha([pair]) + c * cost.beta([pair]) for pair in _ring(p)]
    chain = max(sum(hop[(i + s) % p] for s in range(steps)) for i in range(p))
    throughput = max(cost.alpha([pair]) + steps * c * cost.beta([pair]) for pair in _ring(p))
    return max(chain + reducing_steps * cost.reduce_s(c), throughput)


def _chain_time(cost: CostInputs, count: int, reduce: bool) -> float:
    """d = p-1 hops, pieces c_1..c_k: a broadcast takes d·alpha + Σ_j c_j·beta + (d-1)·c_max·beta
    (exact for any piece sizes: every stage is a link); a reduce d·alpha + d·(c·beta + g) +
    (k-1)·max(c·beta, g) with c the largest piece (exact for equal pieces, else an upper bound)."""
    p = cost.ranks
    if p == 1:
        return 0.0
    hops = _ring(p)[:-1]
    alpha, beta = cost.alpha(hops), cost.beta(hops)
    pieces = cost.pieces(count, PIPELINE_BYTES)
    if not reduce:
        return proportionate_pipeline_s((p - 1) * alpha, p - 1,
                                        [cost.nbytes(n) * beta for n in pieces])
    c = cost.nbytes(max(pieces))
    return pipeline_s((p - 1) * alpha, [c * beta, cost.reduce_s(c)] * (p - 1), len(pieces))


class RingBroadcast(Algorithm):
    """Pipelined chain broadcast from the root along the ring, as NCCL's ring broadcast.

    T = (p-1)·alpha + (k + p - 2)·c·beta  for k pieces of c bytes (pipeline fill, then one
    piece per c·beta), the classic pipelined-chain cost (e.g. Pjesivac-Grbovic et al. 2007).
    """

    name = "ring"
    collective = Collective.BROADCAST

    def program(self, me: int, comm: Comm) -> Program:
        p = comm.size
        yield from chain(me, comm, [(ROOT + i) % p for i in range(p)], reduce=False)

    def model_time(self, cost: CostInputs, count: int) -> float:
        return _chain_time(cost, count, reduce=False)


class RingReduce(Algorithm):
    """Pipelined chain reduce towards the root: p-1 → p-2 → … → 0, reducing at every hop.

    T = (p-1)·(alpha + c·beta + g) + (k-1)·max(c·beta, g),  g = launch + c·gamma.
    """

    name = "ring"
    collective = Collective.REDUCE

    def program(self, me: int, comm: Comm) -> Program:
        p = comm.size
        yield from chain(me, comm, [(ROOT - i) % p for i in range(p - 1, -1, -1)], reduce=True)

    def model_time(self, cost: CostInputs, count: int) -> float:
        return _chain_time(cost, count, reduce=True)
