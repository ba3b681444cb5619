"""The vectorised engine: runs a schedule (:mod:`simulator.algorithms.schedule`) with the SimPy
engine's semantics, processing everything that happens at one instant as arrays. A schedule
given a block at a time (:class:`~simulator.algorithms.schedule.Blocks`) runs in a window of
blocks: loaded before they can be released, dropped once received.

The model is the SimPy engine's (:mod:`simulator.engine.run`, :mod:`simulator.engine.fabric`),
message for message:

- a message is posted at the start or when its sender's receive ``posted_after`` completes;
  one whose route has a ``proxy_s`` (a network message under NCCL's execution) is handed on
  when its sender's network proxy gets to it (:func:`~simulator.engine.kernel.serve_spans`); it
  pays its route's latency, then waits for the message before it on its connection to finish,
  then moves its bytes at its max-min fair share of every link it crosses, recomputed whenever
  a flow starts or ends;
- a receive starts when its message has arrived and the receive before it in the receiver's
  program has completed; a reducing receive then holds the receiver's GPU reducer
  (first come, first served) for ``launch + bytes / reduce_bandwidth``;
- data are taken from the sender's buffer when the message is posted and copied or reduced into
  the receiver's when its receive completes;
- in-switch reduction (a trace's switch uploads and copies down, see
  :mod:`simulator.algorithms.trace`) as :mod:`simulator.engine.inswitch` runs it: an upload
  moves a member's span to the group's switch and adds it to its round's sum; a copy down,
  posted when the round's last upload arrived, waits the switch's reduction latency, then its
  route's, then the copy before it down the same link.

At each instant the engine ends every flow due then, completes receives, posts the messages
they release and starts those ready, cascading until nothing more happens at that instant, and
only then re-shares the links, once, by the kernel's progressive filling over every active flow
(:func:`simulator.engine.kernel.max_min_rates`, which the SimPy engine calls per component);
link capacities follow the machine's capacity timeline, each of its instants an instant here.
Times are computed with the same floating-point operations as the SimPy engine's (the kernel's
rates, bytes brought up to date only when a rate moves), so the two agree to the last bit,
shared links or not.

Given a :class:`~simulator.engine.record.Recorder`, the run also tallies, per link, the bytes
its flows carried and the time it held at least one (:class:`_LinkTally`): the SimPy fabric's
figures, as arrays (the time between two instants on every link that held a flow).
"""

from __future__ import annotations

import bisect
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.algorithms.schedule import ARRAYS, NONE, Blocks, Schedule, SwitchEnd
from simulator.engine.kernel import (
    INF,
    CapacityTimeline,
    lone_rate,
    lone_rates,
    max_min_rates,
    ranges,
    serve_in_order,
    serve_spans,
)
from simulator.engine.payload import Payload
from simulator.engine.record import Recorder
from simulator.engine.steady import Op, Steady
from simulator.errors import AlgorithmError
from simulator.model.machine import Machine
from simulator.model.reduction import ReduceOp
from simulator.model.routing import Routing


@dataclass(frozen=True)
class VectorTiming:
    """What one vectorised run cost: simulated time, messages, instants processed, and the wall
    time spent re-sharing links (for the benchmark's profile)."""

    time_s: float
    messages: int
    instants: int
    sharing_wall_s: float
    held: int = 0
    """The most messages the window held at once (the schedule's size when it is one block)."""
    skipped: int = 0
    """Of ``instants``, those a steady period's jumps went over (:mod:`simulator.engine.steady`)
    instead of processing them one by one."""


SHARES_BYTES = 32 << 20
"""How much memory :meth:`_Routes.shares` may keep sets of flows and their rates in (the
latest first): a pipeline's repeating sets are small, a ``direct`` of 16,000 flows' are not."""


def _component(dirty: np.ndarray, link_of: np.ndarray, route_of: np.ndarray,
               routes: int) -> np.ndarray:
    """Which of ``routes`` routes (entry k: route ``route_of[k]`` crosses link ``link_of[k]``)
    are connected to a ``dirty`` link through links they share: grown from the dirty links
    until no route joins, or every route once more than half have (re-sharing all is exact
    too, and then cheaper than finding the rest)."""
    reached = dirty.copy()
    touched = np.zeros(routes, dtype=bool)
    while True:
        hit = np.zeros(routes, dtype=bool)
        hit[route_of[reached[link_of]]] = True
        new = hit & ~touched
        if not new.any():
            return touched
        touched |= new
        if 2 * int(touched.sum()) > routes:
            return np.ones(routes, dtype=bool)
        reached[link_of[new[route_of]]] = True


def _size(key: tuple[bytes, bytes], rates: np.ndarray) -> int:
    """Bytes a remembered set of flows and its rates hold."""
    return len(key[0]) + len(key[1]) + rates.nbytes


class _Routes:
    """Latency and links of every (sender, receiver) pair the messages use, each routed once,
    when a block first uses it (pair keys kept sorted for a vectorised lookup)."""

    def __init__(self, machine: Machine, timeline: CapacityTimeline) -> None:
        self.machine = machine
        self.routing = machine.routing
        """The routes now (links that failed change them: :meth:`reroute`)."""
        self.nodes: tuple[str, ...] = machine.placement
        """The node of each endpoint: the ranks' GPUs, then any switches (:meth:`switches`)."""
        self.number = timeline.number
        self.capacity = timeline.at_start() if timeline else timeline.nominal
        """Every link's capacity now (the capacity timeline's steps change it)."""
        none = np.zeros(0, dtype=np.int64)
        self.keys, self.ids = none, none
        """Pair keys (sender × ranks + receiver), sorted, and the pair number of each."""
        self.key_of = none
        """Each pair's key, by pair number."""
        self.latency = np.zeros(0)
        self.proxy = np.zeros(0)
        """Each pair's network proxy time per message (``Route.proxy_s``)."""
        self.count, self.first, self.links = none, none, none
        self.alone = np.zeros(0)
        """Each pair's rate alone on its route: the smallest capacity it crosses."""
        self.users = np.zeros(len(self.capacity), dtype=np.int64)
        """Active flows on each link, kept as flows join and leave."""
        self._last: tuple[np.ndarray, np.ndarray] = (none, none)  # the last block's keys, pairs
        self._shares: OrderedDict[tuple[bytes, bytes], np.ndarray] = OrderedDict()
        self._shares_bytes = 0

    def recall(self, routed: np.ndarray, copies: np.ndarray) -> np.ndarray | None:
        """The rates :meth:`shares` remembers for this set of flows, None if it does not."""
        key = (routed.tobytes(), copies.tobytes())
        rates = self._shares.get(key)
        if rates is not None:
            self._shares.move_to_end(key)
        return rates

    def shares(self, routed: np.ndarray, copies: np.ndarray) -> np.ndarray:
        """The max-min rate of a flow on each of the ``routed`` pairs, ``copies`` flows on
        each: solved once per set of flows and remembered (a pipeline's steady state meets the
        same sets again and again; the rates are a function of the set and the capacities,
        which forget every set when they change), the latest sets up to :data:`SHARES_BYTES`."""
        rates = self.recall(routed, copies)
        if rates is not None:
            return rates
        key = (routed.tobytes(), copies.tobytes())
        flow_of = np.repeat(np.arange(len(routed)), self.count[routed])
        rates = max_min_rates(flow_of, self.links_of(routed), len(routed), self.capacity,
                              copies[flow_of])
        self._shares[key] = rates
        self._shares_bytes += _size(key, rates)
        while self._shares_bytes > SHARES_BYTES:
            old_key, old_rates = self._shares.popitem(last=False)
            self._shares_bytes -= _size(old_key, old_rates)
        return rates

    def switches(self, names: tuple[str, ...]) -> None:
        """Endpoints ``-1 - g`` are switch ``names[g]`` (before any pair is routed)."""
        self.nodes = (*self.machine.placement, *names)

    def pairs(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """The pair number of each (sender, receiver), routing the pairs not met before."""
        nodes, ranks = len(self.nodes), self.machine.ranks
        if nodes > ranks:  # switch endpoints -1 - g are nodes ranks + g
            src, dst = np.where(src < 0, ranks - 1 - src, src), np.where(dst < 0, ranks - 1 - dst,
                                                                          dst)
        key = src * nodes + dst
        if np.array_equal(key, self._last[0]):  # blocks of whole steps repeat their pairs
            return self._last[1]
        at = np.searchsorted(self.keys, key)
        found = at < len(self.keys)
        found[found] = self.keys[at[found]] == key[found]
        if not found.all():
            self._add(np.unique(key[~found]))
            at = np.searchsorted(self.keys, key)
        pair: np.ndarray = self.ids[at]
        self._last = (key, pair)
        return pair

    def _add(self, keys: np.ndarray) -> None:
        latency: list[float] = []
        proxy: list[float] = []
        counts: list[int] = []
        links: list[int] = []
        alone: list[float] = []
        for key in keys.tolist():
            src, dst = divmod(key, len(self.nodes))
            if src == dst:  # a join marker: no route, no time (Schedule.markers)
                latency.append(0.0)
                proxy.append(0.0)
                alone.append(INF)
                counts.append(0)
                continue
            route = self.routing.route(self.nodes[src], self.nodes[dst])
            latency.append(route.latency_s)
            proxy.append(route.proxy_s)
            alone.append(lone_rate(self.capacity[self.number[link]] for link in route.links))
            counts.append(len(route.links))
            links.extend(self.number[link] for link in route.links)
        ids = np.arange(len(self.latency), len(self.latency) + len(keys), dtype=np.int64)
        self.latency = np.concatenate([self.latency, latency])
        self.proxy = np.concatenate([self.proxy, proxy])
        self.alone = np.concatenate([self.alone, alone])
        self.count = np.concatenate([self.count, np.array(counts, dtype=np.int64)])
        self.first = np.cumsum(self.count) - self.count
        self.links = np.concatenate([self.links, np.array(links, dtype=np.int64)])
        self.key_of = np.concatenate([self.key_of, keys])
        keys, ids = np.concatenate([self.keys, keys]), np.concatenate([self.ids, ids])
        order = np.argsort(keys, kind="stable")
        self.keys, self.ids = keys[order], ids[order]

    def crossing(self, failed: frozenset[tuple[str, str]]) -> np.ndarray:
        """The pairs whose route crosses a link of ``failed``, in pair order."""
        down = np.array([self.number[link] for link in failed], dtype=np.int64)
        pair_of = np.repeat(np.arange(len(self.count)), self.count)
        return np.unique(pair_of[np.isin(self.links, down)])

    def reroute(self, routing: Routing, pairs: np.ndarray) -> None:
        """Links failed: routes from now on are ``routing``'s (which avoids them), and ``pairs``
        (those whose route crossed one) take their new route (latency, links and lone rate)."""
        self.routing = routing
        count = self.count.copy()
        fresh: list[int] = []
        for pair in pairs.tolist():
            src, dst = divmod(int(self.key_of[pair]), len(self.nodes))
            route = self.routing.route(self.nodes[src], self.nodes[dst])
            self.latency[pair], self.proxy[pair] = route.latency_s, route.proxy_s
            count[pair] = len(route.links)
            fresh.extend(self.number[link] for link in route.links)
        first = np.cumsum(count) - count
        links = np.empty(int(count.sum()), dtype=np.int64)
        kept = np.ones(len(count), dtype=bool)
        kept[pairs] = False
        links[ranges(first[kept], count[kept])] = self.links[ranges(self.first[kept],
                                                                    self.count[kept])]
        links[ranges(first[pairs], count[pairs])] = fresh
        self.count, self.first, self.links = count, first, links
        self.set_capacity(np.zeros(0, dtype=np.int64), np.zeros(0))

    def set_capacity(self, links: np.ndarray, capacities: np.ndarray) -> None:
        """New capacities for ``links``; every pair's lone rate follows."""
        self.capacity[links] = capacities
        self._shares.clear()
        self._shares_bytes = 0
        pairs = len(self.count)
        self.alone = lone_rates(np.repeat(np.arange(pairs), self.count), self.links, pairs,
                                self.capacity)

    def links_of(self, pairs: np.ndarray) -> np.ndarray:
        """The links of each pair's route, concatenated."""
        links: np.ndarray = self.links[ranges(self.first[pairs], self.count[pairs])]
        return links


class _LinkTally:
    """Busy time (at least one flow on it) of every link, in the numbering of :class:`_Routes`:
    between two instants the flows on each link stay as they are (``_Routes.users``, which the
    run keeps anyway), so each link with one gains the time between them. And bytes per
    (sender, receiver) pair, added up as blocks of the schedule load (every message of a
    finished run moves once) and spread over the links of each pair's route at the end."""

    def __init__(self, links: int) -> None:
        self.busy = np.zeros(links)
        self.pair_bytes = np.zeros(0)
        self.settled = np.zeros(links)
        """Bytes carried on routes that pairs left when links failed (:meth:`settle`)."""
        self._held = np.zeros(links, dtype=bool)
        self._gained = np.zeros(links)

    def loaded(self, pairs: np.ndarray, nbytes: np.ndarray, known: int) -> None:
        """Messages of ``pairs`` (``nbytes`` each) were loaded; ``known`` pairs are routed."""
        added = np.bincount(pairs, weights=nbytes, minlength=known).astype(np.float64)
        added[:len(self.pair_bytes)] += self.pair_bytes
        self.pair_bytes = added

    def elapse(self, users: np.ndarray, seconds: float) -> None:
        """``seconds`` passed with ``users`` flows on each link."""
        np.greater(users, 0, out=self._held)  # in place: this runs at every instant
        np.multiply(self._held, seconds, out=self._gained)
        self.busy += self._gained

    def settle(self, routes: _Routes, pairs: np.ndarray, unmoved: np.ndarray) -> None:
        """``pairs`` are about to leave their routes with ``unmoved`` bytes still to move (each
        pair's messages loaded but not sent, and the rest of those on their way): the bytes
        they moved so far stay on the links of their old routes."""
        known = len(routes.count)
        if len(self.pair_bytes) < known:
            self.pair_bytes = np.concatenate([self.pair_bytes,
                                              np.zeros(known - len(self.pair_bytes))])
        moved = self.pair_bytes[pairs] - unmoved
        self.settled += np.bincount(routes.links_of(pairs), weights=np.repeat(
            moved, routes.count[pairs]), minlength=len(self.settled))
        self.pair_bytes[pairs] = unmoved

    def bytes(self, routes: _Routes) -> np.ndarray:
        """Bytes each link carried: every pair's bytes on every link of its route."""
        carried = self.pair_bytes[:len(routes.count)]
        if len(carried) < len(routes.count):
            carried = np.concatenate([carried, np.zeros(len(routes.count) - len(carried))])
        totals: np.ndarray = np.bincount(routes.links, weights=np.repeat(carried, routes.count),
                                         minlength=len(routes.capacity))
        return totals + self.settled


class _Window:
    """Per-message columns of the messages a run holds, in schedule order: blocks appended at
    the end and received messages dropped from the front without copying what stays (buffers
    with room to grow, compacted when full; a schedule of one block is held as built).
    ``start`` is the schedule number of the first message held: column entry i is message
    start + i."""

    def __init__(self) -> None:
        self.buffers: dict[str, np.ndarray] = {}
        self.lo = self.hi = 0
        self.start = 0

    def __len__(self) -> int:
        return self.hi - self.lo

    def __getitem__(self, name: str) -> np.ndarray:
        """A column of the messages held (a view: writes go to the window)."""
        return self.buffers[name][self.lo:self.hi]

    def append(self, columns: dict[str, np.ndarray]) -> None:
        """Messages at the end of the window, a value per column each."""
        added = len(next(iter(columns.values())))
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
        self.lo += messages
        self.start += messages


class _Snapshots:
    """Data of posted messages not yet received: one array per posting instant."""

    def __init__(self, window: _Window) -> None:
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
        return self.window["batch"]

    @property
    def offset(self) -> np.ndarray:
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


class _Followers:
    """The held messages that name each held message in one pointer column (schedule
    numbers). Where each has one follower at most (most schedules), a window column of the
    follower's schedule number (-1: none), filled in as blocks arrive; where some have several
    (threads that start after the same receive), CSR over the window, rebuilt as it moves:
    followers of m are ``order[first[m]:first[m+1]]``."""

    def __init__(self, window: _Window, pointer: str, column: str) -> None:
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
        pointer, start = self.window[self.pointer], self.window.start
        has = pointer >= start
        targets = pointer[has] - start
        counts = np.bincount(targets, minlength=len(pointer))
        self.csr = (np.concatenate([[0], np.cumsum(counts)]),
                    np.flatnonzero(has)[np.argsort(targets, kind="stable")])

    def of(self, messages: np.ndarray) -> np.ndarray:
        """Every follower of ``messages`` (window positions), concatenated."""
        if self.csr is None:
            followers = self.window[self.column][messages]
            found: np.ndarray = followers[followers >= 0] - self.window.start
            return found
        first, order = self.csr
        start, stop = first[messages], first[messages + 1]
        listed: np.ndarray = order[ranges(start, stop - start)]
        return listed


class _Run:
    """One schedule on one machine: the state of every message the window holds, advanced
    instant by instant. Message numbers in the arrays are window positions; the pointer and
    follower columns hold schedule numbers (position + ``window.start``), so that dropping
    received messages renumbers nothing."""

    def __init__(self, blocks: Blocks, machine: Machine, payload: Payload,
                 reduce_op: ReduceOp, buffers: np.ndarray, name: str,
                 recorder: Recorder | None = None, fast_forward: bool = True) -> None:
        self.blocks = blocks
        self.steady = Steady() if fast_forward else None
        self.initial_ready = 0.0
        """The latest time a message posted at the start may start at."""
        self.top = -1
        """The last message (schedule number) posted after the start, started or arrived so far:
        every message past it is as the schedule left it (:mod:`simulator.engine.steady`)."""
        self.name = name
        self.payload = payload
        self.ufunc = reduce_op.ufunc
        self.flat = buffers.reshape(-1)
        self.width = buffers.shape[1]
        timeline = CapacityTimeline(machine.routing.capacities(), machine.capacity_events,
                                    machine.outages)
        self.routes = _Routes(machine, timeline)
        down = timeline.down_at_start()
        if down:  # failed from the start: every route avoids them
            self.routes.routing = machine.routing.rerouted(down)
            self.routes.routing.check_reach(machine.placement, 0.0, down)
        self.capacity_steps = list(reversed(timeline.later()))  # the next step last
        self.recorder = recorder
        self.tally = None if recorder is None else _LinkTally(len(self.routes.capacity))
        self.itemsize = payload.dtype.itemsize
        self.gpu = machine.gpu
        gpus = [machine.gpu_of(rank) for rank in range(machine.ranks)] if machine.gpus else []
        self.launch = np.array([gpu.launch_latency_s for gpu in gpus]) if gpus else None
        self.gamma = np.array([0.0 if gpu.reduce_bandwidth_Bps is None
                               else 1.0 / gpu.reduce_bandwidth_Bps for gpu in gpus]) \
            if gpus else None  # GpuSpec.reduce_s's terms, rank by rank (a slow GPU)
        self.entry = np.array(machine.entry_s) if machine.entry_s else None  # a straggler
        # when each GPU's reducer and network proxy are next free: at its entry at the earliest
        self.gpu_free = np.zeros(machine.ranks) if self.entry is None else self.entry.copy()
        self.proxy_free = np.zeros(machine.ranks) if self.entry is None else self.entry.copy()
        none = np.zeros(0, dtype=np.int64)
        self.window = _Window()
        self.block_ends: list[int] = []  # where each loaded block ends, in schedule numbering
        self.messages = 0  # messages loaded so far, join markers left out
        self.held = 0  # the most messages the window held
        self.snapshots = _Snapshots(self.window)
        self.next_on_connection = _Followers(self.window, "connection_previous", "next_send")
        self.next_receive = _Followers(self.window, "receive_previous", "next_receive")
        self.released = _Followers(self.window, "posted_after", "releases")
        self.finished_s = 0.0  # when the last receive so far completed: the run's time
        # pending starts, active flows, reductions in progress
        self.pend_ids = none
        self.pend_at = np.zeros(0)
        self.active = none
        self.remaining = np.zeros(0)
        self.rate = np.zeros(0)
        self.updated = np.zeros(0)
        self.ends = np.zeros(0)
        self.red_ids = none
        self.red_at = np.zeros(0)
        self.instants = 0
        self.sharing_wall_s = 0.0
        self.dirty = np.zeros(len(self.routes.users), dtype=bool)
        """Links whose flows or capacity changed since the last re-share."""
        self._left = False  # a flow left (or a capacity changed) since the last re-share
        self._drop_due = False  # a block was loaded since the window last moved
        self.machine = machine
        self.switch_delay: np.ndarray | None = None  # each switch's reduction latency
        self.sums: dict[int, np.ndarray] = {}  # in-switch rounds' sums so far, by last upload
        for _ in range(min(blocks.count, blocks.reach + 1)):
            self._load()

    # -- the window ----------------------------------------------------------------------------

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
            "pair": self.routes.pairs(block.src, block.dst),
            "posted": np.full(size, INF), "arrived": np.full(size, INF),
            "received": np.zeros(size, dtype=bool), **_Snapshots.columns(size),
            "next_send": unset, "next_receive": unset.copy(), "releases": unset.copy()})
        self._views()
        if self.tally is not None:
            positions = np.arange(len(self.window) - size, len(self.window))
            self.tally.loaded(self.pair[positions], self._nbytes(positions),
                              len(self.routes.count))
        self.held = max(self.held, len(self.window))
        self.messages += size - int(block.markers.sum())
        self.block_ends.append(first + size)
        for followers in (self.next_on_connection, self.next_receive, self.released):
            followers.grown(size)
        self._drop_due = k > self.blocks.reach
        if self.steady is not None:
            self.steady.loaded(self)

    def _views(self) -> None:
        """Name the window's columns (views: the run writes through them)."""
        window = self.window
        columns: dict[str, Any] = {name: window[name] for name in ARRAYS}
        self.s = Schedule(**columns)
        self.send_view = (window["send_first"], window["send_count"])
        self.recv_view = (window["recv_first"], window["recv_count"])
        self.pair = window["pair"]
        self.posted, self.arrived = window["posted"], window["arrived"]
        self.received = window["received"]

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

    def _ready(self, messages: np.ndarray, at: float | np.ndarray) -> np.ndarray:
        """When ``messages`` posted ``at`` may start: after their route's latency, and a copy
        down of an in-switch sum after the switch's reduction latency first (the same
        floating-point operations as the SimPy engine's timeouts)."""
        if self.switch_delay is None:
            ready: np.ndarray = at + self._latency(messages)
            return ready
        src = self.s.src[messages]
        delay = np.where(src < 0, self.switch_delay[np.maximum(-1 - src, 0)], 0.0)
        ready = (at + delay) + self._latency(messages)
        return ready

    def _load_ahead(self, posted: np.ndarray) -> None:
        """Load every block that ``posted`` messages (window positions) may release, before
        any of them can: up to ``reach`` blocks past the last one posted."""
        blocks = self.blocks
        if len(self.block_ends) == blocks.count or len(posted) == 0:
            return
        top = bisect.bisect_right(self.block_ends, int(posted.max()) + self.window.start)
        while len(self.block_ends) < blocks.count and len(self.block_ends) <= top + blocks.reach:
            self._load()

    def _drop(self) -> None:
        """Forget the window's received prefix (no copy: the window's start moves)."""
        self._drop_due = False
        received = self.received
        k = len(received) if received.all() else int(np.argmin(received))
        if k == 0:
            return
        self.window.drop(k)
        self._views()
        self.pend_ids = self.pend_ids - k
        self.active = self.active - k
        self.red_ids = self.red_ids - k
        for followers in (self.next_on_connection, self.next_receive, self.released):
            followers.dropped()

    def _local(self, pointer: np.ndarray) -> np.ndarray:
        """Schedule numbers to window positions; negative for none, and for messages dropped
        (received long since)."""
        local: np.ndarray = np.where(pointer >= 0, pointer - self.window.start, NONE)
        return local

    def _nbytes(self, messages: np.ndarray) -> np.ndarray:
        """Nominal bytes of ``messages`` (Payload.nbytes), as floats."""
        s = self.s
        counts: np.ndarray = (s.send_stop[messages] - s.send_start[messages]) * self.itemsize
        return counts.astype(np.float64)

    def _latency(self, messages: np.ndarray) -> np.ndarray:
        """Each message's route latency."""
        latency: np.ndarray = self.routes.latency[self.pair[messages]]
        return latency

    def _moves(self, messages: np.ndarray) -> np.ndarray:
        """Which messages move bytes over links (the others end when they start, as in the
        fabric: no bytes, or no link between the two ranks)."""
        moves: np.ndarray = (self._nbytes(messages) > 0) & (
            self.routes.count[self.pair[messages]] > 0)
        return moves

    def _reduce_s(self, messages: np.ndarray) -> np.ndarray:
        """GpuSpec.reduce_s of each reducing receive, with the same operations (0 for copies)."""
        if self.gamma is None or self.launch is None:
            time = self.gpu.reduce_s(self._nbytes(messages))
        else:
            gpu = np.maximum(self.s.dst[messages], 0)  # reducing receives are at ranks
            time = self.launch[gpu] + self._nbytes(messages) * self.gamma[gpu]
        duration: np.ndarray = np.where(self.s.reduce[messages], time, 0.0)
        return duration

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
            raise self._too_far(k)

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> VectorTiming:
        now = 0.0
        initial = np.flatnonzero(self.s.posted_after == NONE)
        starting = self._post(initial, now)
        self.top = -1  # posted at the start: as the schedule says
        if self.steady is not None:
            self.initial_ready = float(self._ready(initial, np.zeros(len(initial))).max(
                initial=0.0))
        ended = completing = np.zeros(0, dtype=np.int64)
        while True:
            self._cascade(now, starting, ended, completing)
            if self._drop_due:
                self._drop()
            if self.steady is not None:
                now = self.steady.boundary(self, now)
            then, now = now, min(self.pend_at.min(initial=INF), self.ends.min(initial=INF),
                                 self.red_at.min(initial=INF))
            if now == INF:
                if not (self.capacity_steps and len(self.active)):
                    break
                now = self.capacity_steps[-1].at_s  # every flow waits for a link's capacity
            stepping = bool(self.capacity_steps) and self.capacity_steps[-1].at_s <= now
            if stepping:
                now = self.capacity_steps[-1].at_s
            if self.tally is not None and len(self.active):
                self.tally.elapse(self.routes.users, now - then)  # as the links were till now
                if self.steady is not None and self.steady.recording:
                    self.steady.elapsed(self.routes.users, now - then)
            if stepping:
                self._capacity_step()
            self.instants += 1
            due = self.pend_at == now
            starting = self.pend_ids[due]
            self.pend_ids, self.pend_at = self.pend_ids[~due], self.pend_at[~due]
            over = self.ends == now
            ended = self.active[over]
            self._keep_flows(~over)
            due = self.red_at == now
            completing = self.red_ids[due]
            self.red_ids, self.red_at = self.red_ids[~due], self.red_at[~due]
        return self._finish()

    def _cascade(self, now: float, starting: np.ndarray, ended: np.ndarray,
                 completing: np.ndarray) -> None:
        """Everything that happens at ``now``, until nothing more does; then re-share once."""
        joined = False
        while len(starting) or len(ended) or len(completing):
            if len(starting):
                instant = ~self._moves(starting)
                ended = np.concatenate([ended, starting[instant]])
                flows = starting[~instant]
                if len(flows):
                    self._join(flows, now)
                    joined = True
                starting = np.zeros(0, dtype=np.int64)
            new_starting, new_completing = [], []
            if len(ended):
                self.arrived[ended] = now
                self.top = max(self.top, int(ended.max()) + self.window.start)
                s, c = self._arrive(ended, now)
                new_starting.append(s)
                new_completing.append(c)
            if len(completing):
                s, c = self._complete(completing, now)
                new_starting.append(s)
                new_completing.append(c)
            ended = np.zeros(0, dtype=np.int64)
            starting = np.concatenate(new_starting) if new_starting else ended
            completing = np.concatenate(new_completing) if new_completing else ended
        if joined or self._left:
            self._reshare(now)
        self._left = False

    def _capacity_step(self) -> None:
        """Apply the capacity timeline's next step (re-shared at the end of its instant)."""
        step = self.capacity_steps.pop()
        self.routes.set_capacity(step.links, step.capacities)
        self.dirty[step.links] = True
        self._left = True
        if step.down:
            self._reroute(step.down, step.at_s)

    def _reroute(self, failed: frozenset[tuple[str, str]], now: float) -> None:
        """Links ``failed`` fail at ``now``: the pairs whose route crosses one take a new
        route, their flows on their way moved onto it with the bytes they have left, re-shared
        at the end of the instant (a flow's bytes are brought up to date when its rate moves,
        as ever)."""
        routes = self.routes
        after = routes.routing.rerouted(failed)
        after.check_reach(self.machine.placement, now, failed)
        pairs = routes.crossing(failed)
        pair = self.pair[self.active]
        moving = np.isin(pair, pairs)
        flows = np.flatnonzero(moving)
        old = routes.links_of(pair[flows])
        routes.users -= np.bincount(old, minlength=len(routes.users))
        self.dirty[old] = True
        if self.tally is not None:
            left = np.maximum(self.remaining[flows] - self.rate[flows]
                              * (now - self.updated[flows]), 0.0)
            waiting = np.flatnonzero((self.arrived == INF) & np.isin(self.pair, pairs))
            waiting = waiting[~np.isin(waiting, self.active)]
            unmoved = np.bincount(np.searchsorted(pairs, self.pair[waiting]),
                                  weights=self._nbytes(waiting), minlength=len(pairs))
            unmoved += np.bincount(np.searchsorted(pairs, pair[flows]), weights=left,
                                   minlength=len(pairs))
            self.tally.settle(routes, pairs, unmoved)
        routes.reroute(after, pairs)
        new = routes.links_of(pair[flows])
        routes.users += np.bincount(new, minlength=len(routes.users))
        self.dirty[new] = True

    def _arrive(self, ended: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
        """Messages whose bytes all arrived: free their connection, request their receive."""
        following = self.next_on_connection.of(ended)
        following = following[self.posted[following] < INF]
        ready = np.maximum(self._ready(following, self.posted[following]), now)
        starting = self._schedule_starts(following, ready, now)
        previous = self._local(self.s.receive_previous[ended])
        can = (previous < 0)
        can[~can] = self.received[previous[~can]]
        return starting, self._request(ended[can], now)

    def _request(self, messages: np.ndarray, now: float) -> np.ndarray:
        """Receives that may start now: reduce on the GPU or complete at once; those that
        complete now."""
        if len(messages) == 0:
            return messages
        duration = self._reduce_s(messages)
        busy = duration > 0
        if busy.any():
            reducing, duration = messages[busy], duration[busy]
            gpus = self.s.dst[reducing]
            finish = serve_in_order(self.gpu_free, gpus, now, duration)
            self.red_ids = np.concatenate([self.red_ids, reducing])
            self.red_at = np.concatenate([self.red_at, finish])
        now_done: np.ndarray = messages[~busy]
        if self.entry is not None and len(now_done):  # a late rank takes nothing before it enters
            dst = self.s.dst[now_done]
            entry = np.where(dst >= 0, self.entry[np.maximum(dst, 0)], now)
            early = entry > now
            if early.any():
                self.red_ids = np.concatenate([self.red_ids, now_done[early]])
                self.red_at = np.concatenate([self.red_at, entry[early]])
                now_done = now_done[~early]
        return now_done

    def _complete(self, messages: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
        """Receives that complete now: combine their data, post what they release, and request
        the receives that follow them."""
        self.received[messages] = True
        self.finished_s = now
        if self.steady is not None and self.steady.recording:
            self.steady.record(Op.RECEIVE, messages, self.window.start)
        self._combine(messages)
        starting = self._post(self.released.of(messages), now)
        following = self.next_receive.of(messages)
        following = following[self.arrived[following] < INF]
        return starting, self._request(following, now)

    def _combine(self, messages: np.ndarray) -> None:
        """Copy or reduce the data of received ``messages`` into their receivers' spans (a
        switch upload's into its round's sum)."""
        start, length = self.recv_view[0][messages], self.recv_view[1][messages]
        data = self.snapshots.take(messages, length)
        if self.switch_delay is not None:
            kept = self._add_uploads(messages, data, length)
            if not kept.all():
                data = data[np.repeat(kept, length)]
                messages, start, length = messages[kept], start[kept], length[kept]
                if len(messages) == 0:
                    return
        target = ranges(self.s.dst[messages] * self.width + start, length)
        reducing = self.s.reduce[messages]
        receivers = self.s.dst[messages]
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

    def _post(self, messages: np.ndarray, now: float) -> np.ndarray:
        """Post ``messages`` now: take their data; those whose connection is free start after
        their latency. Returns the messages that start now."""
        if len(messages) == 0:
            return messages
        self._load_ahead(messages)
        self.posted[messages] = self._handed(messages, now)
        self.top = max(self.top, int(messages.max()) + self.window.start)
        self._snapshot(messages)
        if self.steady is not None and self.steady.recording:
            self.steady.record(Op.POST, messages, self.window.start)
        previous = self._local(self.s.connection_previous[messages])
        free = previous < 0
        free[~free] = self.arrived[previous[~free]] < INF
        ready = self._ready(messages[free], self.posted[messages[free]])
        behind = previous[free]
        has = behind >= 0
        ready[has] = np.maximum(ready[has], self.arrived[behind[has]])
        return self._schedule_starts(messages[free], ready, now)

    def _snapshot(self, messages: np.ndarray) -> None:
        """Keep the data ``messages`` (window positions, being posted) carry."""
        start, length = self.send_view[0][messages], self.send_view[1][messages]
        self.snapshots.keep(messages, self._sent(messages, start, length), length)

    def _handed(self, messages: np.ndarray, now: float) -> np.ndarray:
        """When ``messages``, posted ``now``, are handed on: now (a late rank's when it enters),
        or for a network message (``proxy_s`` > 0) when its sender's proxy gets to it, in
        message order (the same floating-point operations as the SimPy fabric's wait)."""
        proxy = self.routes.proxy[self.pair[messages]]
        at = np.full(len(messages), now)
        if self.entry is not None:  # a late rank posts when it enters (ranks, not switches)
            src = self.s.src[messages]
            at = np.where(src >= 0, np.maximum(at, self.entry[np.maximum(src, 0)]), at)
        busy = proxy > 0
        if busy.any():
            start, _ = serve_spans(self.proxy_free, self.s.src[messages[busy]], now, proxy[busy])
            at[busy] = now + (start - now)
        return at

    def _sent(self, messages: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
        """The data ``messages`` carry, concatenated: their spans of their senders' buffers as
        they are now, and for a copy down of an in-switch round its sum (dropped once every
        copy of it is posted: they are all released by the round's last upload at once)."""
        src = self.s.src[messages]
        if self.switch_delay is None or (src >= 0).all():
            data: np.ndarray = self.flat[ranges(src * self.width + start, length)]
            return data
        data = np.empty(int(length.sum()), dtype=self.flat.dtype)
        at = np.cumsum(length) - length
        mine = src >= 0
        data[ranges(at[mine], length[mine])] = self.flat[ranges(src[mine] * self.width
                                                                + start[mine], length[mine])]
        rounds = self.s.posted_after[messages]
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
        up = self.s.dst[messages] < 0
        at = np.cumsum(length) - length
        start = self.window.start
        for m in np.flatnonzero(up).tolist():
            mine = data[at[m]:at[m] + length[m]]
            before = int(self.s.receive_previous[messages[m]])
            self.sums[int(messages[m]) + start] = (
                mine.copy() if before < 0 else self.ufunc(self.sums.pop(before), mine))
        rest: np.ndarray = ~up
        return rest

    def _schedule_starts(self, messages: np.ndarray, ready: np.ndarray,
                         now: float) -> np.ndarray:
        """Queue starts at ``ready``; those due now are returned."""
        due = ready == now
        self.pend_ids = np.concatenate([self.pend_ids, messages[~due]])
        self.pend_at = np.concatenate([self.pend_at, ready[~due]])
        due_now: np.ndarray = messages[due]
        return due_now

    def _join(self, flows: np.ndarray, now: float) -> None:
        self.top = max(self.top, int(flows.max()) + self.window.start)
        routes = self.routes
        links = routes.links_of(self.pair[flows])
        routes.users += np.bincount(links, minlength=len(routes.users))
        self.dirty[links] = True
        self.active = np.concatenate([self.active, flows])
        self.remaining = np.concatenate([self.remaining, self._nbytes(flows)])
        self.rate = np.concatenate([self.rate, np.zeros(len(flows))])
        self.updated = np.concatenate([self.updated, np.full(len(flows), now)])
        self.ends = np.concatenate([self.ends, np.full(len(flows), INF)])

    def _keep_flows(self, keep: np.ndarray) -> None:
        if keep.all():
            return
        routes = self.routes
        links = routes.links_of(self.pair[self.active[~keep]])
        routes.users -= np.bincount(links, minlength=len(routes.users))
        self.dirty[links] = True
        self.active, self.remaining = self.active[keep], self.remaining[keep]
        self.rate, self.updated, self.ends = self.rate[keep], self.updated[keep], self.ends[keep]
        self._left = True

    def _reshare(self, now: float) -> None:
        """New max-min rates for the active flows connected to a link whose flows or capacity
        changed since the last re-share (the component the instant touched: the kernel gives
        a component alone the rates it gets among every flow, to the bit, and the others keep
        theirs); retime those whose rate moved."""
        dirty, self.dirty = self.dirty, np.zeros(len(self.dirty), dtype=bool)
        if len(self.active) == 0:
            return
        clock = time.perf_counter()
        routes = self.routes
        pair = self.pair[self.active]
        if routes.users.max() <= 1:  # no link shared: every flow alone on its route
            rates = routes.alone[pair]
        else:  # flows on one route get one rate: share each route once, with its flow count
            copies = np.bincount(pair, minlength=len(routes.count))
            routed = np.flatnonzero(copies)
            whole = routes.recall(routed, copies[routed])  # this very set met before
            touched = routed if whole is not None else routed[_component(
                dirty, routes.links_of(routed),
                np.repeat(np.arange(len(routed)), routes.count[routed]), len(routed))]
            which = np.full(len(copies), -1, dtype=np.int64)
            which[touched] = np.arange(len(touched), dtype=np.int64)
            shared = whole if whole is not None else routes.shares(touched, copies[touched])
            mine = which[pair]
            rates = self.rate.copy()
            inside = mine >= 0
            rates[inside] = shared[mine[inside]]
        moved = rates != self.rate
        if moved.any():
            remaining = self.remaining[moved] - self.rate[moved] * (now - self.updated[moved])
            self.remaining[moved] = np.maximum(remaining, 0.0)
            self.updated[moved] = now
            self.rate[moved] = rates[moved]
            with np.errstate(divide="ignore", invalid="ignore"):  # rate 0: a link carries
                ends = now + self.remaining[moved] / rates[moved]  # nothing, the flow waits
            self.ends[moved] = np.where(rates[moved] > 0, ends, INF)
        self.sharing_wall_s += time.perf_counter() - clock

    def _finish(self) -> VectorTiming:
        if not self.received.all():
            stuck = np.flatnonzero(~self.received)
            ranks = np.unique(self.s.dst[stuck])[:8].tolist()
            raise AlgorithmError(f"{self.name}: deadlock: ranks {ranks} wait for messages "
                                 "that are never sent")
        if len(self.block_ends) < self.blocks.count:  # all received, nothing left to load it
            raise self._too_far(len(self.block_ends))
        if self.recorder is not None and self.tally is not None:
            carried = self.tally.bytes(self.routes)
            used = np.flatnonzero(carried)
            links = list(self.routes.number)
            self.recorder.add_links([links[i] for i in used.tolist()], carried[used],
                                    self.tally.busy[used])
        return VectorTiming(time_s=self.finished_s, messages=self.messages,
                            instants=self.instants, sharing_wall_s=self.sharing_wall_s,
                            held=self.held,
                            skipped=self.steady.skipped if self.steady is not None else 0)

    # -- what a steady period's jump asks of the run (simulator.engine.steady) ----------------

    @property
    def reductions_take_time(self) -> bool:
        """Whether a reducing receive holds its GPU for any time (else it is timed as a copy)."""
        if self.launch is not None and self.gamma is not None:
            return bool((self.launch > 0).any() or (self.gamma > 0).any())
        return bool(self.gpu.reduce_s(1.0) > 0)

    def ready(self, messages: np.ndarray, posted: np.ndarray) -> np.ndarray:
        """When ``messages`` (window positions), posted at ``posted``, may start at the
        earliest."""
        return self._ready(messages, posted)

    def load_through(self, number: int) -> None:
        """Load the blocks that message ``number`` (a schedule number) and what it may release
        lie in, as posting it would."""
        self._load_ahead(np.array([number - self.window.start]))

    def replay(self, op: Op, messages: np.ndarray) -> None:
        """What posting or receiving ``messages`` (window positions) does to the data, alone:
        the timing is the jump's."""
        if op is Op.POST:
            self._load_ahead(messages)
            self._snapshot(messages)
        else:
            self._combine(messages)

    @property
    def due_to_drop(self) -> bool:
        """Whether a block was loaded since the window last dropped its received prefix."""
        return self._drop_due

    def drop(self) -> None:
        """Drop the window's received prefix."""
        self._drop()

    def shift_state(self, messages: int, seconds: float, instants: int, now: float,
                    receives: bool) -> float:
        """Move what is in progress at ``now`` ``messages`` messages and ``seconds`` on, as
        ``instants`` more instants would have (``receives``: whether they completed receives);
        the time the run goes on from."""
        self.pend_ids, self.pend_at = self.pend_ids + messages, self.pend_at + seconds
        self.active = self.active + messages
        self.ends, self.updated = self.ends + seconds, self.updated + seconds
        self.red_ids, self.red_at = self.red_ids + messages, self.red_at + seconds
        for free in (self.gpu_free, self.proxy_free):
            free[free > now] += seconds
        if receives:
            self.finished_s += seconds
        self.instants += instants
        self.top += messages
        return now + seconds

    def _too_far(self, k: int) -> AlgorithmError:
        return AlgorithmError(f"{self.name}: block {k} of the schedule is released by messages "
                              f"received before it was loaded: it reaches back more than "
                              f"{self.blocks.reach} blocks")


def declines(schedule: Schedule | Blocks, machine: Machine, *, asked: bool = False) -> str | None:
    """Why the vectorised engine leaves ``schedule`` to SimPy on ``machine``, or None.

    - Several threads of one rank reducing at once on a GPU whose reductions take time queue
      in an order that same-instant ties decide, and SimPy's event order is the reference for
      those.
    - Unless the scenario ``asked`` for this engine (``engine: vector``), a schedule that is
      only a program's trace (:attr:`Blocks.traced <simulator.algorithms.schedule.Blocks.traced>`:
      no hand-written builder, as for NVLS) runs on SimPy, as ``engine: auto`` did before
      traces existed, so that auto's pick per point (the results' ``engine`` column) stays
      as it was. For NVLS SimPy is the faster anyway: its rounds pipeline a few messages an
      instant (1 GiB on a DGX H100, 32,768 messages: 2.0 s on SimPy, 3.3 s here with the
      trace's 0.3 s).
    """
    if schedule.reducing_threads > 1 and machine.gpu.reduce_s(1.0) > 0:
        return (f"its {schedule.reducing_threads} threads per rank reduce at once on a GPU with a "
                "reduction cost, whose queue only the SimPy engine orders")
    if isinstance(schedule, Blocks) and schedule.traced:
        return declines_trace(asked=asked)
    return None


def declines_trace(*, asked: bool) -> str | None:
    """:func:`declines`' rule for a schedule that is only a program's trace, which a caller can
    apply before tracing (a trace built only to be declined costs Python per message)."""
    return None if asked else "it has no hand-written schedule, and auto runs traced ones on SimPy"


def run_schedule(schedule: Schedule | Blocks, machine: Machine, payload: Payload,
                 reduce_op: ReduceOp, buffers: np.ndarray, name: str,
                 recorder: Recorder | None = None, *, fast_forward: bool = True) -> VectorTiming:
    """Run ``schedule`` (whole, or a block at a time) on ``machine``; ``buffers`` (ranks ×
    proxy) end holding its result (before ``reduce_op.finalize``). ``recorder`` (optional)
    gets every link's bytes and busy time; it must not trace (only SimPy traces).
    ``fast_forward`` jumps over a steady pipeline's repeating periods, to the bit
    (:mod:`simulator.engine.steady`)."""
    blocks = schedule if isinstance(schedule, Blocks) else Blocks.whole(schedule)
    if recorder is not None and recorder.trace:
        raise ValueError("the vectorised engine records links, not timelines: trace on SimPy")
    return _Run(blocks, machine, payload, reduce_op, buffers, name, recorder,
                fast_forward).run()
