"""Binomial tree: the MPI classic reduce and broadcast, and allreduce as one then the other.

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in MPICH",
IJHPCA 19(1), 2005, §4 (binomial-tree broadcast and reduce). Relative to the root, rank v's
parent is v with its lowest set bit cleared; its children are v + 2^i for every 2^i below that
bit (below p for the root). In round i of the reduce, the ranks with lowest set bit 2^i send to
their parent; the broadcast runs the rounds backwards. Depth = the most set bits of any v < p
(⌈log2 p⌉ when p is a power of two).

The whole buffer moves as one message (pieces only when the scenario sets ``piece_size``).
"""

from __future__ import annotations

from simulator.algorithms.algorithm import Algorithm, ExactOn
from simulator.algorithms.comm import Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import Footprint
from simulator.algorithms.phases.tree import (
    TreeNode,
    broadcast_down,
    broadcast_down_s,
    reduce_up,
    reduce_up_s,
    reduction_height,
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
"""Every tree edge is its own cable there."""


def binomial_tree(rank: int, p: int, root: int = ROOT) -> TreeNode:
    """``rank``'s node in the binomial tree over ranks 0..p-1 rooted at ``root``; children
    nearest first (the order of the reduce's rounds, smallest subtree first).

    >>> [binomial_tree(r, 8) for r in (0, 4, 6)]  # doctest: +NORMALIZE_WHITESPACE
    [TreeNode(parent=None, children=(1, 2, 4)), TreeNode(parent=0, children=(5, 6)),
     TreeNode(parent=4, children=(7,))]
    """
    v = (rank - root) % p
    below = v & -v if v else p
    children, step = [], 1
    while step < below and v + step < p:
        children.append((v + step + root) % p)
        step <<= 1
    return TreeNode(None if v == 0 else ((v & (v - 1)) + root) % p, tuple(children))


class BinomialTreeAllreduce(Algorithm):
    """Binomial-tree reduce to rank 0, then binomial-tree broadcast back (Thakur et al. 2005).

    T = 2⌈log2 p⌉·(alpha + n·beta) + ⌈log2 p⌉·(n·gamma + launch) when p is a power of two and
    the hops are equal. In general T = reduce + broadcast, each the longest chain of the tree
    with every hop h at its own alpha_h + n·beta_h (:func:`~simulator.algorithms.phases.tree.reduce_up_s`,
    where a rank reduces its children's messages one after the other, nearest first;
    :func:`~simulator.algorithms.phases.tree.broadcast_down_s`); on two DGX nodes a chain crosses the
    network at most once (ranks fall towards the root), its other hops are NVLink. Exact on
    ``fully_connected`` and on two DGX nodes of one or two GPUs. Not where a rank's messages to
    its children leave together over one link (its uplink on ``switch``, its NVLink on a DGX
    node), nor on a physical ``ring``, where routes overlap; for p not a power of two,
    children's messages may also meet on their parent's downlink.
    """

    name = "binomial_tree"
    collective = Collective.ALLREDUCE
    nccl = NcclBinding(NcclAlgorithm.TREE)
    exact_on = _FULLY_CONNECTED

    def program(self, comm: Comm) -> Program:
        node = binomial_tree(comm.rank, comm.size)
        yield from reduce_up(comm, node, comm.buffer, default_bytes=None)
        yield from broadcast_down(comm, node, comm.buffer, default_bytes=None)

    def schedule(self, group: Group) -> Schedule:
        tree = tree_of(binomial_tree, group.size)
        return Schedule.sequence(
            [tree_schedule(group, tree, group.buffer, None, down=False),
             tree_schedule(group, tree, group.buffer, None, up=False)],
            group.ranks)

    def reduction_depth(self, layout: Layout) -> int:
        """The tree's :func:`~simulator.algorithms.phases.tree.reduction_height`: ⌈log2 p⌉."""
        return reduction_height(tree_of(binomial_tree, len(layout.hosts)))

    def footprint(self, group: Group) -> Footprint:
        tree = tree_of(binomial_tree, group.size)
        phases = [tree_footprint(group, tree, group.buffer, None, down=False),
                  tree_footprint(group, tree, group.buffer, None, up=False)]
        return Footprint.joined(phases, ends=group.size if group.size > 1 else 0)

    def model_s(self, cost: CostInputs, count: int) -> float:
        tree = tree_of(binomial_tree, cost.ranks)
        return (reduce_up_s(cost, tree, count, default_bytes=None)
                + broadcast_down_s(cost, tree, count, default_bytes=None))


class BinomialTreeBroadcast(Algorithm):
    """Binomial-tree broadcast from the root: every rank receives, then sends to all its
    children at once. T = depth·(alpha + n·beta), depth = ⌈log2 p⌉ for p a power of two, on
    equal hops; in general the longest root-to-leaf chain of hops at their own alpha_h + n·beta_h
    (:func:`~simulator.algorithms.phases.tree.broadcast_down_s`). Exact on ``fully_connected`` and
    wherever a rank's children are reached over different links (two DGX nodes of one or two
    GPUs); on ``switch`` the sends share the sender's uplink."""

    name = "binomial_tree"
    collective = Collective.BROADCAST
    nccl = NcclBinding(NcclAlgorithm.TREE)
    exact_on = _FULLY_CONNECTED

    def program(self, comm: Comm) -> Program:
        yield from broadcast_down(comm, binomial_tree(comm.rank, comm.size), comm.buffer,
                                  default_bytes=None)

    def schedule(self, group: Group) -> Schedule:
        return tree_schedule(group, tree_of(binomial_tree, group.size), group.buffer, None,
                             up=False)

    def footprint(self, group: Group) -> Footprint:
        return tree_footprint(group, tree_of(binomial_tree, group.size), group.buffer, None,
                              up=False)

    def model_s(self, cost: CostInputs, count: int) -> float:
        return broadcast_down_s(cost, tree_of(binomial_tree, cost.ranks), count,
                                default_bytes=None)


class BinomialTreeReduce(Algorithm):
    """Binomial-tree reduce to the root: T = ⌈log2 p⌉·(alpha + n·beta + n·gamma + launch) for
    p a power of two on equal hops (then exact on ``switch`` too: no two messages meet); in
    general the longest chain of :func:`~simulator.algorithms.phases.tree.reduce_up_s`, each hop at its
    own alpha_h + n·beta_h, exact on ``fully_connected`` and, with one piece, on two DGX nodes
    whenever a rank's children on one link send one after the other (1, 2, 3, 4, 6 or 8 GPUs
    per node; not 5 or 7, where two children of one rank send over the same link at once)."""

    name = "binomial_tree"
    collective = Collective.REDUCE
    nccl = NcclBinding(NcclAlgorithm.TREE)
    exact_on = _FULLY_CONNECTED

    def program(self, comm: Comm) -> Program:
        yield from reduce_up(comm, binomial_tree(comm.rank, comm.size), comm.buffer,
                             default_bytes=None)

    def schedule(self, group: Group) -> Schedule:
        return tree_schedule(group, tree_of(binomial_tree, group.size), group.buffer, None,
                             down=False)

    def reduction_depth(self, layout: Layout) -> int:
        """The tree's :func:`~simulator.algorithms.phases.tree.reduction_height`: ⌈log2 p⌉."""
        return reduction_height(tree_of(binomial_tree, len(layout.hosts)))

    def footprint(self, group: Group) -> Footprint:
        return tree_footprint(group, tree_of(binomial_tree, group.size), group.buffer, None,
                              down=False)

    def model_s(self, cost: CostInputs, count: int) -> float:
        return reduce_up_s(cost, tree_of(binomial_tree, cost.ranks), count, default_bytes=None)
