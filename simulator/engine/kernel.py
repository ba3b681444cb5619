"""The network kernel: the rules of the flow-level network and of a GPU's reductions, stated
once, which both engines call (the SimPy engine per connected component of flows, the
vectorised engine once per instant, over the component of the links the instant changed).

- :func:`max_min_rates`: max-min fair rates of flows over capacitated links, by progressive
  filling (Bertsekas & Gallager, *Data Networks*, 2nd ed., §6.5.2). Every flow's rate rises
  together until some link saturates; the flows on it are frozen at that share, which is taken
  from every other link they cross; repeat. The result is the unique allocation in which no flow
  can gain without taking from a flow that has no more.
- :func:`lone_rates`: a flow alone on its links gets its bottleneck: the least capacity it
  crosses (what progressive filling gives it, without the rounds).
- :func:`serve_in_order`: a GPU's reducer serves one reduction at a time, first come
  first served: a reduction starts when it is asked for or when the one before it ends,
  whichever is later, and holds the reducer for its duration. A GPU's network proxy serves the
  messages it posts by the same rule (:func:`serve_spans`): a message goes when the proxy gets
  to it, and holds the proxy for its ``proxy_s``.
- :class:`CapacityTimeline`: each link's capacity as a step function of time, from the
  machine's :class:`~simulator.model.machine.CapacityEvent` list (``Machine.capacity_events``),
  and the links that fail (``Machine.outages``); the engines apply its instants as they reach
  them, re-route the flows that cross a failed link
  (:meth:`~simulator.model.routing.Routing.rerouted`), and re-share the flows that cross the
  links it changes.

**Why the arithmetic is fixed here.** Every round of :func:`max_min_rates` freezes the flows of
*every* link at the round's least share at once, and takes ``k · share`` from a link that ``k``
of them cross, in one operation. A link's numbers then depend only on the flows that cross it,
never on the order flows were listed in nor on flows elsewhere: a link that none of a round's
frozen flows cross loses ``0 · share`` (exactly nothing). So one connected component solved
alone gets bit for bit the rates it gets inside a solution over every active flow, and the two
engines, which solve different sets, agree to the last bit on the same flows.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from simulator.engine.compiled import compiled_filling
from simulator.model.machine import CapacityEvent, Outage
from simulator.model.routing import LinkId

INF = float("inf")

Flow = TypeVar("Flow", bound=Hashable)
Link = TypeVar("Link", bound=Hashable)


def lone_rates(flow_of: np.ndarray, link_of: np.ndarray, flows: int,
               capacity: np.ndarray) -> np.ndarray:
    """Each flow's least capacity among the links it crosses (entry k: flow ``flow_of[k]``
    crosses link ``link_of[k]``): its rate when no other flow shares its links.

    >>> lone_rates(np.array([0, 0, 1]), np.array([0, 1, 1]), 2, np.array([10., 30.])).tolist()
    [10.0, 30.0]
    """
    rates = np.full(flows, INF)
    np.minimum.at(rates, flow_of, capacity[link_of])
    return rates


def lone_rate(capacities: Iterable[float]) -> float:
    """:func:`lone_rates` for one flow, given the capacities of its links (the SimPy engine's
    path for a flow that is alone, where building arrays would cost more than the answer)."""
    return min(capacities)


def max_min_rates(flow_of: np.ndarray, link_of: np.ndarray, flows: int,
                  capacity: np.ndarray, copies: np.ndarray | None = None, *,
                  compiled: bool = False) -> np.ndarray:
    """Max-min fair rate of ``flows`` flows, entry k saying flow ``flow_of[k]`` crosses link
    ``link_of[k]`` (links numbered 0..len(capacity)-1; a link listed once per flow), by
    progressive filling (Bertsekas & Gallager, *Data Networks*, §6.5.2), every tightest link
    of a round at once (the module docstring says why).

    ``copies`` (entry k: how many identical flows entry k's flow stands for, None: one) lets
    flows on one route, which max-min gives one rate, be shared as one: the counts it sums are
    whole numbers either way, so the rates are those of the flows listed one by one, to the bit.

    Where numba is installed (the ``fast`` extra), an instance of :data:`FILLING_ENTRIES`
    entries or more, or any when ``compiled`` (a large fabric's or a long run's re-shares:
    :func:`~simulator.engine.compiled.wanted`), fills by the same rounds compiled
    (:mod:`simulator.engine.compiled`), to the bit.

    A large instance's rounds touch only the links of the flows they freeze
    (:class:`_Filling`), not every entry: a dense all-to-all's solution takes a round per
    distinct share (361 for ``direct`` on the k = 8 fat-tree, over 92,928 entries), so its cost
    is then the rounds times the links, not times the entries.

    >>> flow_of, link_of = np.array([0, 1, 1, 2]), np.array([0, 0, 1, 1])
    >>> max_min_rates(flow_of, link_of, 3, np.array([10., 30.]))
    array([ 5.,  5., 25.])
    >>> max_min_rates(np.array([0, 1]), np.array([0, 1]), 2, np.array([10., 30.]),
    ...               np.array([2, 1]))  # two flows on link 0, one on link 1
    array([ 5., 30.])
    """
    users = np.bincount(link_of, minlength=len(capacity)) if copies is None else np.bincount(
        link_of, weights=copies, minlength=len(capacity))
    if users.max(initial=0) <= 1:  # no link shared: each flow at its bottleneck
        return lone_rates(flow_of, link_of, flows, capacity)
    large = len(flow_of) >= FILLING_ENTRIES
    loops = compiled_filling() if large or compiled else None
    if loops is not None:  # the same rounds in loops (the ``fast`` extra)
        return loops(flow_of, link_of, flows, capacity.astype(np.float64, copy=False),
                     entry_weights(copies, len(flow_of)), users.astype(np.float64, copy=False))
    if large:
        return _Filling(flow_of, link_of, flows, capacity, users, copies).rates()
    return _plain_filling(flow_of, link_of, flows, capacity, users, copies)


FILLING_ENTRIES = 16384
"""From how many entries :func:`max_min_rates` fills by :class:`_Filling` (each round touching
the links of the flows it freezes) rather than by :func:`_plain_filling` (each round over
every entry left): measured on random instances (4 links a flow, 20 to 1,000 links) and on the
k = 8 fat-tree's all-to-all (92,928 entries, 768 links, 361 rounds: 2.4× faster), the plain
statement is faster below some 12,000 entries, whatever the links. Both give the same rates
to the bit (tests/test_kernel.py)."""


def _plain_filling(flow_of: np.ndarray, link_of: np.ndarray, flows: int, capacity: np.ndarray,
                   users: np.ndarray, copies: np.ndarray | None) -> np.ndarray:
    """Progressive filling as stated: each round recomputes every link's share and re-counts
    every entry not yet frozen (the cheaper way for small instances)."""
    links = np.flatnonzero(users)
    local = renumbered_links(links, link_of, len(capacity))
    users = users[links]
    left = capacity[links].astype(np.float64)
    rates = np.full(flows, np.nan)
    unfrozen = users.astype(np.float64)
    while len(flow_of):  # the entries of flows not yet frozen, fewer each round
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(unfrozen > 0, np.maximum(left, 0.0) / unfrozen, INF)
        level = share.min()
        tight = share == level
        frozen = np.zeros(flows, dtype=bool)  # the flows crossing a tightest link, still unfrozen
        frozen[flow_of[tight[local]]] = True
        rates[frozen] = level
        done = frozen[flow_of]
        counts = np.bincount(local[done], minlength=len(links)) if copies is None else \
            np.bincount(local[done], weights=copies[done], minlength=len(links))
        left -= counts * level
        unfrozen -= counts
        flow_of, local = flow_of[~done], local[~done]
        if copies is not None:
            copies = copies[~done]
    return rates


class _Filling:
    """Progressive filling over the links in use, each round's work limited to the links of
    the flows it freezes.

    Bit for bit the rounds of the plain statement (every link's share recomputed, every
    unfrozen entry re-counted each round): a link none of a round's frozen flows cross keeps
    its ``left``, ``unfrozen`` and so its share exactly (the plain statement takes ``0 · share``
    from it, which changes no float), and a touched link gets the same subtraction, of a count
    that is a sum of whole numbers (exact in either order)."""

    def __init__(self, flow_of: np.ndarray, link_of: np.ndarray, flows: int,
                 capacity: np.ndarray, users: np.ndarray, copies: np.ndarray | None) -> None:
        links = np.flatnonzero(users)
        local = renumbered_links(links, link_of, len(capacity))
        self.flows = flows
        self.left = capacity[links].astype(np.float64)
        self.unfrozen = users[links].astype(np.float64)
        self.weight = entry_weights(copies, len(flow_of))
        # the entries by link (to find a tight link's flows) and by flow (to find their links)
        by_link = _grouped(local, len(links))
        self.link_flows = flow_of[by_link]
        self.link_start = np.concatenate(([0], np.cumsum(np.bincount(local,
                                                                      minlength=len(links)))))
        if len(flow_of) < 2 or bool((flow_of[1:] >= flow_of[:-1]).all()):  # listed flow by flow
            self.flow_links, self.flow_weight = local, self.weight
        else:
            by_flow = _grouped(flow_of, flows)
            self.flow_links, self.flow_weight = local[by_flow], self.weight[by_flow]
        self.flow_start = np.concatenate(([0], np.cumsum(np.bincount(flow_of, minlength=flows))))
        self.entries = len(flow_of)
        self.slots = np.empty(flows, dtype=np.int64)  # scratch for :meth:`_newly_frozen`

    def rates(self) -> np.ndarray:
        """Every flow's rate (NaN for a flow that crosses no link)."""
        rates = np.full(self.flows, np.nan)
        frozen = np.zeros(self.flows, dtype=bool)
        links = len(self.left)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(self.unfrozen > 0, np.maximum(self.left, 0.0) / self.unfrozen, INF)
            left_entries = self.entries
            while left_entries:
                level = share.min()
                now = self._newly_frozen(np.flatnonzero(share == level), frozen)
                frozen[now] = True
                rates[now] = level
                begin = self.flow_start[now]
                entries = ranges(begin, self.flow_start[now + 1] - begin)
                counts = np.bincount(self.flow_links[entries], weights=self.flow_weight[entries],
                                     minlength=links)
                touched = np.flatnonzero(counts)
                counts = counts[touched]
                self.left[touched] -= counts * level
                unfrozen = self.unfrozen[touched] - counts
                self.unfrozen[touched] = unfrozen
                share[touched] = np.where(unfrozen > 0,
                                          np.maximum(self.left[touched], 0.0) / unfrozen, INF)
                left_entries -= len(entries)
        return rates

    def _newly_frozen(self, tight: np.ndarray, frozen: np.ndarray) -> np.ndarray:
        """The flows not yet frozen that cross a ``tight`` link, each once, in no set order
        (a round's counts are sums of whole numbers, the same in any order): :func:`distinct`,
        where ``np.unique`` would hash or sort."""
        if len(tight) == 1:  # a link lists each of its flows once
            link = int(tight[0])
            flows = self.link_flows[self.link_start[link]:self.link_start[link + 1]]
            alone: np.ndarray = flows[~frozen[flows]]
            return alone
        starts = self.link_start[tight]
        flows = self.link_flows[ranges(starts, self.link_start[tight + 1] - starts)]
        return distinct(flows[~frozen[flows]], self.slots)


def entry_weights(copies: np.ndarray | None, entries: int) -> np.ndarray:
    """How many identical flows each entry stands for, as floats (one each without
    ``copies``)."""
    weights: np.ndarray = np.ones(entries) if copies is None else copies.astype(np.float64)
    return weights


def distinct(values: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """``values`` (non-negative, below ``len(slots)``) each once, in their order: one scatter
    of positions into ``slots`` (scratch, any contents) and one gather, where ``np.unique``
    would sort. Whichever of a repeated value's positions the scatter keeps, exactly that one
    reads itself back.

    >>> sorted(distinct(np.array([3, 1, 3, 0]), np.empty(4, dtype=np.int64)).tolist())
    [0, 1, 3]
    """
    at = np.arange(len(values))
    slots[values] = at
    kept: np.ndarray = values[slots[values] == at]
    return kept


def _grouped(keys: np.ndarray, count: int) -> np.ndarray:
    """The positions of ``keys`` (each below ``count``) grouped by key, in order within a key:
    a stable sort, by radix on 16-bit keys where they fit (numpy sorts those in linear time)."""
    narrow = keys.astype(np.uint16) if count <= 1 << 16 else keys
    order: np.ndarray = np.argsort(narrow, kind="stable")
    return order


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(start, start + length)`` for every pair, in one pass.

    >>> ranges(np.array([5, 0]), np.array([2, 3])).tolist()
    [5, 6, 0, 1, 2]
    """
    if len(lengths) and (lengths == lengths[0]).all():  # all alike: broadcast
        return (starts[:, None] + np.arange(int(lengths[0]), dtype=np.int64)).ravel()
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    indices: np.ndarray = np.arange(total, dtype=np.int64)
    indices += np.repeat(starts - (ends - lengths), lengths)
    return indices


def renumbered_links(links: np.ndarray, link_of: np.ndarray, total: int) -> np.ndarray:
    """``link_of`` renumbered as positions in ``links`` (sorted, holding every entry of
    ``link_of``): by a lookup table where the links are few beside the entries (one gather),
    by binary search where a table over all ``total`` links would cost more to fill."""
    if total <= 4 * len(link_of):
        table = np.empty(total, dtype=np.int64)
        table[links] = np.arange(len(links), dtype=np.int64)
        renumbered: np.ndarray = table[link_of]
        return renumbered
    searched: np.ndarray = np.searchsorted(links, link_of)
    return searched


def max_min_of(flow_links: Mapping[Flow, Sequence[Link]],
               capacity: Mapping[Link, float]) -> dict[Flow, float]:
    """:func:`max_min_rates` keyed by name: each flow's links by name, each link's capacity.

    >>> max_min_of({"a": ["x"], "b": ["x", "y"], "c": ["y"]}, {"x": 10.0, "y": 30.0})
    {'a': 5.0, 'b': 5.0, 'c': 25.0}
    """
    number: dict[Link, int] = {}
    link_of = [number.setdefault(link, len(number)) for links in flow_links.values()
               for link in links]
    flow_of = np.repeat(np.arange(len(flow_links)), [len(links) for links in flow_links.values()])
    rates = max_min_rates(flow_of, np.array(link_of, dtype=np.int64), len(flow_links),
                          np.array([capacity[link] for link in number], dtype=np.float64))
    return dict(zip(flow_links, rates.tolist(), strict=True))


def serve_next(free_at: float, now: float, duration: float) -> tuple[float, float]:
    """Start and end of a job asked for at ``now`` that holds a server for ``duration``, the
    server being free from ``free_at``: first come, first served, one job at a time (a GPU's
    reducer, :class:`~simulator.model.machine.GpuSpec`). The server is then free from
    the end.

    >>> serve_next(5.0, 2.0, 1.0)
    (5.0, 6.0)
    """
    start = max(now, free_at)
    return start, start + duration


def serve_in_order(free_at: np.ndarray, servers: np.ndarray, now: float,
                   durations: np.ndarray) -> np.ndarray:
    """When each of the jobs asked for at ``now`` ends, by :func:`serve_next`: job k holds
    server ``servers[k]`` for ``durations[k]``, the jobs of one server one after the other in the
    order given. ``free_at`` (when each server is next free) is updated in place.

    >>> free_at = np.array([0.0, 5.0])
    >>> serve_in_order(free_at, np.array([1, 0, 1]), 2.0, np.array([1.0, 1.0, 2.0])).tolist()
    [6.0, 3.0, 8.0]
    >>> free_at.tolist()
    [3.0, 8.0]
    """
    return serve_spans(free_at, servers, now, durations)[1]


def serve_spans(free_at: np.ndarray, servers: np.ndarray, now: float,
                durations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """When each of the jobs asked for at ``now`` starts and ends, by :func:`serve_next`, as
    :func:`serve_in_order` serves them (a network proxy's messages start as it posts them,
    :class:`~simulator.model.routing.Route`'s ``proxy_s``).

    >>> free_at = np.array([0.0, 5.0])
    >>> [t.tolist() for t in serve_spans(free_at, np.array([1, 1]), 2.0, np.array([1.0, 1.0]))]
    [[5.0, 6.0], [6.0, 7.0]]
    """
    if len(servers) == 1 or np.bincount(servers).max() == 1:  # one job per server: at once
        start: np.ndarray = np.maximum(now, free_at[servers])
        finish: np.ndarray = start + durations
        free_at[servers] = finish
        return start, finish
    start, finish = np.empty(len(servers)), np.empty(len(servers))
    for k in np.argsort(servers, kind="stable").tolist():
        start[k], finish[k] = serve_next(float(free_at[servers[k]]), now, float(durations[k]))
        free_at[servers[k]] = finish[k]
    return start, finish


@dataclass(frozen=True)
class CapacityStep:
    """One instant of a :class:`CapacityTimeline`: at ``at_s``, link ``links[i]`` (numbered as
    the timeline's links) gets capacity ``capacities[i]``, and the links ``down`` fail."""

    at_s: float
    links: np.ndarray
    capacities: np.ndarray
    down: frozenset[LinkId] = frozenset()


class CapacityTimeline:
    """Each link's capacity as a step function of time: its nominal capacity until the first
    event on it, then ``nominal × factor`` of the latest event at or before the time (a factor
    scales the nominal capacity, not the current one, so ``factor: 1`` restores a link; at 0
    the link carries nothing for a while, and the flows crossing it wait at rate 0).

    ``nominal`` maps every link to its capacity; links are numbered in its order. ``steps``
    holds one :class:`CapacityStep` per distinct event time, in time order; several events on
    one link at one time: the last listed wins. An outage at a time is a step too, which
    names the links failing then (``down``); a failed link keeps its capacity, which no flow
    uses any more. Without events the timeline is constant and the engines never look at it
    again.
    """

    def __init__(self, nominal: Mapping[tuple[str, str], float],
                 events: Sequence[CapacityEvent] = (), outages: Sequence[Outage] = ()) -> None:
        self.number = {link: i for i, link in enumerate(nominal)}
        self.nominal = np.array(list(nominal.values()), dtype=np.float64)
        by_time: dict[float, dict[int, float]] = {}
        for event in events:  # each names a link of ``nominal`` (Machine checks that)
            i = self.number[event.link]
            by_time.setdefault(float(event.at_s), {})[i] = float(self.nominal[i] * event.factor)
        failing: dict[float, set[LinkId]] = {}
        for outage in outages:
            failing.setdefault(float(outage.at_s), set()).add(outage.link)
            by_time.setdefault(float(outage.at_s), {})
        self.steps = tuple(
            CapacityStep(at, np.array(list(changes), dtype=np.int64),
                         np.array(list(changes.values()), dtype=np.float64),
                         frozenset(failing.get(at, ())))
            for at, changes in sorted(by_time.items()))

    def __bool__(self) -> bool:
        """Whether any capacity ever changes."""
        return bool(self.steps)

    def at_start(self) -> np.ndarray:
        """Every link's capacity at time 0 (the events at 0 applied)."""
        capacity = self.nominal.copy()
        for step in self.steps:
            if step.at_s > 0:
                break
            capacity[step.links] = step.capacities
        return capacity

    def down_at_start(self) -> frozenset[LinkId]:
        """The links failed at time 0."""
        return frozenset().union(*(step.down for step in self.steps if step.at_s <= 0))

    def later(self) -> tuple[CapacityStep, ...]:
        """The steps after time 0, in time order (those at 0 are in :meth:`at_start`)."""
        return tuple(step for step in self.steps if step.at_s > 0)
