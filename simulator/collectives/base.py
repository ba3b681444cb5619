"""The algorithm interface: a name, the collective it implements, a per-rank program and its
closed-form cost."""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import Enum
from typing import ClassVar

import networkx as nx

from simulator.costmodel import CostInputs
from simulator.program import Comm, Program


class Collective(Enum):
    """A collective operation and its nccl-tests bus-bandwidth factor."""

    ALLREDUCE = "allreduce"

    def busbw_factor(self, ranks: int) -> float:
        """busbw = algbw × this (nccl-tests doc/PERFORMANCE.md): allreduce 2(p-1)/p."""
        return 2.0 * (ranks - 1) / ranks


class Algorithm(ABC):
    """One algorithm for one collective, written as a per-rank program.

    Subclasses set ``name`` (the registry name used in scenario files) and ``collective``, write
    :meth:`program` against the communicator only, and give the closed form in :meth:`model_time`
    with its source cited.
    """

    name: ClassVar[str]
    collective: ClassVar[Collective]

    def unsupported(self, graph: nx.DiGraph, placement: tuple[str, ...]) -> str | None:
        """Why this algorithm cannot run on the topology, or None when it can."""
        return None

    @abstractmethod
    def program(self, me: int, comm: Comm) -> Program:
        """The generator rank ``me`` runs; every rank's buffer holds ``comm.buffer.count`` elements."""

    @abstractmethod
    def model_time(self, cost: CostInputs, count: int, itemsize: int) -> float:
        """Closed-form time (s) for ``count`` elements of ``itemsize`` bytes per rank."""
