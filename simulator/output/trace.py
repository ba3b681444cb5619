"""The timeline of traced points as a Chrome / Perfetto trace (``run --trace FILE.json``).

JSON trace-event format (the "Trace Event Format" document Chrome's tracing and ui.perfetto.dev
read): one *process* per point (``ring 1MiB``), and in it the *threads* of each rank: ``rank 3``
holds its receive-waits, reductions and in-switch waits, ``rank 3 sends`` its messages, from the
first byte out to the arrival (a further ``rank 3 sends #2``... where a rank's sends overlap, as
slices on one thread must nest); a reducing switch gets a thread of its rounds. Every slice is an
``X`` (complete) event, ``ts`` and ``dur`` in microseconds of simulated time, named by what it is
and the program's label (``send reduce-scatter step 2/7 piece 1/4``), with bytes and peer in its
``args``. ``C`` (counter) events give the utilisation (rate carried / bandwidth, 0 to 1) of
each point's busiest links over time. ``M`` events name the processes and threads.

A file keeps at most :data:`~simulator.limits.MAX_TRACE_SLICES` slices, shared evenly among
the points (a point needing less leaves the rest to others); each point loses its last slices to
end. Counter events likewise (:data:`~simulator.limits.MAX_TRACE_COUNTERS`): a point's counters
stop where its share runs out. ``otherData`` says, per point, how many were kept and dropped and
from when, which engine ran it and which links the counters follow.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from simulator.algorithms.registry import algorithm_names
from simulator.errors import InputError, Problem, UnitError
from simulator.limits import MAX_TRACE_COUNTERS, MAX_TRACE_SLICES
from simulator.model.activity import Activity, Slice
from simulator.output.files import write_atomically
from simulator.scenario.spec import Scenario
from simulator.units import format_size, parse_size
from simulator.version import __version__

_VERB = {"send": "send", "recv-wait": "wait", "reduce": "reduce", "in-switch": "in-switch wait",
         "switch-reduce": "switch reduce"}
"""How each kind of slice is named, before its label."""

T = TypeVar("T")


def trace_document(activities: Sequence[Activity], *, scenario: str = "",
                   max_slices: int = MAX_TRACE_SLICES,
                   max_counters: int = MAX_TRACE_COUNTERS) -> dict[str, Any]:
    """The trace-event JSON object of the traced points among ``activities``."""
    traced = [activity for activity in activities if activity.traced]
    budgets = _budgets([len(activity.slices) for activity in traced], max_slices)
    counter_budgets = _budgets([sum(len(rate.times_s) for rate in activity.rates)
                                for activity in traced], max_counters)
    events: list[dict[str, Any]] = []
    points = []
    dropped = 0
    counters_dropped = 0
    for pid, (activity, budget, counter_budget) in enumerate(
            zip(traced, budgets, counter_budgets, strict=True), start=1):
        slices = sorted(activity.slices, key=lambda s: (s.end_s, s.start_s))
        kept, left = slices[:budget], slices[budget:]
        dropped_from = min([s.end_s for s in left[:1]]
                           + ([activity.dropped_from_s] if activity.dropped_from_s is not None
                              else []), default=None)
        name = f"{activity.algorithm} {format_size(activity.size_bytes)}"
        events += [meta_event("process_name", pid, 0, name),
                   meta_event("process_sort_index", pid, 0, pid)]
        events += _slices(pid, kept)
        counters, counters_until = _counters(pid, activity, counter_budget)
        events += counters
        counters_dropped += sum(len(rate.times_s) for rate in activity.rates) - len(counters)
        bottleneck = activity.bottleneck
        dropped += len(left) + activity.dropped_slices
        points.append({
            "pid": pid, "algorithm": activity.algorithm, "size_bytes": activity.size_bytes,
            "sim_time_us": activity.time_s * 1e6, "engine": activity.engine,
            "engine_note": activity.note,
            "slices": len(kept), "slices_dropped": len(left) + activity.dropped_slices,
            "dropped_from_us": None if dropped_from is None else round(dropped_from * 1e9) / 1e3,
            "counter_links": [rate.link for rate in activity.rates],
            "counters": (f"utilisation of the {len(activity.rates)} busiest of the "
                         f"{len(activity.links)} links that carried bytes"),
            "counter_events": len(counters),
            "counters_until_us": None if counters_until is None else counters_until * 1e6,
            "counter_samples_dropped": activity.dropped_samples,
            "bottleneck": None if bottleneck is None else bottleneck.name,
            "bottleneck_busy_share": (activity.bottleneck_share
                                      if math.isfinite(activity.bottleneck_share) else None),
        })
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "generator": f"allreduce-sim {__version__}",
            "scenario": scenario,
            "clock": "simulated time; ts and dur in microseconds",
            "max_slices": max_slices,
            "slices_dropped": dropped,
            "max_counter_events": max_counters,
            "counter_events_dropped": counters_dropped,
            "dropped": "; ".join([
                "no slice" if dropped == 0 else
                f"{dropped} slices over the cap of {max_slices}: each point's last to end "
                "(points[].dropped_from_us)",
                "no counter event" if counters_dropped == 0 else
                f"{counters_dropped} counter events over the cap of {max_counters}: each "
                "point's last (points[].counters_until_us)"]),
            "points": points,
        },
    }


def write_trace(path: Path | str, activities: Sequence[Activity], *, scenario: str = "",
                max_slices: int = MAX_TRACE_SLICES) -> None:
    """:func:`trace_document` as a JSON file, atomically."""
    text = json.dumps(trace_document(activities, scenario=scenario, max_slices=max_slices),
                      separators=(",", ":"), allow_nan=False)

    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8")

    write_atomically(Path(path), write)


def parse_trace_point(text: str, scenario: Scenario, algorithms: Sequence[str] | None = None,
                      points: Sequence[tuple[str, int]] | None = None) -> tuple[str, int]:
    """``ALGO:SIZE`` (``ring:1MiB``) as (algorithm, size_bytes), one of the run's points: one of
    ``algorithms`` (those that run; None: the scenario's list, or every one registered for its
    collective) at one of its sizes, or where ``points`` lists the run's (algorithm, size)
    points (NCCL's pick at each size, ``algorithms: auto``) one of those; InputError (one line)
    otherwise."""
    algorithm, _, size_text = text.rpartition(":")
    names = (list(algorithms) if algorithms is not None
             else list(scenario.algorithms) if scenario.algorithms is not None
             else algorithm_names(scenario.collective))
    sizes = ", ".join(format_size(size) for size in scenario.sizes)
    expected = (f"expected ALGO:SIZE, a point of the run (algorithms {', '.join(names)}; "
                f"sizes {sizes}), got {text!r}" if points is None else
                f"expected ALGO:SIZE, a point of the run "
                f"({', '.join(f'{a}:{format_size(b)}' for a, b in points)}), got {text!r}")
    try:
        size = parse_size(size_text)
    except UnitError:
        size = -1
    known = ((algorithm, size) in points if points is not None
             else algorithm in names and size in scenario.sizes)
    if not known:
        raise InputError([Problem("command line", "--trace-point", expected)])
    return algorithm, size


def _budgets(counts: list[int], total: int) -> list[int]:
    """Slices each point keeps: ``total`` shared evenly, a point needing less leaving the
    rest to the others (water filling)."""
    budgets = [0] * len(counts)
    left, open_ = total, sorted(range(len(counts)), key=lambda i: counts[i])
    while open_:
        share = left // len(open_)
        i = open_[0]
        if counts[i] <= share:
            budgets[i] = counts[i]
            left -= counts[i]
            open_.pop(0)
            continue
        for i in open_:
            budgets[i] = share
        break
    return budgets


def _slices(pid: int, slices: Sequence[Slice]) -> list[dict[str, Any]]:
    """Thread names and X events: each track's slices on lanes where none overlaps another
    (sends apart from the rest), lanes numbered track by track."""
    tracks: dict[tuple[str, bool], list[Slice]] = {}
    for item in slices:
        tracks.setdefault((item.track, item.kind == "send"), []).append(item)
    lanes = {key: pack_lanes(track, lambda s: (s.start_s, s.end_s))
             for key, track in tracks.items()}
    events: list[dict[str, Any]] = []
    tid = 0
    for (track, sends), group in sorted(lanes.items(), key=lambda entry: _track_order(entry[0])):
        for number, lane in enumerate(group, start=1):
            tid += 1
            name = f"{track}{' sends' if sends else ''}{f' #{number}' if number > 1 else ''}"
            events += [meta_event("thread_name", pid, tid, name),
                       meta_event("thread_sort_index", pid, tid, tid)]
            for item in lane:
                ts, dur = complete_times(item.start_s, item.end_s)
                events.append({
                    "name": f"{_VERB[item.kind]} {item.label}".strip(), "cat": item.kind,
                    "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid,
                    "args": {"bytes": item.bytes, "peer": item.peer, "label": item.label}})
    return events


def pack_lanes(items: Iterable[T], span: Callable[[T], tuple[float, float]]) -> list[list[T]]:
    """``items`` on lanes where none overlaps another (slices on one thread must nest): each,
    in order of (start, end), on the first lane whose last item ended by its start, else on a
    new lane. ``span`` gives an item's (start, end)."""
    lanes: list[list[T]] = []
    ends: list[float] = []
    for item in sorted(items, key=span):
        start, end = span(item)
        for number, lane_end in enumerate(ends):
            if lane_end <= start:
                lanes[number].append(item)
                ends[number] = end
                break
        else:
            lanes.append([item])
            ends.append(end)
    return lanes


def complete_times(start_s: float, end_s: float) -> tuple[float, float]:
    """An ``X`` event's ``ts`` and ``dur`` in microseconds, from its ends in seconds.

    Whole nanoseconds at both ends, then microseconds: Perfetto rounds ts and dur to ns apart,
    which made back-to-back slices overlap by 1 ns and dropped them (its import error
    slice_drop_overlapping_complete_event); rounding each end is monotone, so slices that did
    not overlap still do not."""
    start_ns, end_ns = round(start_s * 1e9), round(end_s * 1e9)
    return start_ns / 1e3, (end_ns - start_ns) / 1e3


def _track_order(key: tuple[str, bool]) -> tuple[int, int, str, bool]:
    """Ranks in number order (each rank's own thread, then its sends), then switches by name."""
    track, sends = key
    if track.startswith("rank ") and track[5:].isdigit():
        return (0, int(track[5:]), "", sends)
    return (1, 0, track, sends)


def _counters(pid: int, activity: Activity, budget: int
              ) -> tuple[list[dict[str, Any]], float | None]:
    """The point's counter events, the earliest ``budget`` of them, and the time from which
    some were left out (None: none was)."""
    samples = sorted((t, rate.link, value) for rate in activity.rates
                     for t, value in zip(rate.times_s, rate.utilisation, strict=True))
    until = samples[budget][0] if budget < len(samples) else None
    return [{"name": f"link {link}", "ph": "C", "ts": t * 1e6, "pid": pid,
             "args": {"utilisation": value}} for t, link, value in samples[:budget]], until


def meta_event(kind: str, pid: int, tid: int, value: str | int) -> dict[str, Any]:
    """An ``M`` event: ``kind`` (``process_name``, ``thread_sort_index``...) of a process
    (``tid`` 0) or thread, naming it or setting its place."""
    key = "sort_index" if kind.endswith("sort_index") else "name"
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {key: value}}

