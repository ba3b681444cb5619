"""The crossover chart: which algorithm (with its protocol, under ``execution: nccl``) is fastest
in each size band, and by how much it beats the runner-up.

:func:`crossover` is the table behind it, one row per size; :func:`crossover_figure` draws it:
above, every candidate's simulated time over the fastest one's at that size, NCCL's pick ringed
(how far it is from the fastest); below, a band per run of sizes with the same winner, in the
winner's colour, with the margin over the runner-up written at each size. Only what the run
computed is drawn.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from simulator.output.plots import (
    MAX_SIZE_LABELS,
    PICK_STYLE,
    colours,
    declutter,
    one_rank,
    one_rank_figure,
    pick_handle,
    picks,
    size_axis,
    title,
)

HATCHES = {"": "", "Simple": "", "LL128": "//", "LL": ".."}
"""Protocols told apart by hatching, as algorithms are by colour."""


def candidate(algorithm: str, protocol: object) -> str:
    """``ring/LL`` under ``execution: nccl``, the algorithm alone without a protocol."""
    return f"{algorithm}/{protocol}" if isinstance(protocol, str) and protocol else algorithm


def crossover(results: pd.DataFrame) -> pd.DataFrame:
    """Per size (ascending): the fastest simulated candidate (algorithm and protocol) and its
    time, the runner-up and its time, and the margin ``runner_up_time / winner_time - 1`` (0 on
    a tie; NaN when only one candidate ran or the winner's time is 0). Ties go to the candidate
    listed first, as in the table's best-per-size block.

    >>> frame = pd.DataFrame({"algorithm": ["ring", "direct", "ring", "direct"],
    ...                       "size_bytes": [1024, 1024, 2048, 2048],
    ...                       "sim_time_s": [2.0, 1.0, 3.0, 4.5]})
    >>> crossover(frame)[["size_bytes", "winner", "runner_up", "margin"]].to_dict("records")
    [{'size_bytes': 1024, 'winner': 'direct', 'runner_up': 'ring', 'margin': 1.0}, \
{'size_bytes': 2048, 'winner': 'ring', 'runner_up': 'direct', 'margin': 0.5}]
    """
    protocols = results["protocol"] if "protocol" in results else pd.Series("", index=results.index)
    rows = []
    for size, group in results.groupby("size_bytes", sort=True):
        ranked = group.assign(_order=range(len(group))).sort_values(["sim_time_s", "_order"],
                                                                   kind="stable")
        first = ranked.iloc[0]
        winner = candidate(str(first.algorithm), protocols[ranked.index[0]])
        if len(ranked) > 1:
            second = ranked.iloc[1]
            runner_up = candidate(str(second.algorithm), protocols[ranked.index[1]])
            runner_up_s = float(second.sim_time_s)
            margin = runner_up_s / first.sim_time_s - 1 if first.sim_time_s > 0 else math.nan
        else:
            runner_up, runner_up_s, margin = "", math.nan, math.nan
        rows.append((int(str(size)), winner, str(first.algorithm), float(first.sim_time_s),
                     runner_up, runner_up_s, margin))
    return pd.DataFrame(rows, columns=["size_bytes", "winner", "winner_algorithm",
                                       "winner_time_s", "runner_up", "runner_up_time_s",
                                       "margin"])


def _edges(sizes: list[int]) -> list[float]:
    """Band edges: geometric midpoints between sizes, and as far again beyond the ends."""
    if len(sizes) == 1:
        return [sizes[0] / 2, sizes[0] * 2]
    middles = [math.sqrt(a * b) for a, b in itertools.pairwise(sizes)]
    return [sizes[0] ** 2 / middles[0], *middles, sizes[-1] ** 2 / middles[-1]]


def margin_text(margin: float) -> str:
    """``+46%``, ``+0.3%``, ``<0.1%``, ``tie``, or ``–`` when there is no runner-up."""
    if math.isnan(margin):
        return "–"
    if margin == 0:
        return "tie"
    if margin < 0.0005:
        return "<0.1%"
    return f"+{100 * margin:.0f}%" if margin >= 0.095 else f"+{100 * margin:.1f}%"


def crossover_figure(results: pd.DataFrame) -> Figure:
    """The crossover chart of a results frame (see the module's docstring)."""
    heading = f"fastest per size · {title(results)}"
    if one_rank(results):
        return one_rank_figure(heading, results)
    table = crossover(results)
    palette = colours(results)
    protocols = results["protocol"] if "protocol" in results else pd.Series("", index=results.index)
    figure = Figure(figsize=(13, 7), layout="constrained")
    figure.suptitle(heading)
    ratio_axis, band_axis = figure.subplots(2, 1, sharex=True, height_ratios=(1, 1))
    fastest = table.set_index("size_bytes").winner_time_s
    marks = {"LL": "^", "LL128": "s", "Simple": "o"}
    for algorithm, rows in results.assign(_protocol=protocols.fillna("")).groupby(
            "algorithm", sort=False):
        rows = rows.sort_values("size_bytes")
        best = fastest.loc[rows.size_bytes].to_numpy()
        ratio = [t / b if b > 0 else math.nan for t, b in zip(rows.sim_time_s, best, strict=True)]
        colour = palette[str(algorithm)]
        ratio_axis.plot(rows.size_bytes, ratio, "-", color=colour, lw=1.6, label=str(algorithm),
                        gid=f"ratio:{algorithm}")
        for protocol, mark in marks.items():  # the protocol of each point, by its marker
            at = (rows._protocol == protocol).to_numpy()
            if at.any():
                ratio_axis.plot(rows.size_bytes[at], [r for r, keep in zip(ratio, at, strict=True)
                                                      if keep], mark, color=colour, ms=5)
    handles = [Line2D([], [], color=palette[a], lw=1.6, label=a) for a in palette]
    shown = set(protocols.fillna(""))
    handles += [Line2D([], [], color="0.3", ls="", marker=mark, label=protocol)
                for protocol, mark in marks.items() if protocol in shown]
    chosen = results[picks(results)].sort_values("size_bytes")
    if len(chosen):
        best = fastest.loc[chosen.size_bytes].to_numpy(dtype=float)
        picked = np.divide(chosen.sim_time_s.to_numpy(dtype=float), best,
                           out=np.full(len(best), math.nan), where=best > 0)
        ratio_axis.plot(chosen.size_bytes, picked, zorder=5, gid="nccl pick ratio",
                        clip_on=False, **PICK_STYLE)
        handles.append(pick_handle())
    ratio_axis.set_yscale("log")
    highest = max((line.get_ydata().max() for line in ratio_axis.get_lines()
                   if len(line.get_ydata()) and np.isfinite(line.get_ydata()).any()), default=1.0)
    ratio_axis.set_ylim(0.95, max(1.6, float(highest) * 1.15))
    ratio_axis.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.5, 2.0, 3.0, 5.0, 7.0)))
    ratio_axis.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}×"))
    ratio_axis.yaxis.set_minor_formatter(NullFormatter())
    ratio_axis.set_ylabel("simulated time / fastest")
    ratio_axis.grid(True, which="major", alpha=0.25)
    ratio_axis.legend(handles=handles, fontsize="small", loc="upper left",
                      bbox_to_anchor=(1.0, 1.0))
    sizes = table.size_bytes.tolist()
    edges = _edges(sizes)
    slot_in = 11.5 / len(sizes)  # the band axis is about 11.5 inches wide
    for column, (low, high), alpha in (("winner", (0.56, 1.0), 0.45),
                                       ("runner_up", (0.0, 0.44), 0.2)):
        start = 0
        for i in range(1, len(sizes) + 1):  # one band per run of sizes with the same name
            if i < len(sizes) and table[column][i] == table[column][start]:
                continue
            name = str(table[column][start])
            if name:
                algorithm, _, protocol = name.partition("/")
                span = band_axis.axvspan(edges[start], edges[i], ymin=low, ymax=high,
                                         color=palette[algorithm], alpha=alpha, lw=0,
                                         hatch=HATCHES.get(protocol, "xx"))
                span.set_gid(f"{column}:{name}:{sizes[start]}-{sizes[i - 1]}")
                width = (i - start) * slot_in  # inches; a 7-point character is ~0.055
                label = name if width > 0.055 * len(name) + 0.1 else name.replace("/", "\n")
                longest = max(len(part) for part in label.split("\n"))
                band_axis.text(math.sqrt(edges[start] * edges[i]), (low + high) / 2, label,
                               ha="center", va="center", fontsize=7, linespacing=1.0,
                               fontweight="bold" if column == "winner" else "normal",
                               rotation=0 if width > 0.055 * longest + 0.1 else 90)
            start = i
    points: Iterable[Any] = table.itertuples()
    for row in points:
        band_axis.text(row.size_bytes, 0.5, margin_text(row.margin), ha="center", va="center",
                       fontsize=7, gid=f"margin:{row.size_bytes}")
    for boundary in edges[1:-1]:
        band_axis.axvline(boundary, color="white", lw=0.8)
    size_axis(band_axis, sizes, most=2 * MAX_SIZE_LABELS)
    band_axis.set_xlim(edges[0], edges[-1])
    band_axis.set_ylim(0, 1)
    band_axis.set_yticks([0.78, 0.5, 0.22], ["fastest", "margin", "runner-up"])
    band_axis.tick_params(axis="y", length=0)
    return declutter(figure)
