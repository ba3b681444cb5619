"""The algorithm interface: a name, the collective it implements, where it applies, its options,
a per-rank program, its closed-form cost and where that closed form is exact.

Everything an algorithm declares lives on its class, so adding one is its file plus one line in
:mod:`~simulator.algorithms.registry`: options are a frozen dataclass (:attr:`Algorithm.Options`)
that scenario files fill in under ``algorithm_options:``, and "exact on" claims are data
(:attr:`Algorithm.exact_on`) that the contract tests check.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, fields, is_dataclass, replace
from enum import Enum
from typing import Any, ClassVar

from simulator.algorithms.comm import Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import Footprint
from simulator.algorithms.schedule import Blocks, Group, Schedule
from simulator.algorithms.trace import trace
from simulator.model.collective import Collective
from simulator.model.machine import Layout, Machine
from simulator.model.nccl_point import NcclBinding
from simulator.model.reduction import ReduceOp


class ModelKind(Enum):
    """What an algorithm's closed form (a results row's ``model_time_s``, its ``model_kind``)
    claims, a contract of issue 38 (docs/design.md §3).

    ``BOUND``: exact where :attr:`Algorithm.exact_on` says, elsewhere a bound on the simulated
    time its docstring names, and never below the fabric's floor
    (:func:`simulator.model.floor.floor_s`: the collective's bytes over the bottleneck links'
    capacity), which tests/test_bounds.py checks on every preset. ``ESTIMATE``: an
    approximation (documented "exact nowhere"), which may fall below the floor."""

    BOUND = "bound"
    ESTIMATE = "estimate"


class RankCounts(Enum):
    """Which rank counts an :class:`ExactOn` claim covers."""

    ANY = "any p"
    POWERS_OF_TWO = "p a power of two"

    def admits(self, ranks: int) -> bool:
        """Whether the claim covers ``ranks``."""
        return self is RankCounts.ANY or ranks & (ranks - 1) == 0


@dataclass(frozen=True)
class ExactOn:
    """A claim about a closed form, checked by the contract tests: on a topology of builder
    ``kind`` (any bandwidth, the same non-zero latency on every link), for every rank count
    ``ranks`` admits and any size, the simulated time equals :meth:`Algorithm.model_s`."""

    kind: str
    ranks: RankCounts = RankCounts.ANY

    def __str__(self) -> str:
        return self.kind if self.ranks is RankCounts.ANY else f"{self.kind} ({self.ranks.value})"


@dataclass(frozen=True)
class NoOptions:
    """The options of an algorithm that has none."""


@dataclass(frozen=True)
class Inner:
    """Marks an option naming another algorithm that runs inside this one (for example what
    ``hierarchical`` runs across hosts): any :attr:`~Algorithm.composable` algorithm of
    ``collective``, described to users as ``what``. Use as
    ``Annotated[Algorithm, Inner(Collective.ALLREDUCE, "an inter-host allreduce")]``."""

    collective: Collective
    what: str


class Algorithm(ABC):
    """One algorithm for one collective, written as a per-rank program.

    Subclasses set ``name`` (the registry name used in scenario files) and ``collective``, write
    :meth:`program` against the communicator only, and give the closed form in :meth:`model_s`
    with its source cited. The program must work on any communicator, including a subgroup
    over a span of the buffer (``comm.buffer``), so that other algorithms can compose it.
    An algorithm with options is a frozen dataclass with one field, ``options``.
    """

    name: ClassVar[str]
    collective: ClassVar[Collective]
    Options: ClassVar[type] = NoOptions
    """A frozen dataclass of this algorithm's scenario options (``algorithm_options: {name: ...}``)."""
    options: Any = NoOptions()
    """This algorithm's options, an instance of :attr:`Options` (a dataclass field where there
    are some)."""
    exact_on: ClassVar[tuple[ExactOn, ...]] = ()
    """Where the closed form equals the simulation (checked by tests/test_contract.py)."""
    model_kind: ClassVar[ModelKind] = ModelKind.BOUND
    """Whether the closed form is a bound, never below the fabric's floor, or an estimate
    (:class:`ModelKind`; the results' ``model_kind``)."""
    composable: ClassVar[bool] = False
    """Whether another algorithm may run this one on any subgroup (no topology needs of its own)."""
    nccl: ClassVar[NcclBinding] = NcclBinding()
    """How NCCL would run this algorithm (:class:`~simulator.model.nccl_point.NcclBinding`): the
    NCCL family whose kernels' costs ``execution: nccl`` charges it (Ring by default), whether
    it is the schedule NCCL's own kernels run for that family (what stands for NCCL's pick), and
    the symmetric kernels it stands for."""
    rail_aware: ClassVar[bool] = False
    """Whether the schedule itself spreads its traffic between hosts over every GPU's NIC (as
    ``hierarchical`` does, one rail per local rank), so that NCCL's channels would add nothing:
    ``channels: auto`` then runs it on one channel."""
    trace_vectorised: ClassVar[bool] = False
    """Whether ``engine: auto`` runs this algorithm's trace on the vectorised engine (where it has
    no builder): for a schedule whose instants move many flows at once, where that engine is the
    faster (the CollNet algorithms and the one- and two-shot kernels; ``nvls_tree``, before it
    had a builder, ran 1 GiB on two DGX H100 in 5 s there against 80 s on SimPy). The two
    engines give the same times to the bit, so this moves only the ``engine`` and ``events``
    columns."""

    def __eq__(self, other: object) -> bool:
        """Algorithms are values: equal when of the same class with the same options."""
        return type(self) is type(other) and vars(self) == vars(other)

    def __hash__(self) -> int:
        return hash(type(self))

    def unsupported(self, machine: Machine) -> str | None:
        """Why this algorithm cannot run on ``machine``, or None when it can."""
        return None

    def whole_chunks(self, ranks: int) -> int:
        """How many equal chunks the program cuts each rank's buffer into on ``ranks`` ranks when
        it may move data from one chunk to another (an MSCCL schedule's ``nchunksperloop``; an
        all-to-all's p blocks): a point's element count must then be a multiple of it, and the
        verified proxy keeps the chunks equal (:func:`simulator.plan.plan_point`). 1, the
        default: any count, data keeping their place in the buffer from rank to rank."""
        return 1

    def workspace_chunks(self) -> int:
        """Chunks (of count / :meth:`whole_chunks` elements each) the program keeps data in past
        the collective's buffer (MSCCL's scratch buffer): its ``comm.buffer`` then spans the
        buffer followed by this workspace, which is not verified. 0, the default: none."""
        return 0

    def explain(self, rank: int, chunk: int, op: ReduceOp) -> str | None:
        """What chunk ``chunk`` of rank ``rank`` (of :meth:`whole_chunks`, else of the p chunks
        the collective owns) holds, said for a run that came out wrong there (``holds the sum
        of ranks 0-2 (missing 3)``); None where the algorithm cannot tell."""
        return None

    def configured(self, options: Any) -> Algorithm:
        """This algorithm with ``options`` (an instance of its :attr:`Options`) applied."""
        if not isinstance(options, self.Options):
            raise TypeError(f"{self.name}: expected {self.Options.__name__}, got {options!r}")
        if self.Options is NoOptions:
            return self
        assert is_dataclass(self) and "options" in {f.name for f in fields(self)}
        return replace(self, options=options)

    @abstractmethod
    def program(self, comm: Comm) -> Program:
        """The generator rank ``comm.rank`` runs on ``comm.buffer``."""

    def schedule(self, group: Group) -> Schedule:
        """The same program as a schedule of arrays (:mod:`simulator.algorithms.schedule`), for
        the vectorised engine: by default traced from :meth:`program`
        (:func:`~simulator.algorithms.trace.trace`). An algorithm may override it with a
        hand-written builder, a fast path (numpy for any p instead of Python per message) that
        ``tests/test_trace.py`` holds equal to the trace."""
        return trace(self, group)

    def blocks(self, group: Group) -> Blocks:
        """:meth:`schedule` produced a block at a time where the algorithm can
        (:class:`~simulator.algorithms.schedule.Blocks`: for runs too large to hold whole); by
        default the whole schedule as one block."""
        return Blocks.whole(self.schedule(group))

    def has_builder(self) -> bool:
        """Whether :meth:`schedule` is a hand-written builder of this class's own
        :meth:`program`: a subclass that rewrites the program but inherits the builder has
        none, so no engine runs a schedule that says something else than the program."""
        return self._owner("schedule") is self._owner("program")

    def scheduled(self, group: Group) -> Schedule:
        """:meth:`schedule` where it is a builder of this program (:meth:`has_builder`), else
        the program's trace."""
        return self.schedule(group) if self.has_builder() else trace(self, group)

    def in_blocks(self, group: Group) -> Blocks:
        """:meth:`blocks` under :meth:`scheduled`'s rule; a trace is marked
        :attr:`Blocks.traced`."""
        if not self.has_builder():
            return Blocks.whole(trace(self, group), traced=True)
        if self._owner("blocks") is self._owner("program"):
            return self.blocks(group)
        return Blocks.whole(self.schedule(group))

    def footprint(self, group: Group) -> Footprint | None:
        """What :meth:`in_blocks` holds on ``group`` (its entries, rank pairs and what the engine
        holds at once, :class:`~simulator.algorithms.footprint.Footprint`), counted without
        building it; None where only building it tells (the default). An algorithm with a
        builder counts from the builder's own arithmetic, so that a point too large for the
        machine is refused before anything is allocated; without it the engine checks the
        schedule once built. ``tests/test_footprint.py`` holds every count equal to the
        schedule."""
        return None

    def counted(self, group: Group) -> Footprint | None:
        """:meth:`footprint` under :meth:`in_blocks`' rule: None for a trace, or where the
        class that counts is not the one that writes the program (a subclass that rewrites
        the program is not counted by its parent's arithmetic)."""
        if not self.has_builder() or self._owner("footprint") is not self._owner("program"):
            return None
        return self.footprint(group)

    def _owner(self, method: str) -> type:
        """The class in this one's method order that defines ``method``."""
        return next(k for k in type(self).__mro__ if method in vars(k))

    def reduction_depth(self, layout: Layout) -> int:
        """The most reductions any rank's contribution goes through before it is part of a
        result, in this algorithm's order on ``layout``'s ranks (the height of its reduction
        tree): the d of the bound γ_d·Σ|x_i| a floating-point sum is checked against (Higham,
        *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §4.2; docs/numerics.md).

        By default p - 1, which holds for every order that reduces each contribution once (a
        ring's chunk takes its p - 1 additions one after the other, as does a direct owner's);
        an algorithm whose order is shallower says so, and tests/test_numerics.py measures
        every algorithm's order against its claim.
        """
        return len(layout.hosts) - 1

    @abstractmethod
    def model_s(self, cost: CostInputs, count: int) -> float:
        """Closed-form time (s) for ``count`` elements per rank (cost.itemsize bytes each)."""
