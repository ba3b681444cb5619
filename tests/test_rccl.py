"""RCCL on AMD Instinct (issue 38): the xGMI presets, RCCL's tuner worked by hand from its cited
lines (ROCm/rccl 0cbce2a7 src/graph/tuning.cc, tuning_model_5), its pick (MSCCL all-pairs ahead
of the tuner), the simulated times at sizes worked by hand, and the one-line errors."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from simulator import simulate
from simulator.calibration import calibrate
from simulator.errors import InputError
from simulator.measured.nccl_tests import load_measurements
from simulator.model.machine import Machine
from simulator.model.nccl_terms import CpuVendor, Hardware, Library
from simulator.model.nccl_terms import NcclAlgorithm as A
from simulator.model.nccl_terms import Protocol as P
from simulator.model.rccl import (
    CORRECTIONS,
    GFX942,
    MSCCL_ALGORITHM,
    RcclSystem,
    choose,
    latency_us,
    predicted_time_us,
    rccl_pick,
)
from simulator.runner import prepare
from simulator.scenario.parse import load_preset, scenario_from_dict
from simulator.tune import tune


def one_node(nodes: int = 1) -> RcclSystem:
    """RCCL's view of ``nodes`` MI300X nodes: 28 channels × 12 GB/s for Ring and Tree."""
    graph = GFX942.graph(8)
    return RcclSystem(8 * nodes, nodes, {A.RING: graph, A.TREE: graph}, CpuVendor.AMD)


def test_the_mi300x_preset_is_a_fully_connected_xgmi_mesh() -> None:
    machine = Machine.of(load_preset("mi300x").build())
    graph = machine.routing._graph
    gpus = [f"n0.gpu{i}" for i in range(8)]
    for a in gpus:
        peers = [b for b in graph.succ[a] if b in gpus]
        assert sorted(peers) == sorted(set(gpus) - {a})  # 7 xGMI links, one to each peer
        for b in peers:
            assert graph.edges[a, b]["bandwidth"] == 64e9  # 128 GB/s bidirectional per link
            assert graph.edges[a, b]["latency"] == 8e-7
    assert (machine.compute_capability, machine.nvlinks, machine.library) == (942, 7, Library.RCCL)
    assert machine.route(0, 5).nodes == ("n0.gpu0", "n0.gpu5")  # one hop, no switch


def test_mi325x_has_the_same_fabric_and_the_cluster_its_rails() -> None:
    mi325x = load_preset("mi325x").build()
    assert mi325x.edges["n0.gpu3", "n0.gpu6"]["bandwidth"] == 64e9
    spec = load_preset("mi300x_cluster")
    cluster = Machine.of(replace(spec, params={**spec.params, "nodes": 2}).build())
    assert cluster.ranks == 16
    route = cluster.route(3, 11)  # GPU 3 of host 0 to GPU 3 of host 1: its rail's leaf
    assert route.nodes == ("n0.gpu3", "n0.pcie3", "n0.nic3", "u0.leaf3", "n1.nic3", "n1.pcie3",
                           "n1.gpu3")
    assert cluster.routing._graph.edges["n0.nic3", "u0.leaf3"]["bandwidth"] == 50e9


def test_the_record_holds_tuning_model_5() -> None:
    assert all(len(row) == CORRECTIONS for table in (GFX942.tree_correction,
                                                     GFX942.ring_correction)
               for row in table.values())
    assert GFX942.base_latency_us[A.RING, P.LL] == 12.0  # tuning.cc:58
    assert GFX942.base_latency_us[A.RING, P.SIMPLE] == 17.0
    assert GFX942.hw_latency_us[Hardware.NVLINK, A.RING, P.LL] == 0.8  # tuning.cc:227
    assert GFX942.hw_latency_us[Hardware.NET, A.RING, P.SIMPLE] == 320.0  # tuning.cc:231
    # the 14 distinct rings of rome_model_79, twice: every directed link crossed 4 times
    crossings: dict[tuple[int, int], int] = {}
    for ring in GFX942.rings:
        for a, b in zip(ring, ring[1:] + ring[:1], strict=True):
            crossings[a, b] = crossings.get((a, b), 0) + 1
    assert len(GFX942.rings) == 28 and set(crossings.values()) == {4} and len(crossings) == 56
    assert GFX942.graph(8).channels == 28 and GFX942.graph(8).bw_intra_GBps == 12.0


def test_ring_and_tree_times_by_hand_on_one_node() -> None:
    system = one_node()
    # Ring/LL, 512 B: baseLat 12 + 14 steps x hwLat 0.8 (tuning.cc:58, 227); bandwidth
    # 28 x 12 GB/s x bwRatio 0.08 (tuning.cc:236) x 8/14 = 15.36 GB/s
    assert predicted_time_us(system, A.RING, P.LL, 512) == pytest.approx(23.2 + 512 / 15360)
    # Ring/Simple, 64 MiB: 17 + 14 x 2.1 = 46.4 us; 336 x 1.0 x 8/14 = 192 GB/s
    assert predicted_time_us(system, A.RING, P.SIMPLE, 64 << 20) == pytest.approx(
        46.4 + (64 << 20) / 192000)
    # Tree/LL, 512 B: 12 + 2 x 7 x 0.9 = 24.6 us; 336 x 0.06 x 0.5 = 10.08 GB/s, x the tree
    # correction at log2(512 / 64) = 3: 0.1 (tuning.cc:242)
    assert predicted_time_us(system, A.TREE, P.LL, 512) == pytest.approx(24.6 + 512 / 1008)
    # no Tree/Simple on one gfx94x node (tuning.cc:365), no LL128 off gfx90a (tuning.cc:510-516)
    assert predicted_time_us(system, A.TREE, P.SIMPLE, 1 << 30) is None
    assert predicted_time_us(system, A.RING, P.LL128, 1 << 20) is None


def test_ring_latency_on_two_nodes_counts_rccls_network_steps() -> None:
    # nInterSteps = 2 * nNodes = 4 (tuning.cc:354), the other 26 steps no cheaper than the AMD
    # CPU's network overhead, 2 us (tuning.cc:294-301), a network step hwLat NET 9.5 (tuning.cc:231)
    assert latency_us(one_node(2), A.RING, P.LL) == pytest.approx(12 + 26 * 2.0 + 4 * 9.5)


def test_the_tuner_picks_ring_ll_then_ring_simple() -> None:
    system = one_node()
    # 256 KiB: LL 23.2 + 262144 / 15360 = 40.27 against Simple 46.4 + 1.37 = 47.77
    assert (choose(system, 256 << 10).algorithm, choose(system, 256 << 10).protocol) == (
        A.RING, P.LL)
    # 512 KiB: LL 57.33 against Simple 49.13
    assert choose(system, 512 << 10).protocol is P.SIMPLE


@pytest.mark.parametrize(("size", "msccl", "protocol"), [
    (512, "", P.LL),  # 128 floats: not a multiple of the LL schedule's 256 chunks
    (1024, MSCCL_ALGORITHM, P.LL),  # allreduce-allpairs-8n-ll-32tb-op.xml: 0-64 KiB
    (65537 * 4 - 4, MSCCL_ALGORITHM, P.LL),
    (512 << 10, MSCCL_ALGORITHM, P.SIMPLE),  # ...-simple-op.xml: 512 KiB - 16 MiB
    (16 << 20, MSCCL_ALGORITHM, P.SIMPLE),
    (32 << 20, "", P.SIMPLE),  # past every schedule: the tuner's Ring/Simple
])
def test_rccl_runs_msccl_all_pairs_ahead_of_its_tuner(size: int, msccl: str,
                                                      protocol: P) -> None:
    pick = rccl_pick(one_node(), size, 4, op_is_avg=False)
    assert (pick.algorithm, pick.protocol, pick.msccl) == (A.RING, protocol, msccl)
    assert math.isnan(pick.time_us) == bool(msccl)


def test_no_msccl_for_avg_nor_across_nodes() -> None:
    assert rccl_pick(one_node(), 1024, 4, op_is_avg=True).msccl == ""
    assert rccl_pick(one_node(2), 1024, 4, op_is_avg=False).msccl == ""


def test_the_scenario_runs_rccls_pick_at_times_worked_by_hand() -> None:
    frame = simulate({"name": "m", "topology": {"preset": "mi300x"}, "algorithms": "auto",
                      "sizes": [512, 64 << 10, 256 << 20], "nccl": {"library": "rccl"},
                      "verify": False})
    rows = {int(row.size_bytes): row for row in frame.itertuples()}
    assert [rows[s].algorithm for s in sorted(rows)] == ["ring", "direct", "ring"]
    # all-pairs LL at 64 KiB: baseLat 12 + 2 steps x 0.8 us, then each phase moves one 8 KiB
    # shard a link at 48 GB/s x LL's 0.5 (RCCL's xGMI rate, topo.h:33)
    assert rows[64 << 10].sim_time_s == pytest.approx((13.6 + 2 * 8192 / 24e3) * 1e-6, rel=1e-9)
    # RCCL's ring at 256 MiB on its 56 channels: 7 links a GPU at 48 GB/s, within 1 % of the
    # 1540.4 us measured (docs/reference/rccl-tests-mi300x-1node.csv)
    assert rows[256 << 20].sim_time_s * 1e6 == pytest.approx(1540.4, rel=0.01)


def test_library_errors_are_one_line() -> None:
    def problems(topology: str, nccl: dict[str, str]) -> list[str]:
        with pytest.raises(InputError) as error:
            prepare(scenario_from_dict({"topology": {"preset": topology}, "sizes": [1024],
                                        "algorithms": ["ring"], "nccl": nccl}, source="s.yaml"))
        return [str(p) for p in error.value.problems]

    assert problems("mi300x", {"library": "hip"}) == [
        "s.yaml: nccl.library: expected the collective library: nccl, rccl (rccl on AMD "
        "Instinct GPUs), got 'hip'"]
    assert problems("dgx_h100", {"library": "rccl"}) == [
        "s.yaml: nccl.library: expected nccl on topology dgx_h100, whose NVIDIA GPUs (compute "
        "capability 90) run NCCL, got rccl"]
    assert problems("mi300x", {"library": "nccl"}) == [
        "s.yaml: nccl.library: expected rccl on topology mi300x, whose AMD Instinct GPUs "
        "(compute capability 942, gfx942) run RCCL, got nccl"]
    assert problems("mi300x", {"library": "rccl", "algo": "NVLS,Ring"}) == [
        "s.yaml: nccl.algo: expected Ring or Tree with library rccl: RCCL has no NVLS (no "
        "in-switch reduction on AMD Instinct), got 'NVLS,Ring'"]


def test_nvls_cannot_run_under_rccl() -> None:
    with pytest.raises(InputError) as error:
        prepare(scenario_from_dict({"topology": {"preset": "mi300x"}, "sizes": [1024],
                                    "algorithms": ["nvls"]}, source="s.yaml"))
    assert [str(p) for p in error.value.problems] == [
        "s.yaml: algorithms[0]: 'nvls' cannot run on topology mi300x: it needs one switch with "
        "in-switch reduction (reduction: true) cabled to every GPU, such as the NVSwitch of a "
        "single dgx_h100 node"]


def test_tune_and_calibrate_refuse_rccl_machines_in_one_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    with pytest.raises(InputError) as error:
        tune(scenario_from_dict({"topology": {"preset": "mi300x"}, "sizes": [1024],
                                 "algorithms": "auto"}, source="s.yaml"))
    assert [str(p) for p in error.value.problems] == [
        "s.yaml: nccl.library: expected a machine that runs NCCL: tune writes NCCL's tuner "
        "plugin file, and topology mi300x runs RCCL, whose tuning is not modelled here"]
    series = load_measurements("docs/reference/rccl-tests-mi300x-1node.csv")
    with pytest.raises(InputError) as error:
        calibrate(series, "mi300x")
    assert [str(p) for p in error.value.problems] == [
        "docs/reference/rccl-tests-mi300x-1node.csv: --preset: expected a preset of NVIDIA "
        "GPUs: calibrate fits NCCL's execution model, and 'mi300x' runs RCCL, whose fit is not "
        "modelled"]
