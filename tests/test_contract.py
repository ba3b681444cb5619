"""The contract every registered algorithm meets, run over the whole registry automatically.

- exact numpy results on integer data, for every op and p = 1..17;
- float results within the rounding bound of any summation order;
- time never falls as the size grows;
- simulated time = closed form wherever the algorithm claims it (its ``exact_on`` data).
"""

import numpy as np
import pytest

from simulator.algorithms import REGISTRY
from simulator.algorithms.phases.pieces import PIPELINE_BYTES
from simulator.model.machine import GpuSpec
from simulator.model.reduction import ReduceOp
from simulator.model.topology import BUILDERS
from tests.conftest import applicable_scenario, flat_scenario, run_one

ALL = [(collective, name) for collective, algorithms in REGISTRY.items() for name in algorithms]
NEEDS_NODES = {"hierarchical", "nvls_tree", "collnet_direct", "collnet_chain"}
"""Algorithms with no topology at p = 1 (they need GPUs on two or more nodes)."""


def sized(scenario, size_bytes: int) -> int:
    """``size_bytes`` rounded up to a count the scenario's algorithm runs: a multiple of its
    ``whole_chunks`` (an all-to-all's p equal blocks; 1 for the others, which run any count)."""
    algorithm = REGISTRY[scenario.collective][scenario.algorithms[0]]
    step = algorithm.whole_chunks(scenario.topology.ranks) * scenario.dtype.itemsize
    return -(-size_bytes // step) * step


@pytest.mark.parametrize("collective, name", ALL)
@pytest.mark.parametrize("op", list(ReduceOp))
def test_exact_on_integer_data(collective, name, op):
    for ranks in range(1, 18):
        scenario = applicable_scenario(ranks, collective=collective, algorithms=(name,),
                                       dtype=np.dtype("int64"), reduce_op=op)
        if scenario is None:
            assert ranks == 1 and name in NEEDS_NODES
            continue
        result = run_one(scenario, sized(scenario, 8 * 37))  # 37 elements: uneven pieces for most p
        assert result.verified is True, (ranks, result)
        assert result.max_abs_error == 0.0


@pytest.mark.parametrize("collective, name", ALL)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_float_results_within_rounding(collective, name, dtype):
    """Exact for float32 and float64 (exactly summable inputs); float16 and bfloat16 sums of
    normal draws within the bound of the algorithm's reduction_depth (docs/numerics.md)."""
    for ranks in (2, 5, 16):
        scenario = applicable_scenario(ranks, collective=collective, algorithms=(name,),
                                       dtype=np.dtype(dtype), reduce_op=ReduceOp.SUM)
        assert run_one(scenario, sized(scenario, np.dtype(dtype).itemsize * 999)).verified is True


@pytest.mark.parametrize("collective, name", ALL)
def test_time_never_falls_as_size_grows(collective, name):
    scenario = applicable_scenario(6, collective=collective, algorithms=(name,))
    times = [run_one(scenario, sized(scenario, 4 * 2**k)).sim_time_s for k in range(0, 24, 3)]
    assert times == sorted(times)
    assert times[-1] > times[0]


@pytest.mark.parametrize("collective, name", ALL)
@pytest.mark.parametrize("piece_bytes", [None, 4096])
def test_time_never_falls_across_pipeline_piece_boundaries(collective, name, piece_bytes):
    # one element more may add a piece; it must never make the run faster
    piece = piece_bytes or PIPELINE_BYTES
    scenario = applicable_scenario(5, collective=collective, algorithms=(name,),
                                   piece_bytes=piece_bytes, gpu=GpuSpec(1e12, 1e-6))
    sizes = [sized(scenario, k * piece + delta) for k in (1, 2, 5) for delta in (-4, 0, 4)]
    times = [run_one(scenario, size).sim_time_s for size in sizes]
    assert times == sorted(times), list(zip(sizes, times, strict=True))


CLAIMS = [(collective, name, claim) for collective, name in ALL
          for claim in REGISTRY[collective][name].exact_on]


def test_every_claim_names_a_builder_it_can_be_checked_on():
    # the check below builds the claimed topology from ranks, bandwidth and latency alone (a
    # torus or mesh from the dims of that many ranks: tests/conftest.py grid_dims)
    assert CLAIMS, "no algorithm claims an exact closed form"
    for _, name, claim in CLAIMS:
        assert set(BUILDERS[claim.kind].params) in ({"ranks", "bandwidth", "latency"},
                                                    {"dims", "bandwidth", "latency"}), name


@pytest.mark.parametrize("collective, name, claim", CLAIMS, ids=str)
def test_closed_form_exact_where_claimed(collective, name, claim):
    for ranks in (2, 3, 4, 8, 13, 16, 32):
        if not claim.ranks.admits(ranks):
            continue
        scenario = flat_scenario(claim.kind, ranks=ranks, collective=collective, algorithms=(name,))
        for size in (4, 4 * 1000, 4 << 20):
            result = run_one(scenario, sized(scenario, size))
            assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9), (ranks, size)
