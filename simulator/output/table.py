"""The nccl-tests-style table of a results frame, the best algorithm per size, and NCCL's
choice per size beside the fastest simulated alternative (where the alternatives ran).

Table code only formats what a run computed; it never runs a simulation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from simulator.model.collective import Collective
from simulator.output.links import bottleneck_lines

if TYPE_CHECKING:
    from simulator.plan import LeftOut

_HEADER = (f"{'size(B)':>12} {'count':>11} {'type':>8} {'redop':>5} {'algorithm':>18} "
           f"{'time(us)':>11} {'algbw(GB/s)':>11} {'busbw(GB/s)':>11} {'model(us)':>11} "
           f"{'dev(%)':>7} {'verified':>8}")


def format_table(results: pd.DataFrame, *, picks_only: bool = False,
                 registered: bool = False, verbose: bool = True,
                 left_out: Sequence[LeftOut] = ()) -> str:
    """nccl-tests-like text: one line per (algorithm, size) (per size on one screen, below),
    then footnotes and averages.

    ``model(us)`` is the closed-form time, ``dev(%)`` = (simulated − model) / model; the
    bottleneck block names each line's busiest link (:func:`~.links.bottleneck_lines`). With
    ``picks_only`` (``algorithms: auto``, which runs NCCL's pick only) the lines are those of
    NCCL's pick at each size, in size order, as nccl-tests prints NCCL's default choice, and the
    choice block says how to run the alternatives instead of naming the fastest; otherwise it
    sets the fastest simulated point the user could run beside each pick (the symmetric-memory
    kernels only where the buffers are ``registered``: :func:`nccl_choice_per_size`).

    Without ``verbose`` (the command line's default) the table fits one screen: where several
    algorithms ran, one line per size, its fastest simulated point (the bottleneck block then
    names that point's busiest link), and no averages; the faults' comparison keeps its
    per-size summary. ``left_out`` (points
    ``all`` or ``auto`` could not run, :class:`~simulator.plan.LeftOut`) get a line each, saying
    why, where the point or its size would stand.
    """
    if results.empty:
        return "# no results\n"
    choice = nccl_choice_per_size(results, registered=registered)
    several = not picks_only and results.algorithm.nunique() > 1
    screen = several and not verbose  # one line per size stands for several points
    runnable = _runnable(results, registered)
    if picks_only:
        table = (results[results.nccl_pick.fillna(False).astype(bool)]
                 .sort_values("size_bytes", kind="stable"))
    elif screen:
        table = _fastest_per_size(runnable)
    else:
        table = results
    first = results.iloc[0]
    lines = [f"# allreduce-sim · scenario {first['scenario']} · topology {first['topology']} · "
             f"{first['ranks']} ranks · {first['collective']}"]
    if screen:
        lines.append(f"# one line per size: the fastest of {runnable.algorithm.nunique()} "
                     f"algorithms ({len(results)} points simulated: --verbose prints each, the "
                     f"CSV holds them)")
        aside = sorted(set(results.algorithm) - set(runnable.algorithm))
        if aside:
            lines.append(f"# left aside: {', '.join(aside)}, which need buffers registered as "
                         f"symmetric windows (nccl.symmetric: true)")
    lines += ["#", "#" + _HEADER[1:]]
    lines += _rows(table, first, left_out, by_size=picks_only or screen)
    if (results.verified.notna() & (results.verified_elements < results["count"])).any():
        lines.append("# * verified on a proxy payload (column verified_elements of the CSV: "
                     "elements per rank, same partitioning); timed at the nominal size")
    lines.append(DEVIATION_GUIDE)
    if not screen:
        for algorithm, group in table.groupby("algorithm", sort=False):
            busbw = group.busbw_GBps.dropna()
            average = f"{busbw.mean():.2f} GB/s" if len(busbw) else "n/a"
            lines.append(f"# Avg bus bandwidth ({algorithm}): {average}")
    lines.extend(bottleneck_lines(table))
    if "faults" in table and (table.faults.fillna("") != "").any():
        lines.extend(_fault_table(table, runnable if screen else table))
    if not choice.empty:
        lines.extend(_choice_table(choice, alternatives=not picks_only))
    elif several:
        lines.extend(_best_table(best_per_size(runnable if screen else results)))
    if screen:
        lines.append("# --verbose: every point, its busiest link, the averages")
    return "\n".join(lines) + "\n"


def _fastest_per_size(results: pd.DataFrame) -> pd.DataFrame:
    """Per size, in size order, the row of the fastest simulated point (ties: listed first)."""
    rows = [int(group.index[int(group.sim_time_s.to_numpy().argmin())])
            for _size, group in results.groupby("size_bytes", sort=True)]
    return results.loc[rows]


def _rows(table: pd.DataFrame, first: Any, left_out: Sequence[LeftOut], *,
          by_size: bool) -> list[str]:
    """The table's lines, each point left out on a line of its own saying why: in size order
    where the table has a line per size (a size then stands for its points; a size with a
    line is not repeated), else after its algorithm's lines (last where none ran)."""
    lines: list[tuple[tuple[int, int], str]] = []
    order = {name: index for index, name in enumerate(table.algorithm.unique())}
    rows: Iterable[Any] = table.itertuples(index=False)
    for number, row in enumerate(rows):
        redop = row.op if Collective(row.collective).reduces else "none"  # as nccl-tests prints
        key = (row.size_bytes, number) if by_size else (order[row.algorithm], number)
        lines.append((key, f"{row.size_bytes:>12} {row.count:>11} {row.dtype:>8} {redop:>5} "
                           f"{row.algorithm:>18} {row.sim_time_s * 1e6:>11.2f} "
                           f"{number_text(row.algbw_GBps):>11} {number_text(row.busbw_GBps):>11} "
                           f"{row.model_time_s * 1e6:>11.2f} {deviation_text(row):>7} "
                           f"{verified_text(row):>8}"))
    answered = set(table.size_bytes)
    redop = first["op"] if Collective(first["collective"]).reduces else "none"
    itemsize = int(first["size_bytes"]) // int(first["count"]) if first["count"] else 1
    for number, left in enumerate(left_out, start=len(lines)):
        if by_size and left.size_bytes in answered:  # a point ran there: that line answers
            continue
        key = ((left.size_bytes, number) if by_size
               else (order.get(left.algorithm or "", len(order)), number))
        name = left.algorithm or "-"
        lines.append((key, f"{left.size_bytes:>12} {left.size_bytes // itemsize:>11} "
                           f"{first['dtype']:>8} {redop:>5} {name:>18}  left out: {left.reason}"))
    return [line for _key, line in sorted(lines, key=lambda item: item[0])]


DEVIATION_GUIDE = ("# dev(%) = (time - model) / model: model is the algorithm's closed form "
                   "alone; time is simulated with what it leaves out (contention on shared "
                   "links, waits between dependent steps, faults): trust time, and read a large "
                   "dev as their cost")
"""The table's one-line reading guide to the gap between the simulated and closed-form times."""


def nccl_choice_per_size(results: pd.DataFrame, *, registered: bool = False) -> pd.DataFrame:
    """For each size where NCCL's pick was simulated (``execution: nccl``): the pick, NCCL's
    model time for it, its simulated time, and the fastest simulated point the user could run
    instead (ties: the pick): a kernel that needs buffers registered as symmetric windows
    (``one_shot``, ``two_shot*``) only where they are (``registered``: the scenario's
    ``nccl.symmetric``), as NCCL launches those only on registered buffers.

    Columns: size_bytes, pick, protocol, nccl_time_s, sim_time_s, fastest, fastest_protocol,
    fastest_time_s, best (whether NCCL's pick is the fastest simulated). Empty when no row is
    NCCL's pick (the ``ideal`` model, or NCCL's pick not among the algorithms run).
    """
    rows = []
    picked = results.nccl_pick.fillna(False).astype(bool)
    runnable = _runnable(results, registered)
    for size, group in results[picked].groupby("size_bytes", sort=True):
        pick = group.iloc[0]
        same = pd.concat([group.iloc[:1], runnable[runnable.size_bytes == size]])
        fastest = same.iloc[int(same.sim_time_s.to_numpy().argmin())]
        if fastest.sim_time_s >= pick.sim_time_s:
            fastest = pick
        rows.append((size, pick.algorithm, pick.protocol, pick.nccl_time_s, pick.sim_time_s,
                     fastest.algorithm, fastest.protocol, fastest.sim_time_s,
                     fastest.algorithm == pick.algorithm))
    return pd.DataFrame(rows, columns=["size_bytes", "pick", "protocol", "nccl_time_s",
                                       "sim_time_s", "fastest", "fastest_protocol",
                                       "fastest_time_s", "best"])


def _runnable(results: pd.DataFrame, registered: bool) -> pd.DataFrame:
    """The rows of points the user could run: without ``registered`` buffers, not NCCL's
    symmetric-memory kernels (all the rows where every one is such a kernel: the user named
    them alone)."""
    if registered:
        return results
    runnable = results[~results.algorithm.map(_needs_registration)]
    return results if runnable.empty else runnable


def _needs_registration(name: str) -> bool:
    """Whether the algorithm ``name`` is NCCL's symmetric-memory kernels, which NCCL launches
    only on buffers registered as symmetric windows (``nccl.symmetric``); an MSCCL schedule or
    a name not registered does not."""
    from simulator.algorithms.registry import REGISTRY

    return any(bool(collective[name].nccl.symmetric) for collective in REGISTRY.values()
               if name in collective)


def _choice_table(choice: pd.DataFrame, *, alternatives: bool = True) -> list[str]:
    """The choice block: per size NCCL's pick, its model time and its simulated time, beside
    the fastest simulated point where the alternatives ran (else a line saying how to run
    them: ``algorithms: auto`` runs the pick alone)."""
    rows: Iterable[Any] = choice.itertuples(index=False)
    if not alternatives:
        lines = ["#", "# NCCL's choice per size (its tuner's pick and model time; the simulated "
                 "time beside it)",
                 f"#{'size(B)':>11} {'NCCL pick':>24} {'NCCL(us)':>11} {'sim(us)':>11}"]
        lines += [f"{row.size_bytes:>12} {row.pick + '/' + row.protocol:>24} "
                  f"{row.nccl_time_s * 1e6:>11.2f} {row.sim_time_s * 1e6:>11.2f}" for row in rows]
        lines.append("# the fastest simulated alternative beside each pick: algorithms: all (or "
                     "a list) under execution: nccl")
        return lines
    lines = ["#", "# NCCL's choice per size (its tuner's pick and model time; the fastest "
             "simulated point beside it)",
             f"#{'size(B)':>11} {'NCCL pick':>24} {'NCCL(us)':>11} {'sim(us)':>11} "
             f"{'fastest simulated':>24} {'time(us)':>11} {'best':>4}"]
    for row in rows:
        pick = f"{row.pick}/{row.protocol}"
        fastest = "(the pick)" if row.best else f"{row.fastest}/{row.fastest_protocol}"
        lines.append(f"{row.size_bytes:>12} {pick:>24} {row.nccl_time_s * 1e6:>11.2f} "
                     f"{row.sim_time_s * 1e6:>11.2f} {fastest:>24} "
                     f"{row.fastest_time_s * 1e6:>11.2f} {'yes' if row.best else 'NO':>4}")
    return lines


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


def _fault_table(table: pd.DataFrame, results: pd.DataFrame) -> list[str]:
    """A line per line of the ``table``, its time with and without the faults,
    then per size the algorithm of ``results`` that suffers least: the least time added, which
    is what the faults cost a job (a ratio favours an algorithm that was slow to begin with);
    its slowdown beside it (ties: listed first)."""
    lines = ["#", f"# Faults: {table.faults.iloc[0]}",
             f"#{'size(B)':>11} {'algorithm':>18} {'healthy(us)':>12} {'faulted(us)':>12} "
             f"{'slowdown':>9}"]
    rows: Iterable[Any] = table.itertuples(index=False)
    for row in rows:  # in the table's order: by size where it has a line per size
        lines.append(f"{row.size_bytes:>12} {row.algorithm:>18} "
                     f"{row.healthy_time_s * 1e6:>12.2f} {row.sim_time_s * 1e6:>12.2f} "
                     f"{'x' + format(row.fault_slowdown, '.3f'):>9}")
    if results.algorithm.nunique() > 1:
        lines.append("# Suffers least per size (least time added; its slowdown beside it):")
        least_rows: Iterable[Any] = results.loc[suffers_least(results)].itertuples(index=False)
        for least in least_rows:
            lines.append(f"#{least.size_bytes:>11} {least.algorithm:>18} "
                         f"+{(least.sim_time_s - least.healthy_time_s) * 1e6:.2f} us "
                         f"(x{least.fault_slowdown:.3f})")
    return lines


def suffers_least(results: pd.DataFrame) -> list[Any]:
    """Per size, in size order, the index of the row whose faults add the least time (ties:
    the row listed first): what the faults cost a job, where a ratio would favour an
    algorithm that was slow to begin with."""
    added = results.sim_time_s - results.healthy_time_s
    return [group.idxmin() for _size, group in added.groupby(results.size_bytes, sort=True)]


def number_text(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"


def deviation_text(row: Any) -> str:
    if row.model_time_s == 0:
        return "0.00" if row.sim_time_s == 0 else "n/a"
    deviation = 100 * (row.sim_time_s - row.model_time_s) / row.model_time_s
    return f"{deviation + 0.0:.2f}" if abs(deviation) >= 0.005 else "0.00"


def verified_text(row: Any) -> str:
    if pd.isna(row.verified):
        return "off"
    mark = "ok" if row.verified else "FAIL"
    return mark + ("*" if row.verified_elements < row.count else "")
