"""A training step as an execution graph: every rank's operations in issue order, each a compute
of known duration, a collective on a named communicator, or one side of a point-to-point message,
with the operations on the same rank it waits for.

This is the one form every source of a parallel step takes (the layouts of
:mod:`simulator.training.layout` through :mod:`simulator.training.traffic`, and Chakra execution
traces through :mod:`simulator.training.chakra`) and the one form the step's simulation
(:mod:`simulator.training.execute`) runs. It follows Chakra's execution trace (MLCommons,
``et_def.proto``): ``COMP_NODE``, ``COMM_COLL_NODE``, ``COMM_SEND_NODE`` and ``COMM_RECV_NODE``
with their dependencies, plus the stream an operation is issued on, which draws its track.

Matching across ranks follows NCCL: a communicator's collectives are matched in the order each
member rank issues them (one stream per communicator), and the messages from one rank to another
with one tag in the order they were posted.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum

from simulator.errors import quoted
from simulator.model.collective import Collective


class OpKind(Enum):
    """What an operation does (Chakra's node types ``COMP_NODE``, ``COMM_COLL_NODE``,
    ``COMM_SEND_NODE``, ``COMM_RECV_NODE``)."""

    COMPUTE = "compute"
    COLLECTIVE = "collective"
    SEND = "send"
    RECV = "recv"


@dataclass(frozen=True)
class Op:
    """One operation of one rank. ``id`` is unique on its rank; ``deps`` are ids of operations
    of the same rank that must end before it starts. A compute takes ``duration_s`` (at the
    GPU's full rate). A collective runs ``collective`` over the communicator named ``group`` on
    ``nbytes`` (each rank's buffer, as nccl-tests counts it), ``count`` times back to back (a
    stage's per-layer collectives, batched). A send or receive moves ``nbytes`` to or from
    ``peer`` with ``tag``. ``stream`` names the track it is drawn on and what its time is
    accounted as (``compute``, ``tp``, ``pp``, ``dp``, ``ep``, or a trace's communicator)."""

    id: int
    name: str
    kind: OpKind
    deps: tuple[int, ...] = ()
    duration_s: float = 0.0
    collective: Collective | None = None
    group: str = ""
    nbytes: int = 0
    count: int = 1
    peer: int = -1
    tag: int = 0
    stream: str = "compute"

    @property
    def communicates(self) -> bool:
        """Whether it moves data (a collective, a send or a receive)."""
        return self.kind is not OpKind.COMPUTE


@dataclass(frozen=True)
class Group:
    """A communicator: its name and its member ranks, in the order of their rank within it."""

    name: str
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class Program:
    """One rank's operations, in the order it issues them."""

    rank: int
    ops: tuple[Op, ...]


@dataclass(frozen=True)
class StepGraph:
    """A step: one program per rank (rank r at position r) and the communicators their
    collectives name."""

    programs: tuple[Program, ...]
    groups: tuple[Group, ...]
    _by_name: dict[str, Group] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {group.name: group for group in self.groups})

    @property
    def ranks(self) -> int:
        """How many ranks run the step."""
        return len(self.programs)

    def group(self, name: str) -> Group:
        """The communicator named ``name`` (KeyError if the step has none of that name)."""
        return self._by_name[name]

    def ops(self) -> Iterator[tuple[int, Op]]:
        """Every (rank, operation), rank by rank in issue order."""
        for program in self.programs:
            for op in program.ops:
                yield program.rank, op


def graph_problems(graph: StepGraph) -> list[str]:
    """What makes ``graph`` impossible to run, in words (empty: it can run): programs out of
    rank order, duplicate ids, a dependency on an id not (yet) issued on the rank, a collective
    on a communicator not declared or not holding the rank, a message to a rank outside the
    step or to itself. Deadlocks (a cycle through matched operations) are found when it runs."""
    problems: list[str] = []
    for position, program in enumerate(graph.programs):
        if program.rank != position:
            problems.append(f"program {position} is rank {program.rank}'s: expected rank "
                            f"{position}")
        seen: set[int] = set()
        for op in program.ops:
            where = f"rank {program.rank} op {op.id} ({op.name})"
            if op.id in seen:
                problems.append(f"{where}: duplicate id")
            missing = [dep for dep in op.deps if dep not in seen]
            if missing:
                problems.append(f"{where}: depends on {missing[0]}, not issued before it")
            seen.add(op.id)
            problems.extend(f"{where}: {problem}" for problem in _op_problems(graph, program.rank,
                                                                                op))
    return problems


def _op_problems(graph: StepGraph, rank: int, op: Op) -> Sequence[str]:
    """What is wrong with one operation on ``rank``, in words."""
    if op.kind is OpKind.COMPUTE:
        return [] if op.duration_s >= 0 else [f"duration {op.duration_s} s is negative"]
    if op.nbytes < 0 or op.count < 1:
        return [f"{op.nbytes} bytes × {op.count}: expected bytes ≥ 0 and a count ≥ 1"]
    if op.kind is OpKind.COLLECTIVE:
        if op.collective is None:
            return ["a collective without its kind"]
        if op.group not in graph._by_name:
            return [f"communicator {quoted(op.group)} is not declared"]
        if rank not in graph._by_name[op.group].ranks:
            return [f"rank {rank} is not a member of communicator {quoted(op.group)}"]
        return []
    if not 0 <= op.peer < graph.ranks or op.peer == rank:
        return [f"peer {op.peer}: expected another rank of 0..{graph.ranks - 1}"]
    return []
