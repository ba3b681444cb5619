"""``NCCL_ALGO`` and ``NCCL_PROTO`` as a scenario sets them (``nccl: {algo: ..., proto: ...}``):
NCCL's list syntax and what a list leaves its tuner to choose from; which NCCL's tuner is
modelled (``nccl: {version: ...}``); whether NVLink SHARP is on (``nccl: {nvls: false}`` as
``NCCL_NVLS_ENABLE=0``); and how many GPUs a thread launches on (``nccl: {gpus_per_thread: N}``).

The syntax is ``parseList``'s (src/graph/tuning.cc, v2.30.7): names separated by commas, matched
without regard to case; a leading ``^`` enables every name but those listed. Entries separated
by semicolons give a collective its own list as ``COLLECTIVE:LIST`` (NCCL's function names:
Broadcast, Reduce, AllGather, ReduceScatter, AllReduce); only the first entry may lack the
prefix, and it then applies to every collective before a later entry replaces its collective's
list. ``NCCL_PROTO="^LL128;allreduce:LL128"`` enables every protocol but LL128, and LL128
alone for allreduce. An empty text changes nothing. Two leniencies: blanks around names are
ignored, and a list that names nothing (``allreduce:``) is an error rather than NCCL's
everything-off.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

from simulator.errors import quoted
from simulator.model.collective import Collective
from simulator.model.nccl import LATEST, Enabled, NcclAlgorithm, Protocol, Version
from simulator.model.nccl_terms import Library
from simulator.model.nccl_view import NcclView

FUNCTIONS: Mapping[Collective, str] = {
    Collective.BROADCAST: "Broadcast", Collective.REDUCE: "Reduce",
    Collective.ALLGATHER: "AllGather", Collective.REDUCE_SCATTER: "ReduceScatter",
    Collective.ALLREDUCE: "AllReduce",
}
"""NCCL's name of each collective (``ncclFuncStr``, src/init.cc), the prefixes of a list."""

E = TypeVar("E", bound=Enum)


def enabled_by(text: str, elements: Sequence[E], collective: Collective, what: str) -> frozenset[E]:
    """The ``elements`` (by their values) that list ``text`` enables for ``collective``;
    ValueError saying what is wrong with it (``what`` names an element: "algorithm")."""
    by_name = {str(element.value).lower(): element for element in elements}
    functions = {name.lower(): name for name in FUNCTIONS.values()}
    enabled = frozenset(elements)
    entries = [entry.strip() for entry in text.split(";") if entry.strip()]
    for i, entry in enumerate(entries):
        prefix, colon, names = entry.partition(":")
        if not colon:
            if i > 0:
                raise ValueError(f"entry {quoted(entry)} has no COLLECTIVE: prefix, which only the "
                                 f"first may lack")
            prefix, names = "", entry
        elif ":" in names:
            raise ValueError(f"entry {quoted(entry)} has more than one ':'")
        prefix = prefix.strip()
        if colon and prefix.lower() not in functions:
            raise ValueError(f"no collective {quoted(prefix)} ({', '.join(FUNCTIONS.values())})"
                             f"{_hint(prefix, functions)}")
        names = names.strip()
        excluded = names.startswith("^")
        listed = [name.strip() for name in names.removeprefix("^").split(",") if name.strip()]
        if not listed and not excluded:
            raise ValueError(f"entry {quoted(entry)} names no {what}")
        chosen = set()
        for name in listed:
            if name.lower() not in by_name:
                raise ValueError(f"no {what} {quoted(name)}{_hint(name, by_name)}")
            chosen.add(by_name[name.lower()])
        if not prefix or prefix.lower() == FUNCTIONS[collective].lower():
            enabled = frozenset(e for e in elements if (e in chosen) != excluded)
    return enabled


def _hint(word: str, names: Mapping[str, object]) -> str:
    """``; did you mean 'NVLSTree'?`` for the near miss among ``names`` (matched in lower case,
    suggested as NCCL spells it), as a scenario's other near misses are; or nothing."""
    close = difflib.get_close_matches(word.lower(), list(names), n=1, cutoff=0.6)
    if not close:
        return ""
    spelt = names[close[0]]
    return f"; did you mean {quoted(str(spelt.value if isinstance(spelt, Enum) else spelt))}?"


NVLS_FAMILIES = frozenset((NcclAlgorithm.NVLS, NcclAlgorithm.NVLS_TREE))
"""The algorithms ``NCCL_NVLS_ENABLE=0`` turns off: both run on NVLink SHARP's multicast objects,
which NCCL then never creates (src/transport/nvls.cc:159-262, v2.30.7)."""

VERSIONS = ", ".join(f"{v.value}" for v in Version)
"""The tuner versions a scenario may name, for its messages."""


def version_of(value: object) -> Version | None:
    """The :class:`~simulator.model.nccl.Version` a scenario's ``nccl.version`` names (a text
    such as "2.26", or the number YAML reads 2.26 as: exactly that number, so 2.2999 names
    none), or None.

    >>> version_of(2.3), version_of("2.30"), version_of(2.2999)
    (<Version.V2_30: '2.30'>, <Version.V2_30: '2.30'>, None)
    """
    if isinstance(value, float):
        return next((v for v in Version if float(v.value) == value), None)
    return next((v for v in Version if v.value == value), None) if isinstance(value, str) else None


@dataclass(frozen=True)
class NcclEnv:
    """The NCCL environment a scenario sets: ``algo`` as ``NCCL_ALGO`` and ``proto`` as
    ``NCCL_PROTO`` (empty: unset), which restrict what NCCL's tuner picks from, and the
    ``version`` whose tuner picks (:class:`~simulator.model.nccl.Version`); whether NVLink SHARP
    is on (``nvls``: False as ``NCCL_NVLS_ENABLE=0``, which leaves NCCL no NVLS or NVLSTree:
    ``ncclNvlsInit`` then leaves ``nvlsSupport`` 0, src/transport/nvls.cc:249-262 at v2.30.7,
    so init.cc:1214 searches no NVLS graph and the tuner has no channels to rate them on);
    whether the
    buffers are registered as symmetric windows (``symmetric``: NCCL then runs its symmetric
    allreduce kernels ahead of the tuner, :mod:`simulator.model.nccl_symmetric`); and NCCL's own
    view of the machine where a graph dump or log is given (``view``, read from ``view_key``:
    ``graph`` or ``log``, the file as the scenario names it, :mod:`simulator.model.nccl_view`);
    how many GPUs one thread launches each collective on (``gpus_per_thread``, nccl-tests'
    ``-g``; issue 38, :mod:`simulator.model.launch`); and the ``library`` the scenario names
    (issue 38: ``rccl`` on AMD Instinct; None: the one the GPUs run,
    :attr:`~simulator.model.machine.Machine.library`)."""

    algo: str = ""
    proto: str = ""
    version: Version = LATEST
    symmetric: bool = False
    nvls: bool = True
    view: NcclView | None = None
    gpus_per_thread: int = 1
    view_key: str = ""
    view_file: str = ""
    library: Library | None = None

    def enabled(self, collective: Collective) -> Enabled:
        """What the two lists (and ``nvls``) leave the tuner for ``collective``; ValueError if
        a list is bad."""
        algorithms = enabled_by(self.algo, tuple(NcclAlgorithm), collective, "algorithm")
        if not self.nvls:
            algorithms -= NVLS_FAMILIES
        return Enabled(algorithms, enabled_by(self.proto, tuple(Protocol), collective, "protocol"))

    def problems(self, collective: Collective) -> list[tuple[str, str]]:
        """Each bad list as (field, what was expected), fields named as in a scenario file
        (``nccl.algo``, ``nccl.proto``): not a text, not NCCL's syntax, or leaving
        ``collective`` nothing."""
        problems = []
        for key, text, elements, what in (("algo", self.algo, tuple(NcclAlgorithm), "algorithm"),
                                          ("proto", self.proto, tuple(Protocol), "protocol")):
            expected = (f"a list as NCCL_{key.upper()} takes it: "
                        f"{', '.join(str(e.value) for e in elements)} separated by commas (a "
                        f"leading ^: all but those; COLLECTIVE:LIST after a ; for one "
                        f"collective)")
            if not isinstance(text, str):
                problems.append((f"nccl.{key}", f"expected {expected}, got {quoted(text)}"))
                continue
            try:
                enabled = enabled_by(text, elements, collective, what)
            except ValueError as error:
                problems.append((f"nccl.{key}", f"expected {expected}, got {quoted(text)}: {error}"))
                continue
            if not enabled:
                problems.append((f"nccl.{key}", f"expected a list that leaves "
                                                f"{collective.value} a {what}, got {quoted(text)}"))
        return problems

    def __bool__(self) -> bool:
        """Whether either variable is set, or NVLS turned off."""
        return bool(self.algo or self.proto or not self.nvls)

    @property
    def is_default(self) -> bool:
        """Whether nothing is set: no list, the latest tuner, unregistered buffers, a thread
        per GPU, the GPUs' own library."""
        return (not self and self.version is LATEST and self.view is None
                and not self.symmetric and self.gpus_per_thread == 1 and self.library is None)


LIBRARIES = ", ".join(library.value for library in Library)
"""The libraries ``nccl.library`` names, as a scenario spells them."""

RCCL_ALGORITHMS = frozenset({NcclAlgorithm.RING, NcclAlgorithm.TREE})
"""The algorithms RCCL runs on AMD Instinct: NCCL's Ring and Tree, no NVLS (no in-switch
reduction), no CollNet or PAT here (ROCm/rccl 0cbce2a7 src/graph/tuning.cc: NVLS's hwLat and
bwRatio are 0 in every tuning model, tuning.cc:67-252)."""


def library_of(value: object) -> Library | None:
    """The library a scenario's ``nccl.library`` names (``nccl`` or ``rccl``), None if none."""
    return next((library for library in Library if library.value == value), None)


def rccl_problem(algo: str) -> str | None:
    """Why ``nccl.algo`` asks RCCL for an algorithm it does not have (NVLS, NVLSTree,
    CollNet, PAT: named in the list, not excluded by a leading ``^``), or None."""
    if not algo or algo.lstrip().startswith("^"):
        return None
    named = {word.strip().lower() for part in algo.split(";")
             for word in part.split(":")[-1].split(",")}
    absent = [a.value for a in NcclAlgorithm if a not in RCCL_ALGORITHMS and a.value.lower() in named]
    if not absent:
        return None
    return (f"expected Ring or Tree with library rccl: RCCL has no {', '.join(absent)} (no "
            f"in-switch reduction on AMD Instinct), got {quoted(algo)}")
