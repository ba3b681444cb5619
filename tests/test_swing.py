"""swing: the paper's partners, its blocks kept contiguous, a torus case by hand, the option, both
engines alike and the short-cut that beats recursive halving and doubling on a torus."""

import math

import numpy as np
import pytest

from simulator import InputError, simulate
from simulator.algorithms import Collective, get_algorithm
from simulator.algorithms.phases.swing import rho, swing_butterfly
from simulator.algorithms.swing import SwingOptions
from simulator.model.machine import GpuSpec
from simulator.scenario import TopologySpec
from tests.conftest import flat_scenario, run_one

SWING = get_algorithm(Collective.ALLREDUCE, "swing")
ALPHA, BANDWIDTH = 5e-7, 25e9  # flat_scenario's links: one hop of 500 ns at 25 GB/s


def torus_dict(dims, algorithms=("swing",), **fields):
    return {"topology": {"kind": "torus", "dims": list(dims), "bandwidth": "25GB/s",
                         "latency": "500ns"}, "algorithms": list(algorithms), **fields}


def test_rho_and_the_partners_of_eight_ranks():
    # NSDI'24 §3: ρ(s) = Σ (−2)^i; even ranks go +ρ(s), odd ranks −ρ(s), mod p
    assert [rho(s) for s in range(8)] == [1, -1, 3, -5, 11, -21, 43, -85]
    fly = swing_butterfly((8,), tuple(range(8)))
    assert fly.partners == ((1, 0, 3, 2, 5, 4, 7, 6),    # s = 0: ρ = 1
                            (7, 2, 1, 4, 3, 6, 5, 0),    # s = 1: ρ = -1
                            (3, 6, 5, 0, 7, 2, 1, 4))    # s = 2: ρ = 3
    # rank 0 reaches {0, 3} through step 2, {0, 3, 7, 4} through steps 1 and 2: aligned groups
    assert fly.positions == (0, 4, 6, 1, 2, 7, 5, 3)


@pytest.mark.parametrize("dims", [(2,), (16,), (256,), (4, 4), (8, 8), (2, 8), (4, 4, 4), (8, 2, 4)])
def test_every_step_pairs_ranks_and_keeps_their_blocks_contiguous(dims):
    q = math.prod(dims)
    fly = swing_butterfly(dims, tuple(range(q)))
    steps = len(fly.partners)
    assert steps == q.bit_length() - 1
    reach = [{r} for r in range(q)]          # what r's data reach through steps s..L-1
    for s in reversed(range(steps)):
        partner = fly.partners[s]
        assert all(partner[partner[r]] == r != partner[r] for r in range(q))
        reach = [reach[r] | reach[partner[r]] for r in range(q)]
        size = q >> s
        for r in range(q):
            assert len(reach[r]) == size     # disjoint halves: every rank's data exactly once
            first = fly.positions[r] - fly.positions[r] % size
            assert {fly.positions[j] for j in reach[r]} == set(range(first, first + size))


def test_a_step_moves_along_one_dimension_at_a_time():
    # 4 x 4 torus, rank (row, col) = 4·row + col: steps alternate row, col, row, col (the first
    # dimension first, as libswing's port 0), with ρ(0) = 1 then ρ(1) = -1 along each. Rank
    # (1, 2): row odd, so -1 then +1 along rows; col even, so +1 then -1 along columns
    fly = swing_butterfly((4, 4), tuple(range(16)))
    rank = 4 * 1 + 2
    assert [fly.partners[s][rank] for s in range(4)] == [4 * 0 + 2, 4 * 1 + 3, 4 * 2 + 2,
                                                         4 * 1 + 1]


def test_hand_computed_time_on_a_ring_of_eight():
    # a torus of dims (8,): 8000 B per rank. Reduce-scatter steps s = 0, 1, 2 send 4000, 2000,
    # 1000 B over |ρ(s)| = 1, 1, 3 hops; at s = 2 every even rank sends 3 hops clockwise (odd
    # ones counter-clockwise), so each link carries (3 + 1)/2 = 2 flows at 12.5 GB/s:
    #   RS = (500ns + 4000/25e9) + (500ns + 2000/25e9) + (1500ns + 2·1000/25e9)
    #      = 0.66 + 0.58 + 1.58 = 2.82 us, and the allgather the same steps back: 2.82 us;
    # the reductions, 1 us + bytes/100 GB/s each: 3 us + 7000/1e11 = 3.07 us.
    expected = 2 * (2.5e-6 + (4000 + 2000 + 2 * 1000) / BANDWIDTH) + 3e-6 + 7000 / 1e11
    topology = TopologySpec("torus", {"dims": (8,), "bandwidth": BANDWIDTH, "latency": ALPHA})
    result = run_one(flat_scenario(topology=topology, algorithms=("swing",),
                                   gpu=GpuSpec(1e11, 1e-6)), 8000)
    assert result.verified
    assert result.sim_time_s == pytest.approx(expected, rel=1e-12)
    assert result.model_time_s == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(8.71e-6, rel=1e-12)


def test_short_cuts_beat_recursive_halving_on_an_8x8_torus():
    # 4 MiB per rank: Swing's big early messages go one hop; halving_doubling's go 4, 2, 1 hops
    # along a line, sharing links (the paper's Fig. 1 argument)
    frame = simulate(torus_dict((8, 8), ("swing", "halving_doubling"), sizes=["4MiB"]))
    swing, halving = frame.sim_time_s
    assert frame.verified.all()
    assert swing == pytest.approx(frame.model_time_s[0], rel=1e-9)
    assert halving / swing == pytest.approx(2.8225, abs=1e-4)


def test_latency_optimal_option_swaps_the_whole_vector():
    # 16 ranks on a 4 x 4 torus, 4000 B: 4 whole-vector steps of 1, 1, 1, 1 hops (ρ = 1, 1 per
    # dimension), each alpha + 4000 B / 25 GB/s; no reduction cost by default
    frame = simulate(torus_dict((4, 4), sizes=[4000],
                                algorithm_options={"swing": {"latency_optimal": True}}))
    assert frame.verified.all()
    assert frame.sim_time_s[0] == pytest.approx(4 * (ALPHA + 4000 / BANDWIDTH), rel=1e-12)
    assert SWING.configured(SwingOptions(latency_optimal=True)).options.latency_optimal


def test_a_bad_option_is_one_line():
    with pytest.raises(InputError) as caught:
        simulate(torus_dict((4, 4), sizes=[4000], algorithm_options={"swing": {"ports": 2}}))
    assert "\n" not in str(caught.value) and "ports" in str(caught.value)


@pytest.mark.parametrize("dims, fields", [
    ((4, 4), {}),
    ((2, 4, 4), {"gpu": {"reduce_bandwidth": "40GB/s", "launch_latency": "1us"}}),
    ((3, 4), {"piece_size": 1000}),             # 12 ranks: the fold, then Swing on 8
    ((4, 4), {"algorithm_options": {"swing": {"latency_optimal": True}}}),
])
def test_both_engines_agree(dims, fields):
    scenario = torus_dict(dims, sizes=[4 * 3001, 4 << 16], **fields)
    simpy, vector = (simulate({**scenario, "engine": engine}) for engine in ("simpy", "vector"))
    assert list(vector.engine) == ["vector"] * 2 and list(simpy.engine) == ["simpy"] * 2
    np.testing.assert_array_equal(vector.sim_time_s, simpy.sim_time_s)
    assert vector.verified.all() and simpy.verified.all()


@pytest.mark.parametrize("algorithm", ["swing", "bine"])
def test_both_engines_agree_on_two_dgx_h100(algorithm):
    # NCCL's execution on 8 channels: at 0.613 us each rank hands its network proxy (1 us a
    # message) sends of two channels at once; both engines post the lower channel's first (the
    # SimPy engine took them in its event order: 30.8184 and 35.4277 us).
    scenario = {"topology": {"preset": "dgx_h100", "nodes": 2}, "algorithms": [algorithm],
                "sizes": [1024, 262144]}
    simpy, vector = (simulate({**scenario, "engine": engine}) for engine in ("simpy", "vector"))
    assert list(vector.engine) == ["vector"] * 2 and list(simpy.engine) == ["simpy"] * 2
    np.testing.assert_array_equal(vector.sim_time_s, simpy.sim_time_s)
    assert simpy.sim_time_s.tolist() == [3.0819230769230776e-05, 3.637948717948719e-05]
    assert vector.verified.all() and simpy.verified.all()
