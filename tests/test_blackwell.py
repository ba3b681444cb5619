"""Blackwell in NCCL's model: the graphs derived for a DGX B200 host, the picks they give on the
dgx_b200 and gb200_nvl72 presets, NVLS's derived share, the x86-only NVLSTree correction of
v2.30.7, and the graphs' network bound across hosts on every generation."""

from __future__ import annotations

import pytest

from simulator.model.execution import NVLS_SHARE, nvls_share, system_of
from simulator.model.nccl import (
    DEFAULT_GRAPHS,
    Arch,
    CpuVendor,
    Graph,
    NcclAlgorithm,
    Protocol,
    System,
    bandwidth_GBps,
    choose,
    latency_us,
    predicted_time_us,
)
from simulator.plan import prepare
from simulator.scenario.parse import scenario_from_dict

R, T, N, NT = (NcclAlgorithm.RING, NcclAlgorithm.TREE, NcclAlgorithm.NVLS,
               NcclAlgorithm.NVLS_TREE)


def system(preset: str, nodes: int = 1) -> System:
    scenario = scenario_from_dict({"topology": {"preset": preset, "nodes": nodes},
                                   "algorithms": ["ring"], "sizes": [8]})
    return system_of(prepare(scenario, select=False).machine)


def picks(preset: str, nodes: int, sizes: tuple[int, ...]) -> list[str]:
    s = system(preset, nodes)
    return [f"{(c := choose(s, size)).algorithm.value}/{c.protocol.value}" for size in sizes]


def test_the_blackwell_graphs_are_the_ones_derived_from_search_cc():
    # 18 NVLink 5 links x 40.1 GB/s = 721.8 GB/s a GPU: ring and tree 8 x 90 GB/s duplicated into
    # 16 x 45; NVLS 24 channels x 30; NVLSTree 8 heads, 9 x 80 <= 721.8, 48 GB/s a 400G NIC
    assert DEFAULT_GRAPHS[Arch.BLACKWELL] == {
        R: Graph(16, 45.0, 45.0), T: Graph(16, 45.0, 45.0), N: Graph(24, 30.0, 30.0),
        NT: Graph(8, 80.0, 48.0)}


def test_nccl_picks_on_every_blackwell_preset():
    sizes = (8, 64 << 10, 8 << 20, 1 << 30)
    assert picks("dgx_b200", 1, sizes) == ["Ring/LL", "Ring/LL", "NVLS/Simple", "NVLS/Simple"]
    assert picks("dgx_b200", 2, sizes) == ["Tree/LL", "Tree/LL", "NVLSTree/Simple",
                                          "NVLSTree/Simple"]
    # 72 GPUs in one NVLink domain: a ring's 142 steps cost more than NVLS's 25 µs from 8 B on
    assert picks("gb200_nvl72", 1, sizes) == ["NVLS/Simple"] * 4


def test_nvls_moves_nccls_blackwell_share_of_the_fitted_hopper_one():
    # nvlsEfficiency 0.74 on Blackwell against 0.85 on Hopper (tuning.cc)
    assert nvls_share(Arch.HOPPER) == NVLS_SHARE
    assert nvls_share(Arch.BLACKWELL) == pytest.approx(0.741 * 0.74 / 0.85)


def test_the_nvlstree_correction_applies_on_blackwell_with_an_x86_cpu_only():
    # v2.30.7 ncclTopoGetAlgoTime: NVLSTree's bandwidth x treeCorrectionFactor[log2(n/64)] on
    # Blackwell and x86; at 1 MiB the Simple row's entry 14 is 0.5
    graphs = DEFAULT_GRAPHS[Arch.BLACKWELL]
    size = 1 << 20
    x86 = System(16, 2, Arch.BLACKWELL, graphs, CpuVendor.INTEL)
    arm = System(16, 2, Arch.BLACKWELL, graphs, CpuVendor.ARM)
    bw = bandwidth_GBps(x86, NT, Protocol.SIMPLE)
    latency = latency_us(x86, NT, Protocol.SIMPLE)
    assert x86.tuning.tree_correction[Protocol.SIMPLE][14] == 0.5
    assert predicted_time_us(x86, NT, Protocol.SIMPLE, size) == pytest.approx(
        latency + size / (1000 * bw * 0.5))
    assert predicted_time_us(arm, NT, Protocol.SIMPLE, size) == pytest.approx(
        latency + size / (1000 * bw))
    hopper = System(16, 2, Arch.HOPPER, DEFAULT_GRAPHS[Arch.HOPPER])
    assert predicted_time_us(hopper, NT, Protocol.SIMPLE, size) == pytest.approx(
        latency_us(hopper, NT, Protocol.SIMPLE)
        + size / (1000 * bandwidth_GBps(hopper, NT, Protocol.SIMPLE)))


def test_across_hosts_ring_and_tree_channels_start_at_the_nics():
    # search.cc across nodes: one channel per NIC at the fastest inter-node speed a NIC carries
    # (48 GB/s for 400 Gb/s, 24 for 200) that the GPU's NVLink also carries on every channel:
    # H100 ring 8 x 45 (8 x 48 = 384 > 18 x 20.6 = 370.8), tree 8 x 48 (370.8 x 8/7 for a
    # tree); A100 8 x 24; B200 8 x 48; no channel duplication below 50 GB/s from SM90, nor
    # below 25 GB/s before it
    for preset, ring, tree in (("dgx_h100", 45.0, 48.0), ("dgx_a100", 24.0, 24.0),
                               ("dgx_b200", 48.0, 48.0)):
        graphs = system(preset, 2).graphs
        assert (graphs[R].channels, graphs[R].bw_intra_GBps, graphs[R].bw_inter_GBps) == (
            8, ring, ring), preset
        assert (graphs[T].channels, graphs[T].bw_intra_GBps, graphs[T].bw_inter_GBps) == (
            8, tree, tree), preset
        assert system(preset, 1).graphs[R] == DEFAULT_GRAPHS[system(preset, 1).arch][R]
    # one GPU and one NIC a host: 1 x 48, duplicated into 2 x 24 (at most 4 channels)
    one = scenario_from_dict({"topology": {"preset": "dgx_h100", "nodes": 4, "gpus_per_node": 1},
                              "algorithms": ["ring"], "sizes": [8]})
    graph = system_of(prepare(one, select=False).machine).graphs[R]
    assert (graph.channels, graph.bw_inter_GBps) == (2, 24.0)


def test_the_presets_name_their_host_cpus():
    assert system("dgx_b200", 2).cpu is CpuVendor.INTEL
    assert system("gb200_nvl72", 1).cpu is CpuVendor.ARM
