"""Schedules traced from programs (simulator.algorithms.trace): every hand-written builder is the
trace of its algorithm's program, array for array (in the trace's canonical numbering), at small
p, odd p, uneven chunks, pipeline pieces, streams and channels; the trace's op kinds by hand; and
NVLS, which has only its trace, run by the vectorised engine to the SimPy engine's times."""

import dataclasses

import numpy as np
import pytest

from simulator import simulate
from simulator.algorithms import REGISTRY, Collective, Comm
from simulator.algorithms.algorithm import Algorithm
from simulator.algorithms.channels import on_channels, schedule_on_channels
from simulator.algorithms.comm import COPY, Outbox
from simulator.algorithms.schedule import ARRAYS, NONE, Group, Op, SwitchEnd
from simulator.algorithms.trace import canonical, trace, trace_program, wave_levels
from simulator.engine.payload import Payload, make_inputs
from simulator.engine.run import RunSpec, run_collective
from simulator.engine.vector import declines, run_schedule
from simulator.errors import AlgorithmError
from simulator.model.machine import Layout
from simulator.model.reduction import ReduceOp
from simulator.model.span import Span
from simulator.runner import prepare, run_point
from simulator.scenario import scenario_from_dict

BUILT = [(collective, name) for collective in Collective
         for name, algorithm in REGISTRY[collective].items() if algorithm.has_builder()]


def assert_same(built, traced):
    """The two schedules, canonically numbered, are equal array for array."""
    want, got = canonical(traced), canonical(built)
    assert want.keys() == got.keys()
    for name, value in want.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(got[name], value, err_msg=name)
        else:
            assert got[name] == value, name


HAND_BUILT = {
    Collective.ALLREDUCE: {"ring", "hierarchical", "nvls_tree", "direct", "two_shot",
                           "halving_doubling", "recursive_doubling", "binomial_tree", "tree",
                           "double_binary_tree", "bucket"},
    Collective.REDUCE_SCATTER: {"ring", "direct", "halving_doubling"},
    Collective.ALLGATHER: {"ring", "direct", "recursive_doubling"},
    Collective.BROADCAST: {"ring", "direct", "binomial_tree", "tree"},
    Collective.REDUCE: {"ring", "direct", "binomial_tree", "tree"},
    Collective.ALLTOALL: {"direct"},
    Collective.SENDRECV: {"direct"},
}
"""The algorithms with a hand-written builder: none may lose it unnoticed (a subclass that
rewrites its program loses its parent's, Algorithm.has_builder), which would leave it on the
SimPy engine under ``engine: auto``. The others run on their program's trace, as a new
algorithm may (docs/writing-an-algorithm.md): today nvls, pat, the CollNet ones, swing, bine,
pairwise, one_shot and two_shot_multicast (one node: no scale to build for)."""


@pytest.mark.registry
def test_no_algorithm_loses_its_builder():
    for collective in Collective:
        built = {name for c, name in BUILT if c is collective}
        assert HAND_BUILT.get(collective, set()) <= built, collective


FLAT = [(collective, name) for collective, name in BUILT
        if name not in ("hierarchical", "bucket", "nvls_tree")]  # hosts, a torus, NVSwitches: below


@pytest.mark.parametrize("collective, name", FLAT, ids=[f"{c.value}-{n}" for c, n in FLAT])
def test_a_builder_is_the_trace_of_its_program(collective, name):
    # p = 2 .. 8, powers of two and not; 7·p + 3 elements (chunks of unequal sizes) and 1000;
    # one piece per span, or 64-byte pieces; allreduces on 1 to 3 channels (two hosts from
    # p = 4, so that each channel rotates each host's ranks). Members in a shuffled order on a
    # span that does not start at 0, as a subgroup's.
    algorithm = REGISTRY[collective][name]
    channels = (1, 2, 3) if collective is Collective.ALLREDUCE else (1,)
    for p in (2, 3, 4, 5, 8):
        members = np.random.default_rng(p).permutation(p + 2)[:p]
        hosts = np.arange(p) * 2 // p if p >= 4 else np.zeros(p, dtype=np.int64)
        layout = Layout(tuple(hosts.tolist()))
        step = algorithm.whole_chunks(p)  # an all-to-all's p equal blocks: counts rounded up
        for count in (-(-(7 * p + 3) // step) * step, -(-1000 // step) * step):
            for piece_bytes in (None, 64):
                group = Group(members, Span(5, 5 + count), 4, piece_bytes)
                for c in channels:
                    whole = Group(np.arange(p), Span(0, count), 4, piece_bytes, hosts)
                    built = schedule_on_channels(algorithm, whole, layout, c)
                    traced = trace_program(
                        whole, lambda comm, c=c: on_channels(algorithm, comm, c), name)
                    assert_same(built, traced)
                assert_same(algorithm.scheduled(group), trace(algorithm, group))
                assert_same(algorithm.in_blocks(group).schedule(), trace(algorithm, group))


def test_a_ring_cut_into_blocks_is_the_trace_of_its_program(monkeypatch):
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 5)  # a step a block
    for collective in (Collective.ALLREDUCE, Collective.REDUCE_SCATTER, Collective.ALLGATHER):
        group = Group(np.array([3, 1, 4, 0, 2]), Span(7, 7 + 41), 4)
        blocks = REGISTRY[collective]["ring"].in_blocks(group)
        assert blocks.count > 1
        assert_same(blocks.schedule(), trace(REGISTRY[collective]["ring"], group))


def machine_group(topology, count, piece_bytes=None, stream_bytes=None):
    scenario = scenario_from_dict({"topology": topology, "sizes": [4 * count]})
    machine = prepare(scenario, select=False).machine
    return machine, Group.whole(machine, count, 4, piece_bytes, stream_bytes)


@pytest.mark.parametrize("inter", ["ring", "tree", "double_binary_tree", "halving_doubling",
                                   "direct", "recursive_doubling", "binomial_tree"])
def test_hierarchical_is_the_trace_of_its_program(inter, monkeypatch):
    # 2 and 3 hosts of 3 GPUs; whole, or streamed in 1 KiB pieces (three phases at once on
    # channels of their own, joined per tick); one piece per chunk or 64-byte pipeline pieces; the
    # inter-host ring also a block at a time.
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 2)
    algorithm = REGISTRY[Collective.ALLREDUCE]["hierarchical"].configured(
        dataclasses.replace(REGISTRY[Collective.ALLREDUCE]["hierarchical"].options,
                            inter=REGISTRY[Collective.ALLREDUCE][inter]))
    for nodes in (2, 3):
        for stream_bytes in (None, 1024):
            for piece_bytes in (None, 64):
                _, group = machine_group({"preset": "dgx_h100", "nodes": nodes,
                                          "gpus_per_node": 3}, 1001, piece_bytes, stream_bytes)
                assert_same(algorithm.in_blocks(group).schedule(), trace(algorithm, group))


def assert_identical(built, traced):
    """The two schedules are equal array for array as numbered, threads, switch endpoints and
    reducing threads too: not only the same program (:func:`assert_same`) but the same
    numbering, by which the vectorised engine orders what happens at one instant."""
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(built, name), getattr(traced, name), err_msg=name)
    assert (built.thread is None) == (traced.thread is None)
    if traced.thread is not None:
        np.testing.assert_array_equal(built.thread, traced.thread)
    assert (built.switches, built.reducing_threads) == (traced.switches, traced.reducing_threads)


@pytest.mark.parametrize("nodes", [2, 3, 4])
def test_nvls_tree_is_the_trace_of_its_program(nodes):
    # 2, 3 and 4 hosts (two trees of depth 1 and 2; an odd count shifts the second tree) of 2,
    # 3 and 8 GPUs; one piece per chunk, and 64-byte pieces of uneven chunks: the last partial,
    # and at the largest count 19 or 20 a chunk, more than WINDOW + 1, so that the scatter
    # waits for the gather. Its builder numbers its ops as the trace does (assert_identical).
    algorithm = REGISTRY[Collective.ALLREDUCE]["nvls_tree"]
    for gpus in (2, 3, 8):
        for count, piece_bytes in ((1001, None), (1001, 64), (614 * gpus + 5, 64)):
            _, group = machine_group({"preset": "dgx_h100", "nodes": nodes,
                                      "gpus_per_node": gpus}, count, piece_bytes)
            built, traced = algorithm.in_blocks(group).schedule(), trace(algorithm, group)
            assert_same(built, traced)
            assert_identical(built, traced)


def test_nvls_tree_builds_any_group_as_its_trace():
    # members in a shuffled order, hosts numbered out of order and interleaved, a span that does
    # not start at 0, one host (no tree) and hosts of one GPU, an empty buffer; no machine, so
    # each host's rounds in one switch
    algorithm = REGISTRY[Collective.ALLREDUCE]["nvls_tree"]
    rng = np.random.default_rng(5)
    for hosts, local in ((1, 3), (2, 2), (3, 2), (5, 1), (6, 2)):
        p = hosts * local
        where = rng.permutation(np.repeat(np.arange(hosts), local)) * 3 + 1
        members = rng.permutation(p + 3)[:p]
        for count, piece_bytes in ((7 * p + 3, None), (7 * p + 3, 8), (0, None)):
            group = Group(members, Span(5, 5 + count), 4, piece_bytes, where)
            assert_identical(algorithm.schedule(group), trace(algorithm, group))


def test_nvls_tree_on_channels_is_the_trace_up_to_its_switches_numbering():
    # Channels are the builder's schedules side by side (Schedule.concat), their switch
    # endpoints numbered channel by channel, where the trace of on_channels numbers them as its
    # ranks first name them: the same program once each endpoint takes the trace's number.
    algorithm = REGISTRY[Collective.ALLREDUCE]["nvls_tree"]
    for nodes, gpus, channels in ((2, 3, 2), (3, 2, 3)):
        machine, group = machine_group({"preset": "dgx_h100", "nodes": nodes,
                                        "gpus_per_node": gpus}, 1001, 64)
        built = schedule_on_channels(algorithm, group, machine.layout, channels)
        traced = trace_program(group, lambda comm, c=channels: on_channels(algorithm, comm, c),
                               "nvls_tree")
        assert built.switches != traced.switches  # numbered otherwise, not the same ends
        assert_same(_switches_renumbered(built, traced), traced)


def _switches_renumbered(schedule, like):
    """``schedule`` with each switch endpoint numbered as ``like`` numbers the endpoint that
    its uploads and copies down go between the same ranks and spans."""

    def touching(s):
        ends = {}
        for src, dst, start, stop in zip(s.src.tolist(), s.dst.tolist(), s.send_start.tolist(),
                                         s.send_stop.tolist(), strict=True):
            for end, rank, up in ((dst, src, True), (src, dst, False)):
                if end < 0:
                    ends.setdefault(end, set()).add((rank, start, stop, up))
        return {end: frozenset(ops) for end, ops in ends.items()}

    number = {ops: end for end, ops in touching(like).items()}
    mapped = {end: number[ops] for end, ops in touching(schedule).items()}
    assert sorted(mapped.values()) == sorted(mapped)  # one to one, between like endpoints
    assert all(schedule.switches[-1 - end] == like.switches[-1 - to] for end, to in mapped.items())
    relabel = np.vectorize(lambda end: mapped.get(end, end), otypes=[np.int64])
    return dataclasses.replace(schedule, src=relabel(schedule.src), dst=relabel(schedule.dst),
                               switches=like.switches)


@pytest.mark.parametrize("dims", [[2, 3], [3, 3], [2, 2, 2]])
def test_bucket_is_the_trace_of_its_program(dims):
    for piece_bytes in (None, 64):
        _, group = machine_group({"kind": "torus", "dims": dims, "bandwidth": "25GB/s",
                                  "latency": "1us"}, 1001, piece_bytes)
        algorithm = REGISTRY[Collective.ALLREDUCE]["bucket"]
        assert_same(algorithm.in_blocks(group).schedule(), trace(algorithm, group))


def test_the_canonical_form_tells_a_changed_pointer():
    group = Group(np.arange(4), Span(0, 64), 4)
    schedule = REGISTRY[Collective.ALLREDUCE]["ring"].scheduled(group)
    for name in ("posted_after", "connection_previous", "receive_previous"):
        pointers = getattr(schedule, name).copy()
        pointers[pointers.argmax()] = NONE
        changed = canonical(dataclasses.replace(schedule, **{name: pointers}))
        assert not np.array_equal(changed[name], canonical(schedule)[name])


# --- op kinds by hand ------------------------------------------------------------------------


def arrays(schedule):
    return {name: getattr(schedule, name).tolist() for name in (
        "src", "dst", "send_start", "send_stop", "recv_start", "recv_stop", "reduce",
        "posted_after", "connection_previous", "receive_previous")}


def test_nvls_traces_to_uploads_and_copies_down():
    # 3 ranks, 2 pieces of 4 elements. Uploads (dst -1: the group's switch) of piece j from
    # ranks 0, 1, 2 chain in that order (receive_previous), each behind the rank's upload
    # before it; the copies down of piece j (src -1) are posted after rank 2's upload of it,
    # each behind the copy before it down the same link, received in the rank's order. By
    # level: 0 U(0,0); 1 U(0,1) U(1,0); 2 U(1,1) U(2,0); 3 D(0,0) D(1,0) U(2,1) D(2,0);
    # 4 D(0,1) D(1,1) D(2,1).
    group = Group(np.arange(3), Span(0, 8), 4, piece_bytes=16)
    schedule = trace(REGISTRY[Collective.ALLREDUCE]["nvls"], group)
    assert schedule.switches == (SwitchEnd((0, 1, 2)),)
    up, down = Op.SWITCH_UPLOAD, Op.SWITCH_COPY_DOWN
    assert schedule.kinds.tolist() == [up] * 5 + [down, down, up] + [down] * 4
    piece = [0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 1, 1]
    assert arrays(schedule) == {
        "src": [0, 0, 1, 1, 2, -1, -1, 2, -1, -1, -1, -1],
        "dst": [-1, -1, -1, -1, -1, 0, 1, -1, 2, 0, 1, 2],
        "send_start": [4 * j for j in piece], "send_stop": [4 * j + 4 for j in piece],
        "recv_start": [4 * j for j in piece], "recv_stop": [4 * j + 4 for j in piece],
        "reduce": [False] * 12,
        "posted_after": [-1, -1, -1, -1, -1, 4, 4, -1, 4, 7, 7, 7],
        "connection_previous": [-1, 0, -1, 2, -1, -1, -1, 4, -1, 5, 6, 8],
        "receive_previous": [-1, -1, 0, 1, 2, -1, -1, 3, -1, 5, 6, 8]}
    assert schedule.reducing_threads == 1 and schedule.thread is None


class LocalThenSend(Algorithm):
    """Rank 0 folds the second half of its buffer into the first, then sends the first half to
    rank 1, which copies it in; two branches of rank 1 receive at once, joined before a last
    receive (a made-up program, to show local reduces and join markers)."""

    name = "local_then_send"
    collective = Collective.ALLREDUCE

    def program(self, comm: Comm):
        first, second = comm.chunks(2)
        if comm.rank == 0:
            yield comm.reduce(into=first, source=second)
            comm.send(1, first)
            comm.on_channel(1).send(1, second)
            comm.on_channel(2).send(1, second)
        else:
            yield comm.recv(0, into=first, combine=COPY)
            yield comm.parallel(self.branch(comm.on_channel(1), second),
                                self.branch(comm.on_channel(2), second))
            yield comm.recv(0, into=first, combine=COPY)

    def branch(self, comm: Comm, span: Span):
        yield comm.recv(0, into=span)

    def model_s(self, cost, count):
        return 0.0


def test_a_local_reduce_is_an_op_from_a_rank_to_itself_and_a_join_a_marker():
    group = Group(np.arange(2), Span(0, 8), 4)
    with pytest.raises(AlgorithmError, match=r"deadlock: ranks \[1\]"):
        trace(LocalThenSend(), group)  # the last receive's message is never sent
    schedule = trace_program(group, lambda comm: _and_last(LocalThenSend(), comm), "local")
    assert arrays(schedule) == {
        "src": [0, 0, 0, 0, 1, 0],          # local reduce, message, 2 branches, marker, last
        "dst": [0, 1, 1, 1, 1, 1],
        "send_start": [4, 0, 4, 4, 0, 0], "send_stop": [8, 4, 8, 8, 0, 4],
        "recv_start": [0, 0, 4, 4, 0, 0], "recv_stop": [4, 4, 8, 8, 0, 4],
        "reduce": [True, False, True, True, False, False],
        "posted_after": [-1, 0, 0, 0, 2, 0],
        "connection_previous": [-1, -1, -1, -1, -1, 1],
        "receive_previous": [-1, -1, 1, 1, 3, 4]}
    assert schedule.reducing_threads == 2  # the two branches reduce at once
    assert schedule.kinds.tolist() == [Op.LOCAL_REDUCE, *[Op.MESSAGE] * 3, Op.JOIN, Op.MESSAGE]


def _and_last(algorithm, comm):
    """The program, with rank 0 sending the last receive's message at the end."""
    yield from algorithm.program(comm)
    if comm.rank == 0:
        comm.send(1, comm.chunks(2)[0])


def waits_for_each_other(comm):
    yield comm.recv(1 - comm.rank, Span(0, 4))


def sends_more_than_received(comm):
    if comm.rank == 0:
        yield comm.recv(1, Span(0, 2))
    else:
        comm.send(0, Span(0, 4))


def sends_twice(comm):
    if comm.rank == 0:
        yield comm.recv(1, Span(0, 4))
    else:
        comm.send(0, Span(0, 4))
        comm.send(0, Span(0, 4))


class FoldPassFold(Algorithm):
    """Fold the second half of the buffer into the first (a local reduce), send it to the right
    while reducing the left neighbour's into the second half, then fold again: local reduces
    on both sides of a message, on one thread."""

    name = "fold_pass_fold"
    collective = Collective.ALLREDUCE

    def program(self, comm: Comm):
        first, second = comm.chunks(2)
        yield comm.reduce(into=first, source=second)
        comm.send((comm.rank + 1) % comm.size, first)
        yield comm.recv((comm.rank - 1) % comm.size, into=second)
        yield comm.reduce(into=first, source=second)

    def model_s(self, cost, count):
        return 0.0


def test_local_reduces_take_the_simpy_engines_time_on_the_vectorised_engine():
    # 4 ranks on a switch (2 hops of 1 µs at 25 GB/s), a GPU reducing at 40 GB/s after a 1 µs
    # launch; halves of 2048 float32 (8192 B): fold g, pass alpha + h·beta, reduce g, fold g.
    scenario = scenario_from_dict({
        "topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s", "latency": "1us"},
        "sizes": [16384], "gpu": {"reduce_bandwidth": "40GB/s", "launch_latency": "1us"}})
    machine = prepare(scenario, select=False).machine
    payload = Payload.for_size(16384, scenario.dtype, 4, 4096, None, 1)
    inputs = make_inputs(np.random.default_rng(2), 4, payload, scenario.reduce_op)
    simpy_buffers, vector_buffers = inputs.copy(), inputs.copy()
    simpy = run_collective(FoldPassFold(), machine, RunSpec(payload, scenario.reduce_op),
                           simpy_buffers)
    blocks = FoldPassFold().in_blocks(Group.whole(machine, payload.count, 4))
    assert declines(blocks, machine, asked=True) is None
    vector = run_schedule(blocks, machine, payload, scenario.reduce_op, vector_buffers, "fold")
    g = 1e-6 + 8192 / 40e9
    assert simpy.time_s == pytest.approx(3 * g + 2e-6 + 8192 / 25e9, rel=1e-12)
    assert vector.time_s == simpy.time_s and vector.messages == simpy.messages == 4
    np.testing.assert_array_equal(vector_buffers, simpy_buffers)


@pytest.mark.parametrize("program, message", [
    (waits_for_each_other, "deadlock: ranks [0, 1] wait for messages that are never sent:\n"
                           "  rank 0 waits for message 1 from rank 1 on channel 0 (elements 0 "
                           "to 4)\n"
                           "  rank 1 waits for message 1 from rank 0 on channel 0 (elements 0 "
                           "to 4)"),
    (sends_more_than_received, "rank 0 received 4 elements from rank 1 into a span of 2"),
    (sends_twice, "rank 1 sent 1 message(s) never received (first to rank 0)")])
def test_programs_that_cannot_run_are_algorithm_errors(program, message):
    # the SimPy engine's words for the same programs (its deadlocks also say when, and the
    # programs' labels, which a trace does not keep)
    with pytest.raises(AlgorithmError) as caught:
        trace_program(Group(np.arange(2), Span(0, 4), 4), program, "broken")
    assert str(caught.value) == f"broken: {message}"


# --- NVLS on the vectorised engine -----------------------------------------------------------


@pytest.mark.parametrize("size", [1024, 3 << 20 | 12, 64 << 20])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_nvls_runs_on_the_vectorised_engine_with_the_simpy_engines_times(size, op):
    # A DGX H100's NVSwitch: up to the switch in 512 KiB pieces, down again after the
    # reduction latency; each GPU link carries one flow at a time each way, so the two engines
    # do the same floating-point operations and agree to the last bit (==, not approx).
    scenario = scenario_from_dict({"topology": {"preset": "dgx_h100"}, "algorithms": ["nvls"],
                                   "sizes": [size], "op": op})
    machine = prepare(scenario, select=False).machine
    nvls = scenario.algorithm("nvls")
    payload = Payload.for_size(size, scenario.dtype, machine.ranks, 4096, None, 1)
    inputs = make_inputs(np.random.default_rng(1), machine.ranks, payload, scenario.reduce_op)
    simpy_buffers, vector_buffers = inputs.copy(), inputs.copy()
    simpy = run_collective(nvls, machine, RunSpec(payload, scenario.reduce_op), simpy_buffers)
    blocks = nvls.in_blocks(Group.whole(machine, payload.count, 4))
    assert blocks.traced and declines(blocks, machine, asked=True) is None
    vector = run_schedule(blocks, machine, payload, scenario.reduce_op, vector_buffers, "nvls")
    assert vector.time_s == simpy.time_s
    assert vector.messages == simpy.messages == 2 * 8 * -(-size // (512 << 10))
    np.testing.assert_array_equal(vector_buffers, simpy_buffers)


def test_engine_vector_runs_nvls_and_auto_keeps_it_on_simpy():
    scenario = {"topology": {"preset": "dgx_h100"}, "algorithms": ["nvls"],
                "sizes": [4096, 3 << 20]}
    auto, vector = simulate(scenario), simulate({**scenario, "engine": "vector"})
    assert list(auto.engine) == ["simpy"] * 2 and list(vector.engine) == ["vector"] * 2
    np.testing.assert_array_equal(vector.sim_time_s, auto.sim_time_s)
    assert vector.verified.all() and list(vector.messages) == list(auto.messages)


@pytest.mark.parametrize("channels", [2, 3])
def test_nvls_on_channels_runs_on_both_engines_alike(channels):
    # Each channel reduces its own group over connections of its own (one series of rounds per
    # group, as NCCL gives each NVLS head its connections), so the trace orders every
    # connection as the SimPy engine does, and the channels' uploads share each GPU's link.
    scenario = {"topology": {"preset": "dgx_h100"}, "algorithms": ["nvls"],
                "sizes": [3 << 20 | 12], "channels": channels}
    machine, group = machine_group({"preset": "dgx_h100"}, 4096)
    nvls = REGISTRY[Collective.ALLREDUCE]["nvls"]
    schedule = schedule_on_channels(nvls, group, machine.layout, channels)
    assert len(schedule.switches) == channels
    assert declines(schedule, machine, asked=True) is None
    auto, vector = simulate(scenario), simulate({**scenario, "engine": "vector"})
    assert list(auto.engine) == ["simpy"] and list(vector.engine) == ["vector"]
    np.testing.assert_array_equal(vector.sim_time_s, auto.sim_time_s)
    assert vector.verified.all() and list(vector.messages) == list(auto.messages)


def test_switch_ops_the_machine_cannot_run_are_algorithm_errors():
    nvls = REGISTRY[Collective.ALLREDUCE]["nvls"]
    schedule = trace(nvls, Group(np.arange(4), Span(0, 16), 4))
    machine, _ = machine_group({"kind": "switch", "ranks": 4, "bandwidth": "25GB/s",
                                "latency": "1us"}, 16)
    payload = Payload(16, 16, np.dtype("float32"))
    buffers = np.zeros((4, 16), dtype=np.float32)
    with pytest.raises(AlgorithmError) as caught:
        run_schedule(schedule, machine, payload, ReduceOp.SUM, buffers, "nvls")
    assert str(caught.value) == ("nvls: ranks [0, 1, 2, 3] share no switch that reduces (a "
                                 "switch node with reduction: true)")
    with pytest.raises(AlgorithmError) as caught:
        run_schedule(dataclasses.replace(schedule, switches=()), machine, payload, ReduceOp.SUM,
                     buffers, "nvls")
    assert str(caught.value) == ("nvls: schedule field src names an endpoint outside the 4 "
                                 "ranks and 0 switch groups")


def test_auto_does_not_trace_what_it_leaves_to_simpy(monkeypatch):
    def untraceable(*_):
        raise AssertionError("traced")

    monkeypatch.setattr("simulator.algorithms.algorithm.trace", untraceable)
    scenario = {"topology": {"preset": "dgx_h100"}, "algorithms": ["nvls"], "sizes": [4096]}
    assert run_point(scenario, "nvls", 4096).engine == "simpy"
    with pytest.raises(AssertionError, match="traced"):
        run_point({**scenario, "engine": "vector"}, "nvls", 4096)


def test_a_comm_is_one_members_view_of_its_group():
    # three members of a 3x1 grid on two hosts, global ranks 4, 6 and 9, on elements [8, 20)
    group = Group(np.array([4, 6, 9]), Span(8, 20), 4, piece_bytes=16,
                  hosts=np.array([0, 0, 1]), stream_bytes=32)
    outboxes = [Outbox() for _ in range(3)]
    comms = group.comms(outboxes)
    assert [(c.rank, c.size, c.members) for c in comms] == [(i, 3, (4, 6, 9)) for i in range(3)]
    assert {(c.buffer, c.itemsize, c.piece_bytes, c.stream_bytes) for c in comms} == {
        (Span(8, 20), 4, 16, 32)}
    assert comms[0].layout == Layout((0, 0, 1)) and comms[2].layout.host_ranks(2) == (2,)
    comms[1].send(2, Span(8, 12))  # posts to its own outbox, to global rank 9
    assert [p.peer for p in outboxes[1].take()] == [9] and outboxes[0].take() == []


def _kahn_one_edge_at_a_time(ops: int, earlier: list[int], later: list[int]) -> list[int]:
    """The textbook Kahn's algorithm, an edge at a time: each op's longest chain before it
    (-1 for ops left in or behind a circle)."""
    followers: list[list[int]] = [[] for _ in range(ops)]
    left = [0] * ops
    for e, m in zip(earlier, later, strict=True):
        followers[e].append(m)
        left[m] += 1
    level = [-1] * ops
    ready = [m for m in range(ops) if left[m] == 0]
    for m in ready:
        level[m] = 0
    while ready:
        nxt = []
        for m in ready:
            for f in followers[m]:
                left[f] -= 1
                if left[f] == 0:
                    level[f] = level[m] + 1
                    nxt.append(f)
        ready = nxt
    return level


@pytest.mark.parametrize("seed", range(6))
def test_wave_levels_are_kahns_longest_chains(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ops = 300
    later = rng.integers(1, ops, size=900)
    earlier = (rng.random(900) * later).astype(np.int64)  # an earlier op: no circle
    if seed % 2:  # a circle 5 -> 7 -> 5, and every op waiting on it stuck too
        earlier, later = np.append(earlier, [7, 5]), np.append(later, [5, 7])
    level, stuck = wave_levels(ops, earlier, later)
    expected = _kahn_one_edge_at_a_time(ops, earlier.tolist(), later.tolist())
    assert level.tolist() == expected
    assert stuck.tolist() == [m for m in range(ops) if expected[m] < 0]
    assert (seed % 2 == 1) == (stuck.size > 0)
