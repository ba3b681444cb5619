"""What a topology is made of, in numbers: the summary ``python -m simulator topo`` prints.

:func:`summarize` takes any topology graph (docs/design.md §2) and returns a
:class:`FabricSummary`. Each number's definition is in docs/topo.md and beside its field below.
Rows (:func:`levels`) order the nodes from the GPUs up: GPUs, NICs, then switch tiers 0 (inside a
host: NVSwitch, PCIe switch), 1 (leaf, top of rack, dragonfly router), 2 (spine, aggregation), 3
(core), as the node attribute ``tier`` says (a switch without one is given one: :func:`levels`).

>>> from simulator.model.topology import switch
>>> s = summarize(switch(4, 25e9, 5e-7))
>>> s.gpus, s.switches, s.cables, s.diameter_hops, s.bisection_Bps
(4, ((1, 1),), 4, 2, 50000000000.0)
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Hashable
from dataclasses import dataclass

import networkx as nx

from simulator.model.analysis.bisection import rank_bisection
from simulator.model.analysis.hops import Hops, gpu_diameter
from simulator.model.topology import GPU, NIC, NVLINK

GPU_ROW, NIC_ROW = -2, -1
"""The rows of GPUs and NICs, below switch tier 0."""


@dataclass(frozen=True)
class Injection:
    """What a GPU's outgoing links of one kind (edge attribute ``link``) carry together, the
    least and the most over the GPUs (equal on symmetric fabrics), bytes/s."""

    link: str
    min_Bps: float
    max_Bps: float


@dataclass(frozen=True)
class TierLoad:
    """A switch tier's links from below (from GPUs, NICs and lower tiers) and upwards (to higher
    tiers), summed over its switches, bytes/s; their ratio is its oversubscription."""

    tier: int
    below_Bps: float
    up_Bps: float

    @property
    def ratio(self) -> float:
        """From below over up: 3.0 is 3:1."""
        return self.below_Bps / self.up_Bps


@dataclass(frozen=True)
class FabricSummary:
    """A topology in numbers (bandwidths in bytes/s, per direction)."""

    label: str
    builder: str                                  # the graph's ``name``, e.g. dgx(2x8)
    gpus: int
    hosts: int | None                             # distinct ``host`` attributes; None: none
    nics: int
    switches: tuple[tuple[int, int], ...]         # (tier, switches), tiers ascending
    tiers_derived: bool                           # some switch had no ``tier``
    cables: int                                   # pairs of opposite directed edges
    links: int                                    # directed edges
    diameter_hops: int | None                     # None: some GPU cannot reach another
    bisection_Bps: float | None                   # None: fewer than two GPUs
    injection: tuple[Injection, ...]              # per link kind, sorted by kind
    network_injection_Bps: float | None           # None: no GPU or NIC link up into tier ≥ 1
    oversubscription: tuple[TierLoad, ...]        # tiers with links up

    @property
    def one_way_links(self) -> int:
        """Directed edges without an opposite edge (none in the builders' graphs)."""
        return self.links - 2 * self.cables


def levels(graph: nx.DiGraph, hops: Hops | None = None) -> tuple[dict[Hashable, int], bool]:
    """Every node's row (:data:`GPU_ROW`, :data:`NIC_ROW` or its switch tier), and whether some
    switch's tier was derived. A switch without ``tier`` is tier 0 if it is cabled to GPUs all of
    one ``host``; else its tier is its hops from the nearest GPU, NIC or tier-0 switch (a switch
    the GPUs or NICs are cabled to is 1, one above it 2, ...; 1 if none reaches it)."""
    rows: dict[Hashable, int] = {}
    missing = []
    for node, data in graph.nodes(data=True):
        kind = data.get("kind")
        if kind == GPU:
            rows[node] = GPU_ROW
        elif kind == NIC:
            rows[node] = NIC_ROW
        elif isinstance(data.get("tier"), int) and not isinstance(data["tier"], bool):
            rows[node] = data["tier"]
        else:
            missing.append(node)
    above = []
    for node in missing:
        hosts = {graph.nodes[m].get("host") for m in nx.all_neighbors(graph, node)
                 if rows.get(m) == GPU_ROW}
        if len(hosts) == 1 and None not in hosts:
            rows[node] = 0
        else:
            above.append(node)
    if above:
        hops = hops or Hops(graph)
        bottom = [node for node, row in rows.items() if row <= 0]  # GPUs, NICs, tier 0
        dist = hops.distances(hops.indices(bottom))[hops.indices(above)]
        for node, d in zip(above, dist.tolist(), strict=True):
            rows[node] = d if d > 0 else 1
    return rows, bool(missing)


def gpus_by_rank(graph: nx.DiGraph) -> list[Hashable]:
    """The GPU nodes in rank order (ties, or no ``rank``: by name)."""
    return sorted((node for node, kind in graph.nodes(data="kind") if kind == GPU),
                  key=lambda node: (graph.nodes[node].get("rank", 0), str(node)))


def summarize(graph: nx.DiGraph, label: str = "") -> FabricSummary:
    """The numbers of ``graph`` (definitions: docs/topo.md); ``label`` names it (default: the
    graph's ``name``)."""
    hops = Hops(graph)
    rows, derived = levels(graph, hops)
    gpus = gpus_by_rank(graph)
    per_row = Counter(rows.values())
    hosts = {data["host"] for _, data in graph.nodes(data=True) if "host" in data}
    cables = sum(1 for u, v in graph.edges if graph.has_edge(v, u)) // 2
    builder = str(graph.graph.get("name", ""))
    return FabricSummary(
        label=label or builder, builder=builder, gpus=len(gpus), hosts=len(hosts) or None,
        nics=per_row[NIC_ROW], switches=tuple(sorted((t, n) for t, n in per_row.items() if t >= 0)),
        tiers_derived=derived, cables=cables, links=graph.number_of_edges(),
        diameter_hops=gpu_diameter(hops, hops.indices(gpus)),
        bisection_Bps=rank_bisection(graph, gpus), injection=_injection(graph, gpus),
        network_injection_Bps=_network_injection(graph, rows, len(gpus)),
        oversubscription=_oversubscription(graph, rows))


def _injection(graph: nx.DiGraph, gpus: list[Hashable]) -> tuple[Injection, ...]:
    per: dict[str, dict[Hashable, float]] = defaultdict(lambda: defaultdict(float))
    for gpu in gpus:
        for _, _, data in graph.out_edges(gpu, data=True):
            per[str(data.get("link", NVLINK))][gpu] += data["bandwidth"]
    return tuple(Injection(link, min(by_gpu.get(gpu, 0.0) for gpu in gpus), max(by_gpu.values()))
                 for link, by_gpu in sorted(per.items()))


def _network_injection(graph: nx.DiGraph, rows: dict[Hashable, int], gpus: int) -> float | None:
    """The bandwidth of the links from GPUs and NICs up to switches of tier 1 and above (the
    network), over the GPUs."""
    total = [bandwidth for u, v, bandwidth in graph.edges(data="bandwidth")
             if rows[u] in (GPU_ROW, NIC_ROW) and rows[v] >= 1]
    return sum(total) / gpus if total and gpus else None


def _oversubscription(graph: nx.DiGraph, rows: dict[Hashable, int]) -> tuple[TierLoad, ...]:
    below: dict[int, float] = defaultdict(float)
    up: dict[int, float] = defaultdict(float)
    for u, v, bandwidth in graph.edges(data="bandwidth"):
        if rows[v] > rows[u]:
            up[rows[u]] += bandwidth
            below[rows[v]] += bandwidth
    return tuple(TierLoad(tier, below[tier], up[tier]) for tier in sorted(up) if tier >= 0)
