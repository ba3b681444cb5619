"""The algorithm registry: adding an algorithm is one file here plus one line in ``_ALGORITHMS``."""

from __future__ import annotations

from simulator.collectives.base import Algorithm, Collective
from simulator.collectives.ring import RingAllreduce

_ALGORITHMS: tuple[Algorithm, ...] = (
    RingAllreduce(),
)

REGISTRY: dict[Collective, dict[str, Algorithm]] = {}
for _algorithm in _ALGORITHMS:
    REGISTRY.setdefault(_algorithm.collective, {})[_algorithm.name] = _algorithm


def algorithm_names(collective: Collective) -> list[str]:
    """Registry names of the algorithms implementing ``collective``, in registration order."""
    return list(REGISTRY.get(collective, {}))


def get_algorithm(collective: Collective, name: str) -> Algorithm:
    """The registered algorithm ``name`` for ``collective``; KeyError if there is none."""
    return REGISTRY[collective][name]


__all__ = ["REGISTRY", "Algorithm", "Collective", "algorithm_names", "get_algorithm"]
