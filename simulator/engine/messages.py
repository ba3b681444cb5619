"""Point-to-point messages on the fabric: each from its sender to its receiver, starting at its
own time, all in one SimPy run so that those in flight together share links max-min fairly.

What :mod:`simulator.dist`'s ``send``/``recv`` time: a message alone on its route takes the
fabric's one-message cost, ``route.latency_s + S / route.bottleneck_Bps`` (plus the sender's
network proxy where the route has one); messages between the same pair inject one at a time, in
the order given, as an NCCL connection's FIFO does (:meth:`~simulator.engine.fabric.Fabric.
transfer`). A message to its own rank, or of no bytes, moves nothing and takes no time.
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


def time_messages(machine: Machine, messages: Sequence[Message]) -> tuple[float, ...]:
    """When each of ``messages`` has arrived (its last byte at the receiver), in their order;
    they run together on one fabric of ``machine`` (its routes, links, capacity events and
    network proxies), each entering it at its ``start_s``."""
    env = simpy.Environment()
    fabric = Fabric(env, machine.routing, None, machine.capacity_events, machine.outages,
                    machine.placement)
    ends = [message.start_s for message in messages]
    for i, message in enumerate(messages):
        if message.src != message.dst and message.size_bytes > 0:
            env.process(_carry(env, fabric, machine, message, i, ends))
    env.run()
    return tuple(ends)


def _carry(env: simpy.Environment, fabric: Fabric, machine: Machine, message: Message, i: int,
           ends: list[float]) -> Generator[simpy.Event, object, None]:
    """Enter message ``i`` at its start and note when it arrives: the transfer's own end, not
    ``env.now`` after the run (stale flow timers may run the clock past it)."""
    if message.start_s > 0:
        yield env.timeout(message.start_s)
    yield fabric.transfer(machine.placement[message.src], machine.placement[message.dst],
                          message.size_bytes, connection=(message.src, message.dst))
    ends[i] = env.now
