"""Max-min fair sharing of link bandwidth among flows, recomputed one component at a time.

A flow crosses a fixed set of links; each link's capacity is split among the flows crossing it,
and each flow gets its bottleneck share: the classic *max-min fair* allocation, computed by
progressive filling (Bertsekas & Gallager, *Data Networks*, 2nd ed., §6.5.2) in
:func:`simulator.engine.kernel.max_min_rates`, which both engines call.

A flow's arrival or departure can only change the rates of flows connected to it through shared
links, transitively: its *component*. :class:`FairShare` therefore recomputes just that component
(SimGrid's lazy LMM solver does the same), and the result equals, to the bit, a full
recomputation over every active flow (the kernel's docstring says why), which
:meth:`FairShare.full_recompute` provides and the tests compare against.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Generic, TypeVar

import numpy as np

from simulator.engine.kernel import lone_rate, max_min_of, max_min_rates

Flow = TypeVar("Flow", bound=Hashable)
Link = TypeVar("Link", bound=Hashable)


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
        self._number = {link: i for i, link in enumerate(self.capacity)}
        self._capacities = np.array(list(self.capacity.values()), dtype=np.float64)
        self._numbered: dict[Flow, np.ndarray] = {}  # a flow's link numbers, once it shares

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
        self._numbered.pop(flow, None)
        for link in links:
            del self._flows_on[link][flow]
            if not self._flows_on[link]:
                del self._flows_on[link]
        return self._reshare(links)

    def set_capacity(self, capacity: Mapping[Link, float]) -> dict[Flow, float]:
        """Give the links of ``capacity`` their new capacities and re-share the flows connected
        to them (the kernel's capacity timeline, at one of its instants)."""
        return self.change(capacity, {})

    def change(self, capacity: Mapping[Link, float],
               moves: Mapping[Flow, tuple[Link, ...]]) -> dict[Flow, float]:
        """New capacities for the links of ``capacity``, and active flows moved onto new links
        (``moves``: flow → its links now; a link failed under it), then one re-share of the
        flows connected to every link they touched."""
        self.capacity.update(capacity)
        for link, value in capacity.items():
            self._capacities[self._number[link]] = value
        touched: dict[Link, None] = dict.fromkeys(capacity)
        for flow, links in moves.items():
            for link in self._links_of[flow]:
                touched[link] = None
                del self._flows_on[link][flow]
                if not self._flows_on[link]:
                    del self._flows_on[link]
            self._links_of[flow] = links
            self._numbered.pop(flow, None)
            for link in links:
                touched[link] = None
                self._flows_on.setdefault(link, {})[flow] = None
        return self._reshare(tuple(touched)) if touched else {}

    def crossing(self, links: Iterable[Link]) -> list[Flow]:
        """The active flows that cross any of ``links``, in the order they started."""
        flows: set[Flow] = set()
        for link in links:
            flows.update(self._flows_on.get(link, ()))
        return [flow for flow in self._links_of if flow in flows]

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
        return max_min_of(self._links_of, self.capacity)

    def _numbered_links(self, flow: Flow) -> np.ndarray:
        """The numbers of ``flow``'s links (kept while the flow is active)."""
        if flow not in self._numbered:
            self._numbered[flow] = np.array([self._number[link] for link in self._links_of[flow]],
                                            dtype=np.int64)
        return self._numbered[flow]

    def _reshare(self, links: tuple[Link, ...]) -> dict[Flow, float]:
        alone = [self._flows_on.get(link) for link in links]
        if all(flows is None for flows in alone):
            return {}  # a flow left links nobody else uses: nothing to re-share
        first = alone[0]
        if first is not None and all(flows is not None and len(flows) == 1 for flows in alone):
            (flow,) = first
            if set(self._links_of[flow]) == set(links):  # one flow, alone on all its links
                rate = lone_rate(self.capacity[link] for link in links)
                self.rates[flow] = rate
                return {flow: rate}
        flows = self.component(links)
        numbered = [self._numbered_links(flow) for flow in flows]
        flow_of = np.repeat(np.arange(len(flows)), [len(links) for links in numbered])
        rates = max_min_rates(flow_of, np.concatenate(numbered), len(flows), self._capacities)
        fresh = dict(zip(flows, rates.tolist(), strict=True))
        self.rates.update(fresh)
        return fresh
