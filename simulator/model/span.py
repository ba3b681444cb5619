"""Ranges of buffer elements, and how a buffer is cut into chunks and pipeline pieces.

Three words, three concepts, used the same way everywhere:

- a **span** is any contiguous range of a rank's buffer elements (:class:`Span`);
- a **chunk** is one of the p nearly equal spans a buffer is cut into (``buffer.split(p)``;
  chunk r "belongs" to rank r);
- a **piece** is a pipeline piece: a span of at most ``piece_bytes``, the unit in which data
  stream through a pipeline (NCCL's "chunk size"; :func:`piece_sizes`).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Span:
    """Elements ``start`` to ``stop`` (exclusive) of a rank's buffer."""

    start: int
    stop: int

    @property
    def count(self) -> int:
        """Number of elements."""
        return self.stop - self.start

    def split(self, parts: int) -> list[Span]:
        """``parts`` contiguous spans whose sizes differ by at most one element.

        The first ``count % parts`` spans get the extra element (as ``numpy.array_split``; NCCL
        likewise splits a buffer that does not divide evenly into nearly equal chunks).

        >>> Span(0, 10).split(4)
        [Span(start=0, stop=3), Span(start=3, stop=6), Span(start=6, stop=8), Span(start=8, stop=10)]
        """
        if parts < 1:
            raise ValueError(f"cannot split into {parts} parts")
        return list(_split(self.start, self.stop, parts))

    def split_chunks(self, ranks: int, parts: int) -> list[tuple[Span, ...]]:
        """Part c of every rank's chunk, for each of ``parts`` parts: the buffer cut into
        ``ranks`` chunks (:meth:`split`), each chunk cut into ``parts`` (:meth:`split`), and
        the c-th part of chunk r at ``[c][r]``. A collective whose buffer is laid out by rank
        chunks (reduce-scatter, allgather) runs channel c on part c of each chunk, as NCCL's
        ring does (src/device/reduce_scatter.h: ``offset = dataOffset + rankDest * count``).

        >>> [[(s.start, s.stop) for s in part] for part in Span(0, 12).split_chunks(2, 3)]
        [[(0, 2), (6, 8)], [(2, 4), (8, 10)], [(4, 6), (10, 12)]]
        """
        by_chunk = [chunk.split(parts) for chunk in self.split(ranks)]
        return [tuple(chunk[c] for chunk in by_chunk) for c in range(parts)]

    def cut(self, sizes: list[int]) -> list[Span]:
        """Consecutive spans of the given element counts from ``start`` (they must sum to count).

        >>> Span(2, 7).cut([2, 3])
        [Span(start=2, stop=4), Span(start=4, stop=7)]
        """
        if len(sizes) == 1:
            return [self]
        starts = itertools.accumulate(sizes, initial=self.start)
        return [Span(start, start + size) for start, size in zip(starts, sizes, strict=False)]


@functools.lru_cache(maxsize=1 << 16)
def _split(start: int, stop: int, parts: int) -> tuple[Span, ...]:
    """Shared by every rank that cuts the same range the same way (p ranks × p chunks would
    otherwise be p² objects for the garbage collector to scan)."""
    base, extra = divmod(stop - start, parts)
    bounds = [start]
    for i in range(parts):
        bounds.append(bounds[-1] + base + (1 if i < extra else 0))
    return tuple(Span(a, b) for a, b in itertools.pairwise(bounds))


def piece_sizes(count: int, itemsize: int, piece_bytes: int | None,
                default_bytes: int | None) -> list[int]:
    """Element counts of the pipeline pieces of ``count`` elements: full pieces of
    ``piece_bytes`` (or ``default_bytes``, the algorithm's own, when the scenario sets none), the
    last one partial, as NCCL steps through a buffer in fixed chunks; one piece when both are
    None.

    Fixed-size pieces keep time monotone in size: one more element never makes pieces smaller.

    >>> piece_sizes(10, 1, 4, None)
    [4, 4, 2]
    """
    size_bytes = piece_bytes if piece_bytes is not None else default_bytes
    if size_bytes is None or count == 0:
        return [count]
    per_piece = max(1, size_bytes // itemsize)
    full, rest = divmod(count, per_piece)
    return [per_piece] * full + ([rest] if rest else [])
