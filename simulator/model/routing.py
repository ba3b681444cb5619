"""Routes over a topology graph: which links a transfer crosses and what it costs (networkx only).

A route minimises, in this order: summed latency (links, plus the per-message ``latency`` of every
node it crosses, endpoints included), then hop count, then the sequence of node names. That total
order makes routes reproducible whatever order the graph was built in. Routes are computed per
pair on first use and cached, never all pairs up front.

A builder that knows its own structure attaches :class:`Paths` to its graph (graph attribute
``paths``): for a pair of nodes, the few node paths among which the shortest one lies. The route
is then the least of those by the same order, found without searching the graph, which on a
fabric of tens of thousands of GPUs would visit every NIC behind a leaf switch for every pair.
Where the builder gives no candidates the search runs as before.

**Failed links.** :meth:`Routing.rerouted` gives the routes after links fail (a scenario's
``link_down`` and ``nic_down`` faults): a pair whose route crosses no failed link keeps it, as
a network leaves the flows it does not have to move alone; any other pair takes the least
route of the graph without the failed links, by the same order (the builder's candidates that
avoid them, else the search). Removing links makes no path shorter, so a kept route is still a
least one: only ECMP's hash, over fewer tied paths, could have picked another.

**ECMP.** Where several candidates tie on (latency, hops), a network that spreads flows over
equal-cost paths (graph attribute ``ecmp_seed``, an int, set by the builders of multi-path
fabrics unless told otherwise) picks among them by a stable hash of (seed, source, destination),
as a switch hashes a flow's header onto one of its equal-cost next hops; without it the first by
name wins, so that every flow between two leaves crosses the same spine (the polarised worst
case). A flow is a (source, destination) pair: every message between them takes one path, as
the packets of one connection (one queue pair) do. Picking one whole path uniformly equals
hashing uniformly at every hop on the symmetric fabrics that give candidates (a fat-tree, a
leaf/spine): each next hop leads to as many equal-cost paths.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import networkx as nx

from simulator.errors import NetworkCut, cut_off

LinkId = tuple[str, str]
"""A directed link: (from node, to node)."""


@dataclass(frozen=True)
class Route:
    """The path a transfer takes, with what it costs: alpha (latency) and 1/beta (bottleneck),
    and the time the sender's network proxy is busy posting the message (``proxy_s``: the
    sender posts its next such message no sooner; 0 but for NCCL's execution across hosts)."""

    nodes: tuple[str, ...]
    links: tuple[LinkId, ...]
    latency_s: float
    bottleneck_Bps: float
    proxy_s: float = 0.0


class Paths(Protocol):
    """A builder's knowledge of its structure: node paths from ``src`` to ``dst`` (each a
    tuple of node names, ends included) among which the network routes, or None where it does
    not know (the route is then searched for). They contain a shortest one, except where the
    builder's docstring names a policy the search would not follow (``cluster``: GPUs never
    relay, and GPUs that share an NVSwitch talk over it, not over a PCIe switch). Picklable and
    cheap: called once per pair. A builder whose network routes one way among equal shortest
    paths gives that path alone (a torus: dimension order); one that spreads flows gives every
    equal-cost path (ECMP picks). The paths describe the graph as built: whoever edits a built
    graph deletes its ``paths`` attribute (routes are then searched)."""

    def __call__(self, src: str, dst: str) -> Sequence[tuple[str, ...]] | None: ...


class Routing:
    """Deterministic shortest routes by latency on a topology graph, cached per node pair."""

    def __init__(self, graph: nx.DiGraph, down: frozenset[LinkId] = frozenset()) -> None:
        self._graph = graph
        self.down = down
        """Links that have failed, which no route crosses."""
        self._cache: dict[tuple[str, str], Route] = {}
        self._onward: dict[str, list[str]] = {}
        self._paths: Paths | None = graph.graph.get("paths")
        self._ecmp_seed: int | None = graph.graph.get("ecmp_seed")

    def route(self, src: str, dst: str) -> Route:
        """The route from node ``src`` to node ``dst``; raises ``nx.NetworkXNoPath`` if none."""
        key = (src, dst)
        if key not in self._cache:
            candidates = self._paths(src, dst) if self._paths is not None else None
            if candidates and self.down:
                candidates = [path for path in candidates
                              if not any(link in self.down for link in itertools.pairwise(path))]
            self._cache[key] = (self._least(candidates, src, dst) if candidates
                                else self._shortest(src, dst))
        return self._cache[key]

    def without(self, down: frozenset[LinkId]) -> Routing:
        """This network's routes on the graph without the links ``down``."""
        return Routing(self._graph, down)

    def healthy(self) -> Routing:
        """The routing before any link failed (this one, unless it is :class:`Rerouted`)."""
        return self

    def rerouted(self, failed: frozenset[LinkId]) -> Routing:
        """The routes once links ``failed`` fail too: each pair keeps its route (this
        routing's) unless it crosses a failed link, else takes the least route without them."""
        down = self.down | failed
        return Rerouted(self, self.healthy().without(down), down)

    def check_reach(self, nodes: Sequence[str], at_s: float,
                    failed: frozenset[LinkId]) -> None:
        """NetworkCut (:func:`~simulator.errors.cut_off`) where, once ``failed`` failed at
        ``at_s``, some of ``nodes`` (the ranks' GPUs) can no longer reach others."""
        groups = self.islands(nodes)
        if len(groups) > 1:
            raise cut_off(groups, at_s, failed)

    def islands(self, nodes: Sequence[str]) -> list[list[int]]:
        """``nodes`` (by position) grouped by which can reach which over the links that have
        not failed: one group when every one reaches every other, the groups in order of their
        first member."""
        down = self.down
        view = nx.subgraph_view(self._graph, filter_edge=lambda a, b: (a, b) not in down)
        component = {}
        for number, members in enumerate(nx.strongly_connected_components(view)):
            for node in members:
                component[node] = number
        groups: dict[int, list[int]] = {}
        for position, node in enumerate(nodes):
            groups.setdefault(component[node], []).append(position)
        return list(groups.values())

    def capacity_Bps(self, link: LinkId) -> float:
        """The bandwidth of one directed link."""
        return float(self._graph.edges[link]["bandwidth"])

    def has_node(self, node: str) -> bool:
        """Whether the topology has a node of that name."""
        return bool(self._graph.has_node(node))

    def node_names(self) -> list[str]:
        """Every node's name."""
        return [str(node) for node in self._graph.nodes]

    def capacities(self) -> dict[LinkId, float]:
        """The bandwidth of every directed link (bytes/s)."""
        return {(u, v): float(bw) for u, v, bw in self._graph.edges(data="bandwidth")}

    def link_kind(self, link: LinkId) -> str:
        """What a link is (``nvlink``, ``pcie`` or ``net``; ``nvlink`` when unstated)."""
        return str(self._graph.edges[link].get("link", "nvlink"))

    def node_kind(self, node: str) -> str:
        """What a node is: ``gpu``, ``nic`` or ``switch``."""
        return str(self._graph.nodes[node].get("kind", ""))

    def node_tier(self, node: str) -> int | None:
        """A switch's tier (0 in a host, 1 leaf, 2 spine, 3 core) where the graph says; else None."""
        tier = self._graph.nodes[node].get("tier")
        return None if tier is None else int(tier)

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
                if self.down and (node, succ) in self.down:
                    continue
                candidate = (latency + graph.succ[node][succ]["latency"]
                             + float(node_latency[succ]), hops + 1, (*path, succ))
                if succ not in best or candidate < best[succ]:
                    best[succ] = candidate
                    heapq.heappush(heap, candidate)
        raise nx.NetworkXNoPath(f"no route from {src} to {dst}")

    def _least(self, candidates: Sequence[tuple[str, ...]], src: str, dst: str) -> Route:
        """The least of a builder's candidate paths by (latency, hops, nodes), each path's
        latency summed in path order as :meth:`_shortest` sums it, so both give equal floats;
        under ECMP, the hashed one among those tied on (latency, hops)."""
        graph = self._graph
        node_latency = graph.nodes(data="latency", default=0.0)
        keyed: list[tuple[float, int, tuple[str, ...]]] = []
        for path in candidates:
            latency = float(node_latency[path[0]])
            for a, b in itertools.pairwise(path):
                latency = latency + graph.succ[a][b]["latency"] + float(node_latency[b])
            keyed.append((latency, len(path) - 1, path))
        best = min(keyed)
        if self._ecmp_seed is not None:
            tied = sorted(key for key in keyed if key[1] == best[1]
                          and math.isclose(key[0], best[0], rel_tol=1e-12, abs_tol=1e-18))
            if len(tied) > 1:
                best = tied[flow_hash(self._ecmp_seed, src, dst) % len(tied)]
        return self._as_route(best[2], best[0])

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


def flow_hash(seed: int, src: str, dst: str) -> int:
    """A stable 64-bit hash of a flow (the same in every process and Python version, unlike
    :func:`hash`), which ECMP reduces modulo the number of equal-cost paths."""
    digest = hashlib.blake2b(f"{seed}:{src}:{dst}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class Rerouted(Routing):
    """The routes after links failed (:meth:`Routing.rerouted`): ``before``'s route of a pair
    unless it crosses a link of ``down``, else ``fresh``'s (the healthy routing without every
    failed link). Capacities and everything else are ``before``'s."""

    def __init__(self, before: Routing, fresh: Routing, down: frozenset[LinkId]) -> None:
        super().__init__(before._graph, down)
        self._before = before
        self._fresh = fresh

    def route(self, src: str, dst: str) -> Route:
        key = (src, dst)
        if key not in self._cache:
            route = self._before.route(src, dst)
            if any(link in self.down for link in route.links):
                try:
                    route = self._fresh.route(src, dst)
                except nx.NetworkXNoPath:  # ranks reach each other (checked), but not this node
                    raise NetworkCut(f"network cut: no route from {src} to {dst} once "
                                     f"{len(self.down)} links failed") from None
            self._cache[key] = route
        return self._cache[key]

    def healthy(self) -> Routing:
        return self._before.healthy()

    def capacity_Bps(self, link: LinkId) -> float:
        return self._before.capacity_Bps(link)

    def capacities(self) -> dict[LinkId, float]:
        return self._before.capacities()
