"""Topology builders and presets."""

import pytest

from simulator.model.machine import Machine
from simulator.model.topology import BUILDERS, dgx, fully_connected, ring, switch
from simulator.scenario.parse import load_preset


def test_switch_gives_each_gpu_its_own_full_duplex_link():
    graph = switch(4, 25e9, 5e-7)
    assert graph.number_of_nodes() == 5 and graph.number_of_edges() == 8
    for r in range(4):
        for edge in ((f"gpu{r}", "switch"), ("switch", f"gpu{r}")):
            assert graph.edges[edge] == {"bandwidth": 25e9, "latency": 5e-7, "link": "nvlink"}
    assert graph.nodes["switch"]["kind"] == "switch"
    assert Machine.of(graph).placement == ("gpu0", "gpu1", "gpu2", "gpu3")


def test_ring_cables_neighbours_only():
    graph = ring(5, 1e9, 1e-6)
    assert sorted(graph.edges) == sorted(
        [(f"gpu{i}", f"gpu{(i + 1) % 5}") for i in range(5)]
        + [(f"gpu{(i + 1) % 5}", f"gpu{i}") for i in range(5)])
    assert ring(1, 1e9, 0).number_of_edges() == 0
    assert ring(2, 1e9, 0).number_of_edges() == 2


def test_fully_connected_cables_every_pair():
    graph = fully_connected(6, 1e9, 1e-6)
    assert graph.number_of_edges() == 6 * 5
    assert all(data["kind"] == "gpu" for _, data in graph.nodes(data=True))


def test_dgx_structure():
    graph = dgx(2, 8, 450e9, 3e-7, 63e9, 5e-7, 50e9, 8.5e-7, nic_message_latency=1e-6)
    kinds = [kind for _, kind in graph.nodes(data="kind")]
    assert (kinds.count("gpu"), kinds.count("nic"), kinds.count("switch")) == (16, 16, 3)
    assert graph.nodes["n1.gpu3"] == {"kind": "gpu", "rank": 11, "host": 1}
    assert graph.nodes["n1.nic3"] == {"kind": "nic", "latency": 1e-6}
    assert graph.edges["n0.gpu0", "n0.nvswitch"]["bandwidth"] == 450e9
    assert graph.edges["n0.gpu0", "n0.nic0"]["bandwidth"] == 63e9
    assert graph.edges["n0.nic0", "leaf"]["bandwidth"] == 50e9
    assert [graph.edges[e]["link"] for e in (("n0.gpu0", "n0.nvswitch"), ("n0.gpu0", "n0.nic0"),
                                             ("n0.nic0", "leaf"))] == ["nvlink", "pcie", "net"]
    assert Machine.of(graph).placement[8] == "n1.gpu0"


@pytest.mark.parametrize("preset, nvlink, pcie, nic", [
    ("dgx_h100", 450e9, 63e9, 50e9),
    ("dgx_a100", 300e9, 31.5e9, 25e9),
])
def test_presets_carry_spec_sheet_numbers(preset, nvlink, pcie, nic):
    spec = load_preset(preset)
    params = dict(spec.params)
    assert (params["nvlink_bandwidth"], params["pcie_bandwidth"], params["nic_bandwidth"]) == (
        nvlink, pcie, nic)
    # latencies split NCCL's per-step hwLat (LL): NVLink 0.6 us over 2 hops, NET 2.7 us over 4
    assert 2 * params["nvlink_latency"] == pytest.approx(0.6e-6, rel=1e-12)
    assert 2 * params["pcie_latency"] + 2 * params["nic_latency"] == pytest.approx(2.7e-6, rel=1e-12)
    assert spec.build().number_of_nodes() == 8 + 8 + 2


def test_every_builder_is_registered_with_its_parameters():
    assert list(BUILDERS) == ["switch", "ring", "fully_connected", "dgx"]
    assert list(BUILDERS["switch"].params) == ["ranks", "bandwidth", "latency"]
