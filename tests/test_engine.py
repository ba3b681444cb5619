"""The engine catches broken programs with messages that say what went wrong."""

import numpy as np
import pytest

from simulator.algorithms.comm import REDUCE
from simulator.algorithms.ring import RingAllreduce
from simulator.engine.payload import Payload
from simulator.engine.run import RunSpec, run_collective
from simulator.errors import AlgorithmError
from simulator.model.machine import Machine
from simulator.model.reduction import ReduceOp
from simulator.model.span import Span
from simulator.model.topology import switch


def run(program, ranks=3, count=12, reducing_switch=False, buffers=None):
    """Run ``program`` on every rank of a 1 GB/s, 1 us switch; returns (timing, buffers)."""
    class Custom(RingAllreduce):
        name = "custom"

        def program(self, comm):
            return program(comm.rank, comm)

    graph = switch(ranks, 1e9, 1e-6)
    graph.nodes["switch"]["reduction"] = reducing_switch
    payload = Payload(count, count, np.dtype("int64"))
    if buffers is None:
        buffers = np.ones((ranks, count), dtype=np.int64)
    return run_collective(Custom(), Machine.of(graph), RunSpec(payload, ReduceOp.SUM),
                          buffers), buffers


def test_deadlock_is_reported():
    def waits_forever(me, comm):
        yield comm.recv((me + 1) % comm.size, into=comm.buffer)

    with pytest.raises(AlgorithmError) as caught:
        run(waits_forever)
    assert str(caught.value) == (
        "custom: deadlock at 0.000 us: ranks [0, 1, 2] wait for messages that are never sent:\n"
        "  rank 0 waits for message 1 from rank 1 on channel 0 (elements 0 to 12)\n"
        "  rank 1 waits for message 1 from rank 2 on channel 0 (elements 0 to 12)\n"
        "  rank 2 waits for message 1 from rank 0 on channel 0 (elements 0 to 12)")


def test_the_watchdog_says_what_each_blocked_rank_waits_for():
    # A ring step that works, then a second step whose sends were forgotten: when nothing is
    # left to happen (the first step's 96 bytes arrived after 2 hops of 1 us at 1 GB/s), every
    # rank waits for its left neighbour's second message, which its program labels.
    def forgets_to_send(me, comm):
        left, right = (me - 1) % comm.size, (me + 1) % comm.size
        comm.send(right, comm.buffer, "step 1")
        yield comm.recv(left, into=comm.buffer, label="step 1")
        yield comm.recv(left, into=comm.buffer.split(3)[me], label="step 2 piece 1/3")

    with pytest.raises(AlgorithmError) as caught:
        run(forgets_to_send)
    assert str(caught.value) == (
        "custom: deadlock at 2.096 us: ranks [0, 1, 2] wait for messages that are never sent:\n"
        "  rank 0 waits for message 2 from rank 2 on channel 0 ('step 2 piece 1/3', elements 0 "
        "to 4)\n"
        "  rank 1 waits for message 2 from rank 0 on channel 0 ('step 2 piece 1/3', elements 4 "
        "to 8)\n"
        "  rank 2 waits for message 2 from rank 1 on channel 0 ('step 2 piece 1/3', elements 8 "
        "to 12)")


def test_unreceived_message_is_reported():
    def sends_only(me, comm):
        if me == 0:
            comm.send(1, comm.buffer)
        yield from ()

    with pytest.raises(AlgorithmError, match=r"custom: rank 0 sent 1 message\(s\) never received "
                                             r"\(first to rank 1\)"):
        run(sends_only)


def test_bad_peer_is_reported():
    def sends_to_itself(me, comm):
        comm.send(me, comm.buffer)
        yield from ()

    with pytest.raises(AlgorithmError, match=r"rank 0: peer 0 is not another rank of 0..2"):
        run(sends_to_itself)


def test_size_mismatch_is_reported():
    def mismatched(me, comm):
        half = comm.chunks(2)
        if me == 0:
            comm.send(1, comm.buffer)
        if me == 1:
            yield comm.recv(0, into=half[0], combine=REDUCE)

    with pytest.raises(AlgorithmError, match="custom: rank 1 received 12 elements from rank 0 "
                                             "into a span of 6"):
        run(mismatched)


def test_chunk_outside_buffer_is_reported():
    def overflows(me, comm):
        comm.send((me + 1) % comm.size, Span(0, 99))
        yield from ()

    with pytest.raises(AlgorithmError, match=r"rank 0 used Span\(start=0, stop=99\), outside "
                                             "its buffer of 12 elements"):
        run(overflows)


def test_messages_on_one_connection_are_serialised_and_matched_in_order():
    # rank 0 posts two 8-element (64 B) messages to rank 1 at t=0 over 2 links of 1 GB/s and
    # 1 us each: both latencies run together, then the bytes go one message after the other,
    # so the second arrives at 2 us + 2 x 64 ns (not 2 x (2 us + 64 ns)).
    def two_messages(me, comm):
        first, second = comm.chunks(2)
        if me == 0:
            comm.send(1, second)
            comm.send(1, first)
        if me == 1:
            yield comm.recv(0, into=second, combine=REDUCE)
            yield comm.recv(0, into=first, combine=REDUCE)

    timing, buffers = run(two_messages, ranks=2, count=16)
    assert timing.time_s == pytest.approx(2e-6 + 2 * 64 / 1e9, rel=1e-12)
    assert buffers[1].tolist() == [2] * 16


def test_in_switch_reduction_needs_a_reducing_switch():
    def in_switch(me, comm):
        comm.switch_reduce(comm.buffer)
        yield comm.switch_result(into=comm.buffer)

    with pytest.raises(AlgorithmError, match=r"custom: ranks \[0, 1, 2\] share no switch that "
                                             r"reduces \(a switch node with reduction: true\)"):
        run(in_switch)


def test_in_switch_reduction_sums_and_multicasts():
    def in_switch(me, comm):
        comm.switch_reduce(comm.buffer)
        yield comm.switch_result(into=comm.buffer)

    timing, buffers = run(in_switch, reducing_switch=True,
                          buffers=np.arange(36, dtype=np.int64).reshape(3, 12))
    assert buffers.tolist() == [[12 + 3 * i + 24 for i in range(12)]] * 3
    # up: 1 us + 96 B at 1 GB/s, then down the same: 2 x (1 us + 96 ns)
    assert timing.time_s == pytest.approx(2 * (1e-6 + 96e-9), rel=1e-12)


def test_in_switch_reduction_missing_a_member_is_reported():
    def only_some(me, comm):
        if me != 2:
            comm.switch_reduce(comm.buffer)
        yield from ()

    with pytest.raises(AlgorithmError, match=r"custom: 1 in-switch reduction\(s\) missed "
                                             "contributions from some ranks"):
        run(only_some, reducing_switch=True)


def test_parallel_programs_on_separate_channels_share_the_link_and_match_by_channel():
    # rank 0 runs two programs at once, each sending 8 elements (64 B) to rank 1 on its own
    # channel; rank 1 receives them in the opposite program order. Both flows start after the
    # 2 us route latency and share the 1 GB/s links: 128 B at 1 GB/s -> both end at 2.128 us.
    def two_channels(me, comm):
        first, second = comm.chunks(2)
        a, b = comm.on_channel(1), comm.on_channel(2)

        def sender(channel_comm, chunk):
            channel_comm.send(1, chunk)
            yield from ()

        def receiver(channel_comm, chunk):
            yield channel_comm.recv(0, into=chunk, combine=REDUCE)

        if me == 0:
            yield comm.parallel(sender(a, first), sender(b, second))
        if me == 1:
            yield comm.parallel(receiver(b, second), receiver(a, first))

    timing, buffers = run(two_channels, ranks=2, count=16)
    assert timing.time_s == pytest.approx(2e-6 + 128 / 1e9, rel=1e-12)
    assert buffers[1].tolist() == [2] * 16


def test_local_reduce_the_proxy_cannot_represent_is_reported():
    # 100 nominal elements carried by a proxy of 10: spans [0, 9) and [9, 18) map to proxy
    # slices of 0 and 1 elements, so reducing one into the other cannot be checked
    class Custom(RingAllreduce):
        name = "custom"

        def program(self, comm):
            yield comm.reduce(Span(0, 9), Span(9, 18))

    graph = switch(2, 1e9, 1e-6)
    buffers = np.ones((2, 10), dtype=np.int64)
    with pytest.raises(AlgorithmError, match=r"custom: the proxy payload cannot represent a reduce "
                                             r"of Span\(start=9, stop=18\) into Span\(start=0, "
                                             r"stop=9\); rerun with a larger proxy"):
        run_collective(Custom(), Machine.of(graph),
                       RunSpec(Payload(100, 10, np.dtype("int64")), ReduceOp.SUM), buffers)
