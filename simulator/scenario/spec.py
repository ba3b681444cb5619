"""The validated scenario: a topology, a collective, the algorithms and sizes to run, the data.

A :class:`Scenario` (and its :class:`TopologySpec`) checks itself when it is made, however it is
made (read from a file, from a mapping, built in code or changed with ``dataclasses.replace``),
so one that exists is valid. The rules are the functions of :mod:`.rules`, which the file
parser (:mod:`simulator.scenario.parse`) asks too, so both paths give the same messages.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from simulator.algorithms.algorithm import Algorithm
from simulator.algorithms.registry import REGISTRY
from simulator.errors import InputError, Problem, quoted
from simulator.model.collective import Collective
from simulator.model.execution import Execution
from simulator.model.faults import KINDS, Fault
from simulator.model.machine import GpuSpec
from simulator.model.nccl import Enabled, Protocol
from simulator.model.nccl_env import NcclEnv
from simulator.model.reduction import DTYPES, ReduceOp, is_float
from simulator.model.topology import BUILDERS, Param, ParamValue
from simulator.scenario.fields import choice_problem
from simulator.scenario.msccl import is_msccl, load_msccl, msccl_problems
from simulator.scenario.rules import (
    Issue,
    channels_problem,
    default_execution,
    duplicate_problem,
    execution_problem,
    gpu_issues,
    name_problem,
    nccl_choice_problem,
    options_issues,
    piece_problem,
    size_problem,
    sizes_count_problem,
    topology_issues,
)
from simulator.settings import Engine, RunSettings
from simulator.training.spec import TrainingSpec

__all__ = ["ALL", "AUTO", "CODE", "Engine", "RunSettings", "Scenario", "TopologySpec"]

ALL = "all"
"""The ``algorithms`` value meaning every algorithm that applies (None in a Scenario)."""
AUTO = "auto"
"""The ``algorithms`` value meaning NCCL's choice (``nccl_choice`` in a Scenario)."""

CODE = "<code>"
"""The ``source`` of a scenario or topology built in Python rather than read from a file."""


@dataclass(frozen=True)
class TopologySpec:
    """A builder and its parameters (SI units), labelled by the preset or kind it came from.
    Parameters left out take the builder's defaults, which are filled in, so ``params`` always
    holds every parameter the graph is built with.

    >>> TopologySpec("switch", {"ranks": 4, "bandwidth": 25e9, "latency": 5e-7}).ranks
    4
    """

    kind: str
    params: Mapping[str, ParamValue]
    label: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.params, Mapping):
            raise InputError([Problem(CODE, "topology", f"expected a mapping of parameters, "
                                                        f"got {quoted(self.params)}")])
        issues = topology_issues(self.kind, self.params)
        if not isinstance(self.label, str):
            issues.append(("topology.label", f"expected a name, got {quoted(self.label)}"))
        if issues:
            raise InputError([Problem(CODE, where, message) for where, message in issues])
        builder = BUILDERS[self.kind]
        given = {**builder.defaults, **self.params}
        object.__setattr__(self, "params", MappingProxyType({key: given[key]
                                                             for key in builder.params}))
        object.__setattr__(self, "label", self.label or self.kind)

    def __reduce__(self) -> tuple[Any, tuple[str, dict[str, ParamValue], str]]:
        """Pickle with the parameters as a plain dict (a sweep sends scenarios to workers)."""
        return TopologySpec, (self.kind, dict(self.params), self.label)

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

    ``algorithms`` None means every algorithm that applies (``all``; one name means a list of
    one); a name ``msccl:PATH`` is an MSCCL schedule, PATH relative to ``source``'s directory
    (:mod:`simulator.scenario.msccl`); ``algorithm_options`` maps an algorithm's name to an
    instance of its ``Options``;
    ``piece_bytes`` is the pipeline piece size (``piece_size``; None: each algorithm's own);
    ``output`` None means ``results/<name>``; ``execution`` is how messages are timed: the ideal
    wire or NCCL's kernels (None: ``nccl`` on a topology that states its GPUs, as the presets of
    real machines do, ``ideal`` on the abstract builders; see
    :func:`~simulator.scenario.rules.default_execution`), with NCCL's ``protocol`` (None: the
    one NCCL's model picks per size and algorithm). ``nccl_choice`` (``algorithms: auto``) runs
    only what NCCL runs at each size (:func:`simulator.plan.nccl_runs`), as nccl-tests with
    NCCL's defaults does (issue 36); it needs the ``nccl`` execution model. ``nccl`` sets
    ``NCCL_ALGO`` and ``NCCL_PROTO`` (:class:`~simulator.model.nccl_env.NcclEnv`), which narrow
    what NCCL's tuner picks and the protocols ``protocol: auto`` picks from. ``channels`` splits an
    allreduce's buffer over that many channels (None: ``auto``, see
    ``simulator.plan.channels_for``). ``run`` holds how it is run, apart from what it
    simulates (:class:`~simulator.settings.RunSettings`): the file's ``verify`` and ``engine``
    (an engine also by its name). Enum fields and ``dtype`` also take their names, and
    ``output`` a string. ``training`` makes it a data-parallel training step whose gradient
    buckets give the sizes (docs/training.md). ``faults`` are what goes wrong during each point
    (:mod:`simulator.model.faults`; their node names are checked against the built topology by
    :func:`simulator.plan.prepare`). Anything else invalid raises
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
    algorithm_options: Mapping[str, Any] = field(default_factory=dict)
    output: Path | None = None
    source: str = CODE
    execution: Execution | None = None
    protocol: Protocol | None = None
    nccl_choice: bool = False
    channels: int | None = None
    run: RunSettings = field(default_factory=RunSettings)
    training: TrainingSpec | None = None
    nccl: NcclEnv = field(default_factory=NcclEnv)
    faults: tuple[Fault, ...] = ()

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        """Pickle as the fields (options as a plain dict), so a sweep can send a scenario to
        its worker processes."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["algorithm_options"] = dict(self.algorithm_options)
        return _rebuild, (values,)

    def __post_init__(self) -> None:
        issues = self._coerce()
        if not issues:
            issues = self._issues()
        if issues:
            raise InputError([Problem(str(self.source), where, message)
                              for where, message in issues])

    def _coerce(self) -> list[Issue]:
        """Accept names for enums and dtype, a string for output, one name for algorithms and
        any integers for sizes; say what is wrong with any other type."""
        issues: list[tuple[str, str | None]] = []

        def set_(name: str, value: object) -> None:
            object.__setattr__(self, name, value)

        if self.execution is None and isinstance(self.topology, TopologySpec):
            set_("execution", default_execution(self.topology))
        if self.protocol is not None and not isinstance(self.protocol, Protocol):
            try:
                set_("protocol", Protocol(self.protocol))
            except ValueError:
                issues.append(("protocol", f"expected a Protocol, one of "
                                           f"{', '.join(p.value for p in Protocol)} or None, got "
                                           f"{quoted(self.protocol)}"))
        for name, enum in (("collective", Collective), ("reduce_op", ReduceOp),
                           ("execution", Execution)):
            value = getattr(self, name)
            if value is None and name == "execution":
                continue  # the topology is not a TopologySpec: that is the problem to report
            if not isinstance(value, enum):
                what = f"a {enum.__name__} or one of {', '.join(e.value for e in enum)}"
                try:
                    set_(name, enum(value))
                except ValueError:
                    issues.append((name, f"expected {what}, got {quoted(value)}"))
        if isinstance(self.run, RunSettings):
            issues += _run_issues(self.run, lambda run: set_("run", run))
        else:
            issues.append(("run", f"expected a RunSettings, got {quoted(self.run)}"))
        if not isinstance(self.dtype, np.dtype) or self.dtype.name not in DTYPES:
            problem = choice_problem(getattr(self.dtype, "name", self.dtype), DTYPES, "a dtype")
            issues.append(("dtype", problem))
            if problem is None:
                set_("dtype", np.dtype(str(self.dtype)))
        sizes = self.sizes if isinstance(self.sizes, (tuple, list)) else None
        if sizes is None or not all(_is_int(size) for size in sizes):
            issues.append(("sizes", "expected a sequence of whole numbers of bytes, got "
                                    f"{quoted(self.sizes)}"))
        else:
            set_("sizes", tuple(operator.index(size) for size in sizes))
        if isinstance(self.algorithms, str) and self.algorithms == AUTO:
            set_("algorithms", None)
            set_("nccl_choice", True)
        elif isinstance(self.algorithms, str):
            set_("algorithms", (self.algorithms,))
        elif self.algorithms is not None:
            set_("algorithms", tuple(self.algorithms))
        if self.piece_bytes is not None:
            if _is_int(self.piece_bytes):
                set_("piece_bytes", operator.index(self.piece_bytes))
            else:
                issues.append(("piece_size", f"expected a whole number of bytes, got "
                                             f"{quoted(self.piece_bytes)}"))
        if isinstance(self.output, str):
            set_("output", Path(self.output))
        typed = (("name", str), ("topology", TopologySpec), ("gpu", GpuSpec),
                 ("nccl_choice", bool), ("channels", (int, type(None))), ("nccl", NcclEnv),
                 ("source", str), ("algorithm_options", Mapping), ("output", (Path, type(None))))
        for name, kind in typed:
            if not isinstance(getattr(self, name), kind):
                issues.append((name, f"expected {_kind_name(kind)}, got {quoted(getattr(self, name))}"))
        if isinstance(self.algorithm_options, Mapping):
            set_("algorithm_options", MappingProxyType(dict(self.algorithm_options)))
        return _present(issues)

    def _issues(self) -> list[Issue]:
        issues: list[tuple[str, str | None]] = [("name", name_problem(self.name))]
        if self.training is None:
            issues.append(("sizes", None if self.sizes else "expected at least one size"))
        else:
            if self.collective is not Collective.ALLREDUCE:
                issues.append(("collective", f"expected allreduce with training (DDP allreduces "
                                             f"gradients), got {self.collective.value}"))
            if self.reduce_op is not ReduceOp.SUM:
                issues.append(("op", f"expected sum with training (DDP divides the gradients by "
                                     f"the world size and sums them), got {self.reduce_op.value}"))
            if not is_float(self.dtype):
                issues.append(("dtype", f"expected a floating-point type with training "
                                        f"(gradients), got {self.dtype.name}"))
            issues += self._sweep_issues()
        if (too_many := sizes_count_problem(len(self.sizes))) is not None:
            issues.append(("sizes", too_many))
        else:
            issues += [(f"sizes[{i}]", size_problem(size, self.dtype))
                       for i, size in enumerate(self.sizes)]
            issues.append(("sizes", duplicate_problem(self.sizes, "size")))
        known = REGISTRY[self.collective]
        for i, name in enumerate(self.algorithms or ()):
            if is_msccl(name):
                issues += [(f"algorithms[{i}]", problem)
                           for problem in msccl_problems(name, self.source, self.collective)]
            else:
                issues.append((f"algorithms[{i}]", choice_problem(
                    name, known, f"an algorithm for {self.collective.value}")))
        issues.append(("algorithms", None if self.algorithms != () else "expected at least one"))
        issues.append(("algorithms", duplicate_problem(self.algorithms or (), "algorithm")))
        if self.piece_bytes is not None:
            issues.append(("piece_size", piece_problem(self.piece_bytes, self.dtype, self.sizes)))
        issues += options_issues(self.collective, self.algorithm_options)
        issues += gpu_issues(self.gpu)
        issues.append(("execution", execution_problem(self.execution, self.topology)))
        issues.append(("channels", channels_problem(self.channels, self.collective)))
        issues.append(("algorithms", nccl_choice_problem(self.nccl_choice, self.execution,
                                                         self.collective)))
        if self.protocol is not None and self.execution is Execution.IDEAL:
            issues.append(("protocol", "expected no protocol with execution: ideal (protocols "
                                       "are NCCL's: set execution: nccl)"))
        issues += self._nccl_issues()
        issues.append(("output", None if self.output is None or str(self.output).strip()
                       else "expected a directory path"))
        issues += self._fault_issues()
        return _present(issues)

    def _fault_issues(self) -> list[Issue]:
        """What is wrong with ``faults`` that the topology's rank count can tell (node names
        need the built graph: :func:`simulator.plan.prepare`)."""
        if not isinstance(self.faults, tuple):
            return [("faults", f"expected a tuple of faults, got {quoted(self.faults)}")]
        issues: list[Issue] = []
        ranks = self.topology.ranks
        names = [kind.__name__ for kind in KINDS.values()]
        for i, fault in enumerate(self.faults):
            if not isinstance(fault, Fault):
                issues.append((f"faults[{i}]", f"expected a {', '.join(names[:-1])} or "
                                               f"{names[-1]}, got {quoted(fault)}"))
            elif (found := fault.rank_problem(ranks)) is not None:
                issues.append((f"faults[{i}].{found[0]}", found[1]))
        return issues

    def _nccl_issues(self) -> list[Issue]:
        """What is wrong with ``nccl``: a bad list, a restriction without NCCL's execution, or a
        ``protocol`` that ``nccl.proto`` leaves out."""
        problems = self.nccl.problems(self.collective)
        if self.nccl.view is not None and self.execution is Execution.IDEAL:
            return [(f"nccl.{self.nccl.view_key}", "expected execution: nccl with NCCL's own "
                                                   "graphs and rings (NCCL's model runs on them), "
                                                   "got execution: ideal")]
        if problems or not self.nccl:
            return list(problems)
        if self.execution is Execution.IDEAL:
            return [("nccl", "expected no nccl with execution: ideal (NCCL_ALGO and NCCL_PROTO "
                             "restrict NCCL's choice: set execution: nccl)")]
        left = self.nccl_enabled.protocols
        if self.protocol is not None and self.protocol not in left:
            return [("protocol", f"expected a protocol nccl.proto {quoted(self.nccl.proto)} leaves "
                                 f"({', '.join(p.value for p in Protocol if p in left)}), got "
                                 f"{self.protocol.value}")]
        return []

    @property
    def nccl_enabled(self) -> Enabled:
        """The algorithms and protocols ``nccl`` leaves NCCL's tuner for this collective."""
        return self.nccl.enabled(self.collective)

    def _sweep_issues(self) -> list[Issue]:
        """What is wrong with the training's GPU-count sweep: it must scale a count of the
        topology's builder, to values the builder accepts."""
        assert self.training is not None
        sweep = self.training.sweep_topology
        if sweep is None or not isinstance(self.topology, TopologySpec):
            return []
        field_name = f"training.sweep.topology.{sweep.param}"
        counts = [name for name, kind in BUILDERS[self.topology.kind].params.items()
                  if kind is Param.COUNT]
        if sweep.param not in counts:
            return [(field_name, f"expected a count of topology {self.topology.label} to scale "
                                 f"the GPUs, one of {', '.join(counts)}")]
        issues: list[Issue] = []
        for i, value in enumerate(sweep.values):
            params = {**self.topology.params, sweep.param: value}
            issues += [(f"{field_name}[{i}]", message) for _, message
                       in topology_issues(self.topology.kind, params)]
        return issues

    def scaled_topologies(self) -> tuple[TopologySpec, ...]:
        """The topologies of the training's GPU-count sweep (none without one): the scenario's
        with the swept count set to each value, checked when the scenario was made."""
        sweep = self.training.sweep_topology if self.training is not None else None
        if sweep is None:
            return ()
        return tuple(TopologySpec(self.topology.kind, {**self.topology.params, sweep.param: value},
                                  self.topology.label) for value in sweep.values)

    @property
    def output_dir(self) -> Path:
        """Where results go: ``output``, or ``results/<name>`` when it is not set."""
        return self.output if self.output is not None else Path("results") / self.name

    def algorithm(self, name: str) -> Algorithm:
        """Registered algorithm ``name`` of this scenario's collective, with its options, or the
        MSCCL schedule ``msccl:PATH`` names (read once while its file is unchanged)."""
        if is_msccl(name):
            return load_msccl(name, self.source, self.collective)
        algorithm = REGISTRY[self.collective][name]
        return algorithm.configured(self.algorithm_options.get(name, algorithm.Options()))


def _run_issues(run: RunSettings, set_run: Callable[[RunSettings], None]) -> list[Issue]:
    """Accept an engine's name; say what is wrong with ``verify``, ``fast_forward``, ``engine``
    (named as the file's keys), the seed or the proxy's length otherwise."""
    issues: list[Issue] = [(problem.field, problem.message) for problem in run.problems("")]
    for key in ("verify", "fast_forward"):
        if not isinstance(getattr(run, key), bool):
            issues.append((key, f"expected a bool, got {quoted(getattr(run, key))}"))
    if not isinstance(run.engine, Engine):
        try:
            set_run(replace(run, engine=Engine(run.engine)))
        except ValueError:
            issues.append(("engine", f"expected an Engine or one of "
                                     f"{', '.join(e.value for e in Engine)}, got {quoted(run.engine)}"))
    return issues


def _is_int(value: object) -> bool:
    """A whole number: an int or a numpy integer, not a bool or a float."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join("None" if k is type(None) else f"a {k.__name__}" for k in kinds)


def _present(issues: list[tuple[str, str | None]]) -> list[Issue]:
    return [(where, message) for where, message in issues if message]


def _rebuild(values: dict[str, Any]) -> Scenario:
    """A pickled scenario back from its fields (:meth:`Scenario.__reduce__`)."""
    return Scenario(**values)
