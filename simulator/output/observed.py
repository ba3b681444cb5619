"""What ``run --trace FILE.json [--trace-point ALGO:SIZE]`` and ``--links FILE.csv`` ask of a
run, and the files they write once it is done: the trace (:mod:`.trace`), the per-link table
(:mod:`.links`) and its heatmap (:mod:`.link_figure`, ``FILE.png`` beside the table); and what
a run saw beyond its rows, for the formats that show it (:class:`Observed`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from simulator.errors import InputError, Problem
from simulator.model.activity import Watch
from simulator.output.link_figure import write_link_heatmap
from simulator.output.links import links_frame, write_links
from simulator.output.trace import parse_trace_point, write_trace
from simulator.scenario.spec import Scenario

if TYPE_CHECKING:
    from simulator.plan import LeftOut


@dataclass(frozen=True)
class Observed:
    """What a run saw beyond its rows, for the formats that show it (the report): the link
    usage ``run --links`` recorded (:func:`~.links.links_frame`; None where not asked for)
    and the points ``all`` or ``auto`` left out, each with why."""

    links: pd.DataFrame | None = None
    left_out: tuple[LeftOut, ...] = ()


def watch_for(scenario: Scenario, algorithms: Sequence[str], trace: Path | None,
              trace_point: str | None, links: Path | None,
              points: Sequence[tuple[str, int]] | None = None) -> Watch | None:
    """The :class:`Watch` the options ask for (None when neither asks); InputError, before
    anything runs, for a ``--trace-point`` that is not a point of the run (one of
    ``algorithms``, those that run, at one of the scenario's sizes; one of ``points`` where
    given) or comes without ``--trace``, and for a file that is a directory."""
    if trace_point is not None and trace is None:
        raise InputError([Problem("command line", "--trace-point", "expected --trace FILE.json "
                                                                   "beside it, to write the trace")])
    for option, path in (("--trace", trace), ("--links", links)):
        if path is not None and path.is_dir():
            raise InputError([Problem("command line", option, f"expected a file to write, but "
                                                              f"{path} is a directory")])
    if trace is None and links is None:
        return None
    if trace is None:
        return Watch()
    return Watch(trace=True if trace_point is None
                 else {parse_trace_point(trace_point, scenario, algorithms, points)})


def link_usage(watch: Watch | None, links: Path | None) -> pd.DataFrame | None:
    """The links table ``--links`` asks for (:func:`~.links.links_frame`), which its file and
    the HTML report show; None where it was not asked for."""
    return links_frame(watch.activities) if watch is not None and links is not None else None


def write_observed(watch: Watch | None, scenario: Scenario, trace: Path | None,
                   links: Path | None, usage: pd.DataFrame | None = None) -> list[Path]:
    """Write what ``watch`` saw to the files asked for, each atomically (``usage``: the links
    table, where :func:`link_usage` made it already); the paths written."""
    if watch is None:
        return []
    paths = []
    if trace is not None:
        write_trace(trace, watch.activities, scenario=scenario.name)
        paths.append(trace)
    if links is not None:
        frame = usage if usage is not None else links_frame(watch.activities)
        write_links(links, frame)
        paths.append(links)
        if not frame.empty:
            figure = links.with_name(links.stem + ("-heatmap" if links.suffix == ".png" else "")
                                     + ".png")
            write_link_heatmap(figure, frame)
            paths.append(figure)
    return paths
