"""The multi-tier fabrics (leaf/spine, fat-tree, dragonfly, GPU clusters): their structure
against formulas, their routes against the graph search, ECMP's balance and determinism, and a
hand-computed contention case on an oversubscribed fabric."""

import collections
import itertools
import math

import networkx as nx
import pytest

from simulator.model.machine import Machine
from simulator.model.routing import Routing
from simulator.model.topology import (
    BUILDERS,
    HostParams,
    cluster,
    dgx,
    dragonfly,
    fat_tree,
    leaf_spine,
)
from simulator.runner import simulate
from simulator.scenario.parse import load_preset, scenario_from_dict
from simulator.scenario.rules import topology_issues
from tests.conftest import REPO

REPO_TOPOLOGIES = REPO / "topologies"

H100 = dict(nvlink_bandwidth=450e9, nvlink_latency=3e-7, pcie_bandwidth=63e9,
            pcie_latency=5e-7, nic_bandwidth=50e9, nic_latency=8.5e-7, uplink_latency=6e-7)


def kinds(graph):
    return collections.Counter(kind for _, kind in graph.nodes(data="kind"))


def cables(graph):
    return graph.number_of_edges() // 2


def degree(graph, node):
    return len(graph.succ[node])


def gpus(graph):
    return sorted((n for n, k in graph.nodes(data="kind") if k == "gpu"),
                  key=lambda n: graph.nodes[n]["rank"])


def searched(graph):
    """The same graph routed by search alone (no builder paths, no ECMP)."""
    bare = graph.copy()
    del bare.graph["paths"]
    bare.graph["ecmp_seed"] = None
    return Routing(bare)


def assert_every_candidate_is_a_path(graph, pairs):
    for a, b in pairs:
        for path in graph.graph["paths"](a, b):
            assert path[0] == a and path[-1] == b
            assert all(graph.has_edge(u, v) for u, v in itertools.pairwise(path)), path


def assert_routes_are_shortest(graph, pairs):
    """The builder's route costs what the search's does: the same latency and hops."""
    built, search = Routing(graph), searched(graph)
    for a, b in pairs:
        got, best = built.route(a, b), search.route(a, b)
        assert got.latency_s == pytest.approx(best.latency_s, rel=1e-12, abs=0), (a, b)
        assert len(got.links) == len(best.links), (a, b, got.nodes, best.nodes)


def gpu_diameter(graph):
    """Most hops on a shortest path between two GPUs, by breadth-first search from each."""
    undirected = graph.to_undirected()
    names = gpus(graph)
    return max(max(d for n, d in nx.single_source_shortest_path_length(undirected, g).items()
                   if n in names) for g in names)


# ---- leaf/spine --------------------------------------------------------------------------


@pytest.mark.parametrize("leaves, per_leaf, spines, ratio", [(4, 8, 2, 1.0), (3, 6, 2, 3.0),
                                                             (2, 4, 4, 1.0)])
def test_leaf_spine_structure_follows_its_formulas(leaves, per_leaf, spines, ratio):
    g = leaf_spine(leaves, per_leaf, spines, 50e9, 1e-6, oversubscription=ratio)
    assert kinds(g) == {"gpu": leaves * per_leaf, "switch": leaves + spines}
    assert cables(g) == leaves * per_leaf + leaves * spines
    assert degree(g, "leaf0") == per_leaf + spines and degree(g, "spine0") == leaves
    assert g.edges["leaf0", "spine0"]["bandwidth"] == per_leaf * 50e9 / (ratio * spines)
    assert gpu_diameter(g) == 4
    pairs = list(itertools.permutations(gpus(g), 2))
    assert_every_candidate_is_a_path(g, pairs)
    assert_routes_are_shortest(g, pairs)


def test_leaf_spine_refuses_more_spines_than_uplink_cables():
    params = {"leaves": 2, "gpus_per_leaf": 8, "spines": 4, "bandwidth": 50e9, "latency": 1e-6,
              "oversubscription": 4.0}
    assert topology_issues("leaf_spine", params) == [
        ("topology.spines", "expected at most 2 (a leaf's uplink cables: 8 ports / "
                            "oversubscription 4), got 4")]


# ---- fat-tree ----------------------------------------------------------------------------


@pytest.mark.parametrize("k", [2, 4, 6])
def test_fat_tree_structure_follows_al_fares(k):
    g = fat_tree(k, 50e9, 1e-6)
    assert kinds(g) == {"gpu": k ** 3 // 4, "switch": 5 * k * k // 4}
    assert cables(g) == 3 * k ** 3 // 4
    switches = [n for n, kind in g.nodes(data="kind") if kind == "switch"]
    assert {degree(g, s) for s in switches} == {k}  # every switch uses all k ports
    assert gpu_diameter(g) == 6  # GPU, edge, aggregation, core and down again
    pairs = list(itertools.permutations(gpus(g), 2))
    assert_every_candidate_is_a_path(g, pairs)
    assert_routes_are_shortest(g, pairs)
    across = g.graph["paths"]("gpu0", f"gpu{k ** 3 // 4 - 1}")
    assert len(across) == (k // 2) ** 2  # equal-cost paths between pods


def test_fat_tree_needs_an_even_k():
    assert topology_issues("fat_tree", {"k": 5, "bandwidth": 1e9, "latency": 0.0}) == [
        ("topology.k", "expected an even whole number ≥ 2 (k/2 ports down, k/2 up), got 5")]


# ---- dragonfly ---------------------------------------------------------------------------


@pytest.mark.parametrize("groups, routers, per_router", [(5, 4, 2), (9, 4, 1), (3, 2, 3)])
def test_dragonfly_structure_follows_kim_et_al(groups, routers, per_router):
    g = dragonfly(groups, routers, per_router, 50e9, 1e-6, 25e9, 2e-6)
    assert kinds(g) == {"gpu": groups * routers * per_router, "switch": groups * routers}
    assert cables(g) == (groups * routers * per_router + groups * routers * (routers - 1) // 2
                         + groups * (groups - 1) // 2)
    global_links = [(u, v) for u, v in g.edges if g.edges[u, v]["bandwidth"] == 25e9]
    assert len(global_links) == groups * (groups - 1)  # one cable per pair of groups
    per_router_globals = collections.Counter(u for u, _ in global_links)
    assert max(per_router_globals.values()) == math.ceil((groups - 1) / routers)
    pairs = list(itertools.permutations(gpus(g), 2))
    assert_every_candidate_is_a_path(g, pairs)
    routing = Routing(g)
    for a, b in pairs:  # minimal: at most one global hop, so at most 5 hops
        route = routing.route(a, b)
        globals_crossed = sum(1 for link in route.links if g.edges[link]["bandwidth"] == 25e9)
        assert globals_crossed <= 1 and len(route.links) <= 5


# ---- cluster -----------------------------------------------------------------------------


def test_cluster_structure_rail_optimised_two_tiers():
    g = cluster(8, 8, **H100, nodes_per_unit=4, spines=4)
    assert kinds(g) == {"gpu": 64, "nic": 64, "switch": 8 + 8 * 8 + 2 * 8 + 4}
    leaves = [n for n, t in g.nodes(data="tier") if t == 1]
    assert len(leaves) == 16 and all(degree(g, leaf) == 4 + 4 for leaf in leaves)
    assert sorted(g.succ["n5.nic3"]) == ["n5.pcie3", "u1.leaf3"]  # NIC i on leaf i of its unit
    # a leaf's 4 ports of 50 GB/s over 4 spines, not oversubscribed: 50 GB/s to each
    assert g.edges["u0.leaf0", "spine3"]["bandwidth"] == 50e9
    assert g.edges["n0.gpu0", "n0.pcie0"]["latency"] == 2.5e-7  # half of GPU-to-NIC each
    pairs = [(a, b) for a, b in itertools.permutations(gpus(g), 2)
             if a.split(".")[0] == b.split(".")[0] or a.split(".")[1] == b.split(".")[1]]
    assert_every_candidate_is_a_path(g, itertools.permutations(gpus(g), 2))
    assert_routes_are_shortest(g, pairs)  # same host, or same rail: what the search finds
    route = Routing(g).route("n0.gpu7", "n5.gpu0")  # across rails: up to a spine
    assert route.nodes[:5] == ("n0.gpu7", "n0.pcie7", "n0.nic7", "u0.leaf7", route.nodes[4])
    assert route.nodes[4].startswith("spine") and route.nodes[5] == "u1.leaf0"


def test_cluster_shares_a_pcie_switch_and_a_nic():
    g = cluster(2, 8, **H100, gpus_per_pcie_switch=2, nics_per_node=4)
    assert kinds(g)["nic"] == 8 and sum(1 for n in g if ".pcie" in n) == 8
    routing = Routing(g)
    # GPUs 0 and 1 share PCIe switch 0 and its one NIC: both leave through n0.nic0
    for gpu in ("n0.gpu0", "n0.gpu1"):
        assert routing.route(gpu, "n1.gpu0").nodes[1:3] == ("n0.pcie0", "n0.nic0")


def test_cluster_rack_wise_three_tiers():
    g = cluster(8, 4, **H100, nodes_per_unit=2, rail_optimized=False, spines=2,
                units_per_pod=2, cores=4)
    tiers = collections.Counter(t for _, t in g.nodes(data="tier") if t is not None)
    assert tiers == {0: 8 + 8 * 4, 1: 4, 2: 2 * 2, 3: 4}  # nvswitch + pcie, leaves, spines, cores
    assert sorted(g.succ["p0.spine1"]) == ["core2", "core3", "u0.leaf", "u1.leaf"]
    # spine uplinks: the pod's 2 leaves × (a leaf's 2 × 4 ports × 50 GB/s / 2 spines) over 2 cores
    assert g.edges["p0.spine0", "core0"]["bandwidth"] == 2 * (8 * 50e9 / 2) / 2
    candidates = g.graph["paths"]("n0.gpu0", "n7.gpu0")
    assert len(candidates) == 4 and {p[5] for p in candidates} == {"core0", "core1", "core2",
                                                                   "core3"}
    assert_every_candidate_is_a_path(g, itertools.permutations(gpus(g), 2))
    assert_routes_are_shortest(g, [(a, b) for a, b in itertools.permutations(gpus(g), 2)
                                   if a.split(".")[1] == b.split(".")[1]])


def test_cluster_wiring_rules_are_checked():
    base = {"nodes": 2, "gpus_per_node": 8, **H100}
    assert topology_issues("cluster", {**base, "gpus_per_pcie_switch": 3}) == [
        ("topology.gpus_per_pcie_switch", "expected a divisor of gpus_per_node (8), got 3")]
    assert topology_issues("cluster", {**base, "nics_per_node": 3}) == [
        ("topology.nics_per_node", "expected a whole number of NICs behind each PCIe switch "
                                   "(8 switches), got 3")]
    assert topology_issues("cluster", {**base, "units_per_pod": 1, "spines": 2, "cores": 3}) == [
        ("topology.cores", "expected a multiple of the spines per pod (2) with units_per_pod "
                           "set, got 3")]


def test_structured_routes_scale_to_8192_gpus():
    # routes come from the structure: a ring's and a rail's routes at 8,192 GPUs without search
    g = cluster(1024, 8, **H100, nodes_per_unit=32, spines=16)
    machine = Machine.of(g)
    assert machine.ranks == 8192
    assert machine.route(8191, 0).nodes == (
        "n1023.gpu7", "n1023.pcie7", "n1023.nic7", "u31.leaf7", machine.route(8191, 0).nodes[4],
        "u0.leaf0", "n0.nic0", "n0.pcie0", "n0.gpu0")
    assert len(machine.route(8, 16).links) == 6  # same rail: GPU, PCIe, NIC, leaf and back


# ---- ECMP --------------------------------------------------------------------------------


def spine_load(graph):
    routing = Routing(graph)
    left = [f"gpu{r}" for r in range(64)]
    right = [f"gpu{r}" for r in range(64, 128)]
    return collections.Counter(routing.route(a, b).nodes[2] for a in left for b in right)


def test_ecmp_spreads_flows_evenly_and_deterministically():
    g = leaf_spine(2, 64, 4, 50e9, 1e-6)
    load = spine_load(g)
    assert sum(load.values()) == 4096 and set(load) == {f"spine{s}" for s in range(4)}
    # a fair hash puts 1024 ± 28 (one standard deviation) flows on each spine: within 10 %
    assert all(abs(n - 1024) <= 102 for n in load.values()), load
    assert spine_load(leaf_spine(2, 64, 4, 50e9, 1e-6)) == load  # the same seed, the same paths
    other = leaf_spine(2, 64, 4, 50e9, 1e-6, ecmp_seed=7)
    assert spine_load(other) != load and all(abs(n - 1024) <= 102
                                             for n in spine_load(other).values())


def test_without_ecmp_every_flow_takes_the_first_spine():
    assert spine_load(leaf_spine(2, 64, 4, 50e9, 1e-6, ecmp=False)) == {"spine0": 4096}


def run(topology, algorithms, sizes, **fields):
    scenario = scenario_from_dict({"topology": topology, "algorithms": algorithms,
                                   "sizes": sizes, **fields})
    return simulate(scenario).set_index("algorithm")["sim_time_s"] * 1e6


def test_ecmp_keeps_a_ring_across_rails_off_one_spine():
    # the ring crosses hosts from GPU 7 (rail 7) to GPU 0 (rail 0): through a spine; without
    # ECMP all 16 crossings take spine0 and share its link into leaf 0 (100 GB/s: 6.25 each)
    base = {"preset": "dgx_h100_superpod", "nodes": 16, "spines": 16}
    spread = run({**base, "ecmp": True}, ["ring"], [64 << 20], execution="ideal")["ring"]
    piled = run({**base, "ecmp": False}, ["ring"], [64 << 20], execution="ideal")["ring"]
    assert piled > 4 * spread


# ---- oversubscription --------------------------------------------------------------------


def test_rings_across_racks_get_the_oversubscribed_share():
    # 4 hosts of 2 GPUs, each host alone on its top-of-rack leaf (2 NIC ports), one spine.
    # hierarchical runs its inter-host ring on both rails at once: every step, each leaf's
    # uplink carries 2 flows (one per rail). At 1:1 the uplink is 2 × 50 GB/s and each flow
    # gets its NIC's 50 GB/s; at 2:1 it is 50 GB/s and each flow gets 25 GB/s, so the
    # inter-host ring's 2(N-1) steps of c = n / (L·N) bytes each take c/25 GB/s instead of
    # c/50 GB/s: the time grows by 2(N-1)·c·(1/25e9 - 1/50e9) exactly.
    n, hosts, local = 1 << 22, 4, 2
    base = {"kind": "cluster", "nodes": hosts, "gpus_per_node": local, "nvlink_bandwidth":
            "450GB/s", "nvlink_latency": "300ns", "pcie_bandwidth": "63GB/s", "pcie_latency":
            "500ns", "nic_bandwidth": "50GB/s", "nic_latency": "850ns", "uplink_latency":
            "850ns", "nodes_per_unit": 1, "rail_optimized": False, "spines": 1}
    times = {ratio: run({**base, "oversubscription": ratio}, ["hierarchical"], [n],
                        execution="ideal")["hierarchical"] for ratio in (1, 2)}
    chunk = n / (local * hosts)
    expected = 2 * (hosts - 1) * chunk * (1 / 25e9 - 1 / 50e9) * 1e6
    assert times[2] - times[1] == pytest.approx(expected, rel=1e-9)


def test_every_new_fabric_runs_from_a_scenario():
    topologies = [
        {"kind": "leaf_spine", "leaves": 2, "gpus_per_leaf": 4, "spines": 2,
         "bandwidth": "50GB/s", "latency": "1us", "oversubscription": "2:1"},
        {"kind": "fat_tree", "k": 4, "bandwidth": "50GB/s", "latency": "1us"},
        {"kind": "dragonfly", "groups": 3, "routers": 2, "gpus_per_router": 2,
         "bandwidth": "50GB/s", "latency": "1us", "global_bandwidth": "25GB/s",
         "global_latency": "2us"},
        {"preset": "dgx_h100_superpod", "nodes": 2},
    ]
    for topology in topologies:
        times = run(topology, ["ring", "halving_doubling"], [1 << 20])
        assert (times > 0).all()


def test_presets_build():
    for name, ranks in [("dgx_h100_superpod", 256), ("dgx_a100_superpod", 160),
                        ("dgx_b200_superpod", 256), ("gb200_nvl72", 72), ("dgx_b200", 8)]:
        spec = load_preset(name)
        assert spec.ranks == ranks
        assert spec.kind in BUILDERS


def test_hierarchical_on_a_multi_unit_cluster_equals_its_closed_form():
    # 8 hosts in two units of 4: every rail's ring crosses between units through a spine, one
    # flow per leaf uplink (each leaf is one rail's), so nothing is shared and the closed form
    # holds exactly, as on one leaf
    topology = {"preset": "dgx_h100_superpod", "nodes": 8, "nodes_per_unit": 4, "spines": 4}
    frame = simulate(scenario_from_dict({"topology": topology, "algorithms": ["hierarchical"],
                                         "sizes": [1 << 20, 64 << 20], "execution": "ideal"}))
    assert list(frame["sim_time_s"]) == pytest.approx(list(frame["model_time_s"]), rel=1e-9)


def test_every_shipped_scenario_is_valid():
    from simulator.scenario.parse import load_scenario
    from tests.conftest import REPO

    names = sorted(path.name for path in (REPO / "scenarios").glob("*.yaml"))
    for name in names:
        scenario = load_scenario(REPO / "scenarios" / name)
        assert scenario.sizes or scenario.training is not None, name
    assert {"superpod_h100.yaml", "oversubscribed.yaml", "fat_tree.yaml", "dragonfly.yaml",
            "gb200_nvl72.yaml", "custom_fabric.yaml", "tpu_torus.yaml"} <= set(names)


def test_pxn_keeps_inter_host_sends_on_their_rail_under_nccl():
    from simulator.model.execution import NcclRouting, nccl_charges
    from simulator.model.nccl import NcclAlgorithm, Protocol

    def planned(graph):
        machine = Machine.of(graph)
        return machine, NcclRouting(machine.routing,
                                       nccl_charges(machine, NcclAlgorithm.RING, Protocol.SIMPLE))

    superpod = load_preset("dgx_h100_superpod")
    machine, routing = planned(BUILDERS["cluster"].build(**{**superpod.params, "nodes": 2}))
    # GPU 7 of host 0 to GPU 0 of host 1: over NVLink to host 0's GPU 0, out on rail 0
    assert routing.route("n0.gpu7", "n1.gpu0").nodes == (
        "n0.gpu7", "n0.nvswitch", "n0.gpu0", "n0.pcie0", "n0.nic0", "u0.leaf0", "n1.nic0",
        "n1.pcie0", "n1.gpu0")
    # on its rail already, or on one host: the wire's route
    assert routing.route("n0.gpu3", "n1.gpu3").nodes == machine.routing.route(
        "n0.gpu3", "n1.gpu3").nodes
    assert routing.route("n0.gpu3", "n0.gpu5").nodes == ("n0.gpu3", "n0.nvswitch", "n0.gpu5")
    # between scalable units every route climbs; the send still leaves on the destination's
    # rail, NCCL's channel NIC (search.cc: "NET n -> GPU a -> .. -> GPU x -> NET n")
    machine, routing = planned(BUILDERS["cluster"].build(
        **{**superpod.params, "nodes": 4, "nodes_per_unit": 2}))
    assert routing.route("n1.gpu7", "n2.gpu0").nodes == (
        "n1.gpu7", "n1.nvswitch", *machine.routing.route("n1.gpu0", "n2.gpu0").nodes)
    assert machine.routing.route("n1.gpu0", "n2.gpu0").nodes[3:6] == (
        "u0.leaf0", "spine2", "u1.leaf0")
    assert routing.route("n1.gpu3", "n2.gpu3").nodes == machine.routing.route(
        "n1.gpu3", "n2.gpu3").nodes
    # a dgx (one leaf) never climbs: no route changes
    machine, routing = planned(dgx(2, 8, 450e9, 3e-7, 63e9, 5e-7, 50e9, 8.5e-7,
                                   HostParams(compute_capability=90, nvlinks=18)))
    for a, b in itertools.permutations(machine.placement, 2):
        assert routing.route(a, b).nodes == machine.routing.route(a, b).nodes


def test_cluster_rules_name_the_parameter_at_fault():
    base = {"nodes": 2, "gpus_per_node": 8, **H100}
    assert topology_issues("cluster", {**base, "nics_per_node": 16}) == [
        ("topology.nics_per_node", "expected at most one NIC per GPU (8), got 16")]
    assert topology_issues("cluster", {**base, "cores": 8}) == [
        ("topology.cores", "expected no cores without units_per_pod (the third tier joins pods "
                           "of units)")]
    assert topology_issues("cluster", {**base, "oversubscription": 4.0}) == [
        ("topology.oversubscription", "expected at most 2 (a leaf's 2 ports over at least one "
                                      "uplink cable), got 4")]


def test_one_leaf_has_no_spines():
    assert kinds(leaf_spine(1, 4, 2, 50e9, 1e-6)) == {"gpu": 4, "switch": 1}


def test_a_preset_file_names_itself_and_the_field(tmp_path, capsys):
    from simulator.cli import main

    text = (REPO_TOPOLOGIES / "dgx_h100_superpod.yaml").read_text().replace(
        "spines: 4 ", "spines: 64 ")
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    assert main(["topo", str(path), "--output", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"{path}: spines: expected at most 32 (a leaf's uplink cables: 32 ports / "
        "oversubscription 1), got 64")


def test_a_documented_zero_default_may_be_written_out():
    spec = scenario_from_dict({"topology": {"preset": "dgx_h100_superpod", "nodes": 2,
                                            "spines": 0}, "sizes": [1024]}).topology
    assert spec.params["spines"] == 0
    assert sum(1 for _, t in spec.build().nodes(data="tier") if t == 2) == 32  # one per cable


def test_a_ring_across_scalable_units_keeps_its_lockstep():
    # Every send leaves on its rail (PXN to NCCL's channel NIC), so crossing the spines
    # between two units costs the ring what one unit's leaves do: the same time, and the same
    # instants, its ranks' steps ending together (without the relay, 1,617 instants).
    def ring(unit):
        results = simulate({
            "name": "units", "algorithms": ["ring"], "sizes": ["64MiB"], "verify": True,
            "topology": {"preset": "dgx_h100_superpod", "nodes": 4, "nodes_per_unit": unit,
                         "spines": 2}})
        return results.iloc[0]

    one, two = ring(4), ring(2)
    assert bool(two["verified"])
    assert two["sim_time_s"] == one["sim_time_s"]
    assert int(two["events"]) == int(one["events"]) == 896
