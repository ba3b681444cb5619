"""allreduce-sim: discrete-event simulation of collective-communication algorithms.

The public API: give a scenario (a YAML path, a mapping, or a :class:`Scenario`), get a pandas
DataFrame, the one the command line writes.

>>> from simulator import simulate
>>> frame = simulate({"topology": {"kind": "ring", "ranks": 3, "bandwidth": "1GB/s",
...                                "latency": "1us"}, "algorithms": ["ring"], "sizes": ["3KB"]})
>>> round(float(frame.loc[0, "sim_time_s"]) * 1e6, 6), bool(frame.loc[0, "verified"])
(8.0, True)

NCCL's cost model alone, per size and without simulating: ``from simulator import nccl;
nccl.query("dgx_h100:8", "allreduce", ["1MiB"])`` (:mod:`simulator.nccl`).

Names are imported on first use (PEP 562), so ``import simulator.units`` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from simulator.version import __version__

_EXPORTS = {
    "RESULT_COLUMNS": "simulator.output.results",
    "REGISTRY": "simulator.algorithms.registry",
    "Algorithm": "simulator.algorithms.algorithm",
    "AlgorithmError": "simulator.errors",
    "Collective": "simulator.model.collective",
    "GpuSpec": "simulator.model.machine",
    "Imports": "simulator.scenario.training",
    "InputError": "simulator.errors",
    "Problem": "simulator.errors",
    "ReduceOp": "simulator.model.reduction",
    "Result": "simulator.output.results",
    "Scenario": "simulator.scenario.spec",
    "SimulatorError": "simulator.errors",
    "TopologySpec": "simulator.scenario.spec",
    "Watch": "simulator.model.activity",
    "algorithm_names": "simulator.algorithms.registry",
    "best_per_size": "simulator.output.table",
    "format_table": "simulator.output.table",
    "nccl_choice_per_size": "simulator.output.table",
    "get_algorithm": "simulator.algorithms.registry",
    "load_scenario": "simulator.scenario.parse",
    "run_point": "simulator.runner",
    "scenario_from_dict": "simulator.scenario.parse",
    "simulate": "simulator.runner",
    "train": "simulator.trainer",
}

__all__ = [
    "REGISTRY",
    "RESULT_COLUMNS",
    "Algorithm",
    "AlgorithmError",
    "Collective",
    "GpuSpec",
    "Imports",
    "InputError",
    "Problem",
    "ReduceOp",
    "Result",
    "Scenario",
    "SimulatorError",
    "TopologySpec",
    "Watch",
    "__version__",
    "algorithm_names",
    "best_per_size",
    "format_table",
    "get_algorithm",
    "load_scenario",
    "nccl_choice_per_size",
    "run_point",
    "scenario_from_dict",
    "simulate",
    "train",
]

if TYPE_CHECKING:
    from simulator.algorithms.algorithm import Algorithm
    from simulator.algorithms.registry import REGISTRY, algorithm_names, get_algorithm
    from simulator.errors import AlgorithmError, InputError, Problem, SimulatorError
    from simulator.model.activity import Watch
    from simulator.model.collective import Collective
    from simulator.model.machine import GpuSpec
    from simulator.model.reduction import ReduceOp
    from simulator.output.results import RESULT_COLUMNS, Result
    from simulator.output.table import best_per_size, format_table, nccl_choice_per_size
    from simulator.runner import run_point, simulate
    from simulator.scenario.parse import load_scenario, scenario_from_dict
    from simulator.scenario.spec import Scenario, TopologySpec
    from simulator.scenario.training import Imports
    from simulator.trainer import train


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'simulator' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
