"""All-to-all algorithms: rank r's block j goes to rank j, which keeps it in its block r (the
transpose of the ranks × blocks grid; :class:`~simulator.model.collective.Collective`).

Both run in place on the one buffer: a send takes its data as they are when posted
(:meth:`~simulator.algorithms.comm.Comm.send`), so a block may be overwritten by a receive once
its own send is posted. ``direct`` posts every send at once, as NCCL's ``alltoall`` (one
``ncclSend`` and ``ncclRecv`` per peer inside a group) does; ``pairwise`` exchanges with one
partner at a time, the pairwise-exchange algorithm of MPICH (Thakur, Rabenseifner and Gropp,
"Optimization of Collective Communication Operations in MPICH", IJHPCA 19(1), 2005, §4.4:
partner r XOR k in step k for p a power of two), which keeps every link to one flow per
direction where direct shares each rank's links p-1 ways.
"""

from __future__ import annotations

from simulator.algorithms.algorithm import Algorithm, ExactOn, RankCounts
from simulator.algorithms.comm import COPY, Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import Footprint
from simulator.algorithms.phases.direct import (
    direct_allgather_s,
    exchange,
    exchange_footprint,
    exchange_schedule,
    peers,
)
from simulator.algorithms.schedule import Group, Schedule
from simulator.model.collective import Collective


class DirectAllToAll(Algorithm):
    """Direct all-to-all: every rank posts its block j to every rank j at once, then receives
    from its peers me+1, me+2, … into their blocks.

    T = alpha + c·beta_shared,  c = (count/p)·itemsize: every pair carries one block at once,
    the pattern of a direct allgather (:func:`~simulator.algorithms.phases.direct.
    direct_allgather_s`), so c·beta on ``fully_connected`` and (p-1)·c·beta on ``switch``.
    """

    name = "direct"
    collective = Collective.ALLTOALL
    exact_on = (ExactOn("switch"), ExactOn("fully_connected"))

    def whole_chunks(self, ranks: int) -> int:
        return ranks

    def program(self, comm: Comm) -> Program:
        blocks = comm.chunks(comm.size)
        others = peers(comm.rank, comm.size)
        yield from exchange(comm, [(peer, blocks[peer]) for peer in others],
                            [(peer, blocks[peer]) for peer in others], COPY, "direct alltoall")

    def schedule(self, group: Group) -> Schedule:
        return Schedule.sequence([exchange_schedule(group, reduce=False, transpose=True)],
                                 group.ranks)

    def footprint(self, group: Group) -> Footprint:
        return exchange_footprint(group)

    def model_s(self, cost: CostInputs, count: int) -> float:
        return direct_allgather_s(cost, count)


def partners(me: int, p: int) -> list[int]:
    """Rank ``me``'s partner in each step of :class:`PairwiseAllToAll`: me XOR k in step
    k = 1 … p-1 where p is a power of two; otherwise (k - me) mod p in step k = 0 … p-1, leaving
    out the one step where that is ``me`` itself (a round-robin pairing: each step pairs ranks
    both ways, and every pair meets once), so every rank idles in one of p steps."""
    if p & (p - 1) == 0:
        return [me ^ k for k in range(1, p)]
    return [(k - me) % p for k in range(p) if (k - me) % p != me]


def pairing_steps(p: int) -> list[list[tuple[int, int]]]:
    """The ordered pairs (sender, receiver) of every step of :func:`partners`."""
    if p & (p - 1) == 0:
        return [[(a, a ^ k) for a in range(p)] for k in range(1, p)]
    return [[(a, (k - a) % p) for a in range(p) if (k - a) % p != a] for k in range(p)]


class PairwiseAllToAll(Algorithm):
    """Pairwise-exchange all-to-all: in each step every rank swaps one block with one partner
    (:func:`partners`): it sends its block for the partner and receives the partner's block for
    it into the same place, so the exchange stays in place.

    T = Σ over the steps of (alpha + c·beta_shared of the step's pairs), c = (count/p)·itemsize:
    (p-1)·(alpha + c·beta) for p a power of two on ``switch`` and ``fully_connected`` (every
    link carries one flow per direction). Other p take p steps, each rank idle in one; that is
    still exact on ``fully_connected`` (a cable per pair: nothing is shared), but not on
    ``switch``: a rank past its idle step runs ahead, and its next send shares its partner's
    downlink with the partner's previous step, so steps overlap and share links and the sum is
    no bound either (simulated 1.48× it at p = 3, 3 MiB, 25 GB/s).
    """

    name = "pairwise"
    collective = Collective.ALLTOALL
    exact_on = (ExactOn("switch", RankCounts.POWERS_OF_TWO), ExactOn("fully_connected"))

    def whole_chunks(self, ranks: int) -> int:
        return ranks

    def program(self, comm: Comm) -> Program:
        blocks = comm.chunks(comm.size)
        for step, peer in enumerate(partners(comm.rank, comm.size)):
            yield from exchange(comm, [(peer, blocks[peer])], [(peer, blocks[peer])], COPY,
                                f"pairwise alltoall step {step}")

    def model_s(self, cost: CostInputs, count: int) -> float:
        p = cost.ranks
        if p == 1:
            return 0.0
        c = cost.nbytes(count // p)
        return sum(cost.alpha(pairs) + c * cost.shared_beta(pairs) for pairs in pairing_steps(p))
