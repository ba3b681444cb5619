"""Moving a span as pipeline pieces over one connection: the primitive every phase builds on."""

from __future__ import annotations

from simulator.algorithms.comm import Combine, Comm, Program, piece_label
from simulator.model.span import Span

PIPELINE_BYTES = 512 * 1024
"""Default piece size of pipelined algorithms when the scenario sets no ``piece_size``: NCCL's
default buffer (NCCL_BUFFSIZE = 4 MiB) over its NCCL_STEPS = 8 slots."""


def send_pieces(comm: Comm, peer: int, span: Span, default_bytes: int | None = None,
                label: str = "") -> None:
    """Post ``span`` to ``peer`` as its pipeline pieces, back to back on one connection
    (``label``: what they are, for a trace; each piece's number is added)."""
    pieces = comm.pieces(span, default_bytes)
    for j, piece in enumerate(pieces):
        comm.send(peer, piece, piece_label(label, j, len(pieces)))


def recv_pieces(comm: Comm, peer: int, into: Span, combine: Combine,
                default_bytes: int | None = None, label: str = "") -> Program:
    """Take ``peer``'s pieces of ``into`` one by one, copying or reducing each as it arrives."""
    pieces = comm.pieces(into, default_bytes)
    for j, piece in enumerate(pieces):
        yield comm.recv(peer, into=piece, combine=combine,
                        label=piece_label(label, j, len(pieces)))


def swap(comm: Comm, partner: int, send: Span, into: Span, combine: Combine,
         label: str = "") -> Program:
    """Both partners send at once: post ``send``, then take the partner's message into
    ``into`` (the step of recursive halving and doubling)."""
    send_pieces(comm, partner, send, label=label)
    yield from recv_pieces(comm, partner, into, combine, label=label)
