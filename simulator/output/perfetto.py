"""A parallel training step as it ran, as a Chrome / Perfetto trace (``<name>-parallel.json``).

JSON trace-event format, as :mod:`.trace` writes it: one *process* per rank (``rank 3``), in it
one *thread* per stream its operations were issued on (``compute``, ``tp``, ``pp``, ``dp``,
``ep``, or a Chakra trace's communicators), and, given the communicator of each collective, one
process ``communicators`` with a thread per communicator (``tp 0``, ``dp 3``...) holding each of
its collectives once, as it ran over its members. Every slice is an ``X`` event named by the
operation, ``ts`` and ``dur`` in microseconds of the step, with the operation's isolated time
(what it takes alone: a compute's duration, a communication alone on the fabric) and its
slowdown (``dur`` / isolated: what sharing links, or SMs with a kernel, cost it; null where
the isolated time is 0) in ``args``, with its op's id (on a communicator's track, its first
member's, and how many members it ran on).
Slices that overlap on one thread go to a further one (``tp #2``), as on :mod:`.trace`'s.

A collective's members are matched as the step matched them (NCCL's rule,
:mod:`simulator.training.graph`): a communicator's k-th collective on each member, in each
rank's issue order, which is the spans' order in an :class:`Execution`.

A file keeps at most :data:`~simulator.limits.MAX_TRACE_SLICES` slices, those of the ranks and
the communicators together; those left out are the last to end, and ``otherData`` says how many
were kept and dropped and from when.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import simulator.limits as limits
from simulator.output.files import write_atomically
from simulator.output.parallel_rows import natural_key, stream_key
from simulator.output.trace import complete_times, meta_event, pack_lanes
from simulator.training.execute import Execution, Span
from simulator.training.graph import OpKind
from simulator.version import __version__

COMMUNICATORS = "communicators"
"""The name of the process that holds a track per communicator."""


@dataclass(frozen=True)
class _Slice:
    """One slice to draw: the process and thread it goes on, what it is, when it ran, what it
    would take alone, its op's id and, on a communicator's track, its members (0 elsewhere)."""

    pid: int
    thread: str
    name: str
    cat: str
    start_s: float
    end_s: float
    isolated_s: float
    op: int
    members: int


def parallel_trace_document(execution: Execution, *, name: str,
                            groups: Mapping[tuple[int, int], str] | None = None,
                            max_slices: int | None = None) -> dict[str, Any]:
    """The trace-event JSON object of ``execution`` (module docstring). ``groups`` maps
    (rank, op id) to the communicator of that rank's collective (without it, no communicator
    tracks); ``max_slices`` defaults to :data:`~simulator.limits.MAX_TRACE_SLICES`."""
    cap = limits.MAX_TRACE_SLICES if max_slices is None else max_slices
    ranks = sorted({span.rank for span in execution.spans})
    hub = ranks[-1] + 2 if ranks else 1  # the communicators' pid, after every rank's (rank + 1)
    slices = [_Slice(span.rank + 1, span.stream, span.name, span.kind.value, span.start_s,
                     span.end_s, span.isolated_s, span.op, 0) for span in execution.spans]
    collectives = _collectives(execution.spans, groups, hub) if groups is not None else []
    ordered = sorted(slices + collectives, key=lambda s: (s.end_s, s.start_s))
    kept, left = ordered[:cap], ordered[cap:]
    events: list[dict[str, Any]] = []
    if groups is not None:
        events += [meta_event("process_name", hub, 0, COMMUNICATORS),
                   meta_event("process_sort_index", hub, 0, 0)]
    for rank in ranks:
        events += [meta_event("process_name", rank + 1, 0, f"rank {rank}"),
                   meta_event("process_sort_index", rank + 1, 0, rank + 1)]
    events += _threads(kept, hub)
    dropped_from = left[0].end_s if left else None
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "generator": f"allreduce-sim {__version__}",
            "name": name,
            "clock": "simulated time of the step; ts and dur in microseconds",
            "step_us": execution.step_s * 1e6,
            "ranks": len(ranks),
            "communicators": (len({s.thread for s in collectives}) if groups is not None
                              else None),
            "max_slices": cap,
            "slices": len(kept),
            "slices_dropped": len(left),
            "dropped_from_us": None if dropped_from is None else round(dropped_from * 1e9) / 1e3,
            "dropped": ("no slice" if not left else
                        f"{len(left)} slices over the cap of {cap}: the last to end "
                        "(dropped_from_us)"),
            "slowdown": "dur / isolated: the time it took over what it takes alone",
        },
    }


def write_parallel_trace(execution: Execution, path: Path, *, name: str,
                         groups: Mapping[tuple[int, int], str] | None = None) -> None:
    """:func:`parallel_trace_document` as a JSON file, atomically."""
    text = json.dumps(parallel_trace_document(execution, name=name, groups=groups),
                      separators=(",", ":"), allow_nan=False)

    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8")

    write_atomically(Path(path), write)


def _collectives(spans: tuple[Span, ...], groups: Mapping[tuple[int, int], str],
                 hub: int) -> list[_Slice]:
    """Each collective once, on its communicator's track: the k-th collective each member
    issued on that communicator, from the first member's start to the last one's end (the same
    instants, as the step runs them)."""
    issued: dict[tuple[int, str], int] = defaultdict(int)
    members: dict[tuple[str, int], list[Span]] = {}
    for span in spans:
        group = groups.get((span.rank, span.op), "")
        if span.kind is not OpKind.COLLECTIVE or not group:
            continue
        index = issued[(span.rank, group)]
        issued[(span.rank, group)] += 1
        members.setdefault((group, index), []).append(span)
    return [_Slice(hub, group, ran[0].name, OpKind.COLLECTIVE.value,
                   min(span.start_s for span in ran), max(span.end_s for span in ran),
                   ran[0].isolated_s, ran[0].op, len(ran))
            for (group, _), ran in members.items()]


def _threads(slices: list[_Slice], hub: int) -> list[dict[str, Any]]:
    """Thread names and X events: each process's threads (streams in their order; the
    communicators by name), each on lanes where no slice overlaps another."""
    tracks: dict[tuple[int, str], list[_Slice]] = {}
    for item in slices:
        tracks.setdefault((item.pid, item.thread), []).append(item)
    events: list[dict[str, Any]] = []
    tids: dict[int, int] = defaultdict(int)
    order = sorted(tracks, key=lambda key: (key[0], natural_key(key[1]) if key[0] == hub
                                            else stream_key(key[1])))
    for pid, thread in order:
        for number, lane in enumerate(pack_lanes(tracks[(pid, thread)],
                                                 lambda s: (s.start_s, s.end_s)), start=1):
            tids[pid] += 1
            tid = tids[pid]
            events += [meta_event("thread_name", pid, tid,
                                  f"{thread}{f' #{number}' if number > 1 else ''}"),
                       meta_event("thread_sort_index", pid, tid, tid)]
            events += [_event(item, tid) for item in lane]
    return events


def _event(item: _Slice, tid: int) -> dict[str, Any]:
    """One slice's ``X`` event, its isolated time and slowdown in ``args`` (a collective on a
    communicator's track also its members)."""
    ts, dur = complete_times(item.start_s, item.end_s)
    took = item.end_s - item.start_s
    args: dict[str, Any] = {
        "op": item.op,
        "isolated_us": item.isolated_s * 1e6,
        "slowdown": took / item.isolated_s if item.isolated_s > 0 else None}
    if item.members:
        args["members"] = item.members
    return {"name": item.name, "cat": item.cat, "ph": "X", "ts": ts, "dur": dur,
            "pid": item.pid, "tid": tid, "args": args}
