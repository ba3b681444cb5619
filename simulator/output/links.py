"""The per-link table of a run (``run --links FILE.csv``): one row per (point, link that carried
bytes), and the bottleneck block under the run's table.

It only formats what the run recorded (:class:`~simulator.model.activity.Activity`, collected by
a :class:`~simulator.model.activity.Watch`). Columns (docs/results.md):

``algorithm, size_bytes, sim_time_s`` the point; ``from, to`` the directed link; ``link`` its
kind (nvlink, pcie, net); ``from_kind, from_tier, to_kind, to_tier`` what its ends are (a
switch's tier where the topology gives one: 0 in a host, 1 leaf, 2 spine, 3 core);
``bandwidth_Bps`` its rate as the run timed it (under ``execution: nccl`` what NCCL achieves);
``bytes`` carried; ``busy_s`` the time at least one flow was on it; ``busy_share`` =
busy_s / sim_time_s; ``utilisation`` = bytes / (bandwidth_Bps × sim_time_s); ``bottleneck``
True on the point's bottleneck. Rows: points in run order, each point's links busiest first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from simulator.model.activity import Activity
from simulator.output.files import write_atomically

LINK_COLUMNS = ("algorithm", "size_bytes", "sim_time_s", "from", "to", "link", "from_kind",
                "from_tier", "to_kind", "to_tier", "bandwidth_Bps", "bytes", "busy_s",
                "busy_share", "utilisation", "bottleneck")
"""The columns of the links table, in order."""


def links_frame(activities: Iterable[Activity]) -> pd.DataFrame:
    """Every link that carried bytes at every point, columns :data:`LINK_COLUMNS`.

    >>> from simulator import simulate
    >>> from simulator.model.activity import Watch
    >>> watch = Watch()
    >>> _ = simulate({"topology": {"kind": "switch", "ranks": 2, "bandwidth": "1GB/s",
    ...               "latency": "0s"}, "algorithms": ["ring"], "sizes": [2000]}, watch=watch)
    >>> frame = links_frame(watch.activities)  # each rank sends 2 × 1000 B in 2 µs, back to back
    >>> frame.iloc[0][["from", "to", "bytes", "busy_s", "utilisation"]].to_dict()
    {'from': 'gpu0', 'to': 'switch', 'bytes': 2000.0, 'busy_s': 2e-06, 'utilisation': 1.0}
    """
    rows = []
    for activity in activities:
        top = activity.bottleneck
        time_s = activity.time_s
        for link in activity.links:
            rows.append((activity.algorithm, activity.size_bytes, time_s, link.src, link.dst,
                         link.kind, link.src_kind, link.src_tier, link.dst_kind, link.dst_tier,
                         link.bandwidth_Bps, link.bytes, link.busy_s,
                         link.busy_s / time_s if time_s > 0 else math.nan,
                         link.bytes / (link.bandwidth_Bps * time_s) if time_s > 0 else math.nan,
                         link is top))
    frame = pd.DataFrame(rows, columns=list(LINK_COLUMNS))
    return frame.astype({"from_tier": "Int64", "to_tier": "Int64", "size_bytes": "int64",
                         "bottleneck": "bool"})


def write_links(path: Path, frame: pd.DataFrame) -> None:
    """A links table (:func:`links_frame`) as CSV, atomically (floats at full precision)."""
    write_atomically(path, lambda tmp: frame.to_csv(tmp, index=False))


def bottleneck_lines(results: pd.DataFrame) -> list[str]:
    """The table's bottleneck block: per point, the link busy longest and its busy share of the
    point's time (empty when no row has one, e.g. one rank). Comment lines, every one: a reader
    of nccl-tests output takes the lines without ``#`` for its rows."""
    if "bottleneck_link" not in results.columns:
        return []
    named = results[results.bottleneck_link.fillna("").astype(str) != ""]
    if named.empty:
        return []
    lines = ["#", "# Bottleneck per point: the link busy longest (at least one flow on it), and "
                  "that time as a share of the point's",
             f"#{'size(B)':>11} {'algorithm':>18}  {'busy(%)':>7}  link"]
    rows: Iterable[tuple[int, str, float, str]] = zip(
        named.size_bytes, named.algorithm, named.bottleneck_share, named.bottleneck_link,
        strict=True)
    for size, algorithm, share, link in rows:
        lines.append(f"#{size:>11} {algorithm:>18}  {100 * share:>7.1f}  {link}")
    return lines
