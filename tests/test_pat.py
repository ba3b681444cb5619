"""PAT (NCCL's PatRSAlgorithm / PatAGAlgorithm): its order worked by hand, its trees, its closed
form against times worked by hand, and NCCL's one-GPU-per-node condition."""

from __future__ import annotations

from collections import Counter

import pytest

from simulator.algorithms.phases.pat import (
    Aggregation,
    Post,
    aggregation,
    allgather_order,
    low,
    pat_chunk_bytes,
    reduce_scatter_order,
)
from simulator.errors import InputError
from simulator.model.collective import Collective
from simulator.model.machine import GpuSpec
from simulator.scenario import scenario_from_dict
from tests.conftest import flat_scenario, run_one

LATENCY, BANDWIDTH = 5e-7, 25e9


def test_reduce_scatter_order_on_four_ranks_worked_by_hand():
    # P = 4, A = 2, G = 2: the leaves 3 and 1 out on dimension 0; node 2 takes leaf 3 and goes
    # out on dimension 1; the owner takes node 2 (dimension 1), then leaf 1 (dimension 0)
    assert reduce_scatter_order(4, 2, 2) == (Post((), (3, 1)), Post((3,), (2,)), Post((2,), ()),
                                             Post((1,), ()))


def test_allgather_order_on_four_ranks_worked_by_hand():
    # the high dimension first (the owner's chunk to offset 2), then dimension 0 from offsets 0
    # and 2 (node 2 taken first), then the leaves 1 and 3 taken
    assert allgather_order(4, 2, 2) == (Post((), (2,)), Post((2,), (1, 3)), Post((1, 3), ()))


def test_unaggregated_reduce_scatter_walks_the_residues_down():
    # A = 1 (large buffers on few ranks): one node a step, offsets 7, 6, …, 1 of p = 8
    assert reduce_scatter_order(8, 1, 1) == (
        Post((), (7,)), Post((7,), (6,)), Post((6,), ()), Post((), (5,)), Post((5,), (4,)),
        Post((4,), ()), Post((), (3,)), Post((3,), (2,)), Post((2,), ()), Post((), (1,)),
        Post((1,), ()))


@pytest.mark.parametrize("p", [2, 3, 5, 6, 8, 12, 13, 16, 33])
def test_every_offset_moves_once_a_pass_over_its_tree(p):
    # each offset s in 1..p-1 is sent once to rank me ± low(s) and taken once, whatever the
    # aggregation; offsets ≥ p never appear
    size = 1 << (p - 1).bit_length()
    for factor in [f for f in (1, 2, 4, 8, 16) if f <= max(1, size // 2)]:
        for post in {1, factor}:
            for order in (reduce_scatter_order(p, factor, post), allgather_order(p, factor, post)):
                sent = Counter(s for step in order for s in step.send)
                taken = Counter(r for step in order for r in step.recv)
                assert sent == taken == Counter(range(1, p)), (p, factor, post)


def test_nccl_chunk_and_aggregation():
    # calcCollChunking: 512 KiB halved while 16 (RS) or 32 (AG) chunks exceed the buffer
    assert pat_chunk_bytes(8 << 20, True) == 512 << 10
    assert pat_chunk_bytes(8 << 20, False) == 256 << 10
    # small buffers aggregate to p/2 in one slot; large ones one piece a slot, 8 slots in flight
    assert aggregation(64, 64 << 10, 4) == Aggregation(32, 32)
    assert aggregation(64, 512 << 10, 8 << 20) == Aggregation(8, 1)
    assert aggregation(4, 512 << 10, 8 << 20) == Aggregation(2, 1)


@pytest.mark.parametrize("collective, ranks, pieces", [
    (Collective.REDUCE_SCATTER, 8, 5),   # L·alpha + (3p/4 - 1)·c·beta: leaves stream meanwhile
    (Collective.REDUCE_SCATTER, 4, 2),
    (Collective.ALLGATHER, 8, 7),        # L·alpha + (p-1)·c·beta: 1, 2, 4 pieces, lock-step
    (Collective.ALLGATHER, 4, 3),
])
def test_aggregated_time_worked_by_hand(collective, ranks, pieces):
    steps = ranks.bit_length() - 1
    chunk_bytes = 4000
    scenario = flat_scenario("fully_connected", ranks=ranks, collective=collective,
                             algorithms=("pat",))
    result = run_one(scenario, chunk_bytes * ranks)
    assert result.verified is True
    want = steps * LATENCY + pieces * chunk_bytes / BANDWIDTH
    assert result.sim_time_s == pytest.approx(want, rel=1e-12)
    assert result.model_time_s == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("collective", [Collective.REDUCE_SCATTER, Collective.ALLGATHER])
@pytest.mark.parametrize("ranks", [3, 6, 16])
def test_closed_form_equals_the_simulation_on_fully_connected(collective, ranks):
    # pipelined passes (64 KiB pieces), uneven chunks, and a GPU that costs time to reduce
    scenario = flat_scenario("fully_connected", ranks=ranks, collective=collective,
                             algorithms=("pat",), piece_bytes=65536, gpu=GpuSpec(1e12, 1e-6))
    for size in (4 * 1000 * ranks + 12, 3 << 20):
        result = run_one(scenario, size)
        assert result.verified is True
        assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-12), size


def _nccl_cluster(gpus_per_node: int, collective: str = "reduce_scatter") -> dict[str, object]:
    return {"name": "pat", "topology": {"preset": "dgx_h100_superpod", "nodes": 4,
                                        "gpus_per_node": gpus_per_node},
            "collective": collective, "algorithms": ["pat"], "sizes": [1 << 20]}


def test_nccl_runs_pat_only_with_one_gpu_per_node():
    with pytest.raises(InputError, match=r"algorithms\[0\]: 'pat' cannot run on topology .*: "
                                         r"NCCL runs PAT only with one GPU per node .* here 8 "
                                         r"ranks sit on 4 host\(s\)"):
        run_one(scenario_from_dict(_nccl_cluster(2)), 1 << 20)
    assert run_one(scenario_from_dict(_nccl_cluster(1)), 1 << 20).verified is True


def test_on_the_ideal_wire_pat_runs_with_several_gpus_per_host():
    scenario = scenario_from_dict({**_nccl_cluster(2, "allgather"), "execution": "ideal"})
    assert run_one(scenario, 1 << 20).verified is True


def test_low_bits():
    assert [low(s) for s in (1, 2, 3, 4, 6, 12)] == [1, 2, 1, 4, 2, 4]
