"""Steady-state fast-forward (simulator.engine.steady): every algorithm on a ring of switches, a
DGX cluster and a fat-tree gives the same frame, column for column and to the bit, with
``fast_forward`` on and off; jumps do happen (so the equality is not vacuous) and skip most
instants of a long pipeline; a deliberately broken algorithm is caught with it on; a fault in
the middle of a steady pipeline (a flapping link among them) gives the same times either way;
and the setting's input errors."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from simulator import simulate
from simulator.algorithms import REGISTRY, Collective
from simulator.algorithms.schedule import Group
from simulator.engine import vector
from simulator.engine.payload import Payload, make_inputs
from simulator.engine.vector import run_schedule
from simulator.errors import InputError
from simulator.model.reduction import ReduceOp
from simulator.model.span import Span
from simulator.runner import prepare
from simulator.scenario import scenario_from_dict

TOPOLOGIES = {
    "ring": {"kind": "ring", "ranks": 8, "bandwidth": "25GB/s", "latency": "1us"},
    "dgx": {"preset": "dgx_h100", "nodes": 2, "gpus_per_node": 4},
    "fat_tree": {"kind": "fat_tree", "k": 4, "bandwidth": "25GB/s", "latency": "1us"},
}
"""A ring of switches (a partner 2^k ranks away is 2^k cables away), two DGX H100 nodes under
NCCL's execution, and a k = 4 fat-tree (16 GPUs, ECMP)."""


@pytest.fixture
def skipped(monkeypatch):
    """Each vectorised run's (algorithm, instants jumped over, instants) as it finishes."""
    runs: list[tuple[str, int, int]] = []
    run = vector._Run.run

    def counted(self):
        timing = run(self)
        runs.append((self.name, timing.skipped, timing.instants))
        return timing

    monkeypatch.setattr(vector._Run, "run", counted)
    return runs


def both_ways(scenario):
    """The scenario's frame with fast_forward on, and off."""
    return (simulate({**scenario, "fast_forward": True}),
            simulate({**scenario, "fast_forward": False}))


@pytest.mark.parametrize("collective", [c.value for c in Collective])
@pytest.mark.parametrize("topology", list(TOPOLOGIES))
def test_every_algorithm_gives_the_same_frame_either_way(topology, collective, skipped):
    # 256 pieces of 16 KiB at 4 MiB: long enough pipelines for periods to repeat
    on, off = both_ways({"topology": TOPOLOGIES[topology], "collective": collective,
                         "algorithms": "all", "sizes": ["64KiB", "4MiB"],
                         "piece_size": "16KiB"})
    pd.testing.assert_frame_equal(on, off, check_exact=True)
    assert on.verified.all()


def test_jumps_happen_and_skip_most_of_a_long_pipeline(skipped):
    # NCCL's split tree on 8 GPUs of a switch: 2048 pieces of 512 KiB at 1 GiB, six instants a
    # period in its steady state; the jumps stop only at each binade's end and at the tail
    on, off = both_ways({"topology": {"kind": "switch", "ranks": 8, "bandwidth": "25GB/s",
                                      "latency": "1us"},
                         "algorithms": ["tree", "double_binary_tree"], "sizes": ["1GiB"]})
    pd.testing.assert_frame_equal(on, off, check_exact=True)
    jumped = {name: (skips, instants) for name, skips, instants in skipped if skips}
    assert set(jumped) == {"tree", "double_binary_tree"}
    for skips, instants in jumped.values():
        assert skips > 0.9 * instants
    assert on.sim_time_s.tolist() == [0.12905624832000182, 0.08600200973999894]


def test_a_broken_algorithm_is_caught_with_fast_forward_on():
    # the tree's schedule with every piece into rank 2 copied where it should be reduced: the
    # fault repeats with the period, so the jumps replay it, and the buffers are wrong the
    # same way either way
    scenario = scenario_from_dict({"topology": {"kind": "switch", "ranks": 8,
                                                "bandwidth": "25GB/s", "latency": "1us"},
                                   "sizes": [1 << 22], "piece_size": "16KiB"})
    machine = prepare(scenario, select=False).machine
    count = (1 << 22) // 4
    group = Group(np.arange(8), Span(0, count), 4, 16 << 10)
    schedule = REGISTRY[Collective.ALLREDUCE]["tree"].scheduled(group)
    broken = dataclasses.replace(schedule, reduce=schedule.reduce & (schedule.dst != 2))
    payload = Payload(count, count, np.dtype("float32"))
    inputs = make_inputs(np.random.default_rng(0), 8, payload, ReduceOp.SUM, summable=True)
    expected = inputs.astype(np.float64).sum(axis=0)
    results = {}
    for fast_forward in (True, False):
        buffers = inputs.copy()
        timing = run_schedule(broken, machine, payload, ReduceOp.SUM, buffers, "broken",
                              fast_forward=fast_forward)
        results[fast_forward] = (buffers, timing)
    (on, timed_on), (off, timed_off) = results[True], results[False]
    assert timed_on.skipped > 0 and timed_off.skipped == 0
    assert timed_on.time_s == timed_off.time_s
    np.testing.assert_array_equal(on, off)
    assert not np.array_equal(on[0], expected.astype(np.float32))  # caught: not the sum


@pytest.mark.parametrize("fault", [
    {"kind": "link_degraded", "link": ["gpu0", "switch"], "at": "3ms", "factor": 0.1,
     "both": True},
    {"kind": "link_degraded", "link": ["switch", "gpu0"], "at": "2ms", "until": "6ms",
     "factor": 0.05},
    {"kind": "link_down", "link": ["gpu3", "switch"], "at": "4ms", "both": True},
    {"kind": "link_flapping", "link": ["gpu0", "switch"], "at": "2ms", "period": "1ms",
     "down": "200us", "until": "8ms", "both": True},
])
def test_a_fault_in_a_steady_pipeline_gives_the_same_times_either_way(fault, skipped):
    # the tree on 8 GPUs of a switch with a spare path for the failed link's flows: the jumps
    # stop before the fault's instant and start again after it; a flapping cable is 12 such
    # instants (down and up 6 times), and the pipeline jumps between them
    topology = {"kind": "fat_tree", "k": 4, "bandwidth": "25GB/s", "latency": "1us"} \
        if fault["kind"] == "link_down" else {"kind": "switch", "ranks": 8,
                                              "bandwidth": "25GB/s", "latency": "1us"}
    if fault["kind"] == "link_down":
        fault = {**fault, "link": ["pod0.edge0", "pod0.agg0"]}
    on, off = both_ways({"topology": topology, "algorithms": ["tree"], "sizes": ["256MiB"],
                         "faults": [fault]})
    pd.testing.assert_frame_equal(on, off, check_exact=True)
    assert any(skips for _, skips, _ in skipped)
    assert "did not act" not in on.faults[0]
    if fault["kind"] != "link_down":  # the fault acted on the pipeline's steady state
        assert on.sim_time_s[0] > 1.01 * on.healthy_time_s[0]


def test_fast_forward_is_a_bool():
    with pytest.raises(InputError) as caught:
        scenario_from_dict({"topology": TOPOLOGIES["ring"], "sizes": [1024],
                            "fast_forward": "sometimes"}, source="s.yaml")
    assert str(caught.value) == ("s.yaml: fast_forward: expected true or false, got "
                                 "'sometimes'")
