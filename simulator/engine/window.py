"""The messages a vectorised run holds: a window of the schedule's blocks, loaded before any of
their messages can be released and dropped once received, so that memory follows the messages
in flight rather than the schedule (docs/design.md, "A window of blocks").

- :class:`Window`: per-message columns in schedule order, appended at the end, dropped from the
  front without copying what stays;
- :class:`Snapshots`: the data of posted messages not yet received, one array per posting;
- :class:`Followers`: the held messages that name each held message in one pointer column
  (the message after it on its connection, the receive after it, the sends it releases);
- :class:`Held`: the window of one run: loads and checks blocks, drops the received prefix,
  names the columns the run reads and writes.

Message numbers in the run's arrays are window positions; the pointer and follower columns hold
schedule numbers (position + ``Window.start``), so that dropping received messages renumbers
nothing held in the columns.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

import numpy as np

from simulator.algorithms.schedule import ARRAYS, NONE, Blocks, Schedule, SwitchEnd
from simulator.engine.kernel import INF, ranges
from simulator.engine.payload import Payload
from simulator.engine.routes import Routes
from simulator.errors import AlgorithmError
from simulator.model.machine import Machine


class Window:
    """Per-message columns of the messages a run holds, in schedule order: blocks appended at
    the end and received messages dropped from the front without copying what stays (buffers
    with room to grow, compacted when full; a schedule of one block is held as built).
    ``start`` is the schedule number of the first message held: column entry i is message
    start + i."""

    def __init__(self) -> None:
        self.buffers: dict[str, np.ndarray] = {}
        self.lo = self.hi = 0
        self.start = 0
        self.views: dict[str, np.ndarray] = {}  # the columns' views, until the window moves

    def __len__(self) -> int:
        """How many messages the window holds."""
        return self.hi - self.lo

    def __getitem__(self, name: str) -> np.ndarray:
        """A column of the messages held (a view: writes go to the window), made once per
        move of the window (a column read per message posted costs a slice otherwise)."""
        view = self.views.get(name)
        if view is None:
            view = self.views[name] = self.buffers[name][self.lo:self.hi]
        return view

    def append(self, columns: dict[str, np.ndarray]) -> None:
        """Messages at the end of the window, a value per column each."""
        added = len(next(iter(columns.values())))
        self.views = {}
        if not self.buffers:
            self.buffers, self.lo, self.hi = dict(columns), 0, added
            return
        held = self.hi - self.lo
        capacity = len(next(iter(self.buffers.values())))
        if self.hi + added > capacity:  # full: move what stays to the front, in place if it fits
            size = capacity if 2 * (held + added) <= capacity else 2 * (held + added)
            for name, buffer in self.buffers.items():
                moved = buffer if size == capacity else np.empty(size, dtype=buffer.dtype)
                moved[:held] = buffer[self.lo:self.hi]
                self.buffers[name] = moved
            self.lo, self.hi = 0, held
        for name, values in columns.items():
            self.buffers[name][self.hi:self.hi + added] = values
        self.hi += added

    def drop(self, messages: int) -> None:
        """Forget the first ``messages`` held."""
        self.views = {}
        self.lo += messages
        self.start += messages


class Snapshots:
    """Data of posted messages not yet received: one array per posting (of one message, or of
    every message an instant posts at once)."""

    def __init__(self, window: Window) -> None:
        self.window = window  # columns "batch" and "offset": where each message's data is
        self.arrays: dict[int, np.ndarray] = {}
        self.pending: dict[int, int] = {}
        self.batches = 0

    @staticmethod
    def columns(messages: int) -> dict[str, np.ndarray]:
        """The window columns of ``messages`` new messages."""
        return {"batch": np.full(messages, -1, dtype=np.int64),
                "offset": np.zeros(messages, dtype=np.int64)}

    @property
    def batch(self) -> np.ndarray:
        """Each held message's posting instant (a key of :attr:`arrays`; -1: not posted)."""
        return self.window["batch"]

    @property
    def offset(self) -> np.ndarray:
        """Where each held message's data starts in its posting instant's array."""
        return self.window["offset"]

    def keep(self, messages: np.ndarray, data: np.ndarray, lengths: np.ndarray) -> None:
        """Hold ``data``, the concatenated data of ``messages`` (``lengths`` elements each)."""
        key = self.batches
        self.batches += 1
        self.arrays[key] = data
        self.pending[key] = len(messages)
        self.batch[messages] = key
        offset = self.offset
        if lengths[0] == lengths.min() == lengths.max():
            offset[messages] = np.arange(len(messages)) * lengths[0]
        else:
            offset[messages] = np.cumsum(lengths) - lengths

    def keep_each(self, messages: list[int], data: list[np.ndarray]) -> None:
        """:meth:`keep` of ``messages`` one by one, each holding all of its ``data`` (a posting
        of its own): the arrays need no concatenation."""
        key, batch, offset = self.batches, self.batch, self.offset
        arrays, pending = self.arrays, self.pending
        for m, sent in zip(messages, data, strict=True):
            arrays[key], pending[key], batch[m], offset[m] = sent, 1, key, 0
            key += 1
        self.batches = key

    def take_each(self, messages: list[int], lengths: np.ndarray) -> list[np.ndarray]:
        """:meth:`take` of ``messages`` one by one (``lengths``: a column of the window, each
        held message's length), by slices of their postings' arrays: views, as nothing
        writes a posting's array once kept."""
        batch, offset, arrays, pending = self.batch, self.offset, self.arrays, self.pending
        taken = []
        for m in messages:
            key, first = int(batch[m]), int(offset[m])
            taken.append(arrays[key][first:first + int(lengths[m])])
            left = pending[key] - 1
            if left:
                pending[key] = left
            else:
                del arrays[key], pending[key]
        return taken

    def take(self, messages: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The data of ``messages``, concatenated in order."""
        batches, offsets = self.batch[messages], self.offset[messages]
        first = int(batches[0])
        if batches.min() == first == batches.max():  # all posted at one instant
            data: np.ndarray = self.arrays[first][ranges(offsets, lengths)]
            self._taken(first, len(messages))
            return data
        parts = np.empty(int(lengths.sum()), dtype=next(iter(self.arrays.values())).dtype)
        at = np.cumsum(lengths) - lengths
        for key in np.unique(batches).tolist():
            mine = batches == key
            source = ranges(offsets[mine], lengths[mine])
            parts[ranges(at[mine], lengths[mine])] = self.arrays[key][source]
            self._taken(key, int(mine.sum()))
        return parts

    def _taken(self, key: int, messages: int) -> None:
        """Forget a posting instant's data once all its messages were received."""
        self.pending[key] -= messages
        if self.pending[key] == 0:
            del self.arrays[key], self.pending[key]


class Followers:
    """The held messages that name each held message in one pointer column (schedule
    numbers). Where each has one follower at most (most schedules), a window column of the
    follower's schedule number (-1: none), filled in as blocks arrive; where some have several
    (threads that start after the same receive), CSR over the window, rebuilt as it moves:
    followers of m are ``order[first[m]:first[m+1]]``."""

    def __init__(self, window: Window, pointer: str, column: str) -> None:
        self.window, self.pointer, self.column = window, pointer, column
        self.csr: tuple[np.ndarray, np.ndarray] | None = None

    def grown(self, added: int) -> None:
        """The window grew by ``added`` messages (their column entries are -1)."""
        window = self.window
        if self.csr is None:
            pointer = window[self.pointer][len(window) - added:]
            has = pointer >= window.start  # a message dropped was received: nothing to tell
            targets = pointer[has] - window.start
            column = window[self.column]
            if (column[targets] == NONE).all():
                followers = np.flatnonzero(has) + (window.start + len(window) - added)
                column[targets] = followers
                if np.array_equal(column[targets], followers):  # no message named twice
                    return
        self._build()

    def dropped(self) -> None:
        """The window dropped messages from its front."""
        if self.csr is not None:
            self._build()

    def _build(self) -> None:
        """Rebuild the CSR of the followers of every held message."""
        pointer, start = self.window[self.pointer], self.window.start
        has = pointer >= start
        targets = pointer[has] - start
        counts = np.bincount(targets, minlength=len(pointer))
        self.csr = (np.concatenate([[0], np.cumsum(counts)]),
                    np.flatnonzero(has)[np.argsort(targets, kind="stable")])

    def of(self, messages: np.ndarray) -> np.ndarray:
        """Every follower of ``messages`` (window positions), concatenated: for one message
        (most instants) by reading its entries as Python integers, the same numbers."""
        if len(messages) == 1:
            m = int(messages[0])
            if self.csr is None:
                follower = int(self.window[self.column][m]) - self.window.start
                return np.array([follower] if follower >= 0 else [], dtype=np.int64)
            first, order = self.csr
            return order[int(first[m]):int(first[m + 1])].copy()
        if self.csr is None:
            followers = self.window[self.column][messages]
            found: np.ndarray = followers[followers >= 0] - self.window.start
            return found
        first, order = self.csr
        start, stop = first[messages], first[messages + 1]
        listed: np.ndarray = order[ranges(start, stop - start)]
        return listed


def _ignore(*_: Any) -> None:
    """A callback of a run that is over (:meth:`Held.detach`)."""


class Held:
    """The window of one run (see the module): the schedule's blocks loaded so far, the
    received prefix dropped, and views of the window's columns by name (``s``: the schedule's
    columns; ``posted``, ``arrived``: times, inf until then; ``received``; ``pair``: each
    message's (sender, receiver) pair in :class:`Routes`; ``thread``: its thread, as
    :attr:`Schedule.threads <simulator.algorithms.schedule.Schedule.threads>`; ``send_view``,
    ``recv_view``: proxy spans). A view is valid until the window next moves: read it through
    this object, never keep it across a load or a drop.

    ``loaded`` is told the window positions of each block loaded, ``dropped`` how many
    messages each drop forgot (their window positions moved down by as many); ``dropping``,
    if set, is called before a drop forgets any (what still reads the messages by their
    window positions, as a log of data operations, reads them then)."""

    def __init__(self, blocks: Blocks, machine: Machine, payload: Payload, routes: Routes,
                 name: str, loaded: Callable[[np.ndarray], None],
                 dropped: Callable[[int], None]) -> None:
        self.blocks = blocks
        self.machine = machine
        self.payload = payload
        self.routes = routes
        self.name = name
        self._loaded, self._dropped = loaded, dropped
        self.dropping: Callable[[], None] = _ignore
        self.itemsize = payload.dtype.itemsize
        self.window = Window()
        self.block_ends: list[int] = []  # where each loaded block ends, in schedule numbering
        self.messages = 0  # messages loaded so far, join markers left out
        self.most = 0  # the most messages the window held
        self.top = -1
        """The last message (schedule number) posted after the start, started or arrived so far:
        every message past it is as the schedule left it (:mod:`simulator.engine.steady`)."""
        self.switch_delay: np.ndarray | None = None
        """Each switch endpoint's reduction latency (None: the schedule has no switch ends)."""
        self.drop_due = False
        """Whether a block was loaded since the window last dropped its received prefix."""
        self.next_on_connection = Followers(self.window, "connection_previous", "next_send")
        self.next_receive = Followers(self.window, "receive_previous", "next_receive")
        self.released = Followers(self.window, "posted_after", "releases")

    def start(self) -> None:
        """Load blocks 0 to ``reach``: those that may post messages at the start."""
        for _ in range(min(self.blocks.count, self.blocks.reach + 1)):
            self._load()

    def touch(self, messages: np.ndarray) -> None:
        """``messages`` (window positions, some) were posted, started or arrived: :attr:`top`."""
        last = int(messages[0]) if len(messages) == 1 else int(messages.max())
        self.top = max(self.top, last + self.window.start)

    def local(self, pointer: np.ndarray) -> np.ndarray:
        """Schedule numbers to window positions; negative for none (a pointer's only negative
        value is NONE, -1: -1 - start stays negative), and for messages dropped (received long
        since)."""
        local: np.ndarray = pointer - self.window.start
        return local

    def nbytes(self, messages: np.ndarray) -> np.ndarray:
        """Nominal bytes of ``messages`` (Payload.nbytes), as floats: a column filled as each
        block loads, by the same integer product, cast to float64."""
        counts: np.ndarray = self._bytes[messages]
        return counts

    # -- loading ---------------------------------------------------------------------------------

    def load_ahead(self, posted: np.ndarray) -> None:
        """Load every block that ``posted`` messages (window positions) may release, before
        any of them can: up to ``reach`` blocks past the last one posted."""
        blocks = self.blocks
        if len(self.block_ends) == blocks.count or len(posted) == 0:
            return
        top = bisect.bisect_right(self.block_ends, int(posted.max()) + self.window.start)
        while len(self.block_ends) < blocks.count and len(self.block_ends) <= top + blocks.reach:
            self._load()

    def load_through(self, number: int) -> None:
        """Load the blocks that message ``number`` (a schedule number) and what it may release
        lie in, as posting it would."""
        self.load_ahead(np.array([number - self.window.start]))

    def _load(self) -> None:
        """Add the schedule's next block at the end of the window."""
        k = len(self.block_ends)
        block = self.blocks.block(k)
        first = self.block_ends[-1] if self.block_ends else 0
        if k == 0 and block.switches:
            self._switches(block.switches)
        self._check(block, first, k)
        send_view = self.payload.views(block.send_start, block.send_stop)
        same = block.recv_start is block.send_start and block.recv_stop is block.send_stop
        recv_view = send_view if same else self.payload.views(block.recv_start, block.recv_stop)
        bad = np.flatnonzero(send_view[1] != recv_view[1])
        if len(bad):
            raise AlgorithmError(f"{self.name}: the proxy payload cannot represent a move of "
                                 f"message {first + int(bad[0])}; rerun with a larger proxy")
        size, unset = block.size, np.full(block.size, NONE, dtype=np.int64)
        self.window.append({
            **{name: getattr(block, name) for name in ARRAYS},
            "send_first": send_view[0], "send_count": send_view[1],
            "recv_first": recv_view[0], "recv_count": recv_view[1],
            "pair": self.routes.pairs(block.src, block.dst), "thread": block.threads,
            "posted": np.full(size, INF), "arrived": np.full(size, INF),
            "received": np.zeros(size, dtype=bool), **Snapshots.columns(size),
            "nbytes": np.empty(size),
            "next_send": unset, "next_receive": unset.copy(), "releases": unset.copy()})
        self._views()
        loaded = slice(len(self.window) - size, None)  # nominal bytes as nbytes() reads them
        self._bytes[loaded] = (self.s.send_stop[loaded] - self.s.send_start[loaded]) * self.itemsize
        self.most = max(self.most, len(self.window))
        self.messages += size - int(block.markers.sum())
        self.block_ends.append(first + size)
        for followers in (self.next_on_connection, self.next_receive, self.released):
            followers.grown(size)
        self.drop_due = k > self.blocks.reach
        self._loaded(np.arange(len(self.window) - size, len(self.window)))

    def _views(self) -> None:
        """Name the window's columns (views: the run writes through them)."""
        window = self.window
        columns: dict[str, Any] = {name: window[name] for name in ARRAYS}
        self.s = Schedule(**columns)
        self.send_view = (window["send_first"], window["send_count"])
        self.recv_view = (window["recv_first"], window["recv_count"])
        self.pair = window["pair"]
        self.thread = window["thread"]
        self.posted, self.arrived = window["posted"], window["arrived"]
        self.received = window["received"]
        self._bytes = window["nbytes"]

    def _switches(self, ends: tuple[SwitchEnd, ...]) -> None:
        """Route the schedule's switch endpoints to their switches, and charge what each waits
        before sending on: as the endpoint says (a switch of a reduction's tree), or the
        reduction latency of the switch the machine names for its members, none for one
        contributor, a multicast (as :mod:`simulator.engine.inswitch`)."""
        names, delays = [], []
        for end in ends:
            if end.switch is None or end.delay_s is None:
                switch = self.machine.switch_for(end.members, self.name)
                names.append(switch.name)
                delays.append(switch.reduction_latency_s if len(end.members) > 1 else 0.0)
            else:
                names.append(end.switch)
                delays.append(end.delay_s)
        self.routes.switches(tuple(names))
        self.switch_delay = np.array(delays)

    def _check(self, block: Schedule, first: int, k: int) -> None:
        """AlgorithmError unless block ``k`` (numbered from ``first``) is well formed: pointers
        inside the schedule so far, elements inside the buffer, and, for a block loaded after
        the start, nothing posted at the start or released by a message already received."""
        count, end = self.payload.count, first + block.size
        switches = 0 if self.switch_delay is None else len(self.switch_delay)
        for name in ("src", "dst"):
            ends = getattr(block, name)
            if len(ends) and (ends.min() < -switches or ends.max() >= self.machine.ranks):
                raise AlgorithmError(f"{self.name}: schedule field {name} names an endpoint "
                                     f"outside the {self.machine.ranks} ranks and {switches} "
                                     "switch groups")
        for name in ("posted_after", "connection_previous", "receive_previous"):
            pointer = getattr(block, name)
            if len(pointer) and (pointer.min() < NONE or pointer.max() >= end):
                raise AlgorithmError(f"{self.name}: schedule field {name} points outside its "
                                     f"{end} messages")
        bad = np.flatnonzero((block.send_start < 0) | (block.send_stop > count)
                             | (block.recv_start < 0) | (block.recv_stop > count)
                             | (block.send_start > block.send_stop))
        if len(bad):
            m = int(bad[0])
            raise AlgorithmError(f"{self.name}: message {first + m} from rank {block.src[m]} "
                                 f"uses elements outside the buffer of {count}")
        bad = np.flatnonzero(block.send_stop - block.send_start
                             != block.recv_stop - block.recv_start)
        if len(bad):
            m = int(bad[0])
            raise AlgorithmError(f"{self.name}: rank {block.dst[m]} received "
                                 f"{block.send_stop[m] - block.send_start[m]} elements from rank "
                                 f"{block.src[m]} into a span of "
                                 f"{block.recv_stop[m] - block.recv_start[m]}")
        reach = self.blocks.reach
        if k <= reach:  # loaded before the run starts
            return
        if (block.posted_after == NONE).any():
            raise AlgorithmError(f"{self.name}: block {k} of the schedule posts messages at the "
                                 f"start; only blocks 0 to {reach} (loaded before the run "
                                 "starts) may")
        after = block.posted_after[(block.posted_after >= 0) & (block.posted_after < first)]
        late = after < self.window.start
        late[~late] = self.received[after[~late] - self.window.start]
        if late.any():
            raise self.too_far(k)

    # -- dropping and the end ----------------------------------------------------------------------

    def drop(self) -> None:
        """Forget the window's received prefix (no copy: the window's start moves)."""
        self.drop_due = False
        received = self.received
        k = len(received) if received.all() else int(np.argmin(received))
        if k == 0:
            return
        self.dropping()
        self.window.drop(k)
        self._views()
        self._dropped(k)
        for followers in (self.next_on_connection, self.next_receive, self.released):
            followers.dropped()

    def detach(self) -> None:
        """Forget the run's callbacks (``loaded``, ``dropped``, ``dropping``): they refer back
        to the run, which holds this window, a cycle that only the cyclic garbage collector
        would free (with the run's window and data in it)."""
        self._loaded = self._dropped = self.dropping = _ignore

    def finished(self) -> None:
        """AlgorithmError unless every message of the schedule was loaded and received."""
        if not self.received.all():
            stuck = np.flatnonzero(~self.received)
            ranks = np.unique(self.s.dst[stuck])[:8].tolist()
            raise AlgorithmError(f"{self.name}: deadlock: ranks {ranks} wait for messages "
                                 "that are never sent")
        if len(self.block_ends) < self.blocks.count:  # all received, nothing left to load it
            raise self.too_far(len(self.block_ends))

    def too_far(self, k: int) -> AlgorithmError:
        """The error of block ``k``, which messages received before it loaded release."""
        return AlgorithmError(f"{self.name}: block {k} of the schedule is released by messages "
                              f"received before it was loaded: it reaches back more than "
                              f"{self.blocks.reach} blocks")
