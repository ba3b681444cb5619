"""A scenario's ``faults:`` list in, :mod:`simulator.model.faults` values out, every problem
reported as ``file: faults[i].field: what was expected`` (docs/scenarios.md#faults).

Which kinds exist and what each reads are the kinds' own (:data:`~simulator.model.faults.KINDS`,
:meth:`Fault.read <simulator.model.faults.kind.Fault.read>`); this module checks an entry's
kind and keys and gives the kind its fields. What can be checked without the topology is checked
here (kinds, keys, times, factors, rank numbers against the topology's rank count); node names
need the built graph and are checked when the machine is (:func:`simulator.plan.prepare`, with
the nearest names)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

from simulator.errors import quoted
from simulator.model.faults import KINDS, Fault
from simulator.scenario.fields import FieldReader

T = TypeVar("T")


def read_faults(reader: FieldReader, value: object, ranks: int | None) -> tuple[Fault, ...]:
    """The faults of a ``faults:`` list (``ranks``: the topology's rank count, None where the
    topology is itself invalid); problems are recorded in ``reader``."""
    if not isinstance(value, list):
        reader.problem("faults", f"expected a list of faults, each a mapping with a kind, got "
                                 f"{quoted(value)}")
        return ()
    faults = []
    for i, item in enumerate(value):
        fault = _fault(reader, f"faults[{i}]", item, ranks)
        if fault is not None:
            faults.append(fault)
    return tuple(faults)


def _fault(reader: FieldReader, where: str, item: object, ranks: int | None) -> Fault | None:
    """One entry: its kind, its keys, then what its kind reads of it."""
    entry = reader.mapping(where, item)
    if entry is None:
        return None
    name = reader.choice(f"{where}.kind", entry.get("kind"), list(KINDS), "a fault kind")
    if name is None:
        return None
    kind = KINDS[name]
    required = ("kind", *kind.required)
    before = len(reader.problems)
    reader.check_keys(entry, where, (*required, *kind.optional), required=required)
    if len(reader.problems) > before:
        return None
    return kind.read(_Fields(reader, where, entry, ranks))


class _Fields:
    """One fault's entry, as its kind reads it (:class:`~simulator.model.faults.Fields`): each
    problem recorded under ``where.key``."""

    def __init__(self, reader: FieldReader, where: str, entry: Mapping[str, object],
                 ranks: int | None) -> None:
        self.reader, self.where, self.entry, self._ranks = reader, where, entry, ranks

    @property
    def ranks(self) -> int | None:
        """The topology's rank count; None where the topology is itself invalid."""
        return self._ranks

    def get(self, key: str, parser: Callable[[object], T], default: object = None) -> T | None:
        """``parser`` of ``key``'s value (or ``default``), None after recording its problem."""
        return self.reader.parse(f"{self.where}.{key}", self.entry.get(key, default), parser)

    def given(self, key: str) -> bool:
        """Whether the entry has ``key``."""
        return key in self.entry

    def raw(self, key: str) -> object:
        """``key``'s value as written."""
        return self.entry.get(key)

    def problem(self, key: str, message: str) -> None:
        """Record a problem of ``key``."""
        self.reader.problem(f"{self.where}.{key}", message)
