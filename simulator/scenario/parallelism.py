"""A training section's ``parallelism:`` in, a :class:`~simulator.training.layout.Parallelism`
out, every problem as ``file: training.parallelism.FIELD: what was expected`` (docs/training.md).
What needs the machine (the GPU count, the nodes) or the model (what divides) is checked when
the step is prepared (:mod:`simulator.trainer`)."""

from __future__ import annotations

import math
from dataclasses import replace

from simulator.errors import UnitError, quoted
from simulator.scenario.fields import FieldReader
from simulator.training.layout import DIMENSIONS, Parallelism, Schedule
from simulator.units import parse_count, parse_flag

KEYS = ("tp", "pp", "dp", "ep", "zero", "microbatches", "schedule", "chunks",
        "sequence_parallel", "recompute", "placement", "tp_across_nodes", "imbalance",
        "sm_contention", "flash_attention")
FIELD = "training.parallelism"
REST = 0
"""``dp`` left out: the GPUs the other dimensions leave (:func:`resolve`)."""


def read_parallelism(reader: FieldReader, value: object) -> Parallelism | None:
    """The layout, or None after recording its problems in ``reader``."""
    section = reader.mapping(FIELD, value)
    if section is None:
        return None
    reader.check_keys(section, FIELD, KEYS)
    before = len(reader.problems)
    counts = {key: reader.parse(f"{FIELD}.{key}", section.get(key, 1), parse_count)
              for key in ("tp", "pp", "ep", "microbatches")}
    dp = reader.parse(f"{FIELD}.dp", section["dp"], parse_count) if "dp" in section else REST
    zero = reader.parse(f"{FIELD}.zero", section.get("zero", 0), _zero)
    schedule = reader.choice(f"{FIELD}.schedule", section.get("schedule", "1f1b"),
                             [s.value for s in Schedule], "a pipeline schedule")
    interleaved = schedule == Schedule.INTERLEAVED.value
    chunks = reader.parse(f"{FIELD}.chunks", section.get("chunks", 2 if interleaved else 1),
                          parse_count)
    flags = {key: reader.parse(f"{FIELD}.{key}", section.get(key, default), parse_flag)
             for key, default in (("sequence_parallel", False), ("recompute", False),
                                  ("tp_across_nodes", False), ("sm_contention", True),
                                  ("flash_attention", True))}
    imbalance = reader.parse(f"{FIELD}.imbalance", section.get("imbalance", 1.0), _imbalance)
    placement = (reader.parse(f"{FIELD}.placement", section["placement"], _placement)
                 if "placement" in section else DIMENSIONS)
    if len(reader.problems) > before:
        return None
    assert schedule is not None and zero is not None and chunks is not None
    assert imbalance is not None and placement is not None and dp is not None
    if chunks > 1 and not interleaved:
        reader.problem(f"{FIELD}.chunks", f"1 with the 1f1b schedule (model chunks are the "
                                          f"interleaved schedule's), got {chunks}")
        return None
    return Parallelism(
        tp=counts["tp"] or 1, pp=counts["pp"] or 1, dp=dp, ep=counts["ep"] or 1, zero=zero,
        microbatches=counts["microbatches"] or 1, schedule=Schedule(schedule), chunks=chunks,
        sequence_parallel=bool(flags["sequence_parallel"]), recompute=bool(flags["recompute"]),
        placement=placement, tp_across_nodes=bool(flags["tp_across_nodes"]),
        imbalance=imbalance, sm_contention=bool(flags["sm_contention"]),
        flash_attention=bool(flags["flash_attention"]))


def resolve(layout: Parallelism, gpus: int) -> Parallelism:
    """``layout`` with ``dp`` left out set to the GPUs TP and PP leave (at least 1)."""
    if layout.dp != REST:
        return layout
    return replace(layout, dp=max(1, gpus // (layout.tp * layout.pp)))


def _zero(value: object) -> int:
    if isinstance(value, bool) or value not in (0, 1, 2, 3):
        raise UnitError(f"expected a ZeRO stage 0, 1, 2 or 3, got {quoted(value)}")
    assert isinstance(value, int)
    return value


def _imbalance(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(
            value) or value < 1:
        raise UnitError(f"expected a factor ≥ 1 (the busiest rank's tokens over the mean), got "
                        f"{quoted(value)}")
    return float(value)


def _placement(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or sorted(map(str, value)) != sorted(DIMENSIONS):
        raise UnitError(f"expected the dimensions {', '.join(DIMENSIONS)} in some order, "
                        f"innermost first, got {quoted(value)}")
    return tuple(str(item) for item in value)
