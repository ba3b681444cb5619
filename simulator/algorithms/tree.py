"""Pipelined binary tree (NCCL's tree): reduce up the tree and broadcast down it, piece by piece.

The tree is the in-order binary tree of Sanders, Speck & Träff, "Two-tree algorithms for full
bandwidth broadcast, reduction and scan", Parallel Computing 35(12), 2009, which NCCL also builds
(``ncclGetBtree`` in src/graph/trees.cc; NVIDIA blog "Massively Scale Your Deep Learning Training
with NCCL 2.4", 2019): number the tree positions 1..p in order; position x with lowest set bit 2^h
sits at height h, so odd positions are the leaves and even positions are interior. Ranks take
the positions cyclically from the root's, so that rank 0 is the root (for p a power of two this
is NCCL's tree: rank 0 on top of ranks 1..p-1). The buffer moves in pieces of ``PIPELINE_BYTES``
(or the scenario's ``piece_size``), so the levels of the tree work on different pieces at once.

The programs and their closed forms are the tree phases of
:mod:`simulator.algorithms.phases.tree`; this module holds the tree's shape.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.algorithms.algorithm import Algorithm, ExactOn
from simulator.algorithms.comm import Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import Footprint
from simulator.algorithms.phases.tree import (
    TreeNode,
    broadcast_down,
    broadcast_down_s,
    busiest_link_s,
    edge_pairs,
    reduce_up,
    reduce_up_s,
    reduction_height,
    tree_allreduce,
    tree_allreduce_s,
    tree_footprint,
    tree_of,
    tree_schedule,
)
from simulator.algorithms.schedule import Group, Schedule
from simulator.model.collective import ROOT, Collective
from simulator.model.machine import Layout
from simulator.model.nccl import NcclAlgorithm
from simulator.model.nccl_point import NcclBinding

_FULLY_CONNECTED = (ExactOn("fully_connected"),)
"""Every tree edge is its own cable there, its two directions carrying up and down traffic."""

# ---------------------------------------------------------------------------------------------
# The shape: an in-order binary tree on positions 1..m, placed on ranks


def _lowbit(x: int) -> int:
    return x & -x


def _inorder_root(m: int) -> int:
    """The root of positions 1..m: the largest power of two ≤ m (the highest level)."""
    return 1 << (m.bit_length() - 1)


def _inorder_children(x: int, m: int) -> tuple[int, ...]:
    """Children of position x among 1..m, the right (smaller) subtree first.

    The left child x - 2^(h-1) roots the perfect subtree x-2^h+1..x-1; the right subtree
    x+1..min(x+2^h-1, m) is rooted at its highest position, x + the largest power of two
    ≤ min(2^(h-1), m - x).
    """
    half = _lowbit(x) >> 1
    if half == 0:
        return ()  # odd position: a leaf
    step = half
    while step and x + step > m:
        step >>= 1
    return ((x + step,) if step else ()) + (x - half,)


def _inorder_parent(x: int, m: int) -> int | None:
    """Parent of position x among 1..m: its parent in the infinite in-order tree (x ± 2^h,
    whichever is an odd multiple of 2^(h+1)), or, when that lies beyond m, that node's parent,
    and so on (x then roots the truncated right subtree of the first ancestor within 1..m)."""
    if x == _inorder_root(m):
        return None
    while True:
        bit = _lowbit(x)
        x = x + bit if (x // bit) % 4 == 1 else x - bit
        if x <= m:
            return x


def binary_tree(rank: int, p: int, root: int = ROOT) -> TreeNode:
    """``rank``'s node in the in-order binary tree over ranks 0..p-1 whose root is ``root``.

    Rank r sits at position ((r - root + R - 1) mod p) + 1, R = 2^⌊log2 p⌋ the root position,
    so ``root`` is the root and the other ranks follow it cyclically. Depth ⌊log2 p⌋; every
    rank has at most two children.

    >>> [binary_tree(r, 8) for r in (0, 4, 2, 1)]  # doctest: +NORMALIZE_WHITESPACE
    [TreeNode(parent=None, children=(4,)), TreeNode(parent=0, children=(6, 2)),
     TreeNode(parent=4, children=(3, 1)), TreeNode(parent=2, children=())]
    """
    top = _inorder_root(p)

    def position(r: int) -> int:
        return (r - root + top - 1) % p + 1

    def rank_at(x: int) -> int:
        return (x - top + root) % p

    x = position(rank)
    parent = _inorder_parent(x, p)
    return TreeNode(None if parent is None else rank_at(parent),
                    tuple(rank_at(child) for child in _inorder_children(x, p)))


def depth(tree: Sequence[TreeNode], rank: int) -> int:
    """Hops from ``rank`` up to the root of ``tree``."""
    hops, parent = 0, tree[rank].parent
    while parent is not None:
        hops, parent = hops + 1, tree[parent].parent
    return hops


# ---------------------------------------------------------------------------------------------
# The algorithms


class TreeAllreduce(Algorithm):
    """Pipelined binary-tree allreduce as NCCL's tree runs it: every rank reduces up and
    broadcasts down at once (two channels), the root turning each piece around as soon as it
    is reduced, on the in-order binary tree (depth d = ⌊log2 p⌋), k pieces of c bytes.

    T = max(:func:`tree_allreduce_s`, :func:`busiest_link_s`): the pipeline up a leaf's chain
    and down another, each hop at its own alpha_h and beta_h; and the busiest link,
    alpha + n·(most tree edges on one link / its bandwidth). On a perfect tree of equal hops
    with c·beta ≥ 2g (g = launch + c·gamma) the pipeline is

        2d·alpha + (2d + k - 1)·c·beta + 2d·g,

    i.e. n·beta plus a 2d-stage pipeline fill.

    On ``fully_connected`` a parent-child pair's up and down traffic use the two directions of
    one cable, no link is shared and T is the pipeline, exactly (pieces of any sizes). On
    ``switch`` an interior rank's uplink carries its piece up and two down (3n bytes, its
    downlink likewise), which the second term bounds; the simulation is slower than both while
    the pipeline fills. On two DGX nodes the network hops set the pipeline's pace and a rank
    with a network edge up and one down carries both on its NIC (2n bytes, the second term).
    Sources: Sanders, Speck & Träff 2009; NCCL ``runTreeSplit`` (src/device/all_reduce.h).
    """

    name = "tree"
    collective = Collective.ALLREDUCE
    nccl = NcclBinding(NcclAlgorithm.TREE)
    exact_on = _FULLY_CONNECTED
    composable = True

    def program(self, comm: Comm) -> Program:
        yield from tree_allreduce(comm, binary_tree(comm.rank, comm.size), comm.buffer)

    def schedule(self, group: Group) -> Schedule:
        return tree_schedule(group, tree_of(binary_tree, group.size), group.buffer)

    def reduction_depth(self, layout: Layout) -> int:
        """The tree's :func:`~simulator.algorithms.phases.tree.reduction_height`: an interior
        rank adds two children one after the other, so up to 2·⌊log2 p⌋."""
        return reduction_height(tree_of(binary_tree, len(layout.hosts)))

    def footprint(self, group: Group) -> Footprint:
        return tree_footprint(group, tree_of(binary_tree, group.size), group.buffer)

    def model_s(self, cost: CostInputs, count: int) -> float:
        tree = tree_of(binary_tree, cost.ranks)
        return max(tree_allreduce_s(cost, tree, count),
                   busiest_link_s(cost, edge_pairs(tree), cost.nbytes(count)))


class TreeBroadcast(Algorithm):
    """Pipelined binary-tree broadcast from the root: T = d·alpha + (d + k - 1)·c·beta,
    d = ⌊log2 p⌋, on equal hops; the longest root-to-leaf chain of hops at their own alpha_h and
    beta_h in general (:func:`broadcast_down_s`; exact on ``fully_connected`` for any pieces, and
    wherever a rank's two children are reached over different links)."""

    name = "tree"
    collective = Collective.BROADCAST
    nccl = NcclBinding(NcclAlgorithm.TREE)
    exact_on = _FULLY_CONNECTED

    def program(self, comm: Comm) -> Program:
        yield from broadcast_down(comm, binary_tree(comm.rank, comm.size), comm.buffer)

    def schedule(self, group: Group) -> Schedule:
        return tree_schedule(group, tree_of(binary_tree, group.size), group.buffer, up=False)

    def footprint(self, group: Group) -> Footprint:
        return tree_footprint(group, tree_of(binary_tree, group.size), group.buffer, up=False)

    def model_s(self, cost: CostInputs, count: int) -> float:
        return broadcast_down_s(cost, tree_of(binary_tree, cost.ranks), count)


class TreeReduce(Algorithm):
    """Pipelined binary-tree reduce to the root: :func:`reduce_up_s`, the longest leaf-to-root
    chain of hops (each at its own alpha_h and beta_h) and reductions; on a perfect tree of equal
    hops with c·beta ≥ 2g: d·alpha + d·(c·beta + 2g) + (k-1)·c·beta (exact on ``fully_connected``
    for any pieces, and wherever a rank's two children reach it over different links)."""

    name = "tree"
    collective = Collective.REDUCE
    nccl = NcclBinding(NcclAlgorithm.TREE)
    exact_on = _FULLY_CONNECTED

    def program(self, comm: Comm) -> Program:
        yield from reduce_up(comm, binary_tree(comm.rank, comm.size), comm.buffer)

    def schedule(self, group: Group) -> Schedule:
        return tree_schedule(group, tree_of(binary_tree, group.size), group.buffer, down=False)

    def reduction_depth(self, layout: Layout) -> int:
        """The tree's :func:`~simulator.algorithms.phases.tree.reduction_height`: an interior
        rank adds two children one after the other, so up to 2·⌊log2 p⌋."""
        return reduction_height(tree_of(binary_tree, len(layout.hosts)))

    def footprint(self, group: Group) -> Footprint:
        return tree_footprint(group, tree_of(binary_tree, group.size), group.buffer, down=False)

    def model_s(self, cost: CostInputs, count: int) -> float:
        return reduce_up_s(cost, tree_of(binary_tree, cost.ranks), count)
