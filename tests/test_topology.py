"""Topology builders and presets."""

import math
from dataclasses import fields

import networkx as nx
import pytest

from simulator import simulate
from simulator.model.machine import Machine
from simulator.model.routing import Routing
from simulator.model.topology import (
    BUILDERS,
    HostParams,
    Param,
    dgx,
    fully_connected,
    mesh,
    ring,
    switch,
    torus,
)
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
    graph = dgx(2, 8, 450e9, 3e-7, 63e9, 5e-7, 50e9, 8.5e-7, HostParams(nic_message_latency=1e-6))
    kinds = [kind for _, kind in graph.nodes(data="kind")]
    assert (kinds.count("gpu"), kinds.count("nic"), kinds.count("switch")) == (16, 16, 3)
    assert graph.nodes["n1.gpu3"] == {"kind": "gpu", "rank": 11, "host": 1, "nic": "n1.nic3"}
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
    assert list(BUILDERS) == ["switch", "ring", "fully_connected", "dgx", "dgx1", "torus", "mesh",
                              "leaf_spine", "fat_tree", "dragonfly", "cluster", "xgmi", "graph",
                              "nccl_xml"]
    assert list(BUILDERS["switch"].params) == ["ranks", "bandwidth", "latency"]
    assert list(BUILDERS["torus"].params) == ["dims", "bandwidth", "latency"]


HOST_BLOCK = ["nic_message_latency", "nvswitch_reduction", "nvswitch_reduction_latency",
              "compute_capability", "nvlinks", "nccl_nvlink_bandwidth", "nccl_nvls_bandwidth",
              "nccl_launch_latency", "transport", "cpu", "nccl_net_bandwidth",
              "nccl_net_latency", "sharp", "sharp_latency"]
"""The host and NCCL parameters dgx and cluster share, in the order scenario files have named
them since issue 25 (one block, HostParams)."""


def test_the_host_block_is_read_as_flat_parameters_in_its_place():
    assert [f.name for f in fields(HostParams)] == HOST_BLOCK
    assert list(BUILDERS["dgx"].params) == [
        "nodes", "gpus_per_node", "nvlink_bandwidth", "nvlink_latency", "pcie_bandwidth",
        "pcie_latency", "nic_bandwidth", "nic_latency", *HOST_BLOCK]
    assert list(BUILDERS["cluster"].params)[-15:] == ["ecmp_seed", *HOST_BLOCK]
    dgx_builder = BUILDERS["dgx"]
    assert {key: dgx_builder.params[key] for key in ("compute_capability", "transport", "sharp")} \
        == {"compute_capability": Param.COUNT, "transport": Param.TRANSPORT, "sharp": Param.FLAG}
    assert dgx_builder.optional == frozenset(HOST_BLOCK)
    assert dgx_builder.defaults == {**dict.fromkeys(HOST_BLOCK, 0.0), "nvswitch_reduction": False,
                                    "compute_capability": 0, "nvlinks": 0, "transport": "ib",
                                    "cpu": "intel", "sharp": False}


def test_a_builder_gathers_its_flat_parameters_into_the_block_once():
    cables = dict(nvlink_bandwidth=450e9, nvlink_latency=3e-7, pcie_bandwidth=63e9,
                  pcie_latency=5e-7, nic_bandwidth=50e9, nic_latency=8.5e-7)
    flat = BUILDERS["dgx"].build(nodes=2, gpus_per_node=4, **cables, compute_capability=90,
                                 nic_message_latency=1e-6, sharp=True, sharp_latency=2e-6)
    given = dgx(2, 4, **cables, hosts=HostParams(compute_capability=90, nic_message_latency=1e-6,
                                                 sharp=True, sharp_latency=2e-6))
    assert nx.utils.graphs_equal(flat, given) and flat.graph == given.graph
    assert flat.graph["compute_capability"] == 90 and flat.graph["transport"] == "ib"
    assert flat.nodes["leaf"] == {"kind": "switch", "tier": 1, "reduction": True,
                                  "reduction_latency": 2e-6}
    assert flat.nodes["n1.nic3"] == {"kind": "nic", "latency": 1e-6}
    with pytest.raises(TypeError, match=r"^builder dgx: unknown parameters colour, nvlink$"):
        BUILDERS["dgx"].build(nodes=2, gpus_per_node=4, **cables, nvlink=1, colour=2)


def _cables(dims):
    """Full-duplex cables of a torus: per dimension of size s, s per ring (1 if s = 2, 0 if 1),
    one ring per position of the other dimensions."""
    total = 0
    for size in dims:
        per_ring = size if size > 2 else size - 1
        total += per_ring * math.prod(dims) // size
    return total


@pytest.mark.parametrize("dims", [(4, 4), (2, 3), (3, 5), (4,), (1, 5), (4, 4, 4), (2, 2, 2),
                                  (3, 4, 2)])
def test_torus_structure_follows_its_formulas(dims):
    graph = torus(dims, 50e9, 1e-6)
    p = math.prod(dims)
    assert graph.number_of_nodes() == p
    assert graph.number_of_edges() == 2 * _cables(dims)
    degree = sum(2 if size > 2 else size - 1 for size in dims)
    assert {graph.out_degree(node) for node in graph} == {degree}
    assert nx.diameter(graph) == sum(size // 2 for size in dims)
    assert graph.nodes["gpu0"]["coords"] == (0,) * len(dims)
    assert Machine.of(graph).ranks == p


def test_torus_routes_go_in_dimension_order_the_short_way():
    routing = Routing(torus((4, 4), 50e9, 1e-6))
    # (0, 0) -> (2, 3): dimension 0 forward twice (a tie: forward), then dimension 1 back once
    route = routing.route("gpu0", "gpu11")
    assert route.nodes == ("gpu0", "gpu4", "gpu8", "gpu11")
    assert route.latency_s == pytest.approx(3e-6, rel=1e-12)


def test_mesh_structure_follows_its_formulas():
    for dims in [(4, 4), (2, 3), (3, 5, 2), (5,), (1, 4)]:
        graph = mesh(dims, 50e9, 1e-6)
        p = math.prod(dims)
        cables = sum((size - 1) * p // size for size in dims)
        assert (graph.number_of_nodes(), graph.number_of_edges()) == (p, 2 * cables)
        degrees = [graph.out_degree(node) for node in graph]
        assert max(degrees) == sum(min(size - 1, 2) for size in dims)  # an inner GPU
        assert graph.out_degree("gpu0") == sum(size > 1 for size in dims)  # a corner
        assert nx.diameter(graph) == sum(size - 1 for size in dims)


def test_mesh_routes_go_straight_in_dimension_order():
    routing = Routing(mesh((4, 4), 50e9, 1e-6))
    # (0, 3) -> (3, 0): dimension 0 down three, then dimension 1 back three (no wrap-around)
    assert routing.route("gpu3", "gpu12").nodes == (
        "gpu3", "gpu7", "gpu11", "gpu15", "gpu14", "gpu13", "gpu12")


@pytest.mark.parametrize("build, dims", [(torus, (4, 4)), (torus, (3, 5)), (torus, (2, 3, 4)),
                                         (mesh, (4, 4)), (mesh, (3, 2, 3))])
def test_grid_routes_are_shortest_paths(build, dims):
    graph = build(dims, 50e9, 1e-6)
    plain = graph.copy()
    del plain.graph["paths"]
    structured, searched = Routing(graph), Routing(plain)
    for src in graph:
        for dst in graph:
            if src != dst:
                mine, best = structured.route(src, dst), searched.route(src, dst)
                assert (len(mine.links), mine.latency_s) == (len(best.links), best.latency_s)
                assert all(graph.has_edge(*link) for link in mine.links)


def test_a_torus_and_a_mesh_from_a_scenario_run_and_verify():
    for kind in ("torus", "mesh"):
        frame = simulate({"topology": {"kind": kind, "dims": [2, 3], "bandwidth": "50GB/s",
                                       "latency": "1us"}, "algorithms": ["ring", "direct"],
                          "sizes": ["1MiB"]})
        assert list(frame.ranks) == [6, 6] and frame.verified.all()
