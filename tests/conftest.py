"""Shared test helpers: build scenarios in code and run single points."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from simulator.collectives import REGISTRY, Collective
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


def dgx_topology(nodes: int, gpus_per_node: int, nvswitch_reduction: bool = True) -> TopologySpec:
    """A small dgx topology with round numbers (NVLink 400 GB/s, PCIe 50 GB/s, NIC 25 GB/s)."""
    return TopologySpec("dgx", "dgx", (
        ("nodes", nodes), ("gpus_per_node", gpus_per_node), ("nvlink_bandwidth", 400e9),
        ("nvlink_latency", 3e-7), ("pcie_bandwidth", 50e9), ("pcie_latency", 5e-7),
        ("nic_bandwidth", 25e9), ("nic_latency", 1e-6), ("nvswitch_reduction", nvswitch_reduction)))


def applicable_scenario(ranks: int, **fields: object) -> Scenario | None:
    """A scenario on ``ranks`` GPUs where the scenario's algorithm applies: a plain switch if
    it runs there, else one dgx node with in-switch reduction, else several dgx nodes; None if
    no such topology exists for ``ranks``."""
    candidates = [flat_scenario("switch", ranks=ranks, **fields),
                  flat_scenario(**{**fields, "topology": dgx_topology(1, ranks)})]
    candidates += [flat_scenario(**{**fields, "topology": dgx_topology(nodes, ranks // nodes)})
                   for nodes in range(2, ranks + 1) if ranks % nodes == 0]
    for scenario in candidates:
        setup = prepare(scenario)
        registered = REGISTRY[scenario.collective][scenario.algorithms[0]]
        if registered.unsupported(setup.graph, setup.placement) is None:
            return scenario
    return None


def run_one(scenario: Scenario, size_bytes: int, seed: int = 0) -> Result:
    """Run the scenario's first algorithm at one size."""
    setup = prepare(scenario)
    algorithm = select_algorithms(scenario, setup)[0]
    return run_point(scenario, setup, algorithm, size_bytes, seed=seed)


@pytest.fixture
def repo() -> Path:
    """The repository root (scenarios/ and topologies/ live there)."""
    return REPO
