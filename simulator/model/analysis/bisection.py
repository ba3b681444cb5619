"""The bisection bandwidth of a topology between its two halves of ranks, by max-flow on a graph
first shrunk exactly, so that fabrics of tens of thousands of GPUs take a fraction of a second.

The definition: the min cut, by max-flow on link bandwidths, from the GPUs of ranks [0, p/2) to
those of ranks [p/2, p) (p/2 rounded down), per direction: what the first half can send the
second at once. Where rank order follows the structure (every builder here: hosts, leaves, pods
and torus rows are filled rank by rank) the halves are the textbook ones and this is the
bisection bandwidth; in general it is an upper bound on it (the least cut over all balanced
splits).

The shrinking (a max-flow on the whole graph took networkx a minute on 65,536 GPUs): every GPU of
the first half is merged into the source and every GPU of the second into the sink (their edges
to the source or sink would be unbounded, so no finite cut separates them), edges inside one side
vanish and parallel edges add up; then, repeatedly, a node with one neighbour is dropped (flow
cannot pass through it) and a node with two, a and b, is replaced by edges a→b and b→a carrying
the lesser of the two links each way (flow through it can only go from one to the other). On a
torus nothing but the cut itself is left; on a DGX cluster, the leaf between the two sides.

>>> from simulator.model.topology import switch
>>> rank_bisection(switch(4, 25e9, 5e-7), ["gpu0", "gpu1", "gpu2", "gpu3"])
50000000000.0
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable

import networkx as nx

Capacity = int | float


def rank_bisection(graph: nx.DiGraph, gpus: list[Hashable]) -> float | None:
    """The bisection bandwidth (bytes/s) between ranks [0, p/2) and [p/2, p) of ``graph``, whose
    GPU nodes ``gpus`` are in rank order; None for fewer than two GPUs."""
    if len(gpus) < 2:
        return None
    source, sink = object(), object()  # no node of any graph
    half = len(gpus) // 2
    side: dict[Hashable, Hashable] = {gpu: source for gpu in gpus[:half]}
    side.update((gpu, sink) for gpu in gpus[half:])
    cap: dict[Hashable, dict[Hashable, Capacity]] = defaultdict(dict)
    around: dict[Hashable, set[Hashable]] = defaultdict(set)  # neighbours, either way
    for u, v, bandwidth in graph.edges(data="bandwidth"):
        a, b = side.get(u, u), side.get(v, v)
        if a is not b and a != b:
            cap[a][b] = cap[a].get(b, 0) + _exact(bandwidth)
            around[a].add(b)
            around[b].add(a)
    ends = {source, sink}
    queue = [node for node, near in around.items() if len(near) <= 2 and node not in ends]
    while queue:
        node = queue.pop()
        if node not in around or len(around[node]) > 2:
            continue  # already gone, or gained neighbours since it was queued
        near = list(around.pop(node))
        if len(near) == 2:
            for a, b in (near, near[::-1]):
                through = min(cap[a].get(node, 0), cap[node].get(b, 0))
                if through > 0:
                    cap[a][b] = cap[a].get(b, 0) + through
                    around[a].add(b)
                    around[b].add(a)
        cap.pop(node, None)
        for other in near:
            around[other].discard(node)
            cap[other].pop(node, None)
            if other not in ends and len(around[other]) <= 2:
                queue.append(other)
    flow = nx.DiGraph()
    flow.add_nodes_from(ends)
    flow.add_edges_from((a, b, {"capacity": c}) for a, out in cap.items() for b, c in out.items())
    return float(nx.maximum_flow_value(flow, source, sink,
                                       flow_func=nx.algorithms.flow.preflow_push))


def _exact(bandwidth: float) -> Capacity:
    """Whole bytes/s as an int, so that flows add up exactly."""
    return int(bandwidth) if float(bandwidth).is_integer() else float(bandwidth)
