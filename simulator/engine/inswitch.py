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
from simulator.model.machine import Aggregation, Machine
from simulator.model.reduction import ReduceOp
from simulator.model.span import Span


@dataclass
class _Round:
    """The k-th reduction of a group at one switch of its tree: what its children sent so far,
    and (at the root's record) the members' result slots."""

    span: Span
    arrived: dict[int | str, np.ndarray] = field(default_factory=dict)
    results: dict[int, simpy.Event] = field(default_factory=dict)


def _child_id(child: int | Aggregation) -> int | str:
    """How a switch tells its children apart: a rank, or the switch below."""
    return child if isinstance(child, int) else child.switch.name


class InSwitchReductions:
    """Every in-switch reduction of one run."""

    def __init__(self, env: simpy.Environment, fabric: Fabric, machine: Machine,
                 payload: Payload, reduce_op: ReduceOp, name: str) -> None:
        self.env, self.fabric, self.machine = env, fabric, machine
        self.payload, self.reduce_op, self.name = payload, reduce_op, name
        self._rounds: dict[tuple[SwitchKey, int, str], _Round] = {}
        self._results: dict[tuple[SwitchKey, int], dict[int, simpy.Event]] = {}
        self._posted: dict[tuple[SwitchKey, int], int] = {}
        self._taken: dict[tuple[SwitchKey, int], int] = {}
        self._trees: dict[SwitchKey, tuple[Aggregation, dict[int, Aggregation],
                                           dict[str, Aggregation]]] = {}
        self._spans: dict[tuple[SwitchKey, int], Span] = {}

    def contribute(self, rank: int, post: SwitchContribution, data: np.ndarray) -> None:
        """Start moving ``rank``'s contribution up to its switch (the leaf of the group's tree
        it enters by)."""
        key = post.key
        _, leaf_of, _ = self._tree(key)
        leaf = leaf_of[rank]
        k = self._posted.get((key, rank), 0)
        self._posted[(key, rank)] = k + 1
        span = self._spans.setdefault((key, k), post.span)
        if span != post.span:
            raise AlgorithmError(f"{self.name}: rank {rank} contributed {post.span} to in-switch "
                                 f"reduction {k}, others {span}")
        nbytes = self.payload.nbytes(post.span)
        trace = self.fabric.recorder
        moved = None if trace is None or not trace.trace else functools.partial(
            trace.add_slice, f"rank {rank}", rank, "send", post.label or f"in-switch round {k + 1}",
            peer=leaf.switch.name, size_bytes=nbytes)
        upload = self.fabric.transfer(self.machine.placement[rank], leaf.switch.name, nbytes,
                                      connection=(rank, leaf.switch.name, key), moved=moved)
        upload.callbacks.append(lambda _: self._arrive(key, k, leaf, rank, data))

    def result(self, rank: int, wait: SwitchResult) -> Generator[simpy.Event, object, np.ndarray]:
        """Wait for ``rank``'s copy of the group's next result; returns its data."""
        key = wait.key
        k = self._taken.get((key, rank), 0)
        self._taken[(key, rank)] = k + 1
        span = self._spans.setdefault((key, k), wait.into)
        if span.count != wait.into.count:
            raise AlgorithmError(f"{self.name}: rank {rank} takes in-switch result {k} of "
                                 f"{span.count} elements into a span of {wait.into.count}")
        data = yield self._slots(key, k).setdefault(rank, self.env.event())
        assert isinstance(data, np.ndarray)
        return data

    def taken(self, rank: int, wait: SwitchResult) -> int:
        """How many of its group's results ``rank`` has asked for so far."""
        return self._taken.get((wait.key, rank), 0)

    def unfinished(self) -> int:
        """Rounds that never received every contribution."""
        return sum(len(self._posted_in(key, k)) < len(key[0]) for key, k in self._spans)

    def _posted_in(self, key: SwitchKey, k: int) -> list[int]:
        return [rank for rank in key[0] if self._posted.get((key, rank), 0) > k]

    def _slots(self, key: SwitchKey, k: int) -> dict[int, simpy.Event]:
        return self._results.setdefault((key, k), {})

    def _arrive(self, key: SwitchKey, k: int, node: Aggregation, child: int | str,
                data: np.ndarray) -> None:
        """A child's data (a rank's contribution, a lower switch's sum) reached ``node``: once
        every child's has, the switch sums them in its children's order and, after its
        reduction latency, sends the sum up to its parent or, at the root, back down."""
        round_ = self._rounds.setdefault((key, k, node.switch.name),
                                         _Round(self._spans[(key, k)]))
        round_.arrived[child] = data
        if len(round_.arrived) < len(node.children):
            return
        del self._rounds[(key, k, node.switch.name)]
        order = [_child_id(c) for c in node.children]
        total = round_.arrived[order[0]].copy()
        for other in order[1:]:
            self.reduce_op.combine(total, round_.arrived[other])
        delay = node.switch.reduction_latency_s if len(order) > 1 else 0.0
        trace = self.fabric.recorder
        nbytes = self.payload.nbytes(round_.span)
        if trace is not None and trace.trace and len(order) > 1:
            trace.add_slice(node.switch.name, -1, "switch-reduce", f"round {k + 1}",
                            self.env.now, self.env.now + delay, f"{len(order)} ranks", nbytes)
        _, _, parent_of = self._tree(key)
        parent = parent_of.get(node.switch.name)

        def onward(_: object = None) -> None:
            if parent is None:
                self._down(key, k, node, total)
                return
            up = self.fabric.transfer(node.switch.name, parent.switch.name, nbytes,
                                      connection=(node.switch.name, parent.switch.name, key))
            up.callbacks.append(lambda _: self._arrive(key, k, parent, node.switch.name, total))

        if delay > 0:
            self.env.timeout(delay).callbacks.append(onward)
        else:
            onward()

    def _down(self, key: SwitchKey, k: int, node: Aggregation, total: np.ndarray) -> None:
        """Send round k's result from ``node`` down: a copy down the link of each receiver it
        serves (every receiver where one switch serves them all: a multicast's too), one down
        the link to each lower switch with receivers below it."""
        nbytes = self.payload.nbytes(self._spans[(key, k)])
        alone = node.depth == 1 and node is self._tree(key)[0]
        for rank in key[1]:
            if alone or rank in node.children:
                copy = self.fabric.transfer(node.switch.name, self.machine.placement[rank],
                                            nbytes, connection=(node.switch.name, rank, key))
                slot = self._slots(key, k).setdefault(rank, self.env.event())
                copy.callbacks.append(functools.partial(_succeed, slot, total))
        receivers = set(key[1])
        for child in node.children:
            if isinstance(child, Aggregation) and receivers & set(child.ranks):
                below = self.fabric.transfer(node.switch.name, child.switch.name, nbytes,
                                             connection=(node.switch.name, child.switch.name,
                                                         key))
                below.callbacks.append(functools.partial(self._passed_down, key, k, child,
                                                         total))

    def _passed_down(self, key: SwitchKey, k: int, node: Aggregation, total: np.ndarray,
                     _event: simpy.Event) -> None:
        """Callback: the result reached a lower switch, which passes it on (no latency: it
        reduces nothing)."""
        self._down(key, k, node, total)

    def _tree(self, key: SwitchKey) -> tuple[Aggregation, dict[int, Aggregation],
                                              dict[str, Aggregation]]:
        """The switches that reduce for the contributors of ``key``: the tree, the switch each
        contributor enters by, and each switch's parent."""
        if key not in self._trees:
            tree = self.machine.aggregation_for(key[0], self.name)
            parent_of = {node.switch.name: parent for node, parent in tree.walk()
                         if parent is not None}
            self._trees[key] = (tree, tree.leaves(), parent_of)
        return self._trees[key]


def _succeed(slot: simpy.Event, value: np.ndarray, _event: simpy.Event) -> None:
    """Callback: when a multicast copy arrives, hand the result to the member's slot."""
    slot.succeed(value)
