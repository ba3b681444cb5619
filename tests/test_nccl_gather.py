"""NCCL's cost model for ReduceScatter and AllGather: Ring and PAT (tuning.cc
``ncclTopoTuneModel``), worked by hand on 16 Hopper nodes of one GPU each with the assumed
graphs (12 channels × 30 GB/s, no NIC latency), and the pick reported by ``algorithms: auto``."""

from __future__ import annotations

import pytest

from simulator.model.collective import Collective
from simulator.model.nccl import (
    DEFAULT_GRAPHS,
    Arch,
    Choice,
    NcclAlgorithm,
    Protocol,
    System,
    bandwidth_GBps,
    best_protocol,
    choose,
    latency_us,
    predicted_time_us,
)
from simulator.runner import simulate

RS, AG = Collective.REDUCE_SCATTER, Collective.ALLGATHER
PAT, RING = NcclAlgorithm.PAT, NcclAlgorithm.RING
LL, LL128, SIMPLE = Protocol.LL, Protocol.LL128, Protocol.SIMPLE
ONE_PER_NODE = System(ranks=16, nodes=16, arch=Arch.HOPPER, graphs=DEFAULT_GRAPHS[Arch.HOPPER])


@pytest.mark.parametrize("collective", [RS, AG])
def test_pat_terms_worked_by_hand(collective):
    # bus: 12 channels × 30 GB/s (the tree's graph, bwInter on > 2 nodes) × 0.75, not converted
    assert bandwidth_GBps(ONE_PER_NODE, PAT, SIMPLE, collective) == pytest.approx(270.0)
    # 8.0 + log2(16) · 14 / 3.5 + 16 · 2.8 (interLat: NET Tree Simple 14 µs, as ppn = 1)
    assert latency_us(ONE_PER_NODE, PAT, SIMPLE, collective) == pytest.approx(68.8)
    for protocol in (LL, LL128):
        assert bandwidth_GBps(ONE_PER_NODE, PAT, protocol, collective) == 0.0


@pytest.mark.parametrize("collective", [RS, AG])
def test_ring_terms_worked_by_hand(collective):
    # nsteps = 15, all across nodes: base + 15 · interLat (NET Tree, ppn = 1); busBw × 16/15
    assert latency_us(ONE_PER_NODE, RING, SIMPLE, collective) == pytest.approx(8.4 + 15 * 14.0)
    assert latency_us(ONE_PER_NODE, RING, LL, collective) == pytest.approx(6.6 + 15 * 5.0)
    assert latency_us(ONE_PER_NODE, RING, LL128, collective) == pytest.approx(14.0 + 15 * 8.5)
    assert bandwidth_GBps(ONE_PER_NODE, RING, SIMPLE, collective) == pytest.approx(384.0)
    assert bandwidth_GBps(ONE_PER_NODE, RING, LL, collective) == pytest.approx(20.4 * 16 / 15)
    assert bandwidth_GBps(ONE_PER_NODE, RING, LL128, collective) == pytest.approx(331.2 * 16 / 15)
    # no ring plateau outside AllReduce: 1 GiB is latency + bytes / bandwidth
    assert predicted_time_us(ONE_PER_NODE, RING, SIMPLE, 1 << 30, collective) == pytest.approx(
        218.4 + (1 << 30) / 384e3)


def test_the_pick_goes_from_pat_to_ring_ll128_to_ring_simple():
    # PAT up to ~83 MB (its 0.75 bandwidth against LL128's), LL128 to ~340 MB, then Simple
    assert choose(ONE_PER_NODE, 1 << 20, collective=RS) == Choice(PAT, SIMPLE, pytest.approx(
        68.8 + (1 << 20) / 270e3))
    assert choose(ONE_PER_NODE, 64 << 20, collective=AG).algorithm is PAT
    assert (choose(ONE_PER_NODE, 128 << 20, collective=RS).algorithm,
            choose(ONE_PER_NODE, 128 << 20, collective=RS).protocol) == (RING, LL128)
    assert (choose(ONE_PER_NODE, 1 << 30, collective=RS).algorithm,
            choose(ONE_PER_NODE, 1 << 30, collective=RS).protocol) == (RING, SIMPLE)
    assert best_protocol(ONE_PER_NODE, PAT, 1 << 20, collective=RS) is SIMPLE


def test_pat_needs_one_gpu_per_node_and_no_allreduce():
    two_per_node = System(ranks=16, nodes=8, arch=Arch.HOPPER, graphs=DEFAULT_GRAPHS[Arch.HOPPER])
    assert predicted_time_us(two_per_node, PAT, SIMPLE, 1 << 20, RS) is None
    assert choose(two_per_node, 1 << 20, collective=RS).algorithm is RING
    assert bandwidth_GBps(ONE_PER_NODE, PAT, SIMPLE) == 0.0  # AllReduce has no PAT
    assert choose(ONE_PER_NODE, 1 << 20).algorithm is not PAT


def _auto(collective: str) -> dict[str, object]:
    return {"name": "pat-auto", "topology": {"preset": "dgx_h100_superpod", "nodes": 8,
                                             "gpus_per_node": 1},
            "collective": collective, "algorithms": "auto", "sizes": [64 << 10, 1 << 30]}


@pytest.mark.parametrize("collective", ["reduce_scatter", "allgather"])
def test_auto_reports_nccls_pick_for_reduce_scatter_and_allgather(collective):
    frame = simulate(_auto(collective))
    picked = frame[frame.nccl_pick.astype(bool)]
    assert list(zip(picked.algorithm, picked.size_bytes, picked.protocol, strict=True)) == [
        ("ring", 1 << 30, "Simple"), ("pat", 64 << 10, "Simple")]
    assert frame.verified.all()
