"""Pipelined binary tree (NCCL's tree): reduce up the tree and broadcast down it, piece by piece.

The tree is the in-order binary tree of Sanders, Speck & Träff, "Two-tree algorithms for full
bandwidth broadcast, reduction and scan", Parallel Computing 35(12), 2009, which NCCL also builds
(``ncclGetBtree`` in src/graph/trees.cc; NVIDIA blog "Massively Scale Your Deep Learning Training
with NCCL 2.4", 2019): number the tree positions 1..p in order; position x with lowest set bit 2^h
sits at height h, so odd positions are the leaves and even positions are interior. Ranks take
the positions cyclically from the root's, so that rank 0 is the root (for p a power of two this
is NCCL's tree: rank 0 on top of ranks 1..p-1). The buffer moves in pieces of ``PIPELINE_BYTES``
(or the scenario's ``chunk_size``), so the levels of the tree work on different pieces at once.

The programs are the tree phases of :mod:`~simulator.collectives.phases`; this module holds the
tree's shape and the closed forms of those phases, which binomial_tree and double_binary_tree
reuse.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.collective import ROOT, Collective
from simulator.collectives.base import Algorithm
from simulator.collectives.phases import (
    PIPELINE_BYTES,
    Node,
    broadcast_down,
    reduce_up,
    tree_allreduce,
)
from simulator.costmodel import CostInputs, proportionate_pipeline_s
from simulator.program import Comm, Program

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


def binary_tree(rank: int, p: int, root: int = ROOT) -> Node:
    """``rank``'s node in the in-order binary tree over ranks 0..p-1 whose root is ``root``.

    Rank r sits at position ((r - root + R - 1) mod p) + 1, R = 2^⌊log2 p⌋ the root position,
    so ``root`` is the root and the other ranks follow it cyclically. Depth ⌊log2 p⌋; every
    rank has at most two children.

    >>> [binary_tree(r, 8) for r in (0, 4, 2, 1)]  # doctest: +NORMALIZE_WHITESPACE
    [Node(parent=None, children=(4,)), Node(parent=0, children=(6, 2)),
     Node(parent=4, children=(3, 1)), Node(parent=2, children=())]
    """
    top = _inorder_root(p)

    def position(r: int) -> int:
        return (r - root + top - 1) % p + 1

    def rank_at(x: int) -> int:
        return (x - top + root) % p

    x = position(rank)
    parent = _inorder_parent(x, p)
    return Node(None if parent is None else rank_at(parent),
                tuple(rank_at(child) for child in _inorder_children(x, p)))


def depth(tree: Sequence[Node], rank: int) -> int:
    """Hops from ``rank`` up to the root of ``tree``."""
    hops = 0
    while tree[rank].parent is not None:
        rank, hops = tree[rank].parent, hops + 1
    return hops


# ---------------------------------------------------------------------------------------------
# Closed forms of the tree phases. Every hop is a pipeline stage (a link: c·beta per piece of
# c bytes, alpha once), every interior rank's reduction engine another (g = launch + c·gamma per
# piece and child); copies are free. Exact where no two flows share a link (`fully_connected`).


def _piece_bytes(cost: CostInputs, count: int, unset_bytes: int | None) -> list[int]:
    """Bytes of the pieces ``comm.pieces`` cuts ``count`` elements into (the larger first)."""
    return [cost.nbytes(piece) for piece in cost.pieces(count, unset_bytes)]


def _up(tree: Sequence[Node]) -> list[tuple[int, int]]:
    """(child, parent) for every edge of the tree: the pairs of the reduction."""
    return [(r, node.parent) for r, node in enumerate(tree) if node.parent is not None]


def _down(tree: Sequence[Node]) -> list[tuple[int, int]]:
    """(parent, child) for every edge of the tree: the pairs of the broadcast."""
    return [(parent, child) for child, parent in _up(tree)]


def edge_pairs(tree: Sequence[Node]) -> list[tuple[int, int]]:
    """Both directions of every edge of the tree: the pairs an allreduce over it uses."""
    return _up(tree) + _down(tree)


def _height(tree: Sequence[Node]) -> int:
    return max(depth(tree, r) for r in range(len(tree)))


def _longest_chain_s(cost: CostInputs, tree: Sequence[Node], k: int, c: int,
                     down_hops: int = 0) -> float:
    """Longest chain of the reduction pipeline from a leaf to the root, then ``down_hops`` hops
    back down, for k pieces of c bytes.

    From leaf to root a piece crosses hop after hop (t = c·beta, alpha once each); the hop from
    v's i_v-th child (0-based, of m_v) enters v's engine with m_v - i_v reductions still to do for
    that piece; the way down is hops of t' = c·beta' each. Every further piece costs the chain's
    slowest stage, a hop or an engine reducing m_v pieces:

        T(chain) = hops·alpha + Σ_hops [t + (m_v - i_v)·g] + down_hops·(alpha' + t')
                   + (k-1)·max(t, t', max_v m_v·g),

    the flow-shop makespan of identical pieces along the chain; T = max over leaves (the longest
    path of the max-plus system the engine runs).
    """
    up, down = _up(tree), _down(tree)
    alpha, t, g = cost.alpha(up), c * cost.beta(up), cost.reduce_s(c)
    way_down, slowest_down = 0.0, 0.0
    if down_hops:
        slowest_down = c * cost.beta(down)
        way_down = down_hops * (cost.alpha(down) + slowest_down)
    worst = 0.0
    for leaf, node in enumerate(tree):
        if node.children:
            continue
        hops, first_piece, slowest, rank = 0, 0.0, max(t, slowest_down), leaf
        while tree[rank].parent is not None:
            parent = tree[rank].parent
            siblings = tree[parent].children
            hops += 1
            first_piece += t + (len(siblings) - siblings.index(rank)) * g
            slowest = max(slowest, len(siblings) * g)
            rank = parent
        worst = max(worst, hops * alpha + first_piece + way_down + (k - 1) * slowest)
    return worst


def _links_only_s(cost: CostInputs, pairs: list[tuple[int, int]], hops: int,
                  pieces: list[int]) -> float:
    """A pipeline of ``hops`` links (the worst of ``pairs``), pieces of any sizes:
    hops·alpha + Σ_j c_j·beta + (hops-1)·c_max·beta (proportionate flow shop)."""
    beta = cost.beta(pairs)
    return proportionate_pipeline_s(hops * cost.alpha(pairs), hops, [c * beta for c in pieces])


def reduce_up_s(cost: CostInputs, tree: Sequence[Node], count: int,
                unset_bytes: int | None = PIPELINE_BYTES) -> float:
    """Closed form of :func:`~simulator.collectives.phases.reduce_up` over ``tree`` (one Node per
    rank): the longest leaf-to-root chain of hops and reductions (:func:`_longest_chain_s`),
    d·alpha + d·(c·beta + 2g) + (k-1)·c·beta on a perfect binary tree with c·beta ≥ 2g.

    Exact on ``fully_connected`` for equal pieces; pieces that differ by one element are charged
    as the largest, an upper bound (by under 0.5% for pieces of 50 elements or more), except when
    reductions are free (g = 0): then the chain is d links and the proportionate flow-shop
    makespan d·alpha + Σ_j c_j·beta + (d-1)·c_max·beta is exact for any pieces. On ``switch`` two
    children share their parent's downlink, so the simulation is slower than this.
    """
    if len(tree) == 1:
        return 0.0
    pieces = _piece_bytes(cost, count, unset_bytes)
    if cost.reduce_s(max(pieces)) == 0:
        return _links_only_s(cost, _up(tree), _height(tree), pieces)
    return _longest_chain_s(cost, tree, len(pieces), max(pieces))


def broadcast_down_s(cost: CostInputs, tree: Sequence[Node], count: int,
                     unset_bytes: int | None = PIPELINE_BYTES) -> float:
    """Closed form of :func:`~simulator.collectives.phases.broadcast_down`: a d-hop
    store-and-forward pipeline to the deepest rank, copies being free,
    T = d·alpha + Σ_j c_j·beta + (d-1)·c_max·beta, i.e. d·alpha + (d + k - 1)·c·beta for k equal
    pieces of c bytes (proportionate flow shop: exact for pieces of any sizes).

    Exact when no two flows share a link (``fully_connected``); on ``switch`` a parent's sends
    to its children share its uplink.
    """
    if len(tree) == 1:
        return 0.0
    return _links_only_s(cost, _down(tree), _height(tree), _piece_bytes(cost, count, unset_bytes))


def tree_allreduce_s(cost: CostInputs, tree: Sequence[Node], count: int,
                     unset_bytes: int | None = PIPELINE_BYTES) -> float:
    """Closed form of :func:`~simulator.collectives.phases.tree_allreduce` (the two directions
    overlapped): each piece climbs its leaf's chain to the root, which sends it straight back
    down d hops to the deepest rank. On ``fully_connected`` the down hops use the other
    direction of each cable, so they are d more stages of the same pipeline, none slower than
    the up chain's slowest (a hop):

        T = reduce_up_s + d·(alpha + c·beta)
          = 2d·alpha + (2d + k - 1)·c·beta + 2d·g   (perfect tree, c·beta ≥ 2g),

    n·beta plus the fill of a 2d-stage pipeline and its reductions, where a reduce, then a
    broadcast costs (k-1)·c·beta more. With free reductions (g = 0) the pipeline is 2d links and
    the proportionate flow-shop makespan 2d·alpha + Σ_j c_j·beta + (2d-1)·c_max·beta is exact for
    pieces of any sizes; otherwise unequal pieces are charged as the largest (an upper bound).
    """
    if len(tree) == 1:
        return 0.0
    pieces = _piece_bytes(cost, count, unset_bytes)
    if cost.reduce_s(max(pieces)) == 0:
        return _links_only_s(cost, edge_pairs(tree), 2 * _height(tree), pieces)
    return _longest_chain_s(cost, tree, len(pieces), max(pieces), down_hops=_height(tree))


def busiest_link_s(cost: CostInputs, pairs: list[tuple[int, int]], nbytes: int) -> float:
    """A floor from throughput: every pair in ``pairs`` (repeat a pair that carries two streams)
    moves ``nbytes`` over its route, so the busiest link needs alpha + Σ bytes / bandwidth,
    alpha + nbytes·:meth:`~simulator.costmodel.CostInputs.shared_beta`. A pipeline that shares
    no link is never this slow; where streams do share a link at large n, this is the time."""
    return cost.alpha(pairs) + nbytes * cost.shared_beta(pairs) if pairs else 0.0


# ---------------------------------------------------------------------------------------------
# The algorithms


def _tree(p: int) -> list[Node]:
    return [binary_tree(r, p) for r in range(p)]


class TreeAllreduce(Algorithm):
    """Pipelined binary-tree allreduce as NCCL's tree runs it: every rank reduces up and
    broadcasts down at once (two channels), the root turning each piece around as soon as it
    is reduced, on the in-order binary tree (depth d = ⌊log2 p⌋), k pieces of c bytes.

    T = max(:func:`tree_allreduce_s`, :func:`busiest_link_s`): the pipeline,
    reduce_up_s + d·(alpha + c·beta), on a perfect tree with c·beta ≥ 2g
    2d·alpha + (2d + k - 1)·c·beta + 2d·g, g = launch + c·gamma, i.e. n·beta plus a 2d-stage
    pipeline fill; and the busiest link, alpha + n·beta·(most tree edges on one link).

    On ``fully_connected`` a parent-child pair's up and down traffic use the two directions of
    one cable, no link is shared and T is the pipeline, exactly (equal pieces, or free
    reductions). On ``switch`` an interior rank's uplink carries its piece up and two down
    (3n bytes, its downlink likewise), which the second term bounds; the simulation is slower
    than both while the pipeline fills. Sources: Sanders, Speck & Träff 2009; NCCL
    ``runTreeSplit`` (src/device/all_reduce.h).
    """

    name = "tree"
    collective = Collective.ALLREDUCE

    def program(self, me: int, comm: Comm) -> Program:
        yield from tree_allreduce(me, comm, binary_tree(me, comm.size), comm.buffer)

    def model_time(self, cost: CostInputs, count: int) -> float:
        tree = _tree(cost.ranks)
        return max(tree_allreduce_s(cost, tree, count),
                   busiest_link_s(cost, edge_pairs(tree), cost.nbytes(count)))


class TreeBroadcast(Algorithm):
    """Pipelined binary-tree broadcast from the root: T = d·alpha + (d + k - 1)·c·beta,
    d = ⌊log2 p⌋ (:func:`broadcast_down_s`; exact on ``fully_connected`` for any pieces)."""

    name = "tree"
    collective = Collective.BROADCAST

    def program(self, me: int, comm: Comm) -> Program:
        yield from broadcast_down(me, comm, binary_tree(me, comm.size), comm.buffer)

    def model_time(self, cost: CostInputs, count: int) -> float:
        return broadcast_down_s(cost, _tree(cost.ranks), count)


class TreeReduce(Algorithm):
    """Pipelined binary-tree reduce to the root: :func:`reduce_up_s`, on a perfect tree with
    c·beta ≥ 2g d·alpha + d·(c·beta + 2g) + (k-1)·c·beta (exact on ``fully_connected`` for equal
    pieces, or free reductions)."""

    name = "tree"
    collective = Collective.REDUCE

    def program(self, me: int, comm: Comm) -> Program:
        yield from reduce_up(me, comm, binary_tree(me, comm.size), comm.buffer)

    def model_time(self, cost: CostInputs, count: int) -> float:
        return reduce_up_s(cost, _tree(cost.ranks), count)
