"""A topology's numbers as text: the summary ``python -m simulator topo`` prints, each line
``name  value`` (:func:`format_summary`), and the names of its rows (:func:`row_name`, also the
figures' labels). The numbers themselves are :func:`simulator.model.analysis.fabric.summarize`'s.

>>> from simulator.model.analysis.fabric import summarize
>>> from simulator.model.topology import switch
>>> print(format_summary(summarize(switch(4, 25e9, 5e-7))).splitlines()[6])
bisection          50GB/s (min cut by max-flow, ranks [0, 2) to [2, 4), per direction)
"""

from __future__ import annotations

from simulator.model.analysis.fabric import GPU_ROW, NIC_ROW, FabricSummary
from simulator.units import format_bandwidth

TIER_NAMES = {0: "in host", 1: "leaf", 2: "spine", 3: "core"}
"""The usual names of switch tiers 0 to 3."""


def row_name(row: int) -> str:
    """``GPUs``, ``NICs`` or ``tier 1 (leaf)``."""
    if row == GPU_ROW:
        return "GPUs"
    if row == NIC_ROW:
        return "NICs"
    return f"tier {row}" + (f" ({TIER_NAMES[row]})" if row in TIER_NAMES else "")


def bandwidth(bandwidth_Bps: float) -> str:
    """A bandwidth to six significant digits (``450GB/s``, ``68.2667TB/s``, ``0B/s``)."""
    return format_bandwidth(float(f"{bandwidth_Bps:.6g}")) if bandwidth_Bps > 0 else "0B/s"


def format_ratio(ratio: float) -> str:
    """``3:1``, ``1.5:1``; below one, ``1:8``."""
    return f"{round(ratio, 2):g}:1" if ratio >= 1 else f"1:{round(1 / ratio, 2):g}"


def format_summary(summary: FabricSummary) -> str:
    """The summary as aligned ``name  value`` lines (docs/topo.md says what each means)."""
    s = summary
    lines = [("GPUs", str(s.gpus))]
    if s.hosts is not None:
        lines.append(("hosts", str(s.hosts)))
    lines.append(("NICs", str(s.nics)))
    switches = sum(count for _, count in s.switches)
    tiers = ", ".join(f"{row_name(tier)} {count}" for tier, count in s.switches)
    lines.append(("switches", f"{switches}" + (f": {tiers}" if tiers else "")
                  + (" (tiers derived from the cabling: docs/topo.md)" if s.tiers_derived else "")))
    lines.append(("cables", f"{s.cables} full-duplex ({s.links} directed links"
                  + (f", {s.one_way_links} of them one-way" if s.one_way_links else "") + ")"))
    lines.append(("diameter", "GPUs cannot all reach each other" if s.diameter_hops is None else
                  f"{s.diameter_hops} hops (the longest shortest path between two GPUs)"))
    half = s.gpus // 2
    lines.append(("bisection", "none (fewer than two GPUs)" if s.bisection_Bps is None else
                  f"{bandwidth(s.bisection_Bps)} (min cut by max-flow, ranks [0, {half}) to "
                  f"[{half}, {s.gpus}), per direction)"))
    lines.append(("injection per GPU", ", ".join(
        f"{i.link} {bandwidth(i.min_Bps)}" if i.min_Bps == i.max_Bps else
        f"{i.link} {bandwidth(i.min_Bps)} to {bandwidth(i.max_Bps)}"
        for i in s.injection) or "none"))
    lines.append(("network injection", "none (no GPU or NIC link up into tier ≥ 1)"
                  if s.network_injection_Bps is None else
                  f"{bandwidth(s.network_injection_Bps)} per GPU (GPU and NIC links up into tier ≥ 1, "
                  "over the GPUs)"))
    if not s.oversubscription:
        lines.append(("oversubscription", "none (no switch tier has links up)"))
    for i, load in enumerate(s.oversubscription):
        lines.append(("oversubscription" if i == 0 else "",
                      f"{row_name(load.tier)} {format_ratio(load.ratio)} "
                      f"({bandwidth(load.below_Bps)} from below, "
                      f"{bandwidth(load.up_Bps)} up)"))
    return "\n".join([f"# topology {s.label} · builder {s.builder}",
                      *(f"{name:<19}{value}" for name, value in lines)]) + "\n"
