"""AWS p4d.24xlarge and its EFA transport (issue 38, item 4): the preset's hosts as aws-ofi-nccl's
p4d topology file draws them, and EFA's advertised latency (aws-ofi-nccl src/platform-aws.cpp)
charged on every network step, by hand."""

from pathlib import Path

import pytest

from simulator.model.execution import latencies, nic_ports, system_of
from simulator.model.nccl import Hardware, NcclAlgorithm, Protocol, latency_us
from simulator.model.transport import LATENCY_US, Transport, latency_inter_us
from simulator.plan import prepare
from simulator.runner import run_point
from simulator.scenario import scenario_from_dict

P4D = str(Path(__file__).resolve().parent.parent / "topologies" / "p4d.yaml")
RING, TREE = NcclAlgorithm.RING, NcclAlgorithm.TREE
LL, SIMPLE = Protocol.LL, Protocol.SIMPLE


def scenario(nodes=2, **topology):
    return scenario_from_dict({
        "name": "p4d", "topology": {"preset": P4D, "nodes": nodes, **topology},
        "sizes": [8], "algorithms": ["ring"], "execution": "nccl"})


def machine(nodes=2, **topology):
    return prepare(scenario(nodes, **topology), select=False).machine


def test_efa_advertises_75_us_a_network_step():
    # platform-aws.cpp:87: p4d.24xlarge .latency = 75.0; one host has no network step
    assert LATENCY_US[Transport.EFA] == 75.0
    assert latency_inter_us(Transport.EFA, 2) == 75.0
    assert latency_inter_us(Transport.EFA, 1) == 0.0


def test_the_preset_is_eight_a100s_and_four_efa_nics():
    p4d = machine()
    assert p4d.nccl.transport is Transport.EFA
    assert (p4d.compute_capability, p4d.nvlinks, p4d.ranks) == (80, 12, 16)
    assert nic_ports(p4d) == (12.5e9,) * 8  # 4 × 100 Gb/s a host, two hosts


def test_the_execution_charges_efas_latency_on_every_network_step():
    # hwLat NET (2.30.7): Ring LL 2.7 µs, Simple 14 µs; + latencyInter, twice for Simple (flush)
    _, ll = latencies(machine(), RING, LL, 8)
    _, simple = latencies(machine(), RING, SIMPLE, 8)
    assert ll[Hardware.NET] == pytest.approx((2.7 + 75.0) * 1e-6, rel=1e-12)
    assert simple[Hardware.NET] == pytest.approx((14.0 + 2 * 75.0) * 1e-6, rel=1e-12)


def test_the_tuner_adds_efas_latency_to_the_tree():
    # Tree LL on 2 × 8: baseLat 6.8 + 2 × (7 NVLink steps × 0.6 + 1 level × (5.0 + 75))
    assert latency_us(system_of(machine()), TREE, LL) == pytest.approx(
        6.8 + 2 * (7 * 0.6 + 5.0 + 75.0), rel=1e-12)


def test_one_p4d_runs_the_a100_ring():
    # one host: the NVLink ring of dgx_a100 (the same NVSwitch); no network, so EFA costs nothing
    one = run_point(scenario(nodes=1), "ring", 1 << 30)
    a100 = run_point(scenario_from_dict({"topology": {"preset": "dgx_a100"}, "sizes": [1 << 30],
                                         "algorithms": ["ring"]}), "ring", 1 << 30)
    assert one.sim_time_s == pytest.approx(a100.sim_time_s, rel=1e-12)
