"""One place per extension: a topology builder with a list-valued parameter, and an algorithm
with an option, each added without touching the scenario parser or the runner."""

import math
from dataclasses import dataclass, field

import networkx as nx
import pytest

from simulator.algorithms import REGISTRY, Collective, Comm, CostInputs, Program
from simulator.algorithms.ring import RingAllreduce
from simulator.errors import InputError
from simulator.model.topology import BUILDERS, Bandwidth, Builder, Counts, Time, switch
from simulator.runner import simulate
from simulator.scenario import scenario_from_dict


def line(dims: Counts, bandwidth: Bandwidth, latency: Time) -> nx.DiGraph:
    """A test builder: prod(dims) GPUs on one switch (the shape only decides the rank count)."""
    return switch(math.prod(dims), bandwidth, latency)


@pytest.fixture
def with_line(monkeypatch):
    monkeypatch.setitem(BUILDERS, "line", Builder("line", line, lambda p: math.prod(p["dims"])))


def test_a_list_valued_builder_parameter_is_parsed_and_counts_its_ranks(with_line):
    scenario = scenario_from_dict({"topology": {"kind": "line", "dims": [2, 3], "bandwidth": "1GB/s",
                                                "latency": "1us"}, "algorithms": ["ring"],
                                   "sizes": ["6KB"]})
    assert scenario.topology.params["dims"] == (2, 3) and scenario.topology.ranks == 6
    [row] = simulate(scenario).itertuples()
    # 6 ranks, 1 KB chunks: 10 steps of two 1 us hops and 1 us of transfer
    assert (row.ranks, row.verified) == (6, True)
    assert row.sim_time_s == pytest.approx(10 * (2e-6 + 1e-6), rel=1e-12)


@pytest.mark.parametrize("dims, message", [
    ([64, 64, 32], "topology: expected at most 65536 GPUs for kind line, got 131072"),
    ([4, 0], "topology.dims: expected a list of whole numbers ≥ 1, got [4, 0]"),
    (4, "topology.dims: expected a list of whole numbers ≥ 1, got 4"),
])
def test_a_list_valued_parameter_is_validated_like_any_other(with_line, dims, message):
    with pytest.raises(InputError) as error:
        scenario_from_dict({"topology": {"kind": "line", "dims": dims, "bandwidth": "1GB/s",
                                         "latency": "1us"}, "sizes": ["1KiB"]}, source="t.yaml")
    assert [str(p) for p in error.value.problems] == [f"t.yaml: {message}"]


@dataclass(frozen=True)
class RepeatOptions:
    """``times``: how many ring allreduces to run back to back."""

    times: int = 1


@dataclass(frozen=True)
class Repeat(RingAllreduce):
    """A test algorithm with an option: the ring allreduce, ``times`` times (sums scale by p each
    time, so the numpy check only holds for ``times`` = 1 with sum; max is idempotent)."""

    name = "repeat"
    Options = RepeatOptions
    options: RepeatOptions = field(default_factory=RepeatOptions)

    def program(self, comm: Comm) -> Program:
        for _ in range(self.options.times):
            yield from super().program(comm)

    def model_s(self, cost: CostInputs, count: int) -> float:
        return self.options.times * super().model_s(cost, count)


def test_an_algorithm_option_needs_only_the_algorithms_own_file(monkeypatch):
    monkeypatch.setitem(REGISTRY[Collective.ALLREDUCE], "repeat", Repeat())
    frame = simulate({"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s",
                                   "latency": "1us"}, "algorithms": ["ring", "repeat"], "op": "max",
                      "sizes": [4096], "algorithm_options": {"repeat": {"times": 3}}})
    ring, repeat = frame.itertuples()
    assert repeat.verified and repeat.sim_time_s == pytest.approx(3 * ring.sim_time_s, rel=1e-12)
    with pytest.raises(InputError) as error:
        scenario_from_dict({"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s",
                                         "latency": "1us"}, "sizes": [4096],
                            "algorithm_options": {"repeat": {"times": 0, "tims": 2}}})
    assert [str(p) for p in error.value.problems] == [
        "<dict>: algorithm_options.repeat.tims: unknown key; did you mean 'times'?",
        "<dict>: algorithm_options.repeat.times: expected a whole number ≥ 1, got 0"]
