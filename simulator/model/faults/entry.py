"""The values a fault's scenario entry holds, each parser raising a UnitError that says what was
expected and what came (which :class:`~simulator.model.faults.kind.Fields` records under the
field): times, factors, link ends, node names, ranks, flags."""

from __future__ import annotations

from collections.abc import Callable

from simulator.errors import UnitError, quoted
from simulator.model.faults.kind import check_factor
from simulator.units import parse_flag, parse_time

flag = parse_flag
"""``true`` or ``false``."""


def time_value(value: object) -> float:
    """A time at least 0, with its unit."""
    seconds = parse_time(value)
    if seconds < 0:
        raise UnitError(f"expected a time at least 0, got {quoted(value)}")
    return seconds


def fraction(value: object) -> float:
    """A factor above 0 and at most 1: the share of the bandwidth left, at least
    :data:`~simulator.limits.MIN_FAULT_FACTOR`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise UnitError(f"expected a factor above 0 and at most 1 (0.5 halves the bandwidth), "
                        f"got {quoted(value)}")
    check_factor(value)
    return float(value)


def link_ends(value: object) -> tuple[str, str]:
    """Two node names, the link's ends as ``topo`` prints them."""
    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(end, str) and end for end in value) or value[0] == value[1]):
        raise UnitError(f"expected two different node names [from, to], such as [gpu1, switch], "
                        f"got {quoted(value)}")
    return value[0], value[1]


def node_name(value: object) -> str:
    """A node's name, as ``topo`` prints it."""
    if not isinstance(value, str) or not value:
        raise UnitError(f"expected a node name, such as n0.nic0, got {quoted(value)}")
    return value


def rank_below(ranks: int | None) -> Callable[[object], int]:
    """A parser of a rank of a topology of ``ranks`` ranks (None: the count is unknown, any
    rank from 0)."""
    def parse(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (
                ranks is not None and value >= ranks):
            upto = f" to {ranks - 1}" if ranks is not None else " or more"
            raise UnitError(f"expected a rank from 0{upto}, got {quoted(value)}")
        return value
    return parse
