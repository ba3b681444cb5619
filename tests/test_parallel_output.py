"""The figure and the trace of a parallel step as it ran (issue 39, item 4): the Gantt chart's
rows, bars, legend and size, and the Perfetto trace's processes, threads, events, lanes, slice
cap and communicator tracks, on executions made by hand and one run by ``execute``."""

import json

import numpy as np
import pytest
from matplotlib.image import imread

from simulator.model.collective import Collective
from simulator.output.parallel_figure import draw_parallel_timeline, parallel_timeline_figure
from simulator.output.parallel_rows import natural_key
from simulator.output.perfetto import parallel_trace_document, write_parallel_trace
from simulator.training.execute import Demand, Execution, Span, execute
from simulator.training.graph import Group, Op, OpKind, Program, StepGraph

COMPUTE, COLLECTIVE = OpKind.COMPUTE, OpKind.COLLECTIVE
OPS = [  # (op, name, kind, stream, start, end, isolated), seconds in eighths: exact in binary
    (0, "forward", COMPUTE, "compute", 0.0, 0.25, 0.25),
    (1, "tp allreduce", COLLECTIVE, "tp", 0.25, 0.375, 0.125),
    (2, "backward", COMPUTE, "compute", 0.375, 0.875, 0.375),  # slowed by the kernels' SMs
    (3, "dp allreduce 0", COLLECTIVE, "dp", 0.5, 1.0, 0.25),
    (4, "dp allreduce 1", COLLECTIVE, "dp", 0.625, 1.125, 0.25),  # overlaps 0: a second lane
    (5, "dp allreduce 2", COLLECTIVE, "dp", 1.0, 1.25, 0.25),  # starts as 0 ends: its lane
]
"""Two ranks' step, the same on both (a collective runs at the same instants on its members):
compute, a TP allreduce and three DP allreduces on communicators ``tp 0`` and ``dp 0``."""

STEP = Execution(tuple(Span(rank, *op) for rank in (0, 1) for op in OPS), 1.25)
GROUPS = {(rank, op): "tp 0" if op == 1 else "dp 0" for rank in (0, 1) for op in (1, 3, 4, 5)}


def meta(kind, pid, tid, value):
    key = "sort_index" if kind.endswith("sort_index") else "name"
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "args": {key: value}}


def process(pid, name, place):
    return [meta("process_name", pid, 0, name), meta("process_sort_index", pid, 0, place)]


def thread(pid, tid, name, *events):
    return [meta("thread_name", pid, tid, name), meta("thread_sort_index", pid, tid, tid),
            *events]


def x(pid, tid, op, members=None):
    """Op ``op``'s X event of OPS, worked by hand: µs, isolated µs and dur / isolated."""
    times = {0: ("forward", "compute", 0.0, 250000.0, 250000.0, 1.0),
             1: ("tp allreduce", "collective", 250000.0, 125000.0, 125000.0, 1.0),
             2: ("backward", "compute", 375000.0, 500000.0, 375000.0, 4 / 3),
             3: ("dp allreduce 0", "collective", 500000.0, 500000.0, 250000.0, 2.0),
             4: ("dp allreduce 1", "collective", 625000.0, 500000.0, 250000.0, 2.0),
             5: ("dp allreduce 2", "collective", 1000000.0, 250000.0, 250000.0, 1.0)}
    name, cat, ts, dur, isolated, slowdown = times[op]
    args = {"op": op, "isolated_us": isolated, "slowdown": slowdown}
    if members is not None:
        args["members"] = members
    return {"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid,
            "args": args}


def rank_events(pid):
    """A rank's threads: compute, tp, dp and dp #2 (op 4 overlaps op 3; op 5 starts as it
    ends, so it stays on the first lane)."""
    return [*thread(pid, 1, "compute", x(pid, 1, 0), x(pid, 1, 2)),
            *thread(pid, 2, "tp", x(pid, 2, 1)),
            *thread(pid, 3, "dp", x(pid, 3, 3), x(pid, 3, 5)),
            *thread(pid, 4, "dp #2", x(pid, 4, 4))]


def test_the_trace_has_a_process_per_rank_a_thread_per_stream_and_a_track_per_communicator(
        tmp_path):
    path = tmp_path / "step-parallel.json"
    write_parallel_trace(STEP, path, name="step", groups=GROUPS)
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["traceEvents"] == [
        *process(3, "communicators", 0), *process(1, "rank 0", 1), *process(2, "rank 1", 2),
        *rank_events(1), *rank_events(2),
        *thread(3, 1, "dp 0", x(3, 1, 3, 2), x(3, 1, 5, 2)),
        *thread(3, 2, "dp 0 #2", x(3, 2, 4, 2)),
        *thread(3, 3, "tp 0", x(3, 3, 1, 2))]
    other = document["otherData"]
    assert (other["name"], other["step_us"], other["ranks"], other["communicators"]) == (
        "step", 1250000.0, 2, 2)
    assert (other["slices"], other["slices_dropped"], other["dropped_from_us"],
            other["dropped"]) == (16, 0, None, "no slice")
    assert not list(tmp_path.glob(".*.tmp"))


def test_without_communicators_the_trace_has_only_the_ranks():
    document = parallel_trace_document(STEP, name="step")
    assert document["traceEvents"] == [*process(1, "rank 0", 1), *process(2, "rank 1", 2),
                                       *rank_events(1), *rank_events(2)]
    assert document["otherData"]["communicators"] is None


def test_the_trace_keeps_the_first_slices_to_end_up_to_the_cap(tmp_path, monkeypatch):
    monkeypatch.setattr("simulator.limits.MAX_TRACE_SLICES", 5)
    path = tmp_path / "step-parallel.json"
    write_parallel_trace(STEP, path, name="step", groups=GROUPS)
    document = json.loads(path.read_text(encoding="utf-8"))
    # by end: both forwards (0.25 s), the TP allreduce on both ranks and its communicator
    # (0.375 s); the next, both backwards, end at 0.875 s
    assert [event for event in document["traceEvents"] if event["ph"] == "X"] == [
        x(1, 1, 0), x(1, 2, 1), x(2, 1, 0), x(2, 2, 1), x(3, 1, 1, 2)]
    assert [event["args"]["name"] for event in document["traceEvents"]
            if event["name"] == "thread_name"] == ["compute", "tp", "compute", "tp", "tp 0"]
    other = document["otherData"]
    assert (other["max_slices"], other["slices"], other["slices_dropped"],
            other["dropped_from_us"], other["dropped"]) == (
        5, 5, 11, 875000.0, "11 slices over the cap of 5: the last to end (dropped_from_us)")


def test_communicators_are_ordered_with_their_numbers_as_numbers():
    assert sorted(["tp 10", "tp 2 b", "tp 2", "dp 1"], key=natural_key) == [
        "dp 1", "tp 2", "tp 2 b", "tp 10"]


def executed():
    """Ten ranks, each a forward, a TP allreduce over its pair and two DP allreduces over its
    parity's five ranks issued back to back with no dependency between them, run by
    ``execute`` on no links: every communication takes its isolated time (1 ms TP, 2 ms DP)."""
    groups = ([Group(f"tp {pair}", (2 * pair, 2 * pair + 1)) for pair in range(5)]
              + [Group(f"dp {parity}", tuple(range(parity, 10, 2))) for parity in range(2)])
    programs = tuple(Program(rank, (
        Op(0, "forward", COMPUTE, duration_s=0.5e-3 * (1 + rank // 2)),
        Op(1, "tp allreduce", COLLECTIVE, (0,), collective=Collective.ALLREDUCE,
           group=f"tp {rank // 2}", nbytes=1024, stream="tp"),
        Op(2, "dp allreduce a", COLLECTIVE, (1,), collective=Collective.ALLREDUCE,
           group=f"dp {rank % 2}", nbytes=1024, stream="dp"),
        Op(3, "dp allreduce b", COLLECTIVE, (1,), collective=Collective.ALLREDUCE,
           group=f"dp {rank % 2}", nbytes=1024, stream="dp"))) for rank in range(10))
    graph = StepGraph(programs, tuple(groups))

    def cost(op, ranks, *_):  # the rest: when it starts, which this cost does not need
        return Demand(1e-3, 0.0) if op.stream == "tp" else Demand(2e-3, 0.0)

    return execute(graph, np.zeros(0), cost), {(rank, op.id): op.group
                                               for rank, op in graph.ops() if op.group}


def test_an_executed_steps_collectives_appear_once_on_their_communicator():
    execution, groups = executed()
    events = parallel_trace_document(execution, name="x", groups=groups)["traceEvents"]
    hub = 11
    names = {event["tid"]: event["args"]["name"] for event in events
             if event["pid"] == hub and event["name"] == "thread_name"}
    assert list(names.values()) == ["dp 0", "dp 0 #2", "dp 1", "dp 1 #2", "tp 0", "tp 1", "tp 2",
                                    "tp 3", "tp 4"]
    slices = {(names[e["tid"]], e["name"]): (e["ts"], e["dur"], e["args"]["members"])
              for e in events if e["pid"] == hub and e["ph"] == "X"}
    # pair k's forward ends at 0.5·(k+1) ms, its TP allreduce 1 ms later; a DP communicator
    # starts when its last member (pair 4's) is there, at 3.5 ms: both of its allreduces at
    # once (matched by their order on each rank, not by their times, which are the same)
    assert slices == {
        **{(f"tp {k}", "tp allreduce"): (500.0 * (k + 1), 1000.0, 2) for k in range(5)},
        **{(f"dp {p}{lane}", f"dp allreduce {ab}"): (3500.0, 2000.0, 5)
           for p in (0, 1) for lane, ab in (("", "a"), (" #2", "b"))}}
    assert execution.step_s == pytest.approx(5.5e-3, rel=1e-12)


def test_the_timeline_has_a_row_per_rank_and_stream_of_the_first_eight_ranks(tmp_path):
    execution, _ = executed()
    figure = parallel_timeline_figure(execution, title="x")
    axes = figure.axes[0]
    labels = [label.get_text() for label in axes.get_yticklabels()]
    assert labels == [f"rank {rank} {stream}" for rank in range(8)
                      for stream in ("compute", "tp", "dp")]
    assert len(axes.collections) == 24  # one broken_barh a row
    extents = [sorted((round(path.vertices[:, 0].min(), 9), round(path.vertices[:, 0].max(), 9))
                      for path in row.get_paths()) for row in axes.collections[:3]]
    assert extents == [[(0.0, 0.5)], [(0.5, 1.5)], [(3.5, 5.5), (3.5, 5.5)]]
    assert axes.get_title() == "x: step 5.5 ms (8 of 10 ranks)"
    assert [text.get_text() for text in figure.legends[0].get_texts()] == ["compute", "tp", "dp"]
    path = tmp_path / "x-parallel.png"
    draw_parallel_timeline(execution, path, title="x")
    # 11 in wide; 1.5 in of margins and 0.25 in a row for 24 rows: 7.5 in, at 110 dpi
    assert imread(path).shape == (825, 1210, 4)


def test_the_timeline_draws_the_ranks_asked_and_other_streams_in_one_colour():
    spans = tuple(Span(rank, 0, "ar", COLLECTIVE, stream, 0.0, 1e-3, 1e-3)
                  for rank in (3, 5) for stream in ("pg 10", "pg 2"))
    figure = parallel_timeline_figure(Execution(spans, 1e-3), title="chakra", ranks=[5, 5])
    axes = figure.axes[0]
    assert [label.get_text() for label in axes.get_yticklabels()] == ["rank 5 pg 2",
                                                                      "rank 5 pg 10"]
    assert [text.get_text() for text in figure.legends[0].get_texts()] == ["other streams"]
    assert axes.get_title() == "chakra: step 1 ms (1 of 2 ranks)"
    with pytest.raises(ValueError, match=r"^rank 4 ran nothing in this step: expected ranks "
                                         r"among 3\.\.5$"):
        parallel_timeline_figure(Execution(spans, 1e-3), title="chakra", ranks=[4])
