"""A topology drawn to a PNG: every node of a small one, the rows of a large one.

Rows from the bottom up: GPUs, NICs, switch tiers 0 (in host), 1 (leaf), 2 (spine), 3 (core)
(:func:`~simulator.model.analysis.fabric.levels`). A small topology (at most :data:`SMALL_NODES` nodes)
shows every node in its row, coloured by kind, and every cable coloured by its kind (edge attribute
``link``); a row's nodes are ordered by where their neighbours below sit, so cables mostly run
straight up. One with GPUs only (ring, torus, mesh, fully connected) is drawn as a circle, or as
its grid when the GPUs have 2-D ``coords``. A large topology is drawn by row, not as a hairball:
one box per row labelled with its count, and between two rows one line labelled with their cables
and the bandwidth those carry per direction. Like :mod:`~simulator.output.plots`, this uses
matplotlib's object API (rendered by Agg), never pyplot.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable
from pathlib import Path

import networkx as nx
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch, Rectangle

from simulator.model.analysis.fabric import GPU_ROW, NIC_ROW, FabricSummary, gpus_by_rank, levels
from simulator.model.topology import NVLINK
from simulator.output.fabric import bandwidth, row_name
from simulator.output.files import write_atomically

SMALL_NODES = 150
"""Topologies of at most this many nodes are drawn node by node."""
_LINK_COLOURS = {"nvlink": "#59a14f", "pcie": "#f28e2b", "net": "#4e79a7"}
_TIER_COLOURS = ["#b9d3ea", "#79a9d6", "#3f77b5", "#1d3f73"]
_MARKERS = {GPU_ROW: "s", NIC_ROW: "D"}
_PLAIN = {"facecolor": "white", "edgecolor": "none", "pad": 1.0}

Point = tuple[float, float]
Bend = Callable[[Hashable, Hashable], float]
"""How much a cable bends (matplotlib's arc3 ``rad``; 0: straight), where a straight line would
run over other nodes."""


def _colour(row: int) -> str:
    if row == GPU_ROW:
        return "#76b900"
    if row == NIC_ROW:
        return "#f6c85f"
    return _TIER_COLOURS[min(row, len(_TIER_COLOURS) - 1)]


def _link_colour(link: str) -> str:
    return _LINK_COLOURS.get(link, "#888888")


def draw_fabric(graph: nx.DiGraph, summary: FabricSummary, path: Path) -> None:
    """Draw ``graph`` (whose numbers are ``summary``) to the PNG ``path``, written atomically."""
    rows, _ = levels(graph)
    small = graph.number_of_nodes() <= SMALL_NODES
    figure = _draw_nodes(graph, rows) if small else _draw_rows(graph, rows)
    figure.suptitle(f"{summary.label}: {summary.builder}, {summary.gpus} GPUs"
                    + ("" if small else " (drawn by row)"))
    write_atomically(path, lambda tmp: figure.savefig(tmp, format="png", dpi=110))


def _draw_nodes(graph: nx.DiGraph, rows: dict[Hashable, int]) -> Figure:
    by_row: dict[int, list[Hashable]] = defaultdict(list)
    for node, row in rows.items():
        by_row[row].append(node)
    direct = set(by_row) <= {GPU_ROW}
    widest = max((len(nodes) for nodes in by_row.values()), default=1)
    size = (7.0, 7.0) if direct else (min(24.0, max(7.0, 0.45 * widest)), 1.3 * len(by_row) + 1.6)
    pos, bend = _direct_positions(graph) if direct else _row_positions(graph, by_row, size[0])
    figure = Figure(figsize=size, layout="constrained")
    axis = figure.subplots()
    straight: dict[str, list[tuple[Point, Point]]] = defaultdict(list)
    for u, v, link in graph.edges(data="link", default=NVLINK):
        if graph.has_edge(v, u) and str(u) > str(v):
            continue  # a cable once
        if rad := bend(u, v):
            axis.add_patch(FancyArrowPatch(pos[u], pos[v], arrowstyle="-", linewidth=1.2,
                                           connectionstyle=f"arc3,rad={rad:.4f}",
                                           color=_link_colour(link), zorder=1))
        else:
            straight[link].append((pos[u], pos[v]))
    for link, segments in straight.items():
        axis.add_collection(LineCollection(segments, colors=_link_colour(link), linewidths=1.2,
                                           zorder=1))
    marker_size = max(30.0, min(260.0, 5000.0 / max(widest, 1)))
    for row, nodes in sorted(by_row.items()):
        axis.scatter([pos[n][0] for n in nodes], [pos[n][1] for n in nodes], s=marker_size,
                     marker=_MARKERS.get(row, "o"), color=_colour(row), edgecolors="black",
                     linewidths=0.6, zorder=2)
    if graph.number_of_nodes() <= 48:
        for node, row in rows.items():
            text = str(graph.nodes[node].get("rank", "")) if row == GPU_ROW else \
                ("" if row == NIC_ROW else str(node))
            axis.annotate(text, pos[node], fontsize=7, ha="center", va="center", zorder=3,
                          xytext=(0, 0 if row == GPU_ROW else 9), textcoords="offset points")
    links = sorted({str(link) for _, _, link in graph.edges(data="link", default=NVLINK)})
    handles = [Line2D([], [], color=_link_colour(link), label=link) for link in links]
    handles += [Line2D([], [], linestyle="", marker=_MARKERS.get(row, "o"), color=_colour(row),
                       markeredgecolor="black", label=row_name(row)) for row in sorted(by_row)]
    axis.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if direct:
        axis.set_aspect("equal")
        axis.axis("off")
    else:
        axis.set_yticks(range(len(by_row)), [f"{row_name(row)}: {len(by_row[row])}"
                                             for row in sorted(by_row)])
        axis.set_xticks([])
        axis.set_xlim(-0.02, 1.02)
        axis.set_ylim(-0.6, len(by_row) - 0.4)
        for side in ("top", "right", "bottom"):
            axis.spines[side].set_visible(False)
    return figure


def _row_positions(graph: nx.DiGraph, by_row: dict[int, list[Hashable]],
                   width_in: float) -> tuple[dict[Hashable, Point], Bend]:
    """Rows bottom up; each row ordered by the mean position of its neighbours placed below.
    A cable within a row arcs above it, about a third of a row high."""
    pos: dict[Hashable, Point] = {}
    for y, row in enumerate(sorted(by_row)):
        nodes = by_row[row]
        if row == GPU_ROW:
            nodes = gpus_by_rank(graph)
        else:
            def centre(node: Hashable) -> float:
                xs = [pos[m][0] for m in nx.all_neighbors(graph, node) if m in pos]
                return sum(xs) / len(xs) if xs else 0.5
            nodes = sorted(nodes, key=lambda node: (centre(node), str(node)))
        for i, node in enumerate(nodes):
            pos[node] = ((i + 0.5) / len(nodes), float(y))

    def bend(u: Hashable, v: Hashable) -> float:
        dx = pos[v][0] - pos[u][0]
        if pos[u][1] != pos[v][1] or dx == 0:
            return 0.0
        return -math.copysign(min(0.5, 0.45 / (abs(dx) * width_in)), dx)  # arc3: up for < 0

    return pos, bend


def _direct_positions(graph: nx.DiGraph) -> tuple[dict[Hashable, Point], Bend]:
    """GPUs only: their 2-D grid (``coords``; cables that skip GPUs, such as the wrap-around,
    arc), else a circle in rank order."""
    gpus = gpus_by_rank(graph)
    coords = [graph.nodes[gpu].get("coords") for gpu in gpus]
    if gpus and all(isinstance(c, tuple) and len(c) == 2 for c in coords):
        pos = {gpu: (float(c[1]), -float(c[0])) for gpu, c in zip(gpus, coords, strict=True)}
        return pos, lambda u, v: 0.3 if abs(pos[u][0] - pos[v][0]) + abs(pos[u][1] - pos[v][1]) > 1 \
            else 0.0
    p = len(gpus)
    circle = {gpu: (math.sin(2 * math.pi * i / p), math.cos(2 * math.pi * i / p))
              for i, gpu in enumerate(gpus)}
    return circle, lambda u, v: 0.0


def _draw_rows(graph: nx.DiGraph, rows: dict[Hashable, int]) -> Figure:
    counts = Counter(rows.values())
    order = sorted(counts)
    y = {row: float(i) for i, row in enumerate(order)}
    cables: dict[tuple[int, int], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(lambda: [0.0, 0.0]))  # rows -> link kind -> [cables, bandwidth]
    for u, v, data in graph.edges(data=True):
        tally = cables[min(rows[u], rows[v]), max(rows[u], rows[v])][str(data.get("link", NVLINK))]
        tally[0] += 0.5 if graph.has_edge(v, u) else 1.0  # half a cable per direction
        tally[1] += data["bandwidth"] / 2                  # per direction
    figure = Figure(figsize=(10.0, 1.6 * len(order) + 1.2), layout="constrained")
    axis = figure.subplots()
    for row in order:
        what = f"{counts[row]} GPUs" if row == GPU_ROW else f"{counts[row]} NICs" \
            if row == NIC_ROW else f"{row_name(row)}: {counts[row]} switches"
        if (row, row) in cables:
            what += "\namong them " + _label(cables[row, row]).replace("\n", "\n among them ")
        axis.add_patch(Rectangle((0.2, y[row] - 0.28), 0.4, 0.56, facecolor=_colour(row),
                                 edgecolor="black", zorder=2))
        axis.text(0.4, y[row], what, ha="center", va="center", fontsize=9, zorder=3,
                  color="white" if row >= 2 else "black")
    skip = 0
    spans = sorted((k for k in cables if k[0] != k[1]), key=lambda k: (y[k[1]] - y[k[0]], k))
    for key in spans:
        low, high = y[key[0]], y[key[1]]
        colour = _link_colour(max(cables[key].items(), key=lambda item: item[1][1])[0])
        if high - low == 1:
            axis.plot([0.4, 0.4], [low + 0.28, high - 0.28], color=colour, linewidth=2.5, zorder=1)
            axis.text(0.385, (low + high) / 2, _label(cables[key]), va="center", ha="right",
                      fontsize=8, bbox=_PLAIN)
        else:  # around the rows between, on the right
            x = 0.66 + 0.1 * skip
            skip += 1
            axis.plot([0.6, x, x, 0.6], [low, low, high, high], color=colour, linewidth=2,
                      zorder=1)
            axis.text(x + 0.01, (low + high) / 2, _label(cables[key]), va="center", fontsize=8,
                      rotation=90, ha="left", bbox=_PLAIN)
    axis.set_xlim(0, 1.0 + 0.1 * skip)
    axis.set_ylim(-0.6, len(order) - 0.4)
    axis.axis("off")
    return figure


def _label(by_link: dict[str, list[float]]) -> str:
    """``512 nvlink cables, 230.4TB/s per direction``, a line per kind of link."""
    return "\n".join(f"{round(count)} {link} cables, {bandwidth(total)} per direction"
                     for link, (count, total) in sorted(by_link.items()))
