"""Routes over a topology graph: which links a transfer crosses and what it costs (networkx only).

A route minimises, in this order: summed latency (links, plus the per-message ``latency`` of every
node it crosses, endpoints included), then hop count, then the sequence of node names. That total
order makes routes reproducible whatever order the graph was built in. Routes are computed per
pair on first use and cached, never all pairs up front.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

import networkx as nx

LinkId = tuple[str, str]
"""A directed link: (from node, to node)."""


@dataclass(frozen=True)
class Route:
    """The path a transfer takes, with what it costs: alpha (latency) and 1/beta (bottleneck)."""

    nodes: tuple[str, ...]
    links: tuple[LinkId, ...]
    latency_s: float
    bottleneck_Bps: float


class Routing:
    """Deterministic shortest routes by latency on a topology graph, cached per node pair."""

    def __init__(self, graph: nx.DiGraph) -> None:
        self._graph = graph
        self._cache: dict[tuple[str, str], Route] = {}
        self._onward: dict[str, list[str]] = {}

    def route(self, src: str, dst: str) -> Route:
        """The route from node ``src`` to node ``dst``; raises ``nx.NetworkXNoPath`` if none."""
        key = (src, dst)
        if key not in self._cache:
            self._cache[key] = self._shortest(src, dst)
        return self._cache[key]

    def capacity_Bps(self, link: LinkId) -> float:
        """The bandwidth of one directed link."""
        return float(self._graph.edges[link]["bandwidth"])

    def capacities(self) -> dict[LinkId, float]:
        """The bandwidth of every directed link (bytes/s)."""
        return {(u, v): float(bw) for u, v, bw in self._graph.edges(data="bandwidth")}

    def link_kind(self, link: LinkId) -> str:
        """What a link is (``nvlink``, ``pcie`` or ``net``; ``nvlink`` when unstated)."""
        return str(self._graph.edges[link].get("link", "nvlink"))

    def is_gpu(self, node: str) -> bool:
        """Whether ``node`` is a GPU (a rank's endpoint) rather than a NIC or a switch."""
        return bool(self._graph.nodes[node].get("kind") == "gpu")

    def _shortest(self, src: str, dst: str) -> Route:
        graph = self._graph
        node_latency = graph.nodes(data="latency", default=0.0)
        start: tuple[float, int, tuple[str, ...]] = (float(node_latency[src]), 0, (src,))
        best = {src: start}
        heap = [start]
        while heap:
            latency, hops, path = heapq.heappop(heap)
            node = path[-1]
            if best.get(node) != (latency, hops, path):
                continue
            if node == dst:
                return self._as_route(path, latency)
            onward = self._onward_from(node)
            if dst in graph.succ[node] and dst not in onward:
                onward = [*onward, dst]  # a dead end, but the one sought
            for succ in onward:
                candidate = (latency + graph.succ[node][succ]["latency"]
                             + float(node_latency[succ]), hops + 1, (*path, succ))
                if succ not in best or candidate < best[succ]:
                    best[succ] = candidate
                    heapq.heappush(heap, candidate)
        raise nx.NetworkXNoPath(f"no route from {src} to {dst}")

    def _onward_from(self, node: str) -> list[str]:
        """``node``'s successors that a route may cross: all but the dead ends whose only
        successor is ``node`` itself (a GPU cabled to one switch), which a route can only end
        at. Leaving them out keeps a search through a switch of n GPUs from touching all n."""
        if node not in self._onward:
            succ = self._graph.succ
            self._onward[node] = [s for s in succ[node] if set(succ[s]) != {node}]
        return self._onward[node]

    def _as_route(self, path: tuple[str, ...], latency: float) -> Route:
        links = tuple(itertools.pairwise(path))
        bottleneck = min((self.capacity_Bps(link) for link in links), default=float("inf"))
        return Route(nodes=path, links=links, latency_s=latency, bottleneck_Bps=bottleneck)
