"""Pieces shared by several algorithms, composed with ``yield from``.

Phases run along a logical ring or chain given as a sequence of ranks, so that one algorithm can
run them inside a node, across nodes, or on a whole group with the same code. Data move in
pipeline pieces (``comm.pieces``): a rank forwards a piece as soon as it has it.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.program import COPY, REDUCE, Chunk, Comm, Program

PIPELINE_BYTES = 512 * 1024
"""Default piece size of pipelined algorithms when the scenario sets no ``chunk_size``: NCCL's
default buffer (NCCL_BUFFSIZE = 4 MiB) over its NCCL_STEPS = 8 slots."""


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
