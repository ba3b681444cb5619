"""The routes a vectorised run uses, and the max-min shares of the sets of flows on them.

:class:`Routes` routes each (sender, receiver) pair of a schedule once, when a block first uses
it, and keeps per pair what the engine reads per message: the route's latency, its network
proxy time, its links (numbered as the capacity timeline numbers them) and the rate a flow
gets alone on it. It also keeps the links' capacities now (the capacity timeline's steps and
failed links change them: :meth:`Routes.set_capacity`, :meth:`Routes.reroute`), the flows on
each link, and remembers the max-min rates of the sets of flows it solved
(:meth:`Routes.shares`) and of every flow in the whole sets it met (:meth:`Routes.keep_whole`):
a pipeline's steady state meets the same sets again and again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

import numpy as np

from simulator.engine.kernel import (
    INF,
    CapacityTimeline,
    lone_rate,
    lone_rates,
    max_min_rates,
    ranges,
)
from simulator.model.machine import Machine
from simulator.model.routing import Routing

SHARES_BYTES = 32 << 20
"""How much memory :meth:`Routes.shares` may keep sets of flows and their rates in (the
latest first): a pipeline's repeating sets are small, a ``direct`` of 16,000 flows' are not."""


WORDS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
"""The unsigned integer as wide as 1, 2, 4 or 8 bools."""


def rows_any(mask: np.ndarray) -> np.ndarray:
    """Whether each row of a C-contiguous bool matrix holds a True, by reading its bools
    (bytes of 0 or 1) as whole unsigned words, nonzero exactly where a byte is: numpy's
    ``any`` along a short last axis costs several times that.

    >>> rows_any(np.array([[False, True], [False, False]])).tolist()
    [True, False]
    """
    width = mask.shape[1]
    if width in WORDS:
        hit: np.ndarray = mask.view(WORDS[width])[:, 0] != 0
        return hit
    if width and width % 8 == 0:
        return rows_any(mask.view(np.uint64) != 0)
    wide: np.ndarray = np.asarray(mask.any(axis=1))
    return wide


def mixed(numbers: np.ndarray) -> np.ndarray:
    """64 well-mixed bits for each of ``numbers`` (SplitMix64's finaliser, in numpy's
    wrapping unsigned arithmetic): weights whose sums tell sets apart but for a chance of
    about 2**-64, which a comparison of the sets then settles.

    >>> mixed(np.array([0, 1])).tolist() != mixed(np.array([1, 0])).tolist()
    True
    """
    bits = (numbers.astype(np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
    bits ^= bits >> np.uint64(30)
    bits *= np.uint64(0xBF58476D1CE4E5B9)
    bits ^= bits >> np.uint64(27)
    bits *= np.uint64(0x94D049BB133111EB)
    bits ^= bits >> np.uint64(31)
    return bits


WHOLES_BYTES = 8 << 20
"""How much memory :meth:`Routes.keep_whole` may keep whole sets of flows in (the latest
first): a set by pair costs 16 bytes a pair known, 40 kB on 8 DGX H100 nodes."""


Key = TypeVar("Key", bound=Hashable)
Value = TypeVar("Value")


class _Memo(Generic[Key, Value]):
    """Values by key, the latest used last, within a budget of bytes: keeping one over the
    budget forgets the least recently used first (both memories of :class:`Routes`)."""

    def __init__(self) -> None:
        self._kept: OrderedDict[Key, tuple[Value, int]] = OrderedDict()
        self._bytes = 0

    def __contains__(self, key: object) -> bool:
        """Whether a value is kept for ``key`` (its use unchanged)."""
        return key in self._kept

    def get(self, key: Key) -> Value | None:
        """The value kept for ``key`` (now the latest used), or None."""
        kept = self._kept.get(key)
        if kept is None:
            return None
        self._kept.move_to_end(key)
        return kept[0]

    def keep(self, key: Key, value: Value, size: int, budget: int) -> None:
        """Keep ``value`` (``size`` bytes) for ``key``, then forget the least recently used
        until what is kept fits ``budget``."""
        self._kept[key] = (value, size)
        self._bytes += size
        while self._bytes > budget:
            self._bytes -= self._kept.popitem(last=False)[1][1]

    def clear(self) -> None:
        """Forget everything (the capacities changed)."""
        self._kept.clear()
        self._bytes = 0


class Routes:
    """Latency and links of every (sender, receiver) pair the messages use, each routed once,
    when a block first uses it (pair keys kept sorted for a vectorised lookup)."""

    def __init__(self, machine: Machine, timeline: CapacityTimeline) -> None:
        self.machine = machine
        self.routing = machine.routing
        """The routes now (links that failed change them: :meth:`reroute`)."""
        self.nodes: tuple[str, ...] = machine.placement
        """The node of each endpoint: the ranks' GPUs, then any switches (:meth:`switches`)."""
        self.number = timeline.number
        self.capacity = timeline.at_start() if timeline else timeline.nominal
        """Every link's capacity now (the capacity timeline's steps change it)."""
        none = np.zeros(0, dtype=np.int64)
        self.keys, self.ids = none, none
        """Pair keys (sender × ranks + receiver), sorted, and the pair number of each."""
        self.key_of = none
        """Each pair's key, by pair number."""
        self.latency = np.zeros(0)
        self.proxy = np.zeros(0)
        """Each pair's network proxy time per message (``Route.proxy_s``)."""
        self.count, self.first, self.links = none, none, none
        self.alone = np.zeros(0)
        """Each pair's rate alone on its route: the smallest capacity it crosses."""
        self.users = np.zeros(len(self.capacity), dtype=np.int64)
        """Active flows on each link, kept as flows join and leave."""
        self.weight = np.zeros(0, dtype=np.uint64)
        """Each pair's fingerprint weight: a set of flows is known by the sum of its flows'
        pairs' weights (:meth:`whole`), which flows joining and leaving keep up to date."""
        self._last: tuple[np.ndarray, np.ndarray] = (none, none)  # the last block's keys, pairs
        self._table: np.ndarray | None = None  # each pair's links in a row (:meth:`table`)
        self._crossers: tuple[np.ndarray, np.ndarray] | None = None  # (:meth:`crossers`)
        self._shares: _Memo[tuple[bytes, bytes], np.ndarray] = _Memo()
        self._wholes: _Memo[int, tuple[np.ndarray, np.ndarray]] = _Memo()

    def whole(self, fingerprint: int, copies: np.ndarray) -> np.ndarray | None:
        """The max-min rate of every pair (by pair number) when ``copies[p]`` flows are on
        each pair ``p``, if :meth:`keep_whole` kept this very set (its ``fingerprint`` found,
        then its counts compared whole: a fingerprint alone could collide), else None."""
        kept = self._wholes.get(fingerprint)
        if kept is None or not np.array_equal(kept[0], copies):
            return None
        return kept[1]

    def keep_whole(self, fingerprint: int, copies: np.ndarray, rates: np.ndarray) -> None:
        """Remember ``rates`` (by pair) for the set of flows ``copies`` counts (by pair): the
        max-min rates are a function of the set and the capacities, which forget every set
        when they change; the latest sets up to :data:`WHOLES_BYTES`."""
        if fingerprint not in self._wholes:
            self._wholes.keep(fingerprint, (copies, rates), copies.nbytes + rates.nbytes,
                              WHOLES_BYTES)

    def recall(self, routed: np.ndarray, copies: np.ndarray) -> np.ndarray | None:
        """The rates :meth:`shares` remembers for this set of flows, None if it does not."""
        return self._shares.get((routed.tobytes(), copies.tobytes()))

    def shares(self, routed: np.ndarray, copies: np.ndarray, compiled: bool = False) -> np.ndarray:
        """The max-min rate of a flow on each of the ``routed`` pairs, ``copies`` flows on
        each: solved once per set of flows and remembered (a pipeline's steady state meets the
        same sets again and again; the rates are a function of the set and the capacities,
        which forget every set when they change), the latest sets up to :data:`SHARES_BYTES`.
        ``compiled``: solved in numba's loops where it is installed (the same bits;
        :func:`~simulator.engine.compiled.wanted`)."""
        rates = self.recall(routed, copies)
        if rates is not None:
            return rates
        key = (routed.tobytes(), copies.tobytes())
        flow_of = np.repeat(np.arange(len(routed)), self.count[routed])
        rates = max_min_rates(flow_of, self.links_of(routed), len(routed), self.capacity,
                              copies[flow_of], compiled=compiled)
        self._shares.keep(key, rates, len(key[0]) + len(key[1]) + rates.nbytes, SHARES_BYTES)
        return rates

    def switches(self, names: tuple[str, ...]) -> None:
        """Endpoints ``-1 - g`` are switch ``names[g]`` (before any pair is routed)."""
        self.nodes = (*self.machine.placement, *names)

    def pairs(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """The pair number of each (sender, receiver), routing the pairs not met before."""
        nodes, ranks = len(self.nodes), self.machine.ranks
        if nodes > ranks:  # switch endpoints -1 - g are nodes ranks + g
            src, dst = np.where(src < 0, ranks - 1 - src, src), np.where(dst < 0, ranks - 1 - dst,
                                                                          dst)
        key = src * nodes + dst
        if np.array_equal(key, self._last[0]):  # blocks of whole steps repeat their pairs
            return self._last[1]
        at = np.searchsorted(self.keys, key)
        found = at < len(self.keys)
        found[found] = self.keys[at[found]] == key[found]
        if not found.all():
            self._add(np.unique(key[~found]))
            at = np.searchsorted(self.keys, key)
        pair: np.ndarray = self.ids[at]
        self._last = (key, pair)
        return pair

    def _add(self, keys: np.ndarray) -> None:
        """Route the pairs of ``keys`` (not met before), numbered on from the pairs known."""
        latency: list[float] = []
        proxy: list[float] = []
        counts: list[int] = []
        links: list[int] = []
        alone: list[float] = []
        for key in keys.tolist():
            src, dst = divmod(key, len(self.nodes))
            if src == dst:  # a join marker: no route, no time (Schedule.markers)
                latency.append(0.0)
                proxy.append(0.0)
                alone.append(INF)
                counts.append(0)
                continue
            route = self.routing.route(self.nodes[src], self.nodes[dst])
            latency.append(route.latency_s)
            proxy.append(route.proxy_s)
            alone.append(lone_rate(self.capacity[self.number[link]] for link in route.links))
            counts.append(len(route.links))
            links.extend(self.number[link] for link in route.links)
        ids = np.arange(len(self.latency), len(self.latency) + len(keys), dtype=np.int64)
        self.latency = np.concatenate([self.latency, latency])
        self.proxy = np.concatenate([self.proxy, proxy])
        self.alone = np.concatenate([self.alone, alone])
        self.count = np.concatenate([self.count, np.array(counts, dtype=np.int64)])
        self.first = np.cumsum(self.count) - self.count
        self.links = np.concatenate([self.links, np.array(links, dtype=np.int64)])
        self.key_of = np.concatenate([self.key_of, keys])
        self.weight = np.concatenate([self.weight, mixed(ids)])
        keys, ids = np.concatenate([self.keys, keys]), np.concatenate([self.ids, ids])
        order = np.argsort(keys, kind="stable")
        self.keys, self.ids = keys[order], ids[order]
        self._table = self._crossers = None

    def crossing(self, failed: frozenset[tuple[str, str]]) -> np.ndarray:
        """The pairs whose route crosses a link of ``failed``, in pair order."""
        down = np.array([self.number[link] for link in failed], dtype=np.int64)
        pair_of = np.repeat(np.arange(len(self.count)), self.count)
        return np.unique(pair_of[np.isin(self.links, down)])

    def reroute(self, routing: Routing, pairs: np.ndarray) -> None:
        """Links failed: routes from now on are ``routing``'s (which avoids them), and ``pairs``
        (those whose route crossed one) take their new route (latency, links and lone rate)."""
        self.routing = routing
        count = self.count.copy()
        fresh: list[int] = []
        for pair in pairs.tolist():
            src, dst = divmod(int(self.key_of[pair]), len(self.nodes))
            route = self.routing.route(self.nodes[src], self.nodes[dst])
            self.latency[pair], self.proxy[pair] = route.latency_s, route.proxy_s
            count[pair] = len(route.links)
            fresh.extend(self.number[link] for link in route.links)
        first = np.cumsum(count) - count
        links = np.empty(int(count.sum()), dtype=np.int64)
        kept = np.ones(len(count), dtype=bool)
        kept[pairs] = False
        links[ranges(first[kept], count[kept])] = self.links[ranges(self.first[kept],
                                                                    self.count[kept])]
        links[ranges(first[pairs], count[pairs])] = fresh
        self.count, self.first, self.links = count, first, links
        self._table = self._crossers = None
        self.set_capacity(np.zeros(0, dtype=np.int64), np.zeros(0))

    def set_capacity(self, links: np.ndarray, capacities: np.ndarray) -> None:
        """New capacities for ``links``; every pair's lone rate follows."""
        self.capacity[links] = capacities
        self._shares.clear()
        self._wholes.clear()
        pairs = len(self.count)
        self.alone = lone_rates(np.repeat(np.arange(pairs), self.count), self.links, pairs,
                                self.capacity)

    def table(self, pairs: np.ndarray) -> np.ndarray:
        """The links of each pair's route in a row, padded with link ``len(self.capacity)``
        (one past the links: on no route) to the longest route's length rounded up to 1, 2, 4
        or a multiple of 8 (:func:`rows_any` reads a row of those as whole words). Built once per routing
        (routes change only as pairs are added or links fail), then one gather: a route
        crosses a few links, so the padding is small."""
        if self._table is None:
            longest = int(self.count.max(initial=0))
            width = 1 << (longest - 1).bit_length() if longest <= 8 else -(-longest // 8) * 8
            table = np.full((len(self.count), width), len(self.capacity), dtype=np.int64)
            table[np.repeat(np.arange(len(self.count)), self.count),
                  np.arange(len(self.links)) - np.repeat(self.first, self.count)] = self.links
            self._table = table
        rows: np.ndarray = self._table.take(pairs, axis=0)  # numpy indexes rows far slower
        return rows

    def crossers(self, links: np.ndarray) -> np.ndarray:
        """The pairs whose route crosses each of ``links`` (distinct links), concatenated link
        by link (a pair once per link of ``links`` it crosses)."""
        starts, pairs = self.crossers_index()
        found: np.ndarray = pairs[ranges(starts[links], starts[links + 1] - starts[links])]
        return found

    def crossers_index(self) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`crossers` as a CSR index of the links: link l's crossers are
        ``pairs[starts[l]:starts[l + 1]]``. Built once per routing, as :meth:`table` is."""
        if self._crossers is None:
            pair_of = np.repeat(np.arange(len(self.count), dtype=np.int64), self.count)
            order = np.argsort(self.links, kind="stable")
            starts = np.zeros(len(self.capacity) + 1, dtype=np.int64)
            np.cumsum(np.bincount(self.links, minlength=len(self.capacity)), out=starts[1:])
            self._crossers = (starts, pair_of[order])
        return self._crossers

    def links_of(self, pairs: np.ndarray) -> np.ndarray:
        """The links of each pair's route, concatenated: the rows of :meth:`table` without
        their padding (in the same order as each pair's slice of ``links``)."""
        padded = self.table(pairs).ravel()
        links: np.ndarray = padded.compress(padded < len(self.capacity))
        return links
