"""Double binary tree (NCCL ≥ 2.4): two complementary binary trees, each carrying half the data.

Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth broadcast, reduction and scan",
Parallel Computing 35(12), 2009; NVIDIA blog "Massively Scale Your Deep Learning Training with
NCCL 2.4" (2019). In one binary tree half the ranks are leaves, which only send up and receive
down, so half of their link capacity idles. The second tree is the first shifted by one rank: a
rank at in-order position x (1..p) in the first sits at x - 1 (cyclically) in the second, so
the odd (leaf) positions of one tree are the even (interior) positions of the other, and every
rank is interior in at most one tree. (NCCL mirrors the tree for even p; the shift serves every
p here because the tree fills all positions 1..p.) Each tree reduces and broadcasts half of the
buffer, pipelined, both at once.
"""

from __future__ import annotations

from simulator.collective import ROOT, Collective
from simulator.collectives.base import Algorithm
from simulator.collectives.tree import (
    Node,
    binary_tree,
    broadcast_down,
    broadcast_down_s,
    reduce_up,
    reduce_up_s,
)
from simulator.costmodel import CostInputs
from simulator.program import Chunk, Comm, Program


def double_binary_tree(rank: int, p: int) -> tuple[Node, Node]:
    """``rank``'s nodes in the two trees: the in-order binary tree rooted at rank 0, and the same
    tree shifted by one rank (rooted at rank 1), so rank r plays in the second tree the part
    rank r-1 plays in the first.

    >>> double_binary_tree(0, 4)
    (Node(parent=None, children=(2,)), Node(parent=3, children=()))
    """
    return binary_tree(rank, p, ROOT), binary_tree(rank, p, (ROOT + 1) % p)


class DoubleBinaryTreeAllreduce(Algorithm):
    """Double-binary-tree allreduce: each tree runs the pipelined tree allreduce
    (reduce up, then broadcast down) on its half of the buffer, concurrently.

    T = max over the two trees of [reduce_up_s + broadcast_down_s] for its half (n/2 bytes in
    k pieces of c bytes): on a perfect tree with c·beta ≥ 2g,
    2d·alpha + (2d + 2k - 2)·c·beta + 2d·g with k·c = n/2, d = ⌊log2 p⌋ — half the tree's
    bandwidth term, since each half crosses each link once each way.

    A rank is a leaf in one tree: it posts that half's pieces up at once (they never wait), then
    does its interior work in the other tree, up then down, then collects the leaf tree's result.
    A rank reduces in one tree only, so the two trees never queue on one reduction engine; the
    pairs that are parent and child in both trees join two leaves, whose leaf traffic is over
    before the other tree's broadcast reaches them. Exact on ``fully_connected`` (equal pieces);
    on ``switch`` a rank's sends in the two trees share its uplink.
    """

    name = "double_binary_tree"
    collective = Collective.ALLREDUCE

    def program(self, me: int, comm: Comm) -> Program:
        roles = list(zip(double_binary_tree(me, comm.size), comm.chunks(2), strict=True))
        roles.sort(key=lambda role: bool(role[0].children))  # the tree I am a leaf in first
        for node, half in roles:
            yield from reduce_up(me, comm, node, half)
        for node, half in reversed(roles):
            yield from broadcast_down(me, comm, node, half)

    def model_time(self, cost: CostInputs, count: int) -> float:
        p = cost.ranks
        trees = ([binary_tree(r, p, ROOT) for r in range(p)],
                 [binary_tree(r, p, (ROOT + 1) % p) for r in range(p)])
        halves = Chunk(0, count).split(2)
        return max(reduce_up_s(cost, tree, half.count) + broadcast_down_s(cost, tree, half.count)
                   for tree, half in zip(trees, halves, strict=True))
