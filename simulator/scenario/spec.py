"""The validated scenario: a topology, a collective, the algorithms and sizes to run, the data.

A :class:`Scenario` (and its :class:`TopologySpec`) checks itself when it is made, however it is
made (read from a file, from a mapping, built in code or changed with ``dataclasses.replace``),
so one that exists is valid. Each rule is a function here that says what is wrong with a value;
the file parser (:mod:`simulator.scenario.parse`) asks the same functions, naming the field as
the file spells it, so both paths give the same messages.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, get_args, get_origin, get_type_hints

import numpy as np

from simulator.algorithms.algorithm import Algorithm, Inner
from simulator.algorithms.registry import REGISTRY, composable_names
from simulator.errors import InputError, Problem
from simulator.limits import MAX_PIECES, MAX_SIZE_BYTES
from simulator.model.collective import Collective
from simulator.model.machine import GpuSpec
from simulator.model.reduction import DTYPES, ReduceOp
from simulator.model.topology import BUILDERS, ParamValue
from simulator.scenario.fields import did_you_mean

Issue = tuple[str, str]
"""A problem before it is tied to a file: (field path, what was expected)."""

CODE = "<code>"
"""The ``source`` of a scenario or topology built in Python rather than read from a file."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def choice_problem(value: object, choices: Iterable[str], what: str) -> str | None:
    """What is wrong with ``value`` as one of ``choices``, naming them, or None."""
    choices = list(choices)
    if isinstance(value, str) and value in choices:
        return None
    return f"expected {what} ({', '.join(choices)}), got {value!r}{did_you_mean(value, choices)}"


def name_problem(name: object) -> str | None:
    """A scenario (or preset) name: letters, digits, '.', '_' or '-'."""
    if isinstance(name, str) and _NAME.fullmatch(name):
        return None
    return f"expected a name of letters, digits, '.', '_' or '-', got {name!r}"


def size_problem(size: int, dtype: np.dtype[Any]) -> str | None:
    """A per-rank buffer size: a positive whole number of elements, at most 1 TiB."""
    if size <= 0 or size % dtype.itemsize:
        return (f"expected a positive multiple of the {dtype.name} element size "
                f"({dtype.itemsize} bytes), got {size}")
    if size > MAX_SIZE_BYTES:
        return f"expected at most 1TiB per rank, got {size} bytes"
    return None


def duplicate_problem(values: Iterable[object], what: str) -> str | None:
    """Every value once: a repeated size or algorithm would give duplicate result rows."""
    seen: set[object] = set()
    for value in values:
        if value in seen:
            return f"expected each {what} once, got {value!r} twice"
        seen.add(value)
    return None


def piece_problem(piece_bytes: int, dtype: np.dtype[Any], sizes: tuple[int, ...]) -> str | None:
    """A pipeline piece size: at least one element, and at most MAX_PIECES pieces per buffer."""
    if piece_bytes < dtype.itemsize:
        return (f"expected at least one {dtype.name} element ({dtype.itemsize} bytes), "
                f"got {piece_bytes}")
    if sizes and max(sizes) // piece_bytes > MAX_PIECES:
        return (f"expected at most {MAX_PIECES} pieces per buffer, got "
                f"{max(sizes) // piece_bytes} ({max(sizes)} / {piece_bytes} bytes); use a "
                "larger piece_size")
    return None


def topology_issues(kind: str, params: Mapping[str, ParamValue], prefix: str = "topology") -> list[Issue]:
    """What is wrong with builder ``kind`` and its parameters (SI values), rank limit included."""
    problem = choice_problem(kind, BUILDERS, "a topology kind")
    if problem:
        return [(f"{prefix}.kind", problem)]
    builder = BUILDERS[kind]
    kinds = builder.params
    issues = [(f"{prefix}.{key}", f"unknown key{did_you_mean(key, kinds)}")
              for key in params if key not in kinds]
    issues += [(f"{prefix}.{key}", "required but missing")
               for key in kinds if key not in params and key not in builder.optional]
    for key, value in params.items():
        if key in kinds:
            try:
                kinds[key].check(value)
            except ValueError as error:
                issues.append((f"{prefix}.{key}", str(error)))
    if not issues:
        ranks = builder.rank_count(params)
        if ranks > builder.max_ranks:
            issues.append((prefix, f"expected at most {builder.max_ranks} GPUs for kind {kind}, "
                                   f"got {ranks}"))
    return issues


def option_kinds(options: type) -> dict[str, Any]:
    """Each field of an algorithm's options dataclass and its type hint (``Annotated`` kept)."""
    hints = get_type_hints(options, include_extras=True)
    return {f.name: hints[f.name] for f in fields(options)}


def inner_of(hint: Any) -> Inner | None:
    """The :class:`Inner` marker of an option's type hint, if it names another algorithm."""
    if get_origin(hint) is Annotated:
        return next((arg for arg in get_args(hint)[1:] if isinstance(arg, Inner)), None)
    return None


def options_issues(collective: Collective, options: Mapping[str, object]) -> list[Issue]:
    """What is wrong with typed algorithm options: known algorithms, options of the right type,
    and inner algorithms that may compose."""
    issues = []
    for name, value in options.items():
        where = f"algorithm_options.{name}"
        algorithm = REGISTRY[collective].get(name)
        if algorithm is None:
            issues.append((where, choice_problem(name, REGISTRY[collective],
                                                 f"an algorithm for {collective.value}") or ""))
        elif not isinstance(value, algorithm.Options):
            issues.append((where, f"expected {algorithm.Options.__name__}, got {value!r}"))
        else:
            for key, hint in option_kinds(algorithm.Options).items():
                inner = inner_of(hint)
                chosen = getattr(value, key)
                names = composable_names(inner.collective) if inner else []
                if inner and (not isinstance(chosen, Algorithm) or chosen.name not in names):
                    issues.append((f"{where}.{key}", choice_problem(getattr(chosen, "name", chosen),
                                                                    names, inner.what) or ""))
    return issues


def gpu_issues(gpu: GpuSpec) -> list[Issue]:
    """A reduction bandwidth that is positive (or unset) and a launch latency ≥ 0, both finite."""
    issues = []
    bandwidth = gpu.reduce_bandwidth_Bps
    if bandwidth is not None and not (math.isfinite(bandwidth) and bandwidth > 0):
        issues.append(("gpu.reduce_bandwidth", f"expected a positive bandwidth, got {bandwidth!r}"))
    if not (math.isfinite(gpu.launch_latency_s) and gpu.launch_latency_s >= 0):
        issues.append(("gpu.launch_latency", f"expected a time ≥ 0, got {gpu.launch_latency_s!r}"))
    return issues


@dataclass(frozen=True)
class TopologySpec:
    """A builder and its parameters (SI units), labelled by the preset or kind it came from.

    >>> TopologySpec("switch", {"ranks": 4, "bandwidth": 25e9, "latency": 5e-7}).ranks
    4
    """

    kind: str
    params: Mapping[str, ParamValue]
    label: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "label", self.label or self.kind)
        issues = topology_issues(self.kind, self.params)
        if issues:
            raise InputError([Problem(CODE, where, message) for where, message in issues])

    @property
    def ranks(self) -> int:
        """How many GPUs (ranks) the topology has."""
        return BUILDERS[self.kind].rank_count(self.params)

    def build(self) -> Any:
        """The topology graph (a ``networkx.DiGraph``)."""
        return BUILDERS[self.kind].build(**self.params)


@dataclass(frozen=True)
class Scenario:
    """One experiment: a topology, a collective, the algorithms and sizes to run, the data.

    ``algorithms`` None means every algorithm that applies (``all``); ``options`` maps an
    algorithm's name to an instance of its ``Options``; ``piece_bytes`` is the pipeline piece
    size (``piece_size``; None: each algorithm's own). Invalid values raise
    :class:`~simulator.errors.InputError` naming the field, attributed to ``source``.
    """

    name: str
    topology: TopologySpec
    sizes: tuple[int, ...]
    collective: Collective = Collective.ALLREDUCE
    algorithms: tuple[str, ...] | None = None
    dtype: np.dtype[Any] = field(default_factory=lambda: np.dtype("float32"))
    reduce_op: ReduceOp = ReduceOp.SUM
    gpu: GpuSpec = field(default_factory=GpuSpec)
    piece_bytes: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    verify: bool = True
    output: Path | None = None
    source: str = CODE

    def __post_init__(self) -> None:
        object.__setattr__(self, "sizes", tuple(self.sizes))
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))
        if self.algorithms is not None:
            object.__setattr__(self, "algorithms", tuple(self.algorithms))
        if self.output is None:
            object.__setattr__(self, "output", Path("results") / str(self.name))
        issues = self._issues()
        if issues:
            raise InputError([Problem(self.source, where, message) for where, message in issues])

    def _issues(self) -> list[Issue]:
        issues: list[tuple[str, str | None]] = [("name", name_problem(self.name))]
        if not isinstance(self.dtype, np.dtype) or self.dtype.name not in DTYPES:
            return [*_present(issues), ("dtype", choice_problem(str(self.dtype), DTYPES, "a dtype")
                                        or "")]
        issues.append(("sizes", None if self.sizes else "expected at least one size"))
        issues += [(f"sizes[{i}]", size_problem(size, self.dtype)) for i, size in enumerate(self.sizes)]
        issues.append(("sizes", duplicate_problem(self.sizes, "size")))
        known = REGISTRY[self.collective]
        for i, name in enumerate(self.algorithms or ()):
            issues.append((f"algorithms[{i}]", choice_problem(name, known,
                                                              f"an algorithm for {self.collective.value}")))
        issues.append(("algorithms", None if self.algorithms != () else "expected at least one"))
        issues.append(("algorithms", duplicate_problem(self.algorithms or (), "algorithm")))
        if self.piece_bytes is not None:
            issues.append(("piece_size", piece_problem(self.piece_bytes, self.dtype, self.sizes)))
        issues += options_issues(self.collective, self.options)
        issues += gpu_issues(self.gpu)
        issues.append(("output", None if str(self.output).strip() else "expected a directory path"))
        return _present(issues)

    @property
    def output_dir(self) -> Path:
        """Where results go (``output``; default ``results/<name>``)."""
        return self.output if self.output is not None else Path("results") / self.name

    def algorithm(self, name: str) -> Algorithm:
        """Registered algorithm ``name`` of this scenario's collective, with its options."""
        algorithm = REGISTRY[self.collective][name]
        return algorithm.configured(self.options.get(name, algorithm.Options()))


def _present(issues: list[tuple[str, str | None]]) -> list[Issue]:
    return [(where, message) for where, message in issues if message]
