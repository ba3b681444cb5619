"""The files a run writes, one registry of writers for a run of sizes and a training run alike:
``--format csv,json,png,parquet,html`` picks among :data:`WRITERS`.

Each :class:`Writer` is one format. For a run of sizes it writes ``<name><suffix>`` from the
results frame; for a training run, its tables as ``<name>-steps<suffix>`` and
``<name>-buckets<suffix>``, its settings as ``<name>.json`` and its figures as
``<name>-timeline.png`` and ``<name>-sweeps.png`` (docs/results.md, docs/training.md); the
HTML report (``<name>.html``, :mod:`.report`) is a run of sizes' only. Every
file is written atomically (:func:`~simulator.output.files.write_atomically`). The JSON states
the scenario's resolved settings and the simulator's version (:mod:`.settings_json`), so a file
found later says how it was made.

The module is light to import: the command line lists the names of :data:`WRITERS` in its
``--help`` without loading pandas or matplotlib, so each writer imports what it formats with
when it writes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.output.digests import append_digests, records, write_digests
from simulator.output.files import write_atomically
from simulator.output.results import RESULT_COLUMNS
from simulator.settings import RunSettings

if TYPE_CHECKING:
    import pandas as pd

    from simulator.output.observed import Observed
    from simulator.scenario.spec import Scenario
    from simulator.training.results import Training


@dataclass(frozen=True)
class Writer:
    """One output format: its suffix, how it writes a run of sizes' results file, how it writes
    a training run's files into a directory (returning their paths, in order; None: a format
    a training run refuses), whether it holds the results' rows (a run of sizes then rewrites
    it after every point), the endings of the files it writes beside the results file
    (``-crossover.png``), and how it writes the results with what the run observed beside
    them (:class:`Observed`; None: a format that shows none of it)."""

    suffix: str
    results: Callable[[pd.DataFrame, Scenario, RunSettings, Path], None]
    training: Callable[[Training, Scenario, RunSettings, Path], list[Path]] | None
    holds_rows: bool = False
    beside: tuple[str, ...] = ()
    observed: Callable[[pd.DataFrame, Scenario, Path, Observed], None] | None = None

    def files(self, name: str) -> tuple[str, ...]:
        """The names of the files this writer writes for a run of sizes named ``name``, its
        results file (``<name><suffix>``) first: what a run lists, checks before it starts and
        cleans up after, asked here rather than kept in a second list.

        >>> WRITERS["png"].files("dgx")
        ('dgx.png', 'dgx-crossover.png')
        """
        return (f"{name}{self.suffix}", *(f"{name}{ending}" for ending in self.beside))


def to_csv(frame: pd.DataFrame, path: Path) -> None:
    """A table as CSV: floats at full precision, no index."""
    frame.to_csv(path, index=False)


def to_parquet(frame: pd.DataFrame, path: Path) -> None:
    """A table as Parquet, with its columns' types (needs pyarrow, the ``parquet`` extra)."""
    frame.to_parquet(path, engine="pyarrow", index=False)


def write_csv(results: pd.DataFrame, scenario: Scenario, run: RunSettings, path: Path) -> None:
    """The results file: columns in :data:`RESULT_COLUMNS` order; its rows' digests written
    before it (:mod:`~simulator.output.digests`), so that a row on disk always has one."""
    text = results[list(RESULT_COLUMNS)].to_csv(index=False)
    write_digests(path, records(text)[1:])

    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8", newline="")

    write_atomically(path, write)


def append_csv(rows: pd.DataFrame, path: Path) -> None:
    """``rows`` added to the end of the results file ``path`` as :func:`write_csv` would write
    them (their lines alone: every value is formatted by itself, floats at full precision), in
    one write, flushed to disk: a run of n points writes O(n) bytes, not O(n²), and a reader
    sees whole lines (a kill within the write leaves at most a last line without its newline,
    which ``run --resume`` drops). Their digests are appended to the sidecar first."""
    text = rows[list(RESULT_COLUMNS)].to_csv(index=False, header=False)
    append_digests(path, records(text))
    with path.open("a", encoding="utf-8", newline="") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())


def write_parquet(results: pd.DataFrame, scenario: Scenario, run: RunSettings, path: Path) -> None:
    """The results file as Parquet: the CSV's columns and rows, with their types."""
    write_atomically(path, lambda tmp: to_parquet(results[list(RESULT_COLUMNS)], tmp))


def write_settings(results: pd.DataFrame, scenario: Scenario, run: RunSettings, path: Path) -> None:
    """The settings that produced the results, as JSON
    (:func:`~simulator.output.settings_json.settings`)."""
    _settings_file(scenario, run, path)


def write_png(results: pd.DataFrame, scenario: Scenario, run: RunSettings, path: Path) -> None:
    """The figures of :func:`~simulator.output.figures.write_figures`: ``<name>.png`` (busbw and
    time against size, with the scenario's link rate and fabric's ceiling) and
    ``<name>-crossover.png`` beside it."""
    from simulator.output.figures import limits, write_figures

    rate, ceiling = limits(scenario, results.size_bytes)
    write_figures(results, path.with_suffix(""), rate, ceiling=ceiling)


def write_html(results: pd.DataFrame, scenario: Scenario, run: RunSettings, path: Path) -> None:
    """The report of :mod:`simulator.output.report`: one self-contained HTML file of the
    table, the choice block, the figures and the fault comparison (the links' heatmap and the
    points left out where the run observed them: :data:`Writer.observed`)."""
    from simulator.output.report import write_report

    write_report(results, scenario, path)


def write_html_observed(results: pd.DataFrame, scenario: Scenario, path: Path,
                        observed: Observed) -> None:
    """The report with what the run ``observed``: the links' heatmap, the points left out."""
    from simulator.output.report import write_report

    write_report(results, scenario, path, observed)


def write_training_csv(training: Training, scenario: Scenario, run: RunSettings,
                       directory: Path) -> list[Path]:
    """``<name>-steps.csv`` and ``<name>-buckets.csv`` (:mod:`simulator.output.training`)."""
    return _training_tables(training, directory, ".csv", to_csv)


def write_training_parquet(training: Training, scenario: Scenario, run: RunSettings,
                           directory: Path) -> list[Path]:
    """The same two tables as Parquet."""
    return _training_tables(training, directory, ".parquet", to_parquet)


def write_training_settings(training: Training, scenario: Scenario, run: RunSettings,
                            directory: Path) -> list[Path]:
    """``<name>.json``: the scenario's settings with its training step's, and how it was run."""
    path = directory / f"{training.scenario}.json"
    _settings_file(scenario, run, path)
    return [path]


def write_training_png(training: Training, scenario: Scenario, run: RunSettings,
                       directory: Path) -> list[Path]:
    """``<name>-timeline.png`` (the step's two streams), and ``<name>-sweeps.png`` when the
    scenario sweeps (:mod:`simulator.output.training_figure`)."""
    from simulator.output.training_figure import draw_sweeps, draw_timeline

    paths = _parallel_figures(training, directory) if training.step.parallel is not None else []
    figures = [] if paths else [("timeline", draw_timeline)]
    if training.cap_sweep or training.scale_sweep:
        figures.append(("sweeps", draw_sweeps))
    for figure, draw in figures:
        path = directory / f"{training.scenario}-{figure}.png"
        write_atomically(path, partial(draw, training))
        paths.append(path)
    return paths


def _parallel_figures(training: Training, directory: Path) -> list[Path]:
    """A parallel step as it ran: ``<name>-parallel.png`` (a row per rank and stream) and
    ``<name>-parallel.json`` (a Perfetto trace, a track per communicator), ranks named
    globally (a folded step's units are its stages' first ranks)."""
    from dataclasses import replace

    from simulator.output.parallel_figure import draw_parallel_timeline
    from simulator.output.perfetto import write_parallel_trace
    from simulator.training.execute import Execution

    run = training.step.parallel
    assert run is not None
    ranks = run.unit_ranks
    execution = Execution(tuple(replace(span, rank=ranks[span.rank])
                                for span in run.execution.spans), run.execution.step_s)
    groups = {(ranks[rank], op.id): op.group for rank, op in run.graph.ops() if op.group}
    png = directory / f"{training.scenario}-parallel.png"
    draw_parallel_timeline(execution, png, title=f"{training.scenario}: {run.layout.label()}",
                           ranks=sorted(set(ranks))[:8])
    trace = directory / f"{training.scenario}-parallel.json"
    write_parallel_trace(execution, trace, name=training.scenario, groups=groups)
    return [png, trace]


def _training_tables(training: Training, directory: Path, suffix: str,
                     write: Callable[[pd.DataFrame, Path], None]) -> list[Path]:
    from simulator.output.training import TABLES

    paths = []
    for table, frame in TABLES.items():
        if table == "layouts" and not training.layouts:
            continue  # only a layout sweep has them
        if table == "buckets" and training.step.parallel is not None:
            continue  # a parallel step's collectives are in its trace, not DDP's buckets
        path = directory / f"{training.scenario}-{table}{suffix}"
        write_atomically(path, partial(write, frame(training)))
        paths.append(path)
    return paths


def _settings_file(scenario: Scenario, run: RunSettings, path: Path) -> None:
    from simulator.output.settings_json import settings

    text = json.dumps(settings(scenario, run, path.parent), indent=2, ensure_ascii=False) + "\n"

    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8")

    write_atomically(path, write)


WRITERS: dict[str, Writer] = {
    # results, one row per (algorithm, size); a training run's steps and buckets
    "csv": Writer(".csv", write_csv, write_training_csv, holds_rows=True),
    # the resolved settings and the simulator's version
    "json": Writer(".json", write_settings, write_training_settings),
    # bus bandwidth and time against size, and the crossover chart (figures.figure_paths); a
    # training step's timeline and sweeps
    "png": Writer(".png", write_png, write_training_png, beside=("-crossover.png",)),
    # the CSV's tables again, typed (pyarrow)
    "parquet": Writer(".parquet", write_parquet, write_training_parquet, holds_rows=True),
    # one self-contained page of the table, figures, choice block, link heatmap and faults; a
    # training run refuses it (its step has its own tables and figures)
    "html": Writer(".html", write_html, None, observed=write_html_observed),
}
"""Every output format by name; ``--format`` takes a comma-separated list of these."""

DEFAULT_FORMATS = ("csv", "json", "png")
"""What a run writes unless told otherwise (Parquet needs an optional package)."""

TRAINING_FORMATS = tuple(name for name, writer in WRITERS.items() if writer.training is not None)
"""The formats a training run writes (``run`` refuses the others with a training scenario)."""

RESULTS_FORMATS = tuple(name for name, writer in WRITERS.items() if writer.holds_rows)
"""The formats that hold the results' rows: a run of sizes rewrites them after every point."""


def write_results(results: pd.DataFrame, scenario: Scenario, run: RunSettings, directory: Path,
                  formats: Sequence[str] = DEFAULT_FORMATS,
                  observed: Observed | None = None) -> list[Path]:
    """Write ``<directory>/<name><suffix>`` for each format, in order; the paths written, each
    format's :meth:`Writer.files` (a figure and its crossover chart beside it). What the run
    ``observed`` beyond its rows goes to the formats that show it."""
    paths = []
    for name in formats:
        writer = WRITERS[name]
        files = [directory / file for file in writer.files(scenario.name)]
        if observed is not None and writer.observed is not None:
            writer.observed(results, scenario, files[0], observed)
        else:
            writer.results(results, scenario, run, files[0])
        paths += files
    return paths


def write_training(training: Training, scenario: Scenario, run: RunSettings, directory: Path,
                   formats: Sequence[str] = DEFAULT_FORMATS) -> list[Path]:
    """Write a training run's files of each format into ``directory``, in order; the paths
    written. ValueError for a format a training run does not write (``run`` refuses it
    before the step runs: :data:`TRAINING_FORMATS`)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in formats:
        write = WRITERS[name].training
        if write is None:
            raise ValueError(f"a training run writes {', '.join(TRAINING_FORMATS)}, not {name}")
        paths += write(training, scenario, run, directory)
    return paths
