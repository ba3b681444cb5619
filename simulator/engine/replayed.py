"""A vectorised run's data operations replayed in numba's loops (the ``fast`` extra), for runs
of many messages: :class:`~simulator.engine.buffers.Buffers` logs each post and receive (window
positions), and :func:`~simulator.engine.replay_loops.replay` applies them later, in the order
logged, over the same buffers.

The data never decide a time (:mod:`simulator.engine.buffers`), so applying them later changes
no time; applying them in the order they happened, with the elementwise operations numpy
applies, gives the numpy path's bits:

- a post takes its span of its sender's buffer as it is then (a copy down of an in-switch
  round: the round's sum), into a store of the data on their way;
- a receive, as :meth:`Buffers.combine <simulator.engine.buffers.Buffers.combine>` orders one
  call's messages: every reduction in the messages' order, then every copy (the last one
  winning), then every switch upload added to its round's sum;
- the operations are IEEE's on the buffer's dtype (float32 sums in float32; integers wrap as
  numpy's do); ``max``/``min`` pick as numpy's ``maximum``/``minimum`` (a NaN on either side
  wins, the second operand on a tie: max(0.0, -0.0) is -0.0).

Where a posting costs Python per message (a loop over a few messages, a dictionary of arrays),
the replay costs tens of nanoseconds: NVLSTree at 4 GiB on 8 × DGX H100 moves 1,294,336
messages whose data took 2.7 s of its 11.6 (docs/benchmark.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from simulator.engine.compiled import jitted
from simulator.engine.window import Held, Snapshots
from simulator.model.reduction import ReduceOp

POST, RECEIVE = False, True
"""The two kinds of a logged group of messages (whether it receives)."""

OPS = {ReduceOp.SUM: 0, ReduceOp.AVG: 0, ReduceOp.PROD: 1, ReduceOp.MAX: 2, ReduceOp.MIN: 3}
"""Each reduction's code in :func:`~simulator.engine.replay_loops.combined` (``avg`` sums: it
divides once, at the end)."""

DTYPES = ("float32", "float64", "int32", "int64")
"""The dtypes the replay takes; numba has no bfloat16 and only part of float16, whose
reductions stay with numpy."""

Replay = Callable[..., tuple[np.ndarray, np.ndarray]]


def replay_for(dtype: np.dtype[Any]) -> tuple[Replay, Callable[[], np.ndarray]] | None:
    """The compiled :func:`~simulator.engine.replay_loops.replay` and the maker of its table of
    in-switch sums, for buffers of ``dtype``; None where the dtype is not one of
    :data:`DTYPES`, or numba is not installed or cannot compile."""
    if dtype.name not in DTYPES:
        return None
    try:
        from simulator.engine import replay_loops as loops
    except Exception:  # no numba, or a broken one (which the sharing's loops warn of)
        return None
    replay = jitted(f"replay of {dtype.name}", loops.replay, lambda: loops.sample(dtype))
    return None if replay is None else (replay, loops.table)


class Log:
    """A run's posts and receives (window positions, in groups as the engine made them),
    replayed compiled onto its buffers when the log fills, before the window drops messages
    (they are read by their positions) and at the run's end (:meth:`flush`)."""

    LIMIT = 1 << 16
    """Messages logged before a replay (a bound on the log's memory: 8 bytes each)."""

    STORE = 1024
    """Elements of the store at first (it grows as the data on their way need)."""

    def __init__(self, held: Held, snapshots: Snapshots, flat: np.ndarray, width: int,
                 reduce_op: ReduceOp, loops: tuple[Replay, Callable[[], np.ndarray]]) -> None:
        self.held, self.flat, self.width, self.op = held, flat, width, OPS[reduce_op]
        self.snapshots = snapshots  # its columns: whether a message's data are on their way
        # (``batch`` ≥ 0) and where in the store (``offset``)
        self.replay, self.rows = loops[0], loops[1]()
        self.kinds: list[bool] = []
        self.bounds: list[int] = [0]
        self.messages = np.empty(self.LIMIT, dtype=np.int64)
        self.store = np.empty(self.STORE, dtype=flat.dtype)  # the data on their way
        self.state = np.zeros(2, dtype=np.int64)  # the store's top, the sums in the table

    def add(self, kind: bool, messages: np.ndarray) -> None:
        """Log a group of ``messages`` posted (:data:`POST`) or received (:data:`RECEIVE`)."""
        end = self.bounds[-1] + len(messages)
        if end > len(self.messages):
            if len(self.kinds):
                self.flush()
                end = len(messages)
            if end > len(self.messages):
                self.messages = np.empty(end, dtype=np.int64)
        self.messages[end - len(messages):end] = messages
        self.kinds.append(kind)
        self.bounds.append(end)

    def flush(self) -> None:
        """Apply what is logged, in order, and empty the log."""
        if not self.kinds:
            return
        held, snapshots = self.held, self.snapshots
        s = held.s
        self.store, self.rows = self.replay(
            np.array(self.kinds, dtype=np.bool_), np.array(self.bounds, dtype=np.int64),
            self.messages, self.flat, self.width, self.op, self.store, self.state, s.src, s.dst,
            held.send_view[0], held.send_view[1], held.recv_view[0], held.recv_view[1],
            s.reduce, snapshots.batch, snapshots.offset, s.receive_previous, s.posted_after,
            held.window.start, self.rows)
        self.kinds, self.bounds = [], [0]

    def empty(self) -> bool:
        """Whether every logged message was received and every in-switch sum taken."""
        return not self.kinds and self.state[1] == 0 and bool((self.snapshots.batch < 0).all())
