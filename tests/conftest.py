"""Shared test helpers: build scenarios in code and run single points; count what ``all`` runs;
add the guide's example algorithm to a copy of the package; the marks of registry-derived and
golden tests."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pytest

from simulator.algorithms import REGISTRY
from simulator.output.results import Result
from simulator.runner import prepare, run_point
from simulator.scenario import Scenario, TopologySpec
from simulator.scenario.spec import CODE

REPO = Path(__file__).resolve().parent.parent


def flat_topology(kind: str = "switch", ranks: int = 4, bandwidth: float = 25e9,
                  latency: float = 5e-7) -> TopologySpec:
    """A flat builder topology (switch, ring, fully_connected), or a torus or mesh of ``ranks``
    GPUs (:func:`grid_dims`)."""
    if kind in ("torus", "mesh"):
        return TopologySpec(kind, {"dims": grid_dims(ranks), "bandwidth": bandwidth,
                                   "latency": latency})
    return TopologySpec(kind, {"ranks": ranks, "bandwidth": bandwidth, "latency": latency})


def grid_dims(ranks: int) -> tuple[int, ...]:
    """The dims of a grid of ``ranks`` cells in up to three dimensions, as near a cube as the
    prime factors allow, largest first: 16 -> (4, 2, 2), 12 -> (3, 2, 2), 13 -> (13,)."""
    primes, rest, factor = [], ranks, 2
    while rest > 1:
        while rest % factor == 0:
            primes.append(factor)
            rest //= factor
        factor += 1
    dims = [1, 1, 1]
    for prime in sorted(primes, reverse=True):
        dims[dims.index(min(dims))] *= prime
    return tuple(sorted((d for d in dims if d > 1), reverse=True)) or (1,)


def flat_scenario(kind: str = "switch", ranks: int = 4, bandwidth: float = 25e9,
                  latency: float = 5e-7, **fields: Any) -> Scenario:
    """A scenario on a flat builder topology; ``fields`` override Scenario fields."""
    scenario = Scenario(name="test", source="test.yaml",
                        topology=flat_topology(kind, ranks, bandwidth, latency),
                        algorithms=("ring",), sizes=(4096,), dtype=np.dtype("float32"))
    return replace(scenario, **fields)


def dgx_topology(nodes: int, gpus_per_node: int, nvswitch_reduction: bool = True,
                 sharp: bool = False) -> TopologySpec:
    """A small dgx topology with round numbers (NVLink 400 GB/s, PCIe 50 GB/s, NIC 25 GB/s),
    its leaf reducing (SHARP, 2 µs) where ``sharp``."""
    return TopologySpec("dgx", {
        "nodes": nodes, "gpus_per_node": gpus_per_node, "nvlink_bandwidth": 400e9,
        "nvlink_latency": 3e-7, "pcie_bandwidth": 50e9, "pcie_latency": 5e-7,
        "nic_bandwidth": 25e9, "nic_latency": 1e-6, "nvswitch_reduction": nvswitch_reduction,
        **({"sharp": True, "sharp_latency": 2e-6} if sharp else {})})


def applicable_scenario(ranks: int, **fields: Any) -> Scenario | None:
    """A scenario on ``ranks`` GPUs where the scenario's algorithm applies: a plain switch if
    it runs there, else one dgx node with in-switch reduction, else several dgx nodes (then with
    a reducing leaf, SHARP), else a torus (:func:`grid_dims`); None if no such topology exists
    for ``ranks``."""
    topologies = [flat_topology("switch", ranks=ranks), dgx_topology(1, ranks)]
    splits = [(nodes, ranks // nodes) for nodes in range(2, ranks + 1) if ranks % nodes == 0]
    topologies += [dgx_topology(nodes, local) for nodes, local in splits]
    topologies += [dgx_topology(nodes, local, sharp=True) for nodes, local in splits]
    topologies.append(flat_topology("torus", ranks=ranks))
    for topology in topologies:
        scenario = flat_scenario(**{**fields, "topology": topology})
        algorithm = REGISTRY[scenario.collective][(scenario.algorithms or ("ring",))[0]]
        if algorithm.unsupported(prepare_machine(scenario)) is None:
            return scenario
    return None


def prepare_machine(scenario: Scenario) -> Any:
    """The machine of a scenario's topology (without selecting its algorithms)."""
    from simulator.model.machine import Machine

    return Machine.of(scenario.topology.build(), scenario.gpu)


def inter_options(name: str) -> dict[str, Any]:
    """Scenario options making ``hierarchical`` run allreduce ``name`` across hosts."""
    from simulator.algorithms import Collective, get_algorithm
    from simulator.algorithms.hierarchical import HierarchicalOptions

    return {"hierarchical": HierarchicalOptions(inter=get_algorithm(Collective.ALLREDUCE, name))}


def runs_all(scenario: Scenario | Mapping[str, Any] | str | Path) -> list[str]:
    """The algorithms ``algorithms: all`` runs for ``scenario`` (a Scenario, a mapping, or a
    file under the repository), in the registry's order: the registered ones of its collective
    that apply on its machine, as the runner picks them. Tests count points and rows with it, so
    that they follow the registry rather than pin it (docs/writing-an-algorithm.md)."""
    from simulator.scenario import load_scenario, scenario_from_dict

    if isinstance(scenario, (str, Path)):
        scenario = load_scenario(REPO / scenario)
    elif not isinstance(scenario, Scenario):
        scenario = scenario_from_dict({**scenario, "algorithms": "all"})
    return [algorithm.name for algorithm in prepare(replace(scenario, algorithms=None)).algorithms]


def run_one(scenario: Scenario, size_bytes: int, seed: int = 0) -> Result:
    """Run the scenario's first algorithm at one size."""
    setup = prepare(scenario)
    return run_point(scenario, setup.algorithms[0], size_bytes, seed=seed, setup=setup)


GUIDE = REPO / "docs" / "writing-an-algorithm.md"
"""The guide to writing an algorithm, whose one ```python block is its worked example."""

GUIDE_EXAMPLE = ("star", "StarAllreduce")
"""The worked example's registry name and class."""


def add_the_guide_example(package: Path) -> None:
    """Add the guide's worked example to the copy of the package at ``package`` as the guide
    says: saved as ``algorithms/star.py``, and its class added to ``_ALGORITHMS`` in
    ``algorithms/registry.py`` with its import."""
    name, cls = GUIDE_EXAMPLE
    [source] = re.findall(r"^```python\n(.*?)^```", GUIDE.read_text(encoding="utf-8"), re.M | re.S)
    registry = package / "algorithms" / "registry.py"
    text = registry.read_text(encoding="utf-8")
    assert cls not in text, (f"{cls} is registered in the tree: {name!r} is the guide's example's "
                             "name; name yours otherwise (docs/writing-an-algorithm.md)")
    (package / "algorithms" / f"{name}.py").write_text(source, encoding="utf-8")
    edited = text.replace("from simulator.algorithms.tree import",
                          f"from simulator.algorithms.{name} import {cls}\n"
                          "from simulator.algorithms.tree import", 1)
    edited = edited.replace("    BucketAllreduce(),\n)", f"    BucketAllreduce(),\n    {cls}(),\n)", 1)
    assert edited.count(cls) == 2, "the registry's shape changed; update this helper"
    registry.write_text(edited, encoding="utf-8")


MARKS = {
    "registry": "expectations derived from the algorithm registry (counts of points and rows, "
                "the algorithms `all` runs, those with a builder) rather than parametrised over "
                "it",
    "golden": "pins the golden run's output, which a new algorithm that `all` runs on one DGX "
              "H100 changes: regenerate it (docs/writing-an-algorithm.md)",
}
"""The marks tests/test_authoring.py selects by, beside the tests parametrised with an
algorithm's name: on a tree with the guide's example added, every ``registry`` test passes and
every ``golden`` one fails, as the guide says."""


def pytest_configure(config: pytest.Config) -> None:
    """Declare :data:`MARKS`."""
    for mark, meaning in MARKS.items():
        config.addinivalue_line("markers", f"{mark}: {meaning}")


@pytest.fixture
def repo() -> Path:
    """The repository root (scenarios/ and topologies/ live there)."""
    return REPO


__all__ = ["CODE", "GUIDE", "GUIDE_EXAMPLE", "MARKS", "REPO", "add_the_guide_example",
           "applicable_scenario", "dgx_topology", "flat_scenario", "flat_topology", "grid_dims",
           "inter_options", "prepare_machine", "run_one", "runs_all"]


def switch_graphml(path: Path, ranks: int = 4, gpu: str = "gpu{}") -> Path:
    """A GraphML file of ``ranks`` GPUs (named by ``gpu`` with their rank) on one switch, each
    by an undirected edge (a full-duplex cable) of 25 GB/s and 1 us: the switch topology of
    ``flat_topology()`` as a graph file."""
    graph = nx.Graph()
    graph.add_node("sw", kind="switch")
    for rank in range(ranks):
        graph.add_node(gpu.format(rank), kind="gpu", rank=rank)
        graph.add_edge(gpu.format(rank), "sw", bandwidth=25e9, latency=1e-6)
    nx.write_graphml(graph, path)
    return path
