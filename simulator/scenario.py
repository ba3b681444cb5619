"""Scenario files: YAML in, a validated, typed :class:`Scenario` out (units resolved to SI).

The schema is DESIGN.md §3. Every problem of a file is reported at once, each as
``file: field: what was expected`` (:class:`~simulator.errors.InputError`); unknown keys are
errors. A topology is either a builder (``kind``) with its parameters, or a ``preset`` from
``topologies/`` whose parameters the scenario may override.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import networkx as nx
import numpy as np

from simulator.collectives import Collective, algorithm_names
from simulator.costmodel import GpuSpec
from simulator.data import DTYPES
from simulator.fields import FieldReader, boolean, count, load_yaml_mapping
from simulator.reduction import ReduceOp
from simulator.topology import BUILDERS, Param
from simulator.units import parse_bandwidth, parse_size, parse_time

PRESET_DIR = Path(__file__).resolve().parent.parent / "topologies"
"""Where ``topology.preset: NAME`` is looked up (``topologies/NAME.yaml`` of this checkout)."""

ALL = "all"
_KEYS = ("name", "topology", "collective", "algorithms", "sizes", "dtype", "op", "gpu",
         "chunk_size", "inter_algorithm", "verify", "output")
INTER_ALGORITHMS = ("ring", "tree", "halving_doubling", "direct")
MAX_RANKS = 8192              # a ring of 8192 ranks is ~134M messages: hours, not minutes
MAX_FULLY_CONNECTED = 1024    # p(p-1) cables
MAX_PIECES = 1 << 20          # pipeline pieces per buffer (each a message per hop)
MAX_SIZE = 1 << 40            # bytes per rank: beyond any GPU's memory
"""Allreduce algorithms ``hierarchical`` may run across nodes (``inter_algorithm``)."""
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_PARSERS = {Param.COUNT: count, Param.BANDWIDTH: parse_bandwidth, Param.TIME: parse_time,
            Param.FLAG: boolean}


@dataclass(frozen=True)
class TopologySpec:
    """A builder and its parameters (SI units), labelled by the preset or kind it came from."""

    label: str
    kind: str
    params: tuple[tuple[str, float | bool], ...]

    def build(self) -> nx.DiGraph:
        """The topology graph."""
        return BUILDERS[self.kind].build(**dict(self.params))


@dataclass(frozen=True)
class Scenario:
    """One experiment: a topology, a collective, the algorithms and sizes to run, the data."""

    name: str
    source: str
    topology: TopologySpec
    collective: Collective
    algorithms: tuple[str, ...] | None  # None = every algorithm that applies ("all")
    sizes: tuple[int, ...]
    dtype: np.dtype
    op: ReduceOp
    gpu: GpuSpec
    verify: bool
    output: Path
    chunk_bytes: int | None = None  # pipelining piece size (``chunk_size``); None = each default
    inter_algorithm: str = "ring"   # what ``hierarchical`` runs across nodes


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; raises InputError listing every problem in it."""
    path = Path(path)
    data = load_yaml_mapping(path)
    reader = FieldReader(str(path))
    reader.check_keys(data, "", _KEYS, required=("topology", "sizes"))

    name = data.get("name", path.stem)
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        reader.problem("name", f"expected a name of letters, digits, '.', '_' or '-', got {name!r}")
        name = path.stem
    collective_name = reader.choice("collective", data.get("collective", "allreduce"),
                                    [c.value for c in Collective], "a collective")
    collective = Collective(collective_name) if collective_name else Collective.ALLREDUCE
    dtype_name = data.get("dtype", "float32")
    if dtype_name == "bfloat16":
        reader.problem("dtype", "bfloat16 is not supported (numpy has no bfloat16 type); "
                                f"use one of {', '.join(DTYPES)}")
        dtype_name = None
    else:
        dtype_name = reader.choice("dtype", dtype_name, DTYPES, "a dtype")
    dtype = np.dtype(dtype_name or "float32")
    op_name = reader.choice("op", data.get("op", "sum"), [o.value for o in ReduceOp], "an op")
    verify = reader.parse("verify", data.get("verify", True), boolean)

    topology = _topology(reader, data.get("topology"))
    algorithms = _algorithms(reader, data.get("algorithms", ALL), collective)
    sizes = _sizes(reader, data.get("sizes"), dtype) if "sizes" in data else ()
    gpu = _gpu(reader, data.get("gpu", {}))
    chunk_bytes = (reader.parse("chunk_size", data["chunk_size"], parse_size)
                   if "chunk_size" in data else None)
    if chunk_bytes is not None and chunk_bytes < dtype.itemsize:
        reader.problem("chunk_size", f"expected at least one {dtype.name} element "
                                     f"({dtype.itemsize} bytes), got {chunk_bytes}")
    elif chunk_bytes is not None and sizes and max(sizes) // chunk_bytes > MAX_PIECES:
        reader.problem("chunk_size", f"expected at most {MAX_PIECES} pieces per buffer, got "
                                     f"{max(sizes) // chunk_bytes} ({max(sizes)} / {chunk_bytes}"
                                     " bytes); use a larger chunk_size")
    if topology is not None:
        _check_rank_count(reader, topology)
    inter = reader.choice("inter_algorithm", data.get("inter_algorithm", "ring"),
                          [n for n in INTER_ALGORITHMS if n in algorithm_names(Collective.ALLREDUCE)],
                          "an inter-node allreduce")
    output = data.get("output", f"results/{name}")
    if not isinstance(output, str) or not output.strip():
        reader.problem("output", f"expected a directory path, got {output!r}")
        output = f"results/{name}"
    reader.raise_if_any()
    assert topology is not None and gpu is not None  # guaranteed when no problem was recorded
    return Scenario(name=name, source=str(path), topology=topology, collective=collective,
                    algorithms=algorithms, sizes=sizes, dtype=dtype, op=ReduceOp(op_name),
                    gpu=gpu, verify=bool(verify), output=Path(output), chunk_bytes=chunk_bytes,
                    inter_algorithm=inter or "ring")


def _check_rank_count(reader: FieldReader, topology: TopologySpec) -> None:
    """Keep runs within what a 24 GiB, 2-core machine simulates in reasonable time."""
    params = dict(topology.params)
    ranks = int(params.get("ranks", params.get("nodes", 1) * params.get("gpus_per_node", 1)))
    limit = MAX_FULLY_CONNECTED if topology.kind == "fully_connected" else MAX_RANKS
    if ranks > limit:
        reader.problem("topology", f"expected at most {limit} GPUs for kind {topology.kind}, "
                                   f"got {ranks}")


def _topology(reader: FieldReader, value: object) -> TopologySpec | None:
    spec = reader.mapping("topology", value) if value is not None else None
    if spec is None:
        return None
    if ("preset" in spec) == ("kind" in spec):
        reader.problem("topology", "expected either 'preset: NAME' or 'kind: BUILDER', not "
                                   + ("both" if "preset" in spec else "neither"))
        return None
    if "kind" in spec:
        kind = reader.choice("topology.kind", spec["kind"], BUILDERS, "a topology kind")
        if kind is None:
            return None
        params = _builder_params(reader, "topology", kind, spec, skip="kind", require=True)
        return TopologySpec(kind, kind, params) if params is not None else None
    preset = spec["preset"]
    if not isinstance(preset, str) or not _NAME.fullmatch(preset):
        reader.problem("topology.preset", f"expected a preset name such as 'dgx_h100', got {preset!r}")
        return None
    preset_path = PRESET_DIR / f"{preset}.yaml"
    if not preset_path.is_file():
        known = sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))
        reader.problem("topology.preset", f"no preset {preset!r} in {PRESET_DIR}; "
                                          f"expected one of {', '.join(known)}")
        return None
    base = load_preset(preset_path)
    overrides = _builder_params(reader, "topology", base.kind, spec, skip="preset", require=False)
    if overrides is None:
        return None
    changed = [key for key, value in overrides if dict(base.params).get(key) != value]
    label = preset + (f"[{','.join(f'{k}={spec[k]}' for k in changed)}]" if changed else "")
    return TopologySpec(label, base.kind, tuple({**dict(base.params), **dict(overrides)}.items()))


def load_preset(path: Path) -> TopologySpec:
    """A topology preset file: ``kind`` plus every required parameter of that builder."""
    data = load_yaml_mapping(path)
    reader = FieldReader(str(path))
    kind = reader.choice("kind", data.get("kind"), BUILDERS, "a topology kind")
    if kind is not None:
        params = _builder_params(reader, "", kind, data, skip="kind", require=True)
    reader.raise_if_any()
    return TopologySpec(path.stem, kind, params)


def _builder_params(reader: FieldReader, prefix: str, kind: str, spec: Mapping[str, object],
                    skip: str, require: bool) -> tuple[tuple[str, float], ...] | None:
    builder = BUILDERS[kind]
    required = [k for k in builder.params if k not in builder.optional] if require else []
    before = len(reader.problems)
    reader.check_keys(spec, prefix, [skip, *builder.params], required)
    params = []
    for key, kind_of in builder.params.items():
        if key in spec:
            field = f"{prefix}.{key}" if prefix else key
            value = reader.parse(field, spec[key], _PARSERS[kind_of])
            params.append((key, value))
    return tuple(params) if len(reader.problems) == before else None


def _algorithms(reader: FieldReader, value: object, collective: Collective) -> tuple[str, ...] | None:
    known = algorithm_names(collective)
    if value == ALL:
        return None
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names:
        reader.problem("algorithms", f"expected 'all' or a list of algorithm names "
                                     f"({', '.join(known)}), got {value!r}")
        return None
    for i, name in enumerate(names):
        reader.choice(f"algorithms[{i}]", name, known, f"an algorithm for {collective.value}")
    return tuple(names)


def _sizes(reader: FieldReader, value: object, dtype: np.dtype) -> tuple[int, ...]:
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
    elif isinstance(value, list) and value:
        sizes = [reader.parse(f"sizes[{i}]", item, parse_size) for i, item in enumerate(value)]
        checks = [(f"sizes[{i}]", size) for i, size in enumerate(sizes)]
    else:
        reader.problem("sizes", f"expected a list of sizes or {{from, to, factor}}, got {value!r}")
        return ()
    for field, size in checks:
        if size is not None and (size <= 0 or size % dtype.itemsize):
            reader.problem(field, f"expected a positive multiple of the {dtype.name} element size "
                                  f"({dtype.itemsize} bytes), got {size}")
        elif size is not None and size > MAX_SIZE:
            reader.problem(field, f"expected at most 1TiB per rank, got {size} bytes")
    if isinstance(value, Mapping) and sizes and sizes[-1] > MAX_SIZE:
        reader.problem("sizes.to", f"expected at most 1TiB per rank, got {sizes[-1]} bytes")
    return tuple(s for s in sizes if s is not None)


def _factor(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise ValueError(f"expected a whole number ≥ 2, got {value!r}")
    return value


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


__all__ = ["ALL", "INTER_ALGORITHMS", "PRESET_DIR", "Scenario", "TopologySpec", "load_preset",
           "load_scenario"]
