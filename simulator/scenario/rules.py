"""The rules a scenario's values must follow, each a function saying what is wrong with a value
(or None). :mod:`.spec` asks them when a Scenario is made, and :mod:`.parse` asks the same ones
while it reads a file, naming the field as the file spells it, so both give the same messages.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Annotated, Any, get_args, get_origin, get_type_hints

import numpy as np

from simulator.algorithms.algorithm import Algorithm, Inner
from simulator.algorithms.registry import REGISTRY, composable_names
from simulator.errors import quoted
from simulator.limits import MAX_PIECES, MAX_SIZE_BYTES, MAX_SIZES
from simulator.model.collective import Collective
from simulator.model.execution import Execution
from simulator.model.machine import GpuSpec
from simulator.model.topology import BUILDERS, ParamValue
from simulator.scenario.fields import choice_problem, did_you_mean

Issue = tuple[str, str]
"""A problem before it is tied to a file: (field path, what was expected)."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


MAX_NAME = 100
"""Characters of a scenario name, which names its files (``<name>-crossover.png``...) where a
file system allows 255 bytes."""


def name_problem(name: object) -> str | None:
    """A scenario (or preset) name: letters, digits, '.', '_' or '-', at most MAX_NAME of them."""
    if isinstance(name, str) and len(name) > MAX_NAME:
        return f"expected a name of at most {MAX_NAME} characters, got one of {len(name):,}"
    if isinstance(name, str) and _NAME.fullmatch(name):
        return None
    shown = repr(name)
    return (f"expected a name of letters, digits, '.', '_' or '-', got "
            f"{shown if len(shown) <= 60 else shown[:57] + '...'}")


def size_problem(size: int, dtype: np.dtype[Any]) -> str | None:
    """A per-rank buffer size: a positive whole number of elements, at most 1 TiB."""
    if size <= 0 or size % dtype.itemsize:
        return (f"expected a positive multiple of the {dtype.name} element size "
                f"({dtype.itemsize} bytes), got {size}")
    if size > MAX_SIZE_BYTES:
        return f"expected at most 1TiB per rank, got {size} bytes"
    return None


def sizes_count_problem(count: int, *, counting: bool = False) -> str | None:
    """How many sizes a scenario lists: at most MAX_SIZES, each at least one point to run
    (``counting``: ``count`` is how many were read so far, of a list that goes on)."""
    if count > MAX_SIZES:
        got = f"more than {MAX_SIZES:,}" if counting else f"{count:,}"
        return (f"expected at most {MAX_SIZES:,} sizes (each is a point to simulate; "
                f"simulator/limits.py), got {got}")
    return None


def duplicate_problem(values: Iterable[object], what: str) -> str | None:
    """Every value once: a repeated size or algorithm would give duplicate result rows."""
    seen: set[object] = set()
    for value in values:
        if value in seen:
            return f"expected each {what} once, got {quoted(value)} twice"
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
    """What is wrong with builder ``kind`` and its parameters (SI values), rank limit included;
    fields are named under ``prefix`` (none: the parameter's name alone, as in a preset file)."""
    return [(f"{prefix}.{where}" if prefix and where else where or prefix, message)
            for where, message in _topology_issues(kind, params)]


def _topology_issues(kind: str, params: Mapping[str, ParamValue]) -> list[Issue]:
    """:func:`topology_issues` with each field named by its parameter alone ("": the whole)."""
    problem = choice_problem(kind, BUILDERS, "a topology kind")
    if problem:
        return [("kind", problem)]
    builder = BUILDERS[kind]
    kinds = builder.params
    issues = [(key, f"unknown key{did_you_mean(key, kinds)}")
              for key in params if key not in kinds]
    issues += [(key, "required but missing")
               for key in kinds if key not in params and key not in builder.optional]
    defaults = builder.defaults
    for key, value in params.items():
        if key in kinds and not (key in defaults and value == defaults[key]):  # a default is valid
            try:
                kinds[key].check(value)
            except ValueError as error:
                issues.append((key, str(error)))
    if not issues:  # the product of the counts first: the wiring rules may walk what it counts
        ranks = builder.rank_count(params)
        if ranks > builder.max_ranks:
            issues.append(("", f"expected at most {builder.max_ranks} GPUs for kind {kind}, "
                               f"got {ranks}"))
    if not issues and builder.problems is not None:
        given = {**defaults, **params}
        issues += list(builder.problems(given))
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
    and inner algorithms that are registered, of the marked collective, and composable."""
    issues = []
    for name, value in options.items():
        where = f"algorithm_options.{name}"
        algorithm = REGISTRY[collective].get(name) if isinstance(name, str) else None
        if algorithm is None:
            issues.append((where, choice_problem(name, REGISTRY[collective],
                                                 f"an algorithm for {collective.value}") or ""))
        elif not isinstance(value, algorithm.Options):
            issues.append((where, f"expected {algorithm.Options.__name__}, got {quoted(value)}"))
        else:
            for key, hint in option_kinds(algorithm.Options).items():
                inner = inner_of(hint)
                chosen = getattr(value, key)
                if inner is not None and not _registered_inner(chosen, inner):
                    names = composable_names(inner.collective)
                    described = (f"the {chosen.collective.value} {quoted(chosen.name)}"
                                 if isinstance(chosen, Algorithm) else repr(chosen))
                    issues.append((f"{where}.{key}", f"expected {inner.what} "
                                                     f"({', '.join(names)}), got {described}"))
    return issues


def _registered_inner(chosen: object, inner: Inner) -> bool:
    """Whether ``chosen`` is the registered, composable algorithm of ``inner.collective`` that
    its name says (a ring allgather named "ring" is not the ring allreduce)."""
    if not isinstance(chosen, Algorithm) or chosen.name not in composable_names(inner.collective):
        return False
    return type(chosen) is type(REGISTRY[inner.collective][chosen.name])


def gpu_issues(gpu: GpuSpec) -> list[Issue]:
    """A reduction bandwidth that is positive (or unset) and a launch latency ≥ 0, both finite."""
    issues = []
    bandwidth, launch = gpu.reduce_bandwidth_Bps, gpu.launch_latency_s
    if bandwidth is not None and not (_is_real(bandwidth) and bandwidth > 0):
        issues.append(("gpu.reduce_bandwidth", f"expected a positive bandwidth in bytes/s, got "
                                               f"{quoted(bandwidth)}"))
    if not (_is_real(launch) and launch >= 0):
        issues.append(("gpu.launch_latency", f"expected a time ≥ 0 in seconds, got {quoted(launch)}"))
    return issues


def _is_real(value: object) -> bool:
    """A finite number (not a bool)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def states_gpus(topology: Any) -> bool:
    """Whether ``topology`` states its GPUs' generation and NVLink links, as the presets of real
    machines (dgx_h100, dgx_a100) do and the abstract builders (ring, torus, ...) do not."""
    params = topology.params
    return bool(params.get("compute_capability") and params.get("nvlinks"))


def default_execution(topology: Any) -> Execution:
    """The execution model a scenario gets when it names none: NCCL's kernels on a topology that
    states its GPUs (a real machine, whose NCCL the prediction is about), the ideal wire on an
    abstract one (no GPUs to look NCCL's constants up for)."""
    return Execution.NCCL if states_gpus(topology) else Execution.IDEAL


def execution_problem(execution: Execution | None, topology: Any) -> str | None:
    """The NCCL execution model needs the GPUs' generation and NVLink links from the topology."""
    if execution is Execution.NCCL and not states_gpus(topology):
        return (f"expected a topology that states compute_capability and nvlinks for "
                f"execution: nccl (the dgx_h100 and dgx_a100 presets do), got kind "
                f"{topology.kind}")
    return None


def nccl_choice_problem(nccl_choice: bool, execution: Execution | None,
                        collective: Collective) -> str | None:
    """NCCL's choice (``algorithms: auto``) comes from NCCL's cost model of allreduce,
    reduce_scatter and allgather, which only the ``nccl`` execution model states."""
    if not nccl_choice:
        return None
    if collective not in (Collective.ALLREDUCE, Collective.REDUCE_SCATTER, Collective.ALLGATHER):
        return (f"expected 'all' or a list of algorithm names for {collective.value}: 'auto' "
                "(NCCL's choice) is modelled for allreduce, reduce_scatter and allgather only")
    if execution is not Execution.NCCL:
        return ("expected 'all' or a list of algorithm names with execution: ideal: 'auto' "
                "(NCCL's choice) needs execution: nccl")
    return None


MAX_CHANNELS = 64
"""The most channels a collective may use (NCCL's ``MAXCHANNELS``, src/include/device.h)."""


def channels_problem(channels: int | None, collective: Collective) -> str | None:
    """Channels: auto (None) or 1..MAX_CHANNELS; more than one splits an allreduce only (``auto``
    alone runs NCCL's ring reduce-scatter and allgather across hosts on channels, each on a part
    of every rank's chunk: ``simulator.plan.channels_for``)."""
    if channels is None:
        return None
    if isinstance(channels, bool) or not 1 <= channels <= MAX_CHANNELS:
        return f"expected 'auto' or a whole number from 1 to {MAX_CHANNELS}, got {quoted(channels)}"
    if channels > 1 and collective is not Collective.ALLREDUCE:
        return (f"expected 'auto' or 1 for {collective.value}: channels split an allreduce's "
                f"buffer only, got {channels}")
    return None
