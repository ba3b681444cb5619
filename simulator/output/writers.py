"""The files a run writes, one registry of writers: ``--format csv,json,png,parquet`` picks
among them.

Every writer takes the results frame, the scenario and how it was run, and writes one file
atomically (:func:`~simulator.output.files.write_atomically`). The JSON file states the
scenario's resolved settings and the simulator's version, so a results file found later says
how it was made.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.algorithms.algorithm import Algorithm, NoOptions
from simulator.algorithms.registry import REGISTRY
from simulator.model.execution import Execution
from simulator.model.topology import BUILDERS, Param, ParamValue
from simulator.output.figures import link_rate, write_figures
from simulator.output.files import write_atomically
from simulator.output.results import RESULT_COLUMNS, RunSettings
from simulator.scenario.rules import option_kinds
from simulator.scenario.spec import ALL, AUTO, Scenario
from simulator.units import format_bandwidth, format_time
from simulator.version import __version__


@dataclass(frozen=True)
class Writer:
    """A results file: its suffix and the function that writes it."""

    suffix: str
    write: Callable[[pd.DataFrame, Scenario, RunSettings, Path], None]


def write_csv(results: pd.DataFrame, scenario: Scenario, run: RunSettings, path: Path) -> None:
    """The results file: columns in :data:`RESULT_COLUMNS` order, floats at full precision."""
    write_atomically(path, lambda tmp: results[list(RESULT_COLUMNS)].to_csv(tmp, index=False))


def write_parquet(results: pd.DataFrame, scenario: Scenario, run: RunSettings, path: Path) -> None:
    """The results file as Parquet: the CSV's columns and rows, with their types (needs pyarrow,
    the ``parquet`` extra)."""
    write_atomically(path, lambda tmp: results[list(RESULT_COLUMNS)].to_parquet(
        tmp, engine="pyarrow", index=False))


def write_settings(results: pd.DataFrame, scenario: Scenario, run: RunSettings, path: Path) -> None:
    """The settings that produced the results, as JSON (see :func:`settings`)."""
    text = json.dumps(settings(scenario, run), indent=2, ensure_ascii=False) + "\n"

    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8")

    write_atomically(path, write)


def write_png(results: pd.DataFrame, scenario: Scenario, run: RunSettings, path: Path) -> None:
    """The figures of :func:`~simulator.output.figures.write_figures`: ``<name>.png`` (busbw and
    time against size, with the scenario's link rate) and ``<name>-crossover.png`` beside it."""
    write_figures(results, path.with_suffix(""), link_rate(scenario))


WRITERS: dict[str, Writer] = {
    "csv": Writer(".csv", write_csv),        # results, one row per (algorithm, size)
    "json": Writer(".json", write_settings),  # the resolved settings and the simulator's version
    "png": Writer(".png", write_png),         # bus bandwidth and time against size
    "parquet": Writer(".parquet", write_parquet),  # the results again, typed (pyarrow)
}
"""Every output format by name; ``--format`` takes a comma-separated list of these."""

DEFAULT_FORMATS = ("csv", "json", "png")
"""What a run writes unless told otherwise (Parquet needs an optional package)."""

RESULTS_FORMATS = ("csv", "parquet")
"""The formats that hold the results' rows: a run rewrites them after every point."""


def write_results(results: pd.DataFrame, scenario: Scenario, run: RunSettings, directory: Path,
                  formats: tuple[str, ...] = DEFAULT_FORMATS) -> list[Path]:
    """Write ``<directory>/<name><suffix>`` for each format, in order; the paths written."""
    paths = []
    for name in formats:
        writer = WRITERS[name]
        path = directory / f"{scenario.name}{writer.suffix}"
        writer.write(results, scenario, run, path)
        paths.append(path)
    return paths


def settings(scenario: Scenario, run: RunSettings) -> dict[str, Any]:
    """The scenario's resolved settings (units written out, presets expanded into their builder's
    parameters, every default made explicit but a builder parameter's, which its kind implies:
    GPU costs, the options of every algorithm that has some, the execution model, protocol and
    channels) and how it was run, as plain JSON data.

    Its ``scenario`` part is itself a valid scenario mapping: ``scenario_from_dict`` of it gives
    the same scenario back, but for its topology label and source (kept beside it) and the
    ``output`` directory, which is where the files went.
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
        "engine": scenario.run.engine.value,
        "verify": scenario.run.verify,
        "output": str(run.output if run.output is not None else scenario.output_dir),
    }
    if scenario.piece_bytes is not None:
        described["piece_size"] = scenario.piece_bytes
    return {
        "simulator": {"name": "allreduce-sim", "version": __version__},
        "run": {"seed": run.seed, "proxy_elements": run.proxy_elements},
        "source": scenario.source,
        "topology_label": scenario.topology.label,
        "scenario": described,
    }


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
