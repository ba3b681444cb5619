"""The algorithm interface: a name, the collective it implements, a per-rank program and its
closed-form cost."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import networkx as nx

from simulator.collective import Collective
from simulator.costmodel import CostInputs
from simulator.program import Comm, Program


@dataclass(frozen=True)
class Options:
    """Scenario choices an algorithm may honour: ``inter`` is the allreduce that
    ``hierarchical`` runs across nodes."""

    inter: Algorithm | None = None


class Algorithm(ABC):
    """One algorithm for one collective, written as a per-rank program.

    Subclasses set ``name`` (the registry name used in scenario files) and ``collective``, write
    :meth:`program` against the communicator only, and give the closed form in :meth:`model_time`
    with its source cited. The program must work on any communicator, including a subgroup
    over part of the buffer (``comm.buffer``), so that other algorithms can compose it.
    """

    name: ClassVar[str]
    collective: ClassVar[Collective]

    def unsupported(self, graph: nx.DiGraph, placement: tuple[str, ...]) -> str | None:
        """Why this algorithm cannot run on the topology, or None when it can."""
        return None

    def configure(self, options: Options) -> Algorithm:
        """This algorithm with the scenario's options applied (most ignore them)."""
        return self

    @abstractmethod
    def program(self, me: int, comm: Comm) -> Program:
        """The generator rank ``me`` runs on ``comm.buffer``."""

    @abstractmethod
    def model_time(self, cost: CostInputs, count: int) -> float:
        """Closed-form time (s) for ``count`` elements per rank (cost.itemsize bytes each)."""
