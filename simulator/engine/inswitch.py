"""In-switch reduction (NVLink SHARP, as NCCL's NVLS algorithm uses it), for the SimPy engine.

Each member of a group posts a span to the group's reducing switch; when the k-th contribution
of every member has arrived, the switch combines them (at line rate, as NVSwitch reduces in its
datapath; only the switch's fixed ``reduction_latency`` is charged, as a delay that overlaps
between rounds) and multicasts the result to its receivers (every member, or those the
contributions name: a reduce-scatter's head), one copy down each receiver's link. A round of one
contribution (``comm.switch_multicast``) reduces nothing: its copies go down at once.
Contributions from one rank to one series of rounds (a
:data:`~simulator.algorithms.comm.SwitchKey`: contributors, receivers, channel, multicast)
inject one after another (a FIFO per rank and series, as NCCL gives each NVLS head its own
connection), as do the copies the switch sends down each link, so contributions in pieces
pipeline up against results coming down; different series share the links as any flows do.

A traced run (the fabric's recorder traces) gets each upload as a send slice of its rank, and
each round as a ``switch-reduce`` slice on the switch's own track: from the last contribution's
arrival to the multicast's start (the switch's reduction latency).
"""

from __future__ import annotations

import functools
from collections.abc import Generator
from dataclasses import dataclass, field

import numpy as np
import simpy

from simulator.algorithms.comm import SwitchContribution, SwitchKey, SwitchResult
from simulator.engine.fabric import Fabric
from simulator.engine.payload import Payload
from simulator.errors import AlgorithmError
from simulator.model.machine import Machine, ReducingSwitch
from simulator.model.reduction import ReduceOp
from simulator.model.span import Span


@dataclass
class _Round:
    """The k-th reduction of a group: contributions so far, and the members' result slots."""

    span: Span
    arrived: dict[int, np.ndarray] = field(default_factory=dict)
    results: dict[int, simpy.Event] = field(default_factory=dict)


class InSwitchReductions:
    """Every in-switch reduction of one run."""

    def __init__(self, env: simpy.Environment, fabric: Fabric, machine: Machine,
                 payload: Payload, reduce_op: ReduceOp, name: str) -> None:
        self.env, self.fabric, self.machine = env, fabric, machine
        self.payload, self.reduce_op, self.name = payload, reduce_op, name
        self._rounds: dict[tuple[SwitchKey, int], _Round] = {}
        self._posted: dict[tuple[SwitchKey, int], int] = {}
        self._taken: dict[tuple[SwitchKey, int], int] = {}
        self._switches: dict[SwitchKey, ReducingSwitch] = {}

    def contribute(self, rank: int, post: SwitchContribution, data: np.ndarray) -> None:
        """Start moving ``rank``'s contribution up to the switch."""
        key = post.key
        switch = self._switch(key)
        k = self._posted.get((key, rank), 0)
        self._posted[(key, rank)] = k + 1
        round_ = self._round(key, k, post.span)
        if round_.span != post.span:
            raise AlgorithmError(f"{self.name}: rank {rank} contributed {post.span} to in-switch "
                                 f"reduction {k}, others {round_.span}")
        nbytes = self.payload.nbytes(post.span)
        trace = self.fabric.recorder
        moved = None if trace is None or not trace.trace else functools.partial(
            trace.add_slice, f"rank {rank}", rank, "send", post.label or f"in-switch round {k + 1}",
            peer=switch.name, size_bytes=nbytes)
        upload = self.fabric.transfer(self.machine.placement[rank], switch.name, nbytes,
                                      connection=(rank, switch.name, key), moved=moved)
        upload.callbacks.append(lambda _: self._arrive(key, k, rank, data))

    def result(self, rank: int, wait: SwitchResult) -> Generator[simpy.Event, object, np.ndarray]:
        """Wait for ``rank``'s copy of the group's next result; returns its data."""
        key = wait.key
        k = self._taken.get((key, rank), 0)
        self._taken[(key, rank)] = k + 1
        round_ = self._round(key, k, wait.into)
        if round_.span.count != wait.into.count:
            raise AlgorithmError(f"{self.name}: rank {rank} takes in-switch result {k} of "
                                 f"{round_.span.count} elements into a span of {wait.into.count}")
        data = yield round_.results.setdefault(rank, self.env.event())
        assert isinstance(data, np.ndarray)
        return data

    def unfinished(self) -> int:
        """Rounds that never received every contribution."""
        return sum(len(r.arrived) < len(key[0]) for (key, _), r in self._rounds.items())

    def _arrive(self, key: SwitchKey, k: int, rank: int, data: np.ndarray) -> None:
        round_ = self._rounds[(key, k)]
        round_.arrived[rank] = data
        group = key[0]
        if len(round_.arrived) < len(group):
            return
        total = round_.arrived[group[0]].copy()
        for member in group[1:]:
            self.reduce_op.combine(total, round_.arrived[member])
        delay = self._switches[key].reduction_latency_s if len(group) > 1 else 0.0
        trace = self.fabric.recorder
        if trace is not None and trace.trace and len(group) > 1:
            switch = self._switches[key].name
            trace.add_slice(switch, -1, "switch-reduce", f"round {k + 1}", self.env.now,
                            self.env.now + delay, f"{len(group)} ranks",
                            self.payload.nbytes(round_.span))
        if delay > 0:
            self.env.timeout(delay).callbacks.append(lambda _: self._multicast(round_, key, total))
        else:
            self._multicast(round_, key, total)

    def _multicast(self, round_: _Round, key: SwitchKey, total: np.ndarray) -> None:
        switch = self._switches[key].name
        for member in key[1]:
            copy = self.fabric.transfer(switch, self.machine.placement[member],
                                        self.payload.nbytes(round_.span),
                                        connection=(switch, member, key))
            slot = round_.results.setdefault(member, self.env.event())
            copy.callbacks.append(functools.partial(_succeed, slot, total))

    def _round(self, key: SwitchKey, k: int, span: Span) -> _Round:
        return self._rounds.setdefault((key, k), _Round(span))

    def _switch(self, key: SwitchKey) -> ReducingSwitch:
        """The switch that reduces for the contributors of ``key``."""
        if key not in self._switches:
            self._switches[key] = self.machine.switch_for(key[0], self.name)
        return self._switches[key]


def _succeed(slot: simpy.Event, value: np.ndarray, _event: simpy.Event) -> None:
    """Callback: when a multicast copy arrives, hand the result to the member's slot."""
    slot.succeed(value)
