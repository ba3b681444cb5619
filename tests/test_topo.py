"""``python -m simulator topo``: a topology's numbers against formulas for each builder, the
diameter and the bisection against plain networkx on random graphs, the drawing, and the
command line's output and errors."""

import math
import random
from pathlib import Path

import networkx as nx
import pytest

from simulator.cli import main
from simulator.model.analysis import hops as hops_module
from simulator.model.analysis.bisection import rank_bisection
from simulator.model.analysis.fabric import Injection, TierLoad, gpus_by_rank, levels, summarize
from simulator.model.analysis.hops import Hops, gpu_diameter
from simulator.model.topology import dgx, fully_connected, mesh, ring, switch, torus
from simulator.output.fabric import format_summary
from simulator.output.fabric_figure import SMALL_NODES, draw_fabric
from tests.conftest import switch_graphml

B = 50e9
PNG = b"\x89PNG\r\n\x1a\n"


def switch_count(summary) -> int:
    return sum(count for _, count in summary.switches)


# --- the builders against their formulas ---------------------------------------------------

@pytest.mark.parametrize("p", [2, 5, 8])
def test_switch(p):
    g = switch(p, B, 1e-6)
    s = summarize(g)
    assert (s.gpus, switch_count(s), s.nics, s.cables, s.links) == (p, 1, 0, p, 2 * p)
    assert s.diameter_hops == 2
    assert s.bisection_Bps == (p // 2) * B  # each GPU of the first half sends B up, the rest get B
    assert s.injection == (Injection(g.edges["gpu0", "switch"]["link"], B, B),)
    assert s.hosts is None


@pytest.mark.parametrize("p", [3, 6, 9])
def test_ring(p):
    s = summarize(ring(p, B, 1e-6))
    assert (s.gpus, switch_count(s), s.cables) == (p, 0, p)
    assert s.diameter_hops == p // 2
    assert s.bisection_Bps == 2 * B  # two cables join the halves, one each way round
    assert [(i.min_Bps, i.max_Bps) for i in s.injection] == [(2 * B, 2 * B)]
    assert s.network_injection_Bps is None and s.oversubscription == ()


@pytest.mark.parametrize("p", [2, 6, 7])
def test_fully_connected(p):
    s = summarize(fully_connected(p, B, 1e-6))
    assert (s.gpus, s.cables) == (p, p * (p - 1) // 2)
    assert s.diameter_hops == 1
    assert s.bisection_Bps == (p // 2) * (p - p // 2) * B  # a cable from each to each
    assert [(i.min_Bps, i.max_Bps) for i in s.injection] == [((p - 1) * B, (p - 1) * B)]


NVLINK_BW, PCIE_BW, NIC_BW = 400e9, 50e9, 25e9


def small_dgx(nodes: int, gpus: int) -> nx.DiGraph:
    return dgx(nodes, gpus, NVLINK_BW, 3e-7, PCIE_BW, 5e-7, NIC_BW, 1e-6)


def test_dgx_across_hosts():
    s = summarize(small_dgx(2, 4))
    assert (s.gpus, s.hosts, s.nics) == (8, 2, 8)
    assert s.switches == ((0, 2), (1, 1))  # an NVSwitch per host, one leaf
    assert s.cables == 8 * 3  # per GPU: NVLink, PCIe to its NIC, the NIC to the leaf
    assert s.diameter_hops == 4  # gpu - nic - leaf - nic - gpu
    assert s.bisection_Bps == 4 * NIC_BW  # host 0 to host 1: four NICs' links
    assert s.injection == (Injection("nvlink", NVLINK_BW, NVLINK_BW),
                           Injection("pcie", PCIE_BW, PCIE_BW))
    assert s.network_injection_Bps == NIC_BW
    assert s.oversubscription == ()  # nothing above the leaf


def test_dgx_one_host_splits_over_nvlink_and_the_nics():
    s = summarize(small_dgx(1, 8))
    assert s.diameter_hops == 2  # gpu - nvswitch - gpu
    # ranks 0-3 send to 4-7 through the NVSwitch and, besides, through their NICs and the leaf
    assert s.bisection_Bps == 4 * NVLINK_BW + 4 * min(PCIE_BW, NIC_BW)


def torus_cables(dims):
    p = math.prod(dims)
    return sum(p // d * (d if d > 2 else d - 1) for d in dims)


@pytest.mark.parametrize("dims, cut", [((4, 4), 8), ((2, 3, 4), 12), ((8,), 2)])
def test_torus(dims, cut):
    p = math.prod(dims)
    s = summarize(torus(dims, B, 1e-6))
    assert (s.gpus, switch_count(s), s.cables) == (p, 0, torus_cables(dims))
    assert s.diameter_hops == sum(d // 2 for d in dims)
    # ranks [0, p/2) are the GPUs with first coordinate < d0/2: the cut crosses dimension 0,
    # two cables per line along it (one if it has size 2), p/d0 lines; one direction counted
    assert s.bisection_Bps == cut * B
    degree = sum(2 if d > 2 else d - 1 for d in dims)
    assert [(i.min_Bps, i.max_Bps) for i in s.injection] == [(degree * B, degree * B)]


@pytest.mark.parametrize("dims, cut", [((4, 4), 4), ((2, 3, 4), 12)])
def test_mesh(dims, cut):
    p = math.prod(dims)
    s = summarize(mesh(dims, B, 1e-6))
    assert s.cables == sum((d - 1) * p // d for d in dims)
    assert s.diameter_hops == sum(d - 1 for d in dims)
    assert s.bisection_Bps == cut * B  # one cable per line along dimension 0
    inner = sum(min(d - 1, 2) for d in dims)  # a corner has one neighbour per dimension
    assert [(i.min_Bps, i.max_Bps) for i in s.injection] == [(len(dims) * B, inner * B)]


def test_oversubscription_of_a_hand_built_leaf_spine():
    # 2 leaves of 6 GPUs at B, each with one cable of B to each of 2 spines: 6B below, 2B up
    g = nx.DiGraph(name="hand")
    for leaf in range(2):
        g.add_node(f"leaf{leaf}", kind="switch", tier=1)
        for spine in range(2):
            g.add_node(f"spine{spine}", kind="switch", tier=2)
            g.add_edge(f"leaf{leaf}", f"spine{spine}", bandwidth=B, link="net")
            g.add_edge(f"spine{spine}", f"leaf{leaf}", bandwidth=B, link="net")
        for i in range(6):
            gpu = f"gpu{6 * leaf + i}"
            g.add_node(gpu, kind="gpu", rank=6 * leaf + i)
            g.add_edge(gpu, f"leaf{leaf}", bandwidth=B, link="net")
            g.add_edge(f"leaf{leaf}", gpu, bandwidth=B, link="net")
    s = summarize(g, "hand")
    assert s.oversubscription == (TierLoad(1, 12 * B, 4 * B),)
    assert s.bisection_Bps == 2 * B  # leaf 0's two uplinks
    assert s.diameter_hops == 4 and s.network_injection_Bps == B
    assert "oversubscription   tier 1 (leaf) 3:1 (600GB/s from below, 200GB/s up)" in \
        format_summary(s).splitlines()


def test_tiers_are_derived_where_the_builder_gives_none():
    g = small_dgx(2, 4)
    given, derived = levels(g)
    assert not derived
    for node in g:
        g.nodes[node].pop("tier", None)
    again, derived = levels(g)
    assert derived and again == given  # NVSwitch: GPUs of one host, 0; the leaf above NICs, 1
    plain = switch(4, B, 1e-6)
    del plain.nodes["switch"]["tier"]
    assert levels(plain)[0]["switch"] == 1  # GPUs of no host: a switch above them
    assert "tiers derived" in format_summary(summarize(g))


def test_one_gpu_and_a_disconnected_fabric():
    s = summarize(switch(1, B, 1e-6))
    assert s.diameter_hops == 0 and s.bisection_Bps is None
    g = nx.disjoint_union(ring(3, B, 1e-6), ring(3, B, 1e-6))
    for i, node in enumerate(sorted(g)):
        g.nodes[node]["rank"] = i
    s = summarize(g)
    assert s.diameter_hops is None and s.bisection_Bps == 0.0
    assert "GPUs cannot all reach each other" in format_summary(s)


def test_a_big_fabric_summarises():  # ~1 s: the bounds, the bit-parallel BFS, the shrunk cut
    s = summarize(torus((32, 32, 8), B, 1e-6))
    assert (s.gpus, s.cables) == (8192, 3 * 8192)
    assert s.diameter_hops == 16 + 16 + 4
    assert s.bisection_Bps == 2 * 32 * 8 * B


# --- the algorithms against plain networkx -------------------------------------------------

def random_graph(seed: int) -> tuple[nx.DiGraph, list]:
    rng = random.Random(seed)
    n = rng.randint(2, 40)
    g = nx.gnm_random_graph(n, rng.randint(n - 1, 3 * n), seed=seed, directed=True)
    for u, v in list(g.edges):
        g.edges[u, v]["bandwidth"] = float(rng.randint(1, 9))
        if rng.random() < 0.7:
            g.add_edge(v, u, bandwidth=float(rng.randint(1, 9)))
    gpus = [node for node in g if rng.random() < 0.6] or [0]
    rng.shuffle(gpus)
    return g, gpus


@pytest.mark.parametrize("gain", [1, hops_module.SWEEP_GAIN, 10**9])
def test_diameter_equals_bfs_from_every_gpu(gain):
    for seed in range(150):
        g, gpus = random_graph(seed)
        undirected = g.to_undirected()
        lengths = [nx.single_source_shortest_path_length(undirected, a) for a in gpus]
        expected = max(d[b] for d in lengths for b in gpus) \
            if all(b in d for d in lengths for b in gpus) else None
        h = Hops(g)
        assert gpu_diameter(h, h.indices(gpus), sweep_gain=gain) == expected, seed


def test_bit_parallel_bfs_in_batches_and_through_big_switches(monkeypatch):
    monkeypatch.setattr(hops_module, "_WORDS_PER_BATCH", 1)  # 64 sources a batch
    g = small_dgx(3, 50)  # leaf of 150 ports, NVSwitches of 50: beyond the 16 column slots
    h = Hops(g)
    gpus = h.indices(gpus_by_rank(g))
    assert gpu_diameter(h, gpus, sweep_gain=10**9) == 4
    assert list(h.eccentricities(gpus[:3], gpus)) == [4, 4, 4]


def test_bisection_equals_max_flow_on_the_whole_graph():
    for seed in range(200):
        g, gpus = random_graph(seed)
        if len(gpus) < 2:
            continue
        flow = nx.DiGraph()
        flow.add_edges_from((u, v, {"capacity": d["bandwidth"]}) for u, v, d in g.edges(data=True))
        flow.add_edges_from(("S", gpu) for gpu in gpus[:len(gpus) // 2])
        flow.add_edges_from((gpu, "T") for gpu in gpus[len(gpus) // 2:])
        assert rank_bisection(g, gpus) == nx.maximum_flow_value(flow, "S", "T"), seed


# --- the drawing ---------------------------------------------------------------------------

@pytest.mark.parametrize("graph", [small_dgx(2, 4), torus((4, 4), B, 1e-6),
                                   torus((2, 3, 4), B, 1e-6), torus((16, 16), B, 1e-6)],
                         ids=["rows", "grid", "circle", "by-row"])
def test_drawings_are_pngs(graph, tmp_path):
    assert (graph.number_of_nodes() > SMALL_NODES) == (graph.graph["name"] == "torus(16x16)")
    path = tmp_path / "x.png"
    draw_fabric(graph, summarize(graph), path)
    assert path.read_bytes()[:8] == PNG and path.stat().st_size > 10_000


# --- the command line ----------------------------------------------------------------------

DGX_H100 = """\
# topology dgx_h100 · builder dgx(1x8)
GPUs               8
hosts              1
NICs               8
switches           2: tier 0 (in host) 1, tier 1 (leaf) 1
cables             24 full-duplex (48 directed links)
diameter           2 hops (the longest shortest path between two GPUs)
bisection          2TB/s (min cut by max-flow, ranks [0, 4) to [4, 8), per direction)
injection per GPU  nvlink 450GB/s, pcie 63GB/s
network injection  50GB/s per GPU (GPU and NIC links up into tier ≥ 1, over the GPUs)
oversubscription   none (no switch tier has links up)
"""


def test_topo_of_a_preset_prints_the_summary_and_draws_it(tmp_path, capsys):
    assert main(["topo", "dgx_h100", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out == DGX_H100 + f"# figure: {tmp_path}/dgx_h100.png\n"
    assert (tmp_path / "dgx_h100.png").read_bytes()[:8] == PNG


def test_topo_of_a_preset_file_and_of_a_scenario(tmp_path, capsys):
    file = tmp_path / "tpu.yaml"
    file.write_text("kind: torus\ndims: [4, 4]\nbandwidth: 50GB/s\nlatency: 1us\n")
    assert main(["topo", str(file), "--output", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "# topology tpu · builder torus(4x4)"
    assert "diameter           4 hops (the longest shortest path between two GPUs)" in lines
    assert lines[-1] == f"# figure: {tmp_path}/tpu.png"
    scenario = tmp_path / "two.yaml"
    scenario.write_text("topology: {preset: dgx_h100, nodes: 2}\nsizes: [1MiB]\n")
    assert main(["topo", str(scenario), "--output", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "# topology dgx_h100[nodes=2] · builder dgx(2x8)"
    assert lines[-1] == f"# figure: {tmp_path}/dgx_h100_nodes=2.png"
    assert Path(lines[-1].split(": ")[1]).read_bytes()[:8] == PNG


def test_topo_bad_input_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    # TOPOLOGY is read as nccl reads it (simulator/scenario/topology_word.py), in its words
    assert main(["topo", "dgx_h1000", "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("command line: TOPOLOGY: no such preset or file 'dgx_h1000'; expected "
                          "a preset (dgx1_v100, ")
    assert err.endswith(", p4d), optionally with :NODES (dgx_h100:8), or a topology, scenario, "
                        "graph or NCCL topology file\n")
    assert err.count("\n") == 1
    monkeypatch.chdir(tmp_path)
    assert main(["topo", "gone.yaml"]) == 2
    assert capsys.readouterr().err == "command line: TOPOLOGY: no such file 'gone.yaml'\n"
    assert main(["topo", "dgx_h100:0", "--output", str(tmp_path)]) == 2
    assert capsys.readouterr().err == ("command line: TOPOLOGY: expected a whole number ≥ 1, "
                                       "got 0\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: torus\ndims: [4, 4]\nbandwidth: 50\nlatency: 1us\n")
    assert main(["topo", str(bad), "--output", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"{bad}: bandwidth: expected a bandwidth like '25GB/s', "
                                       "got 50\n")
    other = tmp_path / "other.yaml"
    other.write_text("name: x\n")
    assert main(["topo", str(other)]) == 2
    assert capsys.readouterr().err == (f"{other}: expected a topology file (kind: and the "
                                       "builder's parameters), a scenario file (topology: ...), "
                                       "a YAML edge list (nodes: and edges:), a GraphML file or "
                                       "NCCL's topology file (.xml)\n")
    assert list(tmp_path.glob("*.png")) == []


def test_topo_reads_topology_as_nccl_does(tmp_path, capsys):
    # NAME:NODES, as nccl takes it: the same machine as a scenario's {preset, nodes: 2}
    assert main(["topo", "dgx_h100:2", "--output", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["# topology dgx_h100[nodes=2] · builder dgx(2x8)",
                         "GPUs               16", "hosts              2"]
    assert lines[-1] == f"# figure: {tmp_path}/dgx_h100_nodes=2.png"
    # a GraphML file: four GPUs on a switch (tests/test_graphfile.py's)
    switch_graphml(tmp_path / "fabric.graphml")
    assert main(["topo", str(tmp_path / "fabric.graphml"), "--output", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["# topology graph · builder graph(fabric.graphml)",
                         "GPUs               4"]
    assert lines[-1] == f"# figure: {tmp_path}/graph.png"


# --- the multi-tier fabrics (issue 8) ------------------------------------------------------

@pytest.mark.parametrize("k", [4, 6, 8])
def test_fat_tree(k):
    from simulator.model.topology import fat_tree

    s = summarize(fat_tree(k, B, 1e-6))
    assert (s.gpus, s.switches, s.cables) == (
        k ** 3 // 4, ((1, k * k // 2), (2, k * k // 2), (3, k * k // 4)), 3 * k ** 3 // 4)
    assert s.diameter_hops == 6
    assert s.bisection_Bps == pytest.approx(k ** 3 / 8 * B)  # full bisection: half the GPUs' B
    assert [(t.tier, t.below_Bps / t.up_Bps) for t in s.oversubscription] == [(1, 1.0), (2, 1.0)]


@pytest.mark.parametrize("ratio", [1.0, 2.0, 4.0])
def test_leaf_spine(ratio):
    from simulator.model.topology import leaf_spine

    s = summarize(leaf_spine(4, 8, 2, B, 1e-6, oversubscription=ratio))
    assert (s.gpus, s.switches, s.cables) == (32, ((1, 4), (2, 2)), 32 + 8)
    assert s.diameter_hops == 4
    assert s.bisection_Bps == pytest.approx(32 * B / (2 * ratio))  # two leaves' uplinks
    assert [(t.tier, t.below_Bps / t.up_Bps) for t in s.oversubscription] == [(1, ratio)]


def test_dragonfly():
    from simulator.model.topology import dragonfly

    s = summarize(dragonfly(4, 3, 2, B, 1e-6, B / 2, 2e-6))
    assert (s.gpus, s.switches, s.cables) == (24, ((1, 12),), 24 + 4 * 3 + 6)
    assert s.diameter_hops == 5  # GPU, router, gateway, gateway, router, GPU
    # groups {0, 1} and {2, 3}: the 4 global cables between the halves, B/2 each
    assert s.bisection_Bps == pytest.approx(4 * B / 2)


def test_cluster_superpod():
    from simulator.scenario.parse import load_preset

    s = summarize(load_preset("dgx_h100_superpod").build())
    assert (s.gpus, s.hosts, s.nics) == (256, 32, 256)
    assert s.switches == ((0, 32 + 256), (1, 8), (2, 4))
    assert s.diameter_hops == 8  # GPU, PCIe switch, NIC, leaf, spine and down again
    assert s.bisection_Bps == pytest.approx(128 * 50e9)  # non-blocking: half the NICs' rate
    assert [(t.tier, t.below_Bps / t.up_Bps) for t in s.oversubscription] == [(1, 1.0)]


def test_names_lists_every_node_and_link_a_fault_may_name(tmp_path, capsys):
    from simulator.plan import prepare
    from simulator.scenario.parse import load_preset, scenario_from_dict

    assert main(["topo", "dgx_h100", "--names", "--output", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("# nodes a fault names (nic_down: nic; straggler: rank), by kind")
    middle = lines.index("# links a fault names (link_down, link_degraded: link: [FROM, TO]), "
                         "per direction")
    nodes = [line.split() for line in lines[start + 1:middle]]
    links = [line.split() for line in lines[middle + 1:] if not line.startswith("#")]
    graph = load_preset("dgx_h100").build()
    assert sorted(name for _, name, *_ in nodes) == sorted(graph.nodes)
    assert nodes[0] == ["gpu", "n0.gpu0", "rank", "0"]
    assert [kind for kind, *_ in nodes] == ["gpu"] * 8 + ["nic"] * 8 + ["switch"] * 2
    assert sorted((a, b) for a, b, *_ in links) == sorted(graph.edges)
    assert ["n0.gpu0", "n0.nvswitch", "450GB/s", "300ns"] in links
    # each name printed is one a fault takes: the machine is prepared with it
    for fault in ({"kind": "nic_down", "nic": nodes[8][1]},
                  {"kind": "link_down", "link": links[0][:2]}):
        scenario = scenario_from_dict({"topology": {"preset": "dgx_h100"}, "sizes": ["1MiB"],
                                       "algorithms": ["ring"], "faults": [fault]})
        assert prepare(scenario).machine.ranks == 8
