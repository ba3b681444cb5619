"""What every fault kind is: :class:`Fault`, a value that carries its own behaviour, and
:class:`Fields`, the scenario entry it reads itself from.

A kind says how a scenario writes it (its ``kind`` name, its keys, :meth:`Fault.read` and back
:meth:`Fault.settings`), why it cannot apply to a machine (:meth:`Fault.problem`), what the
allreduce of a training bucket sees of it (:meth:`Fault.seen_by`) and the machine with it
applied (:meth:`Fault.applied`: capacity events, outages, late entries, slower GPUs), so the
code that folds faults in never asks which kind it holds (SimGrid's resources apply their own
dated events in the same spirit). A new kind is one such class and one line of
:data:`simulator.model.faults.KINDS`.
"""

from __future__ import annotations

import difflib
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Protocol, Self, TypeVar

from simulator.errors import quoted
from simulator.limits import MIN_FAULT_FACTOR
from simulator.units import format_time

if TYPE_CHECKING:
    from simulator.model.execution import Execution
    from simulator.model.machine import Machine

T = TypeVar("T")

Problem = tuple[str, str]
"""(the field within the fault's entry, what is wrong with it)."""


class Fields(Protocol):
    """A fault's entry in a scenario file as its kind reads it; each problem is recorded under
    the entry's field (``faults[2].until``), so a file's problems are all reported at once
    (the scenario layer gives one: :mod:`simulator.scenario.faults`)."""

    @property
    def ranks(self) -> int | None:
        """The topology's rank count; None where the topology is itself invalid."""

    def get(self, key: str, parser: Callable[[object], T], default: object = None) -> T | None:
        """``parser`` applied to ``key``'s value (``default`` where the entry leaves it out);
        None after recording the UnitError or ValueError it raised."""

    def given(self, key: str) -> bool:
        """Whether the entry has ``key``."""

    def raw(self, key: str) -> object:
        """``key``'s value as written, for a message that quotes it."""

    def problem(self, key: str, message: str) -> None:
        """Record that ``key`` is wrong; ``message`` says what was expected and what came."""


class Fault(ABC):
    """One fault of a scenario (docs/scenarios.md#faults), a frozen dataclass of each kind.

    Times count from the collective's first message (``at_s``, ``until_s``...); a training
    bucket's view of a fault (:meth:`seen_by`) is the same kind with its times counted from the
    bucket's start. The closed forms stay those of the healthy machine: a fault is what the
    simulation adds."""

    kind: ClassVar[str]
    """Its name in a scenario's ``faults:`` list (``kind: link_down``)."""
    required: ClassVar[tuple[str, ...]]
    """The keys its entry must have beside ``kind``, in the order errors list them."""
    optional: ClassVar[tuple[str, ...]] = ()
    """The keys its entry may have."""

    @classmethod
    @abstractmethod
    def read(cls, fields: Fields) -> Self | None:
        """The fault a scenario's entry says (its keys already checked against
        :attr:`required` and :attr:`optional`); None after recording its problems."""

    @abstractmethod
    def problem(self, machine: Machine, execution: Execution) -> Problem | None:
        """Why it cannot apply to ``machine`` under ``execution`` (a node it names that the
        topology lacks, with the nearest names; a rank beyond it; a kind the execution model
        does not time), or None where it applies."""

    def rank_problem(self, ranks: int) -> Problem | None:
        """What a topology of ``ranks`` ranks tells is wrong with it before the graph is built
        (a rank it names beyond them), or None."""
        return None

    @abstractmethod
    def seen_by(self, start_s: float, ready_s: float) -> Fault | None:
        """The fault, timed from a training step's backward pass, as the allreduce of a bucket
        that starts at ``start_s`` and whose gradients were ready at ``ready_s`` (both from the
        backward pass's start) sees it, its times counted from its own start; None where that
        allreduce does not see it at all."""

    @abstractmethod
    def applied(self, machine: Machine) -> Machine:
        """``machine`` with the fault applied (checked by :meth:`problem` first)."""

    @abstractmethod
    def label(self) -> str:
        """How the results' ``faults`` column and the table say it."""

    @abstractmethod
    def acted(self, run_s: float) -> bool:
        """Whether it struck during a run of ``run_s`` (from the first byte)."""

    @abstractmethod
    def settings(self) -> dict[str, object]:
        """As a scenario's ``faults:`` entry (which :meth:`read` reads back to the same
        fault)."""

    def caveat(self) -> str | None:
        """One line where the fault's modelled outcome is not what NCCL does (None where it
        is): said beside the results, so a faulted time is not read as NCCL's."""
        return None


def in_flight_caveat(label: str) -> str:
    """What a link or NIC lost mid-collective does under NCCL, against what the simulation does
    with it: NCCL has no way to move a connection that breaks during a collective onto another
    route. Its IB transport reports the failed work request and the communicator aborts with
    ``ncclRemoteError`` (src/transport/net_ib/p2p.cc:688-712, 858), or the job hangs until its
    timeout; NCCL 2.3x's ``NCCL_IB_RESILIENCY_PORT_FAILOVER`` (off by default;
    src/transport/net_ib/p2p_resiliency.cc) moves a connection only to another port of the
    same fused NIC, never over NVLink to another GPU's NIC."""
    return (f"{label}: NCCL does not re-route a collective in flight (a connection that breaks "
            "makes it abort with ncclRemoteError or hang); this run re-routes, so its faulted "
            "times are what a transport that re-routes would take")


def said(time_s: float) -> str:
    """A time as a fault's label says it: as a scenario writes it where that is short
    (``50us``), else in microseconds to the nanosecond (a training bucket's shifted times);
    below 0 (a flapping that began before a training bucket did) with a minus.

    >>> said(5e-05), said(0.0008721296167396651), said(-2.5e-3)
    ('50us', '872.130us', '-2.5ms')
    """
    if time_s < 0:
        return f"-{said(-time_s)}"
    text = format_time(time_s)
    return text if len(text) <= 8 else f"{time_s * 1e6:.3f}us"


def check_time(at_s: float) -> None:
    """ValueError unless ``at_s`` is a time at least 0."""
    if not (math.isfinite(at_s) and at_s >= 0):
        raise ValueError(f"expected a time at least 0, got {quoted(at_s)}")


def check_factor(factor: float) -> None:
    """ValueError unless ``factor`` is finite and at least :data:`MIN_FAULT_FACTOR`."""
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"expected a factor above 0, got {quoted(factor)}")
    if factor < MIN_FAULT_FACTOR:
        raise ValueError(f"expected a factor of at least {MIN_FAULT_FACTOR:g} (a millionth of "
                         f"the bandwidth; a link that slow is down: link_down), got "
                         f"{quoted(factor)}")


def check_rank(rank: int) -> None:
    """ValueError unless ``rank`` is at least 0."""
    if rank < 0:
        raise ValueError(f"expected a rank at least 0, got {quoted(rank)}")


def node_problem(machine: Machine, node: str) -> str | None:
    """What is wrong with a node name ``node`` on ``machine`` (with the nearest name), or None."""
    if machine.routing.has_node(node):
        return None
    close = difflib.get_close_matches(node, machine.routing.node_names(), n=1)
    hint = f"; did you mean {quoted(close[0])}?" if close else ""
    return f"no node {quoted(node)} in the topology (the names `topo --names` prints){hint}"
