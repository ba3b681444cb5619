"""Faults: what goes wrong during a collective, as data that both engines apply the same way.

A scenario's ``faults:`` list (docs/scenarios.md#faults) becomes these records, and
:func:`with_faults` folds them into the :class:`~simulator.model.machine.Machine` a point runs on:

- :class:`LinkDegraded`: from ``at_s`` a directed link (or both directions of a cable) carries
  ``factor`` times its bandwidth, until ``until_s`` if given: capacity events on the machine's
  timeline (:class:`~simulator.model.machine.CapacityEvent`), which both engines apply at their
  instants and re-share the flows that cross the link (as SimGrid's
  ``Link::set_bandwidth_profile`` does);
- :class:`LinkDown`: from ``at_s`` a directed link (or both directions of a cable) carries
  nothing: the flows crossing it move to the remaining least routes (ECMP where the fabric has
  it) with the bytes they have left, and later messages avoid it
  (:class:`~simulator.model.machine.Outage`);
- :class:`NicDown`: from ``at_s`` every link into and out of a NIC is down, so the traffic of
  its rail leaves through another NIC, over NVLink first where the host has it, as NCCL's PXN
  does;
- :class:`Straggler`: a rank enters the collective ``delay_s`` late: it posts nothing and
  takes no message before then (``Machine.entry_s``);
- :class:`SlowGpu`: a rank's GPU reduces at ``factor`` times its reduction bandwidth
  (``Machine.gpus``), its launch latency unchanged.

The closed forms stay those of the healthy machine: a fault is what the simulation adds.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum

from simulator.model.execution import Execution
from simulator.model.machine import CapacityEvent, Machine, Outage
from simulator.units import format_time


class FaultKind(Enum):
    """The faults a scenario may list (its ``kind``)."""

    LINK_DEGRADED = "link_degraded"
    LINK_DOWN = "link_down"
    NIC_DOWN = "nic_down"
    STRAGGLER = "straggler"
    SLOW_GPU = "slow_gpu"


@dataclass(frozen=True)
class LinkDegraded:
    """Link ``link`` (from node, to node) at ``factor`` times its bandwidth from ``at_s``, back to
    its bandwidth at ``until_s`` (None: for the rest of the run); ``both``: the cable's two
    directions."""

    link: tuple[str, str]
    at_s: float
    factor: float
    both: bool = False
    until_s: float | None = None

    kind = FaultKind.LINK_DEGRADED

    def __post_init__(self) -> None:
        if not (math.isfinite(self.factor) and self.factor > 0):
            raise ValueError(f"expected a factor above 0, got {self.factor!r}")
        if not (math.isfinite(self.at_s) and self.at_s >= 0):
            raise ValueError(f"expected a time at least 0, got {self.at_s!r}")
        if self.until_s is not None and not self.until_s > self.at_s:
            raise ValueError(f"expected 'until' after 'at' ({self.at_s!r} s), got "
                             f"{self.until_s!r}")

    @property
    def links(self) -> tuple[tuple[str, str], ...]:
        """The directed links it degrades."""
        a, b = self.link
        return ((a, b), (b, a)) if self.both else ((a, b),)

    def events(self) -> tuple[CapacityEvent, ...]:
        """Its capacity events: the drop, and the recovery where it has one."""
        drops = tuple(CapacityEvent(link, self.at_s, self.factor) for link in self.links)
        if self.until_s is None:
            return drops
        return drops + tuple(CapacityEvent(link, self.until_s, 1.0) for link in self.links)

    def label(self) -> str:
        arrow = "<->" if self.both else "->"
        until = "" if self.until_s is None else f" until {said(self.until_s)}"
        return (f"link_degraded {self.link[0]}{arrow}{self.link[1]} x{self.factor:g} "
                f"at {said(self.at_s)}{until}")

    def acted(self, run_s: float) -> bool:
        """Whether it struck before a run of ``run_s`` (from the first byte) ended."""
        return self.at_s < run_s

    def settings(self) -> dict[str, object]:
        """As a scenario's ``faults:`` entry."""
        entry: dict[str, object] = {"kind": self.kind.value, "link": list(self.link),
                                    "at": format_time(self.at_s), "factor": self.factor,
                                    "both": self.both}
        if self.until_s is not None:
            entry["until"] = format_time(self.until_s)
        return entry


def said(time_s: float) -> str:
    """A time as a fault's label says it: as a scenario writes it where that is short
    (``50us``), else in microseconds to the nanosecond (a training bucket's shifted times).

    >>> said(5e-05), said(0.0008721296167396651)
    ('50us', '872.130us')
    """
    text = format_time(time_s)
    return text if len(text) <= 8 else f"{time_s * 1e6:.3f}us"


def _check_time(at_s: float) -> None:
    if not (math.isfinite(at_s) and at_s >= 0):
        raise ValueError(f"expected a time at least 0, got {at_s!r}")


@dataclass(frozen=True)
class LinkDown:
    """Link ``link`` (from node, to node) fails at ``at_s`` for the rest of the run; ``both``:
    the cable's two directions."""

    link: tuple[str, str]
    at_s: float
    both: bool = False

    kind = FaultKind.LINK_DOWN

    def __post_init__(self) -> None:
        _check_time(self.at_s)

    @property
    def links(self) -> tuple[tuple[str, str], ...]:
        """The directed links it fails."""
        a, b = self.link
        return ((a, b), (b, a)) if self.both else ((a, b),)

    def label(self) -> str:
        arrow = "<->" if self.both else "->"
        return f"link_down {self.link[0]}{arrow}{self.link[1]} at {said(self.at_s)}"

    def acted(self, run_s: float) -> bool:
        """Whether it struck before a run of ``run_s`` (from the first byte) ended."""
        return self.at_s < run_s

    def settings(self) -> dict[str, object]:
        """As a scenario's ``faults:`` entry."""
        return {"kind": self.kind.value, "link": list(self.link), "at": format_time(self.at_s),
                "both": self.both}


@dataclass(frozen=True)
class NicDown:
    """NIC ``nic`` (a node name) fails at ``at_s`` for the rest of the run: every link into
    and out of it."""

    nic: str
    at_s: float

    kind = FaultKind.NIC_DOWN

    def __post_init__(self) -> None:
        _check_time(self.at_s)

    def label(self) -> str:
        return f"nic_down {self.nic} at {said(self.at_s)}"

    def acted(self, run_s: float) -> bool:
        """Whether it struck before a run of ``run_s`` (from the first byte) ended."""
        return self.at_s < run_s

    def settings(self) -> dict[str, object]:
        """As a scenario's ``faults:`` entry."""
        return {"kind": self.kind.value, "nic": self.nic, "at": format_time(self.at_s)}


def _check_rank(rank: int) -> None:
    if rank < 0:
        raise ValueError(f"expected a rank at least 0, got {rank!r}")


@dataclass(frozen=True)
class Straggler:
    """Rank ``rank`` enters the collective ``delay_s`` after the others."""

    rank: int
    delay_s: float

    kind = FaultKind.STRAGGLER

    def __post_init__(self) -> None:
        _check_rank(self.rank)
        if not (math.isfinite(self.delay_s) and self.delay_s >= 0):
            raise ValueError(f"expected a delay at least 0, got {self.delay_s!r}")

    def label(self) -> str:
        return f"straggler rank {self.rank} +{said(self.delay_s)}"

    def acted(self, run_s: float) -> bool:
        """Whether it made its rank late at all."""
        return self.delay_s > 0

    def settings(self) -> dict[str, object]:
        """As a scenario's ``faults:`` entry."""
        return {"kind": self.kind.value, "rank": self.rank, "delay": format_time(self.delay_s)}


@dataclass(frozen=True)
class SlowGpu:
    """Rank ``rank``'s GPU reduces at ``factor`` times its reduction bandwidth."""

    rank: int
    factor: float

    kind = FaultKind.SLOW_GPU

    def __post_init__(self) -> None:
        if self.rank < 0:
            raise ValueError(f"expected a rank at least 0, got {self.rank!r}")
        if not (math.isfinite(self.factor) and self.factor > 0):
            raise ValueError(f"expected a factor above 0, got {self.factor!r}")

    def label(self) -> str:
        return f"slow_gpu rank {self.rank} x{self.factor:g}"

    def acted(self, run_s: float) -> bool:
        """Always: its rank reduces at its rate from the start."""
        return True

    def settings(self) -> dict[str, object]:
        """As a scenario's ``faults:`` entry."""
        return {"kind": self.kind.value, "rank": self.rank, "factor": self.factor}


Fault = LinkDegraded | LinkDown | NicDown | Straggler | SlowGpu
"""One fault of a scenario."""


def _node_problem(machine: Machine, node: str) -> str | None:
    """What is wrong with a node name ``node`` on ``machine`` (with the nearest name), or None."""
    if machine.routing.has_node(node):
        return None
    close = difflib.get_close_matches(node, machine.routing.node_names(), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"no node {node!r} in the topology (the names `topo` prints){hint}"


def fault_problem(fault: Fault, machine: Machine, execution: Execution) -> tuple[str, str] | None:
    """(the field within the fault, what is wrong) where ``fault`` names something
    ``machine`` does not have, with the nearest names, or cannot act under ``execution``; None
    where it applies."""
    if isinstance(fault, LinkDegraded | LinkDown):
        links = machine.routing.capacities()
        for end in fault.link:
            problem = _node_problem(machine, end)
            if problem is not None:
                return "link", problem
        for a, b in fault.links:
            if (a, b) not in links:
                return "link", f"no link from {a!r} to {b!r} in the topology"
        return None
    if isinstance(fault, NicDown):
        problem = _node_problem(machine, fault.nic)
        if problem is not None:
            return "nic", problem
        kind = machine.routing.node_kind(fault.nic)
        if kind != "nic":
            nics = [name for name in machine.routing.node_names()
                    if machine.routing.node_kind(name) == "nic"]
            close = difflib.get_close_matches(fault.nic, nics, n=1)
            hint = (f"; did you mean {close[0]!r}?" if close
                    else "; this topology has none" if not nics else "")
            return "nic", f"expected a NIC, got {fault.nic!r}, a {kind or 'node'}{hint}"
        return None
    if isinstance(fault, SlowGpu) and execution is Execution.NCCL:
        return "kind", ("expected no slow_gpu under execution: nccl, where a GPU's reductions "
                        "cost nothing apart from NCCL's copies (run it with execution: ideal and "
                        "a gpu reduce_bandwidth)")
    if fault.rank >= machine.ranks:
        return "rank", f"expected a rank from 0 to {machine.ranks - 1}, got {fault.rank}"
    if isinstance(fault, SlowGpu) and machine.gpu_of(fault.rank).reduce_bandwidth_Bps is None:
        return "rank", (f"rank {fault.rank}'s GPU reduces for free here (no gpu "
                        "reduce_bandwidth): a slow GPU would change nothing")
    return None


def seen_by_bucket(faults: Sequence[Fault], start_s: float, ready_s: float) -> tuple[Fault, ...]:
    """``faults``, timed from a training step's backward pass, as the allreduce of a bucket
    that starts at ``start_s`` and whose gradients were ready at ``ready_s`` (both from the
    backward pass's start) sees them, its times counted from its own start: a link fault at
    ``at`` strikes ``at - start_s`` in (at once if it already had), a degradation that
    recovered before the bucket started is gone; a straggler, whose backward pass runs
    ``delay`` late, enters the allreduce ``ready_s + delay - start_s`` late (not at all if the
    stream was still busy that long); a slow GPU is slow in every bucket.

    >>> seen_by_bucket([LinkDown(("a", "b"), 3e-3), Straggler(1, 1e-3)], 2e-3, 1.5e-3)
    (LinkDown(link=('a', 'b'), at_s=0.001, both=False), Straggler(rank=1, delay_s=0.0005))
    """
    seen: list[Fault] = []
    for fault in faults:
        if isinstance(fault, LinkDegraded):
            if fault.until_s is not None and fault.until_s <= start_s:
                continue
            until = None if fault.until_s is None else fault.until_s - start_s
            seen.append(replace(fault, at_s=max(fault.at_s - start_s, 0.0), until_s=until))
        elif isinstance(fault, LinkDown | NicDown):
            seen.append(replace(fault, at_s=max(fault.at_s - start_s, 0.0)))
        elif isinstance(fault, Straggler):
            late = fault.delay_s + (ready_s - start_s)
            if late > 0:
                seen.append(replace(fault, delay_s=late))
        else:
            seen.append(fault)
    return tuple(seen)


def with_faults(machine: Machine, faults: Sequence[Fault]) -> Machine:
    """``machine`` with ``faults`` applied: capacity events and outages added, late ranks'
    entry times and slow GPUs set (every fault checked by :func:`fault_problem` first)."""
    if not faults:
        return machine
    events = list(machine.capacity_events)
    outages = list(machine.outages)
    entry = list(machine.entry_s or (0.0,) * machine.ranks)
    gpus = list(machine.gpus or (machine.gpu,) * machine.ranks)
    for fault in faults:
        if isinstance(fault, LinkDegraded):
            events.extend(fault.events())
        elif isinstance(fault, LinkDown):
            outages.extend(Outage(link, fault.at_s) for link in fault.links)
        elif isinstance(fault, NicDown):
            outages.extend(Outage(link, fault.at_s) for link in machine.routing.capacities()
                           if fault.nic in link)
        elif isinstance(fault, Straggler):
            entry[fault.rank] = max(entry[fault.rank], fault.delay_s)
        else:
            gpu = gpus[fault.rank]
            assert gpu.reduce_bandwidth_Bps is not None
            gpus[fault.rank] = replace(gpu, reduce_bandwidth_Bps=gpu.reduce_bandwidth_Bps
                                       * fault.factor)
    return replace(machine, capacity_events=tuple(events), outages=tuple(outages),
                   entry_s=tuple(entry) if any(entry) else (),
                   gpus=tuple(gpus) if any(g != machine.gpu for g in gpus) else ())
