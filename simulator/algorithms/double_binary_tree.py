"""Double binary tree (NCCL ≥ 2.4): two complementary binary trees, each carrying half the data.

Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth broadcast, reduction and scan",
Parallel Computing 35(12), 2009; NVIDIA blog "Massively Scale Your Deep Learning Training with
NCCL 2.4" (2019). In one binary tree half the ranks are leaves, which only send up and receive
down, so half of their link capacity idles. The second tree is the first shifted by one rank: a
rank at in-order position x (1..p) in the first sits at x - 1 (cyclically) in the second, so
the odd (leaf) positions of one tree are the even (interior) positions of the other, and every
rank is interior in at most one tree. (NCCL mirrors the tree for even p; the shift serves every
p here because the tree fills all positions 1..p.) Each tree runs the pipelined tree allreduce
on half of the buffer, both at once, each on its own channels as NCCL gives each tree its own.
"""

from __future__ import annotations

from simulator.algorithms.algorithm import Algorithm, ExactOn
from simulator.algorithms.comm import Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.phases.tree import (
    TreeNode,
    busiest_link_s,
    edge_pairs,
    tree_allreduce,
    tree_allreduce_s,
    tree_of,
    tree_schedule,
)
from simulator.algorithms.schedule import Group, Schedule
from simulator.algorithms.tree import binary_tree
from simulator.model.collective import ROOT, Collective
from simulator.model.nccl import NcclAlgorithm
from simulator.model.span import Span


def double_binary_tree(rank: int, p: int) -> tuple[TreeNode, TreeNode]:
    """``rank``'s nodes in the two trees: the in-order binary tree rooted at rank 0, and the same
    tree shifted by one rank (rooted at rank 1), so rank r plays in the second tree the part
    rank r-1 plays in the first.

    >>> double_binary_tree(0, 4)
    (TreeNode(parent=None, children=(2,)), TreeNode(parent=3, children=()))
    """
    return binary_tree(rank, p, ROOT), binary_tree(rank, p, (ROOT + 1) % p)


class DoubleBinaryTreeAllreduce(Algorithm):
    """Double-binary-tree allreduce: for each of the two trees, in parallel, the pipelined tree
    allreduce (reduce up and broadcast down overlapped, :func:`tree_allreduce`) of my half.

    T = max(max over the two trees of :func:`~simulator.algorithms.phases.tree.tree_allreduce_s` for
    its half, :func:`~simulator.algorithms.phases.tree.busiest_link_s` of both trees' edges): with n/2
    bytes in k pieces of c bytes per tree, on a perfect tree with c·beta ≥ 2g the first is
    2d·alpha + (2d + k - 1)·c·beta + 2d·g, d = ⌊log2 p⌋, about half the single tree's.

    A rank reduces in one tree only, so the trees never queue on one reducer. Their
    messages meet where a pair is an edge of both trees (about p/4 pairs, for every p ≥ 2: a leaf
    of one tree whose parent is its child in the other). On ``fully_connected`` such a cable
    carries the leaf's half up and the other tree's half down, n bytes each way, so T is the
    larger of the pipeline and alpha + n·beta: the pipeline while the leaf's pieces have left
    before the other tree's broadcast reaches the pair (always with one piece per tree), then
    n·beta, no faster than the single tree. Exact there for an even count, both halves cut
    into the same pieces (of any sizes; checked over random grids);
    with an odd count the two trees' pieces differ and their streams interleave less tightly on
    the shared cables, up to a few % slower. On ``switch`` every rank sends and receives 2n
    bytes through its one link (an interior rank of the single tree 3n), so the simulation
    tends to 2n·beta from above, the formula's busiest-link term there (p ≥ 4).
    """

    name = "double_binary_tree"
    collective = Collective.ALLREDUCE
    nccl_family = NcclAlgorithm.TREE
    nccl_kernel = True
    exact_on = (ExactOn("fully_connected"),)

    def program(self, comm: Comm) -> Program:
        trees, halves = double_binary_tree(comm.rank, comm.size), comm.chunks(2)
        yield comm.parallel(*(tree_allreduce(comm.on_channel(comm.channel + 2 * i), node, half)
                              for i, (node, half) in enumerate(zip(trees, halves, strict=True))))

    def schedule(self, group: Group) -> Schedule:
        nodes = tree_of(double_binary_tree, group.size)  # per rank, its node in either tree
        halves = group.buffer.split(2)
        return Schedule.concat([tree_schedule(group, [pair[i] for pair in nodes], halves[i])
                                for i in range(2)])

    def model_s(self, cost: CostInputs, count: int) -> float:
        nodes = tree_of(double_binary_tree, cost.ranks)  # per rank, its node in either tree
        trees = ([first for first, _ in nodes], [second for _, second in nodes])
        halves = Span(0, count).split(2)
        pipeline = max(tree_allreduce_s(cost, tree, half.count)
                       for tree, half in zip(trees, halves, strict=True))
        busiest = busiest_link_s(cost, edge_pairs(trees[0]) + edge_pairs(trees[1]),
                                 cost.nbytes(halves[0].count))
        return max(pipeline, busiest)
