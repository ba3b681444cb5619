"""The run's figure: bus bandwidth and time against size, simulated beside the closed form, with
the link rate a rank's bus bandwidth is measured against; and the pieces every figure of a
results frame shares (the size axis, the colours, the title, the one-rank case).

Plots only draw what a run computed; they never run a simulation. They use matplotlib's object
API (a :class:`~matplotlib.figure.Figure` rendered by its own canvas), so importing this module
never switches the importer's backend or touches pyplot's global state. Each figure is built by
a function that returns the Figure (tests read the plotted data back from it: every data line
carries a ``gid`` such as ``simulated:ring``) and written by another.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from simulator.model.collective import Collective
from simulator.output.files import write_atomically
from simulator.units import format_bandwidth, format_size

DPI = 110
MAX_SIZE_LABELS = 8
"""At most this many size labels on a panel half a figure wide (twice as many on a full-width
one); with more sizes, evenly spaced ones are labelled."""


@dataclass(frozen=True)
class LinkRate:
    """The per-direction wire rate a rank's bus bandwidth is compared with: the slowest link on
    rank 0's routes to the other ranks (bytes/s) and that link's kind (``nvlink``, ``net`` ...;
    empty when the topology does not say)."""

    bandwidth_Bps: float
    kind: str = ""

    @property
    def label(self) -> str:
        """``link rate 450GB/s (nvlink)``."""
        rate = format_bandwidth(float(f"{self.bandwidth_Bps:.4g}"))
        return f"link rate {rate}" + (f" ({self.kind})" if self.kind else "")


TAB20 = ("#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896",
         "#9467bd", "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f", "#c7c7c7",
         "#bcbd22", "#dbdb8d", "#17becf", "#9edae5")
"""matplotlib's ``tab20`` palette: ten hues, each dark then light, for figures of more than ten
algorithms, where the default cycle of ten would give two algorithms one colour."""


def colours(results: pd.DataFrame) -> dict[str, str]:
    """One colour per algorithm, in the order the algorithms ran (the same in every figure): the
    default cycle (C0-C9) for up to ten, :data:`TAB20` for more (repeating past twenty)."""
    algorithms = list(results.algorithm.unique())
    if len(algorithms) <= 10:
        return {algorithm: f"C{i}" for i, algorithm in enumerate(algorithms)}
    return {algorithm: TAB20[i % len(TAB20)] for i, algorithm in enumerate(algorithms)}


def title(results: pd.DataFrame) -> str:
    """``dgx-h100: allreduce on dgx_h100, 8 ranks, float32 sum (execution nccl)``."""
    first = results.iloc[0]
    execution = first.get("execution")
    return (f"{first['scenario']}: {first['collective']} on {first['topology']}, "
            f"{first['ranks']} rank{'s' if first['ranks'] != 1 else ''}, {first['dtype']} {first['op']}"
            + (f" (execution {execution})" if isinstance(execution, str) and execution else ""))


def one_rank(results: pd.DataFrame) -> bool:
    """Whether the run had a single rank: nothing moves, every time is 0, no bandwidth."""
    return bool((results.ranks <= 1).all())


def message_figure(heading: str, message: str, size: tuple[float, float] = (9, 3)) -> Figure:
    """A figure that says why there is nothing to plot, instead of empty axes."""
    figure = Figure(figsize=size, layout="constrained")
    figure.suptitle(heading)
    axis = figure.subplots()
    axis.set_axis_off()
    axis.text(0.5, 0.5, message, ha="center", va="center", wrap=True, transform=axis.transAxes)
    return figure


def one_rank_figure(heading: str, results: pd.DataFrame) -> Figure:
    """What every figure of a one-rank run shows instead of empty axes."""
    return message_figure(heading, f"One rank (p = 1): a {results.collective.iloc[0]} of one "
                                   "rank moves nothing, so every time is 0 and bandwidth is "
                                   "undefined. Nothing to plot; run two ranks or more.")


def size_ticks(sizes: Iterable[int], most: int = MAX_SIZE_LABELS) -> list[int]:
    """The sizes to label: the smallest, then each next one at least 1/(m-1) of the log range
    further, for the largest m ≤ ``most`` at which this ends exactly on the largest size (so a
    geometric sweep is labelled at even steps, and labels never crowd).

    >>> size_ticks([10**6, 1024**2, 10**7])
    [1000000, 10000000]
    >>> [k.bit_length() - 1 for k in size_ticks([2**k for k in range(10, 31)])]
    [10, 14, 18, 22, 26, 30]
    """
    ordered = sorted({int(s) for s in sizes if s > 0})
    if len(ordered) <= 1:
        return ordered
    span = math.log(ordered[-1] / ordered[0])
    for labels in range(min(most, len(ordered)), 1, -1):
        gap = span / (labels - 1) * (1 - 1e-9)
        kept = [ordered[0]]
        for size in ordered[1:]:
            if math.log(size / kept[-1]) >= gap:
                kept.append(size)
        if kept[-1] == ordered[-1]:
            return kept
    return [ordered[0], ordered[-1]]


def size_axis(axis: Axes, sizes: Iterable[int], label: str = "size per rank",
              most: int = MAX_SIZE_LABELS) -> None:
    """A log size axis labelled at the data's sizes (``64MiB``, ``10MB``; at most ``most`` of
    them, the others ticked without a label). :func:`declutter` then drops labels that would
    still touch once drawn."""
    ordered = sorted({int(s) for s in sizes if s > 0})
    ticks = size_ticks(ordered, most)
    axis.set_xscale("log", base=2)
    axis.set_xticks(ticks, [format_size(size) for size in ticks])
    axis.set_xticks([s for s in ordered if s not in ticks], minor=True)
    axis.xaxis.set_minor_formatter(NullFormatter())
    if len(ticks) == 1:  # one size: a decade around it, so the point sits in the middle
        axis.set_xlim(ticks[0] / 4, ticks[0] * 4)
    axis.set_xlabel(label)


def declutter(figure: Figure, gap_px: float = 6.0) -> Figure:
    """Draw the figure (on an Agg canvas, as savefig does) and, on every axis whose size labels
    would touch, keep every other label (the first and the last kept) until none do."""
    FigureCanvasAgg(figure)  # the canvas savefig("x.png") uses, whose renderer measures the text
    for _ in range(8):
        figure.draw_without_rendering()
        crowded = False
        for axis in figure.axes:
            low, high = sorted(axis.get_xlim())
            ticks = [(tick.get_loc(), tick.label1) for tick in axis.xaxis.get_major_ticks()
                     if low <= tick.get_loc() <= high and tick.label1.get_visible()
                     and tick.label1.get_text()]
            boxes = [label.get_window_extent() for _, label in ticks]
            if all(a.x1 + gap_px <= b.x0 for a, b in itertools.pairwise(boxes)):
                continue
            crowded = True
            keep = {i for i in range(0, len(ticks), 2)} | {len(ticks) - 1}
            if len(ticks) > 2 and len(ticks) - 2 in keep:
                keep.discard(len(ticks) - 2)
            kept = [loc for i, (loc, _) in enumerate(ticks) if i in keep]
            dropped = [loc for i, (loc, _) in enumerate(ticks) if i not in keep]
            axis.set_xticks(kept, [label.get_text() for i, (_, label) in enumerate(ticks)
                                   if i in keep])
            axis.set_xticks(sorted({*axis.get_xticks(minor=True), *dropped}), minor=True)
        if not crowded:
            break
    return figure


def time_axis_us(axis: Axes, values_us: Iterable[float]) -> None:
    """A log time axis in µs spanning at least a factor of 10, with distinct plain labels
    (1, 2, 5 per decade while few decades show)."""
    positive = [v for v in values_us if v > 0 and math.isfinite(v)]
    if not positive:
        return
    low, high = min(positive) / 1.25, max(positive) * 1.25
    if high / low < 10:
        middle = math.sqrt(low * high)
        low, high = middle / math.sqrt(10), middle * math.sqrt(10)
    axis.set_yscale("log")
    axis.set_ylim(low, high)
    subs = (1.0, 2.0, 5.0) if math.log10(high / low) <= 4 else (1.0,)
    axis.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.yaxis.set_minor_locator(LogLocator(base=10, subs=tuple(range(1, 10))))
    axis.yaxis.set_minor_formatter(NullFormatter())


def model_busbw_GBps(rows: pd.DataFrame) -> np.ndarray:
    """The closed form's bus bandwidth: size / model time, times the collective's factor (as
    the run computes ``busbw_GBps`` from the simulated time); NaN where the model time is 0."""
    factor = np.array([Collective(c).busbw_factor(int(p))
                       for c, p in zip(rows.collective, rows.ranks, strict=True)])
    time = rows.model_time_s.to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        algbw = np.where(time > 0, rows.size_bytes.to_numpy(dtype=float) / time / 1e9, np.nan)
    return np.asarray(algbw * factor, dtype=float)


def results_figure(results: pd.DataFrame, link_rate: LinkRate | None = None) -> Figure:
    """Two panels, one colour per algorithm: bus bandwidth against size, and time against size.
    Simulated: thick pale lines with dots; closed form: thin dashed lines drawn on top, so
    where the two agree the dashes run inside the simulated line. The bandwidth panel also has
    the link rate (dotted) when given. One rank: a figure saying there is nothing to plot."""
    if one_rank(results):
        return one_rank_figure(title(results), results)
    figure = Figure(figsize=(13, 4.8), layout="constrained")
    figure.suptitle(title(results))
    bw_axis, time_axis = figure.subplots(1, 2)
    palette = colours(results)
    bandwidths: list[float] = []
    times: list[float] = []
    for algorithm, rows in results.groupby("algorithm", sort=False):
        rows = rows.sort_values("size_bytes")
        colour = palette[str(algorithm)]
        model_bw = model_busbw_GBps(rows)
        for axis, simulated, model, kind in (
                (bw_axis, rows.busbw_GBps.to_numpy(dtype=float), model_bw, "busbw"),
                (time_axis, rows.sim_time_s.to_numpy(dtype=float) * 1e6,
                 rows.model_time_s.to_numpy(dtype=float) * 1e6, "time")):
            axis.plot(rows.size_bytes, simulated, "o-", color=colour, lw=3.2, ms=6, alpha=0.5,
                      zorder=2, gid=f"simulated {kind}:{algorithm}")
            axis.plot(rows.size_bytes, model, "--", color=colour, lw=1.4, zorder=3,
                      gid=f"closed form {kind}:{algorithm}")
        bandwidths += [*rows.busbw_GBps.dropna(), *model_bw[np.isfinite(model_bw)]]
        times += [*rows.sim_time_s * 1e6, *rows.model_time_s * 1e6]
    handles = [Line2D([], [], color=palette[a], lw=3.2, alpha=0.6, label=a) for a in palette]
    handles += [Line2D([], [], color="0.3", lw=3.2, alpha=0.5, marker="o", label="simulated"),
                Line2D([], [], color="0.2", lw=1.4, ls="--", label="closed form")]
    if link_rate is not None:
        rate = link_rate.bandwidth_Bps / 1e9
        bw_axis.axhline(rate, color="k", ls=":", lw=1.3, zorder=1, gid="link rate")
        bandwidths.append(rate)
        handles.append(Line2D([], [], color="k", ls=":", lw=1.3,
                              label=f"{link_rate.label},\nper direction"))
    sizes = results.size_bytes.unique()
    for axis in (bw_axis, time_axis):
        size_axis(axis, sizes)
        axis.grid(True, which="major", alpha=0.3)
    bw_axis.set_ylim(0, max(bandwidths, default=1.0) * 1.12 or 1.0)
    bw_axis.set_ylabel("bus bandwidth (GB/s)")
    time_axis.set_ylabel("time (µs)")
    time_axis_us(time_axis, times)
    time_axis.grid(True, which="minor", alpha=0.1)
    figure.legend(handles=handles, loc="outside right upper", fontsize="small")
    return declutter(figure)


def save(figure: Figure, path: Path) -> None:
    """Write a figure as PNG, atomically."""
    write_atomically(path, lambda tmp: figure.savefig(tmp, format="png", dpi=DPI))


def plot_results(results: pd.DataFrame, path: Path, link_rate: LinkRate | None = None) -> None:
    """Write :func:`results_figure` as PNG, atomically."""
    save(results_figure(results, link_rate), path)
