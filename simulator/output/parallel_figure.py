"""A parallel training step drawn as it ran (``<name>-parallel.png``): a Gantt chart with a row
per (rank, stream) of the ranks shown, compute in one colour and each communication stream
(``tp``, ``pp``, ``dp``, ``ep``; any other, such as a Chakra trace's communicators, in one
more) in its own, times in ms. Each row is one ``broken_barh`` (one collection however many
spans it holds), so a step of tens of thousands of operations draws in a fraction of a second.
matplotlib's object API (rendered by Agg), never pyplot, as :mod:`.training_figure`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from simulator.output.parallel_rows import STREAMS, by_row
from simulator.output.plots import save
from simulator.training.execute import Execution

SHOWN_RANKS = 8
"""Ranks drawn when the caller names none: the first eight (one DGX host's GPUs, where TP is
innermost), so that the rows stay legible."""

COLOURS = {"compute": "#4C72B0", "tp": "#DD8452", "pp": "#55A868", "dp": "#C44E52",
           "ep": "#8172B2", "other": "#937860"}
"""A colour per stream of :data:`~simulator.output.parallel_rows.STREAMS`, and one for any other
(:mod:`.training_figure`'s palette: seaborn's "deep")."""

WIDTH_INCHES = 11.0
"""The figure's width, as :mod:`.training_figure`'s timeline."""

ROW_INCHES = 0.25
"""Height a row takes; the figure is :data:`MARGIN_INCHES` more, at least
:data:`MIN_HEIGHT_INCHES`."""

MARGIN_INCHES = 1.5
"""Height of the title, the time axis and the legend below it."""

LEGEND_INCHES = 0.3
"""Height kept for the legend, at the bottom of the figure."""

MIN_HEIGHT_INCHES = 3.0
"""The least height, a few rows' figure as tall as :mod:`.training_figure`'s timeline."""


def parallel_timeline_figure(execution: Execution, *, title: str,
                             ranks: Sequence[int] | None = None) -> Figure:
    """The Gantt chart of ``execution``'s ``ranks`` (default: the first :data:`SHOWN_RANKS`
    that ran something), a row per (rank, stream) they used, top to bottom in rank then stream
    order; ValueError naming a rank given that ran nothing. The bars are the spans' extents in
    ms (a test reads them back from the axes' collections, one per row)."""
    ran = sorted({span.rank for span in execution.spans})
    shown = ran[:SHOWN_RANKS] if ranks is None else list(dict.fromkeys(ranks))
    unknown = sorted(set(shown) - set(ran))
    if unknown:
        raise ValueError(f"rank {unknown[0]} ran nothing in this step: expected ranks among "
                         f"{ran[0]}..{ran[-1]}" if ran else
                         f"rank {unknown[0]} ran nothing: the step has no operation")
    chosen = set(shown)
    rows = by_row(span for span in execution.spans if span.rank in chosen)
    figure = Figure(figsize=(WIDTH_INCHES,
                             max(MIN_HEIGHT_INCHES, MARGIN_INCHES + ROW_INCHES * len(rows))))
    axes = figure.add_subplot()
    ms = 1e3
    drawn: dict[str, None] = {}
    for y, ((_, stream), spans) in enumerate(rows.items()):
        colour = stream if stream in STREAMS else "other"
        drawn[colour] = None
        axes.broken_barh([(span.start_s * ms, (span.end_s - span.start_s) * ms) for span in spans],
                         (y - 0.4, 0.8), facecolors=COLOURS[colour], linewidth=0)
    keys = list(rows)
    for y in range(1, len(keys)):  # a line between one rank's rows and the next's
        if keys[y][0] != keys[y - 1][0]:
            axes.axhline(y - 0.5, color="0.8", linewidth=0.6)
    axes.set_yticks(range(len(keys)), [f"rank {rank} {stream}" for rank, stream in keys],
                    fontsize=7)
    axes.set_ylim(len(keys) - 0.5, -0.5)  # the first row on top
    axes.set_xlim(0, execution.step_s * ms * 1.01 or 1.0)
    axes.set_xlabel("time in the step (ms)")
    ranks_note = (f"{len(shown)} of {len(ran)} ranks" if len(shown) < len(ran)
                  else f"{len(ran)} ranks")
    axes.set_title(f"{title}: step {execution.step_s * ms:.4g} ms ({ranks_note})", fontsize=9)
    order = [*STREAMS, "other"]
    handles = [Patch(facecolor=COLOURS[c], label=c if c != "other" else "other streams")
               for c in order if c in drawn]
    if handles:
        figure.legend(handles=handles, loc="lower left", fontsize=7, ncols=len(handles),
                      frameon=False)
    figure.tight_layout(rect=(0.0, LEGEND_INCHES / figure.get_figheight(), 1.0, 1.0))
    return figure


def draw_parallel_timeline(execution: Execution, path: Path, *, title: str,
                           ranks: Sequence[int] | None = None) -> None:
    """:func:`parallel_timeline_figure` to ``path`` as PNG, atomically."""
    save(parallel_timeline_figure(execution, title=title, ranks=ranks), path)
