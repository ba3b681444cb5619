"""The vectorised engine: runs a schedule (:mod:`simulator.algorithms.schedule`) with the SimPy
engine's semantics, processing everything that happens at one instant as arrays.

The model is the SimPy engine's (:mod:`simulator.engine.run`, :mod:`simulator.engine.fabric`),
message for message:

- a message is posted at the start or when its sender's receive ``posted_after`` completes; it
  pays its route's latency, then waits for the message before it on its connection to finish,
  then moves its bytes at its max-min fair share of every link it crosses, recomputed whenever
  a flow starts or ends;
- a receive starts when its message has arrived and the receive before it in the receiver's
  program has completed; a reducing receive then holds the receiver's GPU reduction engine
  (first come, first served) for ``launch + bytes / reduce_bandwidth``;
- data are taken from the sender's buffer when the message is posted and copied or reduced into
  the receiver's when its receive completes.

At each instant the engine ends every flow due then, completes receives, posts the messages
they release and starts those ready, cascading until nothing more happens at that instant, and
only then re-shares the links, once, by vectorised progressive filling over every active flow
(:func:`progressive_filling`). Times are computed with the same floating-point operations as the SimPy
engine's, so alone on their links the two agree to the last bit, and under sharing to rounding.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from simulator.algorithms.schedule import NONE, Schedule
from simulator.engine.payload import Payload
from simulator.errors import AlgorithmError
from simulator.model.machine import Machine
from simulator.model.reduction import ReduceOp

INF = float("inf")


@dataclass(frozen=True)
class VectorTiming:
    """What one vectorised run cost: simulated time, messages, instants processed, and the wall
    time spent re-sharing links (for the benchmark's profile)."""

    time_s: float
    messages: int
    instants: int
    sharing_wall_s: float


def ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(start, start + length)`` for every pair, in one pass.

    >>> ranges(np.array([5, 0]), np.array([2, 3])).tolist()
    [5, 6, 0, 1, 2]
    """
    if len(lengths) and lengths[0] == lengths.min() == lengths.max():  # all alike: broadcast
        return (starts[:, None] + np.arange(int(lengths[0]), dtype=np.int64)).ravel()
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    indices: np.ndarray = np.arange(total, dtype=np.int64)
    indices += np.repeat(starts - (ends - lengths), lengths)
    return indices


def progressive_filling(flow_of: np.ndarray, link_of: np.ndarray, flows: int,
                        capacity: np.ndarray) -> np.ndarray:
    """Max-min fair rate of ``flows`` flows, entry k saying flow ``flow_of[k]`` crosses link
    ``link_of[k]`` (links numbered 0..len(capacity)-1), by progressive filling
    (Bertsekas & Gallager, *Data Networks*, §6.5.2), every tightest link of a round at once.

    >>> flow_of, link_of = np.array([0, 1, 1, 2]), np.array([0, 0, 1, 1])
    >>> progressive_filling(flow_of, link_of, 3, np.array([10., 30.]))
    array([ 5.,  5., 25.])
    """
    users = np.bincount(link_of, minlength=len(capacity))
    if users.max(initial=0) <= 1:  # no link shared: each flow at its bottleneck
        rates = np.full(flows, INF)
        np.minimum.at(rates, flow_of, capacity[link_of])
        return rates
    links = np.flatnonzero(users)
    local = np.searchsorted(links, link_of)
    users = users[links]
    left = capacity[links].astype(np.float64)
    rates = np.full(flows, np.nan)
    alive = np.ones(len(flow_of), dtype=bool)
    unfrozen = users.astype(np.float64)
    while alive.any():
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(unfrozen > 0, np.maximum(left, 0.0) / unfrozen, INF)
        level = share.min()
        tight = share == level
        frozen = np.unique(flow_of[alive & tight[local]])
        rates[frozen] = level
        done = alive & np.isin(flow_of, frozen)
        left -= np.bincount(local[done], minlength=len(links)) * level
        unfrozen -= np.bincount(local[done], minlength=len(links))
        alive &= ~done
    return rates


class _Routes:
    """Latency and links of every (sender, receiver) pair a schedule uses, looked up once."""

    def __init__(self, machine: Machine, schedule: Schedule) -> None:
        ranks = machine.ranks
        key = schedule.src * ranks + schedule.dst
        pairs: np.ndarray
        if ranks * ranks <= 1 << 24:
            seen = np.zeros(ranks * ranks, dtype=bool)
            seen[key] = True
            pairs = np.flatnonzero(seen)
            lookup = np.full(ranks * ranks, -1, dtype=np.int64)
            lookup[pairs] = np.arange(len(pairs))
            self.pair = lookup[key]
        else:
            unique = np.unique(key, return_inverse=True)
            pairs, self.pair = unique[0], unique[1]
        capacities = machine.routing.capacities()
        number = {link: i for i, link in enumerate(capacities)}
        self.capacity = np.array(list(capacities.values()), dtype=np.float64)
        latency: list[float] = []
        counts: list[int] = []
        links: list[int] = []
        alone: list[float] = []
        for pair in pairs.tolist():
            src, dst = divmod(pair, ranks)
            if src == dst:  # a join marker: no route, no time (Schedule.markers)
                latency.append(0.0)
                alone.append(float("inf"))
                counts.append(0)
                continue
            route = machine.routing.route(machine.placement[src], machine.placement[dst])
            latency.append(route.latency_s)
            alone.append(route.bottleneck_Bps)
            counts.append(len(route.links))
            links.extend(number[link] for link in route.links)
        self.latency = np.array(latency, dtype=np.float64)
        self.count = np.array(counts, dtype=np.int64)
        self.first = np.cumsum(self.count) - self.count
        self.links = np.array(links, dtype=np.int64)
        self.alone = np.array(alone, dtype=np.float64)
        """Each pair's rate alone on its route: the smallest capacity it crosses."""
        self.users = np.zeros(len(self.capacity), dtype=np.int64)
        """Active flows on each link, kept as flows join and leave."""

    def links_of(self, pairs: np.ndarray) -> np.ndarray:
        """The links of each pair's route, concatenated."""
        links: np.ndarray = self.links[ranges(self.first[pairs], self.count[pairs])]
        return links


class _Snapshots:
    """Data of posted messages not yet received: one array per posting instant."""

    def __init__(self, messages: int) -> None:
        self.batch = np.full(messages, -1, dtype=np.int64)
        self.offset = np.zeros(messages, dtype=np.int64)
        self.arrays: dict[int, np.ndarray] = {}
        self.pending: dict[int, int] = {}
        self.batches = 0

    def keep(self, messages: np.ndarray, data: np.ndarray, lengths: np.ndarray) -> None:
        """Hold ``data``, the concatenated data of ``messages`` (``lengths`` elements each)."""
        key = self.batches
        self.batches += 1
        self.arrays[key] = data
        self.pending[key] = len(messages)
        self.batch[messages] = key
        if lengths[0] == lengths.min() == lengths.max():
            self.offset[messages] = np.arange(len(messages)) * lengths[0]
        else:
            self.offset[messages] = np.cumsum(lengths) - lengths

    def take(self, messages: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """The data of ``messages``, concatenated in order."""
        batches = self.batch[messages]
        first = int(batches[0])
        if batches.min() == first == batches.max():  # all posted at one instant
            data: np.ndarray = self.arrays[first][ranges(self.offset[messages], lengths)]
            self._taken(first, len(messages))
            return data
        parts = np.empty(int(lengths.sum()), dtype=next(iter(self.arrays.values())).dtype)
        at = np.cumsum(lengths) - lengths
        for key in np.unique(batches).tolist():
            mine = batches == key
            source = ranges(self.offset[messages[mine]], lengths[mine])
            parts[ranges(at[mine], lengths[mine])] = self.arrays[key][source]
            self._taken(key, int(mine.sum()))
        return parts

    def _taken(self, key: int, messages: int) -> None:
        """Forget a posting instant's data once all its messages were received."""
        self.pending[key] -= messages
        if self.pending[key] == 0:
            del self.arrays[key], self.pending[key]


class _Followers:
    """The messages that name each message as their predecessor in one pointer array (several
    may: threads that start after the same receive), as CSR: followers of m are
    ``order[first[m]:first[m+1]]``."""

    def __init__(self, previous: np.ndarray) -> None:
        has = previous >= 0
        counts = np.bincount(previous[has], minlength=len(previous))
        self.first = np.concatenate([[0], np.cumsum(counts)])
        if counts.max(initial=0) <= 1:  # one follower at most: place them without a sort
            self.order = np.empty(int(self.first[-1]), dtype=np.int64)
            self.order[self.first[previous[has]]] = np.flatnonzero(has)
        else:
            self.order = np.flatnonzero(has)[np.argsort(previous[has], kind="stable")]

    def of(self, messages: np.ndarray) -> np.ndarray:
        """Every follower of ``messages``, concatenated."""
        first, stop = self.first[messages], self.first[messages + 1]
        followers: np.ndarray = self.order[ranges(first, stop - first)]
        return followers


class _Run:
    """One schedule on one machine: the state of every message, advanced instant by instant."""

    def __init__(self, schedule: Schedule, machine: Machine, payload: Payload,
                 reduce_op: ReduceOp, buffers: np.ndarray, name: str) -> None:
        self.s = schedule
        self.name = name
        self.payload = payload
        self.ufunc = reduce_op.ufunc
        self.flat = buffers.reshape(-1)
        self.width = buffers.shape[1]
        m = schedule.size
        self.routes = _Routes(machine, schedule)
        itemsize = payload.dtype.itemsize
        self.itemsize = itemsize
        self.gpu = machine.gpu
        self.gpu_free = np.zeros(machine.ranks)
        self.send_view = payload.views(schedule.send_start, schedule.send_stop)
        same = schedule.recv_start is schedule.send_start and schedule.recv_stop is schedule.send_stop
        self.recv_view = self.send_view if same else payload.views(schedule.recv_start,
                                                                   schedule.recv_stop)
        self._check()
        self.next_on_connection = _Followers(schedule.connection_previous)
        self.next_receive = (self.next_on_connection
                             if schedule.receive_previous is schedule.connection_previous
                             else _Followers(schedule.receive_previous))
        self.released = _Followers(schedule.posted_after)
        self.posted = np.full(m, INF)
        self.arrived = np.full(m, INF)
        self.received = np.zeros(m, dtype=bool)
        self.finished_s = 0.0  # when the last receive so far completed: the run's time
        self.snapshots = _Snapshots(m)
        # pending starts, active flows, reductions in progress
        self.pend_ids = np.zeros(0, dtype=np.int64)
        self.pend_at = np.zeros(0)
        self.active = np.zeros(0, dtype=np.int64)
        self.remaining = np.zeros(0)
        self.rate = np.zeros(0)
        self.updated = np.zeros(0)
        self.ends = np.zeros(0)
        self.red_ids = np.zeros(0, dtype=np.int64)
        self.red_at = np.zeros(0)
        self.instants = 0
        self.sharing_wall_s = 0.0
        self._left = False  # a flow left since the last re-share

    def _nbytes(self, messages: np.ndarray) -> np.ndarray:
        """Nominal bytes of ``messages`` (Payload.nbytes), as floats."""
        s = self.s
        counts: np.ndarray = (s.send_stop[messages] - s.send_start[messages]) * self.itemsize
        return counts.astype(np.float64)

    def _latency(self, messages: np.ndarray) -> np.ndarray:
        """Each message's route latency."""
        latency: np.ndarray = self.routes.latency[self.routes.pair[messages]]
        return latency

    def _moves(self, messages: np.ndarray) -> np.ndarray:
        """Which messages move bytes over links (the others end when they start, as in the
        fabric: no bytes, or no link between the two ranks)."""
        moves: np.ndarray = (self._nbytes(messages) > 0) & (
            self.routes.count[self.routes.pair[messages]] > 0)
        return moves

    def _reduce_s(self, messages: np.ndarray) -> np.ndarray:
        """GpuSpec.reduce_s of each reducing receive, with the same operations (0 for copies)."""
        duration: np.ndarray = np.where(self.s.reduce[messages],
                                        self.gpu.reduce_s(self._nbytes(messages)), 0.0)
        return duration

    def _check(self) -> None:
        s, count = self.s, self.payload.count
        for name in ("posted_after", "connection_previous", "receive_previous"):
            pointer = getattr(s, name)
            if len(pointer) and (pointer.min() < NONE or pointer.max() >= s.size):
                raise AlgorithmError(f"{self.name}: schedule field {name} points outside its "
                                     f"{s.size} messages")
        bad = np.flatnonzero((s.send_start < 0) | (s.send_stop > count) | (s.recv_start < 0)
                             | (s.recv_stop > count) | (s.send_start > s.send_stop))
        if len(bad):
            m = int(bad[0])
            raise AlgorithmError(f"{self.name}: message {m} from rank {s.src[m]} uses elements "
                                 f"outside the buffer of {count}")
        bad = np.flatnonzero(s.send_stop - s.send_start != s.recv_stop - s.recv_start)
        if len(bad):
            m = int(bad[0])
            raise AlgorithmError(f"{self.name}: rank {s.dst[m]} received "
                                 f"{s.send_stop[m] - s.send_start[m]} elements from rank "
                                 f"{s.src[m]} into a span of {s.recv_stop[m] - s.recv_start[m]}")
        bad = np.flatnonzero(self.send_view[1] != self.recv_view[1])
        if len(bad):
            raise AlgorithmError(f"{self.name}: the proxy payload cannot represent a move of "
                                 f"message {int(bad[0])}; rerun with a larger proxy")

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> VectorTiming:
        now = 0.0
        initial = np.flatnonzero(self.s.posted_after == NONE)
        starting = self._post(initial, now)
        ended = completing = np.zeros(0, dtype=np.int64)
        while True:
            self._cascade(now, starting, ended, completing)
            now = min(self.pend_at.min(initial=INF), self.ends.min(initial=INF),
                      self.red_at.min(initial=INF))
            if now == INF:
                break
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

    def _arrive(self, ended: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
        """Messages whose bytes all arrived: free their connection, request their receive."""
        following = self.next_on_connection.of(ended)
        following = following[self.posted[following] < INF]
        ready = np.maximum(self.posted[following] + self._latency(following), now)
        starting = self._schedule_starts(following, ready, now)
        previous = self.s.receive_previous[ended]
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
            if len(gpus) == 1 or np.bincount(gpus).max() == 1:  # one request per GPU
                finish = np.maximum(now, self.gpu_free[gpus]) + duration
                self.gpu_free[gpus] = finish
            else:  # several on one GPU (parallel reducing threads): first come, first served
                finish = np.empty(len(reducing))
                for k in np.argsort(gpus, kind="stable").tolist():
                    finish[k] = max(now, self.gpu_free[gpus[k]]) + duration[k]
                    self.gpu_free[gpus[k]] = finish[k]
            self.red_ids = np.concatenate([self.red_ids, reducing])
            self.red_at = np.concatenate([self.red_at, finish])
        now_done: np.ndarray = messages[~busy]
        return now_done

    def _complete(self, messages: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
        """Receives that complete now: combine their data, post what they release, and request
        the receives that follow them."""
        self.received[messages] = True
        self.finished_s = now
        start, length = self.recv_view[0][messages], self.recv_view[1][messages]
        data = self.snapshots.take(messages, length)
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
        starting = self._post(self.released.of(messages), now)
        following = self.next_receive.of(messages)
        following = following[self.arrived[following] < INF]
        return starting, self._request(following, now)

    def _post(self, messages: np.ndarray, now: float) -> np.ndarray:
        """Post ``messages`` now: take their data; those whose connection is free start after
        their latency. Returns the messages that start now."""
        if len(messages) == 0:
            return messages
        self.posted[messages] = now
        start, length = self.send_view[0][messages], self.send_view[1][messages]
        source = ranges(self.s.src[messages] * self.width + start, length)
        self.snapshots.keep(messages, self.flat[source], length)
        previous = self.s.connection_previous[messages]
        free = previous < 0
        free[~free] = self.arrived[previous[~free]] < INF
        ready = now + self._latency(messages[free])
        behind = previous[free]
        has = behind >= 0
        ready[has] = np.maximum(ready[has], self.arrived[behind[has]])
        return self._schedule_starts(messages[free], ready, now)

    def _schedule_starts(self, messages: np.ndarray, ready: np.ndarray,
                         now: float) -> np.ndarray:
        """Queue starts at ``ready``; those due now are returned."""
        due = ready == now
        self.pend_ids = np.concatenate([self.pend_ids, messages[~due]])
        self.pend_at = np.concatenate([self.pend_at, ready[~due]])
        due_now: np.ndarray = messages[due]
        return due_now

    def _join(self, flows: np.ndarray, now: float) -> None:
        routes = self.routes
        routes.users += np.bincount(routes.links_of(routes.pair[flows]), minlength=len(routes.users))
        self.active = np.concatenate([self.active, flows])
        self.remaining = np.concatenate([self.remaining, self._nbytes(flows)])
        self.rate = np.concatenate([self.rate, np.zeros(len(flows))])
        self.updated = np.concatenate([self.updated, np.full(len(flows), now)])
        self.ends = np.concatenate([self.ends, np.full(len(flows), INF)])

    def _keep_flows(self, keep: np.ndarray) -> None:
        if keep.all():
            return
        routes = self.routes
        routes.users -= np.bincount(routes.links_of(routes.pair[self.active[~keep]]),
                                    minlength=len(routes.users))
        self.active, self.remaining = self.active[keep], self.remaining[keep]
        self.rate, self.updated, self.ends = self.rate[keep], self.updated[keep], self.ends[keep]
        self._left = True

    def _reshare(self, now: float) -> None:
        """New max-min rates for the active flows; retime those whose rate moved."""
        if len(self.active) == 0:
            return
        clock = time.perf_counter()
        routes = self.routes
        pair = routes.pair[self.active]
        if routes.users.max() <= 1:  # no link shared: every flow alone on its route
            rates = routes.alone[pair]
        else:
            link_of = routes.links_of(pair)
            flow_of = np.repeat(np.arange(len(self.active)), routes.count[pair])
            rates = progressive_filling(flow_of, link_of, len(self.active), routes.capacity)
        moved = rates != self.rate
        if moved.any():
            remaining = self.remaining[moved] - self.rate[moved] * (now - self.updated[moved])
            self.remaining[moved] = np.maximum(remaining, 0.0)
            self.updated[moved] = now
            self.rate[moved] = rates[moved]
            self.ends[moved] = now + self.remaining[moved] / rates[moved]
        self.sharing_wall_s += time.perf_counter() - clock

    def _finish(self) -> VectorTiming:
        if not self.received.all():
            stuck = np.flatnonzero(~self.received)
            ranks = np.unique(self.s.dst[stuck])[:8].tolist()
            raise AlgorithmError(f"{self.name}: deadlock: ranks {ranks} wait for messages "
                                 "that are never sent")
        messages = self.s.size - int(self.s.markers.sum())
        return VectorTiming(time_s=self.finished_s, messages=messages,
                            instants=self.instants, sharing_wall_s=self.sharing_wall_s)


def declines(schedule: Schedule, machine: Machine) -> str | None:
    """Why the vectorised engine leaves ``schedule`` to SimPy on ``machine``, or None: several
    threads of one rank reducing at once on a GPU whose reductions take time queue in an order
    that same-instant ties decide, and SimPy's event order is the reference for those."""
    if schedule.reducing_threads > 1 and machine.gpu.reduce_s(1.0) > 0:
        return (f"its {schedule.reducing_threads} threads per rank reduce at once on a GPU with a "
                "reduction cost, whose queue only the SimPy engine orders")
    return None


def run_schedule(schedule: Schedule, machine: Machine, payload: Payload, reduce_op: ReduceOp,
                 buffers: np.ndarray, name: str) -> VectorTiming:
    """Run ``schedule`` on ``machine``; ``buffers`` (ranks × proxy) end holding its result
    (before ``reduce_op.finalize``)."""
    return _Run(schedule, machine, payload, reduce_op, buffers, name).run()
