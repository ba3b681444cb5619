"""Threads of one rank ordered by flags (``comm.signal``/``comm.wait``), local copies
(``comm.copy``), both on both engines; an algorithm's workspace past the buffer; and what a run
that failed verification says of where it went wrong."""

import numpy as np
import pytest

from simulator.algorithms.comm import COPY
from simulator.algorithms.ring import RingAllreduce
from simulator.algorithms.schedule import Group, Op
from simulator.algorithms.trace import trace
from simulator.engine.payload import Payload
from simulator.engine.run import RunSpec, run_collective
from simulator.engine.vector import run_schedule
from simulator.errors import AlgorithmError
from simulator.model.machine import GpuSpec, Machine
from simulator.model.reduction import ReduceOp
from simulator.model.span import Span
from simulator.model.topology import switch

GPU = GpuSpec(reduce_bandwidth_Bps=1e9, launch_latency_s=1e-6)


def custom(program):
    class Custom(RingAllreduce):
        name = "custom"

        def program(self, comm):
            return program(comm)

    return Custom()


def both_engines(algorithm, ranks=2, count=12):
    """``algorithm`` on a 1 GB/s, 1 us switch of ``ranks`` GPUs reducing at 1 GB/s after a 1 us
    launch, int64 buffers 0, 1, 2, ... on SimPy and on its trace with the vectorised engine:
    (SimPy's time, the vectorised time, SimPy's buffers, the vectorised buffers, the trace)."""
    machine = Machine.of(switch(ranks, 1e9, 1e-6), GPU)
    payload = Payload(count, count, np.dtype("int64"))
    simpy_buffers = np.arange(ranks * count, dtype=np.int64).reshape(ranks, count)
    vector_buffers = simpy_buffers.copy()
    simpy = run_collective(algorithm, machine, RunSpec(payload, ReduceOp.SUM), simpy_buffers)
    schedule = trace(algorithm, Group.whole(machine, count, 8))
    vector = run_schedule(schedule, machine, payload, ReduceOp.SUM, vector_buffers, "custom")
    return simpy.time_s, vector.time_s, simpy_buffers, vector_buffers, schedule


def reduce_then_copy(flagged):
    """Two threads on each rank: one reduces chunk 0 into chunk 1 (1 us + 32 B at 1 GB/s) and,
    when ``flagged``, raises flag 0; the other, after waiting for it then, copies chunk 1 over
    chunk 2 (a flag raised must be waited for: it is a message, which must be received)."""
    def program(comm):
        chunk = comm.buffer.split(3)

        def reduce():
            yield comm.reduce(chunk[1], chunk[0])
            if flagged:
                comm.signal(0, "reduced")

        def copy():
            if flagged:
                yield comm.wait(0, "reduced")
            yield comm.copy(chunk[2], chunk[1])

        yield comm.parallel(reduce(), copy())
    return custom(program)


def test_a_flag_orders_two_threads_of_a_rank_on_both_engines():
    # Rank 0's buffer is 0..11: chunk 1 becomes [4+0, 5+1, 6+2, 7+3] when the reduction ends at
    # 1 us + 32 B / 1 GB/s = 1.032 us, and the copy, waiting for the flag, takes that.
    simpy_s, vector_s, simpy, vector, schedule = both_engines(reduce_then_copy(flagged=True))
    assert simpy_s == vector_s == pytest.approx(1.032e-6, rel=1e-12)
    assert simpy[0].tolist() == [0, 1, 2, 3, 4, 6, 8, 10, 4, 6, 8, 10]
    assert np.array_equal(simpy, vector)
    assert sorted(Op(k).name for k in schedule.kinds[schedule.src == 0]) == [
        "JOIN", "LOCAL_COPY", "LOCAL_REDUCE"]  # the flag is a join marker of the trace


def test_without_the_flag_the_copy_takes_chunk_1_before_the_reduction():
    _, _, simpy, vector, _ = both_engines(reduce_then_copy(flagged=False))
    assert simpy[0].tolist() == [0, 1, 2, 3, 4, 6, 8, 10, 4, 5, 6, 7]
    assert np.array_equal(simpy, vector)


def test_a_flag_never_raised_is_a_deadlock_naming_it():
    def program(comm):
        yield comm.wait(7, "tb 1 step 2 waits for tb 0 step 4")

    with pytest.raises(AlgorithmError) as caught:
        both_engines(custom(program))
    assert str(caught.value) == (
        "custom: deadlock at 0.000 us: ranks [0, 1] wait for messages that are never sent:\n"
        "  rank 0 waits for flag 7 of its own (tb 1 step 2 waits for tb 0 step 4)\n"
        "  rank 1 waits for flag 7 of its own (tb 1 step 2 waits for tb 0 step 4)")


def test_a_copy_moves_data_between_ranks_messages_too():
    # Rank 0 copies its chunk 0 over chunk 1 and sends chunk 1 to rank 1, which takes it into
    # its chunk 2 (a move to another place, which a copy makes possible).
    def program(comm):
        chunk = comm.buffer.split(3)
        if comm.rank == 0:
            yield comm.copy(chunk[1], chunk[0])
            comm.send(1, chunk[1])
        else:
            yield comm.recv(0, into=chunk[2], combine=COPY)

    simpy_s, vector_s, simpy, vector, _ = both_engines(custom(program))
    assert simpy_s == vector_s == pytest.approx(2e-6 + 32e-9, rel=1e-12)
    assert simpy[1].tolist() == [12, 13, 14, 15, 16, 17, 18, 19, 0, 1, 2, 3]
    assert np.array_equal(simpy, vector)


def test_a_copy_between_spans_of_different_sizes_is_refused():
    def program(comm):
        chunk = comm.buffer.split(3)
        yield comm.copy(chunk[1], comm.buffer)

    with pytest.raises(AlgorithmError, match=r"^rank 0: local copy of 12 elements into a span "
                                             r"of 4$"):
        both_engines(custom(program))


def test_a_proxy_keeps_an_algorithms_whole_chunks_equal_and_widens_for_its_workspace():
    # 1000 float32 elements in 8 chunks of 125: a proxy of at least 100 elements is rounded up
    # to 104, 13 per chunk; a workspace of 3 chunks (375 elements) maps to 3 × 13 = 39 more.
    payload = Payload.for_size(4000, np.dtype("float32"), 8, proxy_elements=100,
                               whole_chunks=8)
    assert (payload.count, payload.proxy_count) == (1000, 104)
    chunks = Span(0, 1000).split(8)
    assert {payload.view(chunk).stop - payload.view(chunk).start for chunk in chunks} == {13}
    wide = payload.widened(375)
    assert (wide.count, wide.proxy_count) == (1375, 143)
    assert wide.view(chunks[3]) == payload.view(chunks[3]) == slice(39, 52)
    assert wide.view(Span(1000, 1125)) == slice(104, 117)  # the workspace's first chunk
    with pytest.raises(ValueError, match=r"^10 elements past a buffer of 1000 do not map to a "
                                         r"whole number of its 104 proxy elements$"):
        payload.widened(10)
