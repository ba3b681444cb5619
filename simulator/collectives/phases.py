"""Phases shared by several algorithms, composed with ``yield from``.

Each phase runs along a logical ring given as a sequence of ranks, so a hierarchical algorithm can
run it inside a node or across nodes with the same code.
"""

from __future__ import annotations

from collections.abc import Sequence

from simulator.program import COPY, REDUCE, Chunk, Comm, Program


def ring_reduce_scatter(me: int, comm: Comm, ring: Sequence[int], chunks: Sequence[Chunk]) -> Program:
    """Reduce-scatter around ``ring`` (len(chunks) == len(ring)) in len(ring)-1 steps.

    At step s the rank at position i sends chunk (i - s) and reduces chunk (i - s - 1) received
    from its left neighbour; afterwards position i holds chunk (i + 1) reduced over the ring.
    """
    n, i = len(ring), ring.index(me)
    right, left = ring[(i + 1) % n], ring[(i - 1) % n]
    for step in range(n - 1):
        comm.send(right, chunks[(i - step) % n])
        yield comm.recv(left, into=chunks[(i - step - 1) % n], op=REDUCE)


def ring_allgather(me: int, comm: Comm, ring: Sequence[int], chunks: Sequence[Chunk]) -> Program:
    """Allgather around ``ring``, starting from position i holding chunk (i + 1), in len(ring)-1
    steps: at step s position i passes chunk (i + 1 - s) on and receives chunk (i - s)."""
    n, i = len(ring), ring.index(me)
    right, left = ring[(i + 1) % n], ring[(i - 1) % n]
    for step in range(n - 1):
        comm.send(right, chunks[(i + 1 - step) % n])
        yield comm.recv(left, into=chunks[(i - step) % n], op=COPY)

