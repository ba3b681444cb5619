"""Scenario files and mappings in, a validated :class:`~simulator.scenario.spec.Scenario` out.

The schema is docs/scenarios.md. Every problem of an input is reported at once, each as
``file: field: what was expected`` (:class:`~simulator.errors.InputError`); unknown keys are
errors. A topology is a builder (``kind``) with its parameters, a ``preset`` from
``topologies/`` whose parameters the scenario may override, or NCCL's topology file
(``nccl_xml``, :mod:`.ncclxml`). :func:`scenario_from_dict` and
:func:`load_scenario` give the same messages: the second only reads the file first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from simulator.algorithms.registry import REGISTRY, composable_names
from simulator.errors import InputError, Problem, quoted
from simulator.limits import MAX_SIZE_BYTES
from simulator.model.collective import Collective
from simulator.model.execution import Execution
from simulator.model.machine import GpuSpec
from simulator.model.nccl import LATEST, Protocol
from simulator.model.nccl_env import (
    LIBRARIES,
    VERSIONS,
    NcclEnv,
    library_of,
    rccl_problem,
    version_of,
)
from simulator.model.nccl_symmetric import SYMMETRIC_VERSIONS
from simulator.model.nccl_terms import Library
from simulator.model.nccl_view import NcclView, read_graph_dump, read_log
from simulator.model.reduction import DTYPES, ReduceOp
from simulator.model.topology import BUILDERS, Param, ParamValue
from simulator.scenario.faults import read_faults
from simulator.scenario.fields import FieldReader, load_yaml_mapping, parse_yaml_mapping
from simulator.scenario.msccl import is_msccl, msccl_problems
from simulator.scenario.ncclxml import nccl_xml_topology
from simulator.scenario.presets import preset_names, preset_text
from simulator.scenario.rules import (
    MAX_CHANNELS,
    duplicate_problem,
    inner_of,
    name_problem,
    option_kinds,
    piece_problem,
    size_problem,
    sizes_count_problem,
    topology_issues,
)
from simulator.scenario.spec import ALL, AUTO, Scenario, TopologySpec
from simulator.scenario.training import Imports, read_training
from simulator.settings import Engine, RunSettings
from simulator.units import parse_bandwidth, parse_count, parse_flag, parse_size, parse_time

_KEYS = ("name", "topology", "collective", "algorithms", "sizes", "dtype", "op", "gpu",
         "piece_size", "chunk_size", "algorithm_options", "execution", "protocol", "channels",
         "engine", "verify", "fast_forward", "output", "training", "nccl", "faults")
_MOVED = {"inter_algorithm": "it moved to algorithm_options: {hierarchical: {inter: NAME}}"}
"""Keys earlier versions accepted, and where they went."""


def load_scenario(path: str | Path | Mapping[str, Any], *,
                  imports: Imports = Imports.REFUSE) -> Scenario:
    """Read and validate a scenario file; raises InputError listing every problem in it.
    A mapping is validated as it stands (:func:`scenario_from_dict`). A training model given as
    ``{torch: MODULE:FACTORY}`` is imported only with ``imports=Imports.ALLOW`` (:class:`Imports`;
    the default refuses it)."""
    if isinstance(path, Mapping):
        return scenario_from_dict(path, imports=imports)
    path = Path(path)
    listed = {"sizes": lambda count: sizes_count_problem(count, counting=True)}
    return scenario_from_dict(load_yaml_mapping(path, listed), source=str(path),
                              default_name=path.stem, imports=imports)


def scenario_from_dict(data: Mapping[str, Any], *, source: str = "<dict>",
                       default_name: str = "scenario",
                       imports: Imports = Imports.REFUSE) -> Scenario:
    """Validate a scenario given as a mapping, with exactly the messages of a scenario file
    (``source`` names it in them); raises InputError listing every problem. ``imports`` says
    what to do with a ``{torch: MODULE:FACTORY}`` model (:class:`Imports`: refuse it, the
    default; import it; or leave it unbuilt).

    >>> scenario_from_dict({"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s",
    ...                                  "latency": "1us"}, "sizes": ["1MiB"]}).sizes
    (1048576,)
    """
    if not isinstance(data, Mapping):
        raise InputError([Problem(source, "", f"expected a mapping of keys to values, got "
                                              f"a {type(data).__name__}")])
    reader = FieldReader(source)
    for key, where in _MOVED.items():
        if key in data:
            reader.problem(key, f"unknown key; {where}")
    reader.check_keys({k: v for k, v in data.items() if k not in _MOVED}, "", _KEYS,
                      required=("topology",) if "training" in data else ("topology", "sizes"))

    name = data.get("name", default_name)
    if name_problem(name):
        reader.problem("name", name_problem(name) or "")
        name = default_name
    collective_name = reader.choice("collective", data.get("collective", "allreduce"),
                                    [c.value for c in Collective], "a collective")
    collective = Collective(collective_name) if collective_name else Collective.ALLREDUCE
    dtype = _dtype(reader, data.get("dtype", "float32"))
    op_name = reader.choice("op", data.get("op", "sum"), [o.value for o in ReduceOp], "an op")
    verify = reader.parse("verify", data.get("verify", True), parse_flag)
    fast_forward = reader.parse("fast_forward", data.get("fast_forward", True), parse_flag)

    topology = _topology(reader, data.get("topology"))
    algorithms = _algorithms(reader, data.get("algorithms", ALL), collective)
    sizes = _sizes(reader, data.get("sizes"), dtype) if "sizes" in data else ()
    gpu = _gpu(reader, data.get("gpu", {}))
    piece_bytes = _piece_bytes(reader, data, dtype, sizes)
    options = _options(reader, data.get("algorithm_options", {}), collective)
    execution = reader.choice("execution", data.get("execution"),
                              [e.value for e in Execution], "an execution model") \
        if "execution" in data else None
    protocol = reader.choice("protocol", data.get("protocol", AUTO),
                             [AUTO, *(p.value for p in Protocol)], "a protocol")
    engine = reader.choice("engine", data.get("engine", Engine.AUTO.value),
                           [e.value for e in Engine], "an engine")
    channels = data.get("channels", AUTO)
    if channels != AUTO and (isinstance(channels, bool) or not isinstance(channels, int)):
        reader.problem("channels", f"expected 'auto' or a whole number from 1 to {MAX_CHANNELS}, "
                                   f"got {quoted(channels)}")
        channels = AUTO
    nccl = _nccl(reader, data.get("nccl", {}), collective, source)
    training = read_training(reader, data["training"], imports) if "training" in data else None
    if "training" in data and "sizes" in data:
        reader.problem("sizes", "expected no sizes with training (the gradient buckets give them)")
    faults = read_faults(reader, data["faults"], topology.ranks if topology is not None else None) \
        if "faults" in data else ()
    output = data.get("output")
    if output is not None and (not isinstance(output, str) or not output.strip()):
        reader.problem("output", f"expected a directory path, got {quoted(output)}")
    reader.raise_if_any()
    assert topology is not None and gpu is not None and options is not None
    return Scenario(name=name, source=source, topology=topology, collective=collective,
                    algorithms=algorithms, sizes=sizes, dtype=dtype,
                    reduce_op=ReduceOp(op_name), gpu=gpu,
                    output=None if output is None else Path(output), piece_bytes=piece_bytes,
                    algorithm_options=options, execution=None if execution is None else Execution(execution),
                    protocol=None if protocol in (None, AUTO) else Protocol(protocol),
                    nccl_choice=data.get("algorithms") == AUTO,
                    channels=None if channels == AUTO else channels,
                    run=RunSettings(verify=bool(verify), engine=Engine(engine)
                                    if engine is not None else Engine.AUTO,
                                    fast_forward=bool(fast_forward)),
                    training=training, nccl=nccl, faults=faults)


def topology_from_dict(value: Mapping[str, Any], *, source: str) -> TopologySpec:
    """A scenario's ``topology:`` mapping read and checked as :func:`scenario_from_dict` reads
    it, alone (``topo``'s, :mod:`simulator.scenario.topology_word`); ``source`` names the file
    its relative names are read beside and its problems; InputError listing every one."""
    reader = FieldReader(source)
    spec = _topology(reader, value)
    reader.raise_if_any()
    assert spec is not None  # _topology records a problem wherever it returns None
    return spec


def load_preset(name: str) -> TopologySpec:
    """Topology preset ``name``: ``kind`` plus every required parameter of that builder;
    KeyError if there is no such preset, InputError if it is malformed."""
    text = preset_text(name)
    if text is None:
        raise KeyError(name)
    return _preset(parse_yaml_mapping(text, f"topologies/{name}.yaml"), name)


def load_preset_file(path: Path) -> TopologySpec:
    """A preset kept in a file of its own, such as one ``calibrate`` wrote."""
    return _preset(load_yaml_mapping(path), path.stem, str(path))


def _preset_path(name: str, scenario_file: str) -> Path | None:
    """A preset file named in a scenario, beside the scenario file (:func:`_beside`); None
    where there is no such file."""
    path = Path(_beside(name, scenario_file))
    return path if path.is_file() else None


def _preset(data: Mapping[str, Any], name: str, file: str | None = None) -> TopologySpec:
    file = file or f"topologies/{name}.yaml"
    reader = FieldReader(file)
    kind = reader.choice("kind", data.get("kind"), BUILDERS, "a topology kind")
    params = _builder_params(reader, "", kind, data, skip="kind", require=True) if kind else None
    if kind is not None and params is not None:
        for where, message in topology_issues(kind, params, prefix=""):
            reader.problem(where or "kind", message)
    reader.raise_if_any()
    assert kind is not None and params is not None
    return TopologySpec(kind, params, label=name)


def _dtype(reader: FieldReader, value: object) -> np.dtype[Any]:
    return np.dtype(reader.choice("dtype", value, DTYPES, "a dtype") or "float32")


def _topology(reader: FieldReader, value: object) -> TopologySpec | None:
    spec = reader.mapping("topology", value) if value is not None else None
    if spec is None:
        return None
    forms = [key for key in ("preset", "kind", "nccl_xml") if key in spec]
    if len(forms) != 1:
        reader.problem("topology", "expected one of 'preset: NAME', 'kind: BUILDER' or "
                                   "'nccl_xml: FILE', got " + (" and ".join(forms) or "none"))
        return None
    if "nccl_xml" in spec:
        file = spec["nccl_xml"]
        if not isinstance(file, str) or not file.strip():
            reader.problem("topology.nccl_xml", f"expected the file NCCL_TOPO_DUMP_FILE wrote, "
                                                f"got {quoted(file)}")
            return None
        return nccl_xml_topology(reader, spec, _beside(file, reader.file))
    if "kind" in spec:
        kind = reader.choice("topology.kind", spec["kind"], BUILDERS, "a topology kind")
        params = (_builder_params(reader, "topology", kind, spec, skip="kind", require=True)
                  if kind else None)
        return _checked(reader, kind, params, kind) if kind and params is not None else None
    preset = spec["preset"]
    if isinstance(preset, str) and preset.endswith((".yaml", ".yml")):
        path = _preset_path(preset, reader.file)
        if path is None:
            reader.problem("topology.preset", f"no such preset file {quoted(preset)}")
            return None
        base = load_preset_file(path)
        preset = path.stem
    elif name_problem(preset):
        reader.problem("topology.preset", f"expected a preset name such as 'dgx_h100', or a "
                                          f".yaml file, got {quoted(preset)}")
        return None
    elif preset_text(str(preset)) is None:
        reader.problem("topology.preset", f"no preset {quoted(preset)}; expected one of "
                                          f"{', '.join(preset_names())} or a .yaml file")
        return None
    else:
        base = load_preset(str(preset))
    overrides = _builder_params(reader, "topology", base.kind, spec, skip="preset", require=False)
    if overrides is None:
        return None
    changed = [key for key, value in overrides.items() if base.params.get(key) != value]
    label = str(preset) + (f"[{','.join(f'{k}={spec[k]}' for k in changed)}]" if changed else "")
    return _checked(reader, base.kind, {**base.params, **overrides}, label)


def _checked(reader: FieldReader, kind: str, params: Mapping[str, ParamValue],
             label: str) -> TopologySpec | None:
    """The topology, or None after recording what the typed checks (rank limit) found."""
    issues = topology_issues(kind, params)
    for where, message in issues:
        reader.problem(where, message)
    return None if issues else TopologySpec(kind, params, label=label)


def _builder_params(reader: FieldReader, prefix: str, kind: str, spec: Mapping[str, object],
                    skip: str, require: bool) -> dict[str, ParamValue] | None:
    builder = BUILDERS[kind]
    kinds = builder.params
    required = [k for k in kinds if k not in builder.optional] if require else []
    before = len(reader.problems)
    reader.check_keys(spec, prefix, [skip, *kinds], required)
    params: dict[str, ParamValue] = {}
    defaults = builder.defaults
    for key, param in kinds.items():
        if key in spec and key in defaults and spec[key] == defaults[key] \
                and type(spec[key]) is type(defaults[key]):
            params[key] = defaults[key]  # the default, written out (0: "derive it")
        elif key in spec:
            value = reader.parse(f"{prefix}.{key}" if prefix else key, spec[key], param.parse)
            if isinstance(value, str) and param is Param.FILE:
                value = _beside(value, reader.file)
            if value is not None:
                params[key] = value
    return params if len(reader.problems) == before else None


def _beside(name: str, file: str) -> str:
    """A file named in ``file``: as given where it is absolute, else beside ``file``, so a
    scenario names its files relative to itself wherever it is run from, and a file of the same
    name in the working directory is never read instead. A scenario given as a mapping (its
    ``file`` is ``<dict>`` or the like) has no directory: its names are as given."""
    if Path(name).is_absolute() or file.startswith("<"):
        return name
    return str(Path(file).parent / name)


def _algorithms(reader: FieldReader, value: object, collective: Collective) -> tuple[str, ...] | None:
    known = list(REGISTRY[collective])
    if value in (ALL, AUTO):
        return None
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names:
        reader.problem("algorithms", f"expected 'all' or a list of algorithm names "
                                     f"({', '.join(known)}), or 'auto' (NCCL's choice), got "
                                     f"{quoted(value)}")
        return None
    for i, name in enumerate(names):
        if is_msccl(name):
            for problem in msccl_problems(name, reader.file, collective):
                reader.problem(f"algorithms[{i}]", problem)
        else:
            reader.choice(f"algorithms[{i}]", name, known, f"an algorithm for {collective.value}")
    repeated = duplicate_problem(names, "algorithm")
    if repeated:
        reader.problem("algorithms", repeated)
    return tuple(names)


def _sizes(reader: FieldReader, value: object, dtype: np.dtype[Any]) -> tuple[int, ...]:
    if isinstance(value, Mapping):
        reader.check_keys(value, "sizes", ("from", "to", "factor"), required=("from", "to"))
        low = reader.parse("sizes.from", value.get("from"), parse_size) if "from" in value else None
        high = reader.parse("sizes.to", value.get("to"), parse_size) if "to" in value else None
        factor = reader.parse("sizes.factor", value.get("factor", 2), _factor)
        if low is None or high is None or factor is None:
            return ()
        if not 0 < low <= high:
            reader.problem("sizes", f"expected 0 < from ≤ to, got from={low} to={high} bytes")
            return ()
        sizes, size = [], low
        while size <= high:
            sizes.append(size)
            size *= factor
        checks = [("sizes.from", low)]  # every size is from × factor^k: checking `from` suffices
        if sizes[-1] > MAX_SIZE_BYTES:
            reader.problem("sizes.to", f"expected at most 1TiB per rank, got {sizes[-1]} bytes")
    elif isinstance(value, list) and value:
        if (too_many := sizes_count_problem(len(value))) is not None:
            reader.problem("sizes", too_many)  # before a million items are parsed
            return ()
        parsed = [reader.parse(f"sizes[{i}]", item, parse_size) for i, item in enumerate(value)]
        checks = [(f"sizes[{i}]", size) for i, size in enumerate(parsed) if size is not None]
        sizes = [size for _, size in checks]
        repeated = duplicate_problem(sizes, "size")
        if repeated:
            reader.problem("sizes", repeated)
    else:
        reader.problem("sizes", f"expected a list of sizes or {{from, to, factor}}, got {quoted(value)}")
        return ()
    for where, size in checks:
        problem = size_problem(size, dtype)
        if problem:
            reader.problem(where, problem)
    return tuple(sizes)


def _factor(value: object) -> int:
    factor = parse_count(value)
    if factor < 2:
        raise ValueError(f"expected a whole number ≥ 2, got {quoted(value)}")
    return factor


def _nccl(reader: FieldReader, value: object, collective: Collective, source: str) -> NcclEnv:
    """``nccl: {algo: LIST, proto: LIST, version: V, symmetric: BOOL, nvls: BOOL, graph: FILE |
    log: FILE, gpus_per_thread: N, library: nccl | rccl}``, NCCL_ALGO and NCCL_PROTO in NCCL's
    list syntax (:mod:`simulator.model.nccl_env`), the NCCL whose tuner picks, whether the
    buffers are registered as symmetric windows, whether NVLink SHARP is on (``nvls: false`` as
    NCCL_NVLS_ENABLE=0), NCCL's own view of the machine from its graph dump or INFO log (a file
    named relative to the scenario, :mod:`simulator.model.nccl_view`), how many GPUs one thread
    launches on (nccl-tests' ``-g``, :mod:`simulator.model.launch`), and the library the GPUs
    run (issue 38: RCCL on AMD Instinct, checked against the topology when it is built); unset
    where a problem was recorded."""
    spec = reader.mapping("nccl", value)
    if spec is None:
        return NcclEnv()
    reader.check_keys(spec, "nccl", ("algo", "proto", "version", "symmetric", "nvls", "graph",
                                     "log", "gpus_per_thread", "library"))
    view = _nccl_view(reader, spec, source)
    given: dict[str, Any] = {key: spec[key] for key in ("algo", "proto") if key in spec}
    env = NcclEnv(**given)
    problems = env.problems(collective)
    for where, message in problems:
        reader.problem(where, message)
    version = version_of(spec.get("version", LATEST.value))
    if version is None:
        reader.problem("nccl.version", (
            f"expected the NCCL whose tuner picks: {VERSIONS} (2.26: NCCL 2.26-2.27; 2.30: "
            f"2.30.x; 2.31: the 2.31.0a7 dev source), got {quoted(spec['version'])}"))
        problems.append(("nccl.version", ""))
    if view is not None and view[0] is None:
        problems.append(("nccl", ""))
    library = library_of(spec.get("library", Library.NCCL.value))
    if library is None:
        reader.problem("nccl.library", f"expected the collective library: {LIBRARIES} (rccl on "
                                       f"AMD Instinct GPUs), got {quoted(spec['library'])}")
        problems.append(("nccl.library", ""))
    elif library is Library.RCCL and isinstance(env.algo, str) and rccl_problem(env.algo):
        reader.problem("nccl.algo", rccl_problem(env.algo) or "")
        problems.append(("nccl.algo", ""))
    symmetric = spec.get("symmetric", False)
    if not isinstance(symmetric, bool):
        reader.problem("nccl.symmetric", "expected true (the buffers are registered as "
                                         f"symmetric windows) or false, got {quoted(symmetric)}")
        problems.append(("nccl.symmetric", ""))
    elif symmetric and collective in (Collective.ALLGATHER, Collective.REDUCE_SCATTER):
        reader.problem("nccl.symmetric", (
            f"expected false for {collective.value}: on registered buffers NCCL runs its "
            "symmetric allgather and reduce-scatter kernels, which are not modelled (the "
            "allreduce's are)"))
        problems.append(("nccl.symmetric", ""))
    elif symmetric and library is Library.RCCL:
        reader.problem("nccl.symmetric", "expected false with library rccl: the symmetric "
                                         "kernels modelled are NCCL's (src/sym_kernels.cc)")
        problems.append(("nccl.symmetric", ""))
    elif symmetric and version is not None and version not in SYMMETRIC_VERSIONS:
        named = " or ".join(v.value for v in SYMMETRIC_VERSIONS)
        reader.problem("nccl.symmetric", (
            f"expected nccl.version {named} with symmetric: true: the symmetric kernels "
            f"modelled are those of NCCL {named} (src/sym_kernels.cc), got version "
            f"{version.value}"))
        problems.append(("nccl.symmetric", ""))
    nvls = spec.get("nvls", True)
    if not isinstance(nvls, bool):
        reader.problem("nccl.nvls", "expected true (NCCL's default) or false (as "
                                    f"NCCL_NVLS_ENABLE=0: no NVLS or NVLSTree), got {quoted(nvls)}")
        problems.append(("nccl.nvls", ""))
    elif not nvls and symmetric is True:
        reader.problem("nccl.nvls", (
            "expected true with symmetric: true: the symmetric kernels modelled multicast on "
            "NVLS's objects, which NCCL_NVLS_ENABLE=0 never creates"))
        problems.append(("nccl.nvls", ""))
    gpus_per_thread = spec.get("gpus_per_thread", 1)
    if not isinstance(gpus_per_thread, int) or isinstance(gpus_per_thread, bool) \
            or gpus_per_thread < 1:
        gpus_per_thread = 1
        reader.problem("nccl.gpus_per_thread", (
            "expected how many GPUs one thread launches each collective on (nccl-tests' -g), "
            f"a whole number from 1, got {quoted(spec['gpus_per_thread'])}"))
        problems.append(("nccl.gpus_per_thread", ""))
    if problems:
        return NcclEnv()
    env = replace(env, version=version or LATEST, symmetric=symmetric is True, nvls=nvls is True,
                  gpus_per_thread=gpus_per_thread, library=library if "library" in spec else None)
    return env if view is None else replace(env, view=view[0], view_key=view[1],
                                            view_file=view[2])


def _nccl_view(reader: FieldReader, spec: Mapping[str, Any],
               source: str) -> tuple[NcclView | None, str, str] | None:
    """``nccl.graph`` or ``nccl.log`` read (None where neither is given; a None view where a
    problem was recorded): the view, the key and the file as the scenario names it."""
    given = [key for key in ("graph", "log") if key in spec]
    if not given:
        return None
    if len(given) > 1:
        reader.problem("nccl.log", "expected one of nccl.graph (NCCL_GRAPH_DUMP_FILE's XML) and "
                                   "nccl.log (an NCCL_DEBUG=INFO log), not both")
        return None, "", ""
    key = given[0]
    name = spec[key]
    if not isinstance(name, str) or not name:
        reader.problem(f"nccl.{key}", f"expected a file name, got {quoted(name)}")
        return None, key, ""
    read = read_graph_dump if key == "graph" else read_log
    try:
        return read(Path(_beside(name, source))), key, name
    except InputError as error:
        for problem in error.problems:
            where = f"{problem.field}: " if problem.field else ""
            reader.problem(f"nccl.{key}", f"{problem.file}: {where}{problem.message}")
        return None, key, name


def _gpu(reader: FieldReader, value: object) -> GpuSpec | None:
    spec = reader.mapping("gpu", value)
    if spec is None:
        return None
    reader.check_keys(spec, "gpu", ("reduce_bandwidth", "launch_latency"))
    bandwidth = (reader.parse("gpu.reduce_bandwidth", spec["reduce_bandwidth"], parse_bandwidth)
                 if "reduce_bandwidth" in spec else None)
    launch = (reader.parse("gpu.launch_latency", spec["launch_latency"], parse_time)
              if "launch_latency" in spec else 0.0)
    return GpuSpec(bandwidth, launch or 0.0)


def _piece_bytes(reader: FieldReader, data: Mapping[str, Any], dtype: np.dtype[Any],
                 sizes: tuple[int, ...]) -> int | None:
    """``piece_size``, or its alias ``chunk_size`` (NCCL's word for it), not both."""
    given = [key for key in ("piece_size", "chunk_size") if key in data]
    if not given:
        return None
    if len(given) == 2:
        reader.problem("chunk_size", "expected piece_size or its alias chunk_size, not both")
        return None
    piece_bytes = reader.parse(given[0], data[given[0]], parse_size)
    problem = piece_problem(piece_bytes, dtype, sizes) if piece_bytes is not None else None
    if problem:
        reader.problem(given[0], problem.replace("piece_size", given[0]))
    return piece_bytes


def _options(reader: FieldReader, value: object, collective: Collective) -> dict[str, Any] | None:
    """``algorithm_options: {NAME: {FIELD: VALUE}}``, each block parsed against that algorithm's
    options dataclass."""
    blocks = reader.mapping("algorithm_options", value)
    if blocks is None:
        return None
    options: dict[str, Any] = {}
    for name, block in blocks.items():
        where = f"algorithm_options.{name}"
        if reader.choice(where, name, REGISTRY[collective], f"an algorithm for {collective.value}") is None:
            continue
        kinds = option_kinds(REGISTRY[collective][name].Options)
        if not kinds:
            reader.problem(where, f"{name} has no options")
            continue
        fields_ = reader.mapping(where, block)
        if fields_ is None:
            continue
        reader.check_keys(fields_, where, kinds)
        values = {}
        for key, hint in kinds.items():
            if key in fields_:
                values[key] = _option(reader, f"{where}.{key}", fields_[key], hint)
        options[name] = REGISTRY[collective][name].Options(
            **{k: v for k, v in values.items() if v is not None})
    return options


def _option(reader: FieldReader, where: str, value: object, hint: Any) -> object:
    """One option's value, parsed by its declared kind: another algorithm, a count or a flag."""
    inner = inner_of(hint)
    if inner is not None:
        chosen = reader.choice(where, value, composable_names(inner.collective), inner.what)
        return REGISTRY[inner.collective][chosen] if chosen else None
    if hint is bool:
        return reader.parse(where, value, parse_flag)
    if hint is int:
        return reader.parse(where, value, parse_count)
    raise TypeError(f"{where}: options of type {quoted(hint)} are not supported yet")
