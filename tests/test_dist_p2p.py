"""simulator.distributed's point-to-point calls (issue 25, item 3): send, recv, isend, irecv, their
works, P2POp and batch_isend_irecv. The data each receive gets, the matching (tags, posting
order, any source), times against the fabric's one-message cost on the default switch (two 1 us
hops and bytes at 25 GB/s) and against sharing where messages fly together, the ranks' clocks,
and every misuse, deadlock and mismatch as its exact error."""

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

import simulator.distributed as dist
from simulator.distributed import CollectiveMismatch, MessageMismatch, RankError, Stalled
from simulator.model.collective import Collective

HOP_S, BANDWIDTH = 1e-6, 25e9
"""The default switch's links: a message crosses two (up to the switch, down to its receiver)."""


def one_message_s(size_bytes: int) -> float:
    """The fabric's cost of a message alone on its route of the default switch."""
    return 2 * HOP_S + size_bytes / BANDWIDTH


@pytest.fixture(autouse=True)
def no_rank_left() -> Iterator[None]:
    """Each test starts with no rank's thread: those a test's error left have ended."""
    yield
    for thread in threading.enumerate():
        if thread.name.startswith("dist-rank"):
            thread.join()


def test_send_and_recv_deliver_the_data_in_place_in_one_messages_time():
    tensors = {}

    def step(rank: int) -> int | None:
        tensors[rank] = np.arange(1024, dtype=np.float32) * (rank + 1)
        if rank == 0:
            dist.send(tensors[0], dst=1)
            return None
        return dist.recv(tensors[1], src=0)

    result = dist.spawn(step, 2)
    assert result.returns == (None, 0)
    assert tensors[1].tolist() == np.arange(1024, dtype=np.float32).tolist()
    assert tensors[0].tolist() == np.arange(1024, dtype=np.float32).tolist()
    [message] = result.calls
    assert (message.index, message.name, message.collective, message.size_bytes,
            message.algorithm, message.protocol, message.verified, message.start_s,
            message.src, message.dst, message.tag) == (0, "send/recv", None, 4096, "p2p", None,
                                                       True, 0.0, 0, 1, 0)
    assert message.time_s == pytest.approx(one_message_s(4096), rel=1e-12)
    assert round(message.time_s * 1e6, 5) == 2.16384
    assert result.clocks == (message.time_s, message.time_s)  # a send waits for its arrival
    assert result.time_s == message.time_s


def test_a_ring_exchange_of_isends_and_irecvs_on_4_ranks():
    """Every rank sends its tensor right and receives its left neighbour's, all at once: on a
    switch each link carries one message, so each takes one message's time."""
    def step(rank: int) -> list[float]:
        size = dist.get_world_size()
        mine = np.full(8, float(rank), dtype=np.float64)
        theirs = np.zeros(8, dtype=np.float64)
        works = [dist.isend(mine, (rank + 1) % size), dist.irecv(theirs, (rank - 1) % size)]
        assert [work.wait() for work in works] == [True, True]
        assert all(work.is_completed() for work in works)
        return theirs.tolist()

    result = dist.spawn(step, 4)
    assert result.returns == tuple([float((rank - 1) % 4)] * 8 for rank in range(4))
    assert [(call.name, call.src, call.dst, call.size_bytes, call.start_s, call.verified)
            for call in result.calls] == [("isend/irecv", rank, (rank + 1) % 4, 64, 0.0, True)
                                          for rank in range(4)]
    for call in result.calls:
        assert call.time_s == pytest.approx(one_message_s(64), rel=1e-12)
    assert result.time_s == result.calls[0].time_s


def test_batch_isend_irecv_runs_torchs_example_on_torch_tensors():
    """torch.distributed.batch_isend_irecv's docstring example, on 4 ranks: rank r ends with
    rank r-1's ``arange(2) + 2(r-1)``, in place."""
    def step(rank: int) -> list[float]:
        size = dist.get_world_size()
        send_tensor = torch.arange(2, dtype=torch.float32) + 2 * rank
        recv_tensor = torch.zeros(2, dtype=torch.float32)
        before = recv_tensor.data_ptr()
        send_op = dist.P2POp(dist.isend, send_tensor, (rank + 1) % size)
        recv_op = dist.P2POp(dist.irecv, recv_tensor, (rank - 1 + size) % size)
        for request in dist.batch_isend_irecv([send_op, recv_op]):
            request.wait()
        assert recv_tensor.data_ptr() == before
        return recv_tensor.tolist()

    assert dist.spawn(step, 4).returns == ([6.0, 7.0], [0.0, 1.0], [2.0, 3.0], [4.0, 5.0])


def test_a_bfloat16_torch_tensor_arrives_bit_for_bit():
    def step(rank: int) -> tuple[int, list[float]] | None:
        tensor = torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16) * (rank + 1)
        if rank == 0:
            dist.send(tensor, 1)
            return None
        return dist.recv(tensor), tensor.tolist()

    assert dist.spawn(step, 2).returns == (None, (0, [1.5, -2.0, 3.25]))


def test_recv_from_any_source_returns_each_sender_in_turn():
    """Ranks 1-3 send at once; rank 0 receives three times from any rank. Each receive takes
    the earliest send posted (all at 0: the lowest rank first), one after another on rank 0's
    clock, so the run takes three messages' time."""
    def step(rank: int) -> list[tuple[int, float]] | None:
        if rank > 0:
            dist.send(np.array([10.0 * rank]), dst=0)
            return None
        got = []
        for _ in range(3):
            tensor = np.zeros(1)
            got.append((dist.recv(tensor), float(tensor[0])))
        return got

    result = dist.spawn(step, 4)
    assert result.returns[0] == [(1, 10.0), (2, 20.0), (3, 30.0)]
    assert [(call.src, call.dst) for call in result.calls] == [(1, 0), (2, 0), (3, 0)]
    one = one_message_s(8)
    assert [call.start_s for call in result.calls] == pytest.approx([0, one, 2 * one], rel=1e-12)
    assert result.time_s == pytest.approx(3 * one, rel=1e-12)
    assert result.clocks[1] == pytest.approx(one, rel=1e-12)  # rank 1's send arrived first


def test_recv_from_any_source_takes_the_send_posted_earliest_in_simulated_time():
    """Rank 3 sends to ranks 0 and 1 at once; rank 1 then sends to rank 0, posting at the
    arrival; rank 2 sent to rank 0 from the start. Rank 0's receive from any rank, posted after
    rank 3's message, takes rank 2's send (posted at 0) before rank 1's, though rank 1 is lower."""
    def step(rank: int) -> list[int] | None:
        tensor = np.zeros(16)
        if rank == 3:
            for work in [dist.isend(tensor, 0), dist.isend(tensor, 1)]:
                work.wait()
        elif rank == 2:
            dist.send(tensor, 0)
        elif rank == 1:
            dist.recv(tensor, 3)
            dist.send(tensor, 0)
        else:
            return [dist.recv(tensor, 3), dist.recv(tensor), dist.recv(tensor)]
        return None

    result = dist.spawn(step, 4)
    assert result.returns[0] == [3, 2, 1]
    shared = 2 * HOP_S + 2 * 128 / BANDWIDTH  # rank 3's two messages share its uplink
    assert [(call.src, call.dst) for call in result.calls] == [(3, 0), (3, 1), (2, 0), (1, 0)]
    assert [call.start_s for call in result.calls] == pytest.approx(
        [0.0, 0.0, shared, shared + one_message_s(128)], rel=1e-12)


def test_tags_are_separate_streams_and_one_stream_keeps_its_order():
    """Rank 0 sends tag 1, tag 2, then two of tag 0; rank 1 receives tag 2 first, then tag 1,
    then the two of tag 0: each receive gets its tag's sends in the order they were posted."""
    def step(rank: int) -> list[float] | None:
        if rank == 0:
            works = [dist.isend(np.array([1.0]), 1, tag=1), dist.isend(np.array([2.0]), 1, tag=2),
                     dist.isend(np.array([3.0]), 1), dist.isend(np.array([4.0]), 1)]
            for work in works:
                work.wait()
            return None
        got = [np.zeros(1) for _ in range(4)]
        works = [dist.irecv(got[0], 0, tag=2), dist.irecv(got[1], 0, tag=1),
                 dist.irecv(got[2], 0), dist.irecv(got[3], 0)]
        for work in works:
            work.wait()
        return [float(tensor[0]) for tensor in got]

    result = dist.spawn(step, 2)
    assert result.returns[1] == [2.0, 1.0, 3.0, 4.0]
    # one connection injects them one at a time, in rank 0's posting order
    assert [call.tag for call in result.calls] == [1, 2, 0, 0]
    ends = [call.start_s + call.time_s for call in result.calls]
    assert ends == pytest.approx([2 * HOP_S + k * 8 / BANDWIDTH for k in (1, 2, 3, 4)],
                                 rel=1e-12)


def test_messages_in_flight_together_share_the_receivers_link():
    """Three ranks send 1 MiB to rank 0 at once: its one downlink carries all three at a
    third of 25 GB/s each, so all arrive after 2 us + 3 MiB / 25 GB/s."""
    size = 1 << 20

    def step(rank: int) -> None:
        if rank == 0:
            works = [dist.irecv(np.zeros(size // 4, dtype=np.float32), src)
                     for src in (1, 2, 3)]
            for work in works:
                work.wait()
        else:
            dist.send(np.zeros(size // 4, dtype=np.float32), 0)

    result = dist.spawn(step, 4)
    assert [call.start_s for call in result.calls] == [0.0, 0.0, 0.0]
    for call in result.calls:
        assert call.time_s == pytest.approx(2 * HOP_S + 3 * size / BANDWIDTH, rel=1e-12)
    assert result.time_s == pytest.approx(2 * HOP_S + 3 * size / BANDWIDTH, rel=1e-12)


def test_an_all_to_all_of_isends_and_irecvs_shares_every_link_three_ways_and_repeats():
    """Every rank of 4 sends 64 KiB to each other one at once: each up- and downlink carries
    three messages, so each arrives after 2 us + 3 × 64 KiB / 25 GB/s; the same program gives
    the same records again, whatever the threads did."""
    size = 1 << 16

    def step(rank: int) -> list[float]:
        peers = [peer for peer in range(4) if peer != rank]
        got = {peer: np.zeros(size // 8) for peer in peers}
        ops = [dist.P2POp(dist.irecv, got[peer], peer) for peer in peers]
        ops += [dist.P2POp(dist.isend, np.full(size // 8, 10.0 * rank + peer), peer)
                for peer in reversed(peers)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        return [float(got[peer][0]) for peer in peers]

    result = dist.spawn(step, 4)
    assert result.returns == tuple([10.0 * peer + rank for peer in range(4) if peer != rank]
                                   for rank in range(4))
    assert [(call.src, call.dst) for call in result.calls] == [
        (src, dst) for src in range(4) for dst in reversed(range(4)) if dst != src]
    for call in result.calls:
        assert call.time_s == pytest.approx(2 * HOP_S + 3 * size / BANDWIDTH, rel=1e-12)
    again = dist.spawn(step, 4)
    assert (again.calls, again.clocks) == (result.calls, result.clocks)


def test_messages_matched_at_different_moments_share_while_both_fly():
    """Rank 0 sends 1 MiB to rank 2 from the start; rank 1 sends it 1 MiB too, but only once a
    small message from rank 3 has arrived. The second is matched later, yet both fly into rank
    2's downlink together: the first alone at 25 GB/s until the second's bytes start, then each
    at half of it, and the second alone again after."""
    size, small = 1 << 20, 8

    def step(rank: int) -> None:
        if rank == 0:
            dist.send(np.zeros(size // 4, dtype=np.float32), 2)
        elif rank == 3:
            dist.send(np.zeros(1), 1)
        elif rank == 1:
            dist.recv(np.zeros(1), 3)
            dist.send(np.zeros(size // 4, dtype=np.float32), 2)
        else:
            works = [dist.irecv(np.zeros(size // 4, dtype=np.float32), src) for src in (0, 1)]
            for work in works:
                work.wait()

    result = dist.spawn(step, 4)
    arrived = one_message_s(small)                   # rank 3's message: when rank 1 sends
    together = arrived + 2 * HOP_S                   # the second's bytes start: both share
    left = size - (together - 2 * HOP_S) * BANDWIDTH  # the first's bytes then still to go
    first_end = together + 2 * left / BANDWIDTH
    second_end = first_end + (size - left) / BANDWIDTH
    assert [(call.src, call.dst, call.start_s) for call in result.calls] == [
        (3, 1, 0.0), (0, 2, 0.0), (1, 2, arrived)]
    ends = [call.start_s + call.time_s for call in result.calls]
    assert ends == pytest.approx([arrived, first_end, second_end], rel=1e-12)
    assert result.time_s == pytest.approx(second_end, rel=1e-12)


def test_messages_one_after_another_do_not_share():
    """Rank 0 receives from 1, then 2, then 3, each recv waiting for its message: the next send
    is matched only then, so each message is alone and starts when the last arrived."""
    def step(rank: int) -> None:
        tensor = np.zeros(256, dtype=np.float32)
        if rank == 0:
            for src in (1, 2, 3):
                dist.recv(tensor, src)
        else:
            dist.send(tensor, 0)

    result = dist.spawn(step, 4)
    one = one_message_s(1024)
    assert [call.time_s for call in result.calls] == pytest.approx([one] * 3, rel=1e-12)
    assert result.time_s == pytest.approx(3 * one, rel=1e-12)
    assert result.clocks == pytest.approx((3 * one, one, 2 * one, 3 * one), rel=1e-12)


def test_a_collective_starts_when_the_last_rank_calls_it():
    """Ranks 0 and 1 exchange a message first; ranks 2 and 3 call the all_reduce at once, but it
    starts only when ranks 0 and 1 join it, after the message."""
    def step(rank: int) -> None:
        tensor = np.ones(1024, dtype=np.float32)
        if rank == 0:
            dist.send(tensor, 1)
        elif rank == 1:
            dist.recv(tensor, 0)
        dist.all_reduce(tensor)

    result = dist.spawn(step, 4, algorithm="ring")
    message, reduce = result.calls
    assert message.collective is None and reduce.collective is Collective.ALLREDUCE
    assert reduce.start_s == message.time_s
    # ring on a switch: 2(p-1) = 6 steps of two 1 us hops and a 1 KiB chunk
    assert reduce.time_s == pytest.approx(6 * (2e-6 + 1024 / 25e9), rel=1e-12)
    assert result.time_s == message.time_s + reduce.time_s
    assert result.clocks == (result.time_s,) * 4


def test_isend_takes_the_data_as_posted():
    def step(rank: int) -> list[float] | None:
        tensor = np.array([1.0, 2.0])
        if rank == 0:
            work = dist.isend(tensor, 1)
            tensor[:] = -1.0  # torch leaves this undefined; here the message keeps what was posted
            work.wait()
            return None
        dist.recv(tensor, 0)
        return tensor.tolist()

    assert dist.spawn(step, 2).returns == (None, [1.0, 2.0])


def test_a_rank_may_isend_to_itself_and_that_takes_no_time():
    def step(rank: int) -> list[int]:
        mine, got = np.array([rank, 7], dtype=np.int64), np.zeros(2, dtype=np.int64)
        works = [dist.irecv(got, rank), dist.isend(mine, rank)]
        for work in works:
            work.wait()
        return got.tolist()

    result = dist.spawn(step, 2)
    assert result.returns == ([0, 7], [1, 7])
    assert [(call.src, call.dst, call.time_s, call.verified) for call in result.calls] == [
        (0, 0, 0.0, True), (1, 1, 0.0, True)]
    assert result.time_s == 0.0


def test_a_message_of_no_elements_moves_nothing():
    def step(rank: int) -> None:
        if rank == 0:
            dist.send(np.zeros(0, dtype=np.float32), 1)
        else:
            dist.recv(np.zeros(0, dtype=np.float32), 0)

    [call] = dist.spawn(step, 2).calls
    assert (call.size_bytes, call.algorithm, call.time_s, call.verified) == (0, "none", 0.0, None)


def test_polling_is_completed_moves_the_run_on():
    """Rank 0 polls its irecv; the poll waits until no rank can move, so rank 1's send is
    matched: the first poll says False (the message is in flight), the second, nothing else done
    in between, waits for its arrival and says True (rank 0's clock at the arrival)."""
    def step(rank: int) -> tuple[int, list[float]] | None:
        tensor = np.zeros(3)
        if rank == 1:
            dist.send(np.ones(3), 0)
            return None
        work = dist.irecv(tensor, 1)
        polls = 0
        while not work.is_completed():
            polls += 1
        return polls, tensor.tolist()

    result = dist.spawn(step, 2)
    assert result.returns[0] == (1, [1.0, 1.0, 1.0])
    assert result.clocks[0] == result.calls[0].time_s


def test_a_poll_is_answered_no_when_its_message_needs_this_rank_first():
    """Rank 1 sends to rank 0 only what rank 0 sends it first: rank 0's poll must say False,
    then rank 0 sends, and its wait gets rank 1's answer."""
    def step(rank: int) -> tuple[bool, list[float]] | None:
        if rank == 1:
            tensor = np.zeros(3)
            dist.recv(tensor, 0)
            dist.send(tensor * 2, 0)
            return None
        answer = np.zeros(3)
        work = dist.irecv(answer, 1)
        first = work.is_completed()
        dist.send(np.ones(3), 1)
        work.wait()
        return first, answer.tolist()

    result = dist.spawn(step, 2)
    assert result.returns[0] == (False, [2.0, 2.0, 2.0])
    assert result.time_s == pytest.approx(2 * one_message_s(24), rel=1e-12)


def stall(fn, world_size: int = 2) -> Stalled:
    with pytest.raises(Stalled) as raised:
        dist.spawn(fn, world_size)
    return raised.value


def test_a_recv_no_send_will_match_is_a_stall_naming_both_ranks():
    def step(rank: int) -> None:
        if rank == 1:
            dist.recv(np.zeros(4, dtype=np.float32), src=0)

    stalled = stall(step)
    assert str(stalled) == ("spawn stalled, no rank can move: rank 1 waits in "
                            "recv(float32[4], src=0) for a message rank 0 never sent; rank 0 "
                            "returned")
    assert (stalled.idle, stalled.waiting) == ((), (1,))


def test_two_blocking_sends_to_each_other_deadlock():
    """A send blocks until a matching receive takes it, so two ranks that both send first wait
    for each other for ever (torch's send does, for messages too large to buffer)."""
    stalled = stall(lambda rank: dist.send(np.zeros(4, dtype=np.float32), 1 - rank, tag=3))
    assert str(stalled) == ("spawn stalled, no rank can move: rank 0 waits in "
                            "send(float32[4], dst=1, tag=3) for rank 1; rank 1 waits in "
                            "send(float32[4], dst=0, tag=3) for rank 0")
    assert stalled.waiting == (0, 1)


def test_a_send_whose_receiver_returned_is_a_stall():
    stalled = stall(lambda rank: dist.send(np.zeros(2), 1) if rank == 0 else None)
    assert str(stalled) == ("spawn stalled, no rank can move: rank 0 waits in "
                            "send(float64[2], dst=1) for a recv rank 1 never posted; rank 1 "
                            "returned")


def test_a_recv_while_its_peer_waits_in_a_collective_is_a_stall():
    def step(rank: int) -> None:
        if rank == 0:
            dist.all_reduce(np.zeros(4, dtype=np.float32))
        else:
            dist.recv(np.zeros(4, dtype=np.float32), src=0)

    stalled = stall(step, 3)
    assert str(stalled) == ("spawn stalled, no rank can move: ranks 1, 2 wait in "
                            "recv(float32[4], src=0) for rank 0; rank 0 waits in collective #0, "
                            "all_reduce(float32[4]), for ranks 1, 2")
    assert stalled.waiting == (0, 1, 2)


def test_a_recv_from_any_rank_when_all_others_returned():
    stalled = stall(lambda rank: dist.recv(np.zeros(4)) if rank == 0 else None, 3)
    assert str(stalled) == ("spawn stalled, no rank can move: rank 0 waits in "
                            "recv(float64[4], src=None) for a message no rank sent; ranks 1, 2 "
                            "returned")


def test_polling_a_work_that_can_never_complete_is_a_stall():
    def step(rank: int) -> None:
        if rank == 0:
            work = dist.irecv(np.zeros(3), 1, tag=5)
            while not work.is_completed():
                pass

    stalled = stall(step)
    assert str(stalled) == ("spawn stalled, no rank can move: rank 0 polls is_completed() of "
                            "irecv(float64[3], src=1, tag=5) for a message rank 1 never sent; "
                            "rank 1 returned")


@pytest.mark.parametrize("received, called", [
    (np.zeros(5, dtype=np.float32), "recv(float32[5], src=0)"),
    (np.zeros(4, dtype=np.float64), "recv(float64[4], src=0)"),
    (np.zeros((2, 2), dtype=np.float32), "recv(float32[2, 2], src=0)"),
])
def test_a_send_and_recv_that_differ_name_both_calls(received, called):
    def step(rank: int) -> None:
        if rank == 0:
            dist.send(np.zeros(4, dtype=np.float32), 1)
        else:
            dist.recv(received, 0)

    with pytest.raises(MessageMismatch) as raised:
        dist.spawn(step, 2)
    assert str(raised.value) == (f"send/recv mismatch: rank 0 called send(float32[4], dst=1); "
                                 f"rank 1 called {called}: expected the same dtype and shape on "
                                 "both sides")
    assert isinstance(raised.value, CollectiveMismatch)


def test_sends_and_receives_left_when_every_rank_returned_are_a_mismatch():
    def step(rank: int) -> None:
        if rank == 0:
            dist.isend(np.zeros(4, dtype=np.float32), 1)
        elif rank == 1:
            dist.irecv(np.zeros(2, dtype=np.int32), 0, tag=1)
        else:
            dist.irecv(np.zeros(2, dtype=np.int32))

    with pytest.raises(MessageMismatch) as raised:
        dist.spawn(step, 3)
    assert str(raised.value) == (
        "every rank returned with sends or receives never matched: rank 0 called "
        "isend(float32[4], dst=1), for a recv rank 1 never posted; rank 1 called "
        "irecv(int32[2], src=0, tag=1), for a message rank 0 never sent; rank 2 called "
        "irecv(int32[2], src=None), for a message no rank sent")


def test_an_isend_and_irecv_never_waited_still_deliver():
    tensors = {}

    def step(rank: int) -> None:
        tensors[rank] = np.full(2, float(rank))
        if rank == 0:
            dist.isend(tensors[0], 1)
        else:
            dist.irecv(tensors[1], 0)

    result = dist.spawn(step, 2)
    assert tensors[1].tolist() == [0.0, 0.0]
    assert result.clocks == (0.0, 0.0)  # no rank waited ...
    assert result.time_s == result.calls[0].time_s  # ... but the run ends when it arrived


@pytest.mark.parametrize("call, message", [
    (lambda rank: dist.send(np.zeros(2), 2), "ValueError: dst: expected a rank from 0 to 1, got 2"),
    (lambda rank: dist.isend(np.zeros(2), -1), "ValueError: dst: expected a rank from 0 to 1, got -1"),
    (lambda rank: dist.recv(np.zeros(2), 1.0), "ValueError: src: expected a rank from 0 to 1, got 1.0"),
    (lambda rank: dist.send(np.zeros(2), rank),
     "ValueError: dst: invalid destination rank 0: destination rank should not be the same as "
     "the rank of the current process"),
    (lambda rank: dist.recv(np.zeros(2), rank),
     "ValueError: src: invalid source rank 0: source rank should not be the same as the rank of "
     "the current process"),
    (lambda rank: dist.send(np.zeros(2), 1 - rank, tag="a"),
     "TypeError: tag: expected a whole number, got 'a'"),
    (lambda rank: dist.irecv(np.zeros(2), 1 - rank, group="world"),
     "ValueError: group: process groups are not modelled, every call is on the whole world: "
     "expected None, got 'world'"),
    (lambda rank: dist.recv([0.0], 1 - rank),
     "TypeError: tensor: expected a numpy array or a torch tensor, got list"),
    (lambda rank: dist.batch_isend_irecv([]),
     "ValueError: p2p_op_list: expected a non-empty list of simulator.dist.P2POp, got []"),
    (lambda rank: dist.P2POp(torch.distributed.isend, np.zeros(2), 1),
     "ValueError: op: expected simulator.dist.isend or simulator.dist.irecv, got 'isend'"),
])
def test_a_bad_argument_is_the_ranks_error(call, message):
    def step(rank: int) -> None:
        if rank == 0:
            call(rank)

    with pytest.raises(RankError) as raised:
        dist.spawn(step, 2)
    assert str(raised.value) == f"rank 0 raised {message}"


def test_a_work_is_waited_on_by_its_own_rank_only():
    works = {}

    def step(rank: int) -> None:
        works[rank] = dist.isend(np.zeros(1), 1 - rank)
        dist.irecv(np.zeros(1), 1 - rank).wait()
        if rank == 0:
            works[1].wait()

    with pytest.raises(RankError) as raised:
        dist.spawn(step, 2)
    assert str(raised.value) == ("rank 0 raised RuntimeError: wait() of rank 1's "
                                 "isend(float64[1], dst=0) called from another thread: only the "
                                 "rank that posted it may wait on it")


def test_a_rank_stuck_outside_is_named_with_the_rank_waiting_for_its_message():
    stuck = threading.Barrier(2)

    def step(rank: int) -> None:
        if rank == 1:
            stuck.wait()
        dist.recv(np.zeros(2), 1) if rank == 0 else dist.send(np.zeros(2), 0)

    line = step.__code__.co_firstlineno + 2
    try:
        with pytest.raises(Stalled) as raised:
            dist.spawn(step, 2, timeout=0.1)
        assert str(raised.value) == (
            "spawn stalled for timeout=0.1 s: rank 1 has not returned and is not in a collective "
            f"(still in Barrier.wait, called at test_dist_p2p.py:{line} in "
            "test_a_rank_stuck_outside_is_named_with_the_rank_waiting_for_its_message.<locals>."
            "step); rank 0 waits in recv(float64[2], src=1) for rank 1")
        assert (raised.value.idle, raised.value.waiting) == ((1,), (0,))
    finally:
        stuck.abort()


def test_the_examples_of_docs_dist_md_run():
    """Every ```python block of docs/dist.md, in one namespace: they assert what they show."""
    page = Path(__file__).resolve().parent.parent / "docs" / "dist.md"
    text = page.read_text(encoding="utf-8")
    blocks = text.split("```python\n")[1:]
    assert len(blocks) >= 2
    namespace: dict[str, object] = {"__name__": "docs_dist"}
    for block in blocks:
        exec(compile(block.split("```")[0], str(page), "exec"), namespace)


def test_sends_holding_more_than_the_memory_budget_are_refused(monkeypatch):
    """Each send keeps a copy of its data until it is received: two of 512 KiB under a budget
    of 1 MiB are accepted, a third is not."""
    from simulator import InputError, limits

    monkeypatch.setattr(limits, "PROXY_BUDGET_BYTES", 1 << 20)

    def step(rank: int) -> None:
        if rank == 0:
            for _ in range(3):
                dist.isend(np.zeros(1 << 17, dtype=np.float32), 1)

    with pytest.raises(InputError) as raised:
        dist.spawn(step, 2)
    assert str(raised.value) == ("dist.spawn: isend: rank 0 posted 524288 bytes to send while "
                                 "the sends not yet received hold 1 MiB, more than 1 MiB "
                                 "together (each keeps a copy of its data); use smaller tensors, "
                                 "or wait on sends before posting more")


def test_the_engine_times_messages_together_each_from_its_start():
    """engine.messages.time_messages on a switch of 1 us, 25 GB/s links: two messages into rank
    0 at once share its downlink; one entering later, when they are done, is alone; a message to
    its own rank, or of no bytes, arrives when it starts."""
    from simulator.engine.messages import Message, time_messages
    from simulator.model.machine import Machine
    from simulator.model.topology import switch

    machine = Machine.of(switch(3, BANDWIDTH, HOP_S))
    size = 1 << 20
    ends = time_messages(machine, [Message(1, 0, size, 0.0), Message(2, 0, size, 0.0),
                                   Message(2, 1, size, 1e-3), Message(1, 1, size, 5e-6),
                                   Message(0, 2, 0, 7e-6)])
    together = 2 * HOP_S + 2 * size / BANDWIDTH
    assert ends == pytest.approx((together, together, 1e-3 + one_message_s(size), 5e-6, 7e-6),
                                 rel=1e-12)
