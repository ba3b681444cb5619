"""PAT, NCCL's "Parallel Aggregated Trees" reduce-scatter and allgather (NCCL 2.23+): p shifted
binomial trees over connections to the ranks ±2^d, walked in aggregated, Bruck-like steps with
bounded buffers. The order and its closed form are in :mod:`simulator.algorithms.phases.pat`.

NCCL runs it only with one GPU per node (src/graph/tuning.cc ``ncclTopoTuneModel``: PAT's
bandwidth is 0 ``if (comm->nNodes != comm->nRanks)``), where every message crosses the network
and its log2(p) latencies beat the ring's p-1. On the ideal wire it runs on any topology: it is
the bandwidth-optimal log-latency reduce-scatter and allgather for any p (recursive halving and
doubling need a power of two or a fold), so it stays registered everywhere under ``execution:
ideal`` and is refused only where NCCL's execution model applies to a machine it would not run
it on (:meth:`simulator.model.nccl_point.NcclBinding.unsupported`, for NCCL's PAT family).
"""

from __future__ import annotations

from simulator.algorithms.algorithm import Algorithm, ExactOn
from simulator.algorithms.comm import Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.phases.pat import low, pat_allgather, pat_reduce_scatter, pat_s
from simulator.model.collective import Collective
from simulator.model.nccl import NcclAlgorithm
from simulator.model.nccl_point import NcclBinding
from simulator.model.span import Span

_EXACT = (ExactOn("fully_connected"),)
"""Every connection has its own cable there, so no two messages share a link."""


def _bounded_s(cost: CostInputs, count: int, reduce_scatter: bool) -> float:
    """PAT's closed form held to its links' load: the larger of :func:`pat_s` and the time its
    busiest link needs for what every rank sends over it.

    ``pat_s`` charges each connection its route's bottleneck as if alone, exact where no two
    connections share a link (``fully_connected``). Where they do (a rank's one link to a
    switch carries every dimension's messages) a message's rate is lower, so ``pat_s`` is
    a lower bound that can fall below what the link carries (issue 38: 10 % below the fabric's
    floor on one DGX H100). Every rank sends each of the p - 1 chunks it does not own (the
    reduce-scatter's partial sums, the allgather's copies) once, to me + low(s) (reduce-scatter)
    or me - low(s) (allgather) for offset s: Σ over links of those chunks' bytes over the
    link's bandwidth (:meth:`~simulator.algorithms.cost.CostInputs.shared_beta` of the pairs,
    each repeated once a chunk, times the smallest chunk's bytes) is a time no run beats, and
    on ``fully_connected`` never above ``pat_s``'s exact one.
    """
    p = cost.ranks
    if p == 1:
        return 0.0
    sign = 1 if reduce_scatter else -1
    pairs = [(me, (me + sign * low(s)) % p) for me in range(p) for s in range(1, p)]
    smallest = min(chunk.count for chunk in Span(0, count).split(p))
    return max(pat_s(cost, count, reduce_scatter),
               cost.nbytes(smallest) * cost.shared_beta(pairs))


class PatReduceScatter(Algorithm):
    """PAT reduce-scatter (NCCL's ``PatRSAlgorithm``, src/include/collectives.h, run by
    src/device/reduce_scatter.h): chunk me + s's partial sum climbs a binomial tree, offset s
    to rank me + low(s); every rank sends p-1 pieces a pass in aggregated steps, the low
    dimensions residue by residue, then the high ones Bruck-like (A/2, A/4, …, 1 pieces).

    Closed form (:func:`~simulator.algorithms.phases.pat.pat_s`): the order along its
    dependency chain; with full aggregation on p = 2^L ≥ 4,
    T = L·alpha + (3p/4 - 1)·c·beta + reductions, against the lock-step Bruck bound
    L·alpha + (p-1)/p·n·beta. Exact on ``fully_connected``; elsewhere never below what its
    busiest link carries (:func:`_bounded_s`).
    """

    name = "pat"
    collective = Collective.REDUCE_SCATTER
    exact_on = _EXACT
    nccl = NcclBinding(NcclAlgorithm.PAT, kernel=True)

    def program(self, comm: Comm) -> Program:
        yield from pat_reduce_scatter(comm)

    def model_s(self, cost: CostInputs, count: int) -> float:
        return _bounded_s(cost, count, reduce_scatter=True)


class PatAllgather(Algorithm):
    """PAT allgather (NCCL's ``PatAGAlgorithm``, src/include/collectives.h, run by
    src/device/all_gather.h): the reduce-scatter's trees run downwards, offset s - low(s) to
    rank me - low(s); the high dimensions first, then the residues in preorder.

    Closed form as :class:`PatReduceScatter`'s, without reductions; exact on
    ``fully_connected``, elsewhere never below what its busiest link carries.
    """

    name = "pat"
    collective = Collective.ALLGATHER
    exact_on = _EXACT
    nccl = NcclBinding(NcclAlgorithm.PAT, kernel=True)

    def program(self, comm: Comm) -> Program:
        yield from pat_allgather(comm)

    def model_s(self, cost: CostInputs, count: int) -> float:
        return _bounded_s(cost, count, reduce_scatter=False)
