"""A scenario's ``faults:`` list in, :mod:`simulator.model.faults` records out, every problem
reported as ``file: faults[i].field: what was expected`` (docs/scenarios.md#faults).

What can be checked without the topology is checked here (kinds, keys, times, factors, rank
numbers against the topology's rank count); node names need the built graph and are checked
when the machine is (:func:`simulator.plan.prepare`, with the nearest names)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from simulator.errors import UnitError
from simulator.model.faults import (
    Fault,
    FaultKind,
    LinkDegraded,
    LinkDown,
    NicDown,
    SlowGpu,
    Straggler,
)
from simulator.scenario.fields import FieldReader
from simulator.units import parse_flag, parse_time

KEYS: dict[FaultKind, tuple[tuple[str, ...], tuple[str, ...]]] = {
    FaultKind.LINK_DEGRADED: (("kind", "link", "factor"), ("at", "until", "both")),
    FaultKind.LINK_DOWN: (("kind", "link"), ("at", "both")),
    FaultKind.NIC_DOWN: (("kind", "nic"), ("at",)),
    FaultKind.STRAGGLER: (("kind", "rank", "delay"), ()),
    FaultKind.SLOW_GPU: (("kind", "rank", "factor"), ()),
}
"""Per kind, its required keys and its optional ones."""


def read_faults(reader: FieldReader, value: object, ranks: int | None) -> tuple[Fault, ...]:
    """The faults of a ``faults:`` list (``ranks``: the topology's rank count, None where the
    topology is itself invalid); problems are recorded in ``reader``."""
    if not isinstance(value, list):
        reader.problem("faults", f"expected a list of faults, each a mapping with a kind, got "
                                 f"{value!r}")
        return ()
    faults = []
    for i, item in enumerate(value):
        fault = _fault(reader, f"faults[{i}]", item, ranks)
        if fault is not None:
            faults.append(fault)
    return tuple(faults)


def _fault(reader: FieldReader, where: str, item: object, ranks: int | None) -> Fault | None:
    entry = reader.mapping(where, item)
    if entry is None:
        return None
    kind_name = reader.choice(f"{where}.kind", entry.get("kind"), [k.value for k in FaultKind],
                              "a fault kind")
    if kind_name is None:
        return None
    kind = FaultKind(kind_name)
    required, optional = KEYS[kind]
    before = len(reader.problems)
    reader.check_keys(entry, where, (*required, *optional), required=required)
    if len(reader.problems) > before:
        return None
    field = _Fields(reader, where, entry)
    if kind is FaultKind.LINK_DEGRADED:
        link = field.get("link", _link)
        factor = field.get("factor", _fraction)
        at = field.get("at", _time, "0us")
        until = field.get("until", _time) if "until" in entry else None
        both = field.get("both", parse_flag, False)
        if until is not None and at is not None and until <= at:
            reader.problem(f"{where}.until", f"expected a time after 'at', got {entry['until']!r}")
            return None
        if None in (link, factor, at, both):
            return None
        return LinkDegraded(link, at, factor, both, until)
    if kind is FaultKind.LINK_DOWN:
        link, at, both = field.get("link", _link), field.get("at", _time, "0us"), field.get(
            "both", parse_flag, False)
        return None if None in (link, at, both) else LinkDown(link, at, both)
    if kind is FaultKind.NIC_DOWN:
        nic, at = field.get("nic", _node), field.get("at", _time, "0us")
        return None if nic is None or at is None else NicDown(nic, at)
    rank = field.get("rank", _rank(ranks))
    if kind is FaultKind.STRAGGLER:
        delay = field.get("delay", _time)
        return None if rank is None or delay is None else Straggler(rank, delay)
    factor = field.get("factor", _fraction)
    return None if rank is None or factor is None else SlowGpu(rank, factor)


class _Fields:
    """Reads one fault's fields, recording each problem under ``where.key``."""

    def __init__(self, reader: FieldReader, where: str, entry: Mapping[str, object]) -> None:
        self.reader, self.where, self.entry = reader, where, entry

    def get(self, key: str, parser: Callable[[object], Any], default: object = None) -> Any:
        return self.reader.parse(f"{self.where}.{key}", self.entry.get(key, default), parser)


def _time(value: object) -> float:
    """A time at least 0, with its unit."""
    seconds = parse_time(value)
    if seconds < 0:
        raise UnitError(f"expected a time at least 0, got {value!r}")
    return seconds


def _fraction(value: object) -> float:
    """A factor above 0 and at most 1: the share of the bandwidth left."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise UnitError(f"expected a factor above 0 and at most 1 (0.5 halves the bandwidth), "
                        f"got {value!r}")
    return float(value)


def _link(value: object) -> tuple[str, str]:
    """Two node names, the link's ends as ``topo`` prints them."""
    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(end, str) and end for end in value) or value[0] == value[1]):
        raise UnitError(f"expected two different node names [from, to], such as [gpu1, switch], "
                        f"got {value!r}")
    return value[0], value[1]


def _node(value: object) -> str:
    """A node's name, as ``topo`` prints it."""
    if not isinstance(value, str) or not value:
        raise UnitError(f"expected a node name, such as n0.nic0, got {value!r}")
    return value


def _rank(ranks: int | None) -> Callable[[object], int]:
    def parse(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (
                ranks is not None and value >= ranks):
            upto = f" to {ranks - 1}" if ranks is not None else " or more"
            raise UnitError(f"expected a rank from 0{upto}, got {value!r}")
        return value
    return parse
