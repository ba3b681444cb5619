"""A scenario's ``training:`` section in, a :class:`~simulator.training.spec.TrainingSpec` out,
every problem reported as ``file: training.field: what was expected`` (docs/training.md)."""

from __future__ import annotations

import contextlib
import inspect
import math
import re
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Literal

from simulator.errors import UnitError, quoted
from simulator.limits import MAX_BATCH, MAX_SIZE_BYTES
from simulator.scenario.fields import FieldReader
from simulator.scenario.parallelism import read_parallelism
from simulator.training.compute import ACCELERATORS, Optimizer, Precision
from simulator.training.factory import network_from_factory
from simulator.training.network import BACKWARD_PER_FORWARD, Layer, Network, Tensor
from simulator.training.spec import Compute, TopologySweep, TrainingSpec
from simulator.training.transformer import Transformer
from simulator.training.zoo import NETWORKS
from simulator.training.zoo_llm import megatron_gpt, shape_problems
from simulator.units import (
    parse_bandwidth,
    parse_count,
    parse_counts,
    parse_flag,
    parse_flops,
    parse_seed,
    parse_size,
    parse_time,
)

KEYS = ("model", "batch", "gpu", "precision", "optimizer", "bucket_cap", "first_bucket",
        "overlap", "parallelism", "sweep", "chakra")
_TARGET = re.compile(r"(?!\d)\w+(?:\.(?!\d)\w+)*:(?!\d)\w+")
"""``package.module:factory``: dotted Python names, a colon and a name; nothing else can be
imported and called, so anything else is refused before any import is tried."""
SHAPE_COUNTS = ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "sequence", "experts",
                "top_k")
SHAPE_FLAGS = ("gated", "bias", "tied")
SHAPE_REQUIRED = ("layers", "hidden", "heads", "vocab", "sequence")
"""A ``model: {transformer: ...}``'s fields (:class:`~simulator.training.transformer.Transformer`'s,
``positions`` besides) and the ones without a default."""
FREE = "free"
"""``gpu: free``: compute costs nothing, the step is its communication alone."""


class Imports(Enum):
    """What reading a scenario does with a training model given as ``{torch: MODULE:FACTORY}``,
    which is built by importing MODULE and calling FACTORY, so by running the code they hold:
    only where the user asked for it (docs/training.md). A frozen option, passed down to the
    reader, never a global."""

    REFUSE = "refuse"  # an InputError naming the field: the default everywhere, and run
    #                    without --allow-import
    ALLOW = "allow"    # import and call, in a child process (simulator.training.factory):
    #                    run with --allow-import
    SKIP = "skip"      # import nothing and leave the model unbuilt (a Network without layers,
    #                    which train() refuses): topo, plot and sweep, which train nothing


def read_training(reader: FieldReader, value: object,
                  imports: Imports = Imports.REFUSE) -> TrainingSpec | None:
    """The section's spec, or None after recording its problems in ``reader``; a ``torch``
    model is built, refused or left unbuilt as ``imports`` says."""
    section = reader.mapping("training", value)
    if section is None:
        return None
    traced = "chakra" in section
    reader.check_keys(section, "training", KEYS, required=() if traced else ("model", "batch"))
    before = len(reader.problems)
    chakra = _chakra(reader, section) if traced else None
    network = _model(reader, section.get("model"), imports) if "model" in section else None
    if chakra is not None:
        network = Network("chakra", (), "a Chakra trace's step", str(chakra))
    batch = reader.parse("training.batch", section.get("batch", 1), _batch)
    precision = reader.choice("training.precision", section.get("precision", "mixed"),
                              [p.value for p in Precision], "a precision")
    compute = _compute(reader, section.get("gpu", "h100"),
                       Precision(precision) if precision else Precision.MIXED)
    optimizer, optimizer_s = _optimizer(reader, section.get("optimizer", "adam"))
    cap = (reader.parse("training.bucket_cap", section["bucket_cap"], _positive_size)
           if "bucket_cap" in section else None)
    first = section.get("first_bucket")
    first_limit: int | Literal["cap"] | None = "cap" if first == "cap" else None if first is None \
        else reader.parse("training.first_bucket", first, _size_or_cap)
    overlap = reader.parse("training.overlap", section.get("overlap", True), parse_flag)
    caps, topology, layouts = _sweep(reader, section.get("sweep", {}))
    parallelism = (read_parallelism(reader, section["parallelism"])
                   if "parallelism" in section else None)
    split = layouts or (parallelism is not None and not parallelism.plain)
    if split and network is not None and network.shape is None:
        reader.problem("training.parallelism" if parallelism is not None
                       else "training.sweep.parallelism",
                       f"a transformer model to split (a preset with a shape: "
                       f"{', '.join(n for n, build in NETWORKS.items() if _shaped(build))}), "
                       f"got {network.name}")
    if len(reader.problems) > before or network is None or compute is None:
        return None
    assert batch is not None and overlap is not None and precision
    return TrainingSpec(network=network, batch=batch, compute=compute,
                        precision=Precision(precision), optimizer=optimizer,
                        optimizer_s=optimizer_s, bucket_cap=cap, first_bucket=first_limit,
                        overlap=overlap, sweep_caps=caps, sweep_topology=topology,
                        parallelism=parallelism, sweep_layouts=layouts, chakra=chakra)


def _chakra(reader: FieldReader, section: Mapping[str, object]) -> Path | None:
    """``chakra: DIR``: a directory of Chakra execution traces, named relative to the
    scenario's own directory (where the scenario is a file), alone: the traces give the step,
    so no model, batch, layout or sweep beside them."""
    value = section["chakra"]
    if not isinstance(value, str) or not value.strip():
        reader.problem("training.chakra", f"expected a directory of Chakra traces, got {quoted(value)}")
        return None
    beside = [key for key in ("model", "batch", "parallelism", "sweep") if key in section]
    if beside:
        reader.problem(f"training.{beside[0]}", "expected nothing of the model with a Chakra "
                                                "trace (the traces give the step), got it "
                                                "beside training.chakra")
        return None
    path = Path(value)
    if not path.is_absolute() and not reader.file.startswith("<"):
        path = Path(reader.file).parent / path
    return path


def _batch(value: object) -> int:
    """Samples per GPU per step: a whole number from 1 to MAX_BATCH."""
    batch = parse_count(value)
    if batch > MAX_BATCH:
        raise UnitError(f"expected at most {MAX_BATCH:,} samples per GPU (simulator/limits.py), "
                        f"got {quoted(batch)}")
    return batch


def _size_or_cap(value: object) -> int:
    try:
        size = parse_size(value)
    except UnitError:
        size = 0
    if size < 1:
        raise UnitError(f"expected a size ≥ 1 byte or 'cap', got {quoted(value)}")
    return _within_a_buffer(size, value)


def _positive_size(value: object) -> int:
    size = parse_size(value)
    if size < 1:
        raise UnitError(f"expected a size ≥ 1 byte, got {quoted(value)}")
    return _within_a_buffer(size, value)


def _within_a_buffer(size: int, value: object) -> int:
    """``size``, a bucket's limit, if no larger than a buffer may be (MAX_SIZE_BYTES)."""
    if size > MAX_SIZE_BYTES:
        raise UnitError(f"expected a size of at most {MAX_SIZE_BYTES >> 40} TiB (a bucket is "
                        f"one buffer), got {quoted(value)}")
    return size


def _model(reader: FieldReader, value: object, imports: Imports) -> Network | None:
    """A preset name, ``{preset: NAME, sequence: N}``, ``{torch: MODULE:FACTORY, input: SHAPE}``,
    ``{transformer: SHAPE, name: NAME}`` or ``{name: NAME, layers: [...]}``."""
    field = "training.model"
    if isinstance(value, str):
        value = {"preset": value}
    spec = reader.mapping(field, value)
    if spec is None:
        return None
    if "preset" in spec:
        return _preset(reader, spec)
    if "torch" in spec:
        return _torch(reader, spec, imports)
    if "transformer" in spec:
        return _transformer(reader, spec)
    if "layers" in spec:
        return _layers(reader, spec)
    reader.problem(field, f"expected a preset ({', '.join(NETWORKS)}), {{torch: MODULE:FACTORY}}, "
                          f"{{transformer: {{...}}}} or {{name: NAME, layers: [...]}}, got "
                          f"{quoted(dict(spec))}")
    return None


def _preset(reader: FieldReader, spec: Mapping[str, object]) -> Network | None:
    field = "training.model"
    name = reader.choice(f"{field}.preset" if len(spec) > 1 else field, spec["preset"],
                         list(NETWORKS), "a model preset")
    if name is None:
        return None
    build = NETWORKS[name]
    accepts = set(inspect.signature(build).parameters)
    reader.check_keys(spec, field, ["preset", *sorted(accepts)])
    kwargs = {}
    for key in accepts & set(spec):
        count = reader.parse(f"{field}.{key}", spec[key], parse_count)
        if count is None:
            return None
        kwargs[key] = count
    try:
        return build(**kwargs)
    except ValueError as error:
        reader.problem(f"{field}.{next(iter(kwargs))}" if kwargs else field, str(error))
        return None


def _torch(reader: FieldReader, spec: Mapping[str, object], imports: Imports) -> Network | None:
    """A ``torch.nn.Module`` from a factory ``package.module:function`` (called with no
    arguments), with its layers' FLOPs measured on an ``input`` of one sample's shape: built in
    a child process (:mod:`simulator.training.factory`) when ``imports`` allows it."""
    field = "training.model"
    reader.check_keys(spec, field, ["torch", "input", "name"])
    target = spec["torch"]
    if not isinstance(target, str) or not _TARGET.fullmatch(target):
        reader.problem(f"{field}.torch", f"expected 'package.module:factory', got {quoted(target)}")
        return None
    shape = spec.get("input")
    if shape is not None and (not isinstance(shape, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in shape)):
        reader.problem(f"{field}.input", f"expected one sample's shape, a list of whole "
                                         f"numbers ≥ 1 like [3, 224, 224], got {quoted(shape)}")
        return None
    name = str(spec.get("name", target.partition(":")[2]))
    if imports is Imports.SKIP:
        return Network(name, (), "not measured", f"torch module {target}, not imported")
    if imports is not Imports.ALLOW:
        reader.problem(f"{field}.torch", f"importing {quoted(target)} runs its code; pass "
                                         f"--allow-import to run to allow it "
                                         f"(imports=Imports.ALLOW from Python)")
        return None
    try:
        return network_from_factory(target, name=name,
                                    shape=None if shape is None else tuple(shape))
    except ValueError as error:
        reader.problem(f"{field}.torch", str(error))
        return None


def _transformer(reader: FieldReader, spec: Mapping[str, object]) -> Network | None:
    """A decoder given by its shape, ``{transformer: {layers, hidden, heads, vocab, sequence,
    ...}, name: NAME}``: ``kv_heads`` defaults to ``heads``, ``ffn`` to 4·hidden, ``gated``,
    ``bias`` and ``tied`` to false, ``experts`` and ``top_k`` to 1, ``positions`` (learned
    position rows) to 0; built with Megatron-Core's names (:func:`megatron_gpt`)."""
    field = "training.model"
    reader.check_keys(spec, field, ["transformer", "name", "source"])
    prefix = f"{field}.transformer"
    given = reader.mapping(prefix, spec["transformer"])
    if given is None:
        return None
    before = len(reader.problems)
    reader.check_keys(given, prefix, [*SHAPE_COUNTS, *SHAPE_FLAGS, "positions"],
                      required=SHAPE_REQUIRED)
    counts = {key: reader.parse(f"{prefix}.{key}", given[key], parse_count)
              for key in SHAPE_COUNTS if key in given}
    flags = {key: reader.parse(f"{prefix}.{key}", given[key], parse_flag)
             for key in SHAPE_FLAGS if key in given}
    positions = reader.parse(f"{prefix}.positions", given.get("positions", 0), parse_seed)
    if len(reader.problems) > before:
        return None
    number = {key: value for key, value in counts.items() if value is not None}
    flag = {key: value for key, value in flags.items() if value is not None}
    assert positions is not None
    shape = Transformer(
        layers=number["layers"], hidden=number["hidden"], heads=number["heads"],
        kv_heads=number.get("kv_heads", number["heads"]), ffn=number.get("ffn", 4 * number["hidden"]),
        vocab=number["vocab"], sequence=number["sequence"], gated=flag.get("gated", False),
        bias=flag.get("bias", False), tied=flag.get("tied", False),
        experts=number.get("experts", 1), top_k=number.get("top_k", 1), positions=positions)
    for key, expected in shape_problems(shape):
        reader.problem(f"{prefix}.{key}", expected)
    if len(reader.problems) > before:
        return None
    return megatron_gpt(str(spec.get("name", "transformer")), shape,
                        source=str(spec.get("source", "a transformer's shape, as given")))


def _layers(reader: FieldReader, spec: Mapping[str, object]) -> Network | None:
    """A user's list: each layer's parameters ``{name: shape}`` and its compute, as forward
    ``flops`` per sample or as measured ``backward`` (and ``forward``) times per step."""
    field = "training.model"
    reader.check_keys(spec, field, ["name", "layers", "source"], required=("name",))
    if "name" not in spec:
        return None
    items = spec["layers"]
    if not isinstance(items, list) or not items:
        reader.problem(f"{field}.layers", f"expected a non-empty list of layers, got {quoted(items)}")
        return None
    layers = []
    for i, item in enumerate(items):
        layer = _layer(reader, f"{field}.layers[{i}]", item)
        if layer is not None:
            layers.append(layer)
    if len(layers) < len(items):
        return None
    if not any(layer.tensors for layer in layers):
        reader.problem(f"{field}.layers", "expected at least one layer with parameters")
        return None
    return Network(str(spec["name"]), tuple(layers), "sample", str(spec.get("source", "given")))


def _layer(reader: FieldReader, field: str, item: object) -> Layer | None:
    spec = reader.mapping(field, item)
    if spec is None:
        return None
    reader.check_keys(spec, field, ["name", "params", "flops", "forward", "backward"],
                      required=("name",))
    if "name" not in spec:
        return None
    params = spec.get("params", {})
    if not isinstance(params, Mapping):
        reader.problem(f"{field}.params", f"expected a mapping of parameter names to shapes, "
                                          f"got {quoted(params)}")
        return None
    tensors = []
    for name, shape in params.items():
        if not isinstance(shape, list) or not shape or not all(
                isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in shape):
            reader.problem(f"{field}.params.{name}", f"expected a shape, a list of whole "
                                                     f"numbers ≥ 1 like [1024, 4096], got {quoted(shape)}")
            return None
        tensors.append(Tensor(str(name), tuple(shape)))
    flops = spec.get("flops", 0)
    if isinstance(flops, str):  # YAML 1.1 reads 1e6 (no dot) as text
        with contextlib.suppress(ValueError):
            flops = float(flops)
    if isinstance(flops, bool) or not isinstance(flops, (int, float)) or not (
            math.isfinite(flops) and flops >= 0):
        reader.problem(f"{field}.flops", f"expected forward FLOPs per sample, a number ≥ 0, "
                                         f"got {quoted(flops)}")
        return None
    times = {key: reader.parse(f"{field}.{key}", spec[key], parse_time)
             for key in ("forward", "backward") if key in spec}
    if any(value is None for value in times.values()):
        return None
    backward, forward = times.get("backward"), times.get("forward")
    if forward is None and backward is not None:
        forward = backward / BACKWARD_PER_FORWARD
    if backward is None and forward is not None:
        backward = forward * BACKWARD_PER_FORWARD
    return Layer(str(spec["name"]), tuple(tensors), float(flops), forward, backward)


def _compute(reader: FieldReader, value: object, precision: Precision) -> Compute | None:
    """A GPU preset, ``free``, or ``{flops: RATE, memory_bandwidth: RATE, memory: SIZE}`` (the
    memory's capacity optional: without it, whether a layout fits is not checked)."""
    field = "training.gpu"
    if value == FREE:
        return Compute(FREE, math.inf, math.inf)
    if isinstance(value, str):
        name = reader.choice(field, value, [*ACCELERATORS, FREE], "a GPU")
        if name is None:
            return None
        accelerator = ACCELERATORS[name]
        return Compute(name, accelerator.flops(precision), accelerator.memory_bandwidth,
                       accelerator.memory_capacity)
    spec = reader.mapping(field, value)
    if spec is None:
        return None
    reader.check_keys(spec, field, ["flops", "memory_bandwidth", "memory"], required=("flops",))
    flops = reader.parse(f"{field}.flops", spec.get("flops", 1), parse_flops)
    bandwidth = reader.parse(f"{field}.memory_bandwidth",
                             spec.get("memory_bandwidth", "2TB/s"), parse_bandwidth)
    memory = (reader.parse(f"{field}.memory", spec["memory"], _positive_size)
              if "memory" in spec else None)
    if flops is None or bandwidth is None or ("memory" in spec and memory is None):
        return None
    return Compute("custom", flops, bandwidth, memory)


def _optimizer(reader: FieldReader, value: object) -> tuple[Optimizer, float | None]:
    """An update rule (its time from its memory traffic) or the step's time as given."""
    names = [o.value for o in Optimizer]
    if isinstance(value, str) and value in names:
        return Optimizer(value), None
    try:
        return Optimizer.ADAM, parse_time(value)
    except UnitError:
        reader.problem("training.optimizer", f"expected one of {', '.join(names)} or a time "
                                             f"like '2ms', got {quoted(value)}")
        return Optimizer.ADAM, None


def _shaped(build: object) -> bool:
    """Whether a preset's network carries a transformer shape (model parallelism splits it)."""
    return callable(build) and build().shape is not None


def _sweep(reader: FieldReader, value: object
           ) -> tuple[tuple[int, ...], TopologySweep | None, bool]:
    """``{bucket_cap: [SIZES], topology: {PARAM: [VALUES]}, parallelism: auto}``, each
    optional."""
    field = "training.sweep"
    spec = reader.mapping(field, value)
    if spec is None:
        return (), None, False
    reader.check_keys(spec, field, ["bucket_cap", "topology", "parallelism"])
    layouts = False
    if "parallelism" in spec:
        layouts = reader.choice(f"{field}.parallelism", spec["parallelism"], ["auto"],
                                "a layout sweep") == "auto"
    caps: tuple[int, ...] = ()
    if "bucket_cap" in spec:
        caps = _sizes(reader, f"{field}.bucket_cap", spec["bucket_cap"])
    topology = None
    if "topology" in spec:
        scaled = reader.mapping(f"{field}.topology", spec["topology"])
        if scaled is not None and len(scaled) != 1:
            reader.problem(f"{field}.topology", f"expected one topology parameter and its "
                                                f"values, like {{nodes: [1, 2, 4]}}, got "
                                                f"{quoted(dict(scaled))}")
        elif scaled is not None:
            [(param, values)] = scaled.items()
            counts = reader.parse(f"{field}.topology.{param}", values, parse_counts)
            topology = TopologySweep(str(param), counts) if counts else None
    return caps, topology, layouts


def _sizes(reader: FieldReader, field: str, value: object) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        reader.problem(field, f"expected a list of sizes like [1MiB, 25MiB], got {quoted(value)}")
        return ()
    sizes = [reader.parse(f"{field}[{i}]", item, _positive_size) for i, item in enumerate(value)]
    return tuple(s for s in sizes if s is not None) if all(s is not None for s in sizes) else ()
