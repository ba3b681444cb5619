"""NCCL's cost model as an API: for a machine, a collective and sizes, what NCCL runs at each size
(its algorithm, protocol and channels) and the time its tuner predicts for it, without
simulating anything: the best-by-size table ``ncclQueryCollTuning`` (torchcomms#3761) proposes
to ask NCCL for.

>>> table = query("dgx_h100", "allreduce", ["32KiB", "2MiB"])
>>> [(r.algorithm, r.protocol, r.channels, round(r.time_us, 3)) for r in table.rows]
[('Ring', 'LL', 1, 15.407), ('NVLS', 'Simple', 16, 34.557)]

The machine is built as a scenario builds it: the topology is a scenario's ``topology:`` (or a
word for one, :mod:`simulator.scenario.topology_word`), read by
:func:`~simulator.scenario.parse.scenario_from_dict` under ``execution: nccl`` and ``algorithms:
auto``, and prepared by :func:`~simulator.plan.prepare`; each size's pick is
:func:`~simulator.plan.nccl_runs`'s (the one rule ``algorithms: auto`` runs), its time
:func:`~simulator.model.nccl_point.nccl_point`'s (the results' ``nccl_time_s``), its channels
:func:`~simulator.model.nccl_channels.channels`. With ``simulate=True`` the same scenario is run
as ``algorithms: auto`` runs it (:func:`simulator.runner.simulate`), and each size's simulated
time stands beside NCCL's. May import: the runner (only to simulate), plan, scenario, model,
units and errors.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from simulator.errors import InputError, Problem, quoted
from simulator.model.collective import Collective
from simulator.model.execution import system_of
from simulator.model.nccl import CANDIDATES
from simulator.model.nccl_channels import channels as nccl_channels
from simulator.model.nccl_point import NcclPick, nccl_point, pick_problem
from simulator.model.nccl_terms import Library
from simulator.model.nccl_versions import Version
from simulator.plan import Setup, nccl_runs, prepare
from simulator.scenario.parse import scenario_from_dict
from simulator.scenario.spec import Scenario
from simulator.scenario.topology_word import node_count, topology_word
from simulator.units import format_size

ENV = {"NCCL_ALGO": "algo", "NCCL_PROTO": "proto", "NCCL_NVLS_ENABLE": "nvls"}
"""The NCCL variables the model reads, and the scenario's ``nccl:`` key each sets
(:mod:`simulator.model.nccl_env`)."""

DEFAULT_SIZES: Mapping[str, Any] = {"from": "1KiB", "to": "1GiB", "factor": 4}
"""The sizes asked when none are given (:func:`query`'s ``sizes``, ``nccl`` without
``--sizes``): 1 KiB to 1 GiB, ×4 (11 sizes)."""

COLLECTIVES = tuple(collective.value for collective in CANDIDATES)
"""The collectives NCCL's model picks for (allreduce, reduce_scatter, allgather)."""


@dataclass(frozen=True)
class Names:
    """What the messages of a query call its inputs: the ``source`` a problem names, and each
    input's name (the function's parameters, or a command's options)."""

    source: str = "nccl.query"
    topology: str = "topology"
    nodes: str = "nodes"
    collective: str = "collective"
    sizes: str = "sizes"
    version: str = "version"
    env: str = "env"

    def of(self, field: str, origin: Origin | None = None) -> str:
        """The input a scenario's ``field`` came from (``nccl.algo``: ``env NCCL_ALGO``), as
        ``origin`` tells where the topology and its node count came from: a topology mapping's
        own key keeps its name under the topology's (``topology.gpu_per_node``); a node count
        not given apart is the topology's (``dgx_h100:0``)."""
        origin = origin or Origin()
        head, _, rest = field.partition("[")
        tail = f"[{rest}" if rest else ""
        keys = {f"nccl.{key}": f"{self.env} {name}" for name, key in ENV.items()}
        named = {"collective": self.collective, "sizes": self.sizes,
                 "nccl.version": self.version, **keys}
        if head == "topology.nodes" and origin.nodes_apart:
            return self.nodes + tail
        if head in named:
            return named[head] + tail
        if head.startswith("sizes"):
            return self.sizes + head.removeprefix("sizes") + tail
        if origin.mapping and head.startswith("topology."):
            return self.topology + head.removeprefix("topology") + tail
        return self.topology if head.startswith(("topology", "execution", "algorithms")) else field


@dataclass(frozen=True)
class Origin:
    """Where a query's inputs came from, for its messages: the topology as a mapping (its keys
    are the caller's: ``mapping``), the node count given apart (``nodes``: ``nodes_apart``),
    and the scenario file whose ``collective:`` and ``nccl:`` keys it took (``file``, the
    fields ``taken``)."""

    mapping: bool = False
    nodes_apart: bool = False
    file: str | None = None
    taken: frozenset[str] = frozenset()

    def took(self, field: str) -> bool:
        """Whether ``field`` (``nccl.algo``, ``collective``) is the scenario file's value."""
        return field.partition("[")[0] in self.taken


@dataclass(frozen=True)
class Question:
    """What a query asks (:func:`question`): the ``scenario`` it is, the ``names`` its messages
    call the inputs by, and where they came from (``origin``)."""

    scenario: Scenario
    names: Names
    origin: Origin


API = Names()
"""The names :func:`query`'s messages use."""


@dataclass(frozen=True)
class SizeTuning:
    """NCCL's answer at one size: the ``algorithm`` and ``protocol`` it runs (NCCL's names:
    ``Ring``, ``NVLSTree``, ``Simple``; a symmetric kernel's name on registered buffers, RCCL's
    ``MSCCL NAME`` schedule), the ``channels`` it runs them on (None where not modelled:
    :mod:`simulator.model.nccl_channels`), the time its tuner predicts (``time_us``,
    ``ncclTopoGetAlgoTime``; NaN where it rates none, as RCCL's MSCCL schedules), and, when
    simulated, the simulation's time of that pick (``sim_time_us``)."""

    size_bytes: int
    algorithm: str
    protocol: str
    channels: int | None
    time_us: float
    sim_time_us: float | None = None


@dataclass(frozen=True)
class NcclTable:
    """What :func:`query` answers: the machine as NCCL counts it (``topology``'s label,
    ``ranks``, ``nodes``, the ``library`` and its tuner's ``version``), the ``collective``, and
    one :class:`SizeTuning` a size, in the order asked; ``version`` is empty on RCCL's GPUs,
    whose one tuner model is :mod:`simulator.model.rccl`'s."""

    topology: str
    collective: str
    library: str
    version: str
    ranks: int
    nodes: int
    rows: tuple[SizeTuning, ...]

    def records(self) -> list[dict[str, Any]]:
        """The rows as plain mappings (``--json``'s array), ``sim_time_us`` only if simulated,
        a time the model has none for (NaN) as None (JSON's null)."""
        simulated = any(row.sim_time_us is not None for row in self.rows)
        return [{key: None if isinstance(value, float) and math.isnan(value) else value
                 for key, value in asdict(row).items() if key != "sim_time_us" or simulated}
                for row in self.rows]

    def text(self) -> str:
        """A compact table: a heading line, then a row a size."""
        simulated = any(row.sim_time_us is not None for row in self.rows)
        head = ["size", "algorithm", "protocol", "channels", "nccl_us"] + (
            ["sim_us"] if simulated else [])
        cells = [[format_size(row.size_bytes), row.algorithm, row.protocol,
                  "-" if row.channels is None else str(row.channels), _us(row.time_us)]
                 + ([_us(row.sim_time_us)] if simulated else []) for row in self.rows]
        widths = [max(len(line[i]) for line in [head, *cells]) for i in range(len(head))]
        lines = ["  ".join(cell.ljust(width) if i in (1, 2) else cell.rjust(width)
                           for i, (cell, width) in enumerate(zip(line, widths, strict=True)))
                 .rstrip() for line in [head, *cells]]
        tuner = f"NCCL {self.version}'s tuner" if self.version else "RCCL's tuner"
        about = (f"# {tuner}, {self.collective} on "
                 f"{self.topology}: {self.ranks} ranks on {self.nodes} "
                 f"node{'' if self.nodes == 1 else 's'}")
        return "\n".join([about, *lines]) + "\n"


def _us(value: float | None) -> str:
    """A time in µs for the table, ``-`` where there is none (None, or NaN: a pick the model
    does not rate)."""
    return "-" if value is None or math.isnan(value) else f"{value:.3f}"


def query(topology: str | Path | Mapping[str, Any], collective: str | None = None,
          sizes: Sequence[int | str] | Mapping[str, Any] = DEFAULT_SIZES,
          version: str | Version | None = None, env: Mapping[str, Any] | None = None, *,
          nodes: int | None = None, simulate: bool = False) -> NcclTable:
    """NCCL's pick, channels and predicted time at each of ``sizes`` (bytes, or labels such as
    ``"1MiB"``, or a scenario's ``{from, to, factor}``; default :data:`DEFAULT_SIZES`) for
    ``collective`` (default allreduce, or a scenario file's ``collective:``) on ``topology``
    (a preset's name, ``NAME:NODES``, a topology, scenario, graph or NCCL topology file, or a
    scenario's ``topology:`` mapping; ``nodes`` hosts where given), with the tuner of NCCL
    ``version`` (None: a scenario file's ``nccl.version``, else the default,
    :data:`~simulator.model.nccl_versions.LATEST`) under ``env`` (NCCL_ALGO, NCCL_PROTO,
    NCCL_NVLS_ENABLE, each over a scenario file's ``nccl:`` key it sets). Nothing is simulated
    unless ``simulate``, which runs each pick as ``algorithms: auto`` does and adds its time.
    InputError naming the input at fault (:class:`Names`)."""
    return answer(question(topology, collective, sizes, version, env, nodes), simulate)


def question(topology: str | Path | Mapping[str, Any], collective: str | None,
             sizes: Sequence[int | str] | Mapping[str, Any], version: str | Version | None,
             env: Mapping[str, Any] | None, nodes: int | str | None,
             names: Names = API) -> Question:
    """The scenario a query asks about: ``algorithms: auto`` under ``execution: nccl``, as a
    scenario file would say it, a scenario file's ``collective:`` and ``nccl:`` where the
    query gives none; InputError with ``names``' words for the inputs at fault."""
    settings: Mapping[str, Any] = {}
    if isinstance(topology, Mapping):
        word_topology, beside = dict(topology), None
        if nodes is not None:
            word_topology["nodes"] = node_count(nodes)
    else:
        word = topology_word(str(topology), nodes, names.source, names.topology)
        word_topology, beside, settings = dict(word.topology), word.beside, word.settings
    nccl: dict[str, Any] = _env(env, names)
    taken = {"collective"} if collective is None and "collective" in settings else set()
    file_nccl = settings.get("nccl")
    if isinstance(file_nccl, Mapping):
        kept = {key: value for key, value in file_nccl.items()
                if key not in nccl and not (key == "version" and version is not None)}
        taken |= {f"nccl.{key}" for key in kept} | ({"nccl"} if kept else set())
        nccl = {**kept, **nccl}
    elif file_nccl is not None and not nccl and version is None:
        nccl, taken = file_nccl, taken | {"nccl"}  # for the scenario's check to refuse
    if version is not None:
        nccl["version"] = version.value if isinstance(version, Version) else version
    chosen = settings["collective"] if "collective" in taken else collective or "allreduce"
    if chosen not in COLLECTIVES:
        where = ((beside, "collective") if beside and "collective" in taken
                 else (names.source, names.collective))
        raise InputError([Problem(*where, (
            f"expected {', '.join(COLLECTIVES[:-1])} or {COLLECTIVES[-1]}, the collectives "
            f"NCCL's model answers, got {quoted(chosen)}"))])
    sizes_value = (dict(sizes) if isinstance(sizes, Mapping) else
                   [sizes] if isinstance(sizes, (str, int)) else list(sizes))
    data = {"name": "nccl", "topology": word_topology, "collective": chosen,
            "sizes": sizes_value, "execution": "nccl", "algorithms": "auto", "nccl": nccl}
    source = beside or names.source
    origin = Origin(mapping=isinstance(topology, Mapping), nodes_apart=nodes is not None,
                    file=beside, taken=frozenset(taken))
    try:
        return Question(scenario_from_dict(data, source=source), names, origin)
    except InputError as error:
        problems = [_renamed(problem, source, origin, names) for problem in error.problems]
        raise InputError(list(dict.fromkeys(problems))) from None


def _renamed(problem: Problem, source: str, origin: Origin, names: Names) -> Problem:
    """A problem of the query's scenario named by the query's inputs; one of the topology's
    own file (a scenario file's ``topology:``, an NCCL topology file) or of what the query
    took from a scenario file (its ``collective:``, ``nccl:``) as it stands."""
    if problem.file != source:
        return problem
    if origin.file is not None and origin.took(problem.field):
        return problem
    field = names.of(problem.field, origin)
    if origin.file is not None and field == names.topology:
        kept = problem.field if problem.field.startswith("topology") else "topology"
        return Problem(origin.file, kept, problem.message)
    return Problem(names.source, field, problem.message)


def _env(env: Mapping[str, Any] | None, names: Names) -> dict[str, Any]:
    """The scenario's ``nccl:`` keys the NCCL variables ``env`` set, each value as NCCL reads
    it, by its text (``0``; a bool as ``1`` or ``0``); InputError for ``env`` not a mapping, a
    variable the model does not read, a value neither text nor a number, or
    NCCL_NVLS_ENABLE other than 0 or 1."""
    if env is None:
        return {}
    if not isinstance(env, Mapping):
        raise InputError([Problem(names.source, names.env, (
            f"expected a mapping of NCCL variables to their values ({{'NCCL_ALGO': 'Ring'}}), "
            f"got {quoted(env)}"))])
    nccl: dict[str, Any] = {}
    for name, given in env.items():
        if name not in ENV:
            raise InputError([Problem(names.source, f"{names.env} {name}", (
                f"expected one of {', '.join(ENV)}, the variables NCCL's model reads here"))])
        if not isinstance(given, (str, int)):
            raise InputError([Problem(names.source, f"{names.env} {name}", (
                f"expected text or a whole number, as NCCL reads the variable, got "
                f"{quoted(given)}"))])
        value = str(int(given)) if isinstance(given, int) else given
        if name == "NCCL_NVLS_ENABLE":
            if value not in ("0", "1"):
                raise InputError([Problem(names.source, f"{names.env} {name}", (
                    f"expected 0 (no NVLS or NVLSTree) or 1, got {quoted(value)}"))])
            nccl["nvls"] = value == "1"
        else:
            nccl[ENV[name]] = value
    return nccl


def answer(asked: Question, simulate: bool = False) -> NcclTable:
    """The table of :func:`query` for what it asks (:func:`question`)."""
    scenario, names, origin = asked.scenario, asked.names, asked.origin
    setup = prepare(scenario, select=False)
    machine = setup.machine
    found = _machine_problem(scenario, setup, names) or pick_problem(
        machine, scenario.sizes[0], scenario.collective, scenario.nccl, scenario.topology.label)
    if found is not None:
        field, message = found
        if origin.file is not None and origin.took(field):
            raise InputError([Problem(origin.file, field, message)])
        raise InputError([Problem(names.source, names.of(field, origin) if field != "algorithms"
                                  else names.topology, message)])
    rows = [_row(scenario, setup, size, names) for size in scenario.sizes]
    if simulate:
        rows = _simulated(scenario, rows, names)
    hosts = machine.layout.host_count
    version = scenario.nccl.version.value if machine.library is Library.NCCL else ""
    return NcclTable(scenario.topology.label, scenario.collective.value, machine.library.value,
                     version, machine.ranks, hosts, tuple(rows))


def _machine_problem(scenario: Scenario, setup: Setup, names: Names) -> tuple[str, str] | None:
    """(the field, what was expected) where the machine leaves NCCL's model nothing to answer,
    in the query's words: one rank, where NCCL picks nothing (it copies the buffer), and a
    collective other than allreduce on RCCL's GPUs, whose model has no other."""
    machine, label = setup.machine, scenario.topology.label
    if machine.ranks == 1:
        return "topology", (f"expected more than one GPU: NCCL picks no algorithm on one rank "
                            f"(it copies the buffer), got topology {label} of one GPU")
    if machine.library is Library.RCCL and scenario.collective is not Collective.ALLREDUCE:
        return "collective", (f"expected allreduce on topology {label}, the one collective "
                              f"RCCL's model answers, got {scenario.collective.value}")
    return None


def _row(scenario: Scenario, setup: Setup, size: int, names: Names) -> SizeTuning:
    """NCCL's answer at ``size``: the point ``algorithms: auto`` runs there
    (:func:`~simulator.plan.nccl_runs`), NCCL's time for it (its plan's ``nccl_time_s``) and
    its channels."""
    machine = setup.machine
    point = nccl_runs(scenario, machine, size)
    if point is None:  # pick_problem has ruled out every machine NCCL picks nothing on
        raise InputError([Problem(names.source, names.sizes, f"NCCL's model picks nothing "
                                                             f"at {size} bytes")])
    nccl = nccl_point(machine, point.algorithm.nccl, size, scenario.collective, scenario.nccl,
                      point.protocol, dtype=scenario.dtype.name, op=scenario.reduce_op)
    pick = nccl.pick
    assert pick is not None  # nccl_runs found it
    return SizeTuning(size, _algorithm(pick), pick.protocol.value,
                      _channels(scenario, setup, pick, size), nccl.predicted_s * 1e6)


def _algorithm(pick: NcclPick) -> str:
    """NCCL's name of what it runs: the tuner's algorithm, the symmetric kernel, or RCCL's
    MSCCL schedule."""
    if pick.symmetric is not None:
        return pick.symmetric.value
    if pick.msccl:
        return f"MSCCL {pick.msccl}"
    assert pick.family is not None
    return pick.family.value


def _channels(scenario: Scenario, setup: Setup, pick: NcclPick, size: int) -> int | None:
    """The channels NCCL runs its tuner's pick on (None for a symmetric kernel, RCCL's GPUs:
    not modelled)."""
    if pick.family is None or pick.symmetric is not None or pick.msccl \
            or setup.machine.library is not Library.NCCL:
        return None
    return nccl_channels(system_of(setup.machine), pick.family, pick.protocol, size)


def _simulated(scenario: Scenario, rows: Sequence[SizeTuning],
               names: Names) -> list[SizeTuning]:
    """``rows`` with the simulated time of each size's pick, run as ``algorithms: auto`` runs
    it, after the checks ``run`` makes before it simulates (:func:`simulator.runner.
    checked_setup`, :func:`~simulator.runner.plan_points`, which leaves out a point too large
    to trace, :func:`~simulator.plan.traced_problem`): InputError for any problem and any
    point left out, each saying why, before anything runs (asked to simulate, the query
    answers every size or none)."""
    from dataclasses import replace

    from simulator.runner import checked_setup, plan_points, settings_of, simulate

    settings = settings_of(scenario)
    try:
        setup = checked_setup(scenario, settings)
        left_out = plan_points(scenario, setup, settings).left_out
    except InputError as error:
        raise InputError([Problem(names.source, names.sizes if problem.field == "algorithms"
                                  else names.of(problem.field), problem.message)
                          if problem.file == scenario.source else problem
                          for problem in error.problems]) from None
    if left_out:
        raise InputError([Problem(names.source, names.sizes, f"expected sizes it can "
                                                             f"simulate: {left.note}")
                          for left in left_out])
    frame = simulate(scenario)  # planned again, as checked: a few milliseconds
    times = dict(zip(frame.size_bytes.tolist(), frame.sim_time_s.tolist(), strict=True))
    return [replace(row, sim_time_us=times[row.size_bytes] * 1e6) if row.size_bytes in times
            else row for row in rows]
