"""Tree phases: a pipelined reduction up a tree, a pipelined broadcast down it, and both
overlapped as NCCL's tree allreduce runs them; each program beside its closed form.

A tree is given to each rank as its :class:`TreeNode` (``tree.py``, ``binomial_tree.py`` and
``double_binary_tree.py`` build them); data move up to the root and down from it, piece by piece.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from simulator.algorithms.comm import COPY, REDUCE, Comm, Program, piece_label
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import EMPTY, Footprint, piece_counts
from simulator.algorithms.phases.pieces import PIPELINE_BYTES
from simulator.algorithms.schedule import NONE, Group, Schedule, pieces_per_span
from simulator.model.span import Span


@dataclass(frozen=True)
class TreeNode:
    """A rank's place in a tree: its parent (None at the root) and its children, listed in the
    order a reduction takes them (the smaller subtree first: its data are ready first)."""

    parent: int | None
    children: tuple[int, ...]


Node = TypeVar("Node")


def tree_of(shape: Callable[[int, int], Node], p: int) -> list[Node]:
    """Every rank's node of the tree ``shape`` builds over p ranks (what closed forms walk):
    ``shape(rank, p)`` gives one rank's :class:`TreeNode` (``binary_tree``, ``binomial_tree``),
    or a tuple of them for several trees (``double_binary_tree``)."""
    return [shape(rank, p) for rank in range(p)]


def reduction_height(tree: Sequence[TreeNode]) -> int:
    """The most reductions a contribution goes through up ``tree`` (every rank's node) when
    each rank reduces its children's partial results into its own one after the other, in
    ``children`` order, as :func:`reduce_up` does: a rank's partial result has height
    h ← max(h, h(child)) + 1 for each child in turn, from 0; the root's is the tree's.

    >>> reduction_height([TreeNode(None, (1, 2)), TreeNode(0, ()), TreeNode(0, ())])
    2
    """
    heights: dict[int, int] = {}
    order = _bottom_up(tree)  # every child before its parent, the root last
    for rank in order:
        h = 0
        for child in tree[rank].children:
            h = max(h, heights[child]) + 1
        heights[rank] = h
    return heights[order[-1]]


def reduce_up(comm: Comm, node: TreeNode, span: Span,
              default_bytes: int | None = PIPELINE_BYTES, turn_around: Comm | None = None) -> Program:
    """Pipelined reduction of ``span`` to the root of the tree, piece by piece.

    For every piece j: receive piece j from each child in turn and reduce it into mine, then
    send it up to my parent. A leaf therefore posts all its pieces at once; the root ends with
    the reduction of everyone's span, and with ``turn_around`` sends each reduced piece
    straight back down to its children on that communicator (the allreduce's turn).
    """
    pieces = comm.pieces(span, default_bytes)
    for j, piece in enumerate(pieces):
        label = piece_label("reduce-up", j, len(pieces))
        for child in node.children:
            yield comm.recv(child, into=piece, combine=REDUCE, label=label)
        if node.parent is not None:
            comm.send(node.parent, piece, label)
        elif turn_around is not None:
            for child in node.children:
                turn_around.send(child, piece, piece_label("broadcast-down", j, len(pieces)))


def broadcast_down(comm: Comm, node: TreeNode, span: Span,
                   default_bytes: int | None = PIPELINE_BYTES) -> Program:
    """Pipelined broadcast of ``span`` from the root of the tree, piece by piece.

    For every piece j: receive piece j from my parent (the root has it already), then pass it
    on to all my children at once.
    """
    pieces = comm.pieces(span, default_bytes)
    for j, piece in enumerate(pieces):
        label = piece_label("broadcast-down", j, len(pieces))
        if node.parent is not None:
            yield comm.recv(node.parent, into=piece, combine=COPY, label=label)
        for child in node.children:
            comm.send(child, piece, label)


def tree_allreduce(comm: Comm, node: TreeNode, span: Span,
                   default_bytes: int | None = PIPELINE_BYTES) -> Program:
    """Pipelined tree allreduce of ``span`` with its two directions overlapped, as NCCL's tree
    (``runTreeSplit`` in src/device/all_reduce.h): the root turns every piece around as soon as
    it has reduced it, and every other rank runs its reduce-up and its broadcast-down at once.

    The reduction goes up on ``comm``'s channel and the broadcast comes down on the next one
    (``comm.channel + 1``), each direction with its own connections, as NCCL gives each its own
    thread group and buffers. A piece reaches a rank's broadcast only after that rank sent its
    own contribution to it up, so the two directions never touch the same piece at once.
    """
    down = comm.on_channel(comm.channel + 1)
    if node.parent is None:  # the root: reduce piece j from my children, send it straight back
        yield from reduce_up(comm, node, span, default_bytes, turn_around=down)
    else:
        yield comm.parallel(reduce_up(comm, node, span, default_bytes),
                            broadcast_down(down, node, span, default_bytes))


def tree_schedule(group: Group, nodes: Sequence[TreeNode], span: Span,
                  default_bytes: int | None = PIPELINE_BYTES, *, up: bool = True,
                  down: bool = True) -> Schedule:
    """:func:`reduce_up` (``up``), :func:`broadcast_down` (``down``), or both overlapped as
    :func:`tree_allreduce` (the root turns each reduced piece around; the other ranks run the two
    directions as two threads), as a schedule; the binomial allreduce chains a reduction and a
    broadcast with :meth:`Schedule.sequence`.

    Up message (c, j) carries piece j from c to its parent, posted after c reduced piece j from
    its last child (a leaf posts at the start); the parent takes its children's piece j in
    order, then piece j+1. Down message (c, j) carries piece j from c's parent to c, posted
    after the parent received it from above (the root: at the start, or after reducing it when
    both directions run); c takes them in order.
    """
    per_span, per_piece = pieces_per_span(np.array([span.count], dtype=np.int64), group.itemsize,
                                          group.piece_bytes if group.piece_bytes is not None
                                          else default_bytes)
    k = int(per_span[0])
    piece = np.arange(k, dtype=np.int64)
    first = span.start + piece * per_piece
    last = np.minimum(first + per_piece, span.stop)
    below = [rank for rank, node in enumerate(nodes) if node.parent is not None]
    up_base = {rank: i * k for i, rank in enumerate(below)} if up else {}
    down_offset = len(below) * k if up else 0
    down_base = {rank: down_offset + i * k for i, rank in enumerate(below)} if down else {}
    parts: list[tuple[np.ndarray, ...]] = []

    def in_order(block: int) -> np.ndarray:  # piece j-1 of the same block, else the start
        return np.where(piece > 0, block + piece - 1, NONE)

    for rank in below if up else ():
        parent = nodes[rank].parent
        assert parent is not None
        children, siblings = nodes[rank].children, nodes[parent].children
        at = siblings.index(rank)
        posted = up_base[children[-1]] + piece if children else np.full(k, NONE)
        received_after = (up_base[siblings[at - 1]] + piece if at > 0
                          else np.where(piece > 0, up_base[siblings[-1]] + piece - 1, NONE))
        parts.append((np.full(k, rank), np.full(k, parent), np.ones(k, dtype=bool), posted,
                      in_order(up_base[rank]), received_after))
    for rank in below if down else ():
        parent = nodes[rank].parent
        assert parent is not None
        above = nodes[parent]
        if above.parent is not None:
            posted = down_base[parent] + piece
        elif up:
            posted = up_base[above.children[-1]] + piece  # the root turns piece j around
        else:
            posted = np.full(k, NONE)
        parts.append((np.full(k, parent), np.full(k, rank), np.zeros(k, dtype=bool), posted,
                      in_order(down_base[rank]), in_order(down_base[rank])))
    if not parts:
        return Schedule.empty()
    src, dst, reduce, posted_after, connection, receive = (np.concatenate(column)
                                                           for column in zip(*parts, strict=True))
    starts, stops = np.tile(first, len(parts)), np.tile(last, len(parts))
    return Schedule(group.members[src], group.members[dst], starts, stops, starts, stops, reduce,
                    posted_after, connection, receive)


def tree_footprint(group: Group, nodes: Sequence[TreeNode], span: Span,
                   default_bytes: int | None = PIPELINE_BYTES, *, up: bool = True,
                   down: bool = True) -> Footprint:
    """:func:`tree_schedule` counted (:func:`edges_footprint` of the tree's edges)."""
    return edges_footprint(group, span, default_bytes,
                           below=sum(node.parent is not None for node in nodes),
                           parents=sum(bool(node.children) for node in nodes), up=up, down=down)


def edges_footprint(group: Group, span: Span, default_bytes: int | None, *, below: int,
                    parents: int, up: bool, down: bool) -> Footprint:
    """A tree's :func:`tree_schedule` counted from its shape: each of the k pieces of ``span``
    goes once up (``up``) and once down (``down``) each of the edges of the ``below`` ranks
    under the root, each direction of an edge a pair; each of the ``parents`` ranks with
    children receives up in one chain, every rank below the root down in another."""
    if not below or not (up or down):
        return EMPTY
    k = int(piece_counts(group, np.array([span.count]), default_bytes)[0])
    directions = int(up) + int(down)
    return Footprint.whole(k * below * directions, below * directions,
                           ends=(parents if up else 0) + (below if down else 0))


# ---------------------------------------------------------------------------------------------
# Closed forms of the tree phases. A piece's way from a leaf up to the root, or from the root down
# to a leaf, is a chain of stages: each hop a link with its own pair's alpha_h (once) and beta_h
# (c·beta_h per piece of c bytes), so an NVLink hop and a network hop each count for what they
# are; each interior rank's reducer another stage (g = launch + c·gamma per reduction);
# copies are free. T is the longest chain: exact where no two flows share a link at once
# (``fully_connected``; two DGX nodes of two GPUs each), for pieces of any sizes; elsewhere a
# lower bound (a shared link only makes some message slower than alpha_h + c·beta_h).


_Paths = tuple[float, float, float]
"""Longest paths so far through the (stage, piece) grid that are at piece 0, at piece k-2 (all
steps between full pieces made) and at the last piece k-1."""

_START: _Paths = (0.0, -math.inf, -math.inf)


@dataclass(frozen=True)
class _Grid:
    """k pieces moving stage by stage: piece j leaves a stage once it has left the previous one
    (plus a link's latency) and piece j-1 has left this one, plus its service time there. T is
    the longest path through this grid from piece 0 at the first stage to piece k-1 at the last,
    each step to the next stage (alpha_s + the piece's service) or to the next piece (its
    service). The pieces are k-1 of c bytes and a last of ``last`` ≤ c bytes; a path makes its
    k-2 steps between full pieces on one stage, the slowest it visits, so for equal pieces

        T = max over chains  Σ_s alpha_s + Σ_s stage_s(c) + (k-1)·max_s stage_s(c),

    :func:`~simulator.algorithms.cost.pipeline_s` of each chain's per-stage times (the flow-shop
    makespan); a smaller last piece is exact too."""

    k: int
    c: int
    last: int
    g: float
    g_last: float

    @classmethod
    def of(cls, cost: CostInputs, count: int, default_bytes: int | None) -> _Grid:
        """The pieces ``comm.pieces`` cuts ``count`` elements into (all full but the last)."""
        pieces = [cost.nbytes(piece) for piece in cost.pieces(count, default_bytes)]
        return cls(len(pieces), pieces[0], pieces[-1], cost.reduce_s(pieces[0]),
                   cost.reduce_s(pieces[-1]))

    def through(self, paths: _Paths, alpha_s: float = 0.0, beta: float = 0.0, first: int = 0,
                later: int = 0) -> _Paths:
        """The longest paths one stage on: a link (latency ``alpha_s``, ``beta`` s/byte) or a
        rank's reducer, with ``first`` reductions to do once a piece reaches it along
        this chain (m - i from its i-th of m children) and ``later`` = m per further piece. A
        path makes its full pieces' steps, and its step to the last piece, on an earlier stage
        or on this one."""
        at_first, at_bulk, at_last = paths
        enter, step = self.c * beta + first * self.g, self.c * beta + later * self.g
        bulk = max(at_bulk, at_first + max(self.k - 2, 0) * step)
        return (at_first + alpha_s + enter, bulk + alpha_s + enter,
                max(at_last + self.last * beta + first * self.g_last,
                    bulk + enter + self.last * beta + later * self.g_last) + alpha_s)

    def hop(self, paths: _Paths, cost: CostInputs, sender: int, receiver: int) -> _Paths:
        """Through the link ``sender`` → ``receiver``, with its own route's alpha and beta."""
        pair = [(sender, receiver)]
        return self.through(paths, cost.alpha(pair), cost.beta(pair))

    def end(self, paths: _Paths) -> float:
        """When the last piece is through: the path at piece k-1 (piece 0 if it is the only)."""
        return paths[0] if self.k == 1 else paths[2]


def _bottom_up(tree: Sequence[TreeNode]) -> list[int]:
    """Ranks with every child before its parent (reverse breadth-first order from the root)."""
    order = [next(r for r, node in enumerate(tree) if node.parent is None)]
    for rank in order:
        order.extend(tree[rank].children)
    return order[::-1]


def _reduced(cost: CostInputs, tree: Sequence[TreeNode], grid: _Grid) -> _Paths:
    """Longest paths to the root's last reduction: for each rank, the most over its children
    (i-th of m) of the child's paths through the hop child → rank and rank's engine (m - i
    reductions, then m per piece); at a leaf the empty path."""
    ready: dict[int, _Paths] = {}
    for rank in _bottom_up(tree):
        children = tree[rank].children
        paths = [grid.through(grid.hop(ready[child], cost, child, rank), first=len(children) - i,
                              later=len(children)) for i, child in enumerate(children)]
        ready[rank] = tuple(map(max, zip(*paths, strict=True))) if paths else _START
    return ready[rank]  # the root comes last


def _broadcast(cost: CostInputs, tree: Sequence[TreeNode], grid: _Grid, start: _Paths) -> float:
    """From the root's ``start`` paths down every hop parent → child to every rank: when the
    last piece reaches the last rank."""
    arrived: dict[int, _Paths] = {}
    for rank in reversed(_bottom_up(tree)):
        parent = tree[rank].parent
        arrived[rank] = start if parent is None else grid.hop(arrived[parent], cost, parent, rank)
    return max(grid.end(paths) for paths in arrived.values())


def _up(tree: Sequence[TreeNode]) -> list[tuple[int, int]]:
    """(child, parent) for every edge of the tree: the pairs of the reduction."""
    return [(r, node.parent) for r, node in enumerate(tree) if node.parent is not None]


def edge_pairs(tree: Sequence[TreeNode]) -> list[tuple[int, int]]:
    """Both directions of every edge of the tree: the pairs an allreduce over it uses."""
    return _up(tree) + [(parent, child) for child, parent in _up(tree)]


def reduce_up_s(cost: CostInputs, tree: Sequence[TreeNode], count: int,
                default_bytes: int | None = PIPELINE_BYTES) -> float:
    """Closed form of :func:`reduce_up` over ``tree`` (one Node per
    rank): the longest leaf-to-root chain, each hop h = child → parent charged its own alpha_h and
    t_h = c·beta_h, the parent's engine (m - i)·g for the piece from its i-th of m children and
    m·g per later piece:

        T = max over leaves  Σ_h [alpha_h + t_h + (m_h - i_h)·g] + (k-1)·max_h max(t_h, m_h·g)

    for k pieces of c bytes (:class:`_Grid`; a smaller last piece is exact too), i.e.
    d·alpha + d·(t + 2g) + (k-1)·t on a perfect binary tree of equal hops with t ≥ 2g.

    Exact where no two children's messages cross one link at once: on ``fully_connected``, and
    for a DGX rank's one NVLink child and one network child; on ``switch`` (or a DGX rank's two
    NVLink children) two children streaming pieces share their parent's downlink, so the
    simulation is slower than this.
    """
    if len(tree) == 1:
        return 0.0
    grid = _Grid.of(cost, count, default_bytes)
    return grid.end(_reduced(cost, tree, grid))


def broadcast_down_s(cost: CostInputs, tree: Sequence[TreeNode], count: int,
                     default_bytes: int | None = PIPELINE_BYTES) -> float:
    """Closed form of :func:`broadcast_down`: a store-and-forward
    pipeline down the longest root-to-leaf chain, each hop h = parent → child its own alpha_h and
    t_h = c·beta_h, copies being free:

        T = max over leaves  Σ_h (alpha_h + t_h) + (k-1)·max_h t_h,

    d·alpha + (d + k - 1)·c·beta on equal hops; exact for pieces of any sizes (:class:`_Grid`).

    Exact where a parent's sends to its children take different links (``fully_connected``;
    a DGX rank's one NVLink child and one network child); on ``switch`` they share its uplink.
    """
    if len(tree) == 1:
        return 0.0
    return _broadcast(cost, tree, _Grid.of(cost, count, default_bytes), _START)


def tree_allreduce_s(cost: CostInputs, tree: Sequence[TreeNode], count: int,
                     default_bytes: int | None = PIPELINE_BYTES) -> float:
    """Closed form of :func:`tree_allreduce` (the two directions
    overlapped): each piece climbs a leaf's chain to the root, whose engine sends it straight
    back down a root-to-leaf chain, one pipeline of up hops, engines and down hops, each hop
    charged its own alpha_h and t_h = c·beta_h:

        T = max over (up chain, down chain)  Σ_stages [alpha_s + first piece's time]
            + (k-1)·slowest stage
          = 2d·alpha + (2d + k - 1)·c·beta + 2d·g   (perfect tree of equal hops, c·beta ≥ 2g),

    n·beta plus the fill of a 2d-stage pipeline and its reductions, where a reduce, then a
    broadcast costs (k-1)·c·beta more (:class:`_Grid`, exact for a smaller last piece too).

    Exact where no link carries two flows at once: on ``fully_connected`` the down hops use the
    other direction of each cable. On ``switch``, or inside a DGX node, a rank's uplink carries
    its pieces up and its children's down at once (:func:`busiest_link_s` bounds that).
    """
    if len(tree) == 1:
        return 0.0
    grid = _Grid.of(cost, count, default_bytes)
    return _broadcast(cost, tree, grid, _reduced(cost, tree, grid))


def busiest_link_s(cost: CostInputs, pairs: list[tuple[int, int]], nbytes: int) -> float:
    """A floor from throughput: every pair in ``pairs`` (repeat a pair that carries two streams)
    moves ``nbytes`` over its route, so the busiest link needs alpha + Σ bytes / bandwidth,
    alpha + nbytes·:meth:`~simulator.algorithms.cost.CostInputs.shared_beta`. A pipeline that shares
    no link is never this slow; where streams do share a link at large n, this is the time."""
    return cost.alpha(pairs) + nbytes * cost.shared_beta(pairs) if pairs else 0.0
