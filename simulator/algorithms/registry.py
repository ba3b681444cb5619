"""The algorithm registry: adding an algorithm is its file plus one line in ``_ALGORITHMS``.

Each algorithm class carries everything else about itself (options, "exact on" claims, whether
it composes), so nothing outside its file changes when one is added.
"""

from __future__ import annotations

from simulator.algorithms.algorithm import Algorithm
from simulator.algorithms.alltoall import DirectAllToAll, PairwiseAllToAll
from simulator.algorithms.bine import BineAllreduce
from simulator.algorithms.binomial_tree import (
    BinomialTreeAllreduce,
    BinomialTreeBroadcast,
    BinomialTreeReduce,
)
from simulator.algorithms.bucket import BucketAllreduce
from simulator.algorithms.collnet import CollNetChain, CollNetDirect
from simulator.algorithms.direct import (
    DirectAllgather,
    DirectAllreduce,
    DirectBroadcast,
    DirectReduce,
    DirectReduceScatter,
)
from simulator.algorithms.double_binary_tree import DoubleBinaryTreeAllreduce
from simulator.algorithms.halving_doubling import (
    HalvingDoublingAllreduce,
    HalvingDoublingReduceScatter,
)
from simulator.algorithms.hierarchical import Hierarchical
from simulator.algorithms.nvls import Nvls
from simulator.algorithms.nvls_tree import NvlsTree
from simulator.algorithms.pat import PatAllgather, PatReduceScatter
from simulator.algorithms.recursive_doubling import (
    RecursiveDoublingAllgather,
    RecursiveDoublingAllreduce,
)
from simulator.algorithms.ring import (
    RingAllgather,
    RingAllreduce,
    RingBroadcast,
    RingReduce,
    RingReduceScatter,
)
from simulator.algorithms.sendrecv import DirectSendRecv
from simulator.algorithms.shots import (
    OneShotAllreduce,
    TwoShotAllreduce,
    TwoShotMulticastAllreduce,
)
from simulator.algorithms.swing import SwingAllreduce
from simulator.algorithms.tree import TreeAllreduce, TreeBroadcast, TreeReduce
from simulator.model.collective import Collective
from simulator.model.nccl import NcclAlgorithm
from simulator.model.nccl_point import NcclPick

_ALGORITHMS: tuple[Algorithm, ...] = (
    RingAllreduce(),
    RingReduceScatter(),
    RingAllgather(),
    RingBroadcast(),
    RingReduce(),
    Hierarchical(),
    Nvls(),
    NvlsTree(),
    CollNetDirect(),
    CollNetChain(),
    DirectAllreduce(),
    DirectReduceScatter(),
    DirectAllgather(),
    DirectBroadcast(),
    DirectReduce(),
    DirectAllToAll(),
    PairwiseAllToAll(),
    DirectSendRecv(),
    OneShotAllreduce(),
    TwoShotAllreduce(),
    TwoShotMulticastAllreduce(),
    HalvingDoublingAllreduce(),
    HalvingDoublingReduceScatter(),
    RecursiveDoublingAllreduce(),
    RecursiveDoublingAllgather(),
    SwingAllreduce(),
    BineAllreduce(),
    PatReduceScatter(),
    PatAllgather(),
    BinomialTreeAllreduce(),
    BinomialTreeBroadcast(),
    BinomialTreeReduce(),
    TreeAllreduce(),
    TreeBroadcast(),
    TreeReduce(),
    DoubleBinaryTreeAllreduce(),
    BucketAllreduce(),
)

REGISTRY: dict[Collective, dict[str, Algorithm]] = {collective: {} for collective in Collective}
for _algorithm in _ALGORITHMS:
    REGISTRY[_algorithm.collective][_algorithm.name] = _algorithm


def algorithm_names(collective: Collective) -> list[str]:
    """Registry names of the algorithms implementing ``collective``, in registration order."""
    return list(REGISTRY[collective])


def get_algorithm(collective: Collective, name: str) -> Algorithm:
    """The registered algorithm ``name`` for ``collective``; KeyError if there is none."""
    return REGISTRY[collective][name]


def nccl_kernel(collective: Collective, family: NcclAlgorithm) -> Algorithm:
    """The registered schedule NCCL's own kernels run for ``family`` (``Algorithm.nccl``'s
    ``kernel``); KeyError if none is registered."""
    for algorithm in REGISTRY[collective].values():
        if algorithm.nccl.kernel and algorithm.nccl.family is family:
            return algorithm
    raise KeyError(f"no registered {collective.value} runs NCCL's {family.value}")


def runs_pick(collective: Collective, pick: NcclPick) -> Algorithm:
    """The registered algorithm whose schedule NCCL runs for ``pick`` (:meth:`NcclPick.runs_on
    <simulator.model.nccl_point.NcclPick.runs_on>` its binding): NCCL's own kernel of the
    tuner's family, or the algorithm whose symmetric kernels hold the one NCCL launches;
    KeyError if none is registered."""
    for algorithm in REGISTRY[collective].values():
        if pick.runs_on(algorithm.nccl):
            return algorithm
    raise KeyError(f"no registered {collective.value} runs NCCL's {pick.label}")


def composable_names(collective: Collective) -> list[str]:
    """Algorithms of ``collective`` that another algorithm may run on any subgroup."""
    return [name for name, algorithm in REGISTRY[collective].items() if algorithm.composable]
