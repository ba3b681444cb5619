"""halving_doubling and recursive_doubling: closed forms, the fold, and link sharing on a ring.

Where these are exact: for p a power of two on ``switch`` and ``fully_connected`` every exchange
uses both directions of links no other flow uses at that moment, so simulated time = closed form
whenever the route latency covers the few elements (< p/2; at most 1 for halving_doubling
allreduce) by which two messages of one step can differ, and at any latency when p divides the
element count (recursive_doubling allreduce: always). For other p the survivors that did not fold
start at once, so the lock-step closed form is an upper bound on ``fully_connected`` (exact for
halving_doubling allreduce when 2^⌊log2 p⌋ divides the count) and on ``switch`` their early
messages share the folded ranks' links (hand-computed below).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.algorithms import Collective, get_algorithm
from simulator.algorithms.phases.recursive import halves, power_of_two_below, survivor_blocks, survivors
from simulator.model.machine import GpuSpec
from simulator.model.span import Span
from tests.conftest import dgx_topology, flat_scenario, inter_options, run_one

HD, RD = "halving_doubling", "recursive_doubling"
ALGORITHMS = [(Collective.ALLREDUCE, HD), (Collective.REDUCE_SCATTER, HD),
              (Collective.ALLREDUCE, RD), (Collective.ALLGATHER, RD)]
POWERS_OF_TWO = [2, 4, 8, 16, 32, 64]
NOT_POWERS_OF_TWO = [3, 5, 6, 7, 11, 12, 13, 17]


def test_registered_under_their_public_names():
    for collective, name in ALGORITHMS:
        assert get_algorithm(collective, name).name == name


@settings(max_examples=30, deadline=None)
@given(algorithm=st.sampled_from(ALGORITHMS), kind=st.sampled_from(["switch", "fully_connected"]),
       ranks=st.sampled_from(POWERS_OF_TWO), count=st.integers(min_value=1, max_value=1_000_000),
       bandwidth=st.floats(min_value=1e9, max_value=1e12),
       latency=st.one_of(st.just(0.0), st.floats(min_value=1e-7, max_value=1e-5)),
       reduce_bandwidth=st.one_of(st.none(), st.floats(min_value=1e10, max_value=5e12)),
       launch=st.sampled_from([0.0, 2e-6]), piece_bytes=st.sampled_from([None, 1 << 18]))
def test_exact_for_powers_of_two_without_shared_links(algorithm, kind, ranks, count, bandwidth,
                                                      latency, reduce_bandwidth, launch, piece_bytes):
    collective, name = algorithm
    if latency == 0.0 and algorithm != (Collective.ALLREDUCE, RD):
        count = ranks * max(1, count // ranks)  # equal messages: nothing for a latency to hide
    scenario = flat_scenario(kind, ranks=ranks, bandwidth=bandwidth, latency=latency,
                             collective=collective, algorithms=(name,), piece_bytes=piece_bytes,
                             gpu=GpuSpec(reduce_bandwidth_Bps=reduce_bandwidth,
                                         launch_latency_s=launch))
    result = run_one(scenario, 4 * count)
    assert result.verified
    assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9)


P, N = 8, 64 << 20
ALPHA, BETA, GAMMA, LAUNCH = 2 * 5e-7, 1 / 25e9, 1 / 1e12, 1e-6  # switch: 2 hops of 500 ns
TEXTBOOK = {  # Thakur, Rabenseifner & Gropp 2005, plus a kernel launch per reduction
    (Collective.ALLREDUCE, HD): 2 * 3 * ALPHA + 2 * 7 / 8 * N * BETA + 7 / 8 * N * GAMMA + 3 * LAUNCH,
    (Collective.REDUCE_SCATTER, HD): 3 * ALPHA + 7 / 8 * N * BETA + 7 / 8 * N * GAMMA + 3 * LAUNCH,
    (Collective.ALLREDUCE, RD): 3 * (ALPHA + N * BETA + N * GAMMA + LAUNCH),
    (Collective.ALLGATHER, RD): 3 * ALPHA + 7 / 8 * N * BETA,
}


@pytest.mark.parametrize("collective, name", ALGORITHMS)
def test_closed_form_is_the_textbook_formula_when_p_divides_n(collective, name):
    scenario = flat_scenario("switch", ranks=P, collective=collective, algorithms=(name,),
                             gpu=GpuSpec(reduce_bandwidth_Bps=1 / GAMMA, launch_latency_s=LAUNCH))
    result = run_one(scenario, N)
    assert result.model_time_s == pytest.approx(TEXTBOOK[collective, name], rel=1e-12)
    assert result.sim_time_s == pytest.approx(TEXTBOOK[collective, name], rel=1e-12)


def test_the_fold_adds_a_hand_in_and_a_hand_back():
    # p = 6 on fully_connected (alpha = one 500 ns cable): ranks 0 and 2 fold into 1 and 3, the
    # q = 4 survivors run the power-of-two algorithm, 1 and 3 hand the result back.
    n, alpha, beta = 4 << 20, 5e-7, 1 / 25e9
    gpu = GpuSpec(reduce_bandwidth_Bps=1 / GAMMA, launch_latency_s=LAUNCH)
    g = LAUNCH + n * GAMMA
    fold = (alpha + n * beta + g) + (alpha + n * beta)
    expected = {
        HD: fold + 2 * 2 * alpha + 2 * 3 / 4 * n * beta + 3 / 4 * n * GAMMA + 2 * LAUNCH,
        RD: fold + 2 * (alpha + n * beta + g),
    }
    for name, total in expected.items():
        result = run_one(flat_scenario("fully_connected", ranks=6, algorithms=(name,), gpu=gpu), n)
        assert result.model_time_s == pytest.approx(total, rel=1e-12)
        assert result.messages == {HD: 2 + 4 * 4, RD: 2 + 4 * 2}[name] + 2
    # halving_doubling meets it: a rank that folded lies on the longest path anyway (its data
    # go out and back through every step), so its hand-back is the last message.
    hd = run_one(flat_scenario("fully_connected", ranks=6, algorithms=(HD,), gpu=gpu), n)
    assert hd.sim_time_s == pytest.approx(expected[HD], rel=1e-12)


@pytest.mark.parametrize("collective, name", ALGORITHMS)
def test_folded_lock_step_form_bounds_fully_connected(collective, name):
    for ranks in NOT_POWERS_OF_TWO:
        scenario = flat_scenario("fully_connected", ranks=ranks, collective=collective,
                                 algorithms=(name,), gpu=GpuSpec(reduce_bandwidth_Bps=2e11))
        for count in (1, 1000, 4099, 1 << 18):
            result = run_one(scenario, 4 * count)
            assert result.verified
            assert result.sim_time_s <= result.model_time_s * (1 + 1e-12)
            if (collective, name) == (Collective.ALLREDUCE, HD) and count % power_of_two_below(ranks) == 0:
                assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9)


def test_fold_hides_the_hand_back_on_fully_connected():
    # p = 3, recursive_doubling: rank 0 folds into 1; rank 2 is 1's only partner. c = alpha + n·beta,
    # g = launch + n·gamma. Rank 2 sends at t = 0 (arrives c); rank 1 has the hand-in at c,
    # reduces it (c + g), sends to 2 and reduces 2's waiting message (c + 2g), hands back
    # (arrives 2c + 2g); rank 2 gets 1's message at 2c + g and reduces it: 2c + 2g. The
    # lock-step form charges the steps one after another: 3c + 2g.
    latency, bandwidth, n = 1e-6, 10e9, 1_000_000
    c, g = latency + n / bandwidth, 2e-6 + n / 1e11
    scenario = flat_scenario("fully_connected", ranks=3, bandwidth=bandwidth, latency=latency,
                             algorithms=(RD,), gpu=GpuSpec(reduce_bandwidth_Bps=1e11,
                                                           launch_latency_s=2e-6))
    result = run_one(scenario, n)
    assert result.sim_time_s == pytest.approx(2 * c + 2 * g, rel=1e-12)
    assert result.model_time_s == pytest.approx(3 * c + 2 * g, rel=1e-12)


def test_fold_shares_the_folded_ranks_links_on_a_switch():
    # p = 3, recursive_doubling, no reduction cost; alpha = 2 links of L, n bytes, link rate B.
    # At t = alpha both rank 0's hand-in and rank 2's step message start into rank 1: its
    # downlink gives each B/2, both arrive at alpha + 2n/B. Rank 1 then posts its step message
    # to 2 and its hand-back to 0 at once: its uplink gives each B/2 from 2·alpha + 2n/B, so
    # both arrive at 2·alpha + 4n/B, against the lock-step 3·(alpha + n/B).
    latency, bandwidth, n = 1e-6, 10e9, 1_000_000
    alpha = 2 * latency
    scenario = flat_scenario("switch", ranks=3, bandwidth=bandwidth, latency=latency,
                             algorithms=(RD,))
    result = run_one(scenario, n)
    assert result.sim_time_s == pytest.approx(2 * alpha + 4 * n / bandwidth, rel=1e-12)
    assert result.model_time_s == pytest.approx(3 * (alpha + n / bandwidth), rel=1e-12)


def test_halving_doubling_on_a_ring_of_4():
    # Physical ring 0-1-2-3-0, links of B = 10 GB/s and L = 1 us per hop; n = 4 MB, q = 4 blocks
    # of n/4. Ties between the two 2-hop routes go to the smaller node name, so at distance 2:
    #   0→2 via 1 (links 0→1, 1→2)      2→0 via 1 (2→1, 1→0)
    #   1→3 via 0 (1→0, 0→3)            3→1 via 0 (3→0, 0→1)
    # Links 0→1 (0→2, 3→1) and 1→0 (2→0, 1→3) carry two flows each, the rest one: every flow
    # is held to B/2 on one shared link, all start together, so a distance-2 step of n/2 bytes
    # takes 2L + (n/2)/(B/2) = 2L + n/B. Distance 1 uses single cables: L + (n/4)/B.
    #   reduce-scatter: (2L + n/B) + g(n/2)  then  (L + n/4B) + g(n/4)
    #   allgather:      (L + n/4B)           then  (2L + n/B)
    # total 6L + 2.5·n/B + g(n/2) + g(n/4), with g(m) = 1 us + m / 100 GB/s. The closed form
    # assumes nothing is shared (B for every flow): 6L + 1.5·n/B + g(n/2) + g(n/4).
    latency, bandwidth, n = 1e-6, 10e9, 4_000_000
    gpu = GpuSpec(reduce_bandwidth_Bps=100e9, launch_latency_s=1e-6)
    g = gpu.reduce_s
    scenario = flat_scenario("ring", ranks=4, bandwidth=bandwidth, latency=latency,
                             algorithms=(HD,), gpu=gpu)
    result = run_one(scenario, n)
    assert result.verified
    assert result.sim_time_s == pytest.approx(6 * latency + 2.5 * n / bandwidth + g(n / 2) + g(n / 4),
                                              rel=1e-12)
    assert result.model_time_s == pytest.approx(6 * latency + 1.5 * n / bandwidth + g(n / 2) + g(n / 4),
                                                rel=1e-12)


def test_halving_doubling_on_a_ring_of_8():
    # Physical ring of 8, B = 10 GB/s, L = 5 us per hop, n = 20 kB: u = n/B = 2 us < L, so flows
    # that start a latency apart never meet; no reduction cost. Times below in L and u.
    #
    # RS d=4 (n/2 each, 4 hops, start 4L). Tie-breaks send 0→4 and 7→3 clockwise, the other six
    #   counter-clockwise; links 1→0, 2→1, 3→2 carry four flows each (1→5, 2→6, 3→7, 4→0 /
    #   2→6, 3→7, 4→0, 5→1 / 3→7, 4→0, 5→1, 6→2), so those six get B/4; 0→4 and 7→3 share
    #   0→1, 1→2, 2→3 and get B/2. Ranks 4 and 3 have their halves at 4L+1u, the rest at 4L+2u.
    # RS d=2 (n/4, 2 hops): 3→1 and 4→6 start at 6L+1u alone and land at 6L+1.25u. At 6L+2u the
    #   rest start: 2→0 and 5→7 alone (6L+2.25u); 0→2 & 1→3 share 1→2, 6→4 & 7→5 share 6→5
    #   (6L+2.5u). Done: r0 6L+2.25u, r1 4L+2u (its message waited), r2..r5 6L+2.5u,
    #   r6 4L+2u, r7 6L+2.25u.
    # RS d=1 (n/8, 1 hop, alone): 1↔0 and 6↔7 land at 5L+2.125u and 7L+2.375u; 2↔3 and 4↔5 at
    #   7L+2.625u. Done: r0, r7 6L+2.25u; r1, r6 7L+2.375u; r2..r5 7L+2.625u.
    # AG d=1 (n/8): r0 and r7 post theirs right behind their RS message on the same connection
    #   (it lands at 7L+2.5u); r1, r6 answer at 7L+2.375u (lands 8L+2.5u); 2↔3, 4↔5 at 8L+2.75u.
    #   Done: r0, r7 8L+2.5u; r1, r6 7L+2.5u; r2..r5 8L+2.75u.
    # AG d=2 (n/4): 1→3 and 6→4 start at 9L+2.5u, 0→2 and 7→5 at 10L+2.5u, alone (+0.25u);
    #   2→0 & 3→1 share 2→1 and 4→6 & 5→7 share 5→6 from 10L+2.75u (+0.5u). Done: r0, r1, r6,
    #   r7 10L+3.25u; r2, r5 10L+2.75u; r3, r4 9L+2.75u.
    # AG d=4 (n/2, routes as in RS d=4): 3→7 & 4→0 start at 13L+2.75u sharing three links
    #   (B/2, land 13L+3.75u). 2→6 & 5→1 start at 14L+2.75u sharing 2→1 (B/2); at 14L+3.25u,
    #   with n/4 left each, 0→4, 1→5, 6→2, 7→3 start: now every link carries at most two flows
    #   and every flow crosses one carrying two, so all run at B/2; 2→6, 5→1 land at 14L+3.75u
    #   and the other four keep B/2 (each still shares a link), landing at 14L+4.25u.
    # Total 14L + 4.25u = 78.5 us, against the unshared closed form 14L + 1.75u.
    latency, bandwidth, n = 5e-6, 10e9, 20_000
    u = n / bandwidth
    scenario = flat_scenario("ring", ranks=8, bandwidth=bandwidth, latency=latency,
                             algorithms=(HD,))
    result = run_one(scenario, n)
    assert result.verified
    assert result.sim_time_s == pytest.approx(14 * latency + 4.25 * u, rel=1e-12)
    assert result.model_time_s == pytest.approx(14 * latency + 1.75 * u, rel=1e-12)


def test_survivors_and_their_blocks():
    # p = 6: r = 2, ranks 0 and 2 fold into 1 and 3; survivors renumbered 1, 3, 4, 5 -> 0..3
    assert survivors(6) == [1, 3, 4, 5]
    assert survivors(8) == list(range(8))
    assert survivors(1) == [0]
    # survivor 0 (rank 1) carries chunks 0 and 1 of a 12-element buffer, and so on in order
    assert survivor_blocks(Span(0, 12), 6) == [Span(0, 4), Span(4, 8), Span(8, 10),
                                                Span(10, 12)]
    assert halves(Span(0, 7), 4) == [Span(0, 2), Span(2, 4), Span(4, 6), Span(6, 7)]


@pytest.mark.parametrize("ranks, messages", [(6, 2 + 4 * 2 + 2), (7, 3 + 4 * 2 + 3)])
def test_reduce_scatter_hands_folded_ranks_their_own_chunk(ranks, messages):
    scenario = flat_scenario("fully_connected", ranks=ranks, collective=Collective.REDUCE_SCATTER,
                             algorithms=(HD,), dtype=np.dtype("int64"))
    result = run_one(scenario, 8 * 1001)
    assert result.verified is True and result.max_abs_error == 0.0
    assert result.messages == messages


@pytest.mark.parametrize("ranks, messages", [(5, 1 + 4 * 2 + 1), (6, 2 + 4 * 2 + 3),
                                             (7, 3 + 4 * 2 + 5)])
def test_allgather_hands_back_the_buffer_around_the_folded_chunk(ranks, messages):
    # rank 0 gets one message back (everything after its chunk), ranks 2, 4, … two (before, after)
    scenario = flat_scenario("switch", ranks=ranks, collective=Collective.ALLGATHER,
                             algorithms=(RD,), dtype=np.dtype("int32"))
    result = run_one(scenario, 4 * 999)
    assert result.verified is True
    assert result.messages == messages


@pytest.mark.parametrize("nodes", [2, 3, 4])
def test_halving_doubling_runs_across_nodes_inside_hierarchical(nodes):
    # hierarchical runs the inter-node allreduce on a subgroup (one rank per node) over a piece
    # of the buffer; each rail has its own NICs, so with 2 or 4 nodes nothing is shared.
    scenario = flat_scenario(topology=dgx_topology(nodes, 4), algorithms=("hierarchical",),
                             algorithm_options=inter_options(HD), dtype=np.dtype("int32"))
    for size in (4 * 4 * nodes * 3, 1 << 20):
        result = run_one(scenario, size)
        assert result.verified is True
        if nodes != 3:
            assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9)


def test_chunk_size_overlaps_reductions_with_transfers():
    # a slow reducer: with 64 KiB pieces each piece is reduced while the next arrives
    gpu = GpuSpec(reduce_bandwidth_Bps=20e9)
    whole = run_one(flat_scenario("switch", ranks=8, algorithms=(RD,), gpu=gpu), 4 << 20)
    pieces = run_one(flat_scenario("switch", ranks=8, algorithms=(RD,), gpu=gpu,
                                   piece_bytes=1 << 16), 4 << 20)
    assert pieces.sim_time_s == pytest.approx(pieces.model_time_s, rel=1e-9)
    assert pieces.sim_time_s < 0.6 * whole.sim_time_s
