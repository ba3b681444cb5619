"""Faults (issue 23): the scenario's ``faults:`` list, read with one-line errors, applied by both
engines with equal times, against anchors worked by hand: a capacity fault at 0 is the static
graph with that bandwidth; a straggler on a ring adds its delay; a degradation that recovers
before the first byte changes nothing; a slow GPU adds its extra reduction time."""

import math
from dataclasses import replace

import networkx as nx
import pytest

from simulator.errors import InputError
from simulator.model.faults import LinkDegraded, SlowGpu, Straggler
from simulator.model.machine import Machine
from simulator.output.settings_json import settings
from simulator.output.table import format_table
from simulator.plan import plan_point, prepare
from simulator.runner import run_plan, run_point, settings_of, simulate
from simulator.scenario import scenario_from_dict

SWITCH = {"kind": "switch", "ranks": 8, "bandwidth": "25GB/s", "latency": "500ns"}
ENGINES = ("simpy", "vector")


def scenario(faults, *, topology=SWITCH, algorithms=("ring",), sizes=("1MiB",), **more):
    return {"name": "faulty", "topology": topology, "algorithms": list(algorithms),
            "sizes": list(sizes), "faults": faults, **more}


def problems(data):
    """The one-line messages of an invalid scenario, read and prepared."""
    with pytest.raises(InputError) as error:
        prepare(scenario_from_dict(data, source="f.yaml"))
    return [str(p) for p in error.value.problems]


def test_every_fault_kind_is_read_from_a_scenario():
    read = scenario_from_dict(scenario([
        {"kind": "link_degraded", "link": ["gpu1", "switch"], "at": "2us", "factor": 0.5,
         "until": "9us", "both": True},
        {"kind": "straggler", "rank": 3, "delay": "50us"},
        {"kind": "slow_gpu", "rank": 2, "factor": 0.25}], gpu={"reduce_bandwidth": "100GB/s"}))
    assert read.faults == (LinkDegraded(("gpu1", "switch"), 2e-6, 0.5, True, 9e-6),
                           Straggler(3, 50e-6), SlowGpu(2, 0.25))


@pytest.mark.parametrize(("fault", "message"), [
    ({"kind": "link_degrade", "link": ["gpu1", "switch"], "factor": 0.5},
     "f.yaml: faults[0].kind: expected a fault kind (link_degraded, straggler, slow_gpu), got "
     "'link_degrade'; did you mean 'link_degraded'?"),
    ({"kind": "straggler", "rank": 3},
     "f.yaml: faults[0].delay: required but missing"),
    ({"kind": "straggler", "rank": 3, "delay": "50us", "factor": 2},
     "f.yaml: faults[0].factor: unknown key; expected one of kind, rank, delay"),
    ({"kind": "straggler", "rank": 8, "delay": "50us"},
     "f.yaml: faults[0].rank: expected a rank from 0 to 7, got 8"),
    ({"kind": "straggler", "rank": 1, "delay": 50},
     "f.yaml: faults[0].delay: expected a time like '500ns', '1us', '2ms' or '1s', got 50"),
    ({"kind": "slow_gpu", "rank": 1, "factor": 0},
     "f.yaml: faults[0].factor: expected a factor above 0 and at most 1 (0.5 halves the "
     "bandwidth), got 0"),
    ({"kind": "link_degraded", "link": ["gpu1"], "factor": 0.5},
     "f.yaml: faults[0].link: expected two different node names [from, to], such as "
     "[gpu1, switch], got ['gpu1']"),
    ({"kind": "link_degraded", "link": ["gpu1", "switch"], "factor": 0.5, "at": "5us",
      "until": "5us"},
     "f.yaml: faults[0].until: expected a time after 'at', got '5us'"),
    ({"kind": "link_degraded", "link": ["gpu1", "swich"], "factor": 0.5},
     "f.yaml: faults[0].link: no node 'swich' in the topology (the names `topo` prints); did "
     "you mean 'switch'?"),
    ({"kind": "link_degraded", "link": ["gpu1", "gpu2"], "factor": 0.5},
     "f.yaml: faults[0].link: no link from 'gpu1' to 'gpu2' in the topology"),
    ({"kind": "slow_gpu", "rank": 1, "factor": 0.5},
     "f.yaml: faults[0].rank: rank 1's GPU reduces for free here (no gpu reduce_bandwidth): "
     "a slow GPU would change nothing"),
])
def test_bad_faults_get_one_line_each(fault, message):
    assert problems(scenario([fault])) == [message]


def test_faults_must_be_a_list():
    assert problems(scenario({"kind": "straggler"})) == [
        "f.yaml: faults: expected a list of faults, each a mapping with a kind, got "
        "{'kind': 'straggler'}"]


def test_a_slow_gpu_under_nccl_execution_is_refused():
    data = scenario([{"kind": "slow_gpu", "rank": 1, "factor": 0.5}],
                    topology={"preset": "dgx_h100"})
    assert problems(data) == [
        "f.yaml: faults[0].kind: expected no slow_gpu under execution: nccl, where a GPU's "
        "reductions cost nothing apart from NCCL's copies (run it with execution: ideal and a "
        "gpu reduce_bandwidth)"]


def test_faults_with_training_are_refused():
    data = {"name": "t", "topology": SWITCH, "training": {"model": "resnet50", "batch": 32},
            "faults": [{"kind": "straggler", "rank": 1, "delay": "1us"}]}
    with pytest.raises(InputError) as error:
        scenario_from_dict(data, source="t.yaml")
    assert [str(p) for p in error.value.problems] == [
        "t.yaml: faults: expected no faults with training: a step's bucket allreduces are not "
        "yet laid on one timeline to fault"]


def run(data, engine, algorithm="ring", size=1 << 20):
    return run_point({**data, "engine": engine}, algorithm, size)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_straggler_on_a_ring_adds_its_delay(engine):
    # Every step of a ring on a switch waits for the step before on the left neighbour, so
    # every chain passes through each rank's first send: the late rank's delay is added whole.
    healthy = run(scenario([]), engine)
    late = run(scenario([{"kind": "straggler", "rank": 3, "delay": "50us"}]), engine)
    assert late.verified
    assert late.sim_time_s == pytest.approx(healthy.sim_time_s + 50e-6, rel=1e-12)
    assert late.healthy_time_s == healthy.sim_time_s
    assert late.fault_slowdown == late.sim_time_s / healthy.sim_time_s


def test_a_capacity_fault_at_0_is_the_static_graph_with_that_bandwidth():
    # Halving-doubling on a physical ring of 8 shares links, so a slower cable moves the time.
    ring = {"kind": "ring", "ranks": 8, "bandwidth": "25GB/s", "latency": "500ns"}
    faulty = scenario_from_dict(scenario([{"kind": "link_degraded", "link": ["gpu0", "gpu1"],
                                           "factor": 0.3}], topology=ring,
                                         algorithms=["halving_doubling"]))
    setup = prepare(faulty)
    plan = plan_point(faulty, setup, setup.algorithms[0], 1 << 24, settings_of(faulty))
    graph = faulty.topology.build()
    graph.edges["gpu0", "gpu1"]["bandwidth"] *= 0.3
    static = replace(plan, machine=Machine.of(graph), healthy=None)
    for engine in ENGINES:
        chosen = settings_of(replace(faulty, run=replace(faulty.run, engine=engine)))
        faulted = run_plan(faulty, setup, replace(plan, settings=chosen))
        assert faulted.verified
        assert faulted.sim_time_s == run_plan(faulty, setup,
                                              replace(static, settings=chosen)).sim_time_s
        assert faulted.sim_time_s > faulted.healthy_time_s


@pytest.mark.parametrize("engine", ENGINES)
def test_a_degradation_that_recovers_before_the_first_byte_changes_nothing(engine):
    # A message posted at 0 starts moving after its route's latency, 2 x 500 ns.
    healthy = run(scenario([]), engine)
    brief = run(scenario([{"kind": "link_degraded", "link": ["gpu1", "switch"], "at": "0us",
                           "until": "900ns", "factor": 0.1, "both": True}]), engine)
    assert brief.sim_time_s == healthy.sim_time_s
    assert brief.fault_slowdown == 1.0


@pytest.mark.parametrize("engine", ENGINES)
def test_a_slow_gpu_adds_its_extra_reduction_time(engine):
    # Two ranks: each sends its half, reduces the other's, sends the sum back. Rank 1 reduces
    # c bytes at half rate, so the sum it returns leaves c/(B/2) - c/B later.
    two = {**SWITCH, "ranks": 2}
    gpu = {"reduce_bandwidth": "100GB/s"}
    healthy = run(scenario([], topology=two, gpu=gpu), engine)
    slow = run(scenario([{"kind": "slow_gpu", "rank": 1, "factor": 0.5}], topology=two, gpu=gpu),
               engine)
    c = (1 << 20) / 2
    assert slow.verified
    assert slow.sim_time_s - healthy.sim_time_s == pytest.approx(c / 50e9 - c / 100e9,
                                                                 rel=1e-9)


FAULTS = {
    "link_degraded": {"kind": "link_degraded", "link": ["gpu0", "switch"], "at": "3us",
                      "factor": 0.2, "until": "150us", "both": True},
    "straggler": {"kind": "straggler", "rank": 5, "delay": "50us"},
    "slow_gpu": {"kind": "slow_gpu", "rank": 6, "factor": 0.3},
}


CASES = [(kind, algorithm) for kind in sorted(FAULTS)
         for algorithm in ("ring", "double_binary_tree", "halving_doubling", "direct")
         if (kind, algorithm) != ("slow_gpu", "double_binary_tree")]
"""Every kind on every algorithm but one: the vectorised engine declines a double binary tree
whose GPUs pay for reductions (its two trees reduce at once on one GPU: only SimPy orders
that queue), and a slow GPU needs that cost."""


@pytest.mark.parametrize(("kind", "algorithm"), CASES)
def test_every_fault_kind_gives_equal_times_on_both_engines(kind, algorithm):
    gpu = {"reduce_bandwidth": "200GB/s"} if kind == "slow_gpu" else {}
    data = scenario([FAULTS[kind]], algorithms=[algorithm], gpu=gpu)
    simpy, vector = (run(data, engine, algorithm) for engine in ENGINES)
    assert simpy.verified and vector.verified
    assert (simpy.engine, vector.engine) == ENGINES
    assert simpy.sim_time_s == vector.sim_time_s
    assert simpy.healthy_time_s == vector.healthy_time_s
    assert simpy.sim_time_s > simpy.healthy_time_s


def test_the_results_say_what_struck_and_what_did_not():
    frame = simulate(scenario([{"kind": "straggler", "rank": 3, "delay": "50us"},
                               {"kind": "link_degraded", "link": ["gpu1", "switch"],
                                "at": "1s", "factor": 0.5}],
                              algorithms=["ring", "halving_doubling"]))
    assert frame.faults.tolist() == [
        "straggler rank 3 +50us; link_degraded gpu1->switch x0.5 at 1s (did not act)"] * 2
    assert (frame.fault_slowdown == frame.sim_time_s / frame.healthy_time_s).all()
    table = format_table(frame)
    assert "# Faults: straggler rank 3 +50us; link_degraded gpu1->switch x0.5 at 1s (did not act)" \
        in table
    least = frame.iloc[int(frame.fault_slowdown.to_numpy().argmin())]
    assert f"#    1048576 {least.algorithm:>18} x{least.fault_slowdown:.3f}" in table


def test_healthy_scenarios_leave_the_fault_columns_empty():
    frame = simulate(scenario([]))
    assert frame.faults.tolist() == [""]
    assert math.isnan(frame.healthy_time_s[0]) and math.isnan(frame.fault_slowdown[0])


def test_the_settings_file_gives_the_faults_back():
    faults = [{"kind": "link_degraded", "link": ["gpu1", "switch"], "at": "2us", "factor": 0.5,
               "until": "9us", "both": True}, {"kind": "straggler", "rank": 3, "delay": "50us"}]
    read = scenario_from_dict(scenario(faults))
    written = settings(read, read.run)["scenario"]
    assert scenario_from_dict(written).faults == read.faults


def test_the_topology_names_are_those_of_the_graph():
    # The switch builder's nodes: the --links table and `topo` print these names.
    assert {"gpu1", "switch"} <= set(nx.DiGraph(scenario_from_dict(scenario([])).topology
                                                .build()).nodes)
