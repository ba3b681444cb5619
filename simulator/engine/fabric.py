"""The network at flow level on SimPy: transfers sharing links max-min fairly.

A transfer of ``S`` bytes from node ``a`` to node ``b`` follows one route
(:class:`~simulator.model.routing.Routing`), pays the route's summed latency once, then moves its
bytes at its max-min fair rate (:mod:`simulator.engine.sharing`), recomputed whenever a flow on a
connected link starts or ends. Alone on its links, a transfer therefore takes exactly
``route.latency_s + S / route.bottleneck_Bps``: the alpha-beta cost of one message. A route
with a ``proxy_s`` (a network message under NCCL's execution) first waits for its sender's
network proxy, which posts one such message at a time, each holding it ``proxy_s``, in the
order they were sent (:func:`~simulator.engine.kernel.serve_next`); those sent at one time
in their ``turn`` (their channel), as NCCL's proxy thread sweeps its list of operations
(:class:`_Proxies`), whatever order SimPy processed their events in.

SimPy cannot cancel a timeout, so when a flow's rate changes its old finish timer stays queued and
is ignored when it fires; such timers count as events and may advance ``env.now`` past the last
real completion, which is why callers take end times from the transfers themselves.

Link capacities follow the machine's capacity timeline (:class:`~simulator.engine.kernel.
CapacityTimeline`): at each of its instants the flows crossing a changed link are re-shared.
Where links fail there, the flows crossing them move to their pair's new route
(:meth:`~simulator.model.routing.Routing.rerouted`) with the bytes they have left, and every
later message takes the new routes. Without capacity events nothing is scheduled and the
capacities are the graph's.

Given a :class:`~simulator.engine.record.Recorder`, the fabric tells it every flow's start and
end (per-link bytes and busy time) and, when it traces, every rate change.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Generator, Hashable, Sequence
from dataclasses import dataclass, field

import simpy

from simulator.engine.kernel import CapacityTimeline, serve_next
from simulator.engine.record import Recorder
from simulator.engine.sharing import FairShare
from simulator.errors import OverBudget
from simulator.model.machine import CapacityEvent, Outage
from simulator.model.routing import LinkId, Route, Routing


@dataclass(slots=True)
class _Flow:
    """Bytes of one transfer still to move, and the rate they move at since ``updated_at``;
    ``timer`` is its finish timer, due at ``ends_at``, and ``version`` the timer's name
    (unique over the fabric);
    ``before`` is its state as the instant ``changed_at`` began, the last instant its rate
    changed."""

    remaining: float
    done: simpy.Event
    ends: tuple[str, str]
    """Its sender's and receiver's nodes: its route may change (a link failed)."""
    rate: float = 0.0
    updated_at: float = 0.0
    version: int = -1
    timer: simpy.Event | None = None
    ends_at: float = float("inf")
    changed_at: float = -1.0
    before: tuple[float, float, float, int, simpy.Event | None, float] = (
        0.0, 0.0, 0.0, -1, None, float("inf"))
    recorded: list[list[float]] | None = None  # the recorder's state of its links


class Holding:
    """What a SimPy run holds that grows with its size, counted as it runs: messages posted and
    not yet received, and flow timers set and not yet fired (SimPy cannot cancel a timer, so a
    flow whose rate changes leaves its old timer queued until it is due; re-sharing a link of
    thousands of flows, as ``direct`` does, leaves thousands a flow). Neither is known before
    the run (a ring's two million messages are a thousand at a time, a ``direct``'s all at
    once), so beyond ``limit`` of them the run stops with :class:`~simulator.errors.OverBudget`
    before they fill the memory; ``most``: the most held at once."""

    __slots__ = ("limit", "most", "now")

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.now = 0
        self.most = 0

    def take(self) -> None:
        """One more held; OverBudget beyond the limit."""
        self.now += 1
        if self.now > self.most:
            self.most = self.now
            if self.limit is not None and self.now > self.limit:
                raise OverBudget("messages in flight and flow timers on the SimPy engine",
                                 self.now, self.limit)

    def give(self) -> None:
        """One fewer held."""
        self.now -= 1


@dataclass
class FabricStats:
    """Counters for one simulation: transfers started and bytes they carried."""

    transfers: int = 0
    bytes_moved: float = 0.0
    capacity_steps: int = 0
    """Instants of the capacity timeline processed (SimPy events that are not the run's)."""
    proxy_rounds: int = 0
    """Times the proxies took what they were handed (:class:`_Proxies`: SimPy events that
    are not the run's either)."""


class Fabric:
    """Links of a topology as shared resources on a SimPy environment."""

    def __init__(self, env: simpy.Environment, routing: Routing,
                 recorder: Recorder | None = None,
                 capacity_events: Sequence[CapacityEvent] = (),
                 outages: Sequence[Outage] = (), ranks: Sequence[str] = (),
                 holding: Holding | None = None) -> None:
        self.env = env
        self.holding = holding if holding is not None else Holding()
        self.routing = routing
        self.recorder = recorder
        self.ranks = tuple(ranks)
        """The ranks' nodes, which failed links must leave able to reach each other."""
        self._rates = recorder if recorder is not None and recorder.trace else None
        self.stats = FabricStats()
        if not capacity_events and not outages:
            self.sharing: FairShare[int, LinkId] = FairShare(routing.capacities())
        else:  # the events at 0 now, each later instant a timer set from 0 (so exactly on time)
            timeline = CapacityTimeline(routing.capacities(), capacity_events, outages)
            links = list(timeline.number)
            self.sharing = FairShare(dict(zip(links, timeline.at_start().tolist(), strict=True)))
            down = timeline.down_at_start()
            if down:  # failed from the start: every route avoids them
                self.routing = routing.rerouted(down)
                self.routing.check_reach(self.ranks, 0.0, down)
            for step in timeline.later():
                change = dict(zip([links[i] for i in step.links.tolist()],
                                  step.capacities.tolist(), strict=True))
                env.timeout(step.at_s).callbacks.append(
                    functools.partial(self._capacity, change, step.down))
        self._flows: dict[int, _Flow] = {}
        self._ids = itertools.count()
        self._versions = itertools.count()
        self._last_injection: dict[Hashable, simpy.Event] = {}
        self._proxies = _Proxies(env, self.stats)

    def transfer(self, src: str, dst: str, size_bytes: float,
                 connection: Hashable | None = None,
                 moved: Callable[[float, float], None] | None = None,
                 turn: tuple[int, ...] = ()) -> simpy.Process:
        """Move ``size_bytes`` from ``src`` to ``dst``: route latency once, then shared bandwidth.

        Transfers on the same ``connection`` inject their bytes one at a time, in the order this
        method was called (a FIFO, like a NIC queue pair or an NCCL channel's per-peer buffer);
        their latencies overlap, so back-to-back messages cost ``latency + Σ bytes / bandwidth``.
        On a route with a ``proxy_s``, ``turn`` (the sender's channel path) orders it among the
        messages its sender's proxy is handed at the same time (:class:`_Proxies`).
        Returns the SimPy process, which ends when the last byte has arrived, after calling
        ``moved(start, end)``: when its first byte left (latency paid, the connection free) and
        when its last arrived.
        """
        injected = self.env.event()
        previous = None
        if connection is not None:
            previous = self._last_injection.get(connection)
            self._last_injection[connection] = injected
        route = self.routing.route(src, dst)
        handed = (self._proxies.hand(src, turn, route.proxy_s) if route.proxy_s > 0
                  else None)  # the sender's proxy posts it when it gets to it
        return self.env.process(self._transfer(route, size_bytes, handed, previous, injected,
                                               moved))

    def _transfer(self, route: Route, size_bytes: float, handed: _Handed | None,
                  previous: simpy.Event | None, injected: simpy.Event,
                  moved: Callable[[float, float], None] | None
                  ) -> Generator[simpy.Event, object, None]:
        self.stats.transfers += 1
        self.stats.bytes_moved += size_bytes
        if handed is not None:
            yield handed.round  # the proxy takes it at the end of this time
            if handed.wait > 0:
                yield self.env.timeout(handed.wait)
        if route.latency_s > 0:
            yield self.env.timeout(route.latency_s)
        if previous is not None and not previous.processed:
            yield previous  # the connection is still injecting an earlier message
        started = self.env.now
        if size_bytes > 0 and route.links:
            if self.routing.down:  # links failed since it was sent: its pair's route now
                route = self.routing.route(route.nodes[0], route.nodes[-1])
            done = self.env.event()
            self._start(route, size_bytes, done)
            yield done
        injected.succeed()
        if moved is not None:
            moved(started, self.env.now)

    def _start(self, route: Route, size_bytes: float, done: simpy.Event) -> None:
        flow_id = next(self._ids)
        flow = self._flows[flow_id] = _Flow(remaining=float(size_bytes), done=done,
                                            ends=(route.nodes[0], route.nodes[-1]),
                                            updated_at=self.env.now)
        if self.recorder is not None:
            flow.recorded = self.recorder.flow_started(flow_id, route.links, size_bytes,
                                                       self.env.now)
        self._apply(self.sharing.add(flow_id, route.links))

    def _finish(self, flow_id: int, version: int) -> None:
        flow = self._flows.get(flow_id)
        if flow is None or flow.version != version:
            return  # superseded by a later rate change
        del self._flows[flow_id]
        if self.recorder is not None and flow.recorded is not None:
            self.recorder.flow_ended(flow_id, flow.recorded, self.env.now)
        self._apply(self.sharing.remove(flow_id))
        flow.done.succeed()

    def _capacity(self, change: dict[LinkId, float], failed: frozenset[LinkId],
                  _event: simpy.Event) -> None:
        """An instant of the capacity timeline: new capacities, the flows crossing failed
        links moved to their new routes, and all these flows re-shared once."""
        self.stats.capacity_steps += 1
        moves: dict[int, tuple[LinkId, ...]] = {}
        if failed:
            self.routing = self.routing.rerouted(failed)
            self.routing.check_reach(self.ranks, self.env.now, failed)
            now = self.env.now
            for flow_id in self.sharing.crossing(failed):
                flow = self._flows[flow_id]
                links = moves[flow_id] = self.routing.route(*flow.ends).links
                if self.recorder is not None and flow.recorded is not None:
                    left = max(flow.remaining - flow.rate * (now - flow.updated_at), 0.0)
                    flow.recorded = self.recorder.flow_moved(flow_id, flow.recorded, links,
                                                             left, flow.rate, now)
        self._apply(self.sharing.change(change, moves))

    def _apply(self, rates: dict[int, float]) -> None:
        """Retime the flows of a re-shared component whose rate moved: their bytes moved so
        far, at the old rate, are taken off, and their finish timer set anew.

        The vectorised engine re-shares once an instant; here a flow's rate may change several
        times at one instant (a flow ends, the next message on its connection starts). So that
        both engines do the same arithmetic, a flow's bytes are brought up to date only when its
        rate moves, a flow whose rate comes back, within one instant, to the rate it had when
        the instant began takes back its state then, timer included, as if nothing happened,
        and a flow whose timer was due at this instant as it began keeps it, as the vectorised engine ends
        every flow due at an instant before it re-shares (re-timing it would leave a residue of
        rounding, a 1e-12-byte flow ending one ulp later). A flow re-timed to end at this very
        instant (a residue at a rate that may yet change back) ends after the instant's other
        events, when its rate is the one the vectorised engine's single re-share gives."""
        now = self.env.now
        for flow_id, rate in rates.items():
            flow = self._flows[flow_id]
            if rate == flow.rate or (flow.ends_at == now and flow.changed_at != now):
                continue  # unchanged, or due now as the instant began: it ends at this instant
            if self._rates is not None:
                self._rates.flow_rate(flow_id, rate, now)
            if flow.changed_at != now:  # its first change this instant
                flow.changed_at = now
                flow.before = (flow.rate, flow.remaining, flow.updated_at, flow.version,
                               flow.timer, flow.ends_at)  # a new flow's: rate 0, not yet timed
            elif rate == flow.before[0]:
                (flow.rate, flow.remaining, flow.updated_at, flow.version, flow.timer,
                 flow.ends_at) = flow.before
                if flow.timer is not None and flow.timer.processed:  # it fired now, superseded
                    flow.timer = self.env.timeout(0.0)
                    self._finish_at(flow.timer, flow_id, flow.version)
                continue
            flow.remaining = max(flow.remaining - flow.rate * (now - flow.updated_at), 0.0)
            flow.updated_at = now
            flow.rate = rate
            flow.version = next(self._versions)
            if not rate:  # a link of its route carries nothing now: no timer till it does
                flow.ends_at, flow.timer = float("inf"), None
                continue
            flow.ends_at = now + flow.remaining / rate  # when SimPy schedules its timer
            flow.timer = (self.env.timeout(flow.remaining / rate) if flow.ends_at != now
                          else _AtInstantEnd(self.env))
            self._finish_at(flow.timer, flow_id, flow.version)

    def _finish_at(self, timer: simpy.Event, flow_id: int, version: int) -> None:
        """End the flow when ``timer`` fires, unless its rate changed since (a timer held till
        then: :class:`Holding`)."""
        self.holding.take()
        timer.callbacks.append(_Finisher(self, flow_id, version))


_INSTANT_END = simpy.events.EventPriority(simpy.events.NORMAL + 1)
"""A priority below SimPy's normal one: an event of it at time t comes after every other event
at t, whenever those were scheduled, but the proxies' round (:data:`_TIME_END`)."""

_TIME_END = simpy.events.EventPriority(simpy.events.NORMAL + 2)
"""The lowest priority: the proxies' round at time t comes after every other event at t, the
flows that end at :data:`_INSTANT_END` included (the vectorised engine ends those at an instant
of their own at t, and serves the proxies once its time moves on)."""


@dataclass(slots=True)
class _Handed:
    """A message handed to its sender's network proxy: the round that serves it, and then how
    long it waits for the proxy (from the time it was handed)."""

    round: simpy.Event
    wait: float = 0.0


class _Proxies:
    """The senders' network proxies: each posts one message at a time, ``proxy_s`` each, first
    come, first served (:func:`~simulator.engine.kernel.serve_next`), and the messages handed
    to one at the same time in their turn (their channel path), then in the order they were
    handed. That is NCCL's proxy thread: it sweeps its list of operations from the head
    (src/proxy.cc ``progressOps``), a collective's operations appended to it channel by
    channel (src/enqueue.cc merges the channels' proxy operations by ``opCount``, the lower
    channel first on a tie; src/proxy.cc ``ProxyAppend`` appends to the end of the list), so
    that of several channels whose data are ready at once the lower posts first. SimPy
    processes one time's events in an order of its own; so the messages handed at a time wait
    for a round at its end (:data:`_TIME_END`), which serves them in that order, as the
    vectorised engine does (:meth:`simulator.engine.devices.Devices.handed`)."""

    def __init__(self, env: simpy.Environment, stats: FabricStats) -> None:
        self.env, self.stats = env, stats
        self.free: dict[str, float] = {}  # when each sender's proxy is next free
        self.handed: list[tuple[str, tuple[int, ...], float, _Handed]] = []
        self.round: simpy.Event | None = None

    def hand(self, src: str, turn: tuple[int, ...], proxy_s: float) -> _Handed:
        """A message handed to ``src``'s proxy now, holding it ``proxy_s``: its round."""
        if self.round is None:
            self.round = _AtTimeEnd(self.env)
            self.round.callbacks.append(self._serve)  # before the transfers waiting for it
        handed = _Handed(self.round)
        self.handed.append((src, turn, proxy_s, handed))
        return handed

    def _serve(self, _event: simpy.Event) -> None:
        """The round: each proxy serves what it was handed at this time, in turn (a stable
        sort: one turn's messages in the order handed), each waiting from now till its post."""
        self.stats.proxy_rounds += 1
        now = self.env.now
        handed, self.handed, self.round = self.handed, [], None
        handed.sort(key=lambda one: (one[0], one[1]))
        for src, _, proxy_s, one in handed:
            start, self.free[src] = serve_next(self.free.get(src, 0.0), now, proxy_s)
            one.wait = start - now


class _AtTimeEnd(simpy.Event):
    """An event due now, processed after every other event of this time (:data:`_TIME_END`)."""

    def __init__(self, env: simpy.Environment) -> None:
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, _TIME_END)


class _AtInstantEnd(simpy.Event):
    """A timer due now, processed after every other event of this instant (as a ``Timeout`` of
    0 is, but after the events scheduled later at this instant too)."""

    def __init__(self, env: simpy.Environment) -> None:
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, _INSTANT_END)


@dataclass(frozen=True)
class _Finisher:
    """Timer callback that ends a flow unless its rate changed since the timer was set."""

    fabric: Fabric
    flow_id: int
    version: int = field(default=0)

    def __call__(self, _event: simpy.Event) -> None:
        self.fabric.holding.give()
        self.fabric._finish(self.flow_id, self.version)
