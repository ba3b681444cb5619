"""The links' heatmap (``run --links FILE.csv`` draws ``FILE.png`` beside it): utilisation of the
busiest links at every point, a row per link and a column per point.

A fabric that used more than :data:`LINK_ROWS` links is drawn by tier pair instead: one row per
(from row, to row, link kind), e.g. ``GPUs → tier 0 (in host), nvlink``, holding the utilisation
of the busiest link of that class at each point; switch tiers high up, GPUs and NICs the bottom
rows (:func:`~simulator.output.fabric.row_name`). Utilisation = bytes / (bandwidth × the point's
time), 0 to 1. Uses matplotlib's object API (rendered by Agg), never pyplot.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from simulator.model.analysis.fabric import GPU_ROW, NIC_ROW
from simulator.output.fabric import row_name
from simulator.output.files import write_atomically
from simulator.units import format_size

LINK_ROWS = 32
"""Links drawn one row each, at most; beyond, rows are tier pairs."""
_UNKNOWN_TIER = 99


def link_heatmap(links: pd.DataFrame) -> Figure:
    """The heatmap of a links table (:func:`~simulator.output.links.links_frame`); the plotted
    matrix is the image's array (rows top to bottom, columns in run order)."""
    points = list(dict.fromkeys(zip(links.algorithm, links.size_bytes, strict=True)))
    column = {point: i for i, point in enumerate(points)}
    by_link = links.groupby(["from", "to"], sort=False).utilisation.max()
    row_of: dict[Hashable, int]
    row_keys: list[Hashable]
    if len(by_link) <= LINK_ROWS:
        keys = [f"{a}->{b}" for a, b in by_link.sort_values(ascending=False, kind="stable").index]
        row_of = {key: i for i, key in enumerate(keys)}
        names = keys
        row_keys = [f"{a}->{b}" for a, b in zip(links["from"], links["to"], strict=True)]
        title = "utilisation of every link that carried bytes"
    else:
        classes = [(_row(k, t), _row(k2, t2), kind) for k, t, k2, t2, kind in zip(
            links.from_kind, links.from_tier, links.to_kind, links.to_tier, links.link,
            strict=True)]
        ordered = sorted(set(classes), key=lambda c: (-max(c[0], c[1]), -c[0], -c[1], c[2]))
        row_of = {c: i for i, c in enumerate(ordered)}
        names = [f"{_name(a)} → {_name(b)}, {kind}" for a, b, kind in ordered]
        row_keys = list(classes)
        title = f"utilisation of the busiest link of each tier pair ({len(by_link)} links used)"
    matrix = np.full((len(row_of), len(points)), np.nan)
    for key, point, value in zip(row_keys, zip(links.algorithm, links.size_bytes, strict=True),
                                 links.utilisation, strict=True):
        r, c = row_of[key], column[point]
        if math.isnan(matrix[r, c]) or value > matrix[r, c]:
            matrix[r, c] = value
    width = min(24.0, max(6.0, 2.5 + 0.2 * len(points) + 0.06 * max(map(len, names), default=0)))
    figure = Figure(figsize=(width, max(3.0, 2.2 + 0.25 * len(names))))
    axes = figure.add_subplot()
    image = axes.imshow(np.ma.masked_invalid(matrix), aspect="auto", cmap="viridis", vmin=0.0,
                        vmax=1.0, interpolation="nearest")
    axes.set_yticks(range(len(names)), names, fontsize=7)
    axes.set_xticks(range(len(points)), [f"{a} {format_size(int(s))}" for a, s in points],
                    fontsize=6 if len(points) > 24 else 7, rotation=90)
    for i in range(1, len(points)):  # a white line between one algorithm's points and the next's
        if points[i][0] != points[i - 1][0]:
            axes.axvline(i - 0.5, color="white", linewidth=1.5)
    axes.set_title(title, fontsize=9)
    figure.colorbar(image, ax=axes, label="utilisation (bytes / (bandwidth × time))")
    figure.tight_layout()
    return figure


def write_link_heatmap(path: Path, links: pd.DataFrame) -> None:
    """:func:`link_heatmap` as a PNG, atomically (nothing when no link carried bytes)."""
    if links.empty:
        return
    figure = link_heatmap(links)
    write_atomically(path, lambda tmp: figure.savefig(tmp, format="png", dpi=110))


def _row(kind: str, tier: object) -> int:
    if kind == "gpu":
        return GPU_ROW
    if kind == "nic":
        return NIC_ROW
    return int(str(tier)) if isinstance(tier, (int, np.integer)) else _UNKNOWN_TIER


def _name(row: int) -> str:
    return "switches" if row == _UNKNOWN_TIER else row_name(row)
