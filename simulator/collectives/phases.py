"""Pieces shared by several algorithms, composed with ``yield from``.

Phases run along a logical ring or chain given as a sequence of ranks, or over a tree given to
each rank as its :class:`Node`, so that one algorithm can run them inside a node, across nodes,
or on a whole group with the same code. Data move in pipeline pieces (``comm.pieces``): a rank
forwards a piece as soon as it has it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from simulator.program import COPY, REDUCE, Chunk, Combine, Comm, Program

PIPELINE_BYTES = 512 * 1024
"""Default piece size of pipelined algorithms when the scenario sets no ``chunk_size``: NCCL's
default buffer (NCCL_BUFFSIZE = 4 MiB) over its NCCL_STEPS = 8 slots."""


def send_pieces(comm: Comm, peer: int, chunk: Chunk, unset_bytes: int | None = None) -> None:
    """Post ``chunk`` to ``peer`` as its pipeline pieces, back to back on one connection."""
    for piece in comm.pieces(chunk, unset_bytes):
        comm.send(peer, piece)


def recv_pieces(comm: Comm, peer: int, into: Chunk, op: Combine,
                unset_bytes: int | None = None) -> Program:
    """Take ``peer``'s pieces of ``into`` one by one, copying or reducing each as it arrives."""
    for piece in comm.pieces(into, unset_bytes):
        yield comm.recv(peer, into=piece, op=op)


def swap(comm: Comm, partner: int, send: Chunk, into: Chunk, op: Combine) -> Program:
    """Both partners send at once: post ``send``, then take the partner's message into
    ``into`` (the step of recursive halving and doubling)."""
    send_pieces(comm, partner, send)
    yield from recv_pieces(comm, partner, into, op)


def ring_pass(me: int, comm: Comm, ring: Sequence[int], chunks: Sequence[Chunk], *, start: int,
              steps: int, reducing_steps: int, unset_bytes: int | None = None) -> Program:
    """Pass chunks around ``ring`` for ``steps`` steps (Patarasuk & Yuan 2009).

    The rank at position i first sends chunk (i + start); at step s it receives chunk
    (i + start - s - 1) from its left neighbour, reducing it during the first ``reducing_steps``
    steps and copying it afterwards, and passes it on to the right unless s is the last step.
    With start = 0, steps = p-1 and no reducing step this is an allgather; with p-1 reducing
    steps more, an allreduce, after whose reduce-scatter half position i holds chunk i + 1.
    """
    if steps == 0:
        return
    n, i = len(ring), ring.index(me)
    right, left = ring[(i + 1) % n], ring[(i - 1) % n]
    for piece in comm.pieces(chunks[(i + start) % n], unset_bytes):
        comm.send(right, piece)
    for step in range(steps):
        op = REDUCE if step < reducing_steps else COPY
        for piece in comm.pieces(chunks[(i + start - step - 1) % n], unset_bytes):
            yield comm.recv(left, into=piece, op=op)
            if step < steps - 1:
                comm.send(right, piece)


def chain(me: int, comm: Comm, order: Sequence[int], *, reduce: bool,
          unset_bytes: int | None = PIPELINE_BYTES) -> Program:
    """Stream the buffer down the chain ``order[0] → order[1] → …``, piece by piece.

    Each rank but the first receives a piece from its predecessor (copying it, or reducing it
    into its own when ``reduce``) and passes it on unless it is last: a pipelined broadcast
    from ``order[0]``, or a pipelined reduce to ``order[-1]``.
    """
    position = order.index(me)
    for piece in comm.pieces(comm.buffer, unset_bytes):
        if position > 0:
            yield comm.recv(order[position - 1], into=piece, op=REDUCE if reduce else COPY)
        if position < len(order) - 1:
            comm.send(order[position + 1], piece)


# ---------------------------------------------------------------------------------------------
# Tree phases: a tree is given to each rank as its Node (tree.py, binomial_tree.py and
# double_binary_tree.py build them); data move up to the root and down from it, piece by piece.


@dataclass(frozen=True)
class Node:
    """A rank's place in a tree: its parent (None at the root) and its children, listed in the
    order a reduction takes them (the smaller subtree first: its data are ready first)."""

    parent: int | None
    children: tuple[int, ...]


def reduce_up(me: int, comm: Comm, node: Node, chunk: Chunk,
              unset_bytes: int | None = PIPELINE_BYTES, turn_around: Comm | None = None) -> Program:
    """Pipelined reduction of ``chunk`` to the root of the tree, piece by piece.

    For every piece j: receive piece j from each child in turn and reduce it into mine, then
    send it up to my parent. A leaf therefore posts all its pieces at once; the root ends with
    the reduction of everyone's chunk, and with ``turn_around`` sends each reduced piece
    straight back down to its children on that communicator (the allreduce's turn).
    """
    for piece in comm.pieces(chunk, unset_bytes):
        for child in node.children:
            yield comm.recv(child, into=piece, op=REDUCE)
        if node.parent is not None:
            comm.send(node.parent, piece)
        elif turn_around is not None:
            for child in node.children:
                turn_around.send(child, piece)


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


def tree_allreduce(me: int, comm: Comm, node: Node, chunk: Chunk,
                   unset_bytes: int | None = PIPELINE_BYTES) -> Program:
    """Pipelined tree allreduce of ``chunk`` with its two directions overlapped, as NCCL's tree
    (``runTreeSplit`` in src/device/all_reduce.h): the root turns every piece around as soon as
    it has reduced it, and every other rank runs its reduce-up and its broadcast-down at once.

    The reduction goes up on ``comm``'s channel and the broadcast comes down on the next one
    (``comm.channel + 1``), each direction with its own connections, as NCCL gives each its own
    thread group and buffers. A piece reaches a rank's broadcast only after that rank sent its
    own contribution to it up, so the two directions never touch the same piece at once.
    """
    down = comm.on_channel(comm.channel + 1)
    if node.parent is None:  # the root: reduce piece j from my children, send it straight back
        yield from reduce_up(me, comm, node, chunk, unset_bytes, turn_around=down)
    else:
        yield comm.parallel(reduce_up(me, comm, node, chunk, unset_bytes),
                            broadcast_down(me, down, node, chunk, unset_bytes))
