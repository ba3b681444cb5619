"""The vectorised engine's data (simulator.engine.buffers): the loop of slices over a few
messages gives the general path's bits, on messages whose spans meet (several into one
receiver, copies and reductions mixed) and on in-switch rounds; whole runs of every algorithm
give the same buffers and frame with either path; a timing-only payload moves nothing; and
the window's followers of one message are what the general lookup lists."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from simulator import simulate
from simulator.engine import buffers as buffers_module
from simulator.engine import vector
from simulator.engine.buffers import Buffers
from simulator.engine.replayed import Log
from simulator.engine.window import Followers, Snapshots, Window
from simulator.model.reduction import ReduceOp

RANKS, WIDTH = 5, 24
ALL_GENERAL, ALL_LOOPED = 0, 1 << 30
"""``Buffers.few`` that sends every post and receive down the general path, and down the loop."""


def held_of(src, dst, start, length, reduce, posted_after=None, receive_previous=None,
            switches=False):
    """The parts of a run's ``Held`` that :class:`Buffers` reads, for the messages given (spans
    ``start`` to ``start + length`` on both sides), at schedule number 0 onwards."""
    size = len(src)
    none = np.full(size, -1, dtype=np.int64)
    window = Window()
    window.append({"x": np.zeros(size), **Snapshots.columns(size)})
    schedule = SimpleNamespace(
        src=np.array(src), dst=np.array(dst), reduce=np.array(reduce, dtype=bool),
        posted_after=none if posted_after is None else np.array(posted_after),
        receive_previous=none if receive_previous is None else np.array(receive_previous))
    view = (np.array(start, dtype=np.int64), np.array(length, dtype=np.int64))
    return SimpleNamespace(s=schedule, send_view=view, recv_view=view, window=window,
                           switch_delay=np.zeros(1) if switches else None)


def replayed(monkeypatch, few, held, steps, compiled=False, op=ReduceOp.SUM, dtype="float32",
             data=None):
    """The ranks' buffers after ``steps`` (("post" or "receive", window positions) each) with
    ``Buffers.few`` at ``few``, or logged and replayed in numba's loops (``compiled``, flushed
    after each step but the last two, from a store of 4 elements, so that it compacts with
    data and sums on their way): float32 data whose sums round (or ``data``), so that any
    change in the order of two reductions of one element shows."""
    monkeypatch.setattr(Buffers, "few", few)
    monkeypatch.setattr(Log, "STORE", 4)
    if data is None:
        data = (np.random.default_rng(1).standard_normal((RANKS, WIDTH)) * 8).astype(dtype)
    data = data.copy()
    held.window["batch"][:], held.window["offset"][:] = -1, 0
    buffers = Buffers(held, data, op, replayed=compiled)
    assert (buffers.log is not None) == compiled
    for k, (kind, messages) in enumerate(steps):
        (buffers.snapshot if kind == "post" else buffers.combine)(np.array(messages))
        if k < len(steps) - 2:
            buffers.flush()
    buffers.flush()
    if compiled:
        assert buffers.log.empty()  # all received, every sum taken
        assert len(buffers.log.store) > 4 or not steps  # it grew, compacting
    else:
        assert buffers.snapshots.arrays == {} and buffers.sums == {}
    return data


def both_paths(monkeypatch, held, steps, op=ReduceOp.SUM, dtype="float32", data=None):
    """The buffers ``steps`` leave by the general path, asserted equal, bit for bit (the sign
    of a zero included), to the loop's and to the compiled replay's."""
    general = replayed(monkeypatch, ALL_GENERAL, held, steps, op=op, dtype=dtype, data=data)
    for few, compiled in ((ALL_LOOPED, False), (ALL_GENERAL, True)):
        other = replayed(monkeypatch, few, held, steps, compiled, op, dtype, data)
        assert other.tobytes() == general.tobytes()
    return general


@pytest.mark.parametrize(("op", "dtype"), [
    (ReduceOp.SUM, "float32"), (ReduceOp.PROD, "float64"), (ReduceOp.MAX, "float32"),
    (ReduceOp.MIN, "float64"), (ReduceOp.SUM, "int32"), (ReduceOp.PROD, "int64")])
def test_the_loop_gives_the_general_paths_bits_where_spans_meet(monkeypatch, op, dtype):
    rng = np.random.default_rng(0)
    size = 60
    start = rng.integers(0, WIDTH - 8, size)
    length = rng.integers(0, 9, size)
    src, dst = rng.integers(0, RANKS, size), rng.integers(0, RANKS, size)
    dst[:20] = 3  # twenty messages into one rank, most of them onto the same elements
    start[:20] = rng.integers(0, 4, 20)
    reduce = rng.random(size) < 0.7
    held = held_of(src, dst, start, length, reduce)
    order = rng.permutation(size)
    steps = [("post", order[i:i + 7].tolist()) for i in range(0, size, 7)]
    received = rng.permutation(size)  # across postings, several of one posting at once
    steps += [("receive", received[i:i + 6].tolist()) for i in range(0, size, 6)]
    before = replayed(monkeypatch, ALL_GENERAL, held, [], op=op, dtype=dtype)
    after = both_paths(monkeypatch, held, steps, op, dtype)
    assert not np.array_equal(after, before)  # the messages did move data


def test_the_loop_gives_the_general_paths_bits_on_switch_rounds(monkeypatch):
    # round 0 on switch endpoint -1: ranks 0-3 upload (0-3, in chain order), its last upload
    # releases a copy down to each (4-7); round 1: the uploads 8-11 sum on -1, whose sum goes
    # on to endpoint -2 (12, between two switches), where rank 3 adds to it (13) before the
    # copies down from -2 (14-17)
    src = [0, 1, 2, 3, -1, -1, -1, -1, 0, 1, 2, 3, -1, 3, -2, -2, -2, -2]
    dst = [-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, -2, -2, 0, 1, 2, 3]
    start = [0] * 8 + [8] * 10
    posted = [-1] * 4 + [3] * 4 + [-1] * 4 + [11, -1] + [13] * 4
    previous = [-1, 0, 1, 2] + [-1] * 4 + [-1, 8, 9, 10] + [-1, 12] + [-1] * 4
    reduce = [False] * 18
    held = held_of(src, dst, start, [8] * 18, reduce, posted, previous, switches=True)
    steps = [("post", [0, 1, 2]), ("post", [3, 8, 9, 10, 11]), ("receive", [0, 1]),
             ("receive", [2, 3]), ("post", [4, 5, 6, 7]), ("receive", [8, 9, 10, 11]),
             ("post", [12, 13]), ("receive", [4, 12]), ("receive", [13]),
             ("post", [14, 15, 16, 17]), ("receive", [5, 6, 7, 14]), ("receive", [15, 16, 17])]
    after = both_paths(monkeypatch, held, steps)
    data = replayed(monkeypatch, ALL_GENERAL, held, [])
    total = data[0, 8:16] + data[1, 8:16] + data[2, 8:16] + data[3, 8:16] + data[3, 8:16]
    np.testing.assert_array_equal(after[:4, 8:16], np.tile(total, (4, 1)))


@pytest.fixture
def runs(monkeypatch):
    """Each vectorised run's name and its ranks' buffers (flat) as it finishes."""
    finished: list[tuple[str, np.ndarray]] = []
    run = vector._Run.run

    def kept(self):
        timing = run(self)
        finished.append((self.name, self.buffers.flat.copy()))
        replays.append((self.buffers.log is not None, timing.skipped))
        return timing

    replays: list[tuple[bool, int]] = []
    monkeypatch.setattr(vector._Run, "replays", replays, raising=False)

    monkeypatch.setattr(vector._Run, "run", kept)
    return finished


def test_every_algorithm_moves_the_same_bits_either_way(monkeypatch, runs):
    scenario = {"topology": {"preset": "dgx_h100", "nodes": 2, "gpus_per_node": 4},
                "algorithms": "all", "sizes": [4096, 3 << 20], "engine": "vector",
                "dtype": "float16"}
    frames, buffers = [], []
    for few in (ALL_GENERAL, ALL_LOOPED, Buffers.few):
        monkeypatch.setattr(Buffers, "few", few)
        frames.append(simulate(scenario))
        buffers.append(list(runs))
        runs.clear()
    assert frames[0].verified.all() and len(buffers[0]) > 10
    for frame, kept in zip(frames[1:], buffers[1:], strict=True):
        pd.testing.assert_frame_equal(frame, frames[0], check_exact=True)
        assert [name for name, _ in kept] == [name for name, _ in buffers[0]]
        for (_, mine), (_, theirs) in zip(kept, buffers[0], strict=True):
            np.testing.assert_array_equal(mine, theirs)


WHOLE_RUNS = {
    "dgx, all, float32 sum": {"topology": {"preset": "dgx_h100", "nodes": 2,
                                           "gpus_per_node": 4},
                              "algorithms": "all", "sizes": [4096, 3 << 20],
                              "engine": "vector"},
    "dgx, all, int32 max": {"topology": {"preset": "dgx_h100", "nodes": 2, "gpus_per_node": 4},
                            "algorithms": "all", "sizes": [3 << 20], "engine": "vector",
                            "op": "max", "dtype": "int32"},
    "switch, trees jumping": {"topology": {"kind": "switch", "ranks": 8,
                                           "bandwidth": "25GB/s", "latency": "1us"},
                              "algorithms": ["tree", "double_binary_tree"],
                              "sizes": ["64MiB"]},
}
"""Whole runs for the compiled replay: every algorithm on two DGX H100 (NVLS's in-switch sums,
windows of blocks dropped as they are received), with a sum and with another op and dtype, and
NCCL's trees on a switch, whose steady periods the fast-forward jumps (replaying their data)."""


@pytest.mark.parametrize("scenario", list(WHOLE_RUNS))
def test_data_replayed_compiled_are_the_numpy_paths_bits(monkeypatch, runs, scenario):
    # every run's data logged (a replay every 64 messages and before every drop) against none;
    # the ring a step a block (a window dropping the received ones)
    flushes = []
    flush = Log.flush

    def counted(self):
        flushes.append(len(self.kinds))
        flush(self)

    monkeypatch.setattr(Log, "flush", counted)
    drops = []
    drop = Window.drop

    def dropped(self, messages):
        drops.append(messages)
        drop(self, messages)

    monkeypatch.setattr(Window, "drop", dropped)
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 8)  # a ring step
    monkeypatch.setattr(Log, "STORE", 4)  # compactions with data and sums on their way
    frames, buffers, replays = [], [], vector._Run.replays
    for threshold, limit in ((1 << 62, Log.LIMIT), (0, 64)):
        monkeypatch.setattr(buffers_module, "REPLAYED_MESSAGES", threshold)
        monkeypatch.setattr(Log, "LIMIT", limit)
        frames.append(simulate(WHOLE_RUNS[scenario]))
        buffers.append(list(runs))
        runs.clear()
    assert frames[0].verified.all() and len(buffers[0]) >= 2
    pd.testing.assert_frame_equal(frames[1], frames[0], check_exact=True)
    assert [name for name, _ in buffers[1]] == [name for name, _ in buffers[0]]
    for (_, mine), (_, theirs) in zip(buffers[1], buffers[0], strict=True):
        np.testing.assert_array_equal(mine, theirs)
    numpy, logged = replays[:len(buffers[0])], replays[len(buffers[0]):]
    assert not any(log for log, _ in numpy) and all(log for log, _ in logged)
    assert len([n for n in flushes if n]) > 2 * len(logged)  # replays in the middle of runs
    if "jumping" in scenario:  # whole schedules, periods jumped
        assert all(skips > 0 for _, skips in logged)
    else:
        assert len(drops) > 20  # windows of blocks dropped their received messages


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # numpy's, NaNs
@pytest.mark.parametrize(("op", "dtype", "values"), [
    (ReduceOp.MAX, "float32", [0.0, -0.0]), (ReduceOp.MIN, "float64", [-0.0, 0.0]),
    (ReduceOp.MAX, "float64", [np.nan, 1.0, -0.0]), (ReduceOp.SUM, "int32", [2**30, 2**31 - 1]),
    (ReduceOp.PROD, "int32", [46341, -65537]), (ReduceOp.PROD, "int64", [2**40, 3**30])])
def test_the_replay_keeps_numpys_ties_nans_and_wrapping(monkeypatch, op, dtype, values):
    # every rank's elements drawn from ``values`` (a tie of +0 and -0, a NaN, integers that
    # overflow when combined); ranks 0-3 send their span to rank 4, in order, reducing
    rng = np.random.default_rng(5)
    data = rng.choice(np.array(values, dtype=dtype), (RANKS, WIDTH))
    held = held_of([0, 1, 2, 3], [4, 4, 4, 4], [0, 0, 8, 0], [WIDTH, 8, 16, WIDTH],
                   [True] * 4)
    after = both_paths(monkeypatch, held, [("post", [0, 1, 2, 3]), ("receive", [0, 1]),
                                           ("receive", [2, 3])], op, dtype, data)
    assert after.tobytes() != data.tobytes()  # some element changed, if only its zero's sign


@pytest.mark.parametrize("compiled", [False, True])
def test_a_copy_down_of_a_round_with_no_sum_is_an_error_either_way(monkeypatch, compiled):
    # message 0 copies down the sum of a round whose last upload (1) was never received
    held = held_of([-1, 0], [0, -1], [0, 0], [4, 4], [False, False], [1, -1], [-1, -1],
                   switches=True)
    held.window["batch"][:] = -1
    buffers = Buffers(held, np.zeros((RANKS, WIDTH), dtype=np.float32), ReduceOp.SUM,
                      replayed=compiled)
    with pytest.raises(KeyError):
        buffers.snapshot(np.array([0]))
        buffers.flush()


def test_the_table_of_sums_finds_what_was_added_and_not_removed():
    # keys that collide on purpose (multiples of a power of two) and at random, added and
    # removed in a random order past two growths, against a dict
    loops = pytest.importorskip("simulator.engine.replay_loops")
    rng = np.random.default_rng(3)
    rows, state, kept = loops.table(4), np.zeros(2, dtype=np.int64), {}
    keys = np.concatenate([np.arange(0, 1 << 16, 1 << 10), rng.integers(0, 1 << 40, 200)])
    for step, key in enumerate(rng.permutation(keys).tolist()):
        if key not in kept:
            rows = loops.added(rows, state, key, step, key % 7)
            kept[key] = (step, key % 7)
        if step % 3 == 0:  # remove one kept at random
            gone = list(kept)[int(rng.integers(len(kept)))]
            loops.removed(rows, loops.found(rows, gone))
            state[1] -= 1
            del kept[gone]
        assert state[1] == len(kept) == int((rows[:, 0] != loops.EMPTY).sum())
    assert len(rows) >= 256 and len(kept) > 100
    for key in keys.tolist():
        at = loops.found(rows, key)
        assert (at >= 0) == (key in kept)
        if at >= 0:
            assert (rows[at, 1], rows[at, 2]) == kept[key]


def test_the_replay_leaves_to_numpy_what_numba_cannot_take(monkeypatch):
    # float16 and bfloat16 (numba lacks them), and a replay that numba could not compile (as
    # jitted leaves it: None, after one warning)
    from simulator.engine import compiled
    from simulator.engine.replayed import replay_for

    assert replay_for(np.dtype("float16")) is None
    assert replay_for(np.dtype("bfloat16")) is None
    assert replay_for(np.dtype("float32")) is not None
    monkeypatch.setattr(compiled, "_loaded", {"replay of float32": None})
    assert replay_for(np.dtype("float32")) is None


def test_a_timing_only_payload_moves_nothing(monkeypatch):
    made: list[Buffers] = []
    init = Buffers.__init__

    def kept(self, *args):
        init(self, *args)
        made.append(self)

    monkeypatch.setattr(Buffers, "__init__", kept)
    frame = simulate({"topology": {"preset": "dgx_h100", "nodes": 2, "gpus_per_node": 4},
                      "algorithms": ["ring", "tree"], "sizes": [3 << 20], "verify": False})
    assert list(frame.engine) == ["vector"] * 2 and len(made) == 2
    assert all(not buffers.moves and buffers.snapshots.batches == 0 for buffers in made)


@pytest.mark.parametrize("shared", [False, True])
def test_the_followers_of_one_message_are_those_the_general_path_lists(shared):
    # pointers to earlier messages (schedule numbers; -1: none) over a window that dropped its
    # first 3; ``shared``: two messages name message 4, so the followers go by CSR
    pointer = np.array([-1, 0, 1, 1 if shared else -1, 2, 4, 4 if shared else 3, -1, 5, 6])
    window = Window()
    window.append({"pointer": pointer, "column": np.full(len(pointer), -1)})
    followers = Followers(window, "pointer", "column")
    followers.grown(len(pointer))
    window.drop(3)
    followers.dropped()
    assert (followers.csr is not None) == shared
    held = np.arange(len(window))
    each = [followers.of(np.array([m])) for m in held.tolist()]
    assert all(found.dtype == np.int64 for found in each)
    np.testing.assert_array_equal(np.concatenate(each), followers.of(held))
    assert sum(len(found) for found in each) == (pointer >= 3).sum()
