"""Ring allreduce: a reduce-scatter, then an allgather, around the logical ring 0 → 1 → … → p-1 → 0.

Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
JPDC 69(2), 2009; the schedule NCCL's ring uses (nccl-tests busbw assumes its 2(p-1)/p traffic).
"""

from __future__ import annotations

import math

from simulator.collectives.base import Algorithm, Collective
from simulator.collectives.phases import ring_allgather, ring_reduce_scatter
from simulator.costmodel import CostInputs
from simulator.program import Comm, Program


class RingAllreduce(Algorithm):
    """Ring allreduce in 2(p-1) steps of one chunk (≈ n/p bytes) per rank.

    T = 2(p-1)·alpha + 2(p-1)·c·beta + (p-1)·(c·gamma + launch),  c = ⌈count/p⌉·itemsize,

    which is the textbook 2(p-1)·alpha + 2(p-1)/p·n·beta + (p-1)/p·n·gamma when p divides n.
    Each chunk travels its own chain of hops, so with one flow per link (every hop a distinct
    link, e.g. on ``switch`` or ``fully_connected``) the simulation meets this exactly.
    """

    name = "ring"
    collective = Collective.ALLREDUCE

    def program(self, me: int, comm: Comm) -> Program:
        ring = range(comm.size)
        chunk = comm.chunks(comm.size)
        yield from ring_reduce_scatter(me, comm, ring, chunk)  # chunk me+1 ends complete here
        yield from ring_allgather(me, comm, ring, chunk)       # pass the complete chunks on

    def model_time(self, cost: CostInputs, count: int, itemsize: int) -> float:
        p = cost.ranks
        if p == 1:
            return 0.0
        hops = [(r, (r + 1) % p) for r in range(p)]
        c = math.ceil(count / p) * itemsize
        return 2 * (p - 1) * (cost.alpha(hops) + c * cost.beta(hops)) + (p - 1) * cost.reduce_s(c)
