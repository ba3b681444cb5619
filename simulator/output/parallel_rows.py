"""What the figure and the trace of a parallel step share (:mod:`.parallel_figure`,
:mod:`.perfetto`): the order of the streams and of the communicators, and a step's spans by rank
and stream."""

from __future__ import annotations

import re
from collections.abc import Iterable

from simulator.training.execute import Span

STREAMS = ("compute", "tp", "pp", "dp", "ep")
"""The streams a layout's operations are issued on, in the order they are drawn (the words of
:class:`~simulator.training.graph.Op`'s ``stream``); any other (a Chakra trace's communicators)
comes after them, in :func:`natural_key` order."""


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """A name's sort key with its numbers as numbers, so ``tp 2`` comes before ``tp 10``."""
    return tuple((0, int(part)) if part.isdigit() else (1, part)
                 for part in re.split(r"(\d+)", name) if part)


def stream_key(stream: str) -> tuple[int, tuple[tuple[int, int | str], ...]]:
    """A stream's place: :data:`STREAMS` first in their order, then the others by name."""
    if stream in STREAMS:
        return (STREAMS.index(stream), ())
    return (len(STREAMS), natural_key(stream))


def by_row(spans: Iterable[Span]) -> dict[tuple[int, str], list[Span]]:
    """``spans`` by (rank, stream), rows in rank order then :func:`stream_key` order, each
    row's spans in their given order."""
    rows: dict[tuple[int, str], list[Span]] = {}
    for span in spans:
        rows.setdefault((span.rank, span.stream), []).append(span)
    return {key: rows[key] for key in sorted(rows, key=lambda k: (k[0], stream_key(k[1])))}
