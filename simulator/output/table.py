"""The nccl-tests-style table of a results frame, and the best algorithm per size.

Table code only formats what a run computed; it never runs a simulation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd

from simulator.model.collective import Collective

_HEADER = (f"{'size(B)':>12} {'count':>11} {'type':>8} {'redop':>5} {'algorithm':>18} "
           f"{'time(us)':>11} {'algbw(GB/s)':>11} {'busbw(GB/s)':>11} {'model(us)':>11} "
           f"{'dev(%)':>7} {'verified':>8}")


def format_table(results: pd.DataFrame) -> str:
    """nccl-tests-like text: one line per (algorithm, size), then footnotes and averages.

    ``model(us)`` is the closed-form time, ``dev(%)`` = (simulated − model) / model.
    """
    if results.empty:
        return "# no results\n"
    first = results.iloc[0]
    lines = [f"# allreduce-sim · scenario {first['scenario']} · topology {first['topology']} · "
             f"{first['ranks']} ranks · {first['collective']}", "#", "#" + _HEADER[1:]]
    rows: Iterable[Any] = results.itertuples(index=False)
    for row in rows:
        redop = row.op if Collective(row.collective).reduces else "none"  # as nccl-tests prints
        lines.append(
            f"{row.size_bytes:>12} {row.count:>11} {row.dtype:>8} {redop:>5} {row.algorithm:>18} "
            f"{row.sim_time_s * 1e6:>11.2f} {_num(row.algbw_GBps):>11} {_num(row.busbw_GBps):>11} "
            f"{row.model_time_s * 1e6:>11.2f} {_deviation(row):>7} {_verified(row):>8}")
    if (results.verified_elements < results["count"]).any():
        lines.append("# * verified on a proxy payload (column verified_elements of the CSV: "
                     "elements per rank, same partitioning); timed at the nominal size")
    for algorithm, group in results.groupby("algorithm", sort=False):
        busbw = group.busbw_GBps.dropna()
        average = f"{busbw.mean():.2f} GB/s" if len(busbw) else "n/a"
        lines.append(f"# Avg bus bandwidth ({algorithm}): {average}")
    if results.algorithm.nunique() > 1:
        lines.extend(_best_table(best_per_size(results)))
    return "\n".join(lines) + "\n"


def best_per_size(results: pd.DataFrame) -> pd.DataFrame:
    """For each size, the fastest algorithm simulated and the one the closed forms pick: the
    choice NCCL's tuner makes from its own cost model (``ncclTopoGetAlgoTime``), made visible.

    Columns: size_bytes, simulated, sim_time_s, closed_form, model_time_s, agree. Ties go to the
    algorithm listed first in the scenario.
    """
    rows = []
    for size, group in results.groupby("size_bytes", sort=True):
        fastest = group.iloc[int(group.sim_time_s.to_numpy().argmin())]  # ties: listed first
        modelled = group.iloc[int(group.model_time_s.to_numpy().argmin())]
        rows.append((size, fastest.algorithm, fastest.sim_time_s, modelled.algorithm,
                     modelled.model_time_s, fastest.algorithm == modelled.algorithm))
    return pd.DataFrame(rows, columns=["size_bytes", "simulated", "sim_time_s", "closed_form",
                                       "model_time_s", "agree"])


def _best_table(best: pd.DataFrame) -> list[str]:
    lines = ["#", "# Best algorithm per size (fastest simulated; the closed forms' pick beside it)",
             f"#{'size(B)':>11} {'simulated':>18} {'time(us)':>11} {'closed form':>18} "
             f"{'time(us)':>11} {'agree':>5}"]
    rows: Iterable[Any] = best.itertuples(index=False)
    for row in rows:
        lines.append(f"{row.size_bytes:>12} {row.simulated:>18} {row.sim_time_s * 1e6:>11.2f} "
                     f"{row.closed_form:>18} {row.model_time_s * 1e6:>11.2f} "
                     f"{'yes' if row.agree else 'NO':>5}")
    return lines


def _num(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"


def _deviation(row: Any) -> str:
    if row.model_time_s == 0:
        return "0.00" if row.sim_time_s == 0 else "n/a"
    deviation = 100 * (row.sim_time_s - row.model_time_s) / row.model_time_s
    return f"{deviation + 0.0:.2f}" if abs(deviation) >= 0.005 else "0.00"


def _verified(row: Any) -> str:
    if pd.isna(row.verified):
        return "off"
    mark = "ok" if row.verified else "FAIL"
    return mark + ("*" if row.verified_elements < row.count else "")
