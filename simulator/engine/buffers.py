"""The data a vectorised run moves: the ranks' buffers as its messages change them. A message
takes its span of its sender's buffer when it is posted (:class:`~simulator.engine.window.Snapshots`
keeps it until it is received), and its receive copies or reduces it into its receiver's span;
in-switch reduction sums a round's uploads in the group's order and sends the sum down (as
:mod:`simulator.engine.inswitch` does). The data prove the algorithm (``verified``); the timing
never reads them.
"""

from __future__ import annotations

import numpy as np

from simulator.engine.kernel import ranges
from simulator.engine.window import Held, Snapshots
from simulator.model.reduction import ReduceOp


class Buffers:
    """The ranks' buffers (ranks × proxy elements, flat) and the data of the messages ``held``
    holds on their way (window positions)."""

    def __init__(self, held: Held, buffers: np.ndarray, reduce_op: ReduceOp) -> None:
        self.held = held
        self.flat = buffers.reshape(-1)
        self.width = buffers.shape[1]
        self.ufunc = reduce_op.ufunc
        self.snapshots = Snapshots(held.window)
        self.sums: dict[int, np.ndarray] = {}  # in-switch rounds' sums so far, by last upload

    def snapshot(self, messages: np.ndarray) -> None:
        """Keep the data ``messages`` (window positions, being posted) carry."""
        start, length = self.held.send_view[0][messages], self.held.send_view[1][messages]
        self.snapshots.keep(messages, self._sent(messages, start, length), length)

    def combine(self, messages: np.ndarray) -> None:
        """Copy or reduce the data of received ``messages`` into their receivers' spans (a
        switch upload's into its round's sum)."""
        held = self.held
        start, length = held.recv_view[0][messages], held.recv_view[1][messages]
        data = self.snapshots.take(messages, length)
        if held.switch_delay is not None:
            kept = self._add_uploads(messages, data, length)
            if not kept.all():
                data = data[np.repeat(kept, length)]
                messages, start, length = messages[kept], start[kept], length[kept]
                if len(messages) == 0:
                    return
        target = ranges(held.s.dst[messages] * self.width + start, length)
        reducing = held.s.reduce[messages]
        receivers = held.s.dst[messages]
        apart = len(messages) == 1 or np.bincount(receivers).max() == 1  # targets all distinct
        if reducing.all() and apart:
            self.flat[target] = self.ufunc(self.flat[target], data)
        elif reducing.all():
            self.ufunc.at(self.flat, target, data)
        elif not reducing.any():
            self.flat[target] = data
        else:
            per = np.repeat(reducing, length)
            self.ufunc.at(self.flat, target[per], data[per])
            self.flat[target[~per]] = data[~per]

    def _sent(self, messages: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
        """The data ``messages`` carry, concatenated: their spans of their senders' buffers as
        they are now, and for a copy down of an in-switch round its sum (dropped once every
        copy of it is posted: they are all released by the round's last upload at once)."""
        s = self.held.s
        src = s.src[messages]
        if self.held.switch_delay is None or (src >= 0).all():
            data: np.ndarray = self.flat[ranges(src * self.width + start, length)]
            return data
        data = np.empty(int(length.sum()), dtype=self.flat.dtype)
        at = np.cumsum(length) - length
        mine = src >= 0
        data[ranges(at[mine], length[mine])] = self.flat[ranges(src[mine] * self.width
                                                                + start[mine], length[mine])]
        rounds = s.posted_after[messages]
        for m in np.flatnonzero(~mine).tolist():
            data[at[m]:at[m] + length[m]] = self.sums[int(rounds[m])]
        for key in np.unique(rounds[~mine]).tolist():
            del self.sums[key]
        return data

    def _add_uploads(self, messages: np.ndarray, data: np.ndarray,
                     length: np.ndarray) -> np.ndarray:
        """Add the data of the switch uploads among ``messages`` (just received) to their
        rounds' sums, in each round's chain order (as the switch sums its members' in group
        order); returns which of ``messages`` are not uploads."""
        s = self.held.s
        up = s.dst[messages] < 0
        at = np.cumsum(length) - length
        start = self.held.window.start
        for m in np.flatnonzero(up).tolist():
            mine = data[at[m]:at[m] + length[m]]
            before = int(s.receive_previous[messages[m]])
            self.sums[int(messages[m]) + start] = (
                mine.copy() if before < 0 else self.ufunc(self.sums.pop(before), mine))
        rest: np.ndarray = ~up
        return rest
