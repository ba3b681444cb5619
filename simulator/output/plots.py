"""Figures of a results table: bus bandwidth and time against size, simulated beside closed form.

Plots only draw what a run computed; they never run a simulation. They use matplotlib's object
API (a :class:`~matplotlib.figure.Figure` rendered by its own canvas), so importing this module
never switches the importer's backend or touches pyplot's global state.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from simulator.output.files import write_atomically
from simulator.units import format_size


def plot_results(results: pd.DataFrame, path: Path) -> None:
    """Two panels, one colour per algorithm: simulated bus bandwidth against size, and time
    against size (solid: simulated; dashed: closed form). Written atomically as PNG."""
    figure = Figure(figsize=(12, 4.5), layout="constrained")
    bw_axis, time_axis = figure.subplots(1, 2)
    for index, (algorithm, rows) in enumerate(results.groupby("algorithm", sort=False)):
        colour = f"C{index}"
        bw_axis.plot(rows.size_bytes, rows.busbw_GBps, "o-", color=colour, label=f"{algorithm}")
        time_axis.plot(rows.size_bytes, rows.sim_time_s * 1e6, "o-", color=colour)
        time_axis.plot(rows.size_bytes, rows.model_time_s * 1e6, "--", color=colour)
    sizes = sorted(results.size_bytes.unique())
    for axis in (bw_axis, time_axis):
        axis.set_xscale("log", base=2)
        axis.set_xticks(sizes[:: max(1, len(sizes) // 8)],
                        [format_size(s) for s in sizes[:: max(1, len(sizes) // 8)]])
        axis.set_xlabel("size per rank")
        axis.grid(True, which="both", alpha=0.3)
    bw_axis.legend(fontsize="small")
    bw_axis.set_ylabel("bus bandwidth (GB/s), simulated")
    time_axis.set_ylabel("time (µs): simulated (solid), closed form (dashed)")
    time_axis.set_yscale("log")
    first = results.iloc[0]
    figure.suptitle(f"{first['scenario']}: {first['collective']} on {first['topology']}, "
                    f"{first['ranks']} ranks, {first['dtype']} {first['op']}")
    write_atomically(path, lambda tmp: figure.savefig(tmp, format="png", dpi=110))
