"""Hop distances over a topology's cables, as numpy arrays: the hops from the nearest GPU and the
diameter between GPUs, fast enough for fabrics of tens of thousands of nodes.

Edges count as undirected hops (a cable is one hop either way). The diameter is found by
bounding eccentricities (Takes & Kosters, "Determining the diameter of small world networks",
CIKM 2011), restricted to GPUs: after a BFS from GPU v of GPU eccentricity e(v), every GPU w has
max(d(v,w), e(v) − d(v,w)) ≤ e(w) ≤ e(v) + d(v,w), so a GPU whose upper bound is at most the
largest eccentricity found cannot lengthen the diameter and needs no BFS of its own. On the
structured fabrics every GPU has the same eccentricity (a torus, a fat tree and a DGX cluster
look alike from each of their GPUs) and no bound ever meets before every GPU was a source; so once
a sweep rules out too few GPUs, the eccentricities of all those left are computed together by a
bit-parallel BFS (one bit per source GPU, 64 to a machine word, every level one pass over the
edges). On the 8,192-GPU torus that takes under half a second, where a networkx BFS from every GPU takes
minutes.

>>> import networkx as nx
>>> ring = nx.cycle_graph(6, create_using=nx.DiGraph)
>>> nx.set_node_attributes(ring, "gpu", "kind")
>>> hops = Hops(ring)
>>> gpu_diameter(hops, hops.indices(list(ring)))
3
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import networkx as nx
import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Words = npt.NDArray[np.uint64]

_SLOTS = 16
"""Neighbours 0..15 of every node are ORed in as whole columns; a node's further neighbours (a
switch's many ports) by one segmented reduction."""
_WORDS_PER_BATCH = 1 << 22
"""At most this many 64-bit words in a reach array (32 MiB): sources are taken in batches."""
SWEEP_GAIN = 64
"""Bounding sweeps go on while each rules out at least this many GPUs besides its source (about
what one word of the bit-parallel BFS costs, 64 sources); then the bit-parallel BFS finishes."""


class Hops:
    """A graph's nodes numbered 0..n−1 and its cables as undirected neighbour lists (CSR)."""

    def __init__(self, graph: nx.DiGraph) -> None:
        self.nodes: list[Hashable] = list(graph)
        self._index = {node: i for i, node in enumerate(self.nodes)}
        n, m = len(self.nodes), graph.number_of_edges()
        a = np.fromiter((self._index[u] for u, _ in graph.edges), np.int64, m)
        b = np.fromiter((self._index[v] for _, v in graph.edges), np.int64, m)
        keys = np.unique(np.concatenate([a * n + b, b * n + a]))  # each pair once, both ways
        owner, neighbour = np.divmod(keys, max(n, 1))
        keep = owner != neighbour
        owner, self.neighbours = owner[keep], neighbour[keep]
        self.start: Ints = np.searchsorted(owner, np.arange(n + 1)).astype(np.int64)
        self.degree: Ints = np.diff(self.start)
        self._slots: list[tuple[Ints | None, Ints]] = []
        for k in range(_SLOTS):
            rows = np.flatnonzero(self.degree > k)
            if rows.size == 0:
                break
            self._slots.append((None if rows.size == n else rows, self.neighbours[self.start[rows] + k]))
        heavy = np.flatnonzero(self.degree > _SLOTS)
        self._heavy = heavy
        tail = self.degree[heavy] - _SLOTS
        self._tail = self.neighbours[_ranges(self.start[heavy] + _SLOTS, tail)]
        self._tail_starts = np.concatenate([[0], np.cumsum(tail)[:-1]]).astype(np.int64)

    def indices(self, nodes: Sequence[Hashable]) -> Ints:
        """The numbers of ``nodes``."""
        return np.fromiter((self._index[node] for node in nodes), np.int64, len(nodes))

    def distances(self, sources: Ints) -> Ints:
        """Hops from the nearest of ``sources`` to every node (−1: not reachable)."""
        dist = np.full(len(self.nodes), -1, np.int64)
        frontier = np.unique(sources)
        dist[frontier] = 0
        level = 0
        while frontier.size:
            level += 1
            reached = self.neighbours[_ranges(self.start[frontier], self.degree[frontier])]
            frontier = np.unique(reached[dist[reached] < 0])
            dist[frontier] = level
        return dist

    def eccentricities(self, sources: Ints, targets: Ints) -> Ints:
        """For each source, the most hops to any of ``targets`` (all reachable from every source),
        by a bit-parallel BFS from every source at once, in batches."""
        n = len(self.nodes)
        per_batch = 64 * max(1, _WORDS_PER_BATCH // max(n, 1))
        return np.concatenate([self._batch(sources[i:i + per_batch], targets)
                               for i in range(0, len(sources), per_batch)] or [np.zeros(0, np.int64)])

    def _batch(self, sources: Ints, targets: Ints) -> Ints:
        count = len(sources)
        words = (count + 63) // 64
        reach = np.zeros((len(self.nodes), words), np.uint64)
        bit = np.arange(count)  # source i is bit i % 64 of word i // 64 (sources are distinct)
        reach[sources, bit // 64] = np.left_shift(np.uint64(1), (bit % 64).astype(np.uint64))
        ecc = np.full(count, -1, np.int64)
        level = 0
        while True:
            covered = np.bitwise_and.reduce(reach[targets], axis=0)  # bit s: s reached every target
            done = np.unpackbits(covered.astype("<u8").view(np.uint8), bitorder="little")[:count] == 1
            ecc[done & (ecc < 0)] = level
            if (ecc >= 0).all():
                return ecc
            reach = self._step(reach)
            level += 1

    def _step(self, reach: Words) -> Words:
        """Every node's bits ORed with its neighbours' (one BFS level for every source)."""
        after = reach.copy()
        for rows, columns in self._slots:
            if rows is None:
                after |= reach[columns]
            else:
                after[rows] |= reach[columns]
        if self._heavy.size:
            after[self._heavy] |= np.bitwise_or.reduceat(reach[self._tail], self._tail_starts, axis=0)
        return after


def _ranges(starts: Ints, counts: Ints) -> Ints:
    """The concatenation of ``range(start, start + count)`` for each pair, vectorised."""
    total = int(counts.sum())
    before = np.cumsum(counts) - counts
    return np.repeat(starts - before, counts) + np.arange(total, dtype=np.int64)


def gpu_diameter(hops: Hops, gpus: Ints, *, sweep_gain: int = SWEEP_GAIN) -> int | None:
    """The most hops on a shortest path between two of ``gpus`` (0 for fewer than two; None if
    one cannot reach another). ``sweep_gain``: see :data:`SWEEP_GAIN` (1: bound to the end, as
    Takes & Kosters do; a huge number: the bit-parallel BFS after one sweep)."""
    p = len(gpus)
    if p < 2:
        return 0
    dist = hops.distances(gpus[:1])[gpus]
    if (dist < 0).any():
        return None
    lower = np.zeros(p, np.int64)
    upper = np.full(p, np.iinfo(np.int64).max // 2, np.int64)
    candidates = np.ones(p, bool)
    best, source, sweep = 0, 0, 0
    while True:
        ecc = int(dist.max())
        best = max(best, ecc)
        lower = np.maximum(lower, np.maximum(ecc - dist, dist))
        upper = np.minimum(upper, ecc + dist)
        before = int(candidates.sum())
        candidates[source] = False
        known = candidates & (lower == upper)
        if known.any():
            best = max(best, int(lower[known].max()))
        candidates &= ~known & (upper > best)
        left = int(candidates.sum())
        if left == 0 or before - 1 - left < sweep_gain:
            break
        sweep += 1  # Takes & Kosters: alternately the largest upper and the smallest lower bound
        pick = np.where(candidates, upper, -1).argmax() if sweep % 2 else \
            np.where(candidates, lower, upper.max() + 1).argmin()
        source = int(pick)
        dist = hops.distances(gpus[source:source + 1])[gpus]
    if candidates.any():
        best = max(best, int(hops.eccentricities(gpus[candidates], gpus).max()))
    return best
