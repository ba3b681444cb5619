"""A NIC that fails (:class:`NicDown`): every link into and out of it, so the traffic of its rail
leaves through another NIC, over NVLink first where the host has it, as NCCL's PXN does."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar

from simulator.errors import quoted
from simulator.model.faults.entry import node_name, time_value
from simulator.model.faults.kind import (
    Fault,
    Fields,
    Problem,
    check_time,
    in_flight_caveat,
    node_problem,
    said,
)
from simulator.model.machine import Machine, Outage
from simulator.units import format_time

if TYPE_CHECKING:
    from simulator.model.execution import Execution


@dataclass(frozen=True)
class NicDown(Fault):
    """NIC ``nic`` (a node name) fails at ``at_s`` for the rest of the run: every link into
    and out of it."""

    nic: str
    at_s: float

    kind: ClassVar[str] = "nic_down"
    required: ClassVar[tuple[str, ...]] = ("nic",)
    optional: ClassVar[tuple[str, ...]] = ("at",)

    def __post_init__(self) -> None:
        check_time(self.at_s)

    @classmethod
    def read(cls, fields: Fields) -> NicDown | None:
        """The entry's NIC and ``at`` (default 0)."""
        nic, at = fields.get("nic", node_name), fields.get("at", time_value, "0us")
        return None if nic is None or at is None else cls(nic, at)

    def problem(self, machine: Machine, execution: Execution) -> Problem | None:
        """A name the topology lacks, or a node that is not a NIC (with the nearest NIC)."""
        problem = node_problem(machine, self.nic)
        if problem is not None:
            return "nic", problem
        kind = machine.routing.node_kind(self.nic)
        if kind != "nic":
            nics = [name for name in machine.routing.node_names()
                    if machine.routing.node_kind(name) == "nic"]
            close = difflib.get_close_matches(self.nic, nics, n=1)
            hint = (f"; did you mean {quoted(close[0])}?" if close
                    else "; this topology has none" if not nics else "")
            return "nic", f"expected a NIC, got {quoted(self.nic)}, a {kind or 'node'}{hint}"
        return None

    def seen_by(self, start_s: float, ready_s: float) -> NicDown:
        """Failing ``at - start_s`` in (at once if it already had)."""
        return replace(self, at_s=max(self.at_s - start_s, 0.0))

    def applied(self, machine: Machine) -> Machine:
        """An outage of each link into and out of the NIC added to the machine's."""
        return replace(machine, outages=machine.outages + tuple(
            Outage(link, self.at_s) for link in machine.routing.capacities() if self.nic in link))

    def label(self) -> str:
        """``nic_down n1.nic2 at 20us``."""
        return f"nic_down {self.nic} at {said(self.at_s)}"

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
        return {"kind": self.kind, "nic": self.nic, "at": format_time(self.at_s)}
