"""The sendrecv collective (issue 25 item 3): nccl-tests' sendrecv_perf, every rank's buffer to
rank r+1; its expected outcome, its bus-bandwidth factor, and direct's time by hand on a switch,
a ring and a fully connected graph, on both engines."""

import numpy as np
import pytest

from simulator import run_point, scenario_from_dict, simulate
from simulator.algorithms import get_algorithm
from simulator.model.collective import Collective
from simulator.model.reduction import ReduceOp


def test_rank_r_ends_with_rank_r_minus_one_s_buffer():
    inputs = np.arange(6, dtype=np.int64).reshape(3, 2)
    expected = Collective.SENDRECV.expected(inputs, ReduceOp.SUM, [slice(0, 1), slice(1, 2)])
    assert expected.result.tolist() == [[4, 5], [0, 1], [2, 3]]
    assert expected.mask.all() and expected.check(expected.result).verified is True
    assert expected.check(inputs).verified is False  # nothing moved
    assert Collective.SENDRECV.busbw_factor(8) == 1.0 and Collective.SENDRECV.reduces is False


@pytest.mark.parametrize("engine", ["simpy", "vector"])
@pytest.mark.parametrize("kind, ranks, hops", [("switch", 4, 2), ("ring", 5, 1),
                                               ("fully_connected", 3, 1)])
def test_direct_is_one_message_on_its_own_links(engine, kind, ranks, hops):
    # each rank's message to r+1 has its links to itself: alpha (hops x 1 us) + n / 25 GB/s
    size = 1 << 20
    scenario = scenario_from_dict({
        "topology": {"kind": kind, "ranks": ranks, "bandwidth": "25GB/s", "latency": "1us"},
        "collective": "sendrecv", "sizes": [size], "engine": engine})
    result = run_point(scenario, get_algorithm(Collective.SENDRECV, "direct"), size)
    assert result.verified is True and result.max_abs_error == 0
    expected = hops * 1e-6 + size / 25e9
    assert result.sim_time_s == pytest.approx(expected, rel=1e-12)
    assert result.model_time_s == pytest.approx(expected, rel=1e-12)
    assert result.busbw_GBps == pytest.approx(result.algbw_GBps)


def test_all_is_direct_and_nccl_has_no_model_of_it():
    frame = simulate({"topology": {"preset": "dgx_h100"}, "collective": "sendrecv",
                      "algorithms": "all", "sizes": [4096]})
    assert list(frame.algorithm) == ["direct"] and frame.verified.all()
    assert frame.nccl_time_s.isna().all() and not frame.nccl_pick.any()
