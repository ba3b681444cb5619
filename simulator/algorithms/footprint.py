"""Footprints: what a schedule holds, counted without building it.

A schedule costs memory per entry (its arrays, their temporaries while they are built, the
engine's per-message state) and per pair of ranks its messages go between (a route each, for
the closed form and the engine). At scale those are gigabytes: ``direct`` on 7,800 ranks is
121 million entries and 61 million pairs. :meth:`Algorithm.footprint
<simulator.algorithms.algorithm.Algorithm.footprint>` counts them from the same arithmetic as
the builder (its phases' counts sit beside their builders), in microseconds, so that a point too
large for the machine is refused before anything is allocated (:mod:`simulator.plan`).
``tests/test_footprint.py`` holds every count equal to the schedule the builder makes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulator.algorithms.schedule import Group, Index, pieces_per_span


@dataclass(frozen=True)
class Footprint:
    """A schedule's size, counted: ``entries`` as :attr:`Blocks.size
    <simulator.algorithms.schedule.Blocks.size>` counts them (messages, local reductions, join
    markers); ``pairs``, at most how many (sender, receiver) pairs of ranks its messages go
    between (each routed once); ``held``, the entries the vectorised engine holds at once: all
    of a schedule built whole, and of one that comes a block at a time (``windowed``,
    :attr:`Blocks.count <simulator.algorithms.schedule.Blocks.count>` > 1) those of its parts
    built whole, its ring passes' blocks left out (a window of a few blocks of 16 Ki messages);
    ``ends``, the receive chains that end in it, one per thread of each rank that receives
    (what :meth:`Schedule.sequence <simulator.algorithms.schedule.Schedule.sequence>` joins when
    it runs as a phase beside others)."""

    entries: int
    pairs: int
    held: int
    windowed: bool = False
    ends: int = 0

    @classmethod
    def whole(cls, entries: int, pairs: int, ends: int = 0) -> Footprint:
        """A schedule built at once: every entry held."""
        return cls(entries, pairs, entries, False, ends)

    def as_whole(self) -> Footprint:
        """The same schedule built at once (``Algorithm.scheduled``, not its blocks)."""
        return Footprint.whole(self.entries, self.pairs, self.ends)

    @staticmethod
    def joined(parts: Sequence[Footprint], markers: int = 0, ends: int | None = None
               ) -> Footprint:
        """Parts in one schedule (side by side or one after another) with ``markers`` join
        markers more; windowed where a part is, then holding what the parts hold. ``ends``:
        the whole's receive chains (default: the parts' together)."""
        entries = sum(part.entries for part in parts) + markers
        windowed = any(part.windowed for part in parts)
        held = sum(part.held for part in parts) + markers if windowed else entries
        return Footprint(entries, sum(part.pairs for part in parts), held, windowed,
                         sum(part.ends for part in parts) if ends is None else ends)


EMPTY = Footprint(0, 0, 0)
"""No entry at all (one rank, or a phase with nothing to move)."""


def piece_counts(group: Group, counts: Index, default_bytes: int | None = None) -> Index:
    """The pipeline pieces spans of ``counts`` elements are cut into on ``group`` (its
    ``piece_bytes``, else ``default_bytes``), as the builders cut them."""
    piece_bytes = group.piece_bytes if group.piece_bytes is not None else default_bytes
    return pieces_per_span(np.asarray(counts, dtype=np.int64), group.itemsize, piece_bytes)[0]


def chunk_counts(group: Group, parts: int) -> Index:
    """Elements in each of the ``parts`` chunks of the group's buffer (:meth:`Group.chunks`)."""
    starts, stops = group.chunks(parts)
    counts: Index = stops - starts
    return counts
