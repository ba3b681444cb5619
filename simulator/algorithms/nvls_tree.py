"""NVLSTree: NVLS inside each host, a tree between the hosts' NVLS heads, NVLS back (NCCL ≥ 2.18's
NVLS_TREE allreduce, the default on multi-node H100).

As NVIDIA/nccl runs it (read at v2.30.7, commit 5067397c):

- ``src/device/all_reduce.h``, ``RunWorkColl<AllReduce, NVLS_TREE, SIMPLE>``: each channel's
  warps split into scatter, reduce, broadcast and gather groups. The scatter warps of every GPU
  put chunk h of each loop of ``nHeads`` chunks into head h's NVLS buffer; head h's reduce warps
  pull the host's sum of it out of the switch (``multimem.ld_reduce``, ``nvls.down``), reduce in
  what its tree children across the network sent, and send it up the tree (``treeUp``); its
  broadcast warps take the total from the tree parent, pass it to the tree children and store
  it through the switch into every GPU of the host (``multimem.st``); the gather warps copy
  every head's chunk out. The root's reduce warps turn the total straight around.
- ``src/graph/connect.cc``, ``connectNvls``: one head per NVLS graph channel (a GPU and its NIC;
  one per GPU on a DGX), and for each head the tree over the hosts from ``ncclGetDtree``
  (:func:`~simulator.algorithms.host_tree.double_host_tree`), tree c % 2 on channel c, so half
  the channels use each of the two trees.

Here: the buffer's two halves take the two trees; in each, head h (the h-th GPU of every host)
owns chunk h of the half, which moves in pipeline pieces. Every GPU uploads each piece of every
chunk to its host's switch for its head alone (``comm.switch_reduce(to=h)``); the head reduces
its children's pieces into the host's sum, sends it up, gets the total down and multicasts it
(``comm.switch_multicast``), which every GPU takes. Each GPU's scatter runs at most
:func:`window` pieces ahead of its gather: ``NCCL_STEPS`` slots on every connection a piece
crosses between the two, so more on a host deeper in its tree.

The vectorised engine runs it on a schedule built with numpy (:func:`nvls_tree_schedule`), not
traced from the program: the trace array for array, numbered as the trace numbers its ops
(tests/test_trace.py), so that the builder moved no time; 4 GiB on 8 DGX H100 (1.29 million
ops) builds in ~1 s where the trace took ~7 s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simulator.algorithms.algorithm import Algorithm, ModelKind
from simulator.algorithms.comm import COPY, REDUCE, Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import Footprint
from simulator.algorithms.host_tree import HostNode, double_host_tree, host_depth
from simulator.algorithms.phases.pieces import PIPELINE_BYTES
from simulator.algorithms.schedule import (
    NONE,
    Group,
    Index,
    Schedule,
    SwitchEnd,
    pieces_per_span,
)
from simulator.algorithms.trace import dependency_levels
from simulator.errors import AlgorithmError
from simulator.model.collective import Collective
from simulator.model.execution import NCCL_STEPS
from simulator.model.machine import Layout, Machine
from simulator.model.nccl import NcclAlgorithm
from simulator.model.nccl_point import NcclBinding
from simulator.model.span import Span


def window(depth: int) -> int:
    """How many pieces a GPU's scatter may run ahead of its gather on a host ``depth`` edges
    below its tree's root: ``NCCL_STEPS`` on every connection a piece crosses between them,
    NCCL_STEPS·(2·depth + 2).

    In NCCL's kernel (src/device/all_reduce.h, ``RunWorkColl<AllReduce, NVLS_TREE, SIMPLE>``,
    v2.30.7) the scatter, reduce, broadcast and gather warps are four groups of ``Primitives``,
    each on its own connections, and none waits for another but through those connections'
    slots: the scatter for the head's reduce warps to free its slots in the switch, the reduce
    warps for the parent's to free theirs up each edge to the root, the root's and the
    broadcast warps for the children's down each edge, and the multicast for the gather. A
    piece's way from a GPU's scatter to its gather crosses the scatter's connection, ``depth``
    up, ``depth`` down and the multicast's, so that many windows of ``NCCL_STEPS`` pieces can
    be in flight between them, not one (a single window of 8 from scatter to gather held a
    16-host tree to the round trip of its deepest host: 253 GB/s busbw at 2 GiB on 16 DGX H100
    where this gives 349).
    """
    return NCCL_STEPS * (2 * depth + 2)  # a piece a slot


class NvlsTree(Algorithm):
    """NVLSTree allreduce over N hosts of L GPUs: for each of the two inter-host trees, on its
    half of the buffer, every piece of head h's chunk is reduced in the host's switch to head h,
    reduced up the tree of the hosts' h-th GPUs, broadcast down it, and multicast by the switch
    to every GPU of the host.

    Closed form, for k pieces of c bytes per head and tree (see :meth:`model_s`):

        T = delay + chain + (k - 1)·max(step, (delay + chain) / (window(d) + 1)),

    delay the latencies one piece meets (upload, the switch's reduction latency, copy down,
    2d network hops of the deeper tree, the multicast up and down), chain its transfers (its
    L uploads on a GPU's link, the copy down, 2d network hops, the multicast), and step what the
    busiest link carries per piece of every head of both trees: a GPU's NVLink 2(L+1)·c each
    way (the scatter of both halves and its own multicasts), a NIC c per tree edge it serves.
    The simulation shares the links max-min among dozens of flows a GPU, so this is an estimate
    (exact nowhere: ``exact_on`` is empty); tests/test_nvls_tree.py bounds the gap. The window of
the deepest host (:func:`window` of the depth d) bounds the pipeline where a piece's round trip
outlasts that many steps.
    """

    name = "nvls_tree"
    collective = Collective.ALLREDUCE
    nccl = NcclBinding(NcclAlgorithm.NVLS_TREE, kernel=True)
    rail_aware = True  # every GPU of a host is a head, on its own NIC: channels add nothing
    model_kind = ModelKind.ESTIMATE  # exact nowhere: the closed form is an estimate

    def unsupported(self, machine: Machine) -> str | None:
        layout = machine.layout
        if layout.host_count < 2:
            return ("it needs GPUs on two or more hosts (NCCL runs NVLS on one host), such as "
                    "dgx_h100 with nodes ≥ 2")
        return host_switch_unsupported(machine)

    def program(self, comm: Comm) -> Program:
        halves = comm.chunks(2)
        yield comm.parallel(*(_tree_half(comm.within_channel(t), t, halves[t])
                              for t in range(2)))

    def schedule(self, group: Group) -> Schedule:
        """The program's trace, built with numpy (:func:`nvls_tree_schedule`): 1.29 million
        ops for 4 GiB on 8 DGX H100 in ~1 s, where tracing them took ~7 s."""
        return nvls_tree_schedule(group, self.name)

    def footprint(self, group: Group) -> Footprint:
        """:meth:`schedule` counted from the trees and the pieces: per tree, every rank's
        upload and gather of every piece, every head's host sum and multicast of each piece of
        its chunk, and each piece up and down each tree edge; pairs, each rank with each
        switch endpoint of its host and every tree edge's both ways on every rail; one receive
        chain per rank's scatter-gather and reduce warps, and per broadcast warp below the
        root."""
        hosts = _hosts(group.layout)
        count, local = hosts.shape
        ranks = count * local
        entries, pairs, ends = 0, 0, 0
        edges: set[tuple[int, int]] = set()
        for tree, half in enumerate(group.buffer.split(2)):
            below = [(n, node.parent) for n in range(count)
                     if (node := double_host_tree(n, count)[tree]).parent is not None]
            edges |= {(n, up) for n, up in below} | {(up, n) for n, up in below}
            pieces = int(_Pieces.of(group, half, local).heads.size)
            entries += pieces * (2 * ranks + 2 * count + 2 * len(below))
            pairs += 2 * ranks * local + 2 * ranks
            ends += 2 * ranks + len(below) * local
        return Footprint.whole(entries, pairs + len(edges) * local, ends)

    def model_s(self, cost: CostInputs, count: int) -> float:
        layout = cost.layout
        hosts, local = _shape(layout)
        if cost.ranks == 1:
            return 0.0
        heads = layout.rail(layout.host_ranks(0)[0])  # head 0 of every host, in host order
        switch = cost.subgroup(layout.host_ranks(heads[0])).in_switch()
        assert switch is not None
        nvlink, switch_delay = switch.beta_s_per_byte, switch.reduction_latency_s
        nodes = [double_host_tree(h, hosts) for h in range(hosts)]
        edges = [(heads[h], heads[n.parent]) for h, pair in enumerate(nodes) for n in pair
                 if n.parent is not None]
        net_alpha = cost.alpha(edges + [(b, a) for a, b in edges])
        net_beta = cost.beta(edges + [(b, a) for a, b in edges])
        depth = max(_depth([pair[t] for pair in nodes], h) for t in range(2)
                    for h in range(hosts))
        per_nic = max(sum(len(pair[t].children) + (pair[t].parent is not None)
                          for t in range(2)) for pair in nodes)
        half = math.ceil(count / 2)
        pieces = cost.pieces(math.ceil(half / local), PIPELINE_BYTES)
        k, c = len(pieces), cost.nbytes(pieces[0])
        delay = (2 * (switch.alpha_up_s + switch.alpha_down_s) + switch_delay
                 + 2 * depth * net_alpha)
        chain = (local + 3) * c * nvlink + 2 * depth * c * net_beta
        step = max(2 * (local + 1) * c * nvlink, per_nic * c * net_beta)
        return delay + chain + (k - 1) * max(step, (delay + chain) / (window(depth) + 1))


def _tree_half(comm: Comm, tree: int, half: Span) -> Program:
    """One tree's half of the buffer: my scatter and gather, and my head's part in the tree."""
    me, layout = comm.rank, comm.layout
    host, rail = layout.host_ranks(me), layout.rail(me)
    head = host.index(me)
    intra, across = comm.subgroup(host, half), comm.subgroup(rail, half)
    node = double_host_tree(rail.index(me), len(rail))[tree]
    chunks = [comm.pieces(chunk, PIPELINE_BYTES) for chunk in half.split(len(host))]
    ahead = window(host_depth(rail.index(me), len(rail), tree))
    threads = [switch_scatter_gather(intra, chunks, ahead),
               _reduce_up(intra, across, node, chunks[head])]
    if node.parent is not None:
        threads.append(_broadcast_down(intra, across.on_channel(1), node, chunks[head]))
    yield comm.parallel(*threads)


def switch_scatter_gather(intra: Comm, chunks: list[list[Span]], ahead: int) -> Program:
    """Every head's pieces up to the switch for that head alone (NCCL's scatter warps), each
    piece j posted once piece j - ahead - 1 of every head has come back (the gather warps)."""
    for j in range(max(len(pieces) for pieces in chunks) + ahead):
        for h, pieces in enumerate(chunks):
            if j < len(pieces):
                intra.switch_reduce(pieces[j], "scatter", to=h)
        for h, pieces in enumerate(chunks):
            if 0 <= j - ahead < len(pieces):
                yield intra.switch_result(pieces[j - ahead], "gather", multicast_from=h)


def _reduce_up(intra: Comm, across: Comm, node: HostNode, pieces: list[Span]) -> Program:
    """My head's reduce warps: the host's sum of each piece out of the switch, my tree
    children's pieces reduced in, the result up to my parent; at the root straight back down to
    the children and through the switch to the host."""
    down = across.on_channel(1)
    for piece in pieces:
        yield intra.switch_result(piece, "host sum", to=intra.rank)
        for child in node.children:
            yield across.recv(child, into=piece, combine=REDUCE, label="tree up")
        if node.parent is not None:
            across.send(node.parent, piece, "tree up")
            continue
        for child in node.children:
            down.send(child, piece, "tree down")
        intra.switch_multicast(piece, "multicast")


def _broadcast_down(intra: Comm, down: Comm, node: HostNode, pieces: list[Span]) -> Program:
    """My head's broadcast warps (below the root): each total from my parent, on to my
    children and through the switch to every GPU of my host."""
    assert node.parent is not None
    for piece in pieces:
        yield down.recv(node.parent, into=piece, combine=COPY, label="tree down")
        for child in node.children:
            down.send(child, piece, "tree down")
        intra.switch_multicast(piece, "multicast")


# --- the schedule, built -------------------------------------------------------------------
#
# The builder writes every op of the trace of NvlsTree.program with numpy, a category (uploads,
# gathers, host sums, multicasts, pieces up and down the tree) and a tree at a time, each
# category a grid of rows (ranks, hosts or tree edges) × pieces (every head's chunk's pieces one
# after another). It then numbers them as the trace does: by the longest chain of ops before
# each (trace.dependency_levels), then in the order tracing creates them (rank by rank, tree
# by tree, each thread of the rank's tree to its end). So the schedule is the trace array for
# array, not only in the canonical form: the vectorised engine takes same-instant messages in
# their number's order (a sender's network proxy serves them so), and the builder must not
# move a time.


@dataclass(frozen=True)
class _Pieces:
    """One half's pipeline pieces, every head's chunk's one after another: piece f is piece
    ``index[f]`` of head ``heads[f]``'s chunk, elements [``starts[f]``, ``stops[f]``)."""

    heads: Index
    index: Index
    starts: Index
    stops: Index

    @classmethod
    def of(cls, group: Group, half: Span, local: int) -> _Pieces:
        """``half`` cut into ``local`` chunks and each into pieces, as ``comm.pieces`` cuts."""
        chunks = half.split(local)
        first = np.array([chunk.start for chunk in chunks], dtype=np.int64)
        last = np.array([chunk.stop for chunk in chunks], dtype=np.int64)
        per_chunk, per_piece = pieces_per_span(
            last - first, group.itemsize,
            group.piece_bytes if group.piece_bytes is not None else PIPELINE_BYTES)
        heads = np.repeat(np.arange(local, dtype=np.int64), per_chunk)
        index = np.arange(len(heads), dtype=np.int64) - np.repeat(np.cumsum(per_chunk)
                                                                  - per_chunk, per_chunk)
        starts = first[heads] + index * per_piece
        return cls(heads, index, starts, np.minimum(starts + per_piece, last[heads]))


def nvls_tree_schedule(group: Group, name: str) -> Schedule:
    """:meth:`NvlsTree.program` on every member of ``group``, numbered as its trace is."""
    hosts = _hosts(group.layout)
    count, local = hosts.shape
    if group.machine is not None and local > 1:  # as the trace asks the machine
        for ranks in hosts:
            if group.machine.aggregation_for(group.members[ranks].tolist(), name).depth > 1:
                raise AlgorithmError(f"{name}: ranks {group.members[ranks].tolist()} reduce "
                                     "over several switches, where NVLS needs one a host")
    traced = np.argsort(np.argsort(hosts[:, 0]))  # each host's turn: its first rank's
    parts: list[dict[str, np.ndarray]] = []
    base = 0
    for tree, half in enumerate(group.buffer.split(2)):
        built = _Half(group, hosts, traced, tree, _Pieces.of(group, half, local), base)
        parts.extend(built.columns())
        base = built.end
    shapes = [part["posted_after"].shape for part in parts]
    columns = {key: np.concatenate([np.broadcast_to(part.pop(key), shape).ravel()  # freed
                                    for part, shape in zip(parts, shapes, strict=True)])
               for key in list(parts[0])}  # as joined: peak memory, not twice the columns
    created = Schedule(columns["src"], columns["dst"], columns["start"], columns["stop"],
                       columns["start"], columns["stop"], columns["reduce"],
                       columns["posted_after"], columns["connection_previous"],
                       columns["receive_previous"], reducing_threads=2 if count > 1 else 1,
                       thread=columns["thread"] if count > 1 else None,
                       switches=_switch_ends(group, hosts, traced))
    levels, stuck = dependency_levels(created)
    assert not stuck.size, "the builder's ops wait in a circle"
    return created.renumbered(np.lexsort((columns["when"], columns["creator"], levels)))


def _hosts(layout: Layout) -> np.ndarray:
    """Every host's ranks (group positions), host by host: a hosts × GPUs-per-host array."""
    if len(layout.ranks_per_host) > 1:
        raise AlgorithmError("nvls_tree needs the same number of GPUs on every host")
    return np.array(layout.host_groups, dtype=np.int64)


def _switch_ends(group: Group, hosts: np.ndarray, traced: np.ndarray) -> tuple[SwitchEnd, ...]:
    """The trace's switch endpoints: for each host in its turn, and each tree, the scatter to
    each head (every GPU of the host contributes), then each head's multicast (it alone), as
    the host's first rank's scatter-gather first names them."""
    ends: list[SwitchEnd] = []
    for host in np.argsort(traced).tolist():
        ranks = tuple(group.members[hosts[host]].tolist())
        for _ in range(2):
            ends.extend([SwitchEnd(ranks)] * len(ranks))
            ends.extend(SwitchEnd((rank,)) for rank in ranks)
    return tuple(ends)


_SCATTER_GATHER, _REDUCE, _BROADCAST = range(3)
"""A rank's threads in one tree's half, in the order tracing runs them."""


class _Half:
    """One tree's half of the ops, numbered from ``base`` a category at a time (the builder's
    own numbering, before :func:`nvls_tree_schedule` puts them in the trace's), each category
    a grid of rows × pieces: every rank's uploads of every piece (row: host × GPU), its
    gathers, every host's host sums and multicasts (row: host; piece f is head ``heads[f]``'s),
    and the pieces up and down each tree edge (row: the host below)."""

    def __init__(self, group: Group, hosts: np.ndarray, traced: np.ndarray, tree: int,
                 pieces: _Pieces, base: int) -> None:
        self.group, self.hosts, self.traced, self.tree, self.pieces = (group, hosts, traced,
                                                                       tree, pieces)
        count, local = hosts.shape
        self.nodes = [double_host_tree(n, count)[tree] for n in range(count)]
        self.below = [n for n, node in enumerate(self.nodes) if node.parent is not None]
        self.edge = {n: e for e, n in enumerate(self.below)}
        self.windows = np.array([window(_depth(self.nodes, n)) for n in range(count)],
                                dtype=np.int64)
        """Each host's :func:`window` in this tree."""
        self.width = width = len(pieces.heads)
        self.f = np.arange(width, dtype=np.int64)
        self.uploads = base
        self.gathers = self.uploads + count * local * width
        self.sums = self.gathers + count * local * width
        self.multicasts = self.sums + count * width
        self.ups = self.multicasts + count * width
        self.downs = self.ups + len(self.below) * width
        self.end = self.downs + len(self.below) * width
        self.reduced = np.array([self.ups + self.edge[node.children[-1]] * width
                                 if node.children else self.sums + n * width
                                 for n, node in enumerate(self.nodes)], dtype=np.int64)
        """Each host's row of its heads' reduce warps' last op of each piece (the last child's
        piece up, else the host sum): what the piece goes on after, up or at the root down."""
        self.total = np.array([self.reduced[n] if node.parent is None
                               else self.downs + self.edge[n] * width
                               for n, node in enumerate(self.nodes)], dtype=np.int64)
        """Each host's row of the op after which its heads have each piece's total: the
        root's reduce warps' last, another host's piece down from its parent."""

    def columns(self) -> list[dict[str, np.ndarray]]:
        """Every category's columns (grids of rows × pieces, or broadcast to them)."""
        return [self._uploads(), self._gathers(), self._sums(), self._multicasts(),
                self._ups(), self._downs()]

    def _switch(self, host: Index, multicast: bool) -> Index:
        """The endpoint (``-1 - g``) of each host's scatter to, or multicast from, the head of
        each piece (:func:`_switch_ends`' numbering)."""
        local = self.hosts.shape[1]
        g = ((self.traced[host] * 2 + self.tree) * 2 + multicast) * local + self.pieces.heads
        ends: Index = -1 - g
        return ends

    def _ops(self, src: Index, dst: Index, reduce: bool, posted: Index, connection: Index,
             receive: Index, creator: Index, thread: int | Index, when: Index,
             then: int | Index = 0, within: int | Index = 0,
             channel: int = 0) -> dict[str, np.ndarray]:
        """A category's columns (spans: each column's piece), and when tracing creates each
        op: by ``creator``'s (a group position) ``thread`` of this tree, at its ``when``-th
        request (a piece, or a row of the scatter-gather), ``then`` its place among what that
        request creates, ``within`` among alike. ``channel``: the trace's thread, the
        number of the op's channel path (messages only; 0 for switch ops)."""
        span = self.hosts.shape[1] * (int(self.pieces.index.max()) + 1) + 2  # > any within
        return {"src": src, "dst": dst, "start": self.pieces.starts, "stop": self.pieces.stops,
                "reduce": np.array(reduce), "posted_after": posted,
                "connection_previous": connection, "receive_previous": receive,
                "thread": np.array(channel),
                "creator": (np.asarray(creator) * 2 + self.tree) * 3 + thread,
                "when": (when * 3 + then) * span + within}

    def _piece_before(self, row: Index) -> Index:
        """Piece f - 1 of the same chunk in grid row ``row`` (a category's first op), NONE for
        a chunk's first piece."""
        before: Index = np.where(self.pieces.index > 0, row + self.f - 1, NONE)
        return before

    def _uploads(self) -> dict[str, np.ndarray]:
        """Every rank's piece f up to its host's switch for head ``heads[f]``: posted at the
        start for each chunk's first W + 1 pieces, later once the gather of the row W + 1 back
        is done (W the :func:`window` of the rank's host in this tree); behind its upload of
        the piece before to that head; in each round after the upload of the host's GPU before
        it (the switch sums in host order)."""
        local = self.hosts.shape[1]
        rows = np.arange(self.hosts.size, dtype=np.int64)[:, None]
        mine = self.uploads + rows * self.width
        index = self.pieces.index
        ahead = self.windows[rows // local]
        back = index - ahead - 1
        gathered = self._row_ends()[np.maximum(back, 0)]
        return self._ops(
            self.group.members[self.hosts.ravel()][:, None],
            self._switch(rows // local, multicast=False), False,
            np.where(back >= 0, self.gathers + rows * self.width + gathered, NONE),
            self._piece_before(mine), np.where(rows % local > 0, mine - self.width + self.f, NONE),
            self.hosts.ravel()[:, None], _SCATTER_GATHER, np.maximum(index - ahead, 0),
            within=index * local + self.pieces.heads)

    def _gather_order(self) -> Index:
        """The pieces in the order a rank gathers them: piece 0 of every head, then 1, …"""
        order: Index = np.lexsort((self.pieces.heads, self.pieces.index))
        return order

    def _row_ends(self) -> Index:
        """For each row i of the scatter-gather, its last gather (piece i of the last chunk
        that has one), which the uploads of row i + W + 1 are posted after."""
        order = self._gather_order()
        index = self.pieces.index[order]
        last: Index = order[np.searchsorted(index, np.arange(int(index[-1]) + 1), "right") - 1]
        return last

    def _gathers(self) -> dict[str, np.ndarray]:
        """Every rank's gather of every piece from its head's multicast: posted by it, behind
        the gather of the head's piece before, received in gather order."""
        local = self.hosts.shape[1]
        rows = np.arange(self.hosts.size, dtype=np.int64)[:, None]
        mine = self.gathers + rows * self.width
        order = self._gather_order()
        before = np.full(self.width, NONE, dtype=np.int64)
        before[order[1:]] = order[:-1]
        return self._ops(
            self._switch(rows // local, multicast=True),
            self.group.members[self.hosts.ravel()][:, None], False,
            self.multicasts + (rows // local) * self.width + self.f, self._piece_before(mine),
            np.where(before >= 0, mine + before, NONE),
            self.hosts.ravel()[:, None], _SCATTER_GATHER, self.pieces.index, then=1,
            within=self.pieces.heads)

    def _sums(self) -> dict[str, np.ndarray]:
        """Each head's host sum of each piece of its chunk out of the switch: posted by the
        round's last upload (the host's last GPU's), behind its host sum before, received after
        its reduce warps' last op of the piece before."""
        local = self.hosts.shape[1]
        host = np.arange(len(self.hosts), dtype=np.int64)[:, None]
        heads = self.hosts[host, self.pieces.heads]
        return self._ops(
            self._switch(host, multicast=False), self.group.members[heads], False,
            self.uploads + (host * local + local - 1) * self.width + self.f,
            self._piece_before(self.sums + host * self.width),
            self._piece_before(self.reduced[host]),
            heads, _REDUCE, self.pieces.index)

    def _multicasts(self) -> dict[str, np.ndarray]:
        """Each head's total of each piece up to the switch for every GPU of its host, posted
        once the head has it (by its reduce warps at the root, else its broadcast warps),
        behind its multicast before."""
        host = np.arange(len(self.hosts), dtype=np.int64)[:, None]
        heads = self.hosts[host, self.pieces.heads]
        root = np.array([node.parent is None for node in self.nodes])[:, None]
        return self._ops(
            self.group.members[heads], self._switch(host, multicast=True), False,
            self.total[host] + self.f, self._piece_before(self.multicasts + host * self.width),
            np.array(NONE), heads, np.where(root, _REDUCE, _BROADCAST), self.pieces.index,
            then=np.where(root, 2, 1))

    def _edges(self) -> tuple[Index, Index, Index]:
        """Each host below the root (a column), its parent, and its place among the parent's
        children."""
        parents = [self.nodes[n].parent for n in self.below]
        slots = [self.nodes[up].children.index(n) for n, up in zip(self.below, parents,
                                                                   strict=True)
                 if up is not None]
        return (np.array(self.below, dtype=np.int64)[:, None],
                np.array(parents, dtype=np.int64)[:, None],
                np.array(slots, dtype=np.int64)[:, None])

    def _ups(self) -> dict[str, np.ndarray]:
        """Each head's piece up its tree edge, reduced in by the parent's head: posted after
        its reduce warps' last op of the piece, behind the piece before on the edge, received
        after the parent's host sum of the piece or its previous child's piece."""
        below, above, slot = self._edges()
        heads = self.pieces.heads
        after = np.array([self.ups + self.edge[self.nodes[up].children[s - 1]] * self.width
                          if s else self.sums + up * self.width
                          for up, s in zip(above[:, 0].tolist(), slot[:, 0].tolist(),
                                           strict=True)], dtype=np.int64)
        edge = np.arange(len(self.below), dtype=np.int64)[:, None]
        members = self.group.members
        return self._ops(
            members[self.hosts[below, heads]], members[self.hosts[above, heads]], True,
            self.reduced[below] + self.f, self._piece_before(self.ups + edge * self.width),
            after[:, None] + self.f, self.hosts[above, heads], _REDUCE, self.pieces.index,
            then=1, within=slot, channel=2 * self.tree)

    def _downs(self) -> dict[str, np.ndarray]:
        """Each piece's total down each tree edge, on the tree's second channel: posted once
        the parent's head has it, behind the piece before on the edge, which the child's
        broadcast warps took before."""
        below, above, _ = self._edges()
        heads = self.pieces.heads
        edge = np.arange(len(self.below), dtype=np.int64)[:, None]
        before = self._piece_before(self.downs + edge * self.width)
        members = self.group.members
        return self._ops(
            members[self.hosts[above, heads]], members[self.hosts[below, heads]], False,
            self.total[above] + self.f, before, before, self.hosts[below, heads], _BROADCAST,
            self.pieces.index, channel=2 * self.tree + 1)


def _host_switch_missing(machine: Machine, ranks: tuple[int, ...]) -> bool:
    """Whether no switch inside the host (an NVSwitch, not the network) reduces for ``ranks``."""
    switch = machine.reducing_switch(ranks)
    return switch is None or switch.network


def host_switch_unsupported(machine: Machine) -> str | None:
    """Why NVLS cannot reduce inside every host of ``machine`` (None: it can)."""
    layout = machine.layout
    if len(layout.ranks_per_host) > 1:
        return "it needs the same number of GPUs on every host"
    if any(_host_switch_missing(machine, ranks) for ranks in layout.host_groups):
        return ("it needs a switch with in-switch reduction (reduction: true) cabled to every "
                "GPU of each host, such as the NVSwitch of a dgx_h100 node")
    return None


def _shape(layout: Layout) -> tuple[int, int]:
    """Hosts and GPUs per host."""
    return layout.host_count, next(iter(layout.ranks_per_host))


def _depth(nodes: list[HostNode], host: int) -> int:
    """How many edges lie between ``host`` and the root of the tree of ``nodes`` (every host's
    node in one tree; :func:`~simulator.algorithms.host_tree.host_depth` without building
    them again)."""
    depth, parent = 0, nodes[host].parent
    while parent is not None:
        depth, parent = depth + 1, nodes[parent].parent
    return depth
