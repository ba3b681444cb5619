"""Simulated beside measured: a results frame's bus bandwidth over a measured sweep (an
nccl-tests log or CSV, read by :mod:`simulator.measured` and handed over as a
:class:`Reference`), with the relative error per size in a lower panel.

The simulated curve compared is the one a measurement of NCCL's default selection answers: at
each size NCCL's pick (rows with ``nccl_pick``, under ``execution: nccl``), or, without picks,
the fastest algorithm simulated. The error is ``(simulated - measured) / measured`` of the bus
bandwidth, at the sizes both have; every algorithm simulated is drawn faintly behind.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from simulator.errors import InputError, Problem
from simulator.output.crossover import candidate
from simulator.output.plots import (
    MAX_SIZE_LABELS,
    colours,
    declutter,
    one_rank,
    one_rank_figure,
    size_axis,
    title,
)

TESTS = {"all_reduce_perf": "allreduce", "reduce_scatter_perf": "reduce_scatter",
         "all_gather_perf": "allgather", "broadcast_perf": "broadcast", "reduce_perf": "reduce"}
"""The nccl-tests binaries and the collective each measures."""


@dataclass(frozen=True)
class Reference:
    """A measured sweep as plain data: where it came from, the nccl-tests binary when the log
    names it, and per size (ascending or not) the measured bus bandwidth in GB/s."""

    source: str
    size_bytes: tuple[int, ...]
    busbw_GBps: tuple[float, ...]
    test: str | None = None


def check_reference(results: pd.DataFrame, reference: Reference) -> None:
    """InputError when the measurement is of another collective than the results."""
    measured = TESTS.get(reference.test or "")
    simulated = str(results.collective.iloc[0])
    if measured is not None and measured != simulated:
        raise InputError([Problem(reference.source, "", f"measures {measured} "
                                  f"({reference.test}), but the results are of {simulated}; "
                                  f"expected a log of the same collective")])


def prediction(results: pd.DataFrame) -> pd.DataFrame:
    """Per size (ascending): the simulated point a measurement of NCCL's default is compared
    with (NCCL's pick where the results mark one, else the fastest; ties: listed first).
    Columns size_bytes, name (``ring/LL``), busbw_GBps, pick (whether it is NCCL's pick)."""
    picks = (results.nccl_pick.fillna(False).astype(bool) if "nccl_pick" in results
             else pd.Series(False, index=results.index))
    protocols = results["protocol"] if "protocol" in results else pd.Series("", index=results.index)
    rows = []
    for size, group in results.groupby("size_bytes", sort=True):
        picked = group[picks[group.index]]
        chosen = picked.index[0] if len(picked) else group.index[
            int(group.sim_time_s.to_numpy().argmin())]
        row = results.loc[chosen]
        rows.append((int(str(size)), candidate(str(row.algorithm), protocols[chosen]),
                     float(row.busbw_GBps), bool(len(picked))))
    return pd.DataFrame(rows, columns=["size_bytes", "name", "busbw_GBps", "pick"])


def errors(results: pd.DataFrame, reference: Reference) -> pd.DataFrame:
    """At every size both have (ascending): the predicted point's name, its simulated bus
    bandwidth, the measured one, and ``error = (simulated - measured) / measured``."""
    predicted = prediction(results)
    measured = pd.DataFrame({"size_bytes": list(reference.size_bytes),
                             "measured_busbw_GBps": list(reference.busbw_GBps)})
    measured = measured.drop_duplicates("size_bytes", keep="first")
    both = predicted.merge(measured, on="size_bytes").sort_values("size_bytes")
    both = both.rename(columns={"busbw_GBps": "simulated_busbw_GBps"})
    both["error"] = (both.simulated_busbw_GBps - both.measured_busbw_GBps) / both.measured_busbw_GBps
    return both[["size_bytes", "name", "simulated_busbw_GBps", "measured_busbw_GBps", "error"]
                ].reset_index(drop=True)


def reference_figure(results: pd.DataFrame, reference: Reference) -> Figure:
    """Bus bandwidth against size, measured (black) over simulated (NCCL's pick or the fastest,
    red; every algorithm faintly), and below it the relative error at the sizes both have."""
    heading = f"simulated vs measured ({reference.source}) · {title(results)}"
    if one_rank(results):
        return one_rank_figure(heading, results)
    check_reference(results, reference)
    figure = Figure(figsize=(13, 7), layout="constrained")
    figure.suptitle(heading)
    bw_axis, error_axis = figure.subplots(2, 1, sharex=True, height_ratios=(2, 1))
    palette = colours(results)
    for algorithm, rows in results.groupby("algorithm", sort=False):
        rows = rows.sort_values("size_bytes")
        bw_axis.plot(rows.size_bytes, rows.busbw_GBps, "-", color=palette[str(algorithm)],
                     lw=1.2, alpha=0.35, label=str(algorithm), gid=f"simulated:{algorithm}")
    predicted = prediction(results)
    what = ("NCCL's pick" if predicted.pick.all() else
            "NCCL's pick, else fastest" if predicted.pick.any() else "fastest")
    bw_axis.plot(predicted.size_bytes, predicted.busbw_GBps, "o-", color="C3", lw=2.4, ms=5,
                 zorder=4, label=f"simulated, {what} per size", gid="prediction")
    order = np.argsort(reference.size_bytes)
    measured_sizes = np.asarray(reference.size_bytes)[order]
    measured_bw = np.asarray(reference.busbw_GBps)[order]
    bw_axis.plot(measured_sizes, measured_bw, "s-", color="k", lw=1.6, ms=4, zorder=5,
                 label="measured", gid="measured")
    bw_axis.set_ylabel("bus bandwidth (GB/s)")
    bw_axis.set_ylim(0, max([*predicted.busbw_GBps.dropna(), *measured_bw,
                             *results.busbw_GBps.dropna()], default=1.0) * 1.1 or 1.0)
    bw_axis.grid(True, alpha=0.3)
    bw_axis.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    table = errors(results, reference)
    percent = 100 * table.error
    error_axis.axhline(0, color="k", lw=0.8)
    error_axis.plot(table.size_bytes, percent, "o-", color="C3", lw=1.6, gid="error")
    for size, value in zip(table.size_bytes, percent, strict=True):
        error_axis.annotate(f"{value:+.1f}%", (size, value), textcoords="offset points",
                            xytext=(0, 7 if value >= 0 else -12), ha="center", fontsize=7)
    if table.empty:
        error_axis.text(0.5, 0.5, "no size both simulated and measured", ha="center",
                        va="center", transform=error_axis.transAxes)
    else:
        finite = [abs(v) for v in percent if math.isfinite(v)]
        reach = max(finite, default=1.0) * 1.35 or 1.0
        error_axis.set_ylim(-reach, reach)
        gm = geomean_error(table)
        error_axis.set_title(f"error of the simulated {what}: geometric mean |error| "
                             f"{100 * gm:.1f}% over {len(table)} sizes", fontsize="small")
    error_axis.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:+.0f}%"))
    error_axis.set_ylabel("(simulated − measured)\n/ measured")
    error_axis.grid(True, alpha=0.3)
    size_axis(error_axis, [*results.size_bytes.unique(), *reference.size_bytes],
              most=2 * MAX_SIZE_LABELS)
    return declutter(figure)


def geomean_error(table: pd.DataFrame) -> float:
    """exp(mean |log(simulated / measured)|) - 1, as docs/fidelity.md summarises a sweep."""
    ratios = (table.simulated_busbw_GBps / table.measured_busbw_GBps).to_numpy(dtype=float)
    ratios = ratios[np.isfinite(ratios) & (ratios > 0)]
    return float(math.exp(np.abs(np.log(ratios)).mean()) - 1) if len(ratios) else math.nan


def format_errors(table: pd.DataFrame) -> str:
    """The error table as ``#`` lines, as ``plot --reference`` prints it."""
    lines = [f"#{'size(B)':>11} {'simulated':>24} {'busbw(GB/s)':>11} {'measured':>11} "
             f"{'err(%)':>7}"]
    rows: Iterable[Any] = table.itertuples()
    for row in rows:
        lines.append(f"{row.size_bytes:>12} {row.name:>24} {row.simulated_busbw_GBps:>11.2f} "
                     f"{row.measured_busbw_GBps:>11.2f} {100 * row.error:>+7.1f}")
    if not table.empty:
        lines.append(f"# geometric mean |error|: {100 * geomean_error(table):.1f} % over "
                     f"{len(table)} sizes")
    else:
        lines.append("# no size both simulated and measured")
    return "\n".join(lines) + "\n"
