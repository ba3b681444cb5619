"""Routes on big fabrics come from their structure: build each 8,192-GPU fabric, then time the
routes a ring and a rank-halving exchange need (p pairs each), and the ``topo`` summary.

    python bench/fabrics.py            # prints one line per fabric

Routing never searches the graph here (every builder below gives its paths), so the time per
route stays in microseconds however large the fabric; a custom graph is searched per pair.
"""

from __future__ import annotations

import time

import networkx as nx

from simulator.model.analysis.fabric import summarize
from simulator.model.machine import Machine
from simulator.model.topology import cluster, dragonfly, fat_tree, torus

H100 = dict(nvlink_bandwidth=450e9, nvlink_latency=3e-7, pcie_bandwidth=63e9,
            pcie_latency=5e-7, nic_bandwidth=50e9, nic_latency=8.5e-7, uplink_latency=8.5e-7)

FABRICS = {
    "cluster 1024 x 8 (32 SUs, 16 spines)":
        lambda: cluster(1024, 8, **H100, nodes_per_unit=32, spines=16),
    "cluster 1024 x 8, three tiers": lambda: cluster(1024, 8, **H100, nodes_per_unit=32,
                                                     spines=16, units_per_pod=8, cores=64),
    "fat_tree k=32": lambda: fat_tree(32, 50e9, 1e-6),
    "torus 32 x 32 x 8": lambda: torus((32, 32, 8), 50e9, 1e-6),
    "dragonfly 32 x 16 x 16": lambda: dragonfly(32, 16, 16, 50e9, 5e-7, 50e9, 1e-6),
}


def measure(build: object) -> tuple[int, float, float, float, float]:
    """GPUs, seconds to build, to route the ring's and the halving pairs, per route, and topo."""
    start = time.perf_counter()
    graph: nx.DiGraph = build()  # type: ignore[operator]
    built = time.perf_counter()
    machine = Machine.of(graph)
    p = machine.ranks
    for rank in range(p):
        machine.route(rank, (rank + 1) % p)
        machine.route(rank, (rank + p // 2) % p)
    routed = time.perf_counter()
    summarize(graph)
    summarized = time.perf_counter()
    return p, built - start, routed - built, (routed - built) / (2 * p), summarized - routed


def main() -> None:
    print(f"{'fabric':40} {'GPUs':>6} {'build(s)':>9} {'routes(s)':>10} {'per route(us)':>14} "
          f"{'topo(s)':>8}")
    for name, build in FABRICS.items():
        p, built, routed, per, summary = measure(build)
        print(f"{name:40} {p:6d} {built:9.2f} {routed:10.2f} {per * 1e6:14.1f} {summary:8.2f}")


if __name__ == "__main__":
    main()
