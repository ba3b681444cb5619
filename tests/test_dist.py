"""simulator.distributed: torch.distributed's calls on simulated ranks. Results against numpy, times
against run_point and a hand-computed ring, and every misuse as its exact error (never a hang)."""

import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from datetime import timedelta

import numpy as np
import pytest
import torch

import simulator.distributed as dist
from simulator import InputError, run_point
from simulator.distributed import CollectiveMismatch, RankError, ReduceOp, watchdog
from simulator.model.collective import Collective
from simulator.model.reduction import ReduceOp as ModelOp

SWITCH4 = {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s", "latency": "1us"}


def data(rank: int, n: int = 6) -> np.ndarray:
    """Rank ``rank``'s small whole numbers as float64: sums, maxima and means of four are exact."""
    return ((np.arange(n) * 7 + rank * 5) % 11 - 4).astype(np.float64)


ALL = np.stack([data(rank) for rank in range(4)])


def test_seed_example_every_rank_holds_the_sum():
    tensors = {}

    def step(rank: int) -> float:
        tensors[rank] = np.array([float(rank)])
        dist.all_reduce(tensors[rank], op=ReduceOp.SUM)
        return float(tensors[rank][0])

    result = dist.spawn(step, 3)
    assert result.returns == (3.0, 3.0, 3.0)
    assert [tensors[rank].tolist() for rank in range(3)] == [[3.0], [3.0], [3.0]]


def test_seed_example_with_torch_tensors_in_place():
    tensors = {}

    def step(rank: int) -> None:
        tensors[rank] = torch.tensor([float(rank)])
        before = tensors[rank].data_ptr()
        dist.all_reduce(tensors[rank])
        assert tensors[rank].data_ptr() == before

    dist.spawn(step, 3)
    for rank in range(3):
        assert tensors[rank].dtype == torch.float32
        assert tensors[rank].tolist() == [3.0]


@pytest.mark.parametrize("op, expected", [
    (ReduceOp.SUM, ALL.sum(axis=0)),
    (ReduceOp.MAX, ALL.max(axis=0)),
    (ReduceOp.MIN, ALL.min(axis=0)),
    (ReduceOp.AVG, ALL.mean(axis=0)),
    (ReduceOp.PRODUCT, ALL.prod(axis=0)),
    (torch.distributed.ReduceOp.MAX, ALL.max(axis=0)),
    (ModelOp.SUM, ALL.sum(axis=0)),
])
def test_all_reduce_matches_numpy(op, expected):
    def step(rank: int) -> list[float]:
        tensor = data(rank).reshape(2, 3)
        dist.all_reduce(tensor, op=op)
        assert tensor.shape == (2, 3)
        return tensor.reshape(-1).tolist()

    assert dist.spawn(step, 4).returns == (expected.tolist(),) * 4


def test_broadcast_from_rank_2_gives_every_rank_its_tensor():
    def step(rank: int) -> list[int]:
        tensor = np.full(5, 10 * rank, dtype=np.int32)
        dist.broadcast(tensor, src=2)
        return tensor.tolist()

    result = dist.spawn(step, 4)
    assert result.returns == ([20] * 5,) * 4
    assert result.calls[0].collective is Collective.BROADCAST


def test_reduce_to_rank_1_leaves_the_others_as_they_were():
    def step(rank: int) -> list[float]:
        tensor = data(rank)
        dist.reduce(tensor, dst=1)
        return tensor.tolist()

    assert dist.spawn(step, 4).returns == (data(0).tolist(), ALL.sum(axis=0).tolist(),
                                           data(2).tolist(), data(3).tolist())


def test_reduce_scatter_gives_rank_r_the_reduction_of_every_input_r():
    def step(rank: int) -> tuple[list[float], list[float]]:
        inputs = data(rank, 8).reshape(4, 2)
        output = np.empty(2)
        dist.reduce_scatter(output, list(inputs), op=ReduceOp.MAX)
        whole = np.empty(2)
        dist.reduce_scatter_tensor(whole, data(rank, 8))
        return output.tolist(), whole.tolist()

    stacked = np.stack([data(rank, 8) for rank in range(4)]).reshape(4, 4, 2)
    assert dist.spawn(step, 4).returns == tuple(
        (stacked[:, r].max(axis=0).tolist(), stacked[:, r].sum(axis=0).tolist())
        for r in range(4))


def test_all_gather_gives_every_rank_every_tensor():
    def step(rank: int) -> tuple[list[list[int]], list[int]]:
        mine = np.array([rank, -rank, 7], dtype=np.int64)
        gathered = [np.zeros(3, dtype=np.int64) for _ in range(4)]
        dist.all_gather(gathered, mine)
        whole = torch.zeros(12, dtype=torch.int64)
        dist.all_gather_into_tensor(whole, torch.from_numpy(mine))
        return [g.tolist() for g in gathered], whole.tolist()

    expected = [[r, -r, 7] for r in range(4)]
    assert dist.spawn(step, 4).returns == ((expected, [x for row in expected for x in row]),) * 4


def test_barrier_is_an_allreduce_of_one_float32():
    def step(rank: int) -> int:
        dist.barrier()
        dist.all_reduce(np.zeros(1, dtype=np.float32))
        return dist.get_rank() * 10 + dist.get_world_size()

    result = dist.spawn(step, 4, SWITCH4)
    assert result.returns == (4, 14, 24, 34)
    barrier, one = result.calls
    assert (barrier.name, barrier.collective, barrier.size_bytes) == ("barrier", Collective.ALLREDUCE, 4)
    assert barrier.time_s == one.time_s > 0


def test_time_is_the_closed_form_and_run_points():
    def step(rank: int) -> None:
        dist.all_reduce(np.ones(1024, dtype=np.float32))

    result = dist.spawn(step, 4, SWITCH4, algorithm="ring")
    [call] = result.calls
    assert (call.index, call.name, call.size_bytes, call.algorithm, call.protocol,
            call.verified) == (0, "all_reduce", 4096, "ring", None, True)
    # ring on a switch: 2(p-1) = 6 steps of two 1 us hops and a 1 KiB chunk at 25 GB/s
    assert call.time_s == pytest.approx(6 * (2e-6 + 1024 / 25e9), rel=1e-12)
    assert round(call.time_s * 1e6, 5) == 12.24576
    point = run_point({"topology": SWITCH4, "sizes": [4096]}, "ring", 4096)
    assert call.time_s == point.sim_time_s
    assert result.time_s == call.time_s


def test_time_sums_the_calls_and_the_algorithm_may_be_named_per_collective():
    def step(rank: int) -> None:
        tensor = np.ones(64, dtype=np.float32)
        dist.all_reduce(tensor)
        dist.broadcast(tensor, 0)

    result = dist.spawn(step, 4, SWITCH4, algorithm={"allreduce": "direct"})
    assert [(c.index, c.algorithm) for c in result.calls] == [(0, "direct"), (1, "ring")]
    assert result.time_s == pytest.approx(sum(c.time_s for c in result.calls), rel=1e-15)
    broadcast = run_point({"topology": SWITCH4, "collective": "broadcast", "sizes": [256]},
                          "ring", 256)
    assert result.calls[1].time_s == broadcast.sim_time_s


def test_a_preset_runs_nccls_choice():
    def step(rank: int) -> float:
        tensor = np.full(1 << 18, float(rank), dtype=np.float32)  # 1 MiB
        dist.all_reduce(tensor)
        return float(tensor[0])

    result = dist.spawn(step, 8, "dgx_h100")
    assert result.returns == (28.0,) * 8
    [call] = result.calls
    assert (call.algorithm, call.protocol, call.verified) == ("ring", "LL", True)
    point = run_point({"topology": {"preset": "dgx_h100"}, "sizes": ["1MiB"], "protocol": "LL"},
                      "ring", 1 << 20)
    assert call.time_s == pytest.approx(point.sim_time_s, rel=1e-12)


def ranks_running() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("dist-rank")]


def finish(release: Callable[[], object] = lambda: None) -> None:
    """Free the ranks a test left stuck outside the simulator (if any), and wait until every
    rank's thread ends: after an error spawn does not wait for the ranks still running their
    own code, which end at their next call."""
    release()
    for thread in threading.enumerate():
        if thread.name.startswith("dist-rank"):
            thread.join()


@pytest.fixture(autouse=True)
def no_rank_left() -> Iterator[None]:
    """Each test starts with no rank's thread: those of the last test's error have ended."""
    yield
    finish()


def calls_then(rank: int, last: str) -> None:
    """Two matching all_reduces, then rank 2 does ``last`` while ranks 0 and 1 all_reduce."""
    tensor = np.zeros(4, dtype=np.float32)
    dist.all_reduce(tensor)
    dist.all_reduce(tensor)
    if rank != 2:
        dist.all_reduce(tensor)
    elif last == "broadcast":
        dist.broadcast(tensor, 0)
    elif last == "shape":
        dist.all_reduce(np.zeros(5, dtype=np.float32))
    elif last == "dtype":
        dist.all_reduce(np.zeros(4))
    elif last == "op":
        dist.all_reduce(tensor, op=ReduceOp.MAX)


@pytest.mark.parametrize("last, called", [
    ("broadcast", "broadcast(float32[4], src=0)"),
    ("shape", "all_reduce(float32[5])"),
    ("dtype", "all_reduce(float64[4])"),
    ("op", "all_reduce(float32[4], op=MAX)"),
    ("return", None),
])
def test_mismatched_calls_name_every_rank(last, called):
    what = f"called {called}" if called else "returned"
    message = f"collective #2 mismatch: ranks 0, 1 called all_reduce(float32[4]); rank 2 {what}"
    with pytest.raises(CollectiveMismatch) as raised:
        dist.spawn(calls_then, 3, args=(last,))
    assert str(raised.value) == message
    assert not ranks_running()  # every rank was in a call or had returned: spawn joined them


def test_mismatched_roots():
    def step(rank: int) -> None:
        dist.broadcast(np.zeros(2), src=1 if rank == 3 else 0)

    with pytest.raises(CollectiveMismatch) as raised:
        dist.spawn(step, 4)
    assert str(raised.value) == ("collective #0 mismatch: ranks 0-2 called "
                                 "broadcast(float64[2], src=0); rank 3 called "
                                 "broadcast(float64[2], src=1)")


def test_an_exception_in_rank_1_is_raised_naming_it_and_releases_the_others():
    def step(rank: int) -> None:
        tensor = np.zeros(4)
        dist.all_reduce(tensor)
        if rank == 1:
            raise ValueError("boom")
        dist.all_reduce(tensor)  # ranks 0, 2 and 3 wait here until the run stops

    with pytest.raises(RankError) as raised:
        dist.spawn(step, 4)
    assert str(raised.value) == "rank 1 raised ValueError: boom"
    assert raised.value.rank == 1
    assert isinstance(raised.value.__cause__, ValueError)
    finish()  # every rank ends: those between the calls at their next


def test_a_bad_argument_inside_a_rank_is_that_ranks_error():
    def step(rank: int) -> None:  # one rank errs: which of several is seen first is chance
        dist.broadcast(np.zeros(2), src=4 if rank == 2 else 0)

    with pytest.raises(RankError, match=r"^rank 2 raised ValueError: src: expected a rank from "
                                        r"0 to 3, got 4$"):
        dist.spawn(step, 4)


def test_calls_outside_spawn_say_so():
    with pytest.raises(RuntimeError) as raised:
        dist.all_reduce(np.zeros(1))
    assert str(raised.value) == ("all_reduce() called outside simulator.dist.spawn: it works "
                                 "only in the code that spawn(fn, world_size) runs for each rank")
    with pytest.raises(RuntimeError, match=r"^get_rank\(\) called outside"):
        dist.get_rank()
    assert not dist.is_initialized()


def test_a_topology_of_another_rank_count_is_refused():
    with pytest.raises(InputError) as raised:
        dist.spawn(lambda rank: None, 4, "dgx_h100")
    assert str(raised.value) == ("dist.spawn: topology: expected a topology of 4 ranks "
                                 "(world_size), got dgx_h100 with 8; pass world_size=8 or a "
                                 "topology of 4 ranks")


def test_algorithms_are_checked_by_name_and_collective():
    with pytest.raises(InputError, match=r"got 'rign'; did you mean 'ring'\?$"):
        dist.spawn(lambda rank: None, 2, algorithm="rign")
    with pytest.raises(InputError) as raised:
        dist.spawn(lambda rank: dist.broadcast(np.zeros(2), 0), 4, algorithm="halving_doubling")
    assert str(raised.value) == (
        "dist.spawn: algorithm: 'halving_doubling' has no broadcast (those with one: ring, "
        "direct, binomial_tree, tree); name one per collective instead, such as "
        "algorithm={'allreduce': 'halving_doubling'}")


def test_reduce_op_has_torchs_names():
    assert {op.name: op.value for op in ReduceOp} == {
        "SUM": ModelOp.SUM, "PRODUCT": ModelOp.PROD, "MIN": ModelOp.MIN, "MAX": ModelOp.MAX,
        "AVG": ModelOp.AVG}


def test_tensors_beyond_the_memory_budget_are_refused(monkeypatch):
    from simulator import limits
    from simulator.errors import InputError

    monkeypatch.setattr(limits, "PROXY_BUDGET_BYTES", 1 << 20)

    def big(rank):
        dist.all_reduce(np.zeros(1 << 17, dtype=np.float32))  # 512 KiB each, 1.5 MiB in all

    with pytest.raises(InputError) as caught:
        dist.spawn(big, 3)
    assert str(caught.value) == ("dist.spawn: all_reduce: 3 ranks × 524288 bytes is 1 MiB to "
                                 "move and check, more than 1 MiB; use smaller tensors (or a "
                                 "scenario with verify: false to time large sizes)")


@pytest.mark.parametrize("call, message", [
    (lambda: dist.all_reduce(np.array([True, False])),
     "tensor: expected an array of float16, bfloat16, float32, float64, int32, int64, got bool"),
    (lambda: dist.all_reduce(torch.tensor([True])),
     "tensor: expected a tensor of float16, bfloat16, float32, float64, int32, int64, got torch.bool"),
    (lambda: dist.all_reduce([1.0, 2.0]),
     "tensor: expected a numpy array or a torch tensor, got list"),
    (lambda: dist.all_reduce(np.zeros(2), op="sum"),
     "op: expected a simulator.dist.ReduceOp (SUM, PRODUCT, MIN, MAX, AVG), got 'sum'"),
    (lambda: dist.all_gather(np.zeros((4, 2)), np.zeros(2)),
     "tensor_list: expected a list of 4 tensors, got ndarray"),
])
def test_a_careless_argument_is_the_ranks_type_error(call, message):
    """Bool arrays, Python lists and op strings, which torch.distributed refuses too (issue 23)."""
    def step(rank: int) -> None:
        if rank == 2:
            call()
        dist.barrier()

    with pytest.raises(RankError) as raised:
        dist.spawn(step, 4)
    assert str(raised.value) == f"rank 2 raised TypeError: {message}"
    assert isinstance(raised.value.__cause__, TypeError)


SPECIAL = np.array([np.nan, 1.0, np.inf, np.inf, 2.0])
"""Rank 1's tensor: a NaN, an infinity the others' finite values cannot cancel, and an infinity
rank 2's -inf meets (inf - inf is NaN, in any order)."""


def special(rank: int) -> np.ndarray:
    if rank == 1:
        return SPECIAL.copy()
    if rank == 2:
        return np.array([1.0, 1.0, 1.0, -np.inf, 2.0])
    return np.array([1.0, 1.0, 1.0, 1.0, 2.0])


@pytest.mark.parametrize("algorithm", ["ring", "direct", "tree", "halving_doubling"])
@pytest.mark.parametrize("op, expected", [
    (ReduceOp.SUM, [np.nan, 4.0, np.inf, np.nan, 8.0]),
    (ReduceOp.MAX, [np.nan, 1.0, np.inf, np.inf, 2.0]),
    (ReduceOp.MIN, [np.nan, 1.0, 1.0, -np.inf, 2.0]),
    (ReduceOp.AVG, [np.nan, 1.0, np.inf, np.nan, 2.0]),
])
def test_nan_and_inf_propagate_to_every_rank_as_torch_gives_them(algorithm, op, expected):
    """A NaN or an infinity is data, as in torch.distributed: every rank ends with IEEE's
    result, whichever algorithm reduced it, the call is verified (NaN matching NaN), and numpy's
    warnings about the arithmetic do not leak (issue 23: NaN inputs tracebacked)."""
    def step(rank: int) -> list[float]:
        tensor = special(rank)
        dist.all_reduce(tensor, op=op)
        return tensor.tolist()

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = dist.spawn(step, 4, algorithm=algorithm)
    for returned in result.returns:
        np.testing.assert_array_equal(returned, expected)  # NaN equals NaN here
    assert result.calls[0].verified is True


def test_a_nan_is_broadcast_and_gathered_as_any_value():
    def step(rank: int) -> tuple[list[float], list[list[float]]]:
        tensor = special(rank)
        dist.broadcast(tensor, src=1)
        gathered = [np.zeros(1) for _ in range(4)]
        dist.all_gather(gathered, np.array([np.nan if rank == 3 else float(rank)]))
        return tensor.tolist(), [g.tolist() for g in gathered]

    result = dist.spawn(step, 4)
    for broadcast, gathered in result.returns:
        np.testing.assert_array_equal(broadcast, SPECIAL)
        np.testing.assert_array_equal(gathered, [[0.0], [1.0], [2.0], [np.nan]])
    assert [call.verified for call in result.calls] == [True, True]


@pytest.mark.parametrize("got, verified, worst", [
    ([np.nan, np.inf, 3.0], True, 0.0),
    ([1.0, np.inf, 3.0], False, np.inf),     # a number where NaN is due
    ([np.nan, -np.inf, 3.0], False, np.inf),  # the wrong infinity
    ([np.nan, np.inf, np.nan], False, np.inf),  # NaN where a number is due
    ([np.nan, np.inf, 3.5], False, 0.5),
])
def test_the_check_wants_the_same_special_values(got, verified, worst):
    """The model's check, which verified above relies on: a non-finite value matches only the
    same one, NaN matching NaN; a finite one stays within its tolerance (here none: a max)."""
    inputs = np.array([[np.nan, np.inf, 3.0], [1.0, 2.0, 3.0]])
    expected = Collective.ALLREDUCE.expected(inputs, ModelOp.MAX, [slice(0, 2), slice(2, 3)])
    buffers = np.array([got, [np.nan, np.inf, 3.0]])
    checked = expected.check(buffers)
    assert (checked.verified, checked.max_abs_error) == (verified, worst)


def test_tensors_of_no_elements_meet_move_nothing_and_take_no_time():
    """As torch.distributed (NCCL returns at once for a count of 0): the call is accepted and
    recorded, nothing runs, and the ranks still meet, so a rank with elements is a mismatch."""
    def step(rank: int) -> tuple[tuple[int, ...], ...]:
        empty = np.zeros((0, 3), dtype=np.float32)
        dist.all_reduce(empty)
        gathered = [torch.zeros(0) for _ in range(4)]
        dist.all_gather(gathered, torch.zeros(0))
        output = np.zeros(0)
        dist.reduce_scatter_tensor(output, np.zeros(0))
        dist.all_reduce(np.ones(2, dtype=np.float32))
        return empty.shape, tuple(g.shape for g in gathered), output.shape

    result = dist.spawn(step, 4, SWITCH4)
    assert result.returns == (((0, 3), (torch.Size([0]),) * 4, (0,)),) * 4
    assert [(c.index, c.name, c.size_bytes, c.algorithm, c.protocol, c.time_s, c.verified)
            for c in result.calls[:3]] == [
        (0, "all_reduce", 0, "none", None, 0.0, None),
        (1, "all_gather", 0, "none", None, 0.0, None),
        (2, "reduce_scatter_tensor", 0, "none", None, 0.0, None)]
    assert result.time_s == result.calls[3].time_s > 0

    def uneven(rank: int) -> None:
        dist.all_reduce(np.zeros(0 if rank == 3 else 2))

    with pytest.raises(CollectiveMismatch) as raised:
        dist.spawn(uneven, 4)
    assert str(raised.value) == ("collective #0 mismatch: ranks 0-2 called "
                                 "all_reduce(float64[2]); rank 3 called all_reduce(float64[0])")


@pytest.mark.parametrize("code, said", [(3, "sys.exit(3)"), (None, "sys.exit()"),
                                        ("bye", "sys.exit('bye')")])
def test_a_rank_calling_sys_exit_is_a_rank_error_and_the_caller_goes_on(code, said):
    """sys.exit in a rank ends that rank only, as an error naming it (issue 23: a traceback)."""
    def step(rank: int) -> None:
        dist.barrier()
        if rank == 1:
            sys.exit(code)
        dist.barrier()

    with pytest.raises(RankError) as raised:
        dist.spawn(step, 4)
    assert str(raised.value) == f"rank 1 called {said}"
    assert isinstance(raised.value.__cause__, SystemExit)
    finish()


def test_an_exception_without_a_message_reads_as_its_name():
    def step(rank: int) -> None:
        if rank == 2:
            raise KeyboardInterrupt
        dist.barrier()

    with pytest.raises(RankError) as raised:
        dist.spawn(step, 3)
    assert str(raised.value) == "rank 2 raised KeyboardInterrupt"


def test_more_ranks_than_threads_allow_are_refused_before_any_thread_starts():
    ran = []
    with pytest.raises(InputError) as raised:
        dist.spawn(ran.append, 65536)
    assert str(raised.value) == (
        "dist.spawn: world_size: expected at most 16384 ranks, one thread each (a process here "
        "runs out of memory maps near 22,400 threads; simulator.limits.MAX_DIST_RANKS), got "
        "65536")
    assert ran == [] and not ranks_running()


def test_the_limit_is_inclusive(monkeypatch):
    from simulator import limits

    monkeypatch.setattr(limits, "MAX_DIST_RANKS", 4)
    assert dist.spawn(lambda rank: rank, 4).returns == (0, 1, 2, 3)
    with pytest.raises(InputError, match=r"expected at most 4 ranks, .* got 5$"):
        dist.spawn(lambda rank: rank, 5)


def test_a_thread_the_machine_refuses_stops_the_run_before_any_rank_runs(monkeypatch):
    """Below the limit a process may still run out (other threads of its own): no rank's code
    runs unless every rank's thread started."""
    class Refused(threading.Thread):
        def start(self) -> None:
            if self.name == "dist-rank-2":
                raise RuntimeError("can't start new thread")
            super().start()

    monkeypatch.setattr(threading, "Thread", Refused)
    ran = []
    with pytest.raises(InputError) as raised:
        dist.spawn(ran.append, 4)
    assert str(raised.value) == ("dist.spawn: world_size: could not start the thread of rank 2 "
                                 "of 4 (can't start new thread), so no rank ran; use fewer "
                                 "ranks, or end threads this process no longer needs")
    assert ran == [] and not ranks_running()


@pytest.mark.parametrize("fn, timeout, field, message", [
    (None, 1.0, "fn", "expected a function of the rank, got None"),
    (print, 0, "timeout", "expected seconds > 0 (a number or a timedelta), or None for no "
                          "watchdog, got 0"),
    (print, float("inf"), "timeout", "expected seconds > 0 (a number or a timedelta), or None "
                                     "for no watchdog, got inf"),
    (print, "5s", "timeout", "expected seconds > 0 (a number or a timedelta), or None for no "
                             "watchdog, got '5s'"),
    (print, timedelta(0), "timeout", "expected seconds > 0 (a number or a timedelta), or None "
                                     "for no watchdog, got 0.0"),
])
def test_spawns_own_arguments_are_checked(fn, timeout, field, message):
    with pytest.raises(InputError) as raised:
        dist.spawn(fn, 2, timeout=timeout)
    assert str(raised.value) == f"dist.spawn: {field}: {message}"


def test_a_rank_stuck_outside_the_simulator_is_named_with_the_ranks_waiting_for_it():
    """Rank 1 waits on a barrier no other rank reaches, ranks 0, 2, 3 in the second all_reduce
    (issue 23: this hung forever). The watchdog names both sides and where rank 1 sits."""
    stuck = threading.Barrier(2)

    def step(rank: int) -> None:
        dist.all_reduce(np.zeros(4, dtype=np.float32))
        if rank == 1:
            stuck.wait()
        dist.all_reduce(np.zeros(4, dtype=np.float32))

    line = step.__code__.co_firstlineno + 3
    try:
        with pytest.raises(dist.Stalled) as raised:
            dist.spawn(step, 4, timeout=0.1)
        assert str(raised.value) == (
            "spawn stalled for timeout=0.1 s: rank 1 has not returned and is not in a collective "
            f"(still in Barrier.wait, called at test_dist.py:{line} in "
            "test_a_rank_stuck_outside_the_simulator_is_named_with_the_ranks_waiting_for_it."
            "<locals>.step); ranks 0, 2, 3 wait in collective #1, all_reduce(float32[4]), for "
            "rank 1")
        assert (raised.value.idle, raised.value.waiting) == ((1,), (0, 2, 3))
        assert ranks_running() == ["dist-rank-1"]  # the watchdog cannot free it: the test does
    finally:
        finish(stuck.abort)


def test_every_rank_stuck_or_returned_is_named():
    """No rank in a collective at all: three ranks on a barrier of four, two returned."""
    stuck = threading.Barrier(4)

    def step(rank: int) -> None:
        if rank not in (2, 3):
            stuck.wait()

    line = step.__code__.co_firstlineno + 2
    try:
        with pytest.raises(dist.Stalled) as raised:
            dist.spawn(step, 5, timeout=timedelta(milliseconds=100))
        assert str(raised.value) == (
            "spawn stalled for timeout=0.1 s: ranks 0, 1, 4 have not returned and are not in a "
            f"collective (still in Barrier.wait, called at test_dist.py:{line} in "
            "test_every_rank_stuck_or_returned_is_named.<locals>.step); ranks 2, 3 returned")
        assert (raised.value.idle, raised.value.waiting) == ((0, 1, 4), ())
    finally:
        finish(stuck.abort)


def test_a_rank_blocked_in_c_is_named_at_its_own_line():
    """A lock's acquire (as a sleep) runs no Python: the rank is named at the line that called
    it. Ranks 1, 2 wait in a barrier; the ranks 3, 4 stuck at another line are named apart."""
    held = threading.Lock()
    held.acquire()

    def step(rank: int) -> None:
        if rank == 0:
            held.acquire()
            held.release()  # once the test releases it: the next rank gets it
        elif rank > 2:
            held.acquire()
            held.release()
        dist.barrier()

    first = step.__code__.co_firstlineno
    where = "test_a_rank_blocked_in_c_is_named_at_its_own_line.<locals>.step"
    try:
        with pytest.raises(dist.Stalled) as raised:
            dist.spawn(step, 5, timeout=0.1)
        assert str(raised.value) == (
            "spawn stalled for timeout=0.1 s: rank 0 has not returned and is not in a collective "
            f"(still at test_dist.py:{first + 2} in {where}); ranks 3, 4 have not returned and "
            f"are not in a collective (still at test_dist.py:{first + 5} in {where}); ranks 1, 2 "
            "wait in collective #0, barrier(), for ranks 0, 3, 4")
    finally:
        finish(held.release)


def busy(seconds: float) -> None:
    """Compute for ``seconds`` of this thread's CPU time: as much work however loaded the
    machine."""
    clock = time.thread_time()
    while time.thread_time() - clock < seconds:
        pass


class Lockstep:
    """The watchdog's clock in place of ``watchdog.watch_clock``: time passes only by steps of
    work. Each time the watchdog reads it, one :meth:`step` runs whole (``cpu_s`` of CPU time on
    the thread that waits for its turn there), and only then does the clock move on by
    ``step_s``: between any two looks a step ran, so whether the watchdog fires depends on what
    the ranks did, never on how a loaded machine schedules them. After ``steps`` steps the clock
    stands still."""

    def __init__(self, steps: int, step_s: float, cpu_s: float) -> None:
        self.now, self.left, self.step_s, self.cpu_s = 0.0, steps, step_s, cpu_s
        self.turn, self.done = threading.Semaphore(0), threading.Semaphore(0)

    def __call__(self) -> float:
        if self.left:
            self.left -= 1
            self.turn.release()
            assert self.done.acquire(timeout=60), "no step came"  # a broken test, never a race
            self.now += self.step_s
        return self.now

    def step(self) -> None:
        assert self.turn.acquire(timeout=60), "the watchdog stopped reading its clock"
        busy(self.cpu_s)
        self.done.release()


def test_a_rank_computing_longer_than_the_timeout_is_not_stalled(monkeypatch):
    """The watchdog fires only when nothing moves: a rank busy for 3 timeouts in Python, then
    waiting (still) on a thread of its own that computes for as long, is waited for. Its clock
    moves half a timeout for each 10 ms of CPU time they spend (Lockstep): on the machine's
    clock, a loaded machine that gave them no CPU for 0.1 s made the rank look still."""
    clock = Lockstep(steps=12, step_s=0.05, cpu_s=0.01)
    monkeypatch.setattr(watchdog, "watch_clock", clock)

    def step(rank: int) -> int:
        for _ in range(6):
            clock.step()
        helper = threading.Thread(target=lambda: [clock.step() for _ in range(6)])
        helper.start()
        helper.join()
        dist.barrier()
        return rank

    assert dist.spawn(step, 1, timeout=0.1).returns == (0,)
    assert (clock.left, clock.now) == (0, pytest.approx(0.6))  # 6 timeouts went by


def test_the_kernel_says_which_threads_wait():
    """What keeps a rank starved of a CPU from being called still: its state is R, as this
    thread's is while it runs; a thread waiting on an event is not."""
    from simulator.distributed.watchdog import _runnable

    event = threading.Event()
    waiting = threading.Thread(target=event.wait)
    waiting.start()
    try:
        while waiting.native_id is None or _runnable(waiting):  # until it sleeps in the wait
            time.sleep(0.001)
        assert _runnable(threading.current_thread()) is True
    finally:
        event.set()
        waiting.join()


def test_a_failing_rank_does_not_wait_for_one_stuck_outside_the_simulator():
    """Rank 0 waits for rank 1 on a barrier of their own; rank 1 raises first. spawn raises at
    once; it joined ranks stuck outside before (issue 23: this hung)."""
    pair = threading.Barrier(2)

    def step(rank: int) -> None:
        if rank == 1:
            raise ValueError("no barrier for me")
        pair.wait()

    try:
        with pytest.raises(RankError, match=r"^rank 1 raised ValueError: no barrier for me$"):
            dist.spawn(step, 2, timeout=None)
    finally:
        finish(pair.abort)


def test_all_to_all_gives_rank_r_every_ranks_tensor_r_in_rank_order():
    def step(rank: int) -> tuple[list[list[float]], list[list[int]]]:
        inputs = [np.array([10.0 * rank + j, -j], dtype=np.float32) for j in range(4)]
        outputs = [np.zeros(2, dtype=np.float32) for _ in range(4)]
        dist.all_to_all(outputs, inputs)
        single = torch.zeros(8, 3, dtype=torch.int64)  # 4 blocks of 2 rows along dimension 0
        dist.all_to_all_single(single, torch.arange(24).reshape(8, 3) + 100 * rank,
                               output_split_sizes=[2, 2, 2, 2])
        return [o.tolist() for o in outputs], single.tolist()

    result = dist.spawn(step, 4, SWITCH4)
    for rank, (outputs, single) in enumerate(result.returns):
        assert outputs == [[10.0 * j + rank, -rank] for j in range(4)]
        # rows 2r and 2r+1 of rank j's arange(24).reshape(8, 3) + 100 j, for j = 0 .. 3
        assert single == [[100 * j + 6 * rank + 3 * row + k for k in range(3)]
                          for j in range(4) for row in (0, 1)]
    lists, single = result.calls
    assert (lists.name, lists.collective, lists.size_bytes, lists.algorithm, lists.verified) == (
        "all_to_all", Collective.ALLTOALL, 32, "direct", True)
    assert (single.name, single.size_bytes, single.algorithm, single.verified) == (
        "all_to_all_single", 192, "direct", True)
    # direct on a switch: two 1 us hops, each rank's 3 blocks sharing its uplink at 25 GB/s
    assert lists.time_s == pytest.approx(2e-6 + 3 * 8 / 25e9, rel=1e-12)
    assert single.time_s == pytest.approx(2e-6 + 3 * 48 / 25e9, rel=1e-12)


def test_all_to_all_runs_pairwise_when_named():
    def step(rank: int) -> None:
        dist.all_to_all_single(np.zeros(4, dtype=np.float32), np.ones(4, dtype=np.float32))

    [call] = dist.spawn(step, 4, SWITCH4, algorithm={"alltoall": "pairwise"}).calls
    assert (call.algorithm, call.verified) == ("pairwise", True)
    assert call.time_s == pytest.approx(3 * (2e-6 + 4 / 25e9), rel=1e-12)  # XOR 1, 2, 3


def test_mismatched_all_to_all_shapes_name_every_rank():
    def step(rank: int) -> None:
        n = 3 if rank == 2 else 2
        dist.all_to_all([np.zeros(n) for _ in range(3)], [np.ones(n) for _ in range(3)])

    with pytest.raises(CollectiveMismatch) as raised:
        dist.spawn(step, 3)
    assert str(raised.value) == (
        "collective #0 mismatch: ranks 0, 1 called all_to_all([3 × float64[2]], [3 × "
        "float64[2]]); rank 2 called all_to_all([3 × float64[3]], [3 × float64[3]])")


@pytest.mark.parametrize("call, message", [
    (lambda: dist.all_to_all_single(np.zeros(4), np.zeros(4), input_split_sizes=[1, 3]),
     "input_split_sizes: unequal splits are not modelled (the simulated all-to-all moves equal "
     "blocks): expected None or [2, 2], got [1, 3]"),
    (lambda: dist.all_to_all_single(np.zeros(4), np.zeros(3)),
     "output: expected float64[3] (input's), got float64[4]"),
    (lambda: dist.all_to_all_single(np.zeros(3), np.zeros(3)),
     "input: expected a first dimension that world_size 2 divides, got float64[3]"),
    (lambda: dist.all_to_all([np.zeros(2)] * 2, [np.zeros(2), np.zeros(3)]),
     "input_tensor_list[1]: expected float64[2], got float64[3]"),
    (lambda: dist.all_to_all([np.zeros(2)], [np.zeros(2)] * 2),
     "output_tensor_list: expected 2 tensors (world_size), got 1"),
])
def test_a_bad_all_to_all_argument_is_the_ranks_value_error(call, message):
    def step(rank: int) -> None:
        if rank == 1:
            call()
        dist.barrier()

    with pytest.raises(RankError) as raised:
        dist.spawn(step, 2)
    assert str(raised.value) == f"rank 1 raised ValueError: {message}"


def _every_collective(rank: int) -> tuple[np.ndarray, ...]:
    """Each collective on 4,096 int32 elements a rank (beyond a 256-element proxy): the
    tensors they leave."""
    n, world = 4096, dist.get_world_size()
    mine = ((np.arange(n, dtype=np.int64) * 7 + rank * 13) % 101 - 50).astype(np.int32)
    summed = mine.copy()
    dist.all_reduce(summed)
    scattered = np.zeros(n // world, dtype=np.int32)
    dist.reduce_scatter_tensor(scattered, mine)
    gathered = np.zeros(n * world, dtype=np.int32)
    dist.all_gather_into_tensor(gathered, mine)
    exchanged = np.zeros(n, dtype=np.int32)
    dist.all_to_all_single(exchanged, mine)
    sent = mine.copy()
    dist.broadcast(sent, src=2)
    reduced = mine.copy()
    dist.reduce(reduced, dst=1, op=ReduceOp.MAX)
    return summed, scattered, gathered, exchanged, sent, reduced


def test_a_proxy_payload_gives_the_same_tensors_and_times_as_the_whole_one():
    # the schedule runs on 256 elements, timed at 4,096, and the ranks get numpy's outcome:
    # on integers exactly what moving and reducing the whole tensors gives
    whole = dist.spawn(_every_collective, 4, SWITCH4, proxy_elements=None)
    proxy = dist.spawn(_every_collective, 4, SWITCH4, proxy_elements=256)
    for a, b in zip(whole.returns, proxy.returns, strict=True):
        for x, y in zip(a, b, strict=True):
            assert x.dtype == y.dtype and np.array_equal(x, y)
    assert [c.time_s for c in proxy.calls] == [c.time_s for c in whole.calls]
    assert all(c.verified for c in whole.calls) and all(c.verified for c in proxy.calls)
    # and that is numpy's: rank r's chunk of the sum, the max on rank 1 only
    inputs = np.stack([((np.arange(4096) * 7 + r * 13) % 101 - 50) for r in range(4)])
    assert np.array_equal(proxy.returns[3][1], inputs.sum(axis=0)[3 * 1024:4 * 1024])
    assert np.array_equal(proxy.returns[1][5], inputs.max(axis=0))
    assert np.array_equal(proxy.returns[0][5], inputs[0])  # the others keep theirs


def test_proxy_elements_must_be_a_whole_number():
    with pytest.raises(InputError) as error:
        dist.spawn(lambda rank: None, 2, proxy_elements=0)
    assert str(error.value) == ("dist.spawn: proxy_elements: expected a whole number "
                                "≥ 1 or None, got 0")
