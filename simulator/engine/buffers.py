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

A run of :data:`REPLAYED_MESSAGES` messages or more, where numba is installed, logs its posts
and receives instead and replays them in numba's loops (:mod:`simulator.engine.replayed`):
the same operations in the same order, so the same bits again, at tens of nanoseconds an
element where these paths cost microseconds a message.
"""

from __future__ import annotations

import numpy as np

from simulator.engine.kernel import ranges
from simulator.engine.replayed import POST, RECEIVE, Log, replay_for
from simulator.engine.window import Held, Snapshots
from simulator.model.reduction import ReduceOp

REPLAYED_MESSAGES = 1 << 17
"""From how many messages a run's data are logged and replayed compiled
(:mod:`simulator.engine.replayed`) where numba is installed. Measured on this project's 2-core
machine: loading numba and the replay from numba's cache costs 0.28 s a process (0.01 s where
the sharing's loops loaded numba already), and the replay saves 2.1 µs a message or more
(NVLSTree at 4 GiB on 8 × DGX H100, 1,294,336 messages: 11.6 → 8.9 s; the GB200 2-rack
ring's 164,736 messages cost 4.4 µs each in numpy), so a run of 131,072 messages gains about
what the load costs (0.28 s / 2.1 µs ≈ 133,000, for the case that saves least a message)."""


class Buffers:
    """The ranks' buffers (ranks × proxy elements, flat) and the data of the messages ``held``
    holds on their way (window positions)."""

    few = 16
    """Up to how many messages a post or a receive takes the loop of slices (the module)."""

    def __init__(self, held: Held, buffers: np.ndarray, reduce_op: ReduceOp, *,
                 replayed: bool | None = None) -> None:
        self.held = held
        self.flat = buffers.reshape(-1)
        self.width = buffers.shape[1]
        self.ufunc = reduce_op.ufunc
        self.snapshots = Snapshots(held.window)
        self.sums: dict[int, np.ndarray] = {}  # in-switch rounds' sums so far, by last upload
        self.moves = self.width > 0
        """Whether there are data to move: not with a timing-only payload
        (:meth:`~simulator.engine.payload.Payload.timing_only`), whose rows are empty."""
        self.log: Log | None = None
        """The posts and receives logged to replay compiled (None: they apply as they come).
        ``replayed`` says whether to (None: for a schedule of :data:`REPLAYED_MESSAGES`
        messages or more), where numba is installed and the dtype is one it takes."""
        if replayed is None:
            replayed = held.blocks.size >= REPLAYED_MESSAGES
        loops = replay_for(self.flat.dtype) if self.moves and replayed else None
        if loops is not None:
            self.log = Log(held, self.snapshots, self.flat, self.width, reduce_op, loops)
            held.dropping = self.log.flush

    def flush(self) -> None:
        """Apply the logged posts and receives, if any: the buffers are then up to date."""
        if self.log is not None:
            self.log.flush()

    def snapshot(self, messages: np.ndarray) -> None:
        """Keep the data ``messages`` (window positions, being posted) carry."""
        if not self.moves:
            return
        if self.log is not None:
            self.log.add(POST, messages)
            return
        if len(messages) > self.few:
            start, length = self.held.send_view[0][messages], self.held.send_view[1][messages]
            self.snapshots.keep(messages, self._sent(messages, start, length), length)
            return
        held, width, flat, sums = self.held, self.width, self.flat, self.sums
        first, count = held.send_view
        src, rounds = held.s.src, held.s.posted_after
        each = messages.tolist()
        sent, copied = [], []  # copied: the rounds whose sums copies down take, dropped after
        for m in each:
            sender = int(src[m])
            if sender < 0:  # sums are never written in place: a copy down can hold its own
                copied.append(int(rounds[m]))
                sent.append(sums[copied[-1]])
            else:
                at = sender * width + int(first[m])
                sent.append(flat[at:at + int(count[m])].copy())
        self.snapshots.keep_each(each, sent)
        for key in copied:
            sums.pop(key, None)

    def combine(self, messages: np.ndarray) -> None:
        """Copy or reduce the data of received ``messages`` into their receivers' spans (a
        switch upload's into its round's sum)."""
        if not self.moves:
            return
        if self.log is not None:
            self.log.add(RECEIVE, messages)
            return
        if len(messages) > self.few:
            self._combine_many(messages)
            return
        held, width, flat, ufunc = self.held, self.width, self.flat, self.ufunc
        first, count = held.recv_view
        dst, reduce = held.s.dst, held.s.reduce
        each = messages.tolist()
        copies = []  # (span, data) of the copies, made after every reduction (as ranks do)
        uploads: tuple[list[int], list[np.ndarray]] = ([], [])  # to switches, summed apart
        for m, data in zip(each, self.snapshots.take_each(each, count), strict=True):
            receiver = int(dst[m])
            if receiver < 0:  # a switch upload (only switches have negative endpoints)
                uploads[0].append(m)
                uploads[1].append(data)
                continue
            at = receiver * width + int(first[m])
            if reduce[m]:
                target = flat[at:at + len(data)]
                ufunc(target, data, out=target)
            else:
                copies.append((at, data))
        for at, data in copies:
            flat[at:at + len(data)] = data
        if uploads[0]:
            self._add_each(*uploads)

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
        mine = src >= 0
        rounds = s.posted_after[messages[~mine]].tolist()
        sums = np.concatenate([self.sums[key] for key in rounds])  # the copies down's, in order
        for key in set(rounds):
            del self.sums[key]
        if not mine.any():
            return sums
        data = np.empty(int(length.sum()), dtype=self.flat.dtype)
        at = np.cumsum(length) - length
        data[ranges(at[mine], length[mine])] = self.flat[ranges(src[mine] * self.width
                                                                + start[mine], length[mine])]
        data[ranges(at[~mine], length[~mine])] = sums
        return data

    def _add_uploads(self, messages: np.ndarray, data: np.ndarray,
                     length: np.ndarray) -> np.ndarray:
        """:meth:`_add_each` of the switch uploads among ``messages`` (their data concatenated
        in ``data``); returns which of ``messages`` are not uploads."""
        up = self.held.s.dst[messages] < 0
        at = (np.cumsum(length) - length).tolist()
        ups = np.flatnonzero(up).tolist()
        self._add_each(messages[ups].tolist(),
                       [data[at[i]:at[i] + int(length[i])] for i in ups])
        rest: np.ndarray = ~up
        return rest

    def _add_each(self, uploads: list[int], data: list[np.ndarray]) -> None:
        """Add the ``data`` of each of ``uploads`` (switch uploads just received, window
        positions) to its round's sum, in their order, which is each round's chain order (as
        the switch sums its members' in group order): the upload before one in its round's
        chain holds the sum so far (none: the round's first upload), kept from then on under
        this one. A sum is a new array that only its round writes till the round's last upload
        releases its copies, so it is added to in place (``ufunc(a, b, out=a)``: the same
        elementwise operation as ``ufunc(a, b)``)."""
        previous, start, sums, ufunc = (self.held.s.receive_previous, self.held.window.start,
                                        self.sums, self.ufunc)
        for m, mine in zip(uploads, data, strict=True):
            before = int(previous[m])
            if before < 0:
                sums[m + start] = mine.copy()
            else:
                total = sums.pop(before)
                sums[m + start] = ufunc(total, mine, out=total)
