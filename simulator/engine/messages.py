"""Point-to-point messages on the fabric: each from its sender to its receiver, entering at its
own start, on one SimPy fabric that lives as long as the run, so that every message in flight at
the same time shares links max-min fairly with the others.

What :mod:`simulator.distributed`'s ``send``/``recv`` time. A message alone on its route takes the
fabric's one-message cost, ``route.latency_s + S / route.bottleneck_Bps`` (plus the sender's
network proxy where the route has one); messages between the same pair inject one at a time, in
the order added, as an NCCL connection's FIFO does (:meth:`~simulator.engine.fabric.Fabric.
transfer`). A message to its own rank, or of no bytes, moves nothing: it arrives as it starts.

The caller adds messages as it learns of them and advances the network only as far as it knows
that no message still to come starts earlier (:meth:`Network.advance`: to the next arrival), so
the network never has to go back in time: a conservative discrete-event simulation.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass

import simpy

from simulator.engine.fabric import Fabric
from simulator.model.machine import Machine


@dataclass(frozen=True)
class Message:
    """One message: its sender's and receiver's ranks, its bytes, and when it starts (s)."""

    src: int
    dst: int
    size_bytes: int
    start_s: float


class Network:
    """The machine's fabric for messages added over time: :meth:`add` one starting at or after
    :attr:`now`, :meth:`advance` to the next arrival."""

    def __init__(self, machine: Machine) -> None:
        self._env = simpy.Environment()
        self._fabric = Fabric(self._env, machine.routing, None, machine.capacity_events,
                              machine.outages, machine.placement)
        self._placement = machine.placement
        self._ids = 0
        self._flying: set[int] = set()
        self._arrived: list[tuple[int, float]] = []
        self._arrival: simpy.Event = self._env.event()

    @property
    def now(self) -> float:
        """How far the network has run (s): no message may start before."""
        return float(self._env.now)

    @property
    def in_flight(self) -> bool:
        """Whether a message added has not arrived yet."""
        return bool(self._flying)

    def add(self, message: Message) -> int:
        """Start ``message`` (at its ``start_s``, which must not be before :attr:`now`); its
        number, which :meth:`advance` names when it arrives."""
        if message.start_s < self._env.now:
            raise ValueError(f"a message starting at {message.start_s} s on a network already at "
                             f"{self._env.now} s")
        number, self._ids = self._ids, self._ids + 1
        self._flying.add(number)
        self._env.process(self._carry(message, number))
        return number

    def advance(self) -> list[tuple[int, float]]:
        """Run to the next arrival: the messages that arrive then (number and time), in the order
        they arrived; nothing if none is in flight."""
        if not self._flying:
            return []
        self._env.run(until=self._arrival)
        while self._env.peek() == self._env.now:  # the others arriving at the same instant
            self._env.step()
        arrived, self._arrived, self._arrival = self._arrived, [], self._env.event()
        return arrived

    def _carry(self, message: Message, number: int) -> Generator[simpy.Event, object, None]:
        """Enter the message at its start, then note when it arrived: the transfer's own end,
        never a later ``env.now`` (stale flow timers may run the clock past it)."""
        if message.start_s > self._env.now:
            yield self._env.timeout(message.start_s - self._env.now)
        if message.src != message.dst and message.size_bytes > 0:
            yield self._fabric.transfer(self._placement[message.src],
                                        self._placement[message.dst], message.size_bytes,
                                        connection=(message.src, message.dst))
        self._flying.discard(number)
        self._arrived.append((number, float(self._env.now)))
        if not self._arrival.triggered:
            self._arrival.succeed()


def time_messages(machine: Machine, messages: Sequence[Message]) -> tuple[float, ...]:
    """When each of ``messages`` arrives (its last byte at the receiver), in their order: all
    on one :class:`Network` of ``machine``, each entering at its ``start_s``."""
    network = Network(machine)
    numbers = [network.add(message) for message in messages]
    ends: dict[int, float] = {}
    while network.in_flight:
        ends.update(network.advance())
    return tuple(ends[number] for number in numbers)
