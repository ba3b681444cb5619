"""Footprints and the memory budget (issue 23, "the memory limits do not protect the machine"):
every algorithm's count equals the schedule its builder makes; a point whose count says it
would not fit is refused before anything is built, and one that only running tells (the SimPy
engine's messages in flight, a trace, an uncounted schedule) is stopped at the budget."""

import dataclasses
import tracemalloc

import numpy as np
import pytest

from simulator.algorithms import REGISTRY, Collective, Comm, Program
from simulator.algorithms.channels import (
    blocks_on_channels,
    footprint_on_channels,
    schedule_on_channels,
)
from simulator.algorithms.direct import DirectAllreduce
from simulator.algorithms.footprint import Footprint
from simulator.algorithms.schedule import ARRAYS, Group, Schedule
from simulator.cli import main
from simulator.engine import executor
from simulator.engine.record import Recorder
from simulator.errors import InputError
from simulator.limits import MEMORY_BUDGET_BYTES, PAIR_BYTES, VECTOR_ENTRY_BYTES
from simulator.model.machine import Layout
from simulator.model.span import Span
from simulator.plan import footprint_problem, plan_point, prepare
from simulator.runner import run_point, settings_of
from simulator.scenario import scenario_from_dict

COUNTED = [(collective, name) for collective in Collective
           for name, algorithm in REGISTRY[collective].items() if algorithm.has_builder()]
FLAT = [(c, n) for c, n in COUNTED if n not in ("hierarchical", "bucket", "nvls_tree")]


def assert_counted(counted, blocks, exact_pairs=False):
    """``counted`` is ``blocks``' footprint: its entries, whether it comes in blocks, what a
    whole one holds, and at least its rank pairs (exactly, with ``exact_pairs``)."""
    schedule = blocks.schedule()
    moved = schedule.src != schedule.dst
    pairs = len(set(zip(schedule.src[moved].tolist(), schedule.dst[moved].tolist(), strict=True)))
    assert (counted.entries, counted.windowed) == (blocks.size, blocks.count > 1)
    if not counted.windowed:
        assert counted.held == counted.entries
    assert counted.pairs == pairs if exact_pairs else pairs <= counted.pairs


@pytest.mark.parametrize("collective, name", FLAT, ids=[f"{c.value}-{n}" for c, n in FLAT])
def test_a_count_is_the_schedule_its_builder_makes(collective, name):
    # As tests/test_trace.py varies the builders: p = 1 .. 13, uneven chunks, an empty buffer,
    # pipeline pieces, allreduces on 1 to 3 channels over two hosts.
    algorithm = REGISTRY[collective][name]
    channels = (1, 2, 3) if collective is Collective.ALLREDUCE else (1,)
    for p in (1, 2, 3, 4, 5, 8, 13):
        hosts = np.arange(p) * 2 // p if p >= 4 else np.zeros(p, dtype=np.int64)
        layout = Layout(tuple(hosts.tolist()))
        for count in (7 * p + 3, 1000, 0):
            for piece_bytes in (None, 64):
                for c in channels:
                    group = Group(np.arange(p), Span(5, 5 + count), 4, piece_bytes, hosts)
                    assert_counted(footprint_on_channels(algorithm, group, layout, c),
                                   blocks_on_channels(algorithm, group, layout, c),
                                   exact_pairs=name in ("direct", "ring") and c == 1)


def test_direct_counts_two_messages_a_pair():
    group = Group(np.arange(7800), Span(0, 1 << 18), 4)
    assert DirectAllreduce().footprint(group) == Footprint(121_664_400, 60_832_200,
                                                           121_664_400, ends=7800)


def machine_group(topology, count, piece_bytes=None, stream_bytes=None):
    machine = prepare(scenario_from_dict({"topology": topology, "sizes": [4 * count]}),
                      select=False).machine
    return Group.whole(machine, count, 4, piece_bytes, stream_bytes)


HOSTS = {(nodes, gpus): machine_group({"preset": "dgx_h100", "nodes": nodes,
                                       "gpus_per_node": gpus}, 1001)
         for nodes, gpus in ((2, 3), (3, 3), (5, 1))}


@pytest.mark.parametrize("inter", ["ring", "tree", "double_binary_tree", "halving_doubling",
                                   "direct", "recursive_doubling", "binomial_tree"])
def test_hierarchical_counts_its_phases_and_their_joins(inter, monkeypatch):
    # Hosts of 1 and 3 GPUs; streamed in 300-byte pieces (three phases a tick, joined) or not;
    # pipeline pieces or not; a ring across hosts also a block at a time. A tree's interior
    # ranks end two threads, which a join marker waits for.
    algorithm = REGISTRY[Collective.ALLREDUCE]["hierarchical"]
    algorithm = algorithm.configured(dataclasses.replace(
        algorithm.options, inter=REGISTRY[Collective.ALLREDUCE][inter]))
    for block in (2, 1 << 14) if inter == "ring" else (1 << 14,):
        monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", block)
        for whole in HOSTS.values():
            for stream_bytes in (None, 300):
                for piece_bytes in (None, 64):
                    group = dataclasses.replace(whole, piece_bytes=piece_bytes,
                                                stream_bytes=stream_bytes)
                    assert_counted(algorithm.counted(group), algorithm.in_blocks(group))


def test_nvls_tree_counts_its_ops_and_pairs():
    # 2, 3 and 5 hosts (the trees' edges overlap on two) of 1, 3 and 8 GPUs; one piece per
    # chunk, uneven 64-byte pieces, an empty buffer; on 1 to 3 channels
    algorithm = REGISTRY[Collective.ALLREDUCE]["nvls_tree"]
    for nodes, gpus in ((2, 1), (2, 3), (3, 8), (5, 3)):
        whole = machine_group({"preset": "dgx_h100", "nodes": nodes, "gpus_per_node": gpus},
                              1001)
        layout = Layout(tuple(whole.hosts.tolist()))
        for count in (1001, 0):
            for piece_bytes in (None, 64):
                group = dataclasses.replace(whole, buffer=Span(0, count),
                                            piece_bytes=piece_bytes)
                for channels in (1, 2, 3):
                    assert_counted(footprint_on_channels(algorithm, group, layout, channels),
                                   blocks_on_channels(algorithm, group, layout, channels),
                                   exact_pairs=channels == 1)  # channels share rails


@pytest.mark.parametrize("dims", [[2, 3], [3, 3], [2, 2, 2], [4, 1]])
def test_bucket_counts_every_line_of_every_dimension(dims, monkeypatch):
    algorithm = REGISTRY[Collective.ALLREDUCE]["bucket"]
    for block in (2, 1 << 14):
        monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", block)
        for piece_bytes in (None, 64):
            group = machine_group({"kind": "torus", "dims": dims, "bandwidth": "25GB/s",
                                   "latency": "1us"}, 1001, piece_bytes)
            assert_counted(algorithm.counted(group), algorithm.in_blocks(group))


def test_a_ring_a_block_at_a_time_holds_none_of_its_blocks(monkeypatch):
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 10)
    group = Group(np.array([3, 1, 4, 0, 2]), Span(7, 7 + 41), 4)
    counted = REGISTRY[Collective.ALLREDUCE]["ring"].counted(group)
    assert counted == Footprint(40, 5, 0, windowed=True, ends=5)  # 2·4 steps of 5 chunks


class Star(DirectAllreduce):
    """A program of its own: its parent's count is not its count."""

    def program(self, comm: Comm) -> Program:
        yield from super().program(comm)


def test_no_count_for_a_trace_nor_for_a_program_its_class_does_not_count():
    group = Group(np.arange(4), Span(0, 64), 4)
    for name in ("nvls", "pat", "collnet_direct", "collnet_chain"):
        for algorithm in (a for c in Collective for n, a in REGISTRY[c].items() if n == name):
            assert algorithm.counted(group) is None
    assert Star().counted(group) is None
    assert DirectAllreduce().counted(group) is not None


# --- the budget, before anything is built -------------------------------------------------------

SWITCH = {"kind": "switch", "bandwidth": "25GB/s", "latency": "1us"}


def direct_on(ranks, **more):
    scenario = scenario_from_dict({"topology": {**SWITCH, "ranks": ranks},
                                   "algorithms": ["direct"], "sizes": [4096], "verify": False,
                                   **more})
    return scenario, prepare(scenario)


def test_direct_just_under_the_budget_is_accepted_and_one_rank_more_refused():
    # 2·p(p-1) entries at 300 bytes and p(p-1) pairs at 760: 1360·p(p-1) bytes, 17.17e9 at
    # 3554 ranks, 17.18e9 at 3555, against 16 GiB = 17.18e9.
    assert 1360 * 3554 * 3553 <= MEMORY_BUDGET_BYTES < 1360 * 3555 * 3554
    assert (VECTOR_ENTRY_BYTES, PAIR_BYTES) == (300, 760)
    for ranks, expected in ((3554, None), (3555, (
            "'direct' at 4096 bytes on 3555 ranks needs ~16.0 GiB to simulate on the "
            "vectorised engine (25,268,940 schedule entries held at once at 300 bytes, "
            "12,634,470 rank pairs at 760 bytes), more than the 16 GiB a point may take "
            "(simulator/limits.py); use fewer ranks, a larger piece_size or another "
            "algorithm"))):
        scenario, setup = direct_on(ranks)
        problem = footprint_problem(scenario, setup.machine, setup.algorithms[0], 4096,
                                    settings_of(scenario), 1)
        assert (problem and problem.message) == expected


def test_the_simpy_engine_counts_its_flows_and_the_routes():
    # SimPy holds no schedule but every pair's flow and the timers they re-time (issue 40):
    # pairs²/(2p) at 670 bytes and p(p-1) pairs at 760: 371 ranks fit, 372 do not.
    scenario, setup = direct_on(371, engine="simpy")
    assert footprint_problem(scenario, setup.machine, setup.algorithms[0], 4096,
                             settings_of(scenario), 1) is None
    scenario, setup = direct_on(372, engine="simpy")
    problem = footprint_problem(scenario, setup.machine, setup.algorithms[0], 4096,
                                settings_of(scenario), 1)
    assert problem is not None and problem.message == (
        "'direct' at 4096 bytes on 372 ranks needs ~16.1 GiB to simulate on the SimPy engine "
        "(~25,601,226 messages in flight and flow timers at 670 bytes, 138,012 rank pairs at "
        "760 bytes), more than the 16 GiB a point may take (simulator/limits.py); use fewer "
        "ranks, a larger piece_size or another algorithm, or engine: vector")


def test_a_point_that_would_run_out_of_memory_is_refused_before_anything_is_built(monkeypatch):
    # direct on 7,800 ranks: 121.7 million entries and 60.8 million routes, ~82 GB. Neither
    # the closed form's routes nor the schedule are made: both would raise here.
    scenario, setup = direct_on(7800)

    def never(*_):
        raise AssertionError("built")

    monkeypatch.setattr("simulator.algorithms.direct.exchange_schedule", never)
    monkeypatch.setattr("simulator.algorithms.direct.all_pairs", never)
    tracemalloc.start()
    with pytest.raises(InputError) as caught:
        plan_point(scenario, setup, setup.algorithms[0], 4096, settings_of(scenario))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1 << 20  # under a MiB, of the ~82 GB the point would take
    assert str(caught.value) == (
        "<dict>: algorithms: 'direct' at 4096 bytes on 7800 ranks needs ~77.0 GiB to simulate "
        "on the vectorised engine (121,664,400 schedule entries held at once at 300 bytes, "
        "60,832,200 rank pairs at 760 bytes), more than the 16 GiB a point may take "
        "(simulator/limits.py); use fewer ranks, a larger piece_size or another algorithm")


def test_the_command_line_refuses_it_with_one_line_and_writes_nothing(tmp_path, capsys):
    scenario = tmp_path / "big.yaml"
    scenario.write_text("topology: {kind: switch, ranks: 7800, bandwidth: 25GB/s, latency: 1us}\n"
                        "algorithms: [ring, direct]\nsizes: [4096, 1MiB]\nverify: false\n")
    assert main(["run", str(scenario), "--output", str(tmp_path / "out")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" needs ")[0] for line in lines] == [
        f"{scenario}: algorithms: 'direct' at {size} bytes on 7800 ranks"
        for size in (4096, 1048576)]  # every point too large, one line each; the ring fits
    assert not (tmp_path / "out").exists()


# --- the budget, where only running tells -------------------------------------------------------


def test_the_simpy_engine_stops_once_it_holds_more_than_the_budget(monkeypatch):
    # Four ranks post their 12 direct messages at once; with their flows' timers the run holds
    # some number of things at most: that many are allowed, one fewer is not.
    scenario = {"topology": {**SWITCH, "ranks": 4}, "algorithms": ["direct"], "sizes": [4096],
                "engine": "simpy"}
    parsed = scenario_from_dict(scenario)
    setup = prepare(parsed)
    plan = plan_point(parsed, setup, setup.algorithms[0], 4096, settings_of(parsed))
    buffers = np.zeros((4, plan.payload.proxy_count), dtype=np.float32)
    timing, _ = executor.run(plan, buffers, Recorder(plan.machine.routing))
    held = timing.held
    assert held >= 12
    monkeypatch.setattr("simulator.engine.executor.SIMPY_HELD_BYTES", MEMORY_BUDGET_BYTES // held)
    assert run_point(scenario, "direct", 4096).verified
    monkeypatch.setattr("simulator.engine.executor.SIMPY_HELD_BYTES",
                        MEMORY_BUDGET_BYTES // (held - 1))
    with pytest.raises(InputError) as caught:
        run_point(scenario, "direct", 4096)
    assert str(caught.value) == (
        f"<dict>: algorithms: 'direct' at 4096 bytes on 4 ranks came to hold {held:,} messages "
        f"in flight and flow timers on the SimPy engine, more than the {held - 1:,} that fit "
        "in the 16 GiB a point may take (simulator/limits.py); use fewer ranks, a larger "
        "piece_size or another algorithm")


def test_a_trace_stops_once_it_records_more_than_the_budget(monkeypatch):
    scenario = {"topology": {"preset": "dgx_h100"}, "algorithms": ["nvls"], "sizes": ["4MiB"],
                "verify": False, "engine": "vector"}  # 8 ranks × 8 pieces, up and down: 128
    monkeypatch.setattr("simulator.engine.executor.TRACE_ENTRY_BYTES", MEMORY_BUDGET_BYTES // 100)
    with pytest.raises(InputError) as caught:
        run_point(scenario, "nvls", 4 << 20)
    assert str(caught.value) == (
        "<dict>: algorithms: 'nvls' at 4194304 bytes on 8 ranks came to hold 101 entries "
        "of a traced schedule, more than the 100 that fit in the 16 GiB a point may take "
        "(simulator/limits.py); use fewer ranks, a larger piece_size or another algorithm")


class Uncounted(DirectAllreduce):
    """A builder of its own and no count: checked once built."""

    def program(self, comm: Comm) -> Program:
        yield from super().program(comm)

    def schedule(self, group: Group) -> Schedule:
        return super().schedule(group)


def test_a_schedule_no_count_predicts_is_checked_once_built(monkeypatch):
    scenario = {"topology": {**SWITCH, "ranks": 4}, "algorithms": ["direct"], "sizes": [4096]}
    assert run_point(scenario, Uncounted(), 4096).messages == 24  # 2·p(p-1)
    monkeypatch.setattr("simulator.engine.executor.VECTOR_ENTRY_BYTES", MEMORY_BUDGET_BYTES // 23)
    with pytest.raises(InputError) as caught:
        run_point(scenario, Uncounted(), 4096)
    assert str(caught.value) == (
        "<dict>: algorithms: 'direct' at 4096 bytes on 4 ranks came to hold 24 schedule entries "
        "on the vectorised engine, more than the 23 that fit in the 16 GiB a point may take "
        "(simulator/limits.py); use fewer ranks, a larger piece_size or another algorithm")


@pytest.mark.parametrize("collective", [Collective.ALLREDUCE, Collective.REDUCE_SCATTER,
                                        Collective.ALLGATHER])
def test_channels_of_a_ring_a_block_at_a_time_are_its_channels_schedule(collective,
                                                                       monkeypatch):
    # Each channel's ring pass in blocks of its share of 12 messages, the channels' blocks
    # joined: counted as windowed where a channel is, and the same messages as the channels'
    # whole schedules side by side (each channel's in its order, on its thread).
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 12)
    algorithm = REGISTRY[collective]["ring"]
    for p in (4, 5, 8, 13):
        layout = Layout(tuple((np.arange(p) * 2 // p).tolist()))
        for c in (2, 3):
            group = Group(np.arange(p), Span(5, 5 + 7 * p + 3), 4, None, np.array(layout.hosts))
            blocks = blocks_on_channels(algorithm, group, layout, c)
            assert_counted(footprint_on_channels(algorithm, group, layout, c), blocks)
            assert blocks.count > 1
            whole = schedule_on_channels(algorithm, group, layout, c)
            joined = blocks.schedule()
            joined = joined.renumbered(np.argsort(joined.threads, kind="stable"))
            for name in (*ARRAYS, "threads"):
                np.testing.assert_array_equal(getattr(joined, name), getattr(whole, name),
                                              err_msg=name)
            assert blocks.reducing_threads == whole.reducing_threads


@pytest.mark.parametrize("name, topology", [
    ("hierarchical", {"preset": "dgx_h100", "nodes": 5, "gpus_per_node": 2}),
    ("bucket", {"kind": "torus", "dims": [3, 4], "bandwidth": "25GB/s", "latency": "1us"})])
def test_phases_in_blocks_on_channels_count_as_their_blocks(name, topology, monkeypatch):
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 8)
    algorithm = REGISTRY[Collective.ALLREDUCE][name]
    group = machine_group(topology, 1001)
    for channels in (2, 3):
        blocks = blocks_on_channels(algorithm, group, group.layout, channels)
        assert blocks.count > 1
        assert_counted(footprint_on_channels(algorithm, group, group.layout, channels), blocks)
