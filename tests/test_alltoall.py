"""The all-to-all collective (issue 25 item 3): its expected outcome, its bus-bandwidth factor,
direct and pairwise against their closed forms by hand, and counts it cannot cut into p equal
blocks refused."""

import numpy as np
import pytest

from simulator import InputError, run_point
from simulator.algorithms.alltoall import pairing_steps, partners
from simulator.model.collective import Collective
from simulator.model.reduction import ReduceOp

SWITCH4 = {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s", "latency": "1us"}


def test_rank_r_ends_with_block_r_of_every_rank_in_rank_order():
    inputs = np.arange(18, dtype=np.int64).reshape(3, 6)  # rank r's blocks: [6r, 6r+1], ...
    owned = [slice(0, 2), slice(2, 4), slice(4, 6)]
    expected = Collective.ALLTOALL.expected(inputs, ReduceOp.SUM, owned)
    assert expected.result.tolist() == [[0, 1, 6, 7, 12, 13],
                                        [2, 3, 8, 9, 14, 15],
                                        [4, 5, 10, 11, 16, 17]]
    assert expected.mask.all()
    assert expected.check(expected.result).verified is True
    wrong = expected.result.copy()
    wrong[1, 2] = 99
    assert expected.first_wrong(wrong) == (1, 2)


def test_unequal_blocks_have_no_all_to_all():
    with pytest.raises(ValueError, match=r"^an all-to-all needs equal blocks, got lengths \[1, 2\]$"):
        Collective.ALLTOALL.expected(np.zeros((2, 3)), ReduceOp.SUM, [slice(0, 1), slice(1, 3)])


def test_busbw_factor_is_nccl_tests_alltoall():
    assert Collective.ALLTOALL.busbw_factor(4) == 0.75
    assert Collective.ALLTOALL.reduces is False


def test_pairwise_meets_every_partner_once_and_pairs_both_ways():
    assert partners(1, 4) == [0, 3, 2]                      # 1 XOR 1, 1 XOR 2, 1 XOR 3
    assert partners(1, 3) == [2, 0]                         # (k - 1) mod 3, k = 0, 2 (1 idles)
    for p in (3, 4, 5, 6, 8):
        for step in pairing_steps(p):
            assert sorted(step) == sorted((b, a) for a, b in step)  # both ways
        met = sorted(pair for step in pairing_steps(p) for pair in step)
        assert met == [(a, b) for a in range(p) for b in range(p) if a != b]


@pytest.mark.parametrize("name, time_s", [
    # one step: 2 hops of 1 us, each rank's 3 blocks of 1 KiB sharing its uplink at 25 GB/s
    ("direct", 2e-6 + 3 * 1024 / 25e9),
    # three steps (XOR 1, 2, 3), each 2 hops and one 1 KiB block alone on its links
    ("pairwise", 3 * (2e-6 + 1024 / 25e9)),
])
def test_times_are_the_closed_forms_by_hand(name, time_s):
    result = run_point({"topology": SWITCH4, "collective": "alltoall", "sizes": [4096]},
                       name, 4096)
    assert result.verified is True
    assert result.sim_time_s == pytest.approx(time_s, rel=1e-12)
    assert result.model_time_s == pytest.approx(time_s, rel=1e-12)
    assert result.busbw_GBps == pytest.approx(4096 / time_s / 1e9 * 0.75, rel=1e-12)


def test_pairwise_on_an_odd_switch_overlaps_steps_past_its_closed_form():
    # docstring of PairwiseAllToAll: a rank past its idle step runs ahead into a shared link
    switch3 = {**SWITCH4, "ranks": 3, "latency": "0.5us"}
    result = run_point({"topology": switch3, "collective": "alltoall", "sizes": [3 << 20],
                        "dtype": "int64"}, "pairwise", 3 << 20)
    assert result.verified is True
    assert round(result.sim_time_s / result.model_time_s, 4) == 1.4845


def test_a_count_p_does_not_divide_is_refused():
    with pytest.raises(InputError) as raised:
        run_point({"topology": SWITCH4, "collective": "alltoall", "sizes": [4004]}, "direct", 4004)
    assert str(raised.value) == (
        "<dict>: sizes: 'direct' cuts each rank's buffer into 4 equal chunks: expected sizes "
        "that are multiples of 16 bytes (4 float32 elements), got 4004")
