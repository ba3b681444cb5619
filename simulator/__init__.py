"""allreduce-sim: discrete-event simulation of collective-communication algorithms.

The public API: load a scenario, simulate it, get a pandas DataFrame.

>>> from simulator import load_scenario, simulate  # doctest: +SKIP
>>> results = simulate(load_scenario("scenarios/dgx.yaml"))  # doctest: +SKIP
"""

from simulator.collectives import REGISTRY, Algorithm, Collective, algorithm_names, get_algorithm
from simulator.costmodel import CostInputs, GpuSpec
from simulator.errors import (
    AlgorithmError,
    InputError,
    Problem,
    SimulatorError,
)
from simulator.reduction import ReduceOp
from simulator.runner import RESULT_COLUMNS, Result, run_point, simulate
from simulator.scenario import Scenario, TopologySpec, load_scenario

__all__ = [
    "REGISTRY",
    "RESULT_COLUMNS",
    "Algorithm",
    "AlgorithmError",
    "Collective",
    "CostInputs",
    "GpuSpec",
    "InputError",
    "Problem",
    "ReduceOp",
    "Result",
    "Scenario",
    "SimulatorError",
    "TopologySpec",
    "algorithm_names",
    "get_algorithm",
    "load_scenario",
    "run_point",
    "simulate",
]
