"""Double binary tree (NCCL ≥ 2.4): two complementary binary trees, each carrying half the data.

Sanders, Speck & Träff, "Two-tree algorithms for full bandwidth broadcast, reduction and scan",
Parallel Computing 35(12), 2009; NVIDIA blog "Massively Scale Your Deep Learning Training with
NCCL 2.4" (2019). In one binary tree half the ranks are leaves, which only send up and receive
down, so half of their link capacity idles; a second tree in which those ranks are interior
carries the other half of the buffer. Each tree runs the pipelined tree allreduce on its half,
both at once, each on its own channels as NCCL gives each tree its own.

Which trees, depends on where the ranks sit:

- **Across hosts: NCCL's Tree** (:func:`nccl_trees`), as NVIDIA/nccl builds it (read at v2.30.7,
  commit 5067397c). Inside each host the GPUs form a chain (``ncclTopoPreset`` in
  src/graph/connect.cc: ``tree.up = treeIntra[i-1]``, ``tree.down[0] = treeIntra[i+1]``);
  across hosts the chains' heads join NCCL's double binary tree over the hosts
  (``ncclGetDtree`` of src/graph/trees.cc, :func:`~simulator.algorithms.host_tree.double_host_tree`;
  ``connectTrees`` in connect.cc): a host's parent link leaves from its chain's first GPU, and a
  child host attaches to the second GPU of its parent's chain (``down0``) or to the first
  (``down1``), the ``NCCL_TOPO_PATTERN_BALANCED_TREE`` that src/init.cc asks the search for
  (ASSUMED to be what the search finds on the presets: no published log prints the tree
  graph's pattern, and the simulator's tuner assumes it too, ``Graph.plain_tree`` False. A
  reading of search.cc suggests that from SM90, with a NIC per GPU, the search falls back to
  ``NCCL_TOPO_PATTERN_TREE`` before it relaxes the path type, which attaches every child host
  at g0 and costs Tree 15 % of its rated bandwidth; ``NCCL_DEBUG_SUBSYS=GRAPH`` would settle
  it). Tree 0
  and tree 1 share the chain: NCCL copies channel c to channel c + nChannels and gives the
  copy the second tree. Under ``execution: nccl`` every channel's chain starts at another GPU
  (:meth:`~simulator.model.machine.Layout.channel_order`), so its network links leave through
  another NIC.
- **On one host** (the flat topologies, one NVSwitch): the rank-level trees of the paper, the
  in-order binary tree rooted at rank 0 and the same tree shifted by one rank (rooted at rank 1),
  so that the odd (leaf) positions of one are the even (interior) positions of the other and
  every rank is interior in at most one. NCCL itself runs a chain through one host's GPUs;
  its tuner never picks Tree there on the presets (docs/fidelity.md), and the paper's tree is
  kept for what it is.
"""

from __future__ import annotations

import functools
import itertools

from simulator.algorithms.algorithm import Algorithm, ExactOn
from simulator.algorithms.comm import Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import Footprint
from simulator.algorithms.host_tree import double_host_tree
from simulator.algorithms.phases.tree import (
    TreeNode,
    busiest_link_s,
    edge_pairs,
    reduction_height,
    tree_allreduce,
    tree_allreduce_s,
    tree_footprint,
    tree_schedule,
)
from simulator.algorithms.schedule import Group, Schedule
from simulator.algorithms.tree import binary_tree
from simulator.model.collective import ROOT, Collective
from simulator.model.machine import Layout
from simulator.model.nccl import NcclAlgorithm
from simulator.model.nccl_point import NcclBinding
from simulator.model.span import Span

Trees = tuple[tuple[TreeNode, ...], tuple[TreeNode, ...]]
"""The two trees, each as every rank's node in it."""


def double_binary_tree(rank: int, p: int) -> tuple[TreeNode, TreeNode]:
    """``rank``'s nodes in the two rank-level trees: the in-order binary tree rooted at rank 0,
    and the same tree shifted by one rank (rooted at rank 1), so rank r plays in the second tree
    the part rank r-1 plays in the first.

    >>> double_binary_tree(0, 4)
    (TreeNode(parent=None, children=(2,)), TreeNode(parent=3, children=()))
    """
    return binary_tree(rank, p, ROOT), binary_tree(rank, p, (ROOT + 1) % p)


def nccl_trees(layout: Layout) -> Trees:
    """NCCL's two trees over the ranks of ``layout``'s hosts: a chain through each host's ranks
    (in their order), and NCCL's double binary tree across the hosts between the chains' heads.

    For host n with chain g0 → g1 → … (g0 nearest the network), in tree t with host node
    ``double_host_tree(n, N)[t]``: g0's parent is the parent host's g1 if n fills its
    ``down0`` slot, its g0 if n fills ``down1`` (g0 in both where the host has one rank); a
    rank's children are its chain successor first, then the heads of the child hosts it
    serves, ``down0`` before ``down1`` (NCCL's ``down[]`` order). On one host both trees are
    the chain.

    >>> first, second = nccl_trees(Layout((0, 0, 1, 1)))  # 2 hosts of 2: 0 → 1, 2 → 3
    >>> first[2], first[0], second[0]  # doctest: +NORMALIZE_WHITESPACE
    (TreeNode(parent=0, children=(3,)), TreeNode(parent=None, children=(1, 2)),
     TreeNode(parent=2, children=(1,)))
    """
    return _nccl_trees(layout.host_groups)


@functools.lru_cache(maxsize=64)
def _nccl_trees(hosts: tuple[tuple[int, ...], ...]) -> Trees:
    ranks = sum(len(chain) for chain in hosts)
    built = []
    for tree in range(2):
        parent: list[int | None] = [None] * ranks
        children: list[list[int]] = [[] for _ in range(ranks)]
        for chain in hosts:
            for above, below in itertools.pairwise(chain):
                parent[below] = above
                children[above].append(below)
        for host, chain in enumerate(hosts):
            node = double_host_tree(host, len(hosts))[tree]
            if node.parent is not None:
                parent[chain[0]] = _attach(hosts[node.parent])[node.child_slot]
            for slot, child in enumerate((node.down0, node.down1)):
                if child is not None:
                    children[_attach(chain)[slot]].append(hosts[child][0])
        built.append(tuple(TreeNode(parent[r], tuple(children[r])) for r in range(ranks)))
    return built[0], built[1]


def _attach(chain: tuple[int, ...]) -> tuple[int, int]:
    """Where a host's child hosts attach (``treeToChild0``, ``treeToChild1`` of connect.cc): the
    balanced tree's second and first GPU of the chain (the first twice on a host of one)."""
    return (chain[1] if len(chain) > 1 else chain[0]), chain[0]


def trees_of(layout: Layout) -> Trees:
    """The two trees this algorithm runs over ``layout``'s ranks: NCCL's across several hosts
    (:func:`nccl_trees`), the rank-level double binary tree on one."""
    if layout.host_count > 1:
        return nccl_trees(layout)
    nodes = [double_binary_tree(rank, len(layout.hosts)) for rank in range(len(layout.hosts))]
    return tuple(first for first, _ in nodes), tuple(second for _, second in nodes)


class DoubleBinaryTreeAllreduce(Algorithm):
    """Double-binary-tree allreduce: for each of the two trees (:func:`trees_of`), in parallel,
    the pipelined tree allreduce (reduce up and broadcast down overlapped, :func:`tree_allreduce`)
    of my half.

    T = max(max over the two trees of :func:`~simulator.algorithms.phases.tree.tree_allreduce_s` for
    its half, :func:`~simulator.algorithms.phases.tree.busiest_link_s` of both trees' edges): with n/2
    bytes in k pieces of c bytes per tree, on a perfect tree with c·beta ≥ 2g the first is
    2d·alpha + (2d + k - 1)·c·beta + 2d·g, d the tree's depth.

    Across hosts, for L ranks a host, a piece climbs its host's chain (L - 1 NVLink hops), then
    one network hop per level of the host tree, plus one NVLink hop (g1 → g0) at each host it
    enters through the second GPU: the structure of NCCL's own Tree latency,
    2·((ppn - 1)·intraLat + log2(nNodes)·interLat) (tuning.cc), each hop charged its own
    latency and rate. On two hosts the two trees
    are one host under the other and its mirror, each host's network link carrying one half up
    and the other down: n bytes each way, half a ring's, the ×2 NCCL's tuner gives Tree on two
    nodes. Where the two trees' halves cross one link in opposite tree directions (every
    network link on two hosts) the busiest-link term bounds the pipeline; the simulation lies
    between the two (tests/test_nccl_tree.py), so across hosts the closed form is an estimate.

    On one host (the rank-level trees) a rank reduces in one tree only, so the trees never queue
    on one reducer. Their messages meet where a pair is an edge of both trees (about p/4 pairs,
    for every p ≥ 2: a leaf of one tree whose parent is its child in the other). On
    ``fully_connected`` such a cable carries the leaf's half up and the other tree's half down,
    n bytes each way, so T is the larger of the pipeline and alpha + n·beta: the pipeline while
    the leaf's pieces have left before the other tree's broadcast reaches the pair (always with
    one piece per tree), then n·beta, no faster than the single tree. Exact there for an even
    count, both halves cut into the same pieces (of any sizes; checked over random grids); with
    an odd count the two trees' pieces differ and their streams interleave less tightly on the
    shared cables, up to a few % slower. On ``switch`` every rank sends and receives 2n bytes
    through its one link (an interior rank of the single tree 3n), so the simulation tends to
    2n·beta from above, the formula's busiest-link term there (p ≥ 4).
    """

    name = "double_binary_tree"
    collective = Collective.ALLREDUCE
    nccl = NcclBinding(NcclAlgorithm.TREE, kernel=True)
    exact_on = (ExactOn("fully_connected"),)

    def program(self, comm: Comm) -> Program:
        trees, halves = trees_of(comm.layout), comm.chunks(2)
        yield comm.parallel(*(tree_allreduce(comm.on_channel(comm.channel + 2 * i), tree[comm.rank],
                                             half)
                              for i, (tree, half) in enumerate(zip(trees, halves, strict=True))))

    def schedule(self, group: Group) -> Schedule:
        trees, halves = trees_of(group.layout), group.buffer.split(2)
        return Schedule.concat([tree_schedule(group, trees[i], halves[i]) for i in range(2)])

    def reduction_depth(self, layout: Layout) -> int:
        """The taller of its two trees' :func:`~simulator.algorithms.phases.tree.reduction_height`
        (each half is reduced up one tree)."""
        return max(reduction_height(tree) for tree in trees_of(layout))

    def footprint(self, group: Group) -> Footprint:
        trees, halves = trees_of(group.layout), group.buffer.split(2)
        return Footprint.joined([tree_footprint(group, trees[i], halves[i]) for i in range(2)])

    def model_s(self, cost: CostInputs, count: int) -> float:
        trees, halves = trees_of(cost.layout), Span(0, count).split(2)
        pipeline = max(tree_allreduce_s(cost, tree, half.count)
                       for tree, half in zip(trees, halves, strict=True))
        busiest = busiest_link_s(cost, edge_pairs(trees[0]) + edge_pairs(trees[1]),
                                 cost.nbytes(halves[0].count))
        return max(pipeline, busiest)
