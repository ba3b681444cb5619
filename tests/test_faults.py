"""Faults (issue 23): the scenario's ``faults:`` list, read with one-line errors, applied by both
engines with equal times, against anchors worked by hand: a capacity fault at 0 is the static
graph with that bandwidth; a straggler on a ring adds its delay; a degradation that recovers
before the first byte changes nothing; a slow GPU adds its extra reduction time."""

import csv
import json
import math
from dataclasses import replace

import networkx as nx
import pytest

from simulator.cli import main
from simulator.errors import InputError, NetworkCut
from simulator.model.faults import LinkDegraded, LinkDown, NicDown, SlowGpu, Straggler
from simulator.model.faults.kind import in_flight_caveat
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
        {"kind": "link_down", "link": ["gpu2", "switch"], "at": "4us"},
        {"kind": "nic_down", "nic": "n0.nic1"},
        {"kind": "straggler", "rank": 3, "delay": "50us"},
        {"kind": "slow_gpu", "rank": 2, "factor": 0.25}], gpu={"reduce_bandwidth": "100GB/s"}))
    assert read.faults == (LinkDegraded(("gpu1", "switch"), 2e-6, 0.5, True, 9e-6),
                           LinkDown(("gpu2", "switch"), 4e-6), NicDown("n0.nic1", 0.0),
                           Straggler(3, 50e-6), SlowGpu(2, 0.25))


@pytest.mark.parametrize(("fault", "message"), [
    ({"kind": "link_degrade", "link": ["gpu1", "switch"], "factor": 0.5},
     "f.yaml: faults[0].kind: expected a fault kind (link_degraded, link_down, link_flapping, "
     "nic_down, straggler, slow_gpu), got 'link_degrade'; did you mean 'link_degraded'?"),
    ({"kind": "link_down", "link": ["gpu1", "swtch"]},
     "f.yaml: faults[0].link: no node 'swtch' in the topology (the names `topo --names` prints); did "
     "you mean 'switch'?"),
    ({"kind": "link_down", "link": ["gpu1", "switch"], "factor": 0.5},
     "f.yaml: faults[0].factor: unknown key; expected one of kind, link, at, both"),
    ({"kind": "nic_down", "nic": "switch"},
     "f.yaml: faults[0].nic: expected a NIC, got 'switch', a switch; this topology has none"),
    ({"kind": "nic_down", "nic": ""},
     "f.yaml: faults[0].nic: expected a node name, such as n0.nic0, got ''"),
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
     "f.yaml: faults[0].link: no node 'swich' in the topology (the names `topo --names` prints); did "
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
    graph = faulty.topology.build()
    graph.edges["gpu0", "gpu1"]["bandwidth"] *= 0.3
    assert_as_static(faulty, graph)


def assert_as_static(faulty, graph):
    """``faulty``'s one algorithm at 16 MiB takes, on both engines, exactly the time of the
    healthy plan run on ``graph`` (the topology edited as the fault would), and longer than
    healthy."""
    setup = prepare(faulty)
    plan = plan_point(faulty, setup, setup.algorithms[0], 1 << 24, settings_of(faulty))
    static = replace(plan, machine=Machine.of(graph), healthy=None)
    for engine in ENGINES:
        chosen = settings_of(replace(faulty, run=replace(faulty.run, engine=engine)))
        faulted = run_plan(replace(plan, settings=chosen))
        assert faulted.verified
        assert faulted.sim_time_s == run_plan(replace(static, settings=chosen)).sim_time_s
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
    least = frame.iloc[int((frame.sim_time_s - frame.healthy_time_s).to_numpy().argmin())]
    added_us = (least.sim_time_s - least.healthy_time_s) * 1e6
    assert (f"#    1048576 {least.algorithm:>18} +{added_us:.2f} us "
            f"(x{least.fault_slowdown:.3f})") in table


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


FAT_TREE = {"kind": "fat_tree", "k": 4, "bandwidth": "25GB/s", "latency": "1us"}
CABLE_DOWN = {"kind": "link_down", "link": ["pod0.edge0", "pod0.agg0"], "at": "5us",
              "both": True}


def test_a_link_down_at_0_is_the_static_graph_without_that_link():
    # On a physical ring of 8, halving-doubling's messages from gpu0 to gpu1 go the long way
    # round once gpu0->gpu1 is down, as on a ring built without that link.
    ring = {"kind": "ring", "ranks": 8, "bandwidth": "25GB/s", "latency": "500ns"}
    faulty = scenario_from_dict(scenario([{"kind": "link_down", "link": ["gpu0", "gpu1"]}],
                                         topology=ring, algorithms=["halving_doubling"]))
    graph = faulty.topology.build()
    graph.remove_edge("gpu0", "gpu1")
    del graph.graph["paths"]  # the builder's candidate paths describe the graph as built
    assert_as_static(faulty, graph)


@pytest.mark.parametrize("algorithm", ["ring", "double_binary_tree", "halving_doubling",
                                       "direct"])
def test_a_link_down_mid_run_gives_equal_times_on_both_engines(algorithm):
    # The cable fails at 5 us, with flows on it: they finish over the pod's other aggregation
    # switch, and every later message goes that way too. A ring's one flow out of the edge
    # switch finds the other path as free: its time does not move. The others' do, not always
    # up: halving-doubling's re-routed flows happen to contend less (5 % faster).
    data = scenario([CABLE_DOWN], topology=FAT_TREE, algorithms=[algorithm])
    simpy, vector = (run(data, engine, algorithm) for engine in ENGINES)
    assert simpy.verified and vector.verified
    assert (simpy.engine, vector.engine) == ENGINES
    assert simpy.sim_time_s == vector.sim_time_s
    assert simpy.healthy_time_s == vector.healthy_time_s
    assert (simpy.sim_time_s == simpy.healthy_time_s) == (algorithm == "ring")


def _links_table(tmp_path, data, engine):
    """The --links table of a run, keyed by (algorithm, from, to): bytes carried, busy time."""
    source = tmp_path / f"{engine}.json"
    source.write_text(json.dumps({**data, "engine": engine}))
    table = tmp_path / f"{engine}-links.csv"
    assert main(["run", str(source), "--output", str(tmp_path / engine), "--quiet",
                 "--no-plot", "--links", str(table)]) == 0
    with table.open() as rows:
        return {(row["algorithm"], row["from"], row["to"]): (float(row["bytes"]),
                                                           float(row["busy_s"]))
                for row in csv.DictReader(rows)}


def test_links_show_the_rerouted_load(tmp_path):
    # direct on a k=4 fat-tree: the cable pod0.edge0-pod0.agg0 fails at 5 us. It carried only
    # what crossed it before; every byte still arrives, over routes of the same length, so the
    # fabric carries as many bytes as when healthy. Both engines' tables agree.
    data = scenario([CABLE_DOWN], topology=FAT_TREE, algorithms=["direct"])
    simpy, vector = (_links_table(tmp_path, data, engine) for engine in ENGINES)
    (tmp_path / "healthy").mkdir()
    healthy = _links_table(tmp_path / "healthy", scenario([], topology=FAT_TREE,
                                                          algorithms=["direct"]), "vector")
    assert simpy.keys() == vector.keys()
    for key, (nbytes, busy) in simpy.items():
        assert vector[key][0] == pytest.approx(nbytes, rel=1e-12)
        assert vector[key][1] == pytest.approx(busy, rel=1e-12, abs=1e-18)
    down = ("direct", "pod0.edge0", "pod0.agg0")
    assert 0 < vector[down][0] < healthy[down][0] / 10
    assert sum(b for b, _ in vector.values()) == pytest.approx(
        sum(b for b, _ in healthy.values()), rel=1e-12)
    other = ("direct", "pod0.edge0", "pod0.agg1")
    assert vector[other][0] > healthy[other][0]


def test_a_link_down_after_the_run_did_not_act():
    late = {**CABLE_DOWN, "at": "1s"}
    frame = simulate(scenario([late], topology=FAT_TREE, algorithms=["ring"]))
    assert frame.faults.tolist() == ["link_down pod0.edge0<->pod0.agg0 at 1s (did not act)"]
    assert frame.fault_slowdown.tolist() == [1.0]


CUT = [{"kind": "link_down", "link": ["gpu3", "switch"], "at": "5us", "both": True}]
CUT_MESSAGE = ("network cut at 5.000 us, once gpu3->switch, switch->gpu3 failed: ranks 3 "
               "cannot reach ranks 0-2, 4-7")


@pytest.mark.parametrize("engine", ENGINES)
def test_a_network_cut_stops_the_run_naming_who_cannot_reach_whom(engine):
    with pytest.raises(NetworkCut) as error:
        run(scenario(CUT), engine)
    assert str(error.value) == CUT_MESSAGE


def test_a_network_cut_is_one_line_and_exit_1(tmp_path, capsys):
    source = tmp_path / "cut.json"
    source.write_text(json.dumps(scenario(CUT)))
    assert main(["run", str(source), "--output", str(tmp_path / "out"), "--quiet"]) == 1
    # the cut is the one error line; before it, what NCCL would do where this re-routes
    assert capsys.readouterr().err == (
        f"{source}: {in_flight_caveat('link_down gpu3<->switch at 5us')}\n"
        f"{source}: {CUT_MESSAGE}\n")


def test_a_network_cut_into_three_groups():
    ring = {"kind": "ring", "ranks": 8, "bandwidth": "25GB/s", "latency": "500ns"}
    cuts = [{"kind": "link_down", "link": [a, b], "at": "0us", "both": True}
            for a, b in (("gpu1", "gpu2"), ("gpu4", "gpu5"), ("gpu6", "gpu7"))]
    with pytest.raises(NetworkCut) as error:
        run(scenario(cuts, topology=ring), "vector")
    assert str(error.value) == (
        "network cut at 0.000 us, once gpu1->gpu2, gpu2->gpu1, gpu4->gpu5, gpu5->gpu4 and 2 more "
        "failed: the ranks fall into 3 groups that cannot reach each other: 0-1, 7 | 2-4 | 5-6")


H100_NODES = {"preset": "dgx_h100", "nodes": 2}


@pytest.mark.parametrize(("at", "said"), [("0us", "0s"), ("20us", "20us")])
def test_a_nic_down_moves_its_rail_over_nvlink_to_another_nic(at, said):
    # NCCL's ring on two DGX H100: n1.nic2 fails; rank 10's traffic leaves through n1.gpu0's
    # NIC after an NVLink hop (PXN), on both engines with equal times.
    data = scenario([{"kind": "nic_down", "nic": "n1.nic2", "at": at}], topology=H100_NODES,
                    sizes=["4MiB"])
    simpy, vector = (run(data, engine, "ring", 4 << 20) for engine in ENGINES)
    assert simpy.verified and vector.verified
    assert simpy.sim_time_s == vector.sim_time_s
    assert simpy.sim_time_s > simpy.healthy_time_s
    assert simpy.faults == f"nic_down n1.nic2 at {said}"


def test_the_routes_after_a_nic_fails_relay_over_nvlink():
    from simulator.model.topology import dgx
    routing = Machine.of(dgx(2, 8, 450e9, 1e-6, 63e9, 1e-6, 50e9, 2e-6)).routing
    down = frozenset(link for link in routing.capacities() if "n1.nic2" in link)
    after = routing.rerouted(down)
    assert after.route("n1.gpu2", "n0.gpu2").nodes == (
        "n1.gpu2", "n1.nvswitch", "n1.gpu0", "n1.nic0", "leaf", "n0.nic2", "n0.gpu2")
    assert after.route("n1.gpu3", "n0.gpu3") == routing.route("n1.gpu3", "n0.gpu3")


def test_a_traced_run_with_a_failed_link_is_written(tmp_path):
    source = tmp_path / "traced.json"
    source.write_text(json.dumps(scenario([CABLE_DOWN], topology=FAT_TREE,
                                          algorithms=["direct"], engine="simpy")))
    trace = tmp_path / "trace.json"
    assert main(["run", str(source), "--output", str(tmp_path / "out"), "--quiet", "--no-plot",
                 "--trace", str(trace), "--trace-point", "direct:1MiB"]) == 0
    counters = [event["args"]["utilisation"] for event in
                json.loads(trace.read_text())["traceEvents"] if event.get("ph") == "C"]
    assert counters and min(counters) >= 0 and max(counters) <= 1 + 1e-12


def test_a_moved_flow_leaves_its_old_links_what_it_carried_there():
    from simulator.engine.record import Recorder
    routing = Machine.of(scenario_from_dict(scenario([], topology=FAT_TREE)).topology
                         .build()).routing
    old, new = (("gpu0", "pod0.edge0"), ("pod0.edge0", "pod0.agg0")), \
        (("gpu0", "pod0.edge0"), ("pod0.edge0", "pod0.agg1"))
    recorder = Recorder(routing, trace=True)
    states = recorder.flow_started(0, old, 1000.0, 0.0)
    recorder.flow_rate(0, 10.0, 0.0)
    states = recorder.flow_moved(0, states, new, 400.0, 10.0, 60.0)
    recorder.flow_ended(0, states, 100.0)
    links = {(use.src, use.dst): (use.bytes, use.busy_s)
             for use in recorder.activity("x", 1000, 100.0, "simpy").links}
    assert links == {("gpu0", "pod0.edge0"): (1000.0, 100.0),
                     ("pod0.edge0", "pod0.agg0"): (600.0, 60.0),
                     ("pod0.edge0", "pod0.agg1"): (400.0, 40.0)}
    rates = {rate.link: list(zip(rate.times_s, rate.utilisation, strict=True))
             for rate in recorder.activity("x", 1000, 100.0, "simpy").rates}
    bandwidth = 25e9
    assert rates["pod0.edge0->pod0.agg0"] == [(0.0, 10.0 / bandwidth), (60.0, 0.0)]
    assert rates["pod0.edge0->pod0.agg1"] == [(0.0, 0.0), (60.0, 10.0 / bandwidth),
                                             (100.0, 0.0)]


def test_a_switch_that_failed_links_leave_unreachable_is_a_network_cut():
    # The ranks still reach each other (a-b), but a switch endpoint (an in-switch reduction's)
    # can no longer be reached: one line, never networkx's NetworkXNoPath.
    graph = nx.DiGraph()
    for a, b in (("a", "s"), ("s", "a"), ("b", "s"), ("s", "b"), ("a", "b"), ("b", "a")):
        graph.add_edge(a, b, bandwidth=1.0, latency=1.0)
    from simulator.model.routing import Routing
    rerouted = Routing(graph).rerouted(frozenset({("a", "s"), ("b", "s")}))
    with pytest.raises(NetworkCut) as error:
        rerouted.route("a", "s")
    assert str(error.value) == "network cut: no route from a to s once 2 links failed"
    assert rerouted.route("a", "b").nodes == ("a", "b")


ONE_LAYER = {"name": "one", "layers": [
    {"name": "fc", "params": {"w": [1024, 1024]}, "backward": "2ms"}]}
"""One bucket, ready when the backward pass ends: its allreduce is exposed whole."""
MLP = {"name": "mlp", "layers": [
    {"name": "fc1", "params": {"w1": [1024, 512]}, "backward": "2ms"},
    {"name": "fc2", "params": {"w2": [512, 1024]}, "backward": "2ms"},
    {"name": "fc3", "params": {"w3": [2048, 1024]}, "backward": "1ms"}]}
"""Three buckets (first 1 MiB, caps of 2 MiB): fc3's ready at 1 ms, fc2's at 3 ms, fc1's at 5."""


def training(faults, model=ONE_LAYER, **more):
    from simulator.trainer import train
    return train({"name": "t", "topology": SWITCH, "algorithms": ["ring"], "faults": faults,
                  "training": {"model": model, "batch": 8, "optimizer": "1ms",
                               "bucket_cap": "2MiB", **more}})


def test_a_straggler_in_a_training_step_adds_its_delay_to_an_exposed_allreduce():
    # The one bucket is ready as the backward pass ends; the late rank's backward ends 300 us
    # later, so it enters the allreduce that late, and a ring on a switch adds that whole.
    healthy = training([]).step
    late = training([{"kind": "straggler", "rank": 2, "delay": "300us"}]).step
    assert late.verified
    assert late.step_s == pytest.approx(healthy.step_s + 300e-6, rel=1e-12)
    assert late.healthy_step_s == healthy.step_s
    assert late.buckets[0].faults == "straggler rank 2 +300us"
    assert late.buckets[0].healthy_time_s == healthy.buckets[0].time_s


def test_a_fault_strikes_only_the_allreduces_that_overlap_it():
    # The cable of gpu1 runs at a tenth from 3.05 ms to 3.1 ms after the backward pass began:
    # the second bucket's allreduce (fc2's, 3 ms to 3.16 ms) runs then, the first (from 1 ms,
    # 0.6 ms long) and the third (from 5 ms) do not.
    healthy = training([], model=MLP).step
    assert [round(b.ready_s - healthy.forward_s, 9) for b in healthy.buckets] == [
        0.001, 0.003, 0.005]
    struck = training([{"kind": "link_degraded", "link": ["gpu1", "switch"], "at": "3050us",
                        "until": "3100us", "factor": 0.1, "both": True}], model=MLP).step
    times = [b.time_s for b in struck.buckets]
    assert times[0] == healthy.buckets[0].time_s and times[2] == healthy.buckets[2].time_s
    assert times[1] > healthy.buckets[1].time_s
    assert [b.faults for b in struck.buckets] == [
        "link_degraded gpu1<->switch x0.1 at 2.05ms until 2.1ms (did not act)",
        "link_degraded gpu1<->switch x0.1 at 50.000us until 100.000us", ""]
    assert struck.step_s == struck.healthy_step_s  # the third bucket's end decides the step


def test_a_fault_after_the_step_leaves_it_as_it_was():
    healthy = training([], model=MLP).step
    late = training([{"kind": "link_down", "link": ["gpu1", "switch"], "at": "1s"}],
                    model=MLP).step
    assert late.step_s == healthy.step_s == late.healthy_step_s
    assert all(b.faults.endswith("(did not act)") for b in late.buckets)


def test_the_gpu_count_sweep_of_a_faulted_step_runs_healthy(tmp_path):
    data = {"name": "t", "topology": SWITCH, "algorithms": ["ring"],
            "faults": [{"kind": "straggler", "rank": 3, "delay": "300us"}],
            "training": {"model": ONE_LAYER, "batch": 8, "optimizer": "1ms",
                         "sweep": {"topology": {"ranks": [2, 8]}}}}
    source = tmp_path / "t.json"
    source.write_text(json.dumps(data))
    assert main(["run", str(source), "--output", str(tmp_path / "out"), "--no-plot"]) == 0
    steps = list(csv.DictReader((tmp_path / "out" / "t-steps.csv").open()))
    assert [row["sweep"] for row in steps] == ["", "topology", "topology"]
    assert float(steps[0]["fault_slowdown"]) > 1
    assert [row["healthy_step_s"] for row in steps[1:]] == ["", ""]
    buckets = list(csv.DictReader((tmp_path / "out" / "t-buckets.csv").open()))
    assert buckets[0]["faults"] == "straggler rank 3 +300us"


def test_a_nic_lost_mid_collective_says_nccl_would_abort(tmp_path, capsys):
    scenario = tmp_path / "nic.yaml"
    scenario.write_text("topology: {preset: dgx_h100, nodes: 2}\nalgorithms: [ring]\n"
                        "sizes: [1MiB]\nfaults:\n  - {kind: nic_down, nic: n0.nic1, at: 2us}\n"
                        "  - {kind: link_down, link: [n1.nic2, leaf], at: 0us}\n")
    assert main(["run", str(scenario), "--output", str(tmp_path / "out"), "--quiet",
                 "--no-plot"]) == 0
    # failed from the start: NCCL's set-up finds the routes left, so no word on the link
    assert capsys.readouterr().err == (
        f"{scenario}: nic_down n0.nic1 at 2us: NCCL does not re-route a collective in flight (a "
        "connection that breaks makes it abort with ncclRemoteError or hang); this run "
        "re-routes, so its faulted times are what a transport that re-routes would take\n")
