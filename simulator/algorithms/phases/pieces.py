"""Moving a span as pipeline pieces over one connection: the primitive every phase builds on."""

from __future__ import annotations

from simulator.algorithms.comm import Combine, Comm, Program
from simulator.model.span import Span

PIPELINE_BYTES = 512 * 1024
"""Default piece size of pipelined algorithms when the scenario sets no ``piece_size``: NCCL's
default buffer (NCCL_BUFFSIZE = 4 MiB) over its NCCL_STEPS = 8 slots."""


def send_pieces(comm: Comm, peer: int, span: Span, default_bytes: int | None = None) -> None:
    """Post ``span`` to ``peer`` as its pipeline pieces, back to back on one connection."""
    for piece in comm.pieces(span, default_bytes):
        comm.send(peer, piece)


def recv_pieces(comm: Comm, peer: int, into: Span, combine: Combine,
                default_bytes: int | None = None) -> Program:
    """Take ``peer``'s pieces of ``into`` one by one, copying or reducing each as it arrives."""
    for piece in comm.pieces(into, default_bytes):
        yield comm.recv(peer, into=piece, combine=combine)


def swap(comm: Comm, partner: int, send: Span, into: Span, combine: Combine) -> Program:
    """Both partners send at once: post ``send``, then take the partner's message into
    ``into`` (the step of recursive halving and doubling)."""
    send_pieces(comm, partner, send)
    yield from recv_pieces(comm, partner, into, combine)
