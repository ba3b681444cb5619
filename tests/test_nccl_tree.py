"""NCCL's Tree across hosts (double_binary_tree on several hosts): the ranks' parents and children
as NCCL's connect.cc builds them, worked by hand; the run verified; its latency NCCL's own Tree
formula; its closed form against the simulation; and the two-node tree's network traffic."""

from __future__ import annotations

import pytest

from simulator.algorithms import REGISTRY
from simulator.algorithms.double_binary_tree import nccl_trees, trees_of
from simulator.algorithms.phases.tree import TreeNode
from simulator.model.collective import Collective
from simulator.model.execution import system_of
from simulator.model.machine import Layout
from simulator.model.nccl import NcclAlgorithm, Protocol, latency_us, predicted_time_us
from simulator.plan import prepare
from simulator.scenario.parse import scenario_from_dict
from tests.conftest import dgx_topology, flat_scenario, run_one

TREE = REGISTRY[Collective.ALLREDUCE]["double_binary_tree"]

N = None
# Every rank's (parent, children) in tree 0 and tree 1, worked by hand from src/graph/connect.cc
# (ncclTopoPreset: chain treeIntra[0] → [1] → ...; treeToParent = [0], treeToChild0 = [1],
# treeToChild1 = [0] for the balanced pattern; connectTrees: setTreeUp to the parent host's
# child0 or child1 rank by the slot this host fills, setTreeDown appends the child hosts' heads)
# and trees.cc (ncclGetDtree; tests/test_host_tree.py's BY_HAND).
BY_HAND = {
    # 2 hosts of 2 (ranks 0 1 | 2 3). Tree 0: host 0 → host 1 in slot down1 (the head, rank 0);
    # tree 1, the mirror: host 1 → host 0, rank 0 under rank 2.
    (2, 2): ([(N, (1, 2)), (0, ()), (0, (3,)), (2, ())],
             [(2, (1,)), (0, ()), (N, (3, 0)), (2, ())]),
    # 3 hosts of 2 (0 1 | 2 3 | 4 5). Tree 0: 0 → 2 (down1: at rank 0) → 1 (down0: at rank 5);
    # tree 1, shifted: 1 → 0 (down1: at rank 2) → 2 (down0: at rank 1).
    (3, 2): ([(N, (1, 4)), (0, ()), (5, (3,)), (2, ()), (0, (5,)), (4, (2,))],
             [(2, (1,)), (0, (4,)), (N, (3, 0)), (2, ()), (1, (5,)), (4, ())]),
    # 4 hosts of 3 (0 1 2 | 3 4 5 | 6 7 8 | 9 10 11). Tree 0: 0 → 2 (at 0); 2 → 1 (at 7), 3 (at 6).
    # Tree 1 (mirror): 3 → 1 (at 9); 1 → 2 (at 4), 0 (at 3).
    (4, 3): ([(N, (1, 6)), (0, (2,)), (1, ()), (7, (4,)), (3, (5,)), (4, ()),
              (0, (7, 9)), (6, (8, 3)), (7, ()), (6, (10,)), (9, (11,)), (10, ())],
             [(3, (1,)), (0, (2,)), (1, ()), (9, (4, 0)), (3, (5, 6)), (4, ()),
              (4, (7,)), (6, (8,)), (7, ()), (N, (10, 3)), (9, (11,)), (10, ())]),
    # 3 hosts of 1 (0 | 1 | 2): the host trees themselves, 0 → 2 → 1 and 1 → 0 → 2.
    (3, 1): ([(N, (2,)), (2, ()), (0, (1,))], [(1, (2,)), (N, (0,)), (0, ())]),
}


@pytest.mark.parametrize("hosts, local", sorted(BY_HAND))
def test_every_ranks_parent_and_children_are_nccls(hosts, local):
    layout = Layout(tuple(h for h in range(hosts) for _ in range(local)))
    for tree, expected in zip(nccl_trees(layout), BY_HAND[hosts, local], strict=True):
        assert list(tree) == [TreeNode(parent, children) for parent, children in expected]


@pytest.mark.parametrize("hosts, local", [(2, 8), (3, 4), (5, 2), (8, 8), (13, 3)])
def test_both_trees_span_every_rank_and_cross_hosts_only_between_chain_heads(hosts, local):
    layout = Layout(tuple(h for h in range(hosts) for _ in range(local)))
    for tree in nccl_trees(layout):
        assert sum(node.parent is None for node in tree) == 1
        for rank, node in enumerate(tree):
            assert all(tree[child].parent == rank for child in node.children)
            assert len(node.children) <= 3  # NCCL_MAX_TREE_ARITY
            if node.parent is not None and node.parent // local != rank // local:
                assert rank % local == 0 and node.parent % local in (0, 1)  # a head, to g0 or g1
        # NCCL's latency counts ppn-1 NVLink and log2(nNodes) network hops each way; a host
        # reached through its parent's second GPU adds that one NVLink hop (g1 → g0)
        depth = max(_depth(tree, rank) for rank in range(len(tree)))
        assert depth <= (local - 1) + 2 * (hosts - 1).bit_length()


def test_a_channel_rotates_the_chains_so_its_network_links_leave_other_gpus():
    # channel c runs over Layout.channel_order(c): each host's chain starts at its c-th GPU
    layout = Layout((0, 0, 0, 0, 1, 1, 1, 1))
    order = layout.channel_order(1)  # (1, 2, 3, 0, 5, 6, 7, 4)
    tree = nccl_trees(layout.subgroup(order))[0]
    heads = {order[rank] for rank, node in enumerate(tree)
             if node.parent is not None and order[node.parent] // 4 != order[rank] // 4}
    assert heads == {5}  # host 1's chain head on channel 1 is its GPU 1 (rank 5)


def test_one_host_keeps_the_rank_level_double_binary_tree():
    first, second = trees_of(Layout((0,) * 4))
    assert first[0] == TreeNode(None, (2,)) and second[1] == TreeNode(None, (3,))


@pytest.mark.parametrize("nodes, local", [(2, 4), (3, 2), (4, 3), (5, 1)])
@pytest.mark.parametrize("size", [4, 4096 + 12, 3 << 20])
def test_the_tree_across_hosts_is_verified(nodes, local, size):
    scenario = flat_scenario(topology=dgx_topology(nodes, local),
                             algorithms=("double_binary_tree",))
    result = run_one(scenario, size)
    assert result.verified is True
    # the closed form is the larger of the pipeline alone and the busiest link: a lower bound
    assert result.model_time_s <= result.sim_time_s * (1 + 1e-9)


def _h100(nodes: int, size: str, **extra: object) -> dict:
    return {"topology": {"preset": "dgx_h100", "nodes": nodes}, "algorithms": ["double_binary_tree"],
            "sizes": [size], **extra}


def test_a_small_message_takes_nccls_tree_latency_across_two_dgx_h100():
    # Tree/LL at 8 B: base 6.8 µs + 2·((8-1)·0.6 µs NVLink + log2(2)·5.0 µs NET) = 25.2 µs, the
    # chain up each host, one network hop, and back down (tuning.cc); 24.7 µs measured
    # (docs/reference/nccl-tests-h100-2node-ib.csv).
    scenario = scenario_from_dict(_h100(2, "8B", protocol="LL"))
    result = run_one(scenario, 8)
    machine = prepare(scenario, select=False).machine
    system = system_of(machine)
    assert latency_us(system, NcclAlgorithm.TREE, Protocol.LL) == pytest.approx(25.2)
    nccl = predicted_time_us(system, NcclAlgorithm.TREE, Protocol.LL, 8)
    assert result.sim_time_s * 1e6 == pytest.approx(nccl, abs=0.01)


def test_on_two_hosts_each_network_link_carries_one_half_each_way():
    # Two hosts of one GPU over one 25 GB/s link each way: tree 0 sends the first half up
    # (host 1 → 0) and down (0 → 1), tree 1 the second half the other way round, so each
    # direction carries n bytes: 1 GiB takes n / 25 GB/s and the latencies, half a ring's 2n.
    scenario = flat_scenario(topology=dgx_topology(2, 1), algorithms=("double_binary_tree",))
    result = run_one(scenario, 1 << 30)
    nic = 25e9
    assert result.sim_time_s == pytest.approx((1 << 30) / nic, rel=2e-3)
    assert result.model_time_s == pytest.approx(result.sim_time_s, rel=2e-3)


def _depth(tree: tuple[TreeNode, ...], rank: int) -> int:
    hops, parent = 0, tree[rank].parent
    while parent is not None:
        hops, parent = hops + 1, tree[parent].parent
    return hops
