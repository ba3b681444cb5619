"""Direct (all-pairs / flat-tree) algorithms: hand-computed link sharing, exact closed forms on
``switch`` and ``fully_connected``, upper bounds elsewhere, uneven sizes, p = 1, composition."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.algorithms import Collective, get_algorithm
from simulator.algorithms.direct import DirectAllreduce
from simulator.algorithms.hierarchical import Hierarchical, HierarchicalOptions
from simulator.model.machine import GpuSpec
from simulator.model.reduction import ReduceOp
from simulator.runner import prepare, run_point
from simulator.scenario import TopologySpec
from tests.conftest import flat_scenario, run_one

US = 1e-6
COLLECTIVES = [c for c in Collective if c is not Collective.ALLTOALL]
"""The collectives whose direct algorithm runs any count; the all-to-all's, which needs p equal
blocks, is tested in tests/test_alltoall.py and by the contract tests."""
GPU = GpuSpec(reduce_bandwidth_Bps=4e9, launch_latency_s=0.5 * US)  # g(4000 B) = 1.5 us
PRIMES_AND_OTHERS = [2, 3, 4, 5, 7, 8, 11, 12, 13, 16, 17]


def direct(kind: str, collective: Collective, **fields: object):
    return flat_scenario(kind, collective=collective, algorithms=("direct",), **fields)


def assert_time(result, expected_s: float) -> None:
    assert result.verified is True
    assert result.sim_time_s == pytest.approx(expected_s, rel=1e-12, abs=1e-18)
    assert result.model_time_s == pytest.approx(expected_s, rel=1e-12, abs=1e-18)


# --- switch: every up- and downlink carries p-1 flows ---------------------------------------

def test_allreduce_on_a_switch_of_3_with_uneven_chunks_and_reductions():
    # p = 3, 1 GB/s links of 1 us (alpha = 2 us); 3001 float32 -> chunks of 1001, 1000, 1000
    # elements = 4004, 4000, 4000 B; g(4004) = 0.5 + 1.001 = 1.501 us, g(4000) = 1.5 us.
    # Reduce-scatter from t = 2 us: uplink a carries a's 2 shards, downlink c the 2 shards of
    # chunk c, so every link has 2 flows and each flow gets 0.5 GB/s. The 4000 B shards land at
    # 2 + 8 = 10 us; the two 4004 B shards for rank 0 have 4 B left, still sharing downlink 0
    # (their uplinks now carry only them), so they land at 10.008 us. Owners 1, 2 reduce twice:
    # done at 13 us; owner 0 at 10.008 + 2 x 1.501 = 13.010 us.
    # Allgather: 1 and 2 start at 15 us, 0 at 15.010 us; every link again carries at most 2
    # flows and uplink 0 exactly 2 equal ones, so 0's 4004 B go at 0.5 GB/s: 15.010 + 8.008.
    scenario = direct("switch", Collective.ALLREDUCE, ranks=3, bandwidth=1e9, latency=1 * US,
                      gpu=GPU)
    assert_time(run_one(scenario, 4 * 3001), 23.018 * US)  # = 2·alpha + 2(p-1)·c·beta + (p-1)·g


def test_allreduce_on_a_switch_of_4_where_the_phases_overlap():
    # p = 4, 1 GB/s, zero latency, free reductions; 4001 float32 -> chunk 0 = 4004 B, others
    # 4000 B (s). Reduce-scatter: 12 flows, 3 per link, 1/3 GB/s each. At 3s = 12 us the shards
    # for 1, 2, 3 are in; those owners start their allgather at once, while the shards for 0
    # still have 4 B to go. Their sends to 0 wait (one message at a time per connection); the
    # others start: uplink c now has 3 flows (c->0 and two allgather), downlinks 1..3 have 2,
    # downlink 0 has 3, so everyone stays at 1/3 GB/s and the shards for 0 land at 12.012 us.
    # Rank 0 starts its allgather and the waiting c->0 sends start: every link has 3 flows, all
    # at 1/3 GB/s; c->d (d != 0) ends at 12.012 + 3 x 3.996 = 24 us, leaving 0->d with 8 B and
    # c->0 with 4 B, still three per link: c->0 ends at 24.012 us, 0->d at 24.024 us = 6 x 4004 ns.
    scenario = direct("switch", Collective.ALLREDUCE, ranks=4, bandwidth=1e9, latency=0.0)
    assert_time(run_one(scenario, 4 * 4001), 24.024 * US)


def test_reduce_scatter_on_a_switch_of_3():
    # The first half of the case above: 2 us + 2 x 4004 ns at 0.5 GB/s + 2 x 1.501 us.
    scenario = direct("switch", Collective.REDUCE_SCATTER, ranks=3, bandwidth=1e9, latency=1 * US,
                      gpu=GPU)
    assert_time(run_one(scenario, 4 * 3001), 13.010 * US)


def test_allgather_on_a_switch_of_3():
    # Rank 0's uplink carries its two 4004 B copies at 0.5 GB/s each: 2 us + 8.008 us.
    scenario = direct("switch", Collective.ALLGATHER, ranks=3, bandwidth=1e9, latency=1 * US)
    assert_time(run_one(scenario, 4 * 3001), 10.008 * US)


def test_broadcast_on_a_switch_of_4():
    # The root's uplink carries 3 copies of 4000 B at 1/3 GB/s each: 1 us + 12 us.
    scenario = direct("switch", Collective.BROADCAST, ranks=4, bandwidth=1e9, latency=0.5 * US)
    assert_time(run_one(scenario, 4000), 13 * US)


def test_reduce_on_a_switch_of_4():
    # The root's downlink carries 3 buffers of 4000 B at 1/3 GB/s: all land at 1 + 12 us, then
    # the root reduces them one after the other: 3 x 1.5 us.
    scenario = direct("switch", Collective.REDUCE, ranks=4, bandwidth=1e9, latency=0.5 * US,
                      gpu=GPU)
    assert_time(run_one(scenario, 4000), 17.5 * US)


# --- fully_connected: one cable per pair, no sharing ----------------------------------------

def test_allreduce_on_fully_connected_queues_the_reductions_after_the_arrival():
    # p = 5, 5003 float32 -> largest chunk 1001 elements = 4004 B, alpha = 1 us, beta = 1 ns/B.
    # The 4 shards of chunk 0 arrive together at 1 + 4.004 us (one cable each), so rank 0's
    # 4 reductions of 1.501 us run back to back after it: 2(alpha + c·beta) + (p-1)·g.
    scenario = direct("fully_connected", Collective.ALLREDUCE, ranks=5, bandwidth=1e9,
                      latency=1 * US, gpu=GPU)
    assert_time(run_one(scenario, 4 * 5003), (2 * (1 + 4.004) + 4 * 1.501) * US)


def test_closed_forms_are_the_textbook_formulas_when_p_divides_n():
    p, n, alpha, beta = 8, 8 << 20, 1e-6, 1 / 25e9
    gpu = GpuSpec(reduce_bandwidth_Bps=1e12, launch_latency_s=2e-6)
    g = 2e-6 + n / p / 1e12
    expected = {  # switch: every flow at bandwidth / (p-1)
        Collective.ALLREDUCE: 2 * alpha + 2 * (p - 1) / p * n * beta + (p - 1) * g,
        Collective.REDUCE_SCATTER: alpha + (p - 1) / p * n * beta + (p - 1) * g,
        Collective.ALLGATHER: alpha + (p - 1) / p * n * beta,
        Collective.BROADCAST: alpha + (p - 1) * n * beta,
        Collective.REDUCE: alpha + (p - 1) * n * beta + (p - 1) * (2e-6 + n / 1e12),
    }
    for collective, time_s in expected.items():
        result = run_one(direct("switch", collective, ranks=p, gpu=gpu), n)
        assert result.model_time_s == pytest.approx(time_s, rel=1e-12), collective
        assert result.sim_time_s == pytest.approx(time_s, rel=1e-12), collective


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(["switch", "fully_connected"]),
       collective=st.sampled_from(COLLECTIVES),
       ranks=st.sampled_from(PRIMES_AND_OTHERS),
       count=st.integers(min_value=1, max_value=3_000_000),
       bandwidth=st.floats(min_value=1e9, max_value=1e12),
       latency=st.one_of(st.just(0.0), st.floats(min_value=1e-9, max_value=1e-5)),
       reduce_bandwidth=st.one_of(st.none(), st.floats(min_value=1e10, max_value=5e12)),
       launch=st.sampled_from([0.0, 2e-6]))
def test_simulated_time_equals_closed_form_on_flat_topologies(kind, collective, ranks, count,
                                                             bandwidth, latency, reduce_bandwidth,
                                                             launch):
    gpu = GpuSpec(reduce_bandwidth_Bps=reduce_bandwidth, launch_latency_s=launch)
    scenario = direct(kind, collective, ranks=ranks, bandwidth=bandwidth, latency=latency, gpu=gpu)
    result = run_one(scenario, 4 * count)
    assert result.verified
    assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9)


# --- topologies whose routes share links: the closed form is an upper bound ------------------

@pytest.mark.parametrize("size_bytes, expected_us", [(4000, 9.0), (400, 2.4)])
def test_broadcast_on_a_physical_ring_of_4(size_bytes, expected_us):
    # Cables 0-1, 1-2, 2-3, 3-0 at 1 GB/s, 1 us. The root reaches 1 and 3 in one hop and 2 via 1
    # (equal routes: node names break the tie), so link 0->1 carries two copies: the closed form
    # is 2 us + n x 2 ns/B. Simulated, the copy to 1 has link 0->1 alone from 1 us until the copy
    # to 2 gets there at 2 us (its route has 2 us of latency). n = 4000 B: 1000 B go alone,
    # then both at 0.5 GB/s: 0->1 ends at 2 + 6 = 8 us with 3000 B of 0->2 moved, whose last
    # 1000 B then go at 1 GB/s: 9 us (1 us under the bound). n = 400 B: 0->1 is done at 1.4 us,
    # before 0->2 starts, which goes alone: 2 + 0.4 = 2.4 us.
    scenario = direct("ring", Collective.BROADCAST, ranks=4, bandwidth=1e9, latency=1 * US)
    result = run_one(scenario, size_bytes)
    assert result.verified is True
    assert result.sim_time_s == pytest.approx(expected_us * US, rel=1e-12)
    assert result.model_time_s == pytest.approx((2 + size_bytes * 2e-3) * US, rel=1e-12)


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("ranks", [3, 4, 5, 8])
def test_closed_form_bounds_the_simulation_on_a_physical_ring(collective, ranks):
    scenario = direct("ring", collective, ranks=ranks, gpu=GPU)
    for size in (4, 4 * 1001, 4 << 20):
        result = run_one(scenario, size)
        assert result.verified is True
        assert result.sim_time_s <= result.model_time_s * (1 + 1e-9)


def _dgx(nodes: int, gpus_per_node: int) -> TopologySpec:
    return TopologySpec("dgx", {
        "nodes": nodes, "gpus_per_node": gpus_per_node, "nvlink_bandwidth": 450e9,
        "nvlink_latency": 3e-7, "pcie_bandwidth": 63e9, "pcie_latency": 5e-7,
        "nic_bandwidth": 50e9, "nic_latency": 8.5e-7})


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_closed_form_is_exact_inside_one_dgx_node(collective):
    # 8 GPUs on one NVSwitch: a switch of 450 GB/s links (the NIC routes are slower, unused).
    scenario = replace(direct("switch", collective, gpu=GPU), topology=_dgx(1, 8))
    for size in (4, 4 * 1001, 4 << 20):
        result = run_one(scenario, size)
        assert result.verified is True
        assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9)


# --- sizes, p = 1, composition ---------------------------------------------------------------

MESSAGES = {Collective.ALLREDUCE: lambda p: 2 * p * (p - 1),
            Collective.REDUCE_SCATTER: lambda p: p * (p - 1),
            Collective.ALLGATHER: lambda p: p * (p - 1),
            Collective.BROADCAST: lambda p: p - 1,
            Collective.REDUCE: lambda p: p - 1,
            Collective.SENDRECV: lambda p: p}


@pytest.mark.parametrize("collective", COLLECTIVES)
@pytest.mark.parametrize("ranks, count", [(3, 1000), (7, 1001), (13, 5), (6, 6 * 50 + 5)])
@pytest.mark.parametrize("op", [ReduceOp.SUM, ReduceOp.MAX, ReduceOp.PROD])
def test_uneven_sizes_reduce_exactly(collective, ranks, count, op):
    scenario = direct("switch", collective, ranks=ranks, dtype=np.dtype("int32"), reduce_op=op)
    result = run_one(scenario, 4 * count)
    assert result.verified is True
    assert result.max_abs_error == 0.0
    assert result.messages == MESSAGES[collective](ranks)  # empty chunks still take their message


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_single_rank_is_a_trivial_run(collective):
    result = run_one(direct("switch", collective, ranks=1, gpu=GPU), 1 << 20)
    assert (result.sim_time_s, result.model_time_s, result.messages) == (0.0, 0.0, 0)
    assert result.verified is True


def test_runs_inside_a_subgroup_as_hierarchicals_inter_node_allreduce():
    # 3 nodes x 4 GPUs: the rails (one GPU per node) run the direct allreduce on a quarter of
    # the buffer each, all at once, over their own NICs.
    scenario = replace(flat_scenario(dtype=np.dtype("int64"), gpu=GPU), topology=_dgx(3, 4))
    setup = prepare(scenario)
    algorithm = Hierarchical(HierarchicalOptions(inter=DirectAllreduce()))
    for size in (8 * 12 * 37, 8 * 1001, 8 << 17):
        result = run_point(scenario, algorithm, size, setup=setup)
        assert result.verified is True and result.max_abs_error == 0.0
        assert result.sim_time_s <= result.model_time_s * (1 + 1e-9)


def test_same_inputs_same_outputs():
    scenario = direct("switch", Collective.ALLREDUCE, ranks=5)
    assert run_one(scenario, 40_004, seed=3) == run_one(scenario, 40_004, seed=3)


@pytest.mark.parametrize("collective", COLLECTIVES)
def test_registered_under_its_public_name(collective):
    assert get_algorithm(collective, "direct").name == "direct"
    assert get_algorithm(collective, "direct").collective is collective
