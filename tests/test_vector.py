"""The vectorised engine (simulator.engine.vector) against the SimPy engine: every algorithm with
a hand-written schedule, on random scenarios with and without shared links, uneven sizes,
pipeline pieces, GPU costs, channels and both execution models, gives the same time (to the
bit) and the same final buffers; and the engine's own parts by hand. That every builder is
its program's trace, at many more shapes than these end-to-end runs, is tests/test_trace.py's."""

import gc
import weakref

import numpy as np
import pandas as pd
import pytest

from simulator import simulate
from simulator.algorithms import REGISTRY, Collective
from simulator.algorithms.channels import blocks_on_channels, schedule_on_channels
from simulator.algorithms.phases.ring import ring_pass_blocks, ring_pass_schedule
from simulator.algorithms.ring import RingAllreduce
from simulator.algorithms.schedule import ARRAYS, Blocks, Group, Schedule, Together, transfers
from simulator.engine import compiled, flows, kernel, routes, vector
from simulator.engine.kernel import ranges
from simulator.engine.payload import Payload, make_inputs
from simulator.engine.run import RunSpec, run_collective
from simulator.engine.vector import declines, run_schedule
from simulator.errors import AlgorithmError, InputError
from simulator.model.reduction import ReduceOp
from simulator.model.span import Span
from simulator.runner import prepare, run_point
from simulator.scenario import scenario_from_dict

SCHEDULED = {collective: [name for name, algorithm in REGISTRY[collective].items()
                          if algorithm.has_builder()]
             for collective in Collective}
"""The algorithms of each collective with a hand-written schedule (all but nvls)."""

RANDOM = {collective: [name for name in names if name != "nvls_tree"]
          for collective, names in SCHEDULED.items()}
"""What :func:`random_scenario` draws from: nvls_tree needs hosts of NVSwitches that reduce,
which the random topologies are not (tests/test_nvls_tree.py runs it on both engines)."""


def random_topology(rng):
    kind = rng.choice(["switch", "fully_connected", "ring", "dgx"])
    if kind == "dgx":
        return {"kind": "dgx", "nodes": int(rng.integers(1, 3)),
                "gpus_per_node": int(rng.integers(2, 5)), "nvlink_bandwidth": "450GB/s",
                "nvlink_latency": "300ns", "pcie_bandwidth": "63GB/s", "pcie_latency": "500ns",
                "nic_bandwidth": "50GB/s", "nic_latency": "850ns"}
    bandwidth = ["25GB/s", "10GB/s", "7GB/s"][int(rng.integers(3))]
    return {"kind": str(kind), "ranks": int(rng.integers(2, 10)), "bandwidth": bandwidth,
            "latency": ["500ns", "1us", "0s"][int(rng.integers(3))]}


def random_scenario(seed):
    rng = np.random.default_rng(seed)
    collective = list(Collective)[int(rng.integers(len(Collective)))]
    scenario = {
        "topology": random_topology(rng), "collective": collective.value,
        "algorithms": [str(rng.choice(RANDOM[collective]))],
        "sizes": [int(rng.integers(1, 1 << 18)) * 4], "execution": "ideal",
        "op": str(rng.choice(["sum", "max", "prod"]))}
    if rng.random() < 0.5:
        scenario["piece_size"] = int(rng.choice([64, 1000, 4096, 65536]))
    if rng.random() < 0.5:
        scenario["gpu"] = {"reduce_bandwidth": "40GB/s", "launch_latency": "1us"}
    if collective is Collective.ALLTOALL:  # p equal blocks: a multiple of p elements
        topology = scenario["topology"]
        ranks = topology.get("ranks") or topology["nodes"] * topology["gpus_per_node"]
        scenario["sizes"] = [-(-scenario["sizes"][0] // (4 * ranks)) * 4 * ranks]
    return scenario_from_dict(scenario)


def both_engines(scenario, channels=1, proxy=4096, windowed=False):
    """(SimPy timing, vectorised timing, their final buffers) of the scenario's one point;
    ``windowed``: the vectorised run a window of blocks at a time where the algorithm can."""
    setup = prepare(scenario, select=False)
    machine = setup.machine
    [name], [size] = scenario.algorithms, scenario.sizes
    algorithm = scenario.algorithm(name)
    payload = Payload.for_size(size, scenario.dtype, machine.ranks, proxy, scenario.piece_bytes,
                               channels, algorithm.whole_chunks(machine.ranks))
    inputs = make_inputs(np.random.default_rng(1), machine.ranks, payload, scenario.reduce_op)
    simpy_buffers, vector_buffers = inputs.copy(), inputs.copy()
    simpy = run_collective(algorithm, machine, RunSpec(payload, scenario.reduce_op,
                                                       scenario.piece_bytes, channels),
                           simpy_buffers)
    group = Group.whole(machine, payload.count, scenario.dtype.itemsize, scenario.piece_bytes)
    schedule = (blocks_on_channels if windowed else schedule_on_channels)(
        algorithm, group, machine.layout, channels)
    if declines(schedule, machine):
        return simpy, None, simpy_buffers, None
    vector = run_schedule(schedule, machine, payload, scenario.reduce_op, vector_buffers, name)
    return simpy, vector, simpy_buffers, vector_buffers


@pytest.mark.parametrize("seed", range(24))  # builder = trace at many more: tests/test_trace.py
def test_both_engines_agree_on_random_scenarios(seed):
    scenario = random_scenario(seed)
    channels = 1 + seed % 3 if scenario.collective is Collective.ALLREDUCE else 1
    simpy, vector, simpy_buffers, vector_buffers = both_engines(scenario, channels)
    if vector is None:  # reducing threads sharing a costly GPU: SimPy's alone (test below)
        assert scenario.gpu.reduce_bandwidth_Bps is not None
        assert channels > 1 or scenario.algorithms == ("double_binary_tree",)
        return
    assert vector.time_s == simpy.time_s  # to the bit: one network kernel
    assert vector.messages == simpy.messages
    np.testing.assert_array_equal(vector_buffers, simpy_buffers)


@pytest.mark.parametrize("algorithm", [name for name in SCHEDULED[Collective.ALLREDUCE]
                                       if name not in ("bucket", "two_shot")])
# bucket: a torus's, tests/test_bucket.py; two_shot: one node only, tests/test_shots.py
def test_both_engines_agree_under_nccl_with_channels_across_nodes(algorithm):
    scenario = {"topology": {"preset": "dgx_h100", "nodes": 2, "gpus_per_node": 4},
                "algorithms": [algorithm], "sizes": [4096, 3 << 20], "execution": "nccl"}
    simpy = simulate({**scenario, "engine": "simpy"})
    vector = simulate({**scenario, "engine": "vector"})
    assert list(vector.engine) == ["vector"] * 2 and list(simpy.engine) == ["simpy"] * 2
    # one per GPU of a host, but rail-aware (hierarchical, nvls_tree)
    channels = 1 if REGISTRY[Collective.ALLREDUCE][algorithm].rail_aware else 4
    assert list(vector.channels) == list(simpy.channels) == [channels] * 2
    np.testing.assert_array_equal(vector.sim_time_s, simpy.sim_time_s)
    assert vector.verified.all() and simpy.verified.all()


@pytest.mark.parametrize("engine", ["simpy", "vector"])
def test_without_verification_no_data_moves_and_the_times_are_the_same(engine):
    # verify: false is timing only: an empty proxy, so memory follows the messages, not the
    # ranks × chunks of data; every time must be the verified run's, on both engines.
    scenario = {"topology": {"preset": "dgx_h100", "nodes": 2, "gpus_per_node": 4},
                "algorithms": "all", "sizes": [4096, 3 << 20], "gpu": {"reduce_bandwidth":
                                                                        "1TB/s"},
                "engine": engine}
    checked, timed = simulate(scenario), simulate({**scenario, "verify": False})
    assert checked.verified.all() and timed.verified.isna().all()
    assert (timed.verified_elements == 0).all() and (checked.verified_elements > 0).all()
    np.testing.assert_array_equal(timed.sim_time_s, checked.sim_time_s)
    assert list(timed.engine) == list(checked.engine)



def test_auto_runs_the_vector_engine_where_a_schedule_exists():
    frame = simulate({"topology": {"preset": "dgx_h100"}, "algorithms": ["ring", "nvls"],
                      "sizes": [4096], "execution": "ideal"})
    assert list(frame.engine) == ["vector", "simpy"]
    # the ring by hand: 14 steps of two 300 ns NVLink hops plus 512 B at 450 GB/s
    assert frame.sim_time_s[0] == pytest.approx(14 * (600e-9 + 512 / 450e9), rel=1e-12)


def test_engine_vector_runs_an_algorithm_without_builder_on_its_trace():
    scenario = {"topology": {"preset": "dgx_h100"}, "algorithms": ["nvls"], "sizes": [4096]}
    vector = run_point({**scenario, "engine": "vector"}, "nvls", 4096)
    simpy = run_point({**scenario, "engine": "simpy"}, "nvls", 4096)
    assert (vector.engine, simpy.engine) == ("vector", "simpy") and vector.verified
    assert vector.sim_time_s == simpy.sim_time_s


def test_reducing_threads_on_a_costly_gpu_run_on_simpy():
    scenario = {"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s",
                             "latency": "1us"}, "algorithms": ["double_binary_tree"],
                "sizes": [4096], "gpu": {"reduce_bandwidth": "40GB/s"}}
    assert list(simulate(scenario).engine) == ["simpy"]
    assert list(simulate({**scenario, "gpu": {}}).engine) == ["vector"]
    with pytest.raises(InputError) as caught:
        run_point({**scenario, "engine": "vector"}, "double_binary_tree", 4096)
    assert str(caught.value) == (
        "<dict>: engine: expected auto or simpy for 'double_binary_tree': its 2 threads per rank "
        "reduce at once on a GPU with a reduction cost, whose queue only the SimPy engine "
        "orders")


def test_an_unknown_engine_is_named():
    with pytest.raises(InputError) as caught:
        scenario_from_dict({"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s",
                                         "latency": "1us"}, "sizes": [4096], "engine": "fast"})
    assert str(caught.value) == ("<dict>: engine: expected an engine (auto, simpy, vector), "
                                 "got 'fast'")


def test_a_subclass_that_rewrites_the_program_does_not_inherit_the_schedule():
    class Twice(RingAllreduce):
        def program(self, comm):
            yield from super().program(comm)
            yield from super().program(comm)

    group = Group(np.arange(4), Span(0, 8))
    assert RingAllreduce().has_builder() and not Twice().has_builder()
    assert Twice().scheduled(group).size == 2 * RingAllreduce().scheduled(group).size == 48
    assert Twice().in_blocks(group).traced and not RingAllreduce().in_blocks(group).traced


def test_ranges_concatenates_aranges():
    assert ranges(np.array([5, 0, 9]), np.array([2, 3, 0])).tolist() == [5, 6, 0, 1, 2]
    assert ranges(np.array([], dtype=np.int64), np.array([], dtype=np.int64)).tolist() == []


def test_threads_that_start_after_one_receive_all_run():
    # rank 0 receives from 1, then from 2 and 3 at once (comm.parallel): both threads follow
    # the same receive. Every flow starts after the 2 us route latency and they share rank 0's
    # downlink: the two 4-byte messages end at 2 us + 4 B / (25/3 GB/s), then the 4096-byte one
    # has the link alone for its last 4092 bytes.
    setup = prepare(scenario_from_dict({"topology": {"kind": "switch", "ranks": 4,
                                                     "bandwidth": "25GB/s", "latency": "1us"},
                                        "sizes": [4096], "execution": "ideal"}), select=False)
    group = Group(np.arange(4), Span(0, 1024), 4)

    def one(src, start, stop):
        return transfers(group, np.array([src]), np.array([0]), np.array([start]),
                         np.array([stop]), reduce=False, whole=True)

    schedule = Schedule.sequence([one(1, 0, 1024), Together((one(2, 0, 1), one(3, 1, 2)), (0, 1))],
                                 4)
    assert schedule.markers.sum() == 1  # rank 0's two threads joined
    buffers = np.arange(4 * 1024, dtype=np.float32).reshape(4, 1024)
    timing = run_schedule(schedule, setup.machine, Payload(1024, 1024, np.dtype("float32")),
                          ReduceOp.SUM, buffers, "threads")
    small_end = 2e-6 + 4 / (25e9 / 3)
    assert timing.time_s == pytest.approx(small_end + 4092 / 25e9, rel=1e-12)
    assert timing.messages == 3  # the join marker is not a message
    assert buffers[0, 0] == 2 * 1024 and buffers[0, 1] == 3 * 1024 + 1  # copied from 2, then 3


# --- schedules a block at a time (Blocks) ---------------------------------------------------------


def ring_cases():
    """Ring collectives on topologies with and without reduction costs, in blocks of 1-3 steps."""
    rng = np.random.default_rng(7)
    for case in range(12):
        collective = ["allreduce", "reduce_scatter", "allgather"][case % 3]
        scenario = {"topology": random_topology(rng), "collective": collective,
                    "algorithms": ["ring"], "sizes": [int(rng.integers(1, 1 << 14)) * 4],
                    "execution": "ideal", "op": ["sum", "max"][case % 2]}
        if case % 4 < 2:
            scenario["gpu"] = {"reduce_bandwidth": "40GB/s", "launch_latency": "1us"}
        yield scenario, 1 + case % 3


@pytest.mark.parametrize("scenario, steps_per_block", list(ring_cases()))
def test_a_ring_run_a_window_of_blocks_at_a_time_equals_the_simpy_run(monkeypatch, scenario,
                                                                      steps_per_block):
    # One to three ring steps per block: the window loads blocks ahead of the messages that
    # release them and drops the received ones, and must still give SimPy's time and buffers.
    simpy = run_point({**scenario, "engine": "simpy"}, "ring", scenario["sizes"][0])
    ranks = simpy.ranks
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", steps_per_block * ranks)
    group = Group(np.arange(ranks, dtype=np.int64), Span(0, simpy.count), 4)
    blocks = scenario_from_dict(scenario).algorithm("ring").in_blocks(group)
    total = 2 * (ranks - 1) if scenario["collective"] == "allreduce" else ranks - 1
    assert blocks.count == -(-total // steps_per_block) and blocks.reach == 1
    vector = run_point({**scenario, "engine": "vector"}, "ring", scenario["sizes"][0])
    assert vector.engine == "vector" and vector.verified and simpy.verified
    assert vector.sim_time_s == simpy.sim_time_s
    assert vector.messages == simpy.messages


def test_the_blocks_of_a_ring_pass_are_its_whole_schedule(monkeypatch):
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 10)  # 2 steps of 5
    group = Group(np.array([3, 1, 4, 0, 2]), Span(7, 7 + 41), 4)
    blocks = RingAllreduce().blocks(group)
    assert (blocks.count, blocks.size, blocks.reach) == (4, 40, 1)
    whole, joined = ring_pass_schedule(group, start=0, steps=8, reducing_steps=4), blocks.schedule()
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(joined, name), getattr(whole, name), err_msg=name)


def test_the_window_holds_a_few_blocks_not_the_schedule(monkeypatch):
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 64)  # 1 step a block
    setup = prepare(scenario_from_dict({"topology": {"kind": "switch", "ranks": 64,
                                                     "bandwidth": "25GB/s", "latency": "1us"},
                                        "sizes": [4096]}), select=False)
    payload = Payload(64 * 64, 64 * 64, np.dtype("float32"))
    inputs = make_inputs(np.random.default_rng(0), 64, payload, ReduceOp.SUM)
    buffers = inputs.copy()
    blocks = RingAllreduce().blocks(Group(np.arange(64), Span(0, 64 * 64), 4))
    timing = run_schedule(blocks, setup.machine, payload, ReduceOp.SUM, buffers, "ring")
    assert timing.messages == 2 * 63 * 64
    assert timing.held <= 4 * 64  # a block ahead, the one running, the received not yet dropped
    np.testing.assert_array_equal(buffers, np.broadcast_to(inputs.sum(axis=0), buffers.shape))
    assert timing.time_s == pytest.approx(126 * (2e-6 + 256 / 25e9), rel=1e-12)


def split(schedule, size, reach):
    """``schedule`` as Blocks of ``size`` messages a block."""
    def block(k):
        return Schedule(**{name: getattr(schedule, name)[k * size:(k + 1) * size]
                           for name in ARRAYS})
    return Blocks(-(-schedule.size // size), schedule.size, reach, block)


@pytest.mark.parametrize("size, reach, message", [
    (1, 1, "ring: block 2 of the schedule posts messages at the start; only blocks 0 to 1 "
           "(loaded before the run starts) may"),
    (4, 0, "ring: block 1 of the schedule is released by messages received before it was "
           "loaded: it reaches back more than 0 blocks"),
])
def test_blocks_that_break_the_window_rules_are_algorithm_errors(size, reach, message):
    setup = prepare(scenario_from_dict({"topology": {"kind": "switch", "ranks": 4,
                                                     "bandwidth": "25GB/s", "latency": "1us"},
                                        "sizes": [64]}), select=False)
    payload = Payload(16, 16, np.dtype("float32"))
    schedule = ring_pass_schedule(Group(np.arange(4), Span(0, 16), 4), start=0, steps=6,
                                  reducing_steps=3)
    with pytest.raises(AlgorithmError) as caught:
        run_schedule(split(schedule, size, reach), setup.machine, payload, ReduceOp.SUM,
                     np.zeros((4, 16), dtype=np.float32), "ring")
    assert str(caught.value) == message


@pytest.mark.parametrize("nodes, gpus, inter, reduce_cost", [
    (3, 2, "ring", False), (4, 3, "ring", True), (5, 2, "halving_doubling", True),
    (4, 4, "tree", False), (6, 1, "ring", True), (3, 4, "direct", False)])
def test_hierarchical_a_window_of_blocks_at_a_time_equals_the_simpy_run(monkeypatch, nodes, gpus,
                                                                        inter, reduce_cost):
    # The inter-host ring runs as blocks of one to two steps on every rail side by side
    # (Blocks.apart), between the intra-host phases (Blocks.sequence).
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 2 * nodes)
    scenario = {"topology": {"preset": "dgx_h100", "nodes": nodes, "gpus_per_node": gpus},
                "algorithms": ["hierarchical"], "sizes": [4 * 3001], "execution": "ideal",
                "algorithm_options": {"hierarchical": {"inter": inter}}}
    if reduce_cost:
        scenario["gpu"] = {"reduce_bandwidth": "100GB/s", "launch_latency": "2us"}
    setup = prepare(scenario_from_dict(scenario))
    blocks = setup.algorithms[0].in_blocks(Group.whole(setup.machine, 3001, 4))
    assert blocks.count > 1 if inter == "ring" and nodes > 2 else blocks.count == 1
    simpy = run_point({**scenario, "engine": "simpy"}, "hierarchical", 4 * 3001)
    vector = run_point({**scenario, "engine": "vector"}, "hierarchical", 4 * 3001)
    assert vector.engine == "vector" and vector.verified and simpy.verified
    assert vector.sim_time_s == simpy.sim_time_s
    if inter == "ring":  # the closed form is exact where the inter-host algorithm's is
        assert vector.sim_time_s == pytest.approx(vector.model_time_s, rel=1e-12)
    assert vector.messages == simpy.messages


def test_blocks_of_apart_and_sequence_are_built_in_order():
    group = Group(np.arange(4), Span(0, 400), 4)
    blocks = Blocks.apart([split(ring_pass_schedule(group, start=0, steps=6, reducing_steps=3),
                                 4, 1)] * 2)
    blocks.block(0)
    with pytest.raises(AlgorithmError) as caught:
        blocks.block(2)
    assert str(caught.value) == "blocks are built in order: asked for block 2 after 1"


@pytest.mark.parametrize("algorithm", SCHEDULED[Collective.ALLREDUCE])
def test_any_schedule_cut_into_blocks_runs_as_it_does_whole(algorithm):
    # Blocks of 5 or more messages, all loadable at the start (reach = every block): the window's
    # growing, dropping and follower lists (several followers per message: trees, markers) must
    # not change a time or an element.
    scenario = scenario_from_dict({"topology": {"preset": "dgx_h100", "nodes": 2,
                                                "gpus_per_node": 3},
                                   "algorithms": [algorithm], "sizes": [4 * 999],
                                   "execution": "ideal", "piece_size": 1024})
    setup = prepare(scenario, select=False)
    payload = Payload(999, 999, np.dtype("float32"))
    schedule = scenario.algorithm(algorithm).scheduled(Group.whole(setup.machine, 999, 4, 1024))
    inputs = make_inputs(np.random.default_rng(3), 6, payload, ReduceOp.SUM)
    whole, cut = inputs.copy(), inputs.copy()
    expected = run_schedule(schedule, setup.machine, payload, ReduceOp.SUM, whole, algorithm)
    # cut only where no pointer crosses forward (tree receives are not in index order)
    reach = np.maximum.accumulate(np.max([schedule.posted_after, schedule.connection_previous,
                                          schedule.receive_previous], axis=0))
    cuts = [0]
    for c in np.flatnonzero(reach < np.arange(1, schedule.size + 1)).tolist():
        if c + 1 - cuts[-1] >= 5 or c + 1 == schedule.size:
            cuts.append(c + 1)
    assert len(cuts) > 2  # two blocks at least

    def block(k):  # the switch endpoints of nvls_tree's in-switch rounds with every block
        return Schedule(**{name: getattr(schedule, name)[cuts[k]:cuts[k + 1]] for name in ARRAYS},
                        switches=schedule.switches)

    blocks = Blocks(len(cuts) - 1, schedule.size, len(cuts), block)
    timing = run_schedule(blocks, setup.machine, payload, ReduceOp.SUM, cut, algorithm)
    assert timing.time_s == expected.time_s and timing.messages == expected.messages
    np.testing.assert_array_equal(cut, whole)


def _switch(ranks):
    return prepare(scenario_from_dict({"topology": {"kind": "switch", "ranks": ranks,
                                                    "bandwidth": "1GB/s", "latency": "1us"},
                                       "sizes": [4]}), select=False).machine


def test_a_sequence_of_blocks_queues_behind_each_connections_chain_end(monkeypatch):
    # Phase A sends m1 before m0 on 0 -> 1 (m0 waits behind m1): the next phase's first message
    # on that connection must queue behind m0, the chain's end, though m1 has the larger index.
    # Found by review.
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 2)
    a = lambda *values: np.array(values, dtype=np.int64)  # noqa: E731
    first = Schedule(a(0, 0, 1), a(1, 1, 0), a(0, 900, 0), a(900, 910, 1), a(0, 900, 0),
                     a(900, 910, 1), np.zeros(3, dtype=bool), a(-1, -1, -1), a(1, -1, -1),
                     a(1, -1, -1))
    group = Group(np.arange(2), Span(0, 1000), 4)
    blocks = Blocks.sequence([first, ring_pass_blocks(group, start=0, steps=2, reducing_steps=1)], 2)
    whole = Schedule.sequence([first, ring_pass_schedule(group, start=0, steps=2,
                                                         reducing_steps=1)], 2)
    assert blocks.count == 3 and blocks.schedule().connection_previous[3] == 0
    payload = Payload(1000, 1000, np.dtype("float32"))
    times = [run_schedule(s, _switch(2), payload, ReduceOp.SUM,
                          np.ones((2, 1000), dtype=np.float32), "x").time_s
             for s in (blocks, blocks.schedule(), whole)]
    assert times[0] == times[1] == times[2]


def test_a_sequence_after_parts_that_end_apart_reaches_back_over_the_whole_phase(monkeypatch):
    # Two rails side by side, one ending after one block, the other after four: the phase after
    # them opens on the short rail's last receive, four blocks back. Found by review.
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 1)
    short = ring_pass_blocks(Group(np.array([0, 1]), Span(0, 60), 4), start=0, steps=1,
                             reducing_steps=1)
    long = ring_pass_blocks(Group(np.array([2, 3, 4]), Span(0, 60), 4), start=0, steps=4,
                            reducing_steps=2)
    after = ring_pass_schedule(Group(np.arange(5), Span(0, 60), 4), start=0, steps=4,
                               reducing_steps=0)
    apart = Blocks.apart([short, long])
    assert (apart.count, apart.ends_in_reach) == (4, False)
    blocks = Blocks.sequence([apart, after], 5)
    assert (blocks.count, blocks.reach) == (5, 4)
    payload = Payload(60, 60, np.dtype("float32"))
    windowed, whole = (run_schedule(s, _switch(5), payload, ReduceOp.SUM,
                                    np.ones((5, 60), dtype=np.float32), "x")
                       for s in (blocks, blocks.schedule()))
    assert windowed.time_s == whole.time_s and windowed.messages == whole.messages


def test_remembered_shares_give_the_times_of_shares_solved_anew(monkeypatch):
    # a pipelined tree meets the same sets of flows again and again: rates remembered for a
    # set are the rates solved anew, so the times do not move by a bit when nothing is kept
    scenario = {"topology": {"preset": "dgx_h100", "nodes": 2}, "sizes": [16 << 20],
                "algorithms": ["double_binary_tree", "ring", "nvls_tree"], "engine": "vector"}
    remembered = simulate(scenario)
    monkeypatch.setattr(routes, "SHARES_BYTES", 0)
    monkeypatch.setattr(routes, "WHOLES_BYTES", 0)
    anew = simulate(scenario)
    np.testing.assert_array_equal(remembered.sim_time_s, anew.sim_time_s)
    assert remembered.verified.all() and anew.verified.all()


def _known_routes(links: list[list[int]], count: int) -> routes.Routes:
    """A Routes holding only pairs' links (``links[p]``: pair p's route) over ``count`` links."""
    known = routes.Routes.__new__(routes.Routes)
    known.count = np.array([len(route) for route in links], dtype=np.int64)
    known.first = np.cumsum(known.count) - known.count
    known.links = np.array([link for route in links for link in route], dtype=np.int64)
    known.capacity = np.ones(count)
    known._table = known._crossers = None
    return known


def _grown(dirty: np.ndarray, table: np.ndarray) -> np.ndarray:
    """The component as the engine grew it before it kept its routes' crossers: every round
    over every row of the routed pairs' padded table."""
    reached = np.append(dirty, False)
    touched = np.zeros(len(table), dtype=bool)
    while True:
        new = routes.rows_any(reached[table]) & ~touched
        if not new.any():
            return touched
        touched |= new
        if 2 * int(np.count_nonzero(touched)) > len(table):
            return np.ones(len(table), dtype=bool)
        reached[table[new]] = True
        reached[-1] = False


def _component(dirty: np.ndarray, known: routes.Routes, routed: np.ndarray,
               reach: flows.Reach | None = None, compiled: bool = False) -> list[bool]:
    """Which of the ``routed`` pairs (one flow on each) the component of ``dirty`` holds
    (``compiled``: walked in numba's loops)."""
    copies = np.zeros(len(known.count), dtype=np.int64)
    copies[routed] = 1
    touched = (reach or flows.Reach()).component(dirty, known, copies, len(routed), compiled)
    assert touched.tolist() == sorted(set(touched.tolist()))  # sorted, each pair once
    mask: list[bool] = np.isin(routed, touched).tolist()
    return mask


def test_a_component_is_every_route_linked_to_a_changed_link():
    # routes 0-1 share link 1, routes 2-3 share link 5, route 4 is alone on link 7
    known = _known_routes([[0, 1], [1, 2], [4, 5], [5, 6], [7]], 8)
    routed = np.arange(5)
    dirty = np.zeros(8, dtype=bool)
    dirty[2] = True  # route 1's link: route 0 shares link 1 with it
    reach = flows.Reach()  # one scratch across calls, as a run keeps it
    assert _component(dirty, known, routed, reach) == [True, True, False, False, False]
    dirty[:] = False
    dirty[6] = True
    assert _component(dirty, known, routed, reach) == [False, False, True, True, False]
    # only routed pairs join: without route 2, link 6 reaches route 3 alone
    assert _component(dirty, known, np.array([0, 1, 3, 4]), reach) == [
        False, False, True, False]
    assert known.crossers(np.array([5, 1])).tolist() == [2, 3, 0, 1]


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("seed", range(20))
def test_a_component_grown_from_its_crossers_is_the_one_grown_over_every_row(seed, compiled):
    # random routes of 1-5 links over 40 links, random routed pairs and changed links: the
    # crossers' layers give the old rounds' components, the "more than half: all" rule
    # included; in numpy and compiled (the fast extra)
    assert (flows.compiled_component() is not None) or not compiled, "numba is missing"
    rng = np.random.default_rng(seed)
    known = _known_routes([rng.choice(40, size=rng.integers(1, 6), replace=False).tolist()
                           for _ in range(60)], 40)
    reach = flows.Reach()  # the stamps of one call must not leak into the next
    for _ in range(20):
        routed = np.flatnonzero(rng.random(60) < rng.uniform(0.1, 0.9))
        dirty = rng.random(40) < rng.uniform(0.0, 0.1)
        assert _component(dirty, known, routed, reach, compiled) == _grown(
            dirty, known.table(routed)).tolist()


@pytest.mark.parametrize("width", [0, 1, 2, 3, 4, 8, 16])
def test_rows_any_reads_rows_as_words_as_any_does(width):
    rng = np.random.default_rng(width)
    mask = rng.random((50, width)) < 0.1
    assert routes.rows_any(mask).tolist() == mask.any(axis=1).tolist()


def test_the_table_of_routes_holds_the_links_of_each_pair_in_order(monkeypatch):
    # links_of reads the padded table: the same links, in the same order, as the slices of
    # the routes' concatenated links
    scenario = {"topology": {"preset": "dgx_h100", "nodes": 2}, "sizes": [1 << 20],
                "algorithms": ["ring"], "engine": "vector"}
    seen: list[routes.Routes] = []
    original = routes.Routes.links_of

    def spy(self, pairs):
        seen.append(self)
        return original(self, pairs)

    monkeypatch.setattr(routes.Routes, "links_of", spy)
    simulate(scenario)
    known = seen[-1]
    pairs = np.arange(len(known.count))[::-1]
    sliced = known.links[ranges(known.first[pairs], known.count[pairs])]
    assert known.links_of(pairs).tolist() == sliced.tolist()
    assert (known.table(pairs) == len(known.capacity)).sum(axis=1).tolist() == (
        known.table(pairs).shape[1] - known.count[pairs]).tolist()


def test_the_flows_counted_as_they_join_and_leave_are_the_active_flows(monkeypatch):
    # Flows keeps each pair's flow count and the set's fingerprint as flows join and leave
    # (afresh after a renumbering): at every re-share they are those of the active flows
    checked = []
    original = flows.Flows._reshare

    def check(self, now):
        original(self, now)
        if len(self.active) and not self.stale:
            pair = self.held.pair[self.active]
            counted = np.bincount(pair, minlength=len(self.copies))
            assert self.copies.tolist() == counted.tolist()
            assert self.fingerprint == int(self.routes.weight[pair].sum())
            checked.append(now)

    monkeypatch.setattr(flows.Flows, "_reshare", check)
    calls: list[str] = []

    def counting(name, method):
        def counted(self, *args):
            calls.append(name)
            method(self, *args)
        return counted

    for name in ("renumber", "shift"):
        monkeypatch.setattr(flows.Flows, name, counting(name, getattr(flows.Flows, name)))
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 64)  # a step a block
    for scenario in (  # a window dropping blocks; steady jumps (Flows.shift); NVLS's sharing
            {"topology": {"kind": "switch", "ranks": 64, "bandwidth": "25GB/s",
                          "latency": "1us"}, "algorithms": ["ring"], "sizes": [1 << 20]},
            {"topology": {"kind": "switch", "ranks": 8, "bandwidth": "25GB/s", "latency": "1us"},
             "algorithms": ["tree"], "sizes": [64 << 20], "fast_forward": True},
            {"topology": {"preset": "dgx_h100", "nodes": 2}, "sizes": [64 << 20],
             "algorithms": ["nvls_tree"]}):
        assert simulate({**scenario, "engine": "vector"}).verified.all()
    assert len(checked) > 500 and calls.count("renumber") > 100 and "shift" in calls


def test_re_sharing_the_touched_component_gives_the_times_of_re_sharing_all(monkeypatch):
    # the kernel gives a component alone the rates it gets among every flow, to the bit
    scenario = {"topology": {"preset": "dgx_h100", "nodes": 2}, "sizes": [16 << 20],
                "algorithms": ["double_binary_tree", "ring", "nvls_tree"], "engine": "vector"}
    touched = simulate(scenario)
    monkeypatch.setattr(flows.Reach, "component",
                        lambda self, dirty, known, copies, busy, compiled: np.flatnonzero(copies))
    everything = simulate(scenario)
    np.testing.assert_array_equal(touched.sim_time_s, everything.sim_time_s)


def test_a_run_shares_the_same_compiled_as_in_numpy(monkeypatch):
    # the fast extra's loops on every re-share (a large fabric from 0 pairs) against numpy
    # alone (numba hidden): the same rows (times, bottleneck links, events), to the bit
    scenario = {"topology": {"preset": "dgx_h100", "nodes": 2}, "sizes": [16 << 20],
                "algorithms": ["ring", "double_binary_tree", "nvls_tree", "direct"],
                "engine": "vector"}
    with monkeypatch.context() as patched:
        patched.setattr(compiled, "LARGE_FABRIC_PAIRS", 0)
        walked: list[int] = []
        walk = compiled.compiled_component()
        assert walk is not None, "numba is missing: install the test extra"
        patched.setattr(flows, "compiled_component",
                        lambda: lambda *args: walked.append(1) or walk(*args))
        loops = simulate(scenario)
    assert len(walked) > 100
    monkeypatch.setattr(flows, "compiled_component", lambda: None)
    monkeypatch.setattr(kernel, "compiled_filling", lambda: None)
    alone = simulate(scenario)
    pd.testing.assert_frame_equal(loops, alone, check_exact=True)


def test_a_long_run_on_a_small_fabric_walks_compiled_from_its_threshold(monkeypatch):
    # compiled.wanted: a fabric of few pairs takes numba's loops from the run's
    # LONG_RUN_RESHARES-th re-share (here the 50th) on, never before; the rows are those of
    # numpy alone (numba hidden), to the bit
    assert not compiled.wanted(compiled.LARGE_FABRIC_PAIRS - 1, compiled.LONG_RUN_RESHARES - 1)
    assert compiled.wanted(compiled.LARGE_FABRIC_PAIRS, 0)
    assert compiled.wanted(1, compiled.LONG_RUN_RESHARES)
    scenario = {"topology": {"preset": "dgx_h100", "nodes": 4}, "sizes": [256 << 20],
                "algorithms": ["double_binary_tree"], "engine": "vector"}  # ~600 re-shares
    walk = compiled.compiled_component()
    assert walk is not None, "numba is missing: install the test extra"
    counts: list[int] = []  # the run's re-shares so far, after each
    reshare = flows.Flows._reshare

    def counting(self, now):
        reshare(self, now)
        counts.append(self.reshares)

    fill = compiled.compiled_filling()
    assert fill is not None
    walked: list[int] = []
    filled: list[int] = []
    with monkeypatch.context() as patched:
        patched.setattr(compiled, "LONG_RUN_RESHARES", 50)
        patched.setattr(flows.Flows, "_reshare", counting)
        patched.setattr(flows, "compiled_component",
                        lambda: lambda *args: walked.append(1) or walk(*args))
        patched.setattr(kernel, "compiled_filling",
                        lambda: lambda *args: filled.append(1) or fill(*args))
        loops = simulate(scenario)  # one point: one run, whose counts go up from 1
    assert counts[-1] > 100 and len(walked) == counts[-1] - 49
    assert len(filled) > 50  # the sets met for the first time from then on, filled compiled
    monkeypatch.setattr(flows, "compiled_component", lambda: None)
    monkeypatch.setattr(kernel, "compiled_filling", lambda: None)
    alone = simulate(scenario)
    pd.testing.assert_frame_equal(loops, alone, check_exact=True)


@pytest.mark.parametrize("fault", [
    {"kind": "link_degraded", "link": ["gpu0", "switch"], "at": "20us", "factor": 0.05,
     "until": "60us", "both": True},
    {"kind": "link_flapping", "link": ["gpu0", "switch"], "at": "20us", "period": "20us",
     "down": "5us", "until": "80us", "both": True},
    {"kind": "link_down", "link": ["pod0.edge0", "pod0.agg0"], "at": "40us", "both": True},
])
def test_capacity_steps_and_reroutes_share_the_same_compiled_as_in_numpy(fault, monkeypatch):
    # the compiled loops on every re-share (a large fabric from 0 pairs) through a degraded
    # link, a flapping one (no capacity while down), and a link down whose pairs take their
    # spare paths: the rows of numpy alone (numba hidden), to the bit
    topology = ({"kind": "fat_tree", "k": 4, "bandwidth": "25GB/s", "latency": "1us"}
                if fault["kind"] == "link_down" else
                {"kind": "switch", "ranks": 8, "bandwidth": "25GB/s", "latency": "1us"})
    scenario = {"topology": topology, "algorithms": ["tree", "ring"], "sizes": ["4MiB"],
                "faults": [fault], "engine": "vector"}
    walk = compiled.compiled_component()
    assert walk is not None, "numba is missing: install the test extra"
    walked: list[int] = []
    with monkeypatch.context() as patched:
        patched.setattr(compiled, "LARGE_FABRIC_PAIRS", 0)
        patched.setattr(flows, "compiled_component",
                        lambda: lambda *args: walked.append(1) or walk(*args))
        loops = simulate(scenario)
    assert walked and "did not act" not in loops.faults[0]
    monkeypatch.setattr(flows, "compiled_component", lambda: None)
    monkeypatch.setattr(kernel, "compiled_filling", lambda: None)
    alone = simulate(scenario)
    pd.testing.assert_frame_equal(loops, alone, check_exact=True)
    if fault["kind"] != "link_down":  # (a link down leaves its pairs an equal spare path)
        assert (loops.sim_time_s > loops.healthy_time_s).any()  # the fault moved a time


def test_the_flows_counts_and_pairs_stay_true_through_window_drops(monkeypatch):
    # a window dropping blocks renumbers the flows' messages but not their pairs: after every
    # re-share the pairs with flows, the counts and each flow's pair are those recounted
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 64)  # a step a block
    checked: list[int] = []
    reshare = flows.Flows._reshare

    def checking(self, now):
        reshare(self, now)
        if not self.stale:
            pair = self.held.pair[self.active]
            assert self.pair.tolist() == pair.tolist()
            counts = np.bincount(pair, minlength=len(self.copies))
            assert self.copies.tolist() == counts[:len(self.copies)].tolist()
            assert self.busy == int(np.count_nonzero(counts))
            checked.append(1)

    monkeypatch.setattr(flows.Flows, "_reshare", checking)
    renumber = flows.Flows.renumber
    dropped: list[int] = []
    monkeypatch.setattr(flows.Flows, "renumber",
                        lambda self, count: dropped.append(count) or renumber(self, count))
    for scenario in ({"topology": {"kind": "switch", "ranks": 64, "bandwidth": "25GB/s",
                                   "latency": "1us"}, "algorithms": ["ring"], "sizes": [1 << 20]},
                     {"topology": {"preset": "dgx_h100", "nodes": 2}, "sizes": [64 << 20],
                      "algorithms": ["nvls_tree", "double_binary_tree"]}):
        assert simulate({**scenario, "engine": "vector"}).verified.all()
    assert len(checked) > 500 and len(dropped) > 100


@pytest.mark.parametrize("collective", ["allreduce", "reduce_scatter", "allgather"])
@pytest.mark.parametrize("fast_forward", [True, False])
def test_channels_a_window_of_blocks_at_a_time_equal_the_simpy_run(monkeypatch, collective,
                                                                   fast_forward):
    # NCCL's four channels of a ring across four hosts, each channel's ring pass cut into
    # blocks of two steps and joined side by side (Blocks.channels): SimPy's times and
    # buffers, with the steady-state fast-forward on and off.
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 2 * 16 * 4)
    scenario = {"topology": {"preset": "dgx_h100", "nodes": 4, "gpus_per_node": 4},
                "collective": collective, "algorithms": ["ring"], "sizes": [4 * 16 * 1001],
                "execution": "nccl", "fast_forward": fast_forward}
    setup = prepare(scenario_from_dict(scenario))
    group = Group.whole(setup.machine, 16 * 1001, 4)
    blocks = blocks_on_channels(setup.algorithms[0], group, setup.machine.layout, 4)
    steps = 30 if collective == "allreduce" else 15
    assert (blocks.count, blocks.size, blocks.reach) == (-(-steps // 2), 4 * 16 * steps, 1)
    simpy = run_point({**scenario, "engine": "simpy"}, "ring", 4 * 16 * 1001)
    vector = run_point({**scenario, "engine": "vector"}, "ring", 4 * 16 * 1001)
    assert (vector.engine, vector.channels, simpy.channels) == ("vector", 4, 4)
    assert vector.verified and simpy.verified
    assert vector.sim_time_s == simpy.sim_time_s
    assert vector.messages == simpy.messages == 4 * 16 * steps


@pytest.mark.parametrize("ranks", [16, 32, 64])
def test_a_window_of_channels_holds_a_few_blocks_however_large_the_ring(monkeypatch, ranks):
    # Four channels on a switch, 256 messages a joined block (each channel's ring pass its
    # quarter, whole steps): the window holds at most four joined blocks, whatever the ring's
    # 2(p-1)p messages a channel.
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 256)
    setup = prepare(scenario_from_dict({"topology": {"kind": "switch", "ranks": ranks,
                                                     "bandwidth": "25GB/s", "latency": "1us"},
                                        "sizes": [4 * 64 * ranks]}), select=False)
    payload = Payload(64 * ranks, 64 * ranks, np.dtype("float32"))
    inputs = make_inputs(np.random.default_rng(0), ranks, payload, ReduceOp.SUM)
    buffers = inputs.copy()
    group = Group(np.arange(ranks), Span(0, 64 * ranks), 4)
    blocks = blocks_on_channels(RingAllreduce(), group, setup.machine.layout, 4)
    assert blocks.reducing_threads == schedule_on_channels(
        RingAllreduce(), group, setup.machine.layout, 4).reducing_threads == 4
    timing = run_schedule(blocks, setup.machine, payload, ReduceOp.SUM, buffers, "ring")
    assert timing.messages == 4 * 2 * (ranks - 1) * ranks
    assert timing.held <= 4 * 256  # a block ahead, the one running, the received not dropped
    np.testing.assert_array_equal(buffers, np.broadcast_to(inputs.sum(axis=0), buffers.shape))


@pytest.mark.parametrize("name, topology", [
    ("ring", {"preset": "dgx_h100", "nodes": 3, "gpus_per_node": 4}),
    ("hierarchical", {"preset": "dgx_h100", "nodes": 5, "gpus_per_node": 2}),
    ("bucket", {"kind": "torus", "dims": [3, 4], "bandwidth": "25GB/s", "latency": "1us"})])
@pytest.mark.parametrize("channels", [2, 3])
def test_every_windowed_algorithm_on_channels_equals_the_simpy_run(monkeypatch, name, topology,
                                                                   channels):
    # Blocks of one ring step a channel: the channels' blocks joined (Blocks.channels), a
    # phase's first message on a connection following one many blocks back (bucket's
    # allgather after its reduce-scatter along the same lines).
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 8)
    scenario = scenario_from_dict({"topology": topology, "algorithms": [name],
                                   "sizes": [4 * 3001], "execution": "ideal"})
    setup = prepare(scenario, select=False)
    blocks = blocks_on_channels(scenario.algorithm(name),
                                Group.whole(setup.machine, 3001, 4),
                                setup.machine.layout, channels)
    assert blocks.count > 1
    simpy, vector, simpy_buffers, vector_buffers = both_engines(scenario, channels, windowed=True)
    assert vector.time_s == simpy.time_s
    assert vector.messages == simpy.messages
    assert vector.held < vector.messages
    np.testing.assert_array_equal(vector_buffers, simpy_buffers)


def test_a_run_lets_go_of_its_window_when_it_returns(monkeypatch):
    # The window's callbacks refer back to the run: once it is over, the run, its window and
    # its data are freed by their references alone, not left for the cyclic garbage collector
    # (which held a point's run into the next one's).
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 8)
    setup = prepare(scenario_from_dict({"topology": {"kind": "switch", "ranks": 4,
                                                     "bandwidth": "25GB/s", "latency": "1us"},
                                        "sizes": [64]}), select=False)
    payload = Payload(16, 16, np.dtype("float32"))
    blocks = RingAllreduce().blocks(Group(np.arange(4), Span(0, 16), 4))
    assert blocks.count > 1
    gc.collect()
    gc.disable()
    try:
        run = vector._Run(blocks, setup.machine, payload, ReduceOp.SUM,
                          np.zeros((4, 16), dtype=np.float32), "ring")
        held = weakref.ref(run.held)
        assert run.run().messages == 24
        del run
        assert held() is None
    finally:
        gc.enable()
