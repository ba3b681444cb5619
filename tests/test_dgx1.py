"""The DGX-1 (V100) builder and preset: the hybrid cube-mesh against nvidia-smi's own matrix,
the PCIe switches and NICs, the routes, a ring's time by hand, and the parameters' problems."""

from dataclasses import replace

import pytest

from simulator import simulate
from simulator.errors import InputError
from simulator.model.dgx1 import dgx1
from simulator.model.machine import Machine
from simulator.runner import Setup, prepare, run_point
from simulator.scenario.parse import load_preset, scenario_from_dict
from simulator.scenario.rules import topology_issues

NVIDIA_SMI = """\
GPU0     X      NV1     NV1     NV2     NV2     SYS     SYS     SYS
GPU1    NV1      X      NV2     NV1     SYS     NV2     SYS     SYS
GPU2    NV1     NV2      X      NV2     SYS     SYS     NV1     SYS
GPU3    NV2     NV1     NV2      X      SYS     SYS     SYS     NV1
GPU4    NV2     SYS     SYS     SYS      X      NV1     NV1     NV2
GPU5    SYS     NV2     SYS     SYS     NV1      X      NV2     NV1
GPU6    SYS     SYS     NV1     SYS     NV1     NV2      X      NV2
GPU7    SYS     SYS     SYS     NV1     NV2     NV1     NV2      X
"""
"""The GPU columns of ``nvidia-smi topo -m`` on a DGX-1 with V100, as printed in pytorch/pytorch
benchmarks/distributed/ddp/README.md (NV#: a bonded set of # NVLinks; SYS: none)."""

LINK = 25e9  # one NVLink 2 link, per direction
V100 = dict(nvlink_bandwidth=LINK, nvlink_latency=6e-7, pcie_bandwidth=15.75e9,
            pcie_latency=5e-7, nic_bandwidth=12.5e9, nic_latency=8.5e-7)


def smi_links() -> dict[tuple[int, int], int]:
    """NVLink links per ordered GPU pair, read off the matrix (0 for SYS)."""
    rows = [line.split()[1:] for line in NVIDIA_SMI.splitlines()]
    return {(a, b): int(cell[2:]) if cell.startswith("NV") else 0
            for a, row in enumerate(rows) for b, cell in enumerate(row) if a != b}


def test_nvlink_cables_are_the_cube_mesh_of_nvidia_smi():
    graph = dgx1(1, **V100)
    links = smi_links()
    for (a, b), count in links.items():
        u, v = f"n0.gpu{a}", f"n0.gpu{b}"
        if count:
            assert graph.edges[u, v] == {"bandwidth": count * LINK, "latency": 6e-7,
                                         "link": "nvlink", "links": count}, (a, b)
        else:
            assert not graph.has_edge(u, v), (a, b)
    # 16 cabled pairs, 6 links (150 GB/s) per GPU; each quad fully cabled, GPU i to GPU i+4
    assert sum(1 for count in links.values() if count) == 2 * 16
    for a in range(8):
        nvlink = [graph.edges[f"n0.gpu{a}", v] for v in graph.succ[f"n0.gpu{a}"]
                  if graph.edges[f"n0.gpu{a}", v]["link"] == "nvlink"]
        assert sum(e["links"] for e in nvlink) == 6
        assert sum(e["bandwidth"] for e in nvlink) == 150e9
    assert all(links[a, b] for quad in ((0, 1, 2, 3), (4, 5, 6, 7)) for a in quad for b in quad
               if a != b)
    assert all(links[i, i + 4] for i in range(4))
    # the double links form one Hamiltonian cycle, the single links another
    for cycle, count in (((0, 3, 2, 1, 5, 6, 7, 4), 2), ((0, 1, 3, 7, 5, 4, 6, 2), 1)):
        assert all(links[a, cycle[(i + 1) % 8]] == count for i, a in enumerate(cycle))


def test_two_gpus_and_a_nic_share_each_pcie_switch():
    graph = dgx1(2, **V100)
    kinds = [kind for _, kind in graph.nodes(data="kind")]
    assert (kinds.count("gpu"), kinds.count("nic"), kinds.count("switch")) == (16, 8, 9)
    assert graph.nodes["n1.gpu3"] == {"kind": "gpu", "rank": 11, "host": 1}
    assert graph.nodes["n1.nic3"] == {"kind": "nic", "latency": 0.0}
    assert graph.nodes["n0.pcie2"] == {"kind": "switch", "tier": 0}
    assert graph.nodes["leaf"] == {"kind": "switch", "tier": 1}
    # PIX in nvidia-smi: mlx5_k on one PCIe switch with GPUs 2k and 2k+1
    for k in range(4):
        assert set(graph.succ[f"n0.pcie{k}"]) == {f"n0.gpu{2 * k}", f"n0.gpu{2 * k + 1}",
                                                  f"n0.nic{k}"}
    assert graph.edges["n0.gpu4", "n0.pcie2"] == {"bandwidth": 15.75e9, "latency": 2.5e-7,
                                                  "link": "pcie"}
    assert graph.edges["n0.nic2", "n0.pcie2"] == {"bandwidth": 15.75e9, "latency": 2.5e-7,
                                                  "link": "pcie"}
    assert graph.edges["n1.nic0", "leaf"] == {"bandwidth": 12.5e9, "latency": 8.5e-7,
                                              "link": "net"}
    assert Machine.of(graph).placement[8:10] == ("n1.gpu0", "n1.gpu1")


@pytest.mark.parametrize("nics, behind", [
    (1, {0: 0}),
    (2, {0: 0, 1: 2}),
    (4, {0: 0, 1: 1, 2: 2, 3: 3}),
    (8, {0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 5: 2, 6: 3, 7: 3}),
])
def test_nics_per_node_spreads_the_nics_over_the_pcie_switches(nics, behind):
    graph = dgx1(1, **V100, nics_per_node=nics)
    assert {int(n[6:]): int(next(s for s in graph.succ[n] if s != "leaf")[7:])
            for n, kind in graph.nodes(data="kind") if kind == "nic"} == behind


def test_routes_stay_on_nvlink_in_a_host_and_leave_by_the_own_nic():
    routing = Machine.of(dgx1(2, **V100)).routing
    # cabled: the cable, never the PCIe switch the pair shares (cheaper by latency: 2 x 250 ns)
    assert routing.route("n0.gpu0", "n0.gpu1").nodes == ("n0.gpu0", "n0.gpu1")
    # not cabled: through a GPU cabled to both (0 or 7), the first by name
    assert routing.route("n0.gpu3", "n0.gpu4").nodes == ("n0.gpu3", "n0.gpu0", "n0.gpu4")
    assert routing.route("n0.gpu3", "n0.gpu4").latency_s == pytest.approx(1.2e-6, rel=1e-12)
    route = routing.route("n0.gpu5", "n1.gpu2")
    assert route.nodes == ("n0.gpu5", "n0.pcie2", "n0.nic2", "leaf", "n1.nic1", "n1.pcie1",
                           "n1.gpu2")
    assert route.latency_s == pytest.approx(2 * 5e-7 + 2 * 8.5e-7, rel=1e-12)
    assert route.bottleneck_Bps == 12.5e9


def test_with_fewer_nics_than_switches_gpus_reach_one_over_nvlink():
    routing = Machine.of(dgx1(2, **V100, nics_per_node=1)).routing
    assert routing.route("n0.gpu7", "n1.gpu6").nodes == (
        "n0.gpu7", "n0.gpu3", "n0.gpu0", "n0.pcie0", "n0.nic0", "leaf", "n1.nic0", "n1.pcie0",
        "n1.gpu0", "n1.gpu2", "n1.gpu6")
    routing = Machine.of(dgx1(2, **V100, nics_per_node=2)).routing
    assert routing.route("n0.gpu3", "n1.gpu5").nodes == (
        "n0.gpu3", "n0.gpu0", "n0.pcie0", "n0.nic0", "leaf", "n1.nic1", "n1.pcie2", "n1.gpu5")
    routing = Machine.of(dgx1(2, **V100, nics_per_node=8)).routing
    assert routing.route("n0.gpu5", "n1.gpu0").nodes == (
        "n0.gpu5", "n0.pcie2", "n0.nic5", "leaf", "n1.nic0", "n1.pcie0", "n1.gpu0")


def ring_on(order, size_bytes):
    """Ring allreduce on one dgx1_v100 with ranks placed in ``order`` around the ring."""
    scenario = scenario_from_dict({"topology": {"preset": "dgx1_v100"}, "algorithms": ["ring"],
                                   "sizes": [size_bytes]})
    setup = prepare(scenario)
    machine = setup.machine.subgroup(order)
    setup = Setup(setup.topology, machine, replace(setup.cost, machine=machine), setup.algorithms)
    return run_point(scenario, "ring", size_bytes, setup=setup)


@pytest.mark.parametrize("order, bandwidth", [((0, 3, 2, 1, 5, 6, 7, 4), 50e9),
                                              ((0, 1, 3, 7, 5, 4, 6, 2), 25e9)])
@pytest.mark.parametrize("size_bytes", [4096, 8 << 20])
def test_a_ring_on_a_cycle_of_cables_equals_its_closed_form(order, bandwidth, size_bytes):
    # every hop one cable of the same links, no link shared: T = 2(p-1)(alpha + c/B), c = S/8
    result = ring_on(order, size_bytes)
    expected = 14 * (6e-7 + size_bytes / 8 / bandwidth)
    assert result.verified and result.max_abs_error == 0.0
    assert result.sim_time_s == pytest.approx(expected, rel=1e-12)
    assert result.model_time_s == pytest.approx(expected, rel=1e-12)


def test_a_ring_in_rank_order_is_bounded_by_its_closed_form():
    # ranks 3 -> 4 and 7 -> 0 have no cable: both routes cross n0.gpu3 -> n0.gpu0 (two links,
    # 50 GB/s), so the closed form (no link shared) is a lower bound. At 64 MiB it is the pace of
    # the slowest hop, 7 -> 3 -> 0 (one link first): 1.2 us + 14 c / 25 GB/s. Each message moves
    # at 25 GB/s or more (two flows at most on the shared link) and pays at most 1.2 us, so
    # 14 (1.2 us + c / 25 GB/s) bounds the simulation from above.
    machine = Machine.of(load_preset("dgx1_v100").build())
    shared = ("n0.gpu3", "n0.gpu0")
    assert shared in machine.route(3, 4).links and shared in machine.route(7, 0).links
    size = 64 << 20
    c = size / 8
    result = simulate({"topology": {"preset": "dgx1_v100"}, "algorithms": ["ring"],
                       "sizes": [size]}).iloc[0]
    assert result.verified
    assert result.model_time_s == pytest.approx(1.2e-6 + 14 * c / 25e9, rel=1e-12)
    assert result.model_time_s <= result.sim_time_s <= 14 * (1.2e-6 + c / 25e9)


def test_the_preset_carries_its_cited_numbers():
    spec = load_preset("dgx1_v100")
    assert spec.kind == "dgx1" and spec.ranks == 8
    assert dict(spec.params) == {"nodes": 1, "nvlink_bandwidth": 25e9, "nvlink_latency": 6e-7,
                                 "pcie_bandwidth": 15.75e9, "pcie_latency": 5e-7,
                                 "nic_bandwidth": 12.5e9, "nic_latency": 8.5e-7,
                                 "nics_per_node": 4, "nic_message_latency": 0.0}
    # NCCL's LL step latencies: a cable per NVLink step, 2.7 us GPU to GPU across hosts
    assert 2 * spec.params["pcie_latency"] + 2 * spec.params["nic_latency"] == pytest.approx(
        2.7e-6, rel=1e-12)


def test_every_algorithm_runs_and_verifies_on_two_hosts_of_one_nic():
    frame = simulate({"topology": {"preset": "dgx1_v100", "nodes": 2, "nics_per_node": 1},
                      "sizes": [64 << 10]})
    assert frame.topology[0] == "dgx1_v100[nodes=2,nics_per_node=1]"
    assert set(frame.execution) == {"ideal"} and set(frame.ranks) == {16}
    assert frame.verified.all() and (frame.max_abs_error == 0).all()
    assert {"ring", "hierarchical", "halving_doubling", "tree"} <= set(frame.algorithm)


def test_parameter_problems_are_one_line_each():
    base = {"nodes": 2, **V100}
    assert topology_issues("dgx1", {**base, "nics_per_node": 3}) == [
        ("topology.nics_per_node", "expected 1, 2, 4 or 8 (NICs spread evenly over the 4 PCIe "
                                   "switches, at most one per GPU), got 3")]
    assert topology_issues("dgx1", {**base, "nics_per_node": 16}) == [
        ("topology.nics_per_node", "expected 1, 2, 4 or 8 (NICs spread evenly over the 4 PCIe "
                                   "switches, at most one per GPU), got 16")]
    with pytest.raises(InputError) as error:
        scenario_from_dict({"topology": {"kind": "dgx1", "nodes": 0, "nvlink_bandwidth": "25",
                                         "pcie_bandwidth": "15.75GB/s", "pcie_latency": "500ns",
                                         "nic_bandwidth": "100Gbps", "nic_latency": "850ns",
                                         "nics_per_node": 0}, "sizes": [1024]})
    assert [(p.field, p.message) for p in error.value.problems] == [
        ("topology.nvlink_latency", "required but missing"),
        ("topology.nodes", "expected a whole number ≥ 1, got 0"),
        ("topology.nvlink_bandwidth", "expected a bandwidth like '25GB/s', got '25'"),
        ("topology.nics_per_node", "expected a whole number ≥ 1, got 0"),
    ]


def test_nccl_execution_is_refused_with_the_reason():
    with pytest.raises(InputError) as error:
        scenario_from_dict({"topology": {"preset": "dgx1_v100"}, "sizes": [1024],
                            "execution": "nccl"})
    assert [(p.field, p.message) for p in error.value.problems] == [
        ("execution", "expected a topology that states compute_capability and nvlinks for "
                      "execution: nccl (the dgx_h100 and dgx_a100 presets do), got kind dgx1")]
