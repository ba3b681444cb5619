"""The names a fault may use, as ``python -m simulator topo --names`` prints them: every node by
kind (a ``nic_down``'s ``nic``, a ``straggler``'s rank beside its GPU) and every directed link
(a ``link_down`` or ``link_degraded``'s ``link: [FROM, TO]``), in the order the graph holds them.

>>> from simulator.model.topology import switch
>>> print(format_names(switch(2, 25e9, 5e-7)))
# nodes a fault names (nic_down: nic; straggler: rank), by kind
gpu     gpu0    rank 0
gpu     gpu1    rank 1
switch  switch
# links a fault names (link_down, link_degraded: link: [FROM, TO]), per direction
switch  gpu0    25GB/s  500ns
switch  gpu1    25GB/s  500ns
gpu0    switch  25GB/s  500ns
gpu1    switch  25GB/s  500ns
"""

from __future__ import annotations

from typing import Any

from simulator.units import format_bandwidth, format_time

KIND_ORDER = ("gpu", "nic", "switch")
"""Kinds listed first, in this order; any other kind a graph file gives comes after them."""


def format_names(graph: Any) -> str:
    """Every node of ``graph`` (a ``networkx.DiGraph`` the builders make) as ``kind name`` (and
    a GPU's rank), then every directed link as ``from to bandwidth latency``, columns aligned."""
    nodes = sorted(graph.nodes(data=True), key=lambda item: _kind_rank(item[1].get("kind")))
    node_rows = [[str(data.get("kind", "?")), str(name),
                  f"rank {data['rank']}" if "rank" in data else ""] for name, data in nodes]
    link_rows = [[str(a), str(b), format_bandwidth(float(data["bandwidth"])),
                  format_time(float(data["latency"]))] for a, b, data in graph.edges(data=True)]
    return "\n".join(["# nodes a fault names (nic_down: nic; straggler: rank), by kind",
                      *_aligned(node_rows),
                      "# links a fault names (link_down, link_degraded: link: [FROM, TO]), per "
                      "direction", *_aligned(link_rows)])


def _kind_rank(kind: object) -> int:
    """Where ``kind`` is listed: those of KIND_ORDER in that order, others after."""
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)


def _aligned(rows: list[list[str]]) -> list[str]:
    """``rows`` as lines, each column padded to its widest cell (the last left as it is)."""
    if not rows:
        return []
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    return ["  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)),
                       row[-1]]).rstrip() for row in rows]
