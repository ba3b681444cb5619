"""Shared test helpers: build scenarios in code and run single points."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from simulator.collectives import Collective
from simulator.costmodel import GpuSpec
from simulator.reduction import ReduceOp
from simulator.runner import Result, prepare, run_point, select_algorithms
from simulator.scenario import Scenario, TopologySpec

REPO = Path(__file__).resolve().parent.parent


def flat_scenario(kind: str = "switch", ranks: int = 4, bandwidth: float = 25e9,
                  latency: float = 5e-7, **fields: object) -> Scenario:
    """A scenario on a flat builder topology; ``fields`` override Scenario fields."""
    scenario = Scenario(
        name="test", source="test.yaml",
        topology=TopologySpec(kind, kind, (("ranks", ranks), ("bandwidth", bandwidth),
                                           ("latency", latency))),
        collective=Collective.ALLREDUCE, algorithms=("ring",), sizes=(4096,),
        dtype=np.dtype("float32"), op=ReduceOp.SUM, gpu=GpuSpec(), verify=True,
        output=Path("results/test"))
    return replace(scenario, **fields)


def run_one(scenario: Scenario, size_bytes: int, seed: int = 0) -> Result:
    """Run the scenario's first algorithm at one size."""
    setup = prepare(scenario)
    algorithm = select_algorithms(scenario, setup)[0]
    return run_point(scenario, setup, algorithm, size_bytes, seed=seed)


@pytest.fixture
def repo() -> Path:
    """The repository root (scenarios/ and topologies/ live there)."""
    return REPO
