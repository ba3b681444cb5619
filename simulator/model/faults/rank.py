"""Faults of a rank: :class:`Straggler` (it enters the collective late) and :class:`SlowGpu` (its
GPU reduces at a share of its reduction bandwidth)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar

from simulator.errors import quoted
from simulator.model.execution import Execution
from simulator.model.faults.entry import fraction, rank_below, time_value
from simulator.model.faults.kind import Fault, Fields, Problem, check_factor, check_rank, said
from simulator.model.machine import Machine
from simulator.units import format_time


def rank_beyond(rank: int, ranks: int) -> Problem | None:
    """A rank beyond a topology of ``ranks`` ranks, or None."""
    if rank >= ranks:
        return "rank", f"expected a rank from 0 to {ranks - 1}, got {rank}"
    return None


@dataclass(frozen=True)
class Straggler(Fault):
    """Rank ``rank`` enters the collective ``delay_s`` after the others: it posts nothing and
    takes no message before then (``Machine.entry_s``)."""

    rank: int
    delay_s: float

    kind: ClassVar[str] = "straggler"
    required: ClassVar[tuple[str, ...]] = ("rank", "delay")

    def __post_init__(self) -> None:
        check_rank(self.rank)
        if not (math.isfinite(self.delay_s) and self.delay_s >= 0):
            raise ValueError(f"expected a delay at least 0, got {quoted(self.delay_s)}")

    @classmethod
    def read(cls, fields: Fields) -> Straggler | None:
        """The entry's rank and delay."""
        rank = fields.get("rank", rank_below(fields.ranks))
        delay = fields.get("delay", time_value)
        return None if rank is None or delay is None else cls(rank, delay)

    def rank_problem(self, ranks: int) -> Problem | None:
        """Its rank beyond the topology's."""
        return rank_beyond(self.rank, ranks)

    def problem(self, machine: Machine, execution: Execution) -> Problem | None:
        """Its rank beyond the machine's."""
        return self.rank_problem(machine.ranks)

    def seen_by(self, start_s: float, ready_s: float) -> Straggler | None:
        """Its backward pass runs ``delay`` late, so it enters the allreduce of a bucket ready
        at ``ready_s`` ``ready_s + delay - start_s`` late; not at all if the stream was still
        busy that long."""
        late = self.delay_s + (ready_s - start_s)
        return replace(self, delay_s=late) if late > 0 else None

    def applied(self, machine: Machine) -> Machine:
        """Its rank's entry time set (the latest of the delays naming it)."""
        entry = list(machine.entry_s or (0.0,) * machine.ranks)
        entry[self.rank] = max(entry[self.rank], self.delay_s)
        return replace(machine, entry_s=tuple(entry) if any(entry) else ())

    def label(self) -> str:
        """``straggler rank 3 +50us``."""
        return f"straggler rank {self.rank} +{said(self.delay_s)}"

    def acted(self, run_s: float) -> bool:
        """Whether it made its rank late at all."""
        return self.delay_s > 0

    def settings(self) -> dict[str, object]:
        """As a scenario's ``faults:`` entry."""
        return {"kind": self.kind, "rank": self.rank, "delay": format_time(self.delay_s)}


@dataclass(frozen=True)
class SlowGpu(Fault):
    """Rank ``rank``'s GPU reduces at ``factor`` times its reduction bandwidth
    (``Machine.gpus``), its launch latency unchanged."""

    rank: int
    factor: float

    kind: ClassVar[str] = "slow_gpu"
    required: ClassVar[tuple[str, ...]] = ("rank", "factor")

    def __post_init__(self) -> None:
        check_rank(self.rank)
        check_factor(self.factor)

    @classmethod
    def read(cls, fields: Fields) -> SlowGpu | None:
        """The entry's rank and factor."""
        rank = fields.get("rank", rank_below(fields.ranks))
        factor = fields.get("factor", fraction)
        return None if rank is None or factor is None else cls(rank, factor)

    def rank_problem(self, ranks: int) -> Problem | None:
        """Its rank beyond the topology's."""
        return rank_beyond(self.rank, ranks)

    def problem(self, machine: Machine, execution: Execution) -> Problem | None:
        """NCCL's execution (whose reductions cost nothing apart from its copies), its rank
        beyond the machine's, or a GPU that reduces for free."""
        if execution is Execution.NCCL:
            return "kind", ("expected no slow_gpu under execution: nccl, where a GPU's "
                            "reductions cost nothing apart from NCCL's copies (run it with "
                            "execution: ideal and a gpu reduce_bandwidth)")
        beyond = self.rank_problem(machine.ranks)
        if beyond is not None:
            return beyond
        if machine.gpu_of(self.rank).reduce_bandwidth_Bps is None:
            return "rank", (f"rank {self.rank}'s GPU reduces for free here (no gpu "
                            "reduce_bandwidth): a slow GPU would change nothing")
        return None

    def seen_by(self, start_s: float, ready_s: float) -> SlowGpu:
        """Slow in every bucket."""
        return self

    def applied(self, machine: Machine) -> Machine:
        """Its rank's GPU at ``factor`` times its reduction bandwidth."""
        gpus = list(machine.gpus or (machine.gpu,) * machine.ranks)
        gpu = gpus[self.rank]
        assert gpu.reduce_bandwidth_Bps is not None
        gpus[self.rank] = replace(gpu, reduce_bandwidth_Bps=gpu.reduce_bandwidth_Bps
                                  * self.factor)
        return replace(machine, gpus=tuple(gpus) if any(g != machine.gpu for g in gpus) else ())

    def label(self) -> str:
        """``slow_gpu rank 3 x0.5``."""
        return f"slow_gpu rank {self.rank} x{self.factor:g}"

    def acted(self, run_s: float) -> bool:
        """Always: its rank reduces at its rate from the start."""
        return True

    def settings(self) -> dict[str, object]:
        """As a scenario's ``faults:`` entry."""
        return {"kind": self.kind, "rank": self.rank, "factor": self.factor}
