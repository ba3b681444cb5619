"""The HTML report of a run of sizes (``--format html``): one self-contained file,
``<output>/<name>.html``, holding what the run printed and drew, to open in a browser.

In order, the answer first: a heading (scenario, topology, ranks, collective), the caveats of
its faults (where NCCL would abort rather than go on), NCCL's choice per size (or, without
NCCL's pick, the best algorithm per size), the figures of the ``png`` writer, the results table
(the text table's columns; each rounded number's exact value, as the CSV holds it, in its
tooltip) with the deviation's reading line, the links' heatmap (with ``run --links``), the
fault comparison (a scenario with faults), and the text table as the run printed it. It only
formats what a run computed.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.model.collective import Collective
from simulator.model.faults import caveats
from simulator.output.crossover import crossover_figure
from simulator.output.figures import limits
from simulator.output.files import write_atomically
from simulator.output.html import Cell, figure, page, paragraph, table
from simulator.output.link_figure import link_heatmap
from simulator.output.observed import Observed
from simulator.output.plots import results_figure
from simulator.output.table import (
    DEVIATION_GUIDE,
    best_per_size,
    deviation_text,
    format_table,
    nccl_choice_per_size,
    number_text,
    suffers_least,
    verified_text,
)
from simulator.scenario.spec import Scenario
from simulator.version import __version__

RESULT_HEADERS = ("size(B)", "count", "type", "redop", "algorithm", "time(us)", "algbw(GB/s)",
                  "busbw(GB/s)", "model(us)", "dev(%)", "verified")
"""The results table's columns: the text table's (:func:`~.table.format_table`)."""


def write_report(results: pd.DataFrame, scenario: Scenario, path: Path,
                 observed: Observed | None = None) -> None:
    """:func:`report` written to ``path``, atomically."""
    text = report(results, scenario, observed or Observed())

    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8")

    write_atomically(path, write)


def report(results: pd.DataFrame, scenario: Scenario, observed: Observed | None = None) -> str:
    """The whole page of a run's ``results``, with what the run ``observed`` beyond its rows:
    the link usage ``run --links`` recorded (None where it was not asked for) and the points
    ``all`` or ``auto`` left out."""
    observed = observed or Observed()
    if results.empty:
        return page(f"allreduce-sim · {scenario.name}",
                    [f"<h1>{_escaped(scenario.name)}</h1>", paragraph("no results")])
    first = results.iloc[0]
    shown = (results.sort_values("size_bytes", kind="stable") if scenario.nccl_choice
             else results)  # auto: NCCL's pick per size, in size order, as the text table
    body = [f"<h1>allreduce-sim · {_escaped(first['scenario'])}</h1>",
            paragraph(f"topology {first['topology']} · {first['ranks']} ranks · "
                      f"{first['collective']} · {first['dtype']} {first['op']} · "
                      f"{results.algorithm.nunique()} algorithm(s) × "
                      f"{results.size_bytes.nunique()} size(s)", "meta"),
            *(paragraph(caveat, "caveat") for caveat in caveats(scenario.faults)),
            *_choice(results, scenario),
            "<h2>Figures</h2>",
            figure("results-figure", results_figure(results, *limits(scenario, results.size_bytes)),
                   "bus bandwidth and time against size, simulated beside the closed form"),
            figure("crossover-figure", crossover_figure(results),
                   "the fastest algorithm per size"),
            "<h2>Results</h2>",
            table("results", RESULT_HEADERS, (_result_cells(row) for row in _rows(shown))),
            paragraph(DEVIATION_GUIDE.removeprefix("# "), "note guide"),
            *(paragraph(left.note, "note left-out")
              for left in observed.left_out),
            "<h2>Link usage</h2>", _links(observed.links),
            *_faults(shown),
            "<details><summary>The whole text table, as run --verbose prints it</summary>"
            f"<pre>{_escaped(_text_table(results, scenario, observed))}</pre></details>",
            paragraph(f"allreduce-sim {__version__}")]
    return page(f"allreduce-sim · {first['scenario']}", body)


def _text_table(results: pd.DataFrame, scenario: Scenario, observed: Observed) -> str:
    """The text table in full, as ``run --verbose`` prints it: the one call of
    :func:`~.table.format_table` here."""
    return format_table(results, picks_only=scenario.nccl_choice,
                        registered=scenario.nccl.symmetric, verbose=True,
                        left_out=observed.left_out)


def _result_cells(row: Any) -> list[Cell]:
    """A results row's cells, as the text table prints them; the exact values behind the
    rounded ones in their tooltips (the CSV's columns, at full precision)."""
    redop = row.op if Collective(row.collective).reduces else "none"  # as nccl-tests prints
    checked = "" if pd.isna(row.verified) else (f"verified = {row.verified}, max_abs_error = "
                                                f"{float(row.max_abs_error)}")
    return [Cell(str(row.size_bytes), number=True), Cell(str(row.count), number=True),
            Cell(str(row.dtype)), Cell(str(redop)), Cell(str(row.algorithm)),
            _us(row.sim_time_s, "sim_time_s"),
            Cell(number_text(row.algbw_GBps), f"algbw_GBps = {float(row.algbw_GBps)}", True),
            Cell(number_text(row.busbw_GBps), f"busbw_GBps = {float(row.busbw_GBps)}", True),
            _us(row.model_time_s, "model_time_s"),
            Cell(deviation_text(row), number=True), Cell(verified_text(row), checked)]


def _choice(results: pd.DataFrame, scenario: Scenario) -> list[str]:
    """NCCL's choice per size (:func:`~.table.nccl_choice_per_size`), a row marked where its
    pick is not the fastest simulated; without NCCL's pick, the best algorithm per size
    (:func:`~.table.best_per_size`) where several ran."""
    choice = nccl_choice_per_size(results, registered=scenario.nccl.symmetric)
    if not choice.empty:
        heading = ["<h2>NCCL's choice per size</h2>"]
        picks = [[Cell(str(row.size_bytes), number=True), Cell(f"{row.pick}/{row.protocol}"),
                  _us(row.nccl_time_s, "nccl_time_s"), _us(row.sim_time_s, "sim_time_s")]
                 for row in _rows(choice)]
        if scenario.nccl_choice:  # auto ran the picks alone
            return [*heading, table("choice", ("size(B)", "NCCL pick", "NCCL(us)", "sim(us)"),
                                    picks),
                    paragraph("the fastest simulated alternative beside each pick: algorithms: "
                              "all (or a list) under execution: nccl")]
        rows = [[*pick, Cell("(the pick)" if row.best else f"{row.fastest}/{row.fastest_protocol}"),
                 _us(row.fastest_time_s, "fastest_time_s"), Cell("yes" if row.best else "NO")]
                for pick, row in zip(picks, _rows(choice), strict=True)]
        return [*heading, table("choice", ("size(B)", "NCCL pick", "NCCL(us)", "sim(us)",
                                           "fastest simulated", "time(us)", "best"),
                                rows, (not best for best in choice.best)),
                paragraph("its tuner's pick and model time; the fastest simulated point the "
                          "user could run beside it (marked: NCCL's pick is not the fastest)")]
    if results.algorithm.nunique() < 2:
        return []
    best = best_per_size(results)
    rows = [[Cell(str(row.size_bytes), number=True), Cell(str(row.simulated)),
             _us(row.sim_time_s, "sim_time_s"), Cell(str(row.closed_form)),
             _us(row.model_time_s, "model_time_s"), Cell("yes" if row.agree else "NO")]
            for row in _rows(best)]
    return ["<h2>Best algorithm per size</h2>",
            table("best", ("size(B)", "simulated", "time(us)", "closed form", "time(us)",
                           "agree"), rows, (not agree for agree in best.agree)),
            paragraph("the fastest simulated; the closed forms' pick beside it (marked where "
                      "they disagree)")]


def _links(links: pd.DataFrame | None) -> str:
    """The links' heatmap (:func:`~.link_figure.link_heatmap`), or a line saying how to get
    it."""
    if links is None:
        return paragraph("run with --links FILE.csv to add the heatmap of every link's "
                         "utilisation at every point here")
    if links.empty:
        return paragraph("no link carried bytes")
    return figure("links-figure", link_heatmap(links),
                  "utilisation of the links at every point (bytes / (bandwidth × time))")


def _faults(results: pd.DataFrame) -> list[str]:
    """The fault comparison where the run had faults: each point with and without them, the
    row of the algorithm that suffers least at its size (the least time added) marked."""
    if "faults" not in results or not (results.faults.fillna("") != "").any():
        return []
    least = set(suffers_least(results)) if results.algorithm.nunique() > 1 else set()
    rows = [[Cell(str(row.size_bytes), number=True), Cell(str(row.algorithm)),
             _us(row.healthy_time_s, "healthy_time_s"), _us(row.sim_time_s, "sim_time_s"),
             Cell(f"+{(row.sim_time_s - row.healthy_time_s) * 1e6:.2f}", number=True),
             Cell(f"x{row.fault_slowdown:.3f}", f"fault_slowdown = {float(row.fault_slowdown)}",
                  True)]
            for row in _rows(results)]
    return ["<h2>Faults</h2>", paragraph(f"faults: {results.faults.iloc[0]}"),
            table("faults", ("size(B)", "algorithm", "healthy(us)", "faulted(us)", "added(us)",
                             "slowdown"), rows, (index in least for index in results.index)),
            paragraph("marked: the algorithm that suffers least at its size, by the time the "
                      "faults add (a ratio would favour one slow to begin with)")]


def _us(seconds: float, column: str) -> Cell:
    """A time in microseconds to two decimals, the CSV's seconds in its tooltip."""
    return Cell(f"{seconds * 1e6:.2f}", f"{column} = {float(seconds)}", True)


def _rows(frame: pd.DataFrame) -> Iterable[Any]:
    """A frame's rows as named tuples."""
    rows: Iterable[Any] = frame.itertuples(index=False)
    return rows


def _escaped(value: object) -> str:
    """``value`` as text, escaped for HTML."""
    return escape(str(value))
