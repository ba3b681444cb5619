"""The algorithm registry: adding an algorithm is one file here plus one line in ``_ALGORITHMS``."""

from __future__ import annotations

from simulator.collective import Collective
from simulator.collectives.base import Algorithm, Options
from simulator.collectives.binomial_tree import (
    BinomialTreeAllreduce,
    BinomialTreeBroadcast,
    BinomialTreeReduce,
)
from simulator.collectives.direct import (
    DirectAllgather,
    DirectAllreduce,
    DirectBroadcast,
    DirectReduce,
    DirectReduceScatter,
)
from simulator.collectives.double_binary_tree import DoubleBinaryTreeAllreduce
from simulator.collectives.halving_doubling import (
    HalvingDoublingAllreduce,
    HalvingDoublingReduceScatter,
)
from simulator.collectives.hierarchical import Hierarchical
from simulator.collectives.nvls import Nvls
from simulator.collectives.recursive_doubling import (
    RecursiveDoublingAllgather,
    RecursiveDoublingAllreduce,
)
from simulator.collectives.ring import (
    RingAllgather,
    RingAllreduce,
    RingBroadcast,
    RingReduce,
    RingReduceScatter,
)
from simulator.collectives.tree import TreeAllreduce, TreeBroadcast, TreeReduce

_ALGORITHMS: tuple[Algorithm, ...] = (
    RingAllreduce(),
    RingReduceScatter(),
    RingAllgather(),
    RingBroadcast(),
    RingReduce(),
    Hierarchical(),
    Nvls(),
    DirectAllreduce(),
    DirectReduceScatter(),
    DirectAllgather(),
    DirectBroadcast(),
    DirectReduce(),
    HalvingDoublingAllreduce(),
    HalvingDoublingReduceScatter(),
    RecursiveDoublingAllreduce(),
    RecursiveDoublingAllgather(),
    BinomialTreeAllreduce(),
    BinomialTreeBroadcast(),
    BinomialTreeReduce(),
    TreeAllreduce(),
    TreeBroadcast(),
    TreeReduce(),
    DoubleBinaryTreeAllreduce(),
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


__all__ = ["REGISTRY", "Algorithm", "Collective", "Options", "algorithm_names", "get_algorithm"]
