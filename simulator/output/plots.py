"""The run's figure: bus bandwidth and time against size, simulated beside the closed form, with
the link rate a rank's bus bandwidth is measured against, NCCL's pick marked and the closed form
capped at the fabric's ceiling; and the pieces every figure of a results frame shares (the size
axis, the colours, the title, the one-rank case, NCCL's picks).

Plots only draw what a run computed; they never run a simulation. They use matplotlib's object
API (a :class:`~matplotlib.figure.Figure` rendered by its own canvas), so importing this module
never switches the importer's backend or touches pyplot's global state. Each figure is built by
a function that returns the Figure (tests read the plotted data back from it: every data line
carries a ``gid`` such as ``simulated:ring``) and written by another.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


@dataclass(frozen=True)
class Ceiling:
    """The fabric's ceiling: at each size, the least time any algorithm needs on the machine's
    links (the fabric's floor, :func:`simulator.model.floor.floor_s`, on the wire as the graph
    describes it), whose busbw no algorithm can pass. It is the physical limit a figure caps a
    closed form at, not the link rate: a switch that reduces (NVLS on an NVSwitch) or a rank
    driving several links at once passes the slowest link's rate (470 GB/s simulated over a
    450 GB/s NVLink link), never the cut's. ``cut``: the tighter level (``GPU``: the links
    around each GPU; ``host``: the network links around each host); ``in_switch``: whether a
    switch reduces at that level, so each domain sends its input and receives its result once.
    """

    floor_s: tuple[tuple[int, float], ...]
    cut: str
    in_switch: bool = False

    def seconds(self, sizes: Iterable[int]) -> np.ndarray:
        """The floor (s) at each of ``sizes``; NaN at a size it was not taken at."""
        at = dict(self.floor_s)
        return np.array([at.get(int(size), math.nan) for size in sizes], dtype=float)

    def label(self, busbw_GBps: Sequence[float]) -> str:
        """``fabric's ceiling 898GB/s\n(GPU cut, switch reducing)``: its busbw at the sizes
        drawn (one value, as a floor linear in size gives; else the range)."""
        low, high = (format_bandwidth(float(f"{value:.3g}") * 1e9)
                     for value in (min(busbw_GBps), max(busbw_GBps)))
        how = f"{self.cut} cut" + (", switch reducing" if self.in_switch else "")
        return f"fabric's ceiling {low if low == high else f'{low}–{high}'}\n({how})"


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


def picks(results: pd.DataFrame) -> pd.Series:
    """Whether each row is NCCL's pick at its size (``nccl_pick``; False where the column is
    missing or empty, as under ``execution: ideal``)."""
    if "nccl_pick" not in results:
        return pd.Series(False, index=results.index)
    return results.nccl_pick.fillna(False).astype(bool)


def busbw_GBps(rows: pd.DataFrame, time_s: np.ndarray) -> np.ndarray:
    """The bus bandwidth of ``rows`` done in ``time_s``: size / time, times the collective's
    factor (as the run computes ``busbw_GBps`` from the simulated time); NaN where the time
    is 0."""
    factor = np.array([Collective(c).busbw_factor(int(p))
                       for c, p in zip(rows.collective, rows.ranks, strict=True)])
    with np.errstate(divide="ignore", invalid="ignore"):
        algbw = np.where(time_s > 0, rows.size_bytes.to_numpy(dtype=float) / time_s / 1e9, np.nan)
    return np.asarray(algbw * factor, dtype=float)


@dataclass(frozen=True)
class ClosedForm:
    """One algorithm's closed form as drawn: its time (s) and busbw, capped where it is faster
    than the fabric's floor (``capped``: there it is drawn at the floor and its ceiling)."""

    time_s: np.ndarray
    busbw_GBps: np.ndarray
    capped: np.ndarray

    @classmethod
    def of(cls, rows: pd.DataFrame, ceiling: Ceiling | None) -> ClosedForm:
        """``rows``' closed form (``model_time_s``), capped at ``ceiling`` when given."""
        time = rows.model_time_s.to_numpy(dtype=float)
        floor = (ceiling.seconds(rows.size_bytes) if ceiling is not None
                 else np.full(len(time), math.nan))
        capped = np.isfinite(floor) & (floor > 0) & (time < floor)
        drawn = np.where(capped, floor, time)
        return cls(drawn, busbw_GBps(rows, drawn), capped)


PICK_STYLE: dict[str, Any] = {"marker": "o", "ls": "", "ms": 12, "mfc": "none", "mec": "k",
                              "mew": 1.6}
"""NCCL's pick: a black ring around the algorithm's dot, on every figure that marks it."""


def pick_handle() -> Line2D:
    """The legend entry of :data:`PICK_STYLE`."""
    return Line2D([], [], **PICK_STYLE, label="NCCL's pick")


def results_figure(results: pd.DataFrame, link_rate: LinkRate | None = None,
                   ceiling: Ceiling | None = None) -> Figure:
    """Two panels, one colour per algorithm: bus bandwidth against size, and time against size.
    Simulated: thick pale lines with dots; closed form: thin dashed lines drawn on top, so
    where the two agree the dashes run inside the simulated line. The bandwidth panel also has
    the link rate (dotted) when given. NCCL's picks (``nccl_pick``) are ringed on both panels.
    With ``ceiling``, the fabric's ceiling is drawn (dash-dot: its busbw, and on the time panel
    its floor), and a closed form past it is drawn at it, each such point marked ``v`` and
    counted in the legend; the results keep the closed form's own value. One rank: a figure
    saying there is nothing to plot."""
    if one_rank(results):
        return one_rank_figure(title(results), results)
    figure = Figure(figsize=(13, 4.8), layout="constrained")
    figure.suptitle(title(results))
    bw_axis, time_axis = figure.subplots(1, 2)
    palette = colours(results)
    bandwidths: list[float] = []
    times: list[float] = []
    capped = 0
    for algorithm, rows in results.groupby("algorithm", sort=False):
        rows = rows.sort_values("size_bytes")
        colour = palette[str(algorithm)]
        model = ClosedForm.of(rows, ceiling)
        capped += int(model.capped.sum())
        for axis, simulated, drawn, kind in (
                (bw_axis, rows.busbw_GBps.to_numpy(dtype=float), model.busbw_GBps, "busbw"),
                (time_axis, rows.sim_time_s.to_numpy(dtype=float) * 1e6, model.time_s * 1e6,
                 "time")):
            axis.plot(rows.size_bytes, simulated, "o-", color=colour, lw=3.2, ms=6, alpha=0.5,
                      zorder=2, gid=f"simulated {kind}:{algorithm}")
            axis.plot(rows.size_bytes, drawn, "--", color=colour, lw=1.4, zorder=3,
                      gid=f"closed form {kind}:{algorithm}")
            if model.capped.any():
                axis.plot(rows.size_bytes[model.capped], drawn[model.capped], "v", color=colour,
                          mec="k", mew=0.6, ms=6, zorder=4, gid=f"capped {kind}:{algorithm}")
        bandwidths += [*rows.busbw_GBps.dropna(), *model.busbw_GBps[np.isfinite(model.busbw_GBps)]]
        times += [*rows.sim_time_s * 1e6, *model.time_s * 1e6]
    handles = [Line2D([], [], color=palette[a], lw=3.2, alpha=0.6, label=a) for a in palette]
    handles += [Line2D([], [], color="0.3", lw=3.2, alpha=0.5, marker="o", label="simulated"),
                Line2D([], [], color="0.2", lw=1.4, ls="--", label="closed form")]
    if link_rate is not None:
        rate = link_rate.bandwidth_Bps / 1e9
        bw_axis.axhline(rate, color="k", ls=":", lw=1.3, zorder=1, gid="link rate")
        bandwidths.append(rate)
        handles.append(Line2D([], [], color="k", ls=":", lw=1.3,
                              label=f"{link_rate.label},\nper direction"))
    chosen = results[picks(results)].sort_values("size_bytes")
    if len(chosen):
        bw_axis.plot(chosen.size_bytes, chosen.busbw_GBps, zorder=5, gid="nccl pick busbw",
                     **PICK_STYLE)
        time_axis.plot(chosen.size_bytes, chosen.sim_time_s * 1e6, zorder=5,
                       gid="nccl pick time", **PICK_STYLE)
        handles.append(pick_handle())
    if link_rate is not None and (past := _past_the_link(results, link_rate, ceiling)):
        handles.append(Line2D([], [], color="none", label=(
            f"closed form past the link rate:\n{', '.join(past)}\n(a switch reduces, or a "
            f"rank drives\nseveral links; the fabric's\nceiling still bounds it)")))
    top = [] if ceiling is None else _ceiling(results, ceiling, bw_axis, time_axis)
    height = max(bandwidths, default=1.0) * 1.12 or 1.0
    if ceiling is not None and top:
        above = min(top) > height * CEILING_ROOM  # drawn, but off the axis the data need
        if not above:
            height = max(height, max(top) * 1.12)
        handles += _ceiling_handles(ceiling, top, capped, above)
    sizes = results.size_bytes.unique()
    for axis in (bw_axis, time_axis):
        size_axis(axis, sizes)
        axis.grid(True, which="major", alpha=0.3)
    bw_axis.set_ylim(0, height)
    bw_axis.set_ylabel("bus bandwidth (GB/s)")
    time_axis.set_ylabel("time (µs)")
    time_axis_us(time_axis, times)
    time_axis.grid(True, which="minor", alpha=0.1)
    figure.legend(handles=handles, loc="outside right upper", fontsize="small")
    return declutter(figure)


CEILING_STYLE: dict[str, Any] = {"color": "k", "ls": "-.", "lw": 1.1, "zorder": 1}
"""The fabric's ceiling and floor: black dash-dot, under the data."""


def _ceiling(results: pd.DataFrame, ceiling: Ceiling, bw_axis: Axes,
             time_axis: Axes) -> list[float]:
    """Draw the fabric's ceiling on the bandwidth panel and its floor on the time panel, at the
    sizes it was taken at (the time panel's limits stay the data's: the floor of a small size
    is far below them); the ceiling's busbw at those sizes."""
    first = results.drop_duplicates("size_bytes").sort_values("size_bytes")
    floor = ceiling.seconds(first.size_bytes)
    known = np.isfinite(floor) & (floor > 0)
    first, floor = first[known], floor[known]
    top = busbw_GBps(first, floor)
    bw_axis.plot(first.size_bytes, top, gid="fabric ceiling", **CEILING_STYLE)
    time_axis.plot(first.size_bytes, floor * 1e6, gid="fabric floor", **CEILING_STYLE)
    return [float(value) for value in top]


CEILING_ROOM = 1.25
"""The bandwidth panel rises to show the fabric's ceiling only where it lies within a quarter
above the data (and the link rate): a far ceiling (898 GB/s over one DGX H100's curves, which
reach 480) would squash them; its legend entry then says it is above the axis."""


def _past_the_link(results: pd.DataFrame, link_rate: LinkRate,
                   ceiling: Ceiling | None) -> list[str]:
    """The algorithms whose closed form (as drawn: capped at the ceiling) passes the link
    rate's busbw somewhere: the figure says why that is no error (in-switch reduction, or a
    rank driving several links at once, which the link rate does not bound)."""
    rate = link_rate.bandwidth_Bps / 1e9
    return [str(algorithm) for algorithm, rows in results.groupby("algorithm", sort=False)
            if (ClosedForm.of(rows.sort_values("size_bytes"), ceiling).busbw_GBps
                > rate * (1 + 1e-9)).any()]


def _ceiling_handles(ceiling: Ceiling, top: list[float], capped: int,
                     above: bool = False) -> list[Line2D]:
    """The legend's entries for the ceiling (busbw ``top``; ``above`` the axis, where the
    panel does not rise to it) and, when any are, the ``capped`` closed-form points drawn at
    it."""
    where = " (above\nthe axis)" if above else ""
    handles = [Line2D([], [], **CEILING_STYLE,
                      label=f"{ceiling.label(top)}{where};\non time: the fabric's floor")]
    if capped:
        handles.append(Line2D([], [], color="0.2", lw=1.4, ls="--", marker="v", mec="k",
                              mew=0.6, label=f"closed form, capped at the\nfabric's ceiling "
                                             f"({capped} point{'s' if capped != 1 else ''})"))
    return handles


def save(figure: Figure, path: Path) -> None:
    """Write a figure as PNG, atomically."""
    write_atomically(path, lambda tmp: figure.savefig(tmp, format="png", dpi=DPI))


def plot_results(results: pd.DataFrame, path: Path, link_rate: LinkRate | None = None,
                 ceiling: Ceiling | None = None) -> None:
    """Write :func:`results_figure` as PNG, atomically."""
    save(results_figure(results, link_rate, ceiling), path)
