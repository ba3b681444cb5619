"""Tree algorithms: binomial_tree, tree (pipelined binary tree), double_binary_tree.

The tree shapes are tested on their own; the closed forms are exact on ``fully_connected`` (each
ordered pair has its own cable; the double tree's shared cables are a term of its formula) and
checked there over random grids; on ``switch`` and on a physical ``ring`` flows share links,
and small cases are worked out by hand. On two DGX nodes every hop is charged its own route's
alpha and beta (NVLink or network): exact where a rank's children sit on separate links, and
within a measured band of the simulation on two nodes of 8 GPUs.
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.algorithms import Collective, get_algorithm
from simulator.algorithms.binomial_tree import binomial_tree
from simulator.algorithms.comm import Comm
from simulator.algorithms.cost import pipeline_s, proportionate_pipeline_s
from simulator.algorithms.double_binary_tree import DoubleBinaryTreeAllreduce, double_binary_tree
from simulator.algorithms.phases.tree import TreeNode, broadcast_down_s, reduce_up_s
from simulator.algorithms.tree import TreeAllreduce, binary_tree, depth
from simulator.engine.payload import Payload
from simulator.engine.run import RunSpec, run_collective
from simulator.model.machine import GpuSpec, Machine
from simulator.model.reduction import ReduceOp
from simulator.model.topology import switch
from simulator.runner import prepare
from simulator.scenario import Scenario
from tests.conftest import dgx_topology, flat_scenario, run_one

ALL = [(Collective.ALLREDUCE, "binomial_tree"), (Collective.BROADCAST, "binomial_tree"),
       (Collective.REDUCE, "binomial_tree"), (Collective.ALLREDUCE, "tree"),
       (Collective.BROADCAST, "tree"), (Collective.REDUCE, "tree"),
       (Collective.ALLREDUCE, "double_binary_tree")]
RANKS = range(1, 41)


# --- the shapes ---------------------------------------------------------------------------------

def assert_spanning_tree(tree: list[TreeNode], root: int) -> None:
    """One parent for every rank but the root, children and parents agree, all reach the root."""
    p = len(tree)
    assert tree[root].parent is None
    for rank, node in enumerate(tree):
        assert (node.parent is None) == (rank == root)
        assert len(set(node.children)) == len(node.children)
        for child in node.children:
            assert 0 <= child < p and tree[child].parent == rank
        if node.parent is not None:
            assert rank in tree[node.parent].children
    assert sum(len(node.children) for node in tree) == p - 1
    for rank in range(p):
        assert depth(tree, rank) < p  # no cycle: the walk up ends at the root


@pytest.mark.parametrize("p", RANKS)
def test_binary_tree_spans_with_at_most_two_children_and_log_depth(p):
    for root in {0, 1 % p, p - 1}:
        tree = [binary_tree(r, p, root) for r in range(p)]
        assert_spanning_tree(tree, root)
        assert all(len(node.children) <= 2 for node in tree)
        assert max(depth(tree, r) for r in range(p)) == p.bit_length() - 1  # ⌊log2 p⌋


@pytest.mark.parametrize("p", RANKS)
def test_binary_tree_interior_ranks_are_the_even_in_order_positions(p):
    # rank r sits at position (r - root + 2^⌊log2 p⌋ - 1) mod p + 1; odd positions are leaves
    top = 1 << (p.bit_length() - 1)
    tree = [binary_tree(r, p) for r in range(p)]
    for rank, node in enumerate(tree):
        position = (rank + top - 1) % p + 1
        assert bool(node.children) == (position % 2 == 0)


@pytest.mark.parametrize("p", RANKS)
def test_binomial_tree_spans_and_parents_clear_the_lowest_bit(p):
    for root in {0, p // 2, p - 1}:
        tree = [binomial_tree(r, p, root) for r in range(p)]
        assert_spanning_tree(tree, root)
        for rank, node in enumerate(tree):
            v = (rank - root) % p
            if v:
                assert (node.parent - root) % p == v & (v - 1)
            distances = [(child - rank) % p for child in node.children]
            assert distances == sorted(distances) and all(d & (d - 1) == 0 for d in distances)
        assert max(depth(tree, r) for r in range(p)) == max(bin(v).count("1") for v in range(p))


@pytest.mark.parametrize("p", RANKS)
def test_double_binary_tree_both_span_and_no_rank_is_interior_twice(p):
    nodes = [double_binary_tree(r, p) for r in range(p)]
    first, second = [n[0] for n in nodes], [n[1] for n in nodes]
    assert_spanning_tree(first, 0)
    assert_spanning_tree(second, 1 % p)
    for one, two in nodes:
        assert not (one.children and two.children)
    if p > 1:  # the second tree is the first shifted by one rank
        for rank in range(p):
            shifted = first[(rank - 1) % p]
            assert second[rank].parent == (None if shifted.parent is None else (shifted.parent + 1) % p)
            assert second[rank].children == tuple((c + 1) % p for c in shifted.children)
    interior = sum(bool(one.children) + bool(two.children) for one, two in nodes)
    assert interior == 2 * (p // 2)  # ⌊p/2⌋ even positions per tree: all ranks but one if p is odd


def test_small_trees_by_hand():
    # p = 7: ranks 0..6 sit at in-order positions 4 5 6 7 1 2 3; position 4 over 2 and 6,
    # 2 over 1 and 3, 6 over 5 and 7 (the right child first)
    assert [binary_tree(r, 7) for r in range(7)] == [
        TreeNode(None, (2, 5)), TreeNode(2, ()), TreeNode(0, (3, 1)), TreeNode(2, ()), TreeNode(5, ()),
        TreeNode(0, (6, 4)), TreeNode(5, ())]
    assert [binomial_tree(r, 6) for r in range(6)] == [
        TreeNode(None, (1, 2, 4)), TreeNode(0, ()), TreeNode(0, (3,)), TreeNode(2, ()),
        TreeNode(0, (5,)), TreeNode(4, ())]


# --- the closed forms, exact where no link is shared --------------------------------------------

def _gpu(reduce_bandwidth: float | None, launch: float) -> GpuSpec:
    return GpuSpec(reduce_bandwidth_Bps=reduce_bandwidth, launch_latency_s=launch)


@settings(max_examples=120, deadline=None)
@given(algorithm=st.sampled_from(ALL), ranks=st.integers(1, 40), pieces=st.integers(1, 6),
       piece_elements=st.integers(1, 5000), extra=st.sampled_from([0, 0, 1, 2, 7]),
       pipelined=st.booleans(), bandwidth=st.sampled_from([1e9, 25e9, 450e9, 1e12]),
       latency=st.sampled_from([0.0, 1e-7, 5e-7, 1e-5]),
       reduce_bandwidth=st.sampled_from([None, None, 1e10, 1e11, 1.1e12, 5e12]),
       launch=st.sampled_from([0.0, 0.0, 2e-6]))
def test_closed_form_on_fully_connected(algorithm, ranks, pieces, piece_elements, extra, pipelined,
                                        bandwidth, latency, reduce_bandwidth, launch):
    # count = halves·pieces·piece_elements + 2·extra elements (per tree, for the double tree's
    # halves): with extra = 0 and chunk_size = piece_elements·4 the pieces are equal; else a last
    # partial piece of 2·extra elements follows them. Exact either way: the longest path through
    # the (stage, piece) grid takes the last piece's own times (tree._Grid). The double tree's
    # count is even: both halves cut into the same pieces.
    collective, name = algorithm
    halves = 2 if name == "double_binary_tree" else 1
    count = halves * pieces * piece_elements + 2 * extra
    scenario = flat_scenario("fully_connected", ranks=ranks, bandwidth=bandwidth, latency=latency,
                             collective=collective, algorithms=(name,),
                             piece_bytes=4 * piece_elements if pipelined else None,
                             gpu=_gpu(reduce_bandwidth, launch))
    result = run_one(scenario, 4 * count)
    assert result.verified is True
    assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9, abs=1e-18)


@pytest.mark.parametrize("algorithm", ALL)
@pytest.mark.parametrize("ranks", [2, 3, 8, 13, 32])
def test_closed_form_exact_on_fully_connected_at_default_pieces(algorithm, ranks):
    collective, name = algorithm
    scenario = flat_scenario("fully_connected", ranks=ranks, collective=collective,
                             algorithms=(name,), gpu=GpuSpec(reduce_bandwidth_Bps=1.1e12))
    for size in (4, 4000, 4 << 20):  # 1 element, 1 piece, 8 pieces of 512 KiB
        result = run_one(scenario, size)
        assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9)


@pytest.mark.parametrize("ranks", [1, 2, 4, 8, 16, 32])
def test_binomial_reduce_is_exact_on_a_switch_for_powers_of_two(ranks):
    # child r + 2^i finishes its subtree at i·(alpha + n·beta + g): its message reaches the
    # parent's downlink after the previous one has left it, so no two flows meet
    scenario = flat_scenario("switch", ranks=ranks, collective=Collective.REDUCE,
                             algorithms=("binomial_tree",), gpu=GpuSpec(reduce_bandwidth_Bps=1e11))
    for size in (4, 4000, 4 << 20):
        result = run_one(scenario, size)
        assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9)


@pytest.mark.parametrize("ranks", [2, 4, 8, 16, 32])
def test_binomial_is_the_textbook_formula_for_powers_of_two(ranks):
    # 2⌈log p⌉(alpha + n·beta) + ⌈log p⌉·n·gamma  (Thakur, Rabenseifner & Gropp 2005)
    n, alpha, beta, gamma, log_p = 8 << 20, 2 * 5e-7, 1 / 25e9, 1 / 1.1e12, ranks.bit_length() - 1
    scenario = flat_scenario("fully_connected", ranks=ranks, latency=2 * 5e-7,
                             algorithms=("binomial_tree",), gpu=GpuSpec(reduce_bandwidth_Bps=1.1e12))
    result = run_one(scenario, n)
    textbook = 2 * log_p * (alpha + n * beta) + log_p * n * gamma
    assert result.model_time_s == pytest.approx(textbook, rel=1e-12)
    assert result.sim_time_s == pytest.approx(textbook, rel=1e-9)


PERFECT = [3, 7, 15, 31]  # p = 2^(d+1) - 1: perfect binary trees of depth d


@pytest.mark.parametrize("ranks", PERFECT)
def test_overlapped_tree_is_one_pipeline_of_2d_stages_on_perfect_trees(ranks):
    # up and down overlapped, c·beta ≥ 2g: T = 2d·alpha + (2d + k - 1)·t + 2d·g, t = c·beta
    # (the sequential reduce, then broadcast took (k - 1)·t more)
    d, k, c, bandwidth, latency = ranks.bit_length() - 1, 8, 512 * 1024, 25e9, 5e-7
    alpha, t, g = latency, c / bandwidth, 2e-6 + c / 1.1e12
    scenario = flat_scenario("fully_connected", ranks=ranks, latency=latency, algorithms=("tree",),
                             gpu=_gpu(1.1e12, 2e-6))
    result = run_one(scenario, k * c)
    formula = 2 * d * alpha + (2 * d + k - 1) * t + 2 * d * g
    assert result.model_time_s == pytest.approx(formula, rel=1e-12)
    assert result.sim_time_s == pytest.approx(formula, rel=1e-9)


@pytest.mark.parametrize("ranks", PERFECT)
@pytest.mark.parametrize("k", [1, 2, 8])
def test_double_tree_is_its_trees_pipeline_or_its_shared_cables(ranks, k):
    # each tree carries n/2 = k pieces of c bytes: its pipeline 2d·alpha + (2d + k - 1)·t + 2d·g;
    # a pair that is an edge of both trees carries both halves over one cable: alpha + 2k·t
    d, c, bandwidth, latency = ranks.bit_length() - 1, 512 * 1024, 25e9, 5e-7
    alpha, t, g = latency, c / bandwidth, 2e-6 + c / 1.1e12
    scenario = flat_scenario("fully_connected", ranks=ranks, latency=latency,
                             algorithms=("double_binary_tree",), gpu=_gpu(1.1e12, 2e-6))
    result = run_one(scenario, 2 * k * c)
    formula = max(2 * d * alpha + (2 * d + k - 1) * t + 2 * d * g, alpha + 2 * k * t)
    assert result.model_time_s == pytest.approx(formula, rel=1e-12)
    assert result.sim_time_s == pytest.approx(formula, rel=1e-9)


@pytest.mark.parametrize("ranks", [2, 5, 12])
def test_tree_allreduce_is_its_reduce_plus_d_hops_down(ranks):
    # overlapped, the broadcast adds only the way down for the last piece: d·(alpha + c·beta)
    d, c = ranks.bit_length() - 1, 4000
    times = {}
    for collective in (Collective.ALLREDUCE, Collective.REDUCE):
        scenario = flat_scenario("fully_connected", ranks=ranks, bandwidth=1e9, latency=1e-6,
                                 collective=collective, algorithms=("tree",), piece_bytes=c,
                                 gpu=_gpu(1e10, 1e-7))
        times[collective] = run_one(scenario, 16 * c).sim_time_s
    down = d * (1e-6 + c / 1e9)
    assert times[Collective.ALLREDUCE] == pytest.approx(times[Collective.REDUCE] + down, rel=1e-9)


@pytest.mark.parametrize("kind, tree, double", [("fully_connected", 1.0, 1.0),
                                                ("switch", 3.0, 2.0)])
def test_large_buffers_approach_the_busiest_link(kind, tree, double):
    # 128 pieces per tree, no latency, free reductions; in units of n·beta the tree tends to
    # 1 on fully_connected (each cable carries n each way) and 3 on switch (an interior rank's
    # link carries its piece up and two down); the double tree to 1 (a cable both trees use)
    # and 2 (every rank's link carries 2n)
    ranks, n, piece = 7, 128 * 4000, 4000
    for name, expected, chunk in (("tree", tree, piece), ("double_binary_tree", double, piece // 2)):
        scenario = flat_scenario(kind, ranks=ranks, bandwidth=1e9, latency=0.0, algorithms=(name,),
                                 piece_bytes=chunk)
        result = run_one(scenario, n)
        assert result.sim_time_s / (n / 1e9) == pytest.approx(expected, rel=0.05)


def test_proportionate_pipeline_is_exact_where_pipeline_s_overestimates():
    # three link hops, pieces of 2, 1, 1 time units: Σ + (hops - 1)·max = 4 + 2·2 = 8 (+ delay);
    # charging every piece as the largest gives (3 + 3 - 1)·2 = 10
    assert proportionate_pipeline_s(1.0, 3, [2.0, 1.0, 1.0]) == 9.0
    assert pipeline_s(1.0, [2.0] * 3, 3) == 11.0
    assert proportionate_pipeline_s(1.0, 3, [2.0] * 3) == pipeline_s(1.0, [2.0] * 3, 3)
    assert proportionate_pipeline_s(0.5, 0, [2.0]) == 0.5


# --- where flows share links: small cases by hand ------------------------------------------------

def test_binomial_on_a_physical_ring_of_4():
    # ring(4), link 1 GB/s and 0.1 ms, n = 1 MB (t = n/B = 1 ms), g = n/10 GB/s = 0.1 ms.
    # Tree 0:(1, 2), 2:(3). Routes 2→0 = 2→1→0 and 0→2 = 0→1→2 (ties go to the lower name).
    # Reduce: 1→0 and 3→2 on their own links, [l, l+t]; 2 reduces, sends 2→0 over 2 hops,
    #   [3l+t+g, 3l+2t+g] (link 1→0 is free again); 0 reduces 1 then 2: T_red = 3l + 2t + 2g.
    # Broadcast: 0→1 starts at T_red + l alone; 0→2 joins link 0→1 at T_red + 2l, both at B/2:
    #   0→1 has t-l left, ends at T_red + 2l + 2(t-l) = T_red + 2t; 0→2 then has l left at full
    #   rate: T_red + 2t + l; 2→3 (own link): + l + t.
    # T = 3l + 2t + 2g + 3t + 2l = 5l + 5t + 2g = 5.7 ms. The contention-free form charges
    #   each hop its own route (1→0 one link, 2→0 two): reduce max(l + t + 2g, 3l + 2t + 2g),
    #   exactly the simulation's, broadcast (0→2) + (2→3) = 3l + 2t: 6l + 4t + 2g = 4.8 ms.
    hop, t, g = 1e-4, 1e-3, 1e-4
    scenario = flat_scenario("ring", ranks=4, bandwidth=1e9, latency=hop, algorithms=("binomial_tree",),
                             gpu=GpuSpec(reduce_bandwidth_Bps=1e10))
    result = run_one(scenario, 10**6)
    assert result.verified is True
    assert result.sim_time_s == pytest.approx(5 * hop + 5 * t + 2 * g, rel=1e-9)
    assert result.model_time_s == pytest.approx(6 * hop + 4 * t + 2 * g, rel=1e-9)


def test_binomial_on_a_physical_ring_of_8():
    # ring(8), 1 GB/s, zero latency, n = 1 MB (t = 1 ms), g = 0.1 ms.
    # Tree 0:(1, 2, 4), 2:(3), 4:(5, 6), 6:(7); routes 2→0 via 1, 6→4 via 5, 4→0 via 3, 2, 1.
    # Reduce: 1→0, 3→2, 5→4, 7→6 at [0, t]; 2 and 6 reduce, send over 2 hops at [t+g, 2t+g]
    #   (links 2→1, 1→0 and 6→5, 5→4, each free again); 4 reduces 5 then 6 (done 2t+2g), sends
    #   4→3→2→1→0 at [2t+2g, 3t+2g]; 0 reduces 1, 2, 4: T_red = 3t + 3g.
    # Broadcast: 0→1, 0→2 (via 1), 0→4 (via 1, 2, 3) all leave on link 0→1 at B/3: T_red + 3t.
    #   Then 2→3 (t) and 4→5, 4→6 (via 5) sharing link 4→5 at B/2: + 2t; then 6→7: + t.
    # T = 3t + 3g + 3t + 2t + t = 9t + 3g = 9.3 ms (contention-free form: 6t + 3g).
    t, g = 1e-3, 1e-4
    scenario = flat_scenario("ring", ranks=8, bandwidth=1e9, latency=0.0, algorithms=("binomial_tree",),
                             gpu=GpuSpec(reduce_bandwidth_Bps=1e10))
    result = run_one(scenario, 10**6)
    assert result.verified is True
    assert result.sim_time_s == pytest.approx(9 * t + 3 * g, rel=1e-9)
    assert result.model_time_s == pytest.approx(6 * t + 3 * g, rel=1e-9)


def test_binomial_broadcast_shares_the_senders_uplink_on_a_switch():
    # switch(4), 1 GB/s, 0.1 ms per link (alpha = 0.2 ms), n = 1 MB (t = 1 ms), g = 0.1 ms.
    # Reduce (a power of two: no two flows meet): 2α + 2t + 2g. Broadcast: 0 sends to 1 and 2
    # at once through its one uplink, both at B/2: α + 2t; then 2→3: α + t.
    # T = 4α + 5t + 2g (contention-free form: 4α + 4t + 2g).
    alpha, t, g = 2e-4, 1e-3, 1e-4
    scenario = flat_scenario("switch", ranks=4, bandwidth=1e9, latency=1e-4,
                             algorithms=("binomial_tree",), gpu=GpuSpec(reduce_bandwidth_Bps=1e10))
    result = run_one(scenario, 10**6)
    assert result.sim_time_s == pytest.approx(4 * alpha + 5 * t + 2 * g, rel=1e-9)
    assert result.model_time_s == pytest.approx(4 * alpha + 4 * t + 2 * g, rel=1e-9)


def test_overlapped_tree_on_a_switch_of_3_shares_the_roots_links():
    # switch(3), 1 GB/s, 1 us per link (alpha = 2 us); k = 4 pieces of 4000 B (t = 4 us),
    # g = 4000 B / 10 GB/s = 0.4 us. Tree 0:(1, 2).
    # Up: 1 and 2 stream their pieces into 0's one downlink at B/2 each: piece j of both arrives
    #   at alpha + 2(j+1)t; 0 reduces both (2g ≤ 2t keeps up) and turns piece j around at
    #   R_j = alpha + 2(j+1)t + 2g.
    # Down (0's uplink, not the downlink the pieces come up on): 0 sends piece j to 1 and 2 at
    #   B/2 each; posted every 2t and taking 2t each, they never queue: piece j lands at
    #   R_j + alpha + 2t. T = R_3 + alpha + 2t = 2alpha + 2(k+1)t + 2g = 44.8 us.
    # Model: the contention-free pipeline 2alpha + (k+1)t + 2g = 24.8 us, or the busiest link
    #   (0's uplink carries both children's n bytes): alpha + 2kt = 34 us; the larger, 34 us.
    alpha, t, g, k = 2e-6, 4e-6, 4e-7, 4
    scenario = flat_scenario("switch", ranks=3, bandwidth=1e9, latency=1e-6, algorithms=("tree",),
                             piece_bytes=4000, gpu=GpuSpec(reduce_bandwidth_Bps=1e10))
    result = run_one(scenario, k * 4000)
    assert result.sim_time_s == pytest.approx(2 * alpha + 2 * (k + 1) * t + 2 * g, rel=1e-9)
    assert result.model_time_s == pytest.approx(alpha + 2 * k * t, rel=1e-9)


def test_double_tree_on_a_switch_of_3():
    # switch(3), 1 GB/s, 1 us per link (alpha = 2 us); halves of 4000 B, one piece each
    # (t = 4 us), g = 0. Tree one 0:(1, 2); tree two 1:(2, 0); rank 2 is a leaf in both.
    # Up: 1→0 and 2→0 (tree one), 0→1 and 2→1 (tree two): 2's uplink and 0's and 1's
    #   downlinks each carry two of them, so all four run at B/2: alpha + 2t.
    # Down: 0→1, 0→2 and 1→2, 1→0: 0's and 1's uplinks and 2's downlink carry two each: + alpha + 2t.
    # T = 2alpha + 4t = 20 us. Model: each tree's pipeline 2alpha + 2t = 12 us, or the busiest
    #   link (0's uplink carries 0→1 up in tree two, 0→1 and 0→2 down in tree one):
    #   alpha + 3t = 14 us; the larger, 14 us.
    alpha, t = 2e-6, 4e-6
    scenario = flat_scenario("switch", ranks=3, bandwidth=1e9, latency=1e-6,
                             algorithms=("double_binary_tree",))
    result = run_one(scenario, 8000)
    assert result.sim_time_s == pytest.approx(2 * alpha + 4 * t, rel=1e-9)
    assert result.model_time_s == pytest.approx(alpha + 3 * t, rel=1e-9)


def test_double_tree_of_2_on_fully_connected_shares_its_one_cable():
    # fully_connected(2), 1 GB/s, alpha = 1 us; each half is k = 2 pieces of 4000 B (t = 4 us),
    # g = 0. Tree one: 0 over 1; tree two: 1 over 0. Cable 1→0 carries 1's half up (tree one)
    # and tree two's broadcast down; cable 0→1 the mirror image; take 1→0.
    # Up piece 0: [1, 5]; up piece 1 starts at 5 alone. Root 1 of tree two has its piece 0 at 5
    #   (the mirror), turns it around: down piece 0 starts at 6 and shares: up piece 1 has
    #   3000 B left at 0.5 GB/s, ends at 12; down piece 0 moved 3000 B by then, ends at 13.
    # Root 1 has its piece 1 at 12 (the mirror); down piece 1 waits for piece 0: [13, 17].
    # T = 17 us = alpha + n·beta: the cable carries both halves, never idle; the formula's
    #   busiest-link term, where each tree's pipeline alone is 2alpha + 3t = 14 us.
    scenario = flat_scenario("fully_connected", ranks=2, bandwidth=1e9, latency=1e-6,
                             algorithms=("double_binary_tree",), piece_bytes=4000)
    result = run_one(scenario, 16000)
    assert result.sim_time_s == pytest.approx(17e-6, rel=1e-9)
    assert result.model_time_s == pytest.approx(17e-6, rel=1e-9)


def test_double_tree_is_never_slower_than_its_model_at_half_bandwidth():
    # where the two trees share a cable, each of its two streams still gets half of it, so the
    # simulation is at most the contention-free time at half bandwidth. Even counts (equal
    # halves, the same pieces in both trees) meet the model exactly; with an odd count the two
    # trees' pieces differ (10 and 9 here) and interleave less tightly on the shared cables.
    for ranks, odd in ((5, 0), (6, 1), (11, 1), (16, 0)):
        count = 2 * 9 * 500 + odd
        results = []
        for bandwidth in (1e9, 0.5e9):
            scenario = flat_scenario("fully_connected", ranks=ranks, bandwidth=bandwidth,
                                     latency=1e-6, algorithms=("double_binary_tree",),
                                     piece_bytes=2000, gpu=GpuSpec(reduce_bandwidth_Bps=1e10))
            results.append(run_one(scenario, 4 * count))
        full, half = results
        assert full.sim_time_s <= half.model_time_s * (1 + 1e-9)
        if not odd:
            assert full.sim_time_s == pytest.approx(full.model_time_s, rel=1e-9)


# --- two DGX nodes: NVLink hops and network hops, each charged its own alpha and beta -----------
# dgx_topology: NVLink 400 GB/s with 2 x 0.3 us per GPU-to-GPU route inside a node; across nodes
# PCIe 50 GB/s and NIC 25 GB/s, 2 x 0.5 us + 2 x 1 us. Rank r sits on node r // gpus_per_node.

NVLINK_ALPHA, NVLINK_BPS, NETWORK_ALPHA, NETWORK_BPS = 6e-7, 400e9, 3e-6, 25e9
SHAPES = {"binomial_tree": binomial_tree, "tree": binary_tree}


def _dgx(gpus_per_node: int, collective: Collective, name: str, **fields) -> Scenario:
    return flat_scenario(topology=dgx_topology(2, gpus_per_node), collective=collective,
                         algorithms=(name,), **fields)


def _children_on_separate_links(tree: list[TreeNode], gpus_per_node: int) -> bool:
    """Every rank has at most one child on its own node (reached over its NVLink) and at most one
    on the other (over its PCIe link and NIC): then a broadcast's sends from one rank, or a
    reduction's pieces into it, never share a link (the leaf switch is non-blocking)."""
    for rank, node in enumerate(tree):
        local = sum(child // gpus_per_node == rank // gpus_per_node for child in node.children)
        if local > 1 or len(node.children) - local > 1:
            return False
    return True


SEPARATE_LINKS = {"binomial_tree": (1, 2), "tree": (1, 2)}
"""GPUs per node at which every rank's children sit on separate links, for p = 2·gpus_per_node
(from 3 GPUs a node some rank has two children on its own node: rank 0's 1 and 2 in the
binomial tree; in the binary tree rank 4's 3 and 5 at 3 GPUs a node, rank 2's 1 and 3 from 4,
rank 8's 7 and 9 at 5)."""


@pytest.mark.parametrize("name", SHAPES)
def test_which_dgx_shapes_keep_every_rank_s_children_on_separate_links(name):
    separate = [gpn for gpn in range(1, 9) if _children_on_separate_links(
        [SHAPES[name](r, 2 * gpn) for r in range(2 * gpn)], gpn)]
    assert tuple(separate) == SEPARATE_LINKS[name]


DGX_EXACT = ([(c, "binomial_tree", gpn) for c in (Collective.ALLREDUCE, Collective.BROADCAST,
                                                   Collective.REDUCE)
              for gpn in SEPARATE_LINKS["binomial_tree"]]
             + [(c, "tree", gpn) for c in (Collective.BROADCAST, Collective.REDUCE)
                for gpn in (*SEPARATE_LINKS["tree"], 5)]
             + [(Collective.ALLREDUCE, "tree", 1), (Collective.ALLREDUCE, "double_binary_tree", 1)])


@pytest.mark.parametrize("collective, name, gpus_per_node", DGX_EXACT)
def test_closed_form_exact_on_two_dgx_nodes_where_no_link_is_shared(collective, name, gpus_per_node):
    # a rank's children on separate links: no two flows meet (binomial allreduce: its reduce,
    # then its broadcast); p = 2 (one GPU per node): one network edge, up and down its two
    # directions (the double tree's two halves share it, its busiest-link term). Binary tree of
    # 10 (5 a node): rank 8's children 7 and 9 share its NVLink, at 200 GB/s each, but the
    # longest chain is 0-6-4-5 over three network hops, the others never slower than it.
    # Hops differ 16x in bandwidth and 5x in latency; one piece, or 4000 B pieces, the last
    # partial.
    for piece_bytes in (None, 4000):
        for gpu in (GpuSpec(), GpuSpec(reduce_bandwidth_Bps=1.1e12, launch_latency_s=2e-6)):
            scenario = _dgx(gpus_per_node, collective, name, piece_bytes=piece_bytes, gpu=gpu)
            for size in (4, 4000, 4 * 10007, 4 << 20):
                result = run_one(scenario, size)
                assert result.verified is True
                assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9), size


@pytest.mark.parametrize("gpus_per_node", [3, 4, 6, 8])
def test_binomial_reduce_of_one_piece_is_exact_on_two_dgx_nodes(gpus_per_node):
    # a rank's children may share its NVLink, but one after the other: child v + 2^i's subtree
    # holds a copy of child v + 2^(i-1)'s and a hop more, so it sends after that child's message
    # is in (as on a switch for powers of two); the network child comes over the NIC. Not at 5
    # or 7 GPUs a node, where two children of one rank send over the same link at once.
    scenario = _dgx(gpus_per_node, Collective.REDUCE, "binomial_tree", gpu=GpuSpec(1.1e12, 2e-6))
    for size in (4, 4000, 4 << 20, 1 << 30):
        result = run_one(scenario, size)
        assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9)


@pytest.mark.parametrize("collective", [Collective.BROADCAST, Collective.ALLREDUCE])
def test_binomial_on_two_dgx_nodes_of_8_shares_nvlink_in_the_broadcast(collective):
    # One piece of n bytes, t = n / 400 GB/s an NVLink hop, T = n / 25 GB/s the network hop.
    # Reduce (p = 16, a power of two): exact, no two messages meet (test above).
    # Broadcast: 0 sends to 8 over its NIC, which has it at a_net + T; 8 sends to 9, 10 and 12
    #   at once over its one NVLink: a third each, all in at a_nv + 3t; 12 to 13 and 14: a_nv +
    #   2t; 14 to 15: a_nv + t. Chain 0-8-12-14-15: a_net + T + 3·a_nv + 6t (node 0's side,
    #   0-4-6-7, takes 3·a_nv + 6t). The model charges each hop alone, a_net + T + 3·(a_nv + t),
    #   by the hop's own route (it charged every hop a_net + T before): short by 3t exactly.
    for n in (1 << 10, 4 << 20, 1 << 30):
        result = run_one(_dgx(8, collective, "binomial_tree", gpu=GpuSpec(1.1e12)), n)
        t, network = n / NVLINK_BPS, NETWORK_ALPHA + n / NETWORK_BPS
        assert result.sim_time_s - result.model_time_s == pytest.approx(3 * t, rel=1e-6)
        if collective is Collective.BROADCAST:
            assert result.model_time_s == pytest.approx(network + 3 * (NVLINK_ALPHA + t), rel=1e-12)


def _chains(tree: list[TreeNode]) -> list[list[int]]:
    """Every leaf's way up: the ranks from the leaf to the root."""
    chains = []
    for leaf in (r for r, node in enumerate(tree) if not node.children):
        chain = [leaf]
        while tree[chain[-1]].parent is not None:
            chain.append(tree[chain[-1]].parent)
        chains.append(chain)
    return chains


@pytest.mark.parametrize("name", SHAPES)
def test_closed_forms_are_the_slowest_chain_s_pipeline_with_its_own_hops(name):
    # k = 8 equal pieces of c = 512 KiB on two DGX nodes of 8: each hop h costs its own
    # alpha_h once and t_h = c·beta_h per piece, each engine (m - i)·g for the first piece from
    # its i-th of m children and m·g per further piece:
    #   broadcast: max over chains of pipeline_s(Σ alpha_h, [t_h], k)
    #   reduce:    max over chains of Σ alpha_h + Σ [t_h + (m - i)·g] + (k-1)·max(t_h, m·g)
    k, c, g = 8, 512 * 1024, 2e-6 + 512 * 1024 / 1.1e12
    cost = prepare(_dgx(8, Collective.REDUCE, name, gpu=GpuSpec(1.1e12, 2e-6))).cost
    tree = [SHAPES[name](r, 16) for r in range(16)]

    def hop(a: int, b: int) -> tuple[float, float]:
        return cost.alpha([(a, b)]), c * cost.beta([(a, b)])

    broadcast, reduce = [], []
    for chain in _chains(tree):
        hops = [hop(parent, child) for child, parent in itertools.pairwise(chain)]
        broadcast.append(pipeline_s(sum(a for a, _ in hops), [t for _, t in hops], k))
        first, slowest, alphas = 0.0, 0.0, 0.0
        for child, parent in itertools.pairwise(chain):
            siblings = tree[parent].children
            alpha, t = hop(child, parent)
            alphas += alpha
            first += t + (len(siblings) - siblings.index(child)) * g
            slowest = max(slowest, t, len(siblings) * g)
        reduce.append(alphas + first + (k - 1) * slowest)
    assert [cost.alpha([(0, 1)]), cost.alpha([(0, 8)])] == pytest.approx([NVLINK_ALPHA, NETWORK_ALPHA])
    assert broadcast_down_s(cost, tree, k * c // 4) == pytest.approx(max(broadcast), rel=1e-12)
    assert reduce_up_s(cost, tree, k * c // 4) == pytest.approx(max(reduce), rel=1e-12)


DGX_BAND = {  # sim / model on two DGX nodes of 8 GPUs at 1 KiB, 4 MiB and 1 GiB: measured, at most
    (Collective.ALLREDUCE, "binomial_tree"): (1.001, 1.075, 1.077),
    (Collective.BROADCAST, "binomial_tree"): (1.002, 1.155, 1.158),
    (Collective.ALLREDUCE, "tree"): (1.001, 1.158, 1.001),
    (Collective.BROADCAST, "tree"): (1.001, 1.014, 1.0002),
    (Collective.REDUCE, "tree"): (1.001, 1.014, 1.0002),
    (Collective.ALLREDUCE, "double_binary_tree"): (1.0005, 1.219, 1.001),
}


@pytest.mark.parametrize("collective, name", DGX_BAND)
def test_closed_form_within_a_band_on_two_dgx_nodes_of_8(collective, name):
    # What is left where links are shared (the model, every hop alone, is a lower bound):
    # - 1 KiB: latency-bound, the hops' alphas are the model's; shared links cost ns.
    # - binomial: the broadcast's sends to a rank's NVLink children share its NVLink: 3t more
    #   (test above), 7.6% of the allreduce and 15.8% of the broadcast at 1 GiB.
    # - tree broadcast, reduce: a rank with two children on its node shares its NVLink between
    #   them (200 GB/s each), but the network hop (25 GB/s) stays the slowest stage: only the
    #   pipeline's fill grows, 1.3% with 8 pieces (4 MiB), 0.01% with 2048 (1 GiB).
    # - tree, double tree allreduce: rank 8's NIC carries its piece up to 0 and down to 4 at
    #   once. The model is the larger of the pipeline (every hop alone) and the busiest link
    #   (alpha + 2n / 25 GB/s for the tree): at 1 GiB the busiest link, within 0.1%; at 4 MiB
    #   (8 pieces; 4 per half) the shared NIC slows the pipeline's fill as well, 16%.
    # - double tree (NCCL's across hosts: chains of 8, host 1 under host 0 and the mirror): each
    #   head's NIC carries one tree's half up and the other's down at once, n each way; 1 GiB
    #   is that busiest link within 0.1%, 4 MiB's fill 22% slower than every hop alone.
    # (Charging every hop the network's alpha and beta, the model was 0.4 to 0.8x the simulation
    # below 4 MiB, and 2.6x for binomial at 1 GiB.)
    scenario = _dgx(8, collective, name, gpu=GpuSpec(1.1e12))
    for size, band in zip((1 << 10, 4 << 20, 1 << 30), DGX_BAND[collective, name], strict=True):
        result = run_one(scenario, size)
        assert 1 - 1e-9 <= result.sim_time_s / result.model_time_s <= band, size


# --- composition and bookkeeping ---------------------------------------------------------------

@pytest.mark.parametrize("algorithm", [TreeAllreduce(), DoubleBinaryTreeAllreduce(),
                                       get_algorithm(Collective.ALLREDUCE, "binomial_tree")])
def test_allreduce_runs_on_a_subgroup_over_part_of_the_buffer(algorithm):
    # ranks 0, 2, 4 and 1, 3, 5 each allreduce the second half of their buffers
    class Halves(type(algorithm)):
        def program(self, comm: Comm):
            half = comm.chunks(2)[1]
            sub = comm.subgroup(range(comm.rank % 2, comm.size, 2), half)
            yield from algorithm.program(sub)

    ranks, count = 6, 40
    graph = switch(ranks, 1e9, 1e-6)
    buffers = np.arange(ranks * count, dtype=np.int64).reshape(ranks, count)
    inputs = buffers.copy()
    run_collective(Halves(), Machine.of(graph),
                   RunSpec(Payload(count, count, np.dtype("int64")), ReduceOp.SUM, piece_bytes=24),
                   buffers)
    for rank in range(ranks):
        group = inputs[rank % 2::2]
        assert (buffers[rank, :20] == inputs[rank, :20]).all()
        assert (buffers[rank, 20:] == group[:, 20:].sum(axis=0)).all()


@pytest.mark.parametrize("algorithm, messages", [
    ((Collective.ALLREDUCE, "binomial_tree"), 2 * 12), ((Collective.BROADCAST, "binomial_tree"), 12),
    ((Collective.REDUCE, "binomial_tree"), 12), ((Collective.ALLREDUCE, "tree"), 2 * 12 * 8),
    ((Collective.BROADCAST, "tree"), 12 * 8), ((Collective.REDUCE, "tree"), 12 * 8),
    ((Collective.ALLREDUCE, "double_binary_tree"), 2 * 2 * 12 * 4)])
def test_every_tree_edge_carries_each_piece_once_each_way(algorithm, messages):
    # p = 13: 12 edges per tree; 4 MiB = 8 pieces of 512 KiB (4 per half for the double tree)
    collective, name = algorithm
    result = run_one(flat_scenario("switch", ranks=13, collective=collective, algorithms=(name,)),
                     4 << 20)
    assert result.messages == messages


@pytest.mark.parametrize("algorithm", ALL)
def test_single_rank_is_a_trivial_run(algorithm):
    collective, name = algorithm
    result = run_one(flat_scenario("switch", ranks=1, collective=collective, algorithms=(name,)),
                     1 << 20)
    assert (result.sim_time_s, result.model_time_s, result.messages) == (0.0, 0.0, 0)
    assert result.verified is True


@pytest.mark.parametrize("algorithm", ALL)
def test_registered_under_their_public_names(algorithm):
    collective, name = algorithm
    assert get_algorithm(collective, name).name == name
    assert get_algorithm(collective, name).collective is collective
