"""CollNet (simulator/algorithms/collnet.py) and NVLS across hosts (simulator/algorithms/nvls.py):
the network switches that reduce (sharp: true), where the algorithms run, both engines alike,
their closed forms, and NCCL's tuner terms and pick with CollNet on."""

import numpy as np
import pytest

from simulator.algorithms import REGISTRY
from simulator.algorithms.schedule import Group, Op
from simulator.errors import InputError
from simulator.model.collective import Collective
from simulator.model.execution import collnet_graphs, nccl_charges, system_of
from simulator.model.machine import Aggregation, Machine
from simulator.model.nccl import (
    Graph,
    Hardware,
    NcclAlgorithm,
    Protocol,
    bandwidth_GBps,
    choose,
    latency_us,
)
from simulator.plan import prepare
from simulator.runner import simulate
from simulator.scenario.parse import scenario_from_dict

ALLREDUCE = REGISTRY[Collective.ALLREDUCE]
SHARP = ("collnet_direct", "collnet_chain", "nvls")
SMALL = {"kind": "dgx", "nodes": 2, "gpus_per_node": 2, "nvlink_bandwidth": "400GB/s",
         "nvlink_latency": "300ns", "pcie_bandwidth": "50GB/s", "pcie_latency": "500ns",
         "nic_bandwidth": "25GB/s", "nic_latency": "1us", "nvswitch_reduction": True,
         "sharp": True, "sharp_latency": "2us"}
"""Two hosts of two GPUs in round numbers, their leaf reducing (SHARP) after 2 µs."""


def machine_of(topology: dict) -> Machine:
    scenario = scenario_from_dict({"topology": topology, "algorithms": ["ring"], "sizes": [8]})
    return prepare(scenario, select=False).machine


def test_a_sharp_leaf_takes_the_gpus_whose_nic_it_is_cabled_to():
    machine = machine_of({"preset": "dgx_h100_superpod", "nodes": 4, "sharp": True})
    leaf = next(s for s in machine.reducing_switches if s.name == "u0.leaf3")
    assert leaf.network and leaf.tier == 1
    assert leaf.gpus == frozenset(f"n{h}.gpu3" for h in range(4))
    spine = next(s for s in machine.reducing_switches if s.name == "spine0")
    assert spine.gpus == frozenset()  # no NIC is cabled to a spine
    # a host's ranks still reduce in their NVSwitch (the lowest tier first), a rail in its leaf
    assert machine.reducing_switch([8, 9, 10]).name == "n1.nvswitch"
    assert machine.reducing_switch([3, 11, 19, 27]).name == "u0.leaf3"
    assert machine.reducing_switch([3, 12]) is None


def test_without_sharp_no_network_switch_reduces():
    machine = machine_of({"preset": "dgx_h100", "nodes": 2})
    assert [s.name for s in machine.reducing_switches] == ["n0.nvswitch", "n1.nvswitch"]


@pytest.mark.parametrize("name", SHARP)
def test_they_run_where_the_network_reduces_for_every_rail(name):
    algorithm = ALLREDUCE[name]
    prefix = "across hosts NVLS runs with CollNet only: " if name == "nvls" else ""
    assert algorithm.unsupported(machine_of(SMALL)) is None
    assert algorithm.unsupported(machine_of({**SMALL, "sharp": False})) == prefix + (
        "it needs network switches that reduce (sharp: true on the topology, InfiniBand SHARP) "
        "from the NICs of the h-th GPU of every host up to one that joins them; none does for "
        "ranks [0, 2]")
    # two scalable units of two hosts: rail 0's NICs reach two leaves, summed up to a spine
    two_units = {"preset": "dgx_h100_superpod", "nodes": 4, "nodes_per_unit": 2, "spines": 2,
                 "sharp": True}
    assert algorithm.unsupported(machine_of(two_units)) is None


@pytest.mark.parametrize("name", ["collnet_direct", "collnet_chain"])
def test_collnet_needs_two_hosts(name):
    assert ALLREDUCE[name].unsupported(machine_of({**SMALL, "nodes": 1})) == (
        "it needs GPUs on two or more hosts (CollNet sums across hosts in the network), such "
        "as dgx_h100 with nodes ≥ 2")


def test_nvls_on_one_host_is_unchanged_and_needs_its_nvswitch_across_hosts():
    assert ALLREDUCE["nvls"].unsupported(machine_of({"preset": "dgx_h100"})) is None
    assert ALLREDUCE["nvls"].unsupported(machine_of({**SMALL, "nvswitch_reduction": False})) == (
        "across hosts NVLS runs with CollNet only: it needs a switch with in-switch reduction "
        "(reduction: true) cabled to every GPU of each host, such as the NVSwitch of a dgx_h100 "
        "node")


@pytest.mark.parametrize("name", SHARP)
def test_nothing_but_the_switch_rounds_crosses_hosts(name):
    # the sum across hosts is the network's: no rank sends to a rank of another host
    machine = machine_of({**SMALL, "nodes": 3})
    schedule = ALLREDUCE[name].scheduled(Group.whole(machine, 1 << 16, 4))
    messages = [(int(a), int(b)) for a, b, kind in zip(schedule.src, schedule.dst,
                                                        schedule.kinds, strict=True)
                if kind == Op.MESSAGE]
    assert not [(a, b) for a, b in messages if a >= 0 and b >= 0 and a // 2 != b // 2]
    rails = {end.members for end in schedule.switches if len(end.members) == 3}
    assert rails == {(0, 2, 4), (1, 3, 5)}


def test_collnet_direct_in_one_piece_worked_by_hand():
    # 64 KiB a rank on two hosts of two GPUs: head h's chunk 32 KiB, one piece (c = 32768 B).
    # NVLink hop to the head 0.6 µs + c/400 GB/s; up to the leaf 0.5 + 1 µs + c/25 GB/s (its
    # NIC); the leaf's 2 µs; the same down; NVLink to the other GPU: 8.98528 µs in all
    c = 32768
    expected = (0.6e-6 + c / 400e9) * 2 + (1.5e-6 + c / 25e9) * 2 + 2e-6
    result = simulate({"topology": SMALL, "algorithms": ["collnet_direct"], "sizes": [2 * c],
                       "execution": "ideal"})
    assert result.sim_time_s[0] == pytest.approx(expected, rel=1e-12)
    assert result.model_time_s[0] == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(8.98528e-6, rel=1e-9)


@pytest.mark.parametrize("name", SHARP)
@pytest.mark.parametrize("size", [16 << 20, 256 << 20])
def test_the_closed_forms_estimate_the_pipeline_within_a_quarter(name, size):
    # many flows share each GPU's NVLink max-min: the closed forms' steady step is an estimate
    result = simulate({"topology": {"preset": "dgx_h100", "nodes": 2, "sharp": True},
                       "algorithms": [name], "sizes": [size], "execution": "ideal",
                       "verify": False})
    assert result.model_time_s[0] == pytest.approx(result.sim_time_s[0], rel=0.25)


def test_the_collnet_graphs_as_the_search_finds_them():
    h100 = machine_of({"preset": "dgx_h100", "nodes": 4, "sharp": True})
    assert collnet_graphs(h100, 8, 0.0) == {
        NcclAlgorithm.COLLNET_DIRECT: Graph(8, 48.0, 48.0),
        NcclAlgorithm.COLLNET_CHAIN: Graph(8, 48.0, 48.0)}
    b200 = machine_of({"preset": "dgx_b200", "nodes": 2, "sharp": True})
    graphs = collnet_graphs(b200, 8, 0.0)  # pass 2 raises bwIntra to twice bwInter's 48
    assert graphs[NcclAlgorithm.COLLNET_DIRECT] == Graph(8, 96.0, 48.0)
    assert graphs[NcclAlgorithm.COLLNET_CHAIN] == Graph(8, 96.0, 48.0)
    assert NcclAlgorithm.COLLNET_DIRECT not in system_of(
        machine_of({"preset": "dgx_h100", "nodes": 4})).graphs


def test_the_tuner_rates_collnet_and_nvls_across_nodes_as_tuning_cc():
    system = system_of(machine_of({"preset": "dgx_h100", "nodes": 4, "sharp": True}))
    assert system.collnet
    S = Protocol.SIMPLE
    # Direct: 8 × 48 = 384, GPU/NIC factor 8/8 = 1, × 0.85 (SM90), × 0.5
    assert bandwidth_GBps(system, NcclAlgorithm.COLLNET_DIRECT, S) == pytest.approx(163.2)
    # Chain: 8 × 48 × 0.5
    assert bandwidth_GBps(system, NcclAlgorithm.COLLNET_CHAIN, S) == pytest.approx(192.0)
    # NVLS on the NVLSTree graph 8 × (40, 48): min(40 × 0.85 × 7/8 × 2, 48) × 8 × 32/62
    assert bandwidth_GBps(system, NcclAlgorithm.NVLS, S) == pytest.approx(384 * 32 / 62)
    # latencies: 2 (3.7 + 7 × 0.4) + 31; 2 × 7 × 2.8 + 30; 25 + 18 (IB adds nothing)
    assert latency_us(system, NcclAlgorithm.COLLNET_DIRECT, S) == pytest.approx(44.0)
    assert latency_us(system, NcclAlgorithm.COLLNET_CHAIN, S) == pytest.approx(69.2)
    assert latency_us(system, NcclAlgorithm.NVLS, S) == pytest.approx(43.0)
    for protocol in (Protocol.LL, Protocol.LL128):
        assert bandwidth_GBps(system, NcclAlgorithm.COLLNET_CHAIN, protocol) == 0.0
    plain = system_of(machine_of({"preset": "dgx_h100", "nodes": 4}))
    for algorithm in (NcclAlgorithm.COLLNET_DIRECT, NcclAlgorithm.COLLNET_CHAIN,
                      NcclAlgorithm.NVLS):
        assert bandwidth_GBps(plain, algorithm, S) == 0.0


def test_with_sharp_the_tuner_picks_nvls_across_nodes_and_collnet_without_nvls():
    sharp = {"preset": "dgx_h100", "nodes": 4, "sharp": True}
    system = system_of(machine_of(sharp))
    assert choose(system, 1 << 30).algorithm is NcclAlgorithm.NVLS
    assert choose(system_of(machine_of({**sharp, "sharp": False})),
                  1 << 30).algorithm is NcclAlgorithm.NVLS_TREE
    # NCCL_ALGO=^nvls leaves NVLSTree (187.9 GB/s, 108.6 µs) and CollNetChain (192, 69.2);
    # NCCL_ALGO=collnetdirect leaves Direct alone
    run = {"topology": sharp, "algorithms": ["collnet_direct", "collnet_chain", "nvls_tree"],
           "sizes": [256 << 20], "verify": False}
    for algo, pick in (("^nvls", "collnet_chain"), ("collnetdirect", "collnet_direct")):
        frame = simulate({**run, "nccl": {"algo": algo}})
        assert list(frame[frame.nccl_pick.astype(bool)].algorithm) == [pick]


def test_a_sharp_round_costs_ncclS_network_step_under_nccl():
    machine = machine_of({"preset": "dgx_h100", "nodes": 2, "sharp": True})
    plan = nccl_charges(machine, NcclAlgorithm.COLLNET_CHAIN, Protocol.SIMPLE, 1 << 20)
    assert plan.step_latency_s[Hardware.NET] == pytest.approx(30e-6)
    assert plan.step_latency_s[Hardware.NVLINK] == pytest.approx(2.8e-6)


def test_collnet_under_ll_is_an_input_error():
    with pytest.raises(InputError, match="NCCL runs CollNetChain with the Simple protocol only"):
        simulate({"topology": SMALL | {"compute_capability": 90, "nvlinks": 18},
                  "algorithms": ["collnet_chain"], "sizes": [1 << 20], "protocol": "LL"})


CLUSTER = {"kind": "cluster", "nodes": 4, "gpus_per_node": 1, "nvlink_bandwidth": "400GB/s",
           "nvlink_latency": "300ns", "pcie_bandwidth": "50GB/s", "pcie_latency": "1us",
           "nic_bandwidth": "25GB/s", "nic_latency": "1us", "uplink_latency": "500ns",
           "nodes_per_unit": 2, "spines": 1, "sharp": True, "sharp_latency": "2us",
           "nvswitch_reduction": True}
"""Four hosts of one GPU in two units of two (a leaf each, 2 × 25 GB/s up to one spine), every
switch reducing (SHARP) after 2 µs."""


def test_sharp_climbs_from_the_leaves_to_the_switch_that_joins_them():
    machine = machine_of(CLUSTER)
    tree = machine.aggregation([0, 1, 2, 3])
    assert tree.switch.name == "spine0" and tree.depth == 2 and tree.ranks == (0, 1, 2, 3)
    assert [(leaf.switch.name, leaf.children) for leaf in tree.children] == [
        ("u0.leaf0", (0, 1)), ("u1.leaf0", (2, 3))]
    assert machine.aggregation([0, 1]) == Aggregation(tree.children[0].switch, (0, 1))
    # three tiers: pods of one unit, spine s of every pod on core s
    pods = {**CLUSTER, "nodes": 4, "nodes_per_unit": 1, "units_per_pod": 2, "cores": 1}
    tree = machine_of(pods).aggregation([0, 1, 2, 3])
    assert tree.switch.name == "core0" and tree.depth == 3
    assert [spine.switch.name for spine in tree.children] == ["p0.spine0", "p1.spine0"]
    assert [leaf.switch.name for spine in tree.children for leaf in spine.children] == [
        "u0.leaf0", "u1.leaf0", "u2.leaf0", "u3.leaf0"]


def test_over_a_tree_of_switches_in_one_piece_worked_by_hand():
    # 64 KiB on each of four hosts: up GPU -> PCIe -> NIC -> leaf (1 µs + 1 µs, 25 GB/s), the
    # leaf's 2 µs, up to the spine (0.5 µs, 50 GB/s), its 2 µs, and the same back down:
    # 2 (2 µs + c / 25 GB/s) + 2 (0.5 µs + c / 50 GB/s) + 4 µs = 16.86432 µs
    c = 65536
    expected = 2 * (2e-6 + c / 25e9) + 2 * (0.5e-6 + c / 50e9) + 4e-6
    for name in ("collnet_direct", "collnet_chain"):
        result = simulate({"topology": CLUSTER, "algorithms": [name], "sizes": [c],
                           "execution": "ideal"})
        assert result.sim_time_s[0] == pytest.approx(expected, rel=1e-12)
        assert result.model_time_s[0] == pytest.approx(expected, rel=1e-12)
        assert list(result.messages) == [12]  # 4 up, 2 leaf to spine, 2 back, 4 down
    assert expected == pytest.approx(16.86432e-6, rel=1e-9)


@pytest.mark.parametrize("name", SHARP)
@pytest.mark.parametrize("topology, size, execution", [
    (SMALL, 8 << 20, "ideal"), ({**SMALL, "nodes": 3}, 3 << 20 | 12, "ideal"),
    ({"preset": "dgx_h100", "nodes": 2, "sharp": True}, 4 << 20, "nccl"),
    # over a tree of switches: leaves and a spine; leaves, pod spines and a core
    ({**CLUSTER, "gpus_per_node": 2}, 3 << 20 | 12, "ideal"),
    ({**CLUSTER, "nodes": 6, "nodes_per_unit": 2, "units_per_pod": 2, "cores": 1}, 1 << 20,
     "ideal"),
    ({"preset": "dgx_h100_superpod", "nodes": 4, "nodes_per_unit": 2, "spines": 2,
      "sharp": True}, 4 << 20, "nccl")])
def test_both_engines_time_them_alike_to_the_bit_and_verify(name, topology, size, execution):
    scenario = {"topology": topology, "algorithms": [name], "sizes": [size],
                "execution": execution, "op": "max"}
    simpy, vector = (simulate({**scenario, "engine": engine}) for engine in ("simpy", "vector"))
    np.testing.assert_array_equal(vector.sim_time_s, simpy.sim_time_s)
    assert vector.verified.all() and simpy.verified.all()
    assert list(vector.messages) == list(simpy.messages)
