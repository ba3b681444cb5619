"""The contract every registered algorithm meets, run over the whole registry automatically.

- exact numpy results on integer data, for every op and p = 1..17;
- float results within the rounding bound of any summation order;
- time never falls as the size grows;
- where the schedule shares no link (listed in EXACT_ON_FLAT), simulated time = closed form.
"""

import numpy as np
import pytest

from simulator.collectives import REGISTRY
from simulator.collectives.phases import PIPELINE_BYTES
from simulator.costmodel import GpuSpec
from simulator.reduction import ReduceOp
from tests.conftest import applicable_scenario, flat_scenario, run_one

ALL = [(collective, name) for collective, algorithms in REGISTRY.items() for name in algorithms]
NEEDS_NODES = {"hierarchical"}
"""Algorithms with no topology at p = 1 (they need GPUs on two or more nodes)."""

EXACT_ON_FLAT = {"ring", "direct"}
"""Algorithms whose closed form is exact on ``switch`` and ``fully_connected`` for any p: ring
never puts two flows on one link; direct's flows share every link evenly (p-1 per up/downlink)."""

EXACT_ON_FULLY_CONNECTED = {"binomial_tree", "tree", "double_binary_tree"}
"""Exact on ``fully_connected`` (every tree edge its own cable; tests/test_trees.py has the
hand-computed ``switch`` cases, where a parent's children share its links)."""

EXACT_ON_FLAT_POWERS_OF_TWO = {"halving_doubling", "recursive_doubling"}
"""Exact on both flat topologies when p is a power of two (with the links' 500 ns latency). For
other p the fold's hand-in shares downlinks with early starters on ``switch``
(tests/test_recursive.py has the hand-computed cases)."""


@pytest.mark.parametrize("collective, name", ALL)
@pytest.mark.parametrize("op", list(ReduceOp))
def test_exact_on_integer_data(collective, name, op):
    for ranks in range(1, 18):
        scenario = applicable_scenario(ranks, collective=collective, algorithms=(name,),
                                       dtype=np.dtype("int64"), op=op)
        if scenario is None:
            assert ranks == 1 and name in NEEDS_NODES
            continue
        result = run_one(scenario, 8 * 37)  # 37 elements: uneven pieces for most p
        assert result.verified is True, (ranks, result)
        assert result.max_abs_error == 0.0


@pytest.mark.parametrize("collective, name", ALL)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_results_within_rounding(collective, name, dtype):
    for ranks in (2, 5, 16):
        scenario = applicable_scenario(ranks, collective=collective, algorithms=(name,),
                                       dtype=np.dtype(dtype), op=ReduceOp.SUM)
        assert run_one(scenario, np.dtype(dtype).itemsize * 999).verified is True


@pytest.mark.parametrize("collective, name", ALL)
def test_time_never_falls_as_size_grows(collective, name):
    scenario = applicable_scenario(6, collective=collective, algorithms=(name,))
    times = [run_one(scenario, 4 * 2**k).sim_time_s for k in range(0, 24, 3)]
    assert times == sorted(times)
    assert times[-1] > times[0]


@pytest.mark.parametrize("collective, name", ALL)
@pytest.mark.parametrize("chunk_bytes", [None, 4096])
def test_time_never_falls_across_pipeline_piece_boundaries(collective, name, chunk_bytes):
    # one element more may add a piece; it must never make the run faster
    piece = chunk_bytes or PIPELINE_BYTES
    scenario = applicable_scenario(5, collective=collective, algorithms=(name,),
                                   chunk_bytes=chunk_bytes, gpu=GpuSpec(1e12, 1e-6))
    sizes = [k * piece + delta for k in (1, 2, 5) for delta in (-4, 0, 4)]
    times = [run_one(scenario, size).sim_time_s for size in sizes]
    assert times == sorted(times), list(zip(sizes, times, strict=True))


@pytest.mark.parametrize("collective, name", [(c, n) for c, n in ALL if n in EXACT_ON_FLAT])
@pytest.mark.parametrize("kind", ["switch", "fully_connected"])
def test_closed_form_exact_without_shared_links(collective, name, kind):
    for ranks in (2, 3, 8, 13):
        scenario = flat_scenario(kind, ranks=ranks, collective=collective, algorithms=(name,))
        for size in (4, 4 * 1000, 4 << 20):
            result = run_one(scenario, size)
            assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9)


@pytest.mark.parametrize("collective, name",
                         [(c, n) for c, n in ALL if n in EXACT_ON_FLAT_POWERS_OF_TWO])
@pytest.mark.parametrize("kind", ["switch", "fully_connected"])
def test_closed_form_exact_on_powers_of_two(collective, name, kind):
    for ranks in (2, 4, 8, 16, 32):
        scenario = flat_scenario(kind, ranks=ranks, collective=collective, algorithms=(name,))
        for size in (4, 4 * 1000, 4 << 20):
            result = run_one(scenario, size)
            assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9)


@pytest.mark.parametrize("collective, name", [(c, n) for c, n in ALL if n in EXACT_ON_FULLY_CONNECTED])
def test_closed_form_exact_on_fully_connected(collective, name):
    for ranks in (2, 3, 8, 13):
        scenario = flat_scenario("fully_connected", ranks=ranks, collective=collective,
                                 algorithms=(name,))
        for size in (4, 4 * 1000, 4 << 20):
            result = run_one(scenario, size)
            assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9)
