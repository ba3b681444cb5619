"""NCCL's cost model (simulator.model.nccl) against its sources: the tables against the CSV files
of docs/reference, and the predicted times against hand computations from tuning.cc's formulas
(docs/reference/nccl-model.md §1.3-§1.5, whose worked examples they reproduce)."""

import csv
from pathlib import Path

import pytest

from simulator.model.nccl import (
    LATEST,
    Arch,
    Graph,
    Hardware,
    NcclAlgorithm,
    Protocol,
    System,
    bandwidth_GBps,
    choose,
    latency_us,
    predicted_time_us,
)
from simulator.model.nccl_versions import NCCL_2_30, TUNINGS

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference"
RING, TREE, NVLS, NVLS_TREE = (NcclAlgorithm.RING, NcclAlgorithm.TREE, NcclAlgorithm.NVLS,
                               NcclAlgorithm.NVLS_TREE)
LL, LL128, SIMPLE = Protocol.LL, Protocol.LL128, Protocol.SIMPLE


def rows(name: str) -> list[dict[str, str]]:
    lines = (REFERENCE / name).read_text().splitlines()
    return list(csv.DictReader(line for line in lines if not line.startswith("#")))


def test_the_reference_files_are_the_latest_tuners():
    # the CSV files state the NCCL they were read from: the latest record's
    assert TUNINGS[LATEST] is NCCL_2_30
    for name in ("nccl_model_latency_constants.csv", "nccl_model_bw_caps.csv"):
        assert "NVIDIA/nccl v2.30.7-1 (commit 73cf1122" in (REFERENCE / name).read_text()
    assert NCCL_2_30.source.startswith("NVIDIA/nccl v2.30.7-1 (commit 73cf1122)")


def test_latency_tables_are_the_reference_ones():
    base, hw = NCCL_2_30.base_latency_us, NCCL_2_30.hw_latency_us
    for row in rows("nccl_model_latency_constants.csv"):
        algorithm, protocol = NcclAlgorithm(row["algorithm"]), Protocol(row["protocol"])
        if (algorithm, protocol) not in base:
            continue  # CollNet's, NVLS's and PAT's LL/LL128 are not run
        assert base[algorithm, protocol] == float(row["base_latency_us"]), row
        for hardware, column in ((Hardware.NVLINK, "hw_latency_nvlink_us"),
                                 (Hardware.PCI, "hw_latency_pci_us"),
                                 (Hardware.NET, "hw_latency_net_us")):
            assert hw[hardware, algorithm, protocol] == float(row[column]), row
    assert len(base) == 11 and len(hw) == 33


def test_bandwidth_caps_are_the_reference_ones():
    arch_of = {"Volta(sm70)": Arch.VOLTA, "Ampere(sm80)": Arch.AMPERE, "Hopper(sm90)": Arch.HOPPER,
               "Blackwell(sm100)": Arch.BLACKWELL}
    tuning = NCCL_2_30
    for row in rows("nccl_model_bw_caps.csv"):
        arch, column = arch_of[row["arch"]], {"1": 0, "2": 1, ">=3": 2}[row["nodes"]]
        assert tuning.ll_max_bw_gbps[arch][column] == float(row["llMaxBw_total"])
        assert tuning.per_channel_max_ring_ll128_gbps[arch][column] == float(row["perChMaxRingLL128Bw"])
        assert tuning.per_channel_max_tree_ll128_gbps[arch][column] == float(row["perChMaxTreeLL128Bw"])
        assert tuning.per_channel_max_tree_gbps[arch][column] == float(row["perChMaxTreeBw"])
        assert tuning.per_channel_max_nvls_tree_gbps[arch][column] == float(row["perChMaxNVLSTreeBw"])
        assert tuning.nvls_efficiency[arch] == float(row["nvls_efficiency"])


H100_NODE = System(ranks=8, nodes=1, arch=Arch.HOPPER, graphs={
    RING: Graph(channels=12, bw_intra_GBps=30.0, bw_inter_GBps=30.0),
    TREE: Graph(channels=12, bw_intra_GBps=30.0, bw_inter_GBps=30.0),
    NVLS: Graph(channels=16, bw_intra_GBps=24.0, bw_inter_GBps=24.0)})
"""One node of 8 H100 on NVLink. The graphs are assumptions (no published search log): ring and
tree 12 channels × 30 GB/s, NVLS 16 channels (NCCL_NVLS_NCHANNELS) × 24 GB/s, speeds from
search.cc's Hopper array; with them the model picks what NCCL is seen to pick (below)."""


@pytest.mark.parametrize("algorithm, protocol, expected", [
    (RING, LL, 15.0), (RING, LL128, 40.6), (RING, SIMPLE, 56.0),    # base + 14 × hwLat
    (TREE, LL, 15.2), (TREE, LL128, 31.5), (TREE, SIMPLE, 64.4),    # base + 2 · 7 × hwLat
    (NVLS, SIMPLE, 25.0),                                            # hwLat, no base
])
def test_latencies_of_the_worked_example(algorithm, protocol, expected):
    # nccl-model.md §1.5 "Worked example (8 GPUs, one node, NVLink, v2.30.7)"
    assert latency_us(H100_NODE, algorithm, protocol) == pytest.approx(expected, abs=1e-9)


def test_ring_ll_at_32_kib_is_the_worked_example():
    # LL's bus bandwidth is capped at llMaxBw = 141 GB/s (Hopper, one node): algbw 141·8/14
    assert bandwidth_GBps(H100_NODE, RING, LL) == pytest.approx(141 * 8 / 14, rel=1e-12)
    # 15.0 µs + 32768 B / (80.57 GB/s · 1000 B/µs per GB/s) = 15.407 µs ("≈ 15.4 µs")
    time = predicted_time_us(H100_NODE, RING, LL, 32768)
    assert time == pytest.approx(15.0 + 32768 / (1000 * 141 * 8 / 14), rel=1e-12)
    assert round(time, 1) == 15.4


def test_two_nodes_ring_simple_latency_and_plateau():
    # nccl-model.md §1.5: 2 nodes × 8 H100, IB, Intel CPU: 8.4 + 28·max(3.4, 3.0) + 2·14 = 131.6 µs,
    # then ×1.4 (plateau) once a rank's share per channel reaches 64 B
    system = System(ranks=16, nodes=2, arch=Arch.HOPPER,
                    graphs={RING: Graph(channels=8, bw_intra_GBps=40.0, bw_inter_GBps=40.0)})
    assert latency_us(system, RING, SIMPLE) == pytest.approx(131.6, abs=1e-9)
    bw = 8 * 40.0 * 16 / 30  # busBw = channels × bwIntra (nodes ≤ 2); algbw × nRanks/nsteps
    assert bandwidth_GBps(system, RING, SIMPLE) == pytest.approx(bw, rel=1e-12)
    small, large = 8 * 16 * 63, 8 * 16 * 64  # bytes per (channel × rank): 63, then 64
    assert predicted_time_us(system, RING, SIMPLE, small) == pytest.approx(
        131.6 + small / (1000 * bw), rel=1e-12)
    assert predicted_time_us(system, RING, SIMPLE, large) == pytest.approx(
        131.6 * 1.4 + large / (1000 * bw), rel=1e-12)


def test_tree_bandwidth_refinements_and_correction():
    # busBw = min(0.92 · 12 · 30, 12 · 38.7) = 331.2; LL: /3.8 = 87.16 (below llMaxBw 141);
    # algbw × 0.5; at 64 KiB the LL correction is entry log2(65536/64) = 10: 0.6
    assert bandwidth_GBps(H100_NODE, TREE, SIMPLE) == pytest.approx(331.2 * 0.5, rel=1e-12)
    assert bandwidth_GBps(H100_NODE, TREE, LL) == pytest.approx(331.2 / 3.8 * 0.5, rel=1e-12)
    assert bandwidth_GBps(H100_NODE, TREE, LL128) == pytest.approx(331.2 * 7 / 9 * 0.5, rel=1e-12)
    assert predicted_time_us(H100_NODE, TREE, LL, 65536) == pytest.approx(
        15.2 + 65536 / (1000 * 331.2 / 3.8 * 0.5 * 0.6), rel=1e-12)
    # from 512 MiB on (entry 23) no correction
    assert predicted_time_us(H100_NODE, TREE, SIMPLE, 1 << 29) == pytest.approx(
        64.4 + (1 << 29) / (1000 * 331.2 * 0.5), rel=1e-12)


def test_nvls_bandwidth():
    # intraBw = 24 · 0.85 · 15/16 · 2 = 38.25 > bwInter 24, so bw = 24; busBw = 16 · 24 = 384;
    # algbw = 384 · 8/14
    assert bandwidth_GBps(H100_NODE, NVLS, SIMPLE) == pytest.approx(384 * 8 / 14, rel=1e-12)
    narrow = System(ranks=8, nodes=1, arch=Arch.HOPPER, graphs={NVLS: Graph(16, 24.0, 48.0)})
    assert bandwidth_GBps(narrow, NVLS, SIMPLE) == pytest.approx(16 * 38.25 * 8 / 14, rel=1e-12)


def test_the_pick_switches_from_ring_ll_to_nvls_at_2_mib():
    # What NCCL runs on 8 × H200 (docs/reference/nccl-tests-h200.csv: Ring/LL up to 1 MiB, NVLS
    # from 2 MiB). Ring LL: 15 µs + n / 80.57 GB/s; NVLS: 25 µs + n / 219.4 GB/s; they cross
    # where n · (1/80.57 − 1/219.4) = 10 µs, n ≈ 1.27 MB. Ring Simple (56 µs + n / 205.7 GB/s)
    # and LL128 (40.6 µs + n / 189.3 GB/s) never beat NVLS.
    picks = {size: choose(H100_NODE, size) for size in (32 << 10, 1 << 20, 2 << 20, 1 << 30)}
    assert [(c.algorithm, c.protocol) for c in picks.values()] == [
        (RING, LL), (RING, LL), (NVLS, SIMPLE), (NVLS, SIMPLE)]
    assert picks[2 << 20].time_us == pytest.approx(25 + (2 << 20) / (1000 * 384 * 8 / 14), rel=1e-12)


def test_what_cannot_run_is_not_picked():
    a100 = System(ranks=8, nodes=1, arch=Arch.AMPERE, graphs={
        RING: Graph(12, 20.0, 20.0), NVLS: Graph(16, 20.0, 20.0), NVLS_TREE: Graph(16, 20.0, 20.0)})
    assert predicted_time_us(a100, NVLS, SIMPLE, 1 << 20) is None       # no NVLink SHARP
    assert predicted_time_us(H100_NODE, NVLS_TREE, SIMPLE, 1 << 20) is None  # no graph
    assert predicted_time_us(a100, TREE, SIMPLE, 1 << 20) is None       # no graph either
    no_ll128 = System(ranks=8, nodes=1, arch=Arch.AMPERE, graphs={RING: Graph(12, 20.0, 20.0)},
                      ll128=False)
    assert predicted_time_us(no_ll128, RING, LL128, 1 << 20) is None
    assert choose(a100, 1 << 30).algorithm is RING
    with pytest.raises(ValueError, match="no NCCL algorithm is available"):
        choose(System(ranks=8, nodes=1, arch=Arch.AMPERE), 1024)
