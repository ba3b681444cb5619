"""Ring allreduce: exact closed form where no link is shared, and numpy-verified results."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.algorithms import Collective, get_algorithm
from simulator.model.machine import GpuSpec
from simulator.model.reduction import ReduceOp
from tests.conftest import flat_scenario, run_one

PRIMES_AND_OTHERS = [2, 3, 4, 5, 7, 8, 11, 13, 16, 17, 24, 31, 32, 37, 48, 61, 64]


def test_hand_computed_time_on_a_switch():
    # p = 4 on a 25 GB/s, 500 ns switch: a rank-to-rank hop is 2 links, alpha = 1 us,
    # a 4 MiB buffer moves in chunks of 1 MiB: T = 2(p-1)(alpha + 1MiB / 25e9)
    result = run_one(flat_scenario("switch", ranks=4), 4 << 20)
    expected = 6 * (1e-6 + (1 << 20) / 25e9)
    assert result.sim_time_s == pytest.approx(expected, rel=1e-12)
    assert result.model_time_s == pytest.approx(expected, rel=1e-12)
    assert result.algbw_GBps == pytest.approx((4 << 20) / expected / 1e9, rel=1e-12)
    assert result.busbw_GBps == pytest.approx(result.algbw_GBps * 2 * 3 / 4, rel=1e-12)


def test_hand_computed_time_with_reduction_cost():
    # p = 2 on a physical ring (one cable): alpha = 1 us, beta = 1/10e9, chunk = 500 KB;
    # one reduce-scatter step pays a reduction of 500 KB at 100 GB/s plus a 2 us launch.
    scenario = flat_scenario("ring", ranks=2, bandwidth=10e9, latency=1e-6,
                             gpu=GpuSpec(reduce_bandwidth_Bps=100e9, launch_latency_s=2e-6))
    result = run_one(scenario, 1_000_000)
    expected = 2 * (1e-6 + 500_000 / 10e9) + (2e-6 + 500_000 / 100e9)
    assert result.sim_time_s == pytest.approx(expected, rel=1e-12)
    assert result.model_time_s == pytest.approx(expected, rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(["switch", "fully_connected"]),
       ranks=st.sampled_from(PRIMES_AND_OTHERS),
       count=st.integers(min_value=1, max_value=3_000_000),
       bandwidth=st.floats(min_value=1e9, max_value=1e12),
       latency=st.floats(min_value=0.0, max_value=1e-5),
       reduce_bandwidth=st.one_of(st.none(), st.floats(min_value=1e10, max_value=5e12)))
def test_simulated_time_equals_closed_form_without_shared_links(kind, ranks, count, bandwidth,
                                                                latency, reduce_bandwidth):
    scenario = flat_scenario(kind, ranks=ranks, bandwidth=bandwidth, latency=latency,
                             gpu=GpuSpec(reduce_bandwidth_Bps=reduce_bandwidth))
    result = run_one(scenario, 4 * count)
    assert result.verified
    assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9)


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(["switch", "fully_connected"]),
       ranks=st.sampled_from([2, 3, 5, 8, 13]),
       per_rank=st.integers(min_value=1, max_value=20_000),
       pieces=st.integers(min_value=1, max_value=24),
       latency=st.floats(min_value=0.0, max_value=1e-5),
       reduce_bandwidth=st.one_of(st.none(), st.floats(min_value=1e9, max_value=5e12)),
       launch=st.sampled_from([0.0, 1e-6]),
       collective=st.sampled_from([Collective.ALLREDUCE, Collective.REDUCE_SCATTER,
                                   Collective.ALLGATHER]))
def test_pipelined_ring_equals_its_closed_form(kind, ranks, per_rank, pieces, latency,
                                               reduce_bandwidth, launch, collective):
    # every chunk the same size (p divides the count), cut into about `pieces` pieces (the last
    # one partial); reductions may be slower than the link (then the GPU sets the pace)
    scenario = flat_scenario(kind, ranks=ranks, latency=latency, collective=collective,
                             piece_bytes=4 * -(-per_rank // pieces),
                             gpu=GpuSpec(reduce_bandwidth_Bps=reduce_bandwidth,
                                         launch_latency_s=launch))
    result = run_one(scenario, 4 * ranks * per_rank)
    assert result.verified
    assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9)


def test_closed_form_is_the_textbook_formula_when_p_divides_n():
    # 2(p-1)·alpha + 2(p-1)/p·n·beta + (p-1)/p·n·gamma (Patarasuk & Yuan 2009)
    p, n = 8, 64 << 20
    alpha, beta, gamma = 2 * 5e-7, 1 / 25e9, 1 / 1e12
    scenario = flat_scenario("switch", ranks=p, gpu=GpuSpec(reduce_bandwidth_Bps=1e12))
    result = run_one(scenario, n)
    textbook = 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta + (p - 1) / p * n * gamma
    assert result.model_time_s == pytest.approx(textbook, rel=1e-12)
    assert result.sim_time_s == pytest.approx(textbook, rel=1e-12)


OPS = [op.value for op in ReduceOp]
DTYPES = ["float16", "float32", "float64", "int32", "int64"]


@pytest.mark.parametrize("ranks", [1, 2, 3, 7, 8])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", OPS)
def test_every_rank_ends_with_numpys_reduction(ranks, dtype, op):
    scenario = flat_scenario("switch", ranks=ranks, dtype=np.dtype(dtype), reduce_op=ReduceOp(op))
    itemsize = np.dtype(dtype).itemsize
    result = run_one(scenario, 1001 * itemsize)  # 1001 elements: uneven chunks for p > 1
    assert result.verified is True
    assert result.verified_elements == result.count == 1001
    if dtype.startswith("int") or op in ("max", "min"):
        assert result.max_abs_error == 0.0


def test_single_rank_is_a_trivial_run():
    result = run_one(flat_scenario("switch", ranks=1), 1 << 20)
    assert (result.sim_time_s, result.model_time_s, result.messages) == (0.0, 0.0, 0)
    assert result.verified is True
    assert math.isnan(result.algbw_GBps) and math.isnan(result.busbw_GBps)


def test_large_sizes_are_verified_on_a_proxy_with_nominal_timing():
    result = run_one(flat_scenario("switch", ranks=8), 1 << 30)
    assert result.count == (1 << 30) // 4
    assert result.verified_elements == 1 << 14
    assert result.verified is True
    assert result.sim_time_s == pytest.approx(14 * (1e-6 + (1 << 27) / 25e9), rel=1e-12)


def test_more_ranks_than_elements_still_reduces():
    result = run_one(flat_scenario("switch", ranks=7, dtype=np.dtype("int64")), 3 * 8)
    assert result.verified is True
    assert result.messages == 2 * 6 * 7  # empty chunks still take their step


def test_same_inputs_same_outputs():
    scenario = flat_scenario("switch", ranks=5)
    assert run_one(scenario, 40_000, seed=3) == run_one(scenario, 40_000, seed=3)


def test_registered_under_its_public_name():
    assert get_algorithm(Collective.ALLREDUCE, "ring").name == "ring"


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9), st.integers(0, 17), st.integers(-2, 3), st.integers(0, 17),
       st.integers(0, 40))
def test_the_whole_chunk_schedule_equals_the_general_one_with_one_piece_each(
        n, steps, start, reducing_steps, count):
    # The fast path of ring_pass_schedule (every chunk one message) must build exactly the
    # arrays the general, pipelined construction builds for one piece per chunk.
    from simulator.algorithms.phases import ring
    from simulator.algorithms.schedule import ARRAYS, Group
    from simulator.model.span import Span

    members = np.random.default_rng(n).permutation(2 * n)[:n].astype(np.int64)
    group = Group(members, Span(5, 5 + count), 4)
    starts, stops = group.chunks(n)
    chunk = ((np.arange(n)[None, :] + start - np.arange(steps)[:, None]) % n).ravel()
    fast = ring._whole_chunks(group, chunk, starts, stops, reducing_steps)
    general = ring._pieces(group, chunk, starts, stops, np.ones(n, dtype=np.int64),
                           max(1, int((stops - starts).max(initial=1))), reducing_steps)
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(fast, name), getattr(general, name), err_msg=name)
