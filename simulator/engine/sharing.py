"""Max-min fair sharing of link bandwidth among flows, recomputed one component at a time.

A flow crosses a fixed set of links; each link's capacity is split among the flows crossing it,
and each flow gets its bottleneck share: the classic *max-min fair* allocation, computed by
progressive filling (Bertsekas & Gallager, *Data Networks*, 2nd ed., §6.5.2). Raising every flow's
rate together until some link saturates, freezing the flows on that link, and repeating, gives
the unique allocation in which no flow can gain without taking from a flow that has no more.

A flow's arrival or departure can only change the rates of flows connected to it through shared
links, transitively: its *component*. :class:`FairShare` therefore recomputes just that component
(SimGrid's lazy LMM solver does the same), and the result equals a full recomputation over every
active flow, which :func:`max_min_rates` provides and the tests compare against.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Generic, TypeVar

Flow = TypeVar("Flow", bound=Hashable)
Link = TypeVar("Link", bound=Hashable)


def max_min_rates(
    flow_links: Mapping[Flow, Sequence[Link]], capacity: Mapping[Link, float]
) -> dict[Flow, float]:
    """Max-min fair rate of every flow, by progressive filling.

    Links are taken in order of their current fair share (capacity left / flows not yet frozen);
    the flows on the tightest link are frozen at that share, which is taken from every other link
    they cross. Shares only grow as flows freeze, so a lazy heap of shares suffices.

    >>> max_min_rates({"a": ["x"], "b": ["x", "y"], "c": ["y"]}, {"x": 10.0, "y": 30.0})
    {'a': 5.0, 'b': 5.0, 'c': 25.0}
    """
    users: dict[Link, list[Flow]] = {}
    for flow, links in flow_links.items():
        for link in links:
            users.setdefault(link, []).append(flow)
    left = {link: float(capacity[link]) for link in users}
    unfrozen = {link: len(flows) for link, flows in users.items()}
    order = {link: i for i, link in enumerate(users)}  # deterministic tie-break among equal shares
    heap = [(left[link] / unfrozen[link], order[link], link) for link in users]
    heapq.heapify(heap)
    rates: dict[Flow, float] = {}
    while heap:
        share, _, link = heapq.heappop(heap)
        if unfrozen[link] == 0 or max(left[link], 0.0) / unfrozen[link] != share:
            continue  # a fresher entry for this link is further down the heap
        for flow in users[link]:
            if flow in rates:
                continue
            rates[flow] = share
            for other in flow_links[flow]:
                left[other] -= share
                unfrozen[other] -= 1
                if other != link and unfrozen[other] > 0:
                    fresh = max(left[other], 0.0) / unfrozen[other]
                    heapq.heappush(heap, (fresh, order[other], other))
    return {flow: rates[flow] for flow in flow_links}


class FairShare(Generic[Flow, Link]):
    """The active flows on a set of capacitated links and their current max-min fair rates.

    :meth:`add` and :meth:`remove` return the new rate of every flow whose rate was recomputed
    (the changed flow's component); all other rates are untouched by construction.
    """

    def __init__(self, capacity: Mapping[Link, float]) -> None:
        self.capacity = dict(capacity)
        self.rates: dict[Flow, float] = {}
        self._links_of: dict[Flow, tuple[Link, ...]] = {}
        self._flows_on: dict[Link, dict[Flow, None]] = {}  # insertion-ordered sets

    def add(self, flow: Flow, links: Iterable[Link]) -> dict[Flow, float]:
        """Start ``flow`` over ``links`` (at least one) and re-share its component."""
        links = tuple(links)
        if not links:
            raise ValueError("a flow must cross at least one link")
        if flow in self._links_of:
            raise ValueError(f"flow {flow!r} is already active")
        self._links_of[flow] = links
        for link in links:
            self._flows_on.setdefault(link, {})[flow] = None
        return self._reshare(links)

    def remove(self, flow: Flow) -> dict[Flow, float]:
        """End ``flow`` and re-share what is left of its component."""
        links = self._links_of.pop(flow)
        del self.rates[flow]
        for link in links:
            del self._flows_on[link][flow]
            if not self._flows_on[link]:
                del self._flows_on[link]
        return self._reshare(links)

    def component(self, links: Iterable[Link]) -> list[Flow]:
        """Every active flow connected to ``links`` through shared links, in a stable order."""
        seen_links: set[Link] = set()
        seen_flows: dict[Flow, None] = {}
        stack = [link for link in links if link in self._flows_on]
        while stack:
            link = stack.pop()
            if link in seen_links:
                continue
            seen_links.add(link)
            for flow in self._flows_on[link]:
                if flow not in seen_flows:
                    seen_flows[flow] = None
                    stack.extend(other for other in self._links_of[flow] if other not in seen_links)
        return list(seen_flows)

    def full_recompute(self) -> dict[Flow, float]:
        """Rates from scratch over all active flows (the reference the incremental path must match)."""
        return max_min_rates(self._links_of, self.capacity)

    def _reshare(self, links: tuple[Link, ...]) -> dict[Flow, float]:
        alone = [self._flows_on.get(link) for link in links]
        if all(flows is None for flows in alone):
            return {}  # a flow left links nobody else uses: nothing to re-share
        first = alone[0]
        if first is not None and all(flows is not None and len(flows) == 1 for flows in alone):
            (flow,) = first
            if set(self._links_of[flow]) == set(links):  # one flow, alone on all its links
                rate = min(self.capacity[link] for link in links)
                self.rates[flow] = rate
                return {flow: rate}
        flows = self.component(links)
        fresh = max_min_rates({flow: self._links_of[flow] for flow in flows}, self.capacity)
        self.rates.update(fresh)
        return fresh
