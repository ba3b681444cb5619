"""What a run records besides its time (issue 10): per-link bytes and busy time on both engines,
the bottleneck link of a point, the links table, and the Perfetto trace of the timeline."""

import itertools
import json
import math

import pandas as pd
import pytest

from simulator import simulate
from simulator.cli import main
from simulator.engine.record import Recorder
from simulator.model.activity import Activity, LinkUse, Watch, bottleneck
from simulator.output.links import LINK_COLUMNS, links_frame
from simulator.output.trace import trace_document
from simulator.runner import prepare
from simulator.scenario import scenario_from_dict

GB = 1e9


def crossed(tmp_path, **extra):
    """Ranks 0 and 2 behind switch A, 1 and 3 behind switch B (GPU links 100 GB/s), A→B one
    10 GB/s cable, B→A one 20 GB/s cable, no latency: every step of a ring crosses A→B twice
    (0→1, 2→3) and B→A twice (1→2, 3→0)."""
    fabric = tmp_path / "crossed.yaml"
    fabric.write_text("""\
nodes:
  - {name: a0, kind: gpu, rank: 0}
  - {name: a1, kind: gpu, rank: 2}
  - {name: b0, kind: gpu, rank: 1}
  - {name: b1, kind: gpu, rank: 3}
  - {name: A, kind: switch}
  - {name: B, kind: switch}
edges:
  - {from: a0, to: A, bandwidth: 100GB/s, latency: 0s}
  - {from: a1, to: A, bandwidth: 100GB/s, latency: 0s}
  - {from: b0, to: B, bandwidth: 100GB/s, latency: 0s}
  - {from: b1, to: B, bandwidth: 100GB/s, latency: 0s}
  - {from: A, to: B, bandwidth: 10GB/s, latency: 0s, duplex: false}
  - {from: B, to: A, bandwidth: 20GB/s, latency: 0s, duplex: false}
""")
    scenario = {"topology": {"kind": "graph", "file": str(fabric)}, "algorithms": ["ring"],
                "sizes": ["4MiB"], "execution": "ideal", **extra}
    return scenario_from_dict(scenario)


def test_the_bottleneck_of_a_contended_ring_is_the_thin_uplink(tmp_path):
    # Each step: 0→1 and 2→3 share A→B at 5 GB/s each, taking a = c / 5 GB/s with c = 1 MiB;
    # 1→2 and 3→0 share B→A at 10 GB/s, done in a/2. The connection 0→1 is busy until a, so
    # every step starts at k·a: T = 6a, A→B busy all of it with 2c a step, a0→A busy as long
    # but with c a step (ties go to bytes), B→A half the time.
    c = (4 << 20) / 4
    a = c / (5 * GB)
    for engine in ("simpy", "vector"):
        watch = Watch()
        frame = simulate(crossed(tmp_path, engine=engine), watch=watch)
        assert frame.sim_time_s[0] == pytest.approx(6 * a, rel=1e-12)
        [activity] = watch.activities
        top = activity.bottleneck
        assert (top.src, top.dst, top.bytes) == ("A", "B", 12 * c)
        assert top.busy_s == pytest.approx(6 * a, rel=1e-12)
        uses = {link.name: link for link in activity.links}
        assert uses["a0->A"].busy_s == pytest.approx(6 * a, rel=1e-12)
        assert uses["a0->A"].bytes == 6 * c
        assert uses["B->A"].busy_s == pytest.approx(3 * a, rel=1e-12)
        assert frame.bottleneck_link[0] == "A->B"
        assert frame.bottleneck_share[0] == pytest.approx(1.0, rel=1e-12)


def test_bottleneck_ties_go_to_bytes_then_name():
    def use(name, nbytes, busy):
        return LinkUse(name, "s", "nvlink", "gpu", None, "switch", 0, 1e9, nbytes, busy)

    assert bottleneck([use("b", 1, 2.0), use("a", 1, 2.0 * (1 - 1e-12))]).src == "a"
    assert bottleneck([use("a", 1, 2.0), use("b", 2, 2.0)]).src == "b"
    assert bottleneck([use("a", 9, 1.0), use("b", 1, 2.0)]).src == "b"
    assert bottleneck([]) is None


@pytest.mark.parametrize("algorithm", ["ring", "direct", "halving_doubling", "tree",
                                       "double_binary_tree", "recursive_doubling"])
def test_both_engines_give_the_same_link_table(tmp_path, algorithm):
    tables = {}
    # a GPU reduction cost, but where threads of a rank reduce at once (only SimPy orders those)
    gpu = {} if algorithm == "double_binary_tree" else {"gpu": {"reduce_bandwidth": "40GB/s"}}
    for engine in ("simpy", "vector"):
        scenario = crossed(tmp_path, engine=engine, algorithms=[algorithm],
                           sizes=[4096, "1MiB"], piece_size="64KiB", **gpu)
        watch = Watch()
        frame = simulate(scenario, watch=watch)
        assert set(frame.engine) == {engine}
        tables[engine] = (links_frame(watch.activities), frame)
    (simpy, simpy_rows), (vector, vector_rows) = tables["simpy"], tables["vector"]
    key = ["size_bytes", "from", "to"]
    simpy, vector = simpy.sort_values(key, ignore_index=True), vector.sort_values(key,
                                                                                  ignore_index=True)
    assert list(simpy.columns) == list(LINK_COLUMNS)
    pd.testing.assert_frame_equal(simpy.drop(columns=["busy_s", "busy_share", "utilisation",
                                                      "sim_time_s"]),
                                  vector.drop(columns=["busy_s", "busy_share", "utilisation",
                                                       "sim_time_s"]))
    assert simpy.busy_s.to_numpy() == pytest.approx(vector.busy_s.to_numpy(), rel=1e-9)
    assert list(simpy_rows.bottleneck_link) == list(vector_rows.bottleneck_link)


def test_link_bytes_are_the_messages_bytes_over_their_routes():
    # Every send slice of the trace, routed, adds its bytes to each link it crosses.
    scenario = scenario_from_dict({"topology": {"preset": "dgx_h100", "nodes": 2},
                                   "algorithms": ["ring", "hierarchical", "direct"],
                                   "sizes": ["1MiB"], "execution": "ideal"})
    watch = Watch(trace=True)
    simulate(scenario, watch=watch)
    machine = prepare(scenario, select=False).machine
    for activity in watch.activities:
        expected: dict[str, float] = {}
        for item in activity.slices:
            if item.kind != "send":
                continue
            peer = int(item.peer.removeprefix("rank "))
            route = machine.routing.route(machine.placement[item.rank], machine.placement[peer])
            for src, dst in route.links:
                expected[f"{src}->{dst}"] = expected.get(f"{src}->{dst}", 0.0) + item.bytes
        assert {link.name: link.bytes for link in activity.links} == expected, activity.algorithm
    check_trace_events(trace_document(watch.activities)["traceEvents"])  # channels, threads


def test_a_ring_trace_has_every_send_where_the_simulation_has_it(tmp_path):
    # ring on p = 5 ranks of a switch, 5000 bytes, whole chunks: each rank sends 2(p-1) = 8
    # messages of c = 1000 B; step k's leaves at k·(alpha + c·beta) + alpha and arrives at
    # (k+1)·(alpha + c·beta), alpha = 2 × 1 us; the last arrival is the run's time.
    p, c, bandwidth, alpha = 5, 1000, 25 * GB, 2e-6
    scenario = tmp_path / "ring.yaml"
    scenario.write_text("topology: {kind: switch, ranks: 5, bandwidth: 25GB/s, latency: 1us}\n"
                        "algorithms: [ring, direct]\nsizes: [5000]\n")
    trace = tmp_path / "out" / "trace.json"
    assert main(["run", str(scenario), "--output", str(tmp_path / "out"), "--quiet",
                 "--trace", str(trace), "--trace-point", "ring:5000"]) == 0
    document = json.loads(trace.read_text())
    events = document["traceEvents"]
    check_trace_events(events)
    sends = [e for e in events if e["ph"] == "X" and e["cat"] == "send"]
    step = alpha + c / bandwidth
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    by_rank: dict[str, list[dict]] = {}
    for event in sends:
        by_rank.setdefault(names[(event["pid"], event["tid"])], []).append(event)
    assert sorted(by_rank) == sorted(f"rank {r} sends" for r in range(p))
    for rank in range(p):
        mine = sorted(by_rank[f"rank {rank} sends"], key=lambda e: e["ts"])
        assert len(mine) == 2 * (p - 1)
        for k, event in enumerate(mine):
            # times are written in whole nanoseconds (what Perfetto keeps)
            assert event["ts"] == pytest.approx((k * step + alpha) * 1e6, abs=5e-4)
            assert event["ts"] + event["dur"] == pytest.approx((k + 1) * step * 1e6, abs=5e-4)
            assert event["args"]["bytes"] == c and event["args"]["peer"] == f"rank {(rank + 1) % p}"
        assert [e["name"] for e in mine[:2]] == ["send reduce-scatter step 1/4",
                                                 "send reduce-scatter step 2/4"]
        assert mine[-1]["name"] == "send allgather step 4/4"
    [point] = document["otherData"]["points"]  # the one point asked for, of the two run
    assert (point["algorithm"], point["size_bytes"], point["slices_dropped"]) == ("ring", 5000, 0)
    last = max(e["ts"] + e["dur"] for e in sends)
    assert last == pytest.approx(point["sim_time_us"], abs=5e-4)
    results = pd.read_csv(tmp_path / "out" / "ring.csv")
    assert results.sim_time_s[0] * 1e6 == pytest.approx(last, abs=5e-4)
    assert point["engine"] == "simpy" and "traced" in point["engine_note"]
    counters = [e for e in events if e["ph"] == "C"]
    assert {e["name"] for e in counters} == {f"link {name}" for name in point["counter_links"]}
    assert all(0.0 <= e["args"]["utilisation"] <= 1.0 + 1e-12 for e in counters)


def check_trace_events(events):
    """Every event has the keys its phase needs; slices on one thread never overlap."""
    assert events
    lanes: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for event in events:
        assert event["ph"] in ("X", "C", "M")
        assert isinstance(event["name"], str) and isinstance(event["pid"], int)
        if event["ph"] == "X":
            assert {"ts", "dur", "tid", "cat", "args"} <= set(event)
            assert event["dur"] >= 0
            # as Perfetto imports them: ts and dur rounded to whole ns apart (slices that then
            # overlap by a ns are dropped: slice_drop_overlapping_complete_event)
            start = round(event["ts"] * 1e3)
            lanes.setdefault((event["pid"], event["tid"]), []).append(
                (start, start + round(event["dur"] * 1e3)))
        elif event["ph"] == "C":
            assert isinstance(event["ts"], float) and event["args"]
            assert all(isinstance(value, float) for value in event["args"].values())
        else:
            assert event["name"] in ("process_name", "process_sort_index", "thread_name",
                                     "thread_sort_index")
            assert "args" in event and ("tid" in event or event["name"].startswith("process"))
    for spans in lanes.values():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end


def test_an_nvls_trace_has_in_switch_steps():
    scenario = scenario_from_dict({"topology": {"preset": "dgx_h100"}, "algorithms": ["nvls"],
                                   "sizes": ["64MiB"]})
    watch = Watch(trace=True)
    simulate(scenario, watch=watch)
    document = trace_document(watch.activities)
    events = document["traceEvents"]
    check_trace_events(events)
    kinds = {e["cat"] for e in events if e["ph"] == "X"}
    assert {"send", "in-switch", "switch-reduce"} <= kinds
    threads = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert "n0.nvswitch" in threads
    json.dumps(document, allow_nan=False)


def test_a_capped_trace_says_what_it_dropped():
    scenario = scenario_from_dict({"topology": {"kind": "switch", "ranks": 4,
                                                "bandwidth": "25GB/s", "latency": "1us"},
                                   "algorithms": ["ring", "direct"], "sizes": [4096]})
    watch = Watch(trace=True)
    simulate(scenario, watch=watch)
    full = [len(activity.slices) for activity in watch.activities]
    document = trace_document(watch.activities, max_slices=20)
    points = document["otherData"]["points"]
    assert [point["slices"] for point in points] == [10, 10]
    assert [point["slices_dropped"] for point in points] == [n - 10 for n in full]
    assert document["otherData"]["slices_dropped"] == sum(full) - 20
    kept = [e for e in document["traceEvents"] if e["ph"] == "X"]
    for point in points:  # the last slices to end were dropped
        ends = [e["ts"] + e["dur"] for e in kept if e["pid"] == point["pid"]]
        assert max(ends) <= point["dropped_from_us"] + 1e-9
    assert document["otherData"]["counter_events_dropped"] == 0
    document = trace_document(watch.activities, max_counters=30)
    points = document["otherData"]["points"]
    assert [point["counter_events"] for point in points] == [15, 15]
    counters = [e for e in document["traceEvents"] if e["ph"] == "C"]
    assert len(counters) == 30
    for point in points:  # the counters stop where the point's share ran out
        times = [e["ts"] for e in counters if e["pid"] == point["pid"]]
        assert max(times) <= point["counters_until_us"]


def test_the_recorder_cap_counts_what_it_left_out():
    scenario = scenario_from_dict({"topology": {"kind": "switch", "ranks": 4,
                                                "bandwidth": "25GB/s", "latency": "1us"},
                                   "sizes": [32]})
    recorder = Recorder(prepare(scenario, select=False).machine.routing, trace=True, max_slices=2)
    for k in range(5):
        recorder.add_slice("rank 0", 0, "send", "", k, k + 1.0, "rank 1", 8)
    activity = recorder.activity("ring", 32, 5.0, "simpy")
    assert (len(activity.slices), activity.dropped_slices, activity.dropped_from_s) == (2, 3, 3.0)


def test_run_prints_the_bottleneck_and_writes_the_links_table(tmp_path, capsys):
    scenario = tmp_path / "two.yaml"
    scenario.write_text("topology: {preset: dgx_h100, nodes: 2}\nalgorithms: [ring]\n"
                        "sizes: [1MiB]\nexecution: ideal\n")
    links = tmp_path / "links.csv"
    assert main(["run", str(scenario), "--output", str(tmp_path / "out"), "--quiet",
                 "--format", "csv", "--links", str(links)]) == 0
    out = capsys.readouterr().out
    results = pd.read_csv(tmp_path / "out" / "two.csv")
    table = pd.read_csv(links)
    assert list(table.columns) == list(LINK_COLUMNS)
    top = table[table.bottleneck]
    assert len(top) == 1 and top.iloc[0]["from"] + "->" + top.iloc[0]["to"] == \
        results.bottleneck_link[0]
    assert top.busy_share.iloc[0] == pytest.approx(results.bottleneck_share[0], rel=1e-12)
    assert table.utilisation.to_numpy() == pytest.approx(
        (table.bytes / (table.bandwidth_Bps * table.sim_time_s)).to_numpy(), rel=1e-12)
    assert set(table.link) == {"nvlink", "pcie", "net"}
    assert set(table.from_tier.dropna()) == {0, 1}  # the NVSwitches and the leaf
    assert (tmp_path / "links.png").stat().st_size > 5_000
    line = next(line for line in out.splitlines() if line.split()[:2] == ["#", "1048576"]
                and line.split()[-1] == results.bottleneck_link[0])
    assert line.split()[2] == "ring"
    assert float(line.split()[3]) == pytest.approx(100 * results.bottleneck_share[0], abs=0.05)
    assert f"{links}" in out and f"{tmp_path / 'links.png'}" in out


@pytest.mark.parametrize("point, message", [
    ("nope:1KiB", "expected ALGO:SIZE, a point of the run (algorithms ring, direct; sizes 1KiB, "
                  "4KiB), got 'nope:1KiB'"),
    ("ring:2KiB", "got 'ring:2KiB'"),
    ("ring", "got 'ring'"),
    ("ring:lots", "got 'ring:lots'"),
])
def test_a_bad_trace_point_is_one_line_and_exit_2(tmp_path, capsys, point, message):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("topology: {kind: switch, ranks: 2, bandwidth: 1GB/s, latency: 1us}\n"
                        "algorithms: [ring, direct]\nsizes: [1KiB, 4KiB]\n")
    code = main(["run", str(scenario), "--output", str(tmp_path / "out"), "--quiet",
                 "--trace", str(tmp_path / "t.json"), "--trace-point", point])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err
    assert err.startswith("command line: --trace-point: ")
    assert not (tmp_path / "out").exists() and not (tmp_path / "t.json").exists()


def test_a_trace_point_needs_a_trace_file(tmp_path, capsys):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("topology: {kind: switch, ranks: 2, bandwidth: 1GB/s, latency: 1us}\n"
                        "sizes: [1KiB]\n")
    assert main(["run", str(scenario), "--quiet", "--trace-point", "ring:1KiB"]) == 2
    assert capsys.readouterr().err == ("command line: --trace-point: expected --trace FILE.json "
                                       "beside it, to write the trace\n")


def test_one_rank_has_no_bottleneck():
    frame = simulate({"topology": {"kind": "switch", "ranks": 1, "bandwidth": "1GB/s",
                                   "latency": "1us"}, "algorithms": ["ring"], "sizes": [1024]})
    assert frame.bottleneck_link[0] == "" and math.isnan(frame.bottleneck_share[0])
    assert links_frame([Activity("ring", 1024, 0.0, "simpy", ())]).empty


def test_a_trace_file_that_is_a_directory_is_refused_before_the_run(tmp_path, capsys):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("topology: {kind: switch, ranks: 2, bandwidth: 1GB/s, latency: 1us}\n"
                        "sizes: [1KiB]\n")
    assert main(["run", str(scenario), "--output", str(tmp_path / "out"), "--quiet",
                 "--links", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"command line: --links: expected a file to write, but "
                                       f"{tmp_path} is a directory\n")
    assert not (tmp_path / "out").exists()


def test_a_trace_point_of_an_algorithm_that_does_not_run_is_refused(tmp_path, capsys):
    # algorithms: all on a switch runs neither hierarchical (one host) nor bucket (no torus)
    scenario = tmp_path / "s.yaml"
    scenario.write_text("topology: {kind: switch, ranks: 4, bandwidth: 1GB/s, latency: 1us}\n"
                        "algorithms: all\nsizes: [1KiB]\n")
    for point in ("bucket:1KiB", "hierarchical:1KiB"):
        code = main(["run", str(scenario), "--output", str(tmp_path / "out"), "--quiet",
                     "--trace", str(tmp_path / "t.json"), "--trace-point", point])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and f"got '{point}'" in err
        assert "bucket" not in err.split("got")[0] and "hierarchical" not in err.split("got")[0]
        assert not (tmp_path / "out").exists() and not (tmp_path / "t.json").exists()
