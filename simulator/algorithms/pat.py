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
from simulator.algorithms.phases.pat import pat_allgather, pat_reduce_scatter, pat_s
from simulator.model.collective import Collective
from simulator.model.nccl import NcclAlgorithm
from simulator.model.nccl_point import NcclBinding

_EXACT = (ExactOn("fully_connected"),)
"""Every connection has its own cable there, so no two messages share a link."""


class PatReduceScatter(Algorithm):
    """PAT reduce-scatter (NCCL's ``PatRSAlgorithm``, src/include/collectives.h, run by
    src/device/reduce_scatter.h): chunk me + s's partial sum climbs a binomial tree, offset s
    to rank me + low(s); every rank sends p-1 pieces a pass in aggregated steps, the low
    dimensions residue by residue, then the high ones Bruck-like (A/2, A/4, …, 1 pieces).

    Closed form (:func:`~simulator.algorithms.phases.pat.pat_s`): the order along its
    dependency chain; with full aggregation on p = 2^L ≥ 4,
    T = L·alpha + (3p/4 - 1)·c·beta + reductions, against the lock-step Bruck bound
    L·alpha + (p-1)/p·n·beta. Exact on ``fully_connected``.
    """

    name = "pat"
    collective = Collective.REDUCE_SCATTER
    exact_on = _EXACT
    nccl = NcclBinding(NcclAlgorithm.PAT, kernel=True)

    def program(self, comm: Comm) -> Program:
        yield from pat_reduce_scatter(comm)

    def model_s(self, cost: CostInputs, count: int) -> float:
        return pat_s(cost, count, reduce_scatter=True)


class PatAllgather(Algorithm):
    """PAT allgather (NCCL's ``PatAGAlgorithm``, src/include/collectives.h, run by
    src/device/all_gather.h): the reduce-scatter's trees run downwards, offset s - low(s) to
    rank me - low(s); the high dimensions first, then the residues in preorder.

    Closed form as :class:`PatReduceScatter`'s, without reductions; exact on
    ``fully_connected``.
    """

    name = "pat"
    collective = Collective.ALLGATHER
    exact_on = _EXACT
    nccl = NcclBinding(NcclAlgorithm.PAT, kernel=True)

    def program(self, comm: Comm) -> Program:
        yield from pat_allgather(comm)

    def model_s(self, cost: CostInputs, count: int) -> float:
        return pat_s(cost, count, reduce_scatter=False)
