"""The primitives every step's graph is written with: one unit's operations appended in issue
order, a compute chain that blocking operations join (a GPU's compute stream, where Megatron
also runs TP's collectives and waits for its pipeline receives), and queues that asynchronous
operations of one kind wait in (DDP's buckets on their communication stream)."""

from __future__ import annotations

from collections.abc import Sequence

from simulator.model.collective import Collective
from simulator.training.graph import Op, OpKind, Program


class ProgramBuilder:
    """One unit's program as it is written: ``names`` are the communicators that exist (a
    collective on another has one rank and nothing to do)."""

    def __init__(self, unit: int, names: frozenset[str]) -> None:
        self.unit, self.names = unit, names
        self.ops: list[Op] = []
        self.head: int | None = None
        self.queues: dict[str, int] = {}

    def add(self, op: Op, *, blocking: bool, queue: str | None = None,
            after: Sequence[int] = ()) -> int:
        """Append ``op`` (its id set here) after ``after``; after the chain's head and as its
        new head if ``blocking``; after the last op of ``queue`` and as its last, if given."""
        deps = list(after)
        if blocking and self.head is not None:
            deps.append(self.head)
        if queue is not None and queue in self.queues:
            deps.append(self.queues[queue])
        ident = len(self.ops)
        self.ops.append(Op(ident, op.name, op.kind, tuple(dict.fromkeys(deps)), op.duration_s,
                           op.collective, op.group, op.nbytes, op.count, op.peer, op.tag,
                           op.stream))
        if blocking:
            self.head = ident
        if queue is not None:
            self.queues[queue] = ident
        return ident

    def compute(self, name: str, seconds: float, after: Sequence[int] = ()) -> int:
        """A compute on the chain."""
        return self.add(Op(0, name, OpKind.COMPUTE, duration_s=seconds), blocking=True,
                        after=after)

    def collective(self, name: str, collective: Collective, group: str, nbytes: int,
                   count: int = 1, *, blocking: bool, stream: str, queue: str | None = None,
                   after: Sequence[int] = ()) -> int | None:
        """A collective on communicator ``group`` drawn on ``stream`` (None: the group has
        one rank, nothing to do), blocking the chain, or queued behind the last op of
        ``queue`` (default: its stream)."""
        if group not in self.names or count == 0:
            return None
        op = Op(0, name, OpKind.COLLECTIVE, collective=collective, group=group, nbytes=nbytes,
                count=count, stream=stream)
        return self.add(op, blocking=blocking, queue=None if blocking else queue or stream,
                        after=after)

    def message(self, kind: OpKind, name: str, peer: int, nbytes: int, tag: int,
                after: Sequence[int] = ()) -> int:
        """A send to (or a receive from) unit ``peer`` on the pipeline's stream; a receive
        blocks the chain (the pass waits for its input)."""
        op = Op(0, name, kind, nbytes=nbytes, peer=peer, tag=tag, stream="pp")
        return self.add(op, blocking=kind is OpKind.RECV, after=after)

    def program(self) -> Program:
        """The unit's program as written."""
        return Program(self.unit, tuple(self.ops))
