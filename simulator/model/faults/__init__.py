"""Faults: what goes wrong during a collective, as values that both engines apply the same way.

A scenario's ``faults:`` list (docs/scenarios.md#faults) becomes these values, one class a kind
(:class:`~simulator.model.faults.kind.Fault`: each reads its own entry, says why it cannot apply,
what a training bucket sees of it and the machine with it applied), and :func:`with_faults` folds
them into the :class:`~simulator.model.machine.Machine` a point runs on:

- :class:`LinkDegraded`: from ``at_s`` a directed link (or both directions of a cable) carries
  ``factor`` times its bandwidth, until ``until_s`` if given: capacity events on the machine's
  timeline (:class:`~simulator.model.machine.CapacityEvent`), which both engines apply at their
  instants and re-share the flows that cross the link;
- :class:`LinkDown`: from ``at_s`` a link carries nothing: the flows crossing it move to the
  remaining least routes with the bytes they have left, and later messages avoid it
  (:class:`~simulator.model.machine.Outage`);
- :class:`LinkFlapping`: from ``at_s`` a link goes down for ``down_s`` every ``period_s``,
  until ``until_s``: while down it carries nothing and the flows crossing it wait (capacity
  events of factor 0, then 1);
- :class:`NicDown`: from ``at_s`` every link into and out of a NIC is down;
- :class:`Straggler`: a rank enters the collective ``delay_s`` late (``Machine.entry_s``);
- :class:`SlowGpu`: a rank's GPU reduces at ``factor`` times its reduction bandwidth
  (``Machine.gpus``).

A new kind is one class (a frozen dataclass subclassing
:class:`~simulator.model.faults.kind.Fault`, in a module of this package) and one line of
:data:`KINDS`: the scenario reader, the checks, the training step and both engines take it from
there. The closed forms stay those of the healthy machine: a fault is what the simulation adds.

Part of the model layer (docs/design.md §1). May import: :mod:`simulator.model`,
:mod:`simulator.units`, :mod:`simulator.limits`, :mod:`simulator.errors`,
:mod:`simulator.inputs`, :mod:`simulator.xmlsafe` (the model layer's row). Never SimPy, the
engine or scenario files: a kind reads its entry through
:class:`~simulator.model.faults.kind.Fields`, which the scenario layer gives it.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.model.execution import Execution
from simulator.model.faults.flapping import LinkFlapping
from simulator.model.faults.kind import Fault, Fields, Problem, said
from simulator.model.faults.link import LinkDegraded, LinkDown
from simulator.model.faults.nic import NicDown
from simulator.model.faults.rank import SlowGpu, Straggler
from simulator.model.machine import Machine

__all__ = ["KINDS", "Fault", "Fields", "LinkDegraded", "LinkDown", "LinkFlapping", "NicDown",
           "SlowGpu", "Straggler", "caveats", "fault_problem", "said", "seen_by_bucket",
           "with_faults"]

KINDS: dict[str, type[Fault]] = {kind.kind: kind for kind in (
    LinkDegraded,
    LinkDown,
    LinkFlapping,
    NicDown,
    Straggler,
    SlowGpu,
)}
"""Every fault kind by its name in a scenario (``kind: link_down``), in the order messages list
them."""


def fault_problem(fault: Fault, machine: Machine, execution: Execution) -> Problem | None:
    """(the field within the fault, what is wrong) where ``fault`` cannot apply to ``machine``
    under ``execution`` (:meth:`Fault.problem <simulator.model.faults.kind.Fault.problem>`);
    None where it applies."""
    return fault.problem(machine, execution)


def caveats(faults: Sequence[Fault]) -> tuple[str, ...]:
    """The line each of ``faults`` says where its modelled outcome is not NCCL's
    (:meth:`~simulator.model.faults.kind.Fault.caveat`), in their order: what a run says
    beside its results, even if quiet."""
    return tuple(caveat for fault in faults if (caveat := fault.caveat()) is not None)


def seen_by_bucket(faults: Sequence[Fault], start_s: float, ready_s: float) -> tuple[Fault, ...]:
    """``faults``, timed from a training step's backward pass, as the allreduce of a bucket
    that starts at ``start_s`` and whose gradients were ready at ``ready_s`` (both from the
    backward pass's start) sees them, its times counted from its own start (each kind's
    :meth:`~simulator.model.faults.kind.Fault.seen_by`): a link fault at ``at`` strikes
    ``at - start_s`` in (at once if it already had), a degradation that recovered before the
    bucket started is gone; a straggler, whose backward pass runs ``delay`` late, enters the
    allreduce ``ready_s + delay - start_s`` late (not at all if the stream was still busy that
    long); a slow GPU is slow in every bucket.

    >>> seen_by_bucket([LinkDown(("a", "b"), 3e-3), Straggler(1, 1e-3)], 2e-3, 1.5e-3)
    (LinkDown(link=('a', 'b'), at_s=0.001, both=False), Straggler(rank=1, delay_s=0.0005))
    """
    seen = (fault.seen_by(start_s, ready_s) for fault in faults)
    return tuple(fault for fault in seen if fault is not None)


def with_faults(machine: Machine, faults: Sequence[Fault]) -> Machine:
    """``machine`` with ``faults`` applied in their order (each checked by
    :func:`fault_problem` first): capacity events and outages added, late ranks' entry times
    and slow GPUs set."""
    for fault in faults:
        machine = fault.applied(machine)
    return machine
