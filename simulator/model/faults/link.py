"""Faults of a link: :class:`LinkDegraded` (a share of its bandwidth for a while, as capacity
events) and :class:`LinkDown` (failed for good, an outage its flows are re-routed around), a
directed link or both directions of a cable."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from simulator.errors import quoted
from simulator.model.faults.entry import flag, fraction, link_ends, time_value
from simulator.model.faults.kind import (
    Fault,
    Fields,
    Problem,
    check_factor,
    check_time,
    in_flight_caveat,
    node_problem,
    said,
)
from simulator.model.machine import CapacityEvent, Machine, Outage
from simulator.units import format_time

if TYPE_CHECKING:
    from simulator.model.execution import Execution

Link = tuple[str, str]
"""A directed link: (from node, to node)."""


def directed(link: Link, both: bool) -> tuple[Link, ...]:
    """The directed links of ``link``: itself, and with ``both`` the other direction too."""
    a, b = link
    return ((a, b), (b, a)) if both else ((a, b),)


def arrow(both: bool) -> str:
    """How a label joins a link's ends: ``<->`` for both directions, ``->`` for one."""
    return "<->" if both else "->"


def link_problem(machine: Machine, link: Link, links: tuple[Link, ...]) -> Problem | None:
    """What is wrong with a fault on ``link`` (its directed ``links``) on ``machine``: an end
    the topology lacks (with the nearest name) or a direction without a link; None if none."""
    capacities = machine.routing.capacities()
    for end in link:
        problem = node_problem(machine, end)
        if problem is not None:
            return "link", problem
    for a, b in links:
        if (a, b) not in capacities:
            return "link", f"no link from {quoted(a)} to {quoted(b)} in the topology"
    return None


@dataclass(frozen=True)
class LinkDegraded(Fault):
    """Link ``link`` (from node, to node) at ``factor`` times its bandwidth from ``at_s``, back to
    its bandwidth at ``until_s`` (None: for the rest of the run); ``both``: the cable's two
    directions. Capacity events on the machine's timeline, which both engines apply at their
    instants, re-sharing the flows that cross the link (as SimGrid's
    ``Link::set_bandwidth_profile`` does)."""

    link: Link
    at_s: float
    factor: float
    both: bool = False
    until_s: float | None = None

    kind: ClassVar[str] = "link_degraded"
    required: ClassVar[tuple[str, ...]] = ("link", "factor")
    optional: ClassVar[tuple[str, ...]] = ("at", "until", "both")

    def __post_init__(self) -> None:
        check_factor(self.factor)
        check_time(self.at_s)
        if self.until_s is not None and not self.until_s > self.at_s:
            raise ValueError(f"expected 'until' after 'at' ({quoted(self.at_s)} s), got "
                             f"{quoted(self.until_s)}")

    @classmethod
    def read(cls, fields: Fields) -> LinkDegraded | None:
        """The entry's link, factor, ``at`` (default 0), ``until`` and ``both``."""
        link = fields.get("link", link_ends)
        factor = fields.get("factor", fraction)
        at = fields.get("at", time_value, "0us")
        until = fields.get("until", time_value) if fields.given("until") else None
        both = fields.get("both", flag, False)
        if until is not None and at is not None and until <= at:
            fields.problem("until", f"expected a time after 'at', got {quoted(fields.raw('until'))}")
            return None
        if link is None or factor is None or at is None or both is None:
            return None
        return cls(link, at, factor, both, until)

    @property
    def links(self) -> tuple[Link, ...]:
        """The directed links it degrades."""
        return directed(self.link, self.both)

    def problem(self, machine: Machine, execution: Execution) -> Problem | None:
        """A link end or direction the topology lacks."""
        return link_problem(machine, self.link, self.links)

    def seen_by(self, start_s: float, ready_s: float) -> LinkDegraded | None:
        """Striking ``at - start_s`` in (at once if it already had); gone if it recovered
        before the bucket started."""
        if self.until_s is not None and self.until_s <= start_s:
            return None
        until = None if self.until_s is None else self.until_s - start_s
        return replace(self, at_s=max(self.at_s - start_s, 0.0), until_s=until)

    def events(self) -> tuple[CapacityEvent, ...]:
        """Its capacity events: the drop, and the recovery where it has one."""
        drops = tuple(CapacityEvent(link, self.at_s, self.factor) for link in self.links)
        if self.until_s is None:
            return drops
        return drops + tuple(CapacityEvent(link, self.until_s, 1.0) for link in self.links)

    def applied(self, machine: Machine) -> Machine:
        """Its capacity events added to the machine's timeline."""
        return replace(machine, capacity_events=machine.capacity_events + self.events())

    def label(self) -> str:
        """``link_degraded gpu1<->switch x0.5 at 2us until 9us``."""
        until = "" if self.until_s is None else f" until {said(self.until_s)}"
        return (f"link_degraded {self.link[0]}{arrow(self.both)}{self.link[1]} "
                f"x{self.factor:g} at {said(self.at_s)}{until}")

    def acted(self, run_s: float) -> bool:
        """Whether it struck before the run ended."""
        return self.at_s < run_s

    def settings(self) -> dict[str, object]:
        """As a scenario's ``faults:`` entry."""
        entry: dict[str, object] = {"kind": self.kind, "link": list(self.link),
                                    "at": format_time(self.at_s), "factor": self.factor,
                                    "both": self.both}
        if self.until_s is not None:
            entry["until"] = format_time(self.until_s)
        return entry


@dataclass(frozen=True)
class LinkDown(Fault):
    """Link ``link`` (from node, to node) fails at ``at_s`` for the rest of the run; ``both``:
    the cable's two directions. The flows crossing it move to the remaining least routes (ECMP
    where the fabric has it) with the bytes they have left, and later messages avoid it (an
    :class:`~simulator.model.machine.Outage`)."""

    link: Link
    at_s: float
    both: bool = False

    kind: ClassVar[str] = "link_down"
    required: ClassVar[tuple[str, ...]] = ("link",)
    optional: ClassVar[tuple[str, ...]] = ("at", "both")

    def __post_init__(self) -> None:
        check_time(self.at_s)

    @classmethod
    def read(cls, fields: Fields) -> LinkDown | None:
        """The entry's link, ``at`` (default 0) and ``both``."""
        link = fields.get("link", link_ends)
        at = fields.get("at", time_value, "0us")
        both = fields.get("both", flag, False)
        return None if link is None or at is None or both is None else cls(link, at, both)

    @property
    def links(self) -> tuple[Link, ...]:
        """The directed links it fails."""
        return directed(self.link, self.both)

    def problem(self, machine: Machine, execution: Execution) -> Problem | None:
        """A link end or direction the topology lacks."""
        return link_problem(machine, self.link, self.links)

    def seen_by(self, start_s: float, ready_s: float) -> LinkDown:
        """Failing ``at - start_s`` in (at once if it already had)."""
        return replace(self, at_s=max(self.at_s - start_s, 0.0))

    def applied(self, machine: Machine) -> Machine:
        """Its outages added to the machine's."""
        return replace(machine, outages=machine.outages + tuple(
            Outage(link, self.at_s) for link in self.links))

    def label(self) -> str:
        """``link_down pod0.edge0<->pod0.agg0 at 5us``."""
        return (f"link_down {self.link[0]}{arrow(self.both)}{self.link[1]} "
                f"at {said(self.at_s)}")

    def caveat(self) -> str | None:
        """Struck after the first byte: NCCL would abort where this re-routes
        (:func:`~simulator.model.faults.kind.in_flight_caveat`); failed from the start, NCCL's
        set-up too would find the routes that remain."""
        return in_flight_caveat(self.label()) if self.at_s > 0 else None

    def acted(self, run_s: float) -> bool:
        """Whether it struck before the run ended."""
        return self.at_s < run_s

    def settings(self) -> dict[str, object]:
        """As a scenario's ``faults:`` entry."""
        return {"kind": self.kind, "link": list(self.link), "at": format_time(self.at_s),
                "both": self.both}
