"""A link that flaps (:class:`LinkFlapping`): down and up at a period, until a time, as steps of
the machine's capacity timeline (capacity 0 while down, its bandwidth while up)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from simulator.errors import UnitError, quoted
from simulator.limits import MAX_FLAPS
from simulator.model.faults.entry import flag, link_ends, time_value
from simulator.model.faults.kind import Fault, Fields, Problem, said
from simulator.model.faults.link import Link, arrow, directed, link_problem
from simulator.model.machine import CapacityEvent, Machine
from simulator.units import format_time

if TYPE_CHECKING:
    from simulator.model.execution import Execution


def periods(at_s: float, until_s: float, period_s: float) -> int:
    """How many periods start from ``at_s`` before ``until_s``.

    >>> periods(5e-6, 40e-6, 10e-6), periods(0.0, 1e-3, 2.5e-4)
    (4, 4)
    """
    return max(math.ceil((until_s - at_s) / period_s), 0)


def positive_time(value: object) -> float:
    """A time above 0, with its unit."""
    seconds = time_value(value)
    if seconds <= 0:
        raise UnitError(f"expected a time above 0, got {quoted(value)}")
    return seconds


@dataclass(frozen=True)
class LinkFlapping(Fault):
    """Link ``link`` (from node, to node) goes down at ``at_s`` for ``down_s``, comes back up,
    goes down again a ``period_s`` after it last went down, and so on until ``until_s``, from
    which it stays up (a down phase that ``until_s`` cuts short ends there); ``both``: the
    cable's two directions.

    While down the link carries nothing: the flows crossing it wait, keeping their route and
    the bytes they moved, and go on at their share when it is back (capacity events of factor
    0, then 1: :class:`~simulator.model.machine.CapacityEvent`). Nothing is re-routed: a flap
    is shorter than a fabric takes to route around a link (:class:`LinkDown` is a link that
    fails for good). ``at_s`` below 0 is a flapping that began before the collective (as a
    training bucket that starts during it sees it): the phases before 0 are over.

    >>> flap = LinkFlapping(("gpu0", "switch"), 5e-6, 28e-6, 10e-6, 2e-6)
    >>> [(round(down * 1e6, 9), round(up * 1e6, 9)) for down, up in flap.phases()]
    [(5.0, 7.0), (15.0, 17.0), (25.0, 27.0)]
    """

    link: Link
    at_s: float
    until_s: float
    period_s: float
    down_s: float
    both: bool = False

    kind: ClassVar[str] = "link_flapping"
    required: ClassVar[tuple[str, ...]] = ("link", "period", "down", "until")
    optional: ClassVar[tuple[str, ...]] = ("at", "both")

    def __post_init__(self) -> None:
        times = (self.at_s, self.until_s, self.period_s, self.down_s)
        if not all(math.isfinite(time) for time in times):
            raise ValueError(f"expected finite times, got {quoted(times)}")
        if not 0 < self.down_s < self.period_s:
            raise ValueError(f"expected a time down above 0 and below the period "
                             f"({quoted(self.period_s)} s), got {quoted(self.down_s)}")
        if not self.until_s > self.at_s:
            raise ValueError(f"expected 'until' after 'at' ({quoted(self.at_s)} s), got "
                             f"{quoted(self.until_s)}")
        count = periods(self.at_s, self.until_s, self.period_s)
        if count > MAX_FLAPS:
            raise ValueError(f"expected at most {MAX_FLAPS:,} periods, got {count:,}")

    @classmethod
    def read(cls, fields: Fields) -> LinkFlapping | None:
        """The entry's link, period, down, ``at`` (default 0), until and ``both``."""
        link = fields.get("link", link_ends)
        period = fields.get("period", positive_time)
        down = fields.get("down", positive_time)
        at = fields.get("at", time_value, "0us")
        until = fields.get("until", time_value)
        both = fields.get("both", flag, False)
        if period is None or down is None or at is None or until is None:
            return None
        problems = len(_problems(fields, at, until, period, down))
        if link is None or both is None or problems:
            return None
        return cls(link, at, until, period, down, both)

    @property
    def links(self) -> tuple[Link, ...]:
        """The directed links that flap."""
        return directed(self.link, self.both)

    def phases(self) -> tuple[tuple[float, float], ...]:
        """Each down phase that reaches past 0, as (down, up): from ``at_s + k·period_s`` (at
        least 0) to ``down_s`` later or ``until_s``, whichever is earlier."""
        found = []
        for k in range(periods(self.at_s, self.until_s, self.period_s)):
            down = self.at_s + k * self.period_s
            up = min(down + self.down_s, self.until_s)
            if up > max(down, 0.0):  # (a last start that rounds onto until is no phase)
                found.append((max(down, 0.0), up))
        return tuple(found)

    def events(self) -> tuple[CapacityEvent, ...]:
        """Its capacity events: each phase's stop (factor 0) and its return (factor 1)."""
        return tuple(CapacityEvent(link, at, factor) for down, up in self.phases()
                     for at, factor in ((down, 0.0), (up, 1.0)) for link in self.links)

    def problem(self, machine: Machine, execution: Execution) -> Problem | None:
        """A link end or direction the topology lacks."""
        return link_problem(machine, self.link, self.links)

    def seen_by(self, start_s: float, ready_s: float) -> LinkFlapping | None:
        """Flapping as it does, its times counted from ``start_s`` (a phase under way goes
        on); gone if it had stopped before the bucket started."""
        if self.until_s <= start_s:
            return None
        return replace(self, at_s=self.at_s - start_s, until_s=self.until_s - start_s)

    def applied(self, machine: Machine) -> Machine:
        """Its capacity events added to the machine's timeline."""
        return replace(machine, capacity_events=machine.capacity_events + self.events())

    def label(self) -> str:
        """``link_flapping gpu0->switch down 2us every 10us at 5us until 40us``."""
        return (f"link_flapping {self.link[0]}{arrow(self.both)}{self.link[1]} down "
                f"{said(self.down_s)} every {said(self.period_s)} at {said(self.at_s)} until "
                f"{said(self.until_s)}")

    def acted(self, run_s: float) -> bool:
        """Whether it went down before the run ended."""
        phases = self.phases()
        return bool(phases) and phases[0][0] < run_s

    def settings(self) -> dict[str, object]:
        """As a scenario's ``faults:`` entry."""
        return {"kind": self.kind, "link": list(self.link), "period": format_time(self.period_s),
                "down": format_time(self.down_s), "at": format_time(self.at_s),
                "until": format_time(self.until_s), "both": self.both}


def _problems(fields: Fields, at: float, until: float, period: float,
              down: float) -> list[Problem]:
    """What is wrong between an entry's times (each recorded): a time down not below the
    period, an ``until`` not after ``at``, more periods than :data:`MAX_FLAPS`."""
    found: list[Problem] = []
    if down >= period:
        found.append(("down", f"expected a time below the period ({fields.raw('period')}), "
                              f"got {quoted(fields.raw('down'))}"))
    if until <= at:
        found.append(("until", f"expected a time after 'at', got {quoted(fields.raw('until'))}"))
    elif (count := periods(at, until, period)) > MAX_FLAPS:
        found.append(("period", f"expected at most {MAX_FLAPS:,} periods from 'at' to 'until' "
                                f"(simulator/limits.py), got {count:,}; use a longer period "
                                "or an earlier until"))
    for key, message in found:
        fields.problem(key, message)
    return found
