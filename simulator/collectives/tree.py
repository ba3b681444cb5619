"""Pipelined binary tree (NCCL's tree): reduce up the tree, then broadcast down, piece by piece.

The tree is the in-order binary tree of Sanders, Speck & Träff, "Two-tree algorithms for full
bandwidth broadcast, reduction and scan", Parallel Computing 35(12), 2009, which NCCL also builds
(``ncclGetBtree`` in src/graph/trees.cc; NVIDIA blog "Massively Scale Your Deep Learning Training
with NCCL 2.4", 2019): number the tree positions 1..p in order; position x with lowest set bit 2^h
sits at height h, so odd positions are the leaves and even positions are interior. Ranks take
the positions cyclically from the root's, so that rank 0 is the root (for p a power of two this
is NCCL's tree: rank 0 on top of ranks 1..p-1). The buffer moves in pieces of ``PIPELINE_BYTES``
(or the scenario's ``chunk_size``), so the levels of the tree work on different pieces at once.

This module also holds the two tree phases that binomial_tree and double_binary_tree reuse,
:func:`reduce_up` and :func:`broadcast_down`, and their closed forms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simulator.collective import ROOT, Collective
from simulator.collectives.base import Algorithm
from simulator.collectives.phases import PIPELINE_BYTES
from simulator.costmodel import CostInputs, pipeline_s
from simulator.program import COPY, REDUCE, Chunk, Comm, Program


@dataclass(frozen=True)
class Node:
    """A rank's place in a tree: its parent (None at the root) and its children, listed in the
    order a reduction takes them (the smaller subtree first: its data are ready first)."""

    parent: int | None
    children: tuple[int, ...]


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


# ---------------------------------------------------------------------------------------------
# The two phases, shared by every tree algorithm


def reduce_up(me: int, comm: Comm, node: Node, chunk: Chunk,
              unset_bytes: int | None = PIPELINE_BYTES) -> Program:
    """Pipelined reduction of ``chunk`` to the root of the tree, piece by piece.

    For every piece j: receive piece j from each child in turn and reduce it into mine, then
    send it up to my parent. A leaf therefore posts all its pieces at once; the root ends with
    the reduction of everyone's chunk.
    """
    for piece in comm.pieces(chunk, unset_bytes):
        for child in node.children:
            yield comm.recv(child, into=piece, op=REDUCE)
        if node.parent is not None:
            comm.send(node.parent, piece)


def broadcast_down(me: int, comm: Comm, node: Node, chunk: Chunk,
                   unset_bytes: int | None = PIPELINE_BYTES) -> Program:
    """Pipelined broadcast of ``chunk`` from the root of the tree, piece by piece.

    For every piece j: receive piece j from my parent (the root has it already), then pass it
    on to all my children at once.
    """
    for piece in comm.pieces(chunk, unset_bytes):
        if node.parent is not None:
            yield comm.recv(node.parent, into=piece, op=COPY)
        for child in node.children:
            comm.send(child, piece)


# ---------------------------------------------------------------------------------------------
# Their closed forms


def _piece_bytes(cost: CostInputs, count: int, unset_bytes: int | None) -> tuple[int, int]:
    pieces = cost.pieces(count, unset_bytes)
    return len(pieces), cost.nbytes(max(pieces))


def reduce_up_s(cost: CostInputs, tree: Sequence[Node], count: int,
                unset_bytes: int | None = PIPELINE_BYTES) -> float:
    """Closed form of :func:`reduce_up` over ``tree`` (one Node per rank): k pieces of c bytes.

    A tree of pipeline stages: each hop is a link (t = c·beta per piece, alpha once), each
    interior rank v with m_v children a reduction engine that reduces m_v pieces (one per child)
    per piece, g = launch + c·gamma each. Along the chain from a leaf up to the root the
    flow-shop makespan is

        T(chain) = d·alpha + Σ_hops [t + (m_v - i_v)·g] + (k-1)·max(t, max_v m_v·g)

    where the hop from v's i_v-th child (0-based) enters v's engine with m_v - i_v reductions
    still to do for that piece, and every further piece costs the chain's slowest stage; and
    T = max over leaves of T(chain) (the longest path of the max-plus system the engine runs).
    When every hop enters at the first child this is ``pipeline_s(d·alpha, [t, m·g]·d, k)``; on a
    perfect binary tree with t ≥ 2g it is d·alpha + d·(t + 2g) + (k-1)·t.

    Exact when no two flows share a link (``fully_connected``) and the pieces are equal (k = 1,
    or k dividing the count); pieces that differ by one element are all charged as the largest,
    an upper bound (by under 0.5% for pieces of 50 elements or more). On ``switch`` two children
    share their parent's downlink, so the simulation is slower than this.
    """
    up = [(r, node.parent) for r, node in enumerate(tree) if node.parent is not None]
    if not up:
        return 0.0
    k, c = _piece_bytes(cost, count, unset_bytes)
    alpha, t, g = cost.alpha(up), c * cost.beta(up), cost.reduce_s(c)
    worst = 0.0
    for leaf, node in enumerate(tree):
        if node.children:
            continue
        hops, first_piece, slowest, rank = 0, 0.0, t, leaf
        while tree[rank].parent is not None:
            parent = tree[rank].parent
            siblings = tree[parent].children
            hops += 1
            first_piece += t + (len(siblings) - siblings.index(rank)) * g
            slowest = max(slowest, len(siblings) * g)
            rank = parent
        worst = max(worst, hops * alpha + first_piece + (k - 1) * slowest)
    return worst


def depth(tree: Sequence[Node], rank: int) -> int:
    """Hops from ``rank`` up to the root of ``tree``."""
    hops = 0
    while tree[rank].parent is not None:
        rank, hops = tree[rank].parent, hops + 1
    return hops


def broadcast_down_s(cost: CostInputs, tree: Sequence[Node], count: int,
                     unset_bytes: int | None = PIPELINE_BYTES) -> float:
    """Closed form of :func:`broadcast_down`: a d-hop store-and-forward pipeline to the deepest
    rank, copies being free: T = d·alpha + (d + k - 1)·c·beta (``pipeline_s``).

    Exact when no two flows share a link (``fully_connected``) and the pieces are equal; on
    ``switch`` a parent's sends to its children share its uplink.
    """
    down = [(node.parent, r) for r, node in enumerate(tree) if node.parent is not None]
    if not down:
        return 0.0
    k, c = _piece_bytes(cost, count, unset_bytes)
    d = max(depth(tree, r) for r in range(len(tree)))
    return pipeline_s(d * cost.alpha(down), [c * cost.beta(down)] * d, k)


# ---------------------------------------------------------------------------------------------
# The algorithms


def _tree(p: int) -> list[Node]:
    return [binary_tree(r, p) for r in range(p)]


class TreeAllreduce(Algorithm):
    """Pipelined binary-tree allreduce: a pipelined reduce to the root, then a pipelined
    broadcast from it, on the in-order binary tree (depth d = ⌊log2 p⌋), k pieces of c bytes.

    T = reduce_up_s + broadcast_down_s; on a perfect tree with c·beta ≥ 2g:
    T = 2d·alpha + (2d + 2k - 2)·c·beta + 2d·g,  g = launch + c·gamma.

    Every rank runs its whole reduce loop, then its whole broadcast loop, as NCCL's
    ``runTreeUpDown`` does; the root turns the reduced buffer around. (NCCL's split tree also
    overlaps the two directions with separate thread groups; a rank here is one sequential
    program, so the two directions take turns.) Exact on ``fully_connected`` for equal pieces.
    """

    name = "tree"
    collective = Collective.ALLREDUCE

    def program(self, me: int, comm: Comm) -> Program:
        node = binary_tree(me, comm.size)
        yield from reduce_up(me, comm, node, comm.buffer)
        yield from broadcast_down(me, comm, node, comm.buffer)

    def model_time(self, cost: CostInputs, count: int) -> float:
        tree = _tree(cost.ranks)
        return reduce_up_s(cost, tree, count) + broadcast_down_s(cost, tree, count)


class TreeBroadcast(Algorithm):
    """Pipelined binary-tree broadcast from the root: T = d·alpha + (d + k - 1)·c·beta,
    d = ⌊log2 p⌋ (exact on ``fully_connected`` for equal pieces)."""

    name = "tree"
    collective = Collective.BROADCAST

    def program(self, me: int, comm: Comm) -> Program:
        yield from broadcast_down(me, comm, binary_tree(me, comm.size), comm.buffer)

    def model_time(self, cost: CostInputs, count: int) -> float:
        return broadcast_down_s(cost, _tree(cost.ranks), count)


class TreeReduce(Algorithm):
    """Pipelined binary-tree reduce to the root: :func:`reduce_up_s`, on a perfect tree with
    c·beta ≥ 2g d·alpha + d·(c·beta + 2g) + (k-1)·c·beta (exact on ``fully_connected`` for equal
    pieces)."""

    name = "tree"
    collective = Collective.REDUCE

    def program(self, me: int, comm: Comm) -> Program:
        yield from reduce_up(me, comm, binary_tree(me, comm.size), comm.buffer)

    def model_time(self, cost: CostInputs, count: int) -> float:
        return reduce_up_s(cost, _tree(cost.ranks), count)
