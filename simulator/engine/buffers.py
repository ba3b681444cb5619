"""The data a vectorised run moves: the ranks' buffers as its messages change them. A message
takes its span of its sender's buffer when it is posted (:class:`~simulator.engine.window.Snapshots`
keeps it until it is received), and its receive copies or reduces it into its receiver's span;
in-switch reduction sums a round's uploads in the group's order and sends the sum down (as
:mod:`simulator.engine.inswitch` does). The data prove the algorithm (``verified``); the timing
never reads them: a timing-only payload (an empty proxy) makes every operation here a no-op.

Most instants post or receive a few messages: those take a loop over the messages by slices of
their rows (a message is one contiguous span of its sender's and of its receiver's), cheaper
than the index arrays of the general path below :attr:`Buffers.few` messages. The two give the
same bits: the slices name the very elements the index arrays do, the same elementwise copies
and ufuncs apply to them, and the loop keeps the general path's order where spans could meet
(every reduction in the messages' order, as ``ufunc.at``, then every copy, the last one
winning; the uploads in their order). tests/test_buffers.py compares the two.
"""

from __future__ import annotations

import numpy as np

from simulator.engine.kernel import ranges
from simulator.engine.window import Held, Snapshots
from simulator.model.reduction import ReduceOp


class Buffers:
    """The ranks' buffers (ranks × proxy elements, flat) and the data of the messages ``held``
    holds on their way (window positions)."""

    few = 16
    """Up to how many messages a post or a receive takes the loop of slices (the module)."""

    def __init__(self, held: Held, buffers: np.ndarray, reduce_op: ReduceOp) -> None:
        self.held = held
        self.flat = buffers.reshape(-1)
        self.width = buffers.shape[1]
        self.ufunc = reduce_op.ufunc
        self.snapshots = Snapshots(held.window)
        self.sums: dict[int, np.ndarray] = {}  # in-switch rounds' sums so far, by last upload
        self.moves = self.width > 0
        """Whether there are data to move: not with a timing-only payload
        (:meth:`~simulator.engine.payload.Payload.timing_only`), whose rows are empty."""

    def snapshot(self, messages: np.ndarray) -> None:
        """Keep the data ``messages`` (window positions, being posted) carry."""
        if not self.moves:
            return
        if len(messages) > self.few:
            start, length = self.held.send_view[0][messages], self.held.send_view[1][messages]
            self.snapshots.keep(messages, self._sent(messages, start, length), length)
            return
        held, width, flat = self.held, self.width, self.flat
        first, count = held.send_view
        src, rounds = held.s.src, held.s.posted_after
        sent = []  # the rounds whose sums the copies down take: dropped once all are kept
        for m in messages.tolist():
            sender = int(src[m])
            if sender < 0:  # sums are never written in place: a copy down can hold its own
                sent.append(int(rounds[m]))
                data = self.sums[sent[-1]]
            else:
                at = sender * width + int(first[m])
                data = flat[at:at + int(count[m])].copy()
            self.snapshots.keep_one(m, data)
        for key in sent:
            self.sums.pop(key, None)

    def combine(self, messages: np.ndarray) -> None:
        """Copy or reduce the data of received ``messages`` into their receivers' spans (a
        switch upload's into its round's sum)."""
        if not self.moves:
            return
        if len(messages) > self.few:
            self._combine_many(messages)
            return
        held, width, flat, ufunc = self.held, self.width, self.flat, self.ufunc
        first, count = held.recv_view
        dst, reduce = held.s.dst, held.s.reduce
        copies = []  # (span, data) of the copies, made after every reduction (as ranks do)
        for m in messages.tolist():
            length = int(count[m])
            data = self.snapshots.take_one(m, length)
            receiver = int(dst[m])
            if receiver < 0:  # a switch upload (only switches have negative endpoints)
                self._add_upload(m, data)
                continue
            at = receiver * width + int(first[m])
            if reduce[m]:
                target = flat[at:at + length]
                ufunc(target, data, out=target)
            else:
                copies.append((at, length, data))
        for at, length, data in copies:
            flat[at:at + length] = data

    def _combine_many(self, messages: np.ndarray) -> None:
        """:meth:`combine` of any number of messages, by index arrays."""
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
        up = self.held.s.dst[messages] < 0
        at = np.cumsum(length) - length
        for m in np.flatnonzero(up).tolist():
            self._add_upload(int(messages[m]), data[at[m]:at[m] + length[m]])
        rest: np.ndarray = ~up
        return rest

    def _add_upload(self, m: int, data: np.ndarray) -> None:
        """Add ``data``, of switch upload ``m`` (a window position, just received), to its
        round's sum: the upload before it in the round's chain holds the sum so far (none:
        the round's first upload), which from now on is kept under ``m``."""
        before = int(self.held.s.receive_previous[m])
        self.sums[m + self.held.window.start] = (
            data.copy() if before < 0 else self.ufunc(self.sums.pop(before), data))
