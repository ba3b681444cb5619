"""The network at flow level on SimPy: transfers sharing links max-min fairly.

A transfer of ``S`` bytes from node ``a`` to node ``b`` follows one route
(:class:`~simulator.model.routing.Routing`), pays the route's summed latency once, then moves its
bytes at its max-min fair rate (:mod:`simulator.engine.sharing`), recomputed whenever a flow on a
connected link starts or ends. Alone on its links, a transfer therefore takes exactly
``route.latency_s + S / route.bottleneck_Bps``: the alpha-beta cost of one message.

SimPy cannot cancel a timeout, so when a flow's rate changes its old finish timer stays queued and
is ignored when it fires; such timers count as events and may advance ``env.now`` past the last
real completion, which is why callers take end times from the transfers themselves.

Given a :class:`~simulator.engine.record.Recorder`, the fabric tells it every flow's start and
end (per-link bytes and busy time) and, when it traces, every rate change.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator, Hashable
from dataclasses import dataclass, field

import simpy

from simulator.engine.record import Recorder
from simulator.engine.sharing import FairShare
from simulator.model.routing import LinkId, Routing


@dataclass
class _Flow:
    """Bytes of one transfer still to move, and the rate they move at since ``updated_at``."""

    remaining: float
    done: simpy.Event
    rate: float = 0.0
    updated_at: float = 0.0
    version: int = 0
    recorded: list[list[float]] | None = None  # the recorder's state of its links


@dataclass
class FabricStats:
    """Counters for one simulation: transfers started and bytes they carried."""

    transfers: int = 0
    bytes_moved: float = 0.0


class Fabric:
    """Links of a topology as shared resources on a SimPy environment."""

    def __init__(self, env: simpy.Environment, routing: Routing,
                 recorder: Recorder | None = None) -> None:
        self.env = env
        self.routing = routing
        self.recorder = recorder
        self._rates = recorder if recorder is not None and recorder.trace else None
        self.sharing: FairShare[int, LinkId] = FairShare(routing.capacities())
        self.stats = FabricStats()
        self._flows: dict[int, _Flow] = {}
        self._ids = itertools.count()
        self._last_injection: dict[Hashable, simpy.Event] = {}

    def transfer(self, src: str, dst: str, size_bytes: float,
                 connection: Hashable | None = None,
                 moved: Callable[[float, float], None] | None = None) -> simpy.Process:
        """Move ``size_bytes`` from ``src`` to ``dst``: route latency once, then shared bandwidth.

        Transfers on the same ``connection`` inject their bytes one at a time, in the order this
        method was called (a FIFO, like a NIC queue pair or an NCCL channel's per-peer buffer);
        their latencies overlap, so back-to-back messages cost ``latency + Σ bytes / bandwidth``.
        Returns the SimPy process, which ends when the last byte has arrived, after calling
        ``moved(start, end)``: when its first byte left (latency paid, the connection free) and
        when its last arrived.
        """
        injected = self.env.event()
        previous = None
        if connection is not None:
            previous = self._last_injection.get(connection)
            self._last_injection[connection] = injected
        return self.env.process(self._transfer(src, dst, size_bytes, previous, injected, moved))

    def _transfer(self, src: str, dst: str, size_bytes: float, previous: simpy.Event | None,
                  injected: simpy.Event, moved: Callable[[float, float], None] | None
                  ) -> Generator[simpy.Event, object, None]:
        route = self.routing.route(src, dst)
        self.stats.transfers += 1
        self.stats.bytes_moved += size_bytes
        if route.latency_s > 0:
            yield self.env.timeout(route.latency_s)
        if previous is not None and not previous.processed:
            yield previous  # the connection is still injecting an earlier message
        started = self.env.now
        if size_bytes > 0 and route.links:
            done = self.env.event()
            self._start(route.links, size_bytes, done)
            yield done
        injected.succeed()
        if moved is not None:
            moved(started, self.env.now)

    def _start(self, links: tuple[LinkId, ...], size_bytes: float, done: simpy.Event) -> None:
        flow_id = next(self._ids)
        flow = self._flows[flow_id] = _Flow(remaining=float(size_bytes), done=done,
                                            updated_at=self.env.now)
        if self.recorder is not None:
            flow.recorded = self.recorder.flow_started(flow_id, links, size_bytes, self.env.now)
        self._apply(self.sharing.add(flow_id, links))

    def _finish(self, flow_id: int, version: int) -> None:
        flow = self._flows.get(flow_id)
        if flow is None or flow.version != version:
            return  # superseded by a later rate change
        del self._flows[flow_id]
        if self.recorder is not None and flow.recorded is not None:
            self.recorder.flow_ended(flow_id, flow.recorded, self.env.now)
        self._apply(self.sharing.remove(flow_id))
        flow.done.succeed()

    def _apply(self, rates: dict[int, float]) -> None:
        """Advance the flows of a re-shared component to now, then retime those whose rate moved."""
        now = self.env.now
        for flow_id, rate in rates.items():
            flow = self._flows[flow_id]
            flow.remaining = max(flow.remaining - flow.rate * (now - flow.updated_at), 0.0)
            flow.updated_at = now
            if rate != flow.rate:
                if self._rates is not None:
                    self._rates.flow_rate(flow_id, rate, now)
                flow.rate = rate
                flow.version += 1
                timer = self.env.timeout(flow.remaining / rate)
                timer.callbacks.append(_Finisher(self, flow_id, flow.version))


@dataclass(frozen=True)
class _Finisher:
    """Timer callback that ends a flow unless its rate changed since the timer was set."""

    fabric: Fabric
    flow_id: int
    version: int = field(default=0)

    def __call__(self, _event: simpy.Event) -> None:
        self.fabric._finish(self.flow_id, self.version)
