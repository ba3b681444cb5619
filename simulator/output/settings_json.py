"""A run's settings as plain JSON data, what the ``json`` format writes: the scenario's resolved
settings (units written out, presets expanded, defaults made explicit), how it was run, and the
simulator's version, so a results file found later says how it was made.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulator.algorithms.algorithm import Algorithm, NoOptions
from simulator.algorithms.registry import REGISTRY
from simulator.model.execution import Execution
from simulator.model.nccl import LATEST
from simulator.model.topology import BUILDERS, Param, ParamValue
from simulator.scenario.parallelism import REST
from simulator.scenario.rules import option_kinds
from simulator.scenario.spec import ALL, AUTO, Scenario
from simulator.settings import RunSettings
from simulator.training.layout import Parallelism
from simulator.training.spec import TrainingSpec
from simulator.units import format_bandwidth, format_size, format_time
from simulator.version import __version__


def settings(scenario: Scenario, run: RunSettings, output: Path | None = None) -> dict[str, Any]:
    """The scenario's resolved settings (units written out, presets expanded into their builder's
    parameters, every default made explicit but a builder parameter's, which its kind implies:
    GPU costs, the options of every algorithm that has some, the execution model, protocol and
    channels) and how it was run (``run``; the results went to ``output``, None: the
    scenario's own directory), as plain JSON data.

    Its ``scenario`` part is itself a valid scenario mapping: ``scenario_from_dict`` of it gives
    the same scenario back, but for its topology label and source (kept beside it) and the
    ``output`` directory, which is where the files went. A training scenario's part has no
    ``sizes`` (its buckets give them) and a ``training`` part instead, which describes the step
    (:func:`training_settings`) rather than repeats its model's layers.
    """
    gpu: dict[str, str] = {"launch_latency": format_time(scenario.gpu.launch_latency_s)}
    if scenario.gpu.reduce_bandwidth_Bps is not None:
        gpu = {"reduce_bandwidth": format_bandwidth(scenario.gpu.reduce_bandwidth_Bps), **gpu}
    described: dict[str, Any] = {
        "name": scenario.name,
        "topology": _topology(scenario),
        "collective": scenario.collective.value,
        "algorithms": (AUTO if scenario.nccl_choice else ALL) if scenario.algorithms is None
                      else list(scenario.algorithms),
        "sizes": list(scenario.sizes),
        "dtype": scenario.dtype.name,
        "op": scenario.reduce_op.value,
        "gpu": gpu,
        "algorithm_options": {name: _options(scenario.algorithm(name))
                              for name, algorithm in REGISTRY[scenario.collective].items()
                              if algorithm.Options is not NoOptions},
        "execution": Execution(scenario.execution).value,
        "protocol": "auto" if scenario.protocol is None else scenario.protocol.value,
        "channels": AUTO if scenario.channels is None else scenario.channels,
        "engine": run.engine.value,
        "verify": run.verify,
        "output": str(output if output is not None else scenario.output_dir),
    }
    if not run.fast_forward:  # said only when off: the times are the same either way
        described["fast_forward"] = False
    if scenario.piece_bytes is not None:
        described["piece_size"] = scenario.piece_bytes
    if not scenario.nccl.is_default:
        described["nccl"] = {key: value for key, value in (("algo", scenario.nccl.algo),
                                                           ("proto", scenario.nccl.proto)) if value}
        if scenario.nccl.version is not LATEST:
            described["nccl"]["version"] = scenario.nccl.version.value
        if scenario.nccl.symmetric:
            described["nccl"]["symmetric"] = True
        if not scenario.nccl.nvls:
            described["nccl"]["nvls"] = False
        if scenario.nccl.library is not None:
            described["nccl"]["library"] = scenario.nccl.library.value
        if scenario.nccl.view is not None:
            described["nccl"][scenario.nccl.view_key] = scenario.nccl.view_file
        if scenario.nccl.gpus_per_thread != 1:
            described["nccl"]["gpus_per_thread"] = scenario.nccl.gpus_per_thread
    if scenario.faults:
        described["faults"] = [fault.settings() for fault in scenario.faults]
    if scenario.training is not None:
        del described["sizes"]
        described["training"] = training_settings(scenario.training)
    return {
        "simulator": {"name": "allreduce-sim", "version": __version__},
        "run": {"seed": run.seed, "proxy_elements": run.proxy_elements},
        "source": scenario.source,
        "topology_label": scenario.topology.label,
        "scenario": described,
    }


def training_settings(spec: TrainingSpec) -> dict[str, Any]:
    """A training step's resolved settings: the model (its name, parameter count and where its
    shapes come from), the batch, the GPU's sustained rates (``free``: compute costs nothing),
    the precision, the optimizer (or the time given for it), DDP's bucket cap and first bucket
    (both resolved to bytes, as the step used them), overlap, and the sweeps asked for."""
    compute = spec.compute
    described: dict[str, Any] = {
        "model": {"name": spec.network.name, "parameters": spec.network.numel,
                  "source": spec.network.source},
        "batch": spec.batch,
        "gpu": "free" if compute.free else {
            "name": compute.name, "flops": f"{compute.flops / 1e12:.6g}TFLOP/s",
            "memory_bandwidth": format_bandwidth(compute.memory_bandwidth)},
        "precision": spec.precision.value,
        "optimizer": (spec.optimizer.value if spec.optimizer_s is None
                      else format_time(spec.optimizer_s)),
        "bucket_cap": format_size(spec.cap),
        "first_bucket": format_size(spec.first_limit()),
        "overlap": spec.overlap,
    }
    if spec.parallelism is not None:
        described["parallelism"] = _parallelism(spec.parallelism)
    if spec.chakra is not None:
        described["chakra"] = str(spec.chakra)
    sweep: dict[str, Any] = {}
    if spec.sweep_layouts:
        sweep["parallelism"] = "auto"
    if spec.sweep_caps:
        sweep["bucket_cap"] = [format_size(cap) for cap in spec.sweep_caps]
    if spec.sweep_topology is not None:
        sweep["topology"] = {spec.sweep_topology.param: list(spec.sweep_topology.values)}
    if sweep:
        described["sweep"] = sweep
    return described


def _parallelism(layout: Parallelism) -> dict[str, Any]:
    """The layout as the section gives it (``dp`` left out where the GPUs decide it), every
    key that is not at its default."""
    given = {"tp": layout.tp, "pp": layout.pp, "dp": layout.dp, "ep": layout.ep,
             "zero": layout.zero, "microbatches": layout.microbatches,
             "schedule": layout.schedule.value, "chunks": layout.chunks,
             "sequence_parallel": layout.sequence_parallel, "recompute": layout.recompute,
             "placement": list(layout.placement), "tp_across_nodes": layout.tp_across_nodes,
             "imbalance": layout.imbalance, "sm_contention": layout.sm_contention,
             "flash_attention": layout.flash_attention}
    plain = Parallelism()
    defaults = {**{key: getattr(plain, key) for key in given}, "dp": REST,
                "schedule": plain.schedule.value, "placement": list(plain.placement)}
    return {key: value for key, value in given.items() if value != defaults[key]}


def _topology(scenario: Scenario) -> dict[str, Any]:
    """The builder and every parameter that is not at the builder's default."""
    builder = BUILDERS[scenario.topology.kind]
    defaults = builder.defaults
    return {"kind": scenario.topology.kind, **{
        key: _param(builder.params[key], value) for key, value in scenario.topology.params.items()
        if not (key in defaults and value == defaults[key])}}


def _param(kind: Param, value: ParamValue) -> Any:
    if kind in (Param.BANDWIDTH, Param.TIME):
        assert isinstance(value, (int, float))
        return (format_bandwidth if kind is Param.BANDWIDTH else format_time)(float(value))
    if kind is Param.COUNTS:
        return list(value) if isinstance(value, tuple) else value
    return value


def _options(algorithm: Algorithm) -> dict[str, Any]:
    return {key: (value.name if isinstance(value, Algorithm) else value)
            for key in option_kinds(type(algorithm.options))
            for value in [getattr(algorithm.options, key)]}
