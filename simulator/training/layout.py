"""How a training job splits its GPUs: tensor (TP), pipeline (PP), data (DP) and expert (EP)
parallelism, ZeRO's sharding stage, the micro-batches and their schedule, and which ranks form
each communicator.

Ranks are numbered as Megatron-Core numbers them (``parallel_state.initialize_model_parallel``,
order ``tp-cp-ep-dp-pp``): the first dimension of ``placement`` varies fastest, so TP groups are
consecutive ranks (one node's NVLink domain), then EP, then the rest of DP, and PP stages are the
outermost blocks. As in Megatron-Core, expert parallelism is carved out of data parallelism: a
dense layer's data-parallel group has ``dp`` ranks, ``ep`` of them (consecutive in the order)
hold different experts, and the ``dp / ep`` holding the same experts average their gradients, so
``tp · pp · dp`` is the GPU count and ``ep`` divides ``dp``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from simulator.training.graph import Group

DIMENSIONS = ("tp", "ep", "dp", "pp")
"""The dimensions of a placement, innermost first, in Megatron-Core's default order (``dp`` here
is the part of data parallelism outside expert parallelism)."""


class Schedule(Enum):
    """The pipeline schedule: ``1f1b`` (PipeDream-Flush, Narayanan et al. 2021 §2.2.1: warm-up
    forwards, then one forward one backward, then the remaining backwards) or ``interleaved``
    (each rank holds ``chunks`` model chunks, §2.2.2: the bubble shrinks by that factor at the
    cost of as many more messages)."""

    ONE_F_ONE_B = "1f1b"
    INTERLEAVED = "interleaved"


@dataclass(frozen=True)
class Parallelism:
    """A layout: ``tp × pp × dp`` GPUs, ``ep`` of each ``dp`` holding different experts, ZeRO
    stage ``zero`` (0: DDP; 1: optimizer states sharded over DP, 2: and gradients, 3: and
    parameters, as FSDP's full sharding), ``microbatches`` per step run on the pipeline by
    ``schedule`` (``chunks`` model chunks per rank when interleaved), Megatron's
    ``sequence_parallel`` (TP's allreduces become reduce-scatters and all-gathers), full
    activation ``recompute``, ``placement`` (innermost dimension first), whether TP may span
    nodes, the token-routing ``imbalance`` of the experts' all-to-all (the busiest rank's
    tokens over the mean: 1 is perfectly balanced), and whether a running NCCL kernel slows
    the compute beside it by the SMs it holds (``sm_contention``,
    :mod:`simulator.training.execute`), and whether attention keeps no scores for backward
    (``flash_attention``: what a GPU holds, :mod:`simulator.training.memory`)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    zero: int = 0
    microbatches: int = 1
    schedule: Schedule = Schedule.ONE_F_ONE_B
    chunks: int = 1
    sequence_parallel: bool = False
    recompute: bool = False
    placement: tuple[str, ...] = DIMENSIONS
    tp_across_nodes: bool = False
    imbalance: float = 1.0
    sm_contention: bool = True
    flash_attention: bool = True

    @property
    def gpus(self) -> int:
        """GPUs the layout needs."""
        return self.tp * self.pp * self.dp

    @property
    def plain(self) -> bool:
        """Whether this is plain data parallelism (DDP: no TP, PP, EP, ZeRO, one micro-batch)."""
        return (self.tp, self.pp, self.ep, self.zero, self.microbatches) == (1, 1, 1, 0, 1)

    @property
    def sizes(self) -> dict[str, int]:
        """Each placement dimension's size (``dp`` the part outside expert parallelism)."""
        return {"tp": self.tp, "ep": self.ep, "dp": self.dp // self.ep, "pp": self.pp}

    def label(self) -> str:
        """The layout in one short phrase, as tables print it."""
        parts = [f"tp{self.tp}", f"pp{self.pp}", f"dp{self.dp}"]
        if self.ep > 1:
            parts.append(f"ep{self.ep}")
        if self.zero:
            parts.append(f"zero{self.zero}")
        return " ".join(parts)


@dataclass(frozen=True)
class Coordinates:
    """A rank's place: its TP rank, its stage, its index in the dense data-parallel group, and
    that index split into the expert-parallel rank and the rest."""

    tp: int
    pp: int
    dp: int
    ep: int
    outer: int


def coordinates(layout: Parallelism, rank: int) -> Coordinates:
    """Where ``rank`` sits in ``layout`` (``placement`` innermost first)."""
    sizes, index, rest = layout.sizes, {}, rank
    for dimension in layout.placement:
        rest, index[dimension] = divmod(rest, sizes[dimension])
    return Coordinates(tp=index["tp"], pp=index["pp"], dp=index["ep"] + layout.ep * index["dp"],
                       ep=index["ep"], outer=index["dp"])


def rank_of(layout: Parallelism, *, tp: int, pp: int, ep: int, outer: int) -> int:
    """The rank at the given place (the inverse of :func:`coordinates`)."""
    sizes, index = layout.sizes, {"tp": tp, "pp": pp, "ep": ep, "dp": outer}
    rank, stride = 0, 1
    for dimension in layout.placement:
        rank += index[dimension] * stride
        stride *= sizes[dimension]
    return rank


def group_name(kind: str, *index: int) -> str:
    """A communicator's name: its kind and the indices that place it (:func:`groups` says
    which), as ``tp:S:D``.

    >>> group_name("ep", 0, 1, 2)
    'ep:0:1:2'
    """
    return ":".join((kind, *map(str, index)))


def groups(layout: Parallelism) -> tuple[Group, ...]:
    """Every communicator of the layout with more than one rank: per stage and DP index a TP
    group (``tp:S:D``); per stage and TP rank a dense DP group (``dp:S:T``); per TP rank and DP
    index a pipeline (``pp:T:D``, stages in order); with experts, per stage, TP rank and outer
    index an EP group (``ep:S:T:O``) and per stage, TP rank and EP rank an expert-DP group
    (``edp:S:T:E``). Members in the order of their rank within the group."""
    sizes = layout.sizes
    found: list[Group] = []

    def rank(tp: int, pp: int, ep: int, outer: int) -> int:
        return rank_of(layout, tp=tp, pp=pp, ep=ep, outer=outer)

    def dense(d: int) -> tuple[int, int]:
        return d % layout.ep, d // layout.ep

    for s in range(layout.pp):
        for d in range(layout.dp):
            found.append(Group(group_name("tp", s, d), tuple(rank(t, s, *dense(d))
                                                     for t in range(layout.tp))))
        for t in range(layout.tp):
            found.append(Group(group_name("dp", s, t), tuple(rank(t, s, *dense(d))
                                                     for d in range(layout.dp))))
            for o in range(sizes["dp"]):
                found.append(Group(group_name("ep", s, t, o), tuple(rank(t, s, e, o)
                                                            for e in range(layout.ep))))
            for e in range(layout.ep):
                found.append(Group(group_name("edp", s, t, e), tuple(rank(t, s, e, o)
                                                             for o in range(sizes["dp"]))))
    for t in range(layout.tp):
        for d in range(layout.dp):
            found.append(Group(group_name("pp", t, d), tuple(rank(t, s, *dense(d))
                                                     for s in range(layout.pp))))
    return tuple(group for group in found if len(group.ranks) > 1)


def layout_problems(layout: Parallelism, gpus: int, gpus_per_node: int) -> list[tuple[str, str]]:
    """What stops ``layout`` running on ``gpus`` GPUs of ``gpus_per_node`` each, as (field,
    expected) pairs under ``training.parallelism`` (empty: it runs). The model's own
    divisibility is :func:`simulator.training.traffic.model_problems`'."""
    problems: list[tuple[str, str]] = []
    if layout.gpus != gpus:
        problems.append(("", f"tp {layout.tp} × pp {layout.pp} × dp {layout.dp} = "
                             f"{layout.gpus} GPUs, but the topology has {gpus}"))
    if layout.dp % layout.ep:
        problems.append(("ep", f"a divisor of dp {layout.dp} (expert parallelism is carved out "
                               f"of data parallelism, as in Megatron-Core), got {layout.ep}"))
    if layout.tp > 1 and not layout.tp_across_nodes and _tp_spans_nodes(layout, gpus_per_node):
        problems.append(("tp", f"TP groups inside one node of {gpus_per_node} GPUs, got tp "
                               f"{layout.tp} placed across nodes (say tp_across_nodes: true "
                               f"to mean it)"))
    if layout.schedule is Schedule.INTERLEAVED and (layout.pp < 2 or layout.chunks < 2):
        problems.append(("schedule", f"interleaved needs pp ≥ 2 and chunks ≥ 2, got pp "
                                     f"{layout.pp} and chunks {layout.chunks}"))
    if layout.schedule is Schedule.INTERLEAVED and layout.microbatches % layout.pp:
        problems.append(("microbatches", f"a multiple of pp {layout.pp} with the interleaved "
                                         f"schedule (Megatron's requirement), got "
                                         f"{layout.microbatches}"))
    if not math.isfinite(layout.imbalance) or layout.imbalance < 1:
        problems.append(("imbalance", f"a factor ≥ 1 (the busiest rank's tokens over the "
                                      f"mean), got {layout.imbalance}"))
    return problems


def _tp_spans_nodes(layout: Parallelism, gpus_per_node: int) -> bool:
    """Whether some TP group holds ranks of two nodes (node = rank // gpus_per_node)."""
    return any(len({rank // gpus_per_node for rank in group.ranks}) > 1
               for group in groups(layout) if group.name.startswith("tp:"))
