"""Point-to-point messages between the ranks: each ``isend``/``irecv`` (and ``send``/``recv``,
which wait on one) posts an :class:`Op` to the :class:`Mailbox`, and the mailbox matches sends
with receives as MPI and ``torch.distributed`` do: per (sender, receiver, tag), in the order each
rank posted them (non-overtaking), a receive from any source taking the earliest-posted (in
simulated time, then the lowest rank) of the senders' next sends. The matching runs only when no
rank can move (:class:`~simulator.distributed.coordinator.Coordinator`), so which send a receive
from any source gets never depends on how the threads ran."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field

import numpy as np


@dataclass(eq=False)
class Op:
    """One posted send or receive: who posted it (``rank``, its ``seq``-th post), to or from
    whom (``peer``: the destination of a send, the source of a receive, None for any), its tag,
    the tensor's view (a receive writes into it), a send's data as it was when posted, the
    call as its rank made it (``signature``) and the rank's clock then (``posted_s``). Matched,
    it knows its ``partner``; delivered, when its message arrived (``end_s``)."""

    rank: int
    seq: int
    sends: bool
    peer: int | None
    tag: int
    view: np.ndarray
    data: np.ndarray | None
    name: str
    signature: str
    posted_s: float
    partner: Op | None = None
    end_s: float | None = None


@dataclass
class Mailbox:
    """The ops posted and not matched yet: sends by (sender, receiver), receives by receiver,
    each in posting order."""

    sends: dict[tuple[int, int], list[Op]] = field(default_factory=dict)
    recvs: dict[int, list[Op]] = field(default_factory=dict)

    def post(self, op: Op) -> None:
        """Queue ``op`` behind its rank's earlier ones."""
        if op.sends:
            assert op.peer is not None
            self.sends.setdefault((op.rank, op.peer), []).append(op)
        else:
            self.recvs.setdefault(op.rank, []).append(op)

    def match(self) -> list[tuple[Op, Op]]:
        """Every (send, receive) that can match now, taken out of the queues: each receiver's
        receives in posting order, each taking the first send of its tag from its source (from
        any source: the earliest posted of each sender's first, then the lowest rank)."""
        pairs = []
        for dst in sorted(self.recvs):  # sorted: a copy, as emptied queues are deleted
            kept = []
            for recv in self.recvs[dst]:
                send = self._first_send(dst, recv)
                if send is None:
                    kept.append(recv)
                    continue
                queue = self.sends[(send.rank, dst)]
                queue.remove(send)
                if not queue:  # a receive from any rank looks at every pair still queued
                    del self.sends[(send.rank, dst)]
                pairs.append((send, recv))
            if kept:
                self.recvs[dst] = kept
            else:
                del self.recvs[dst]
        return pairs

    def _first_send(self, dst: int, recv: Op) -> Op | None:
        sources = sorted(src for src, to in self.sends if to == dst) if recv.peer is None \
            else [recv.peer]
        firsts = [next((send for send in self.sends.get((src, dst), ()) if send.tag == recv.tag),
                       None) for src in sources]
        found = [send for send in firsts if send is not None]
        return min(found, key=lambda send: (send.posted_s, send.rank)) if found else None

    def unmatched(self) -> list[Op]:
        """The ops still waiting for a partner, by rank and posting order."""
        ops = [op for queue in self.sends.values() for op in queue]
        ops += [op for queue in self.recvs.values() for op in queue]
        return sorted(ops, key=lambda op: (op.rank, op.seq))


def whom(op: Op, returned: Container[int], ranks: int) -> str:
    """Whom an op not matched waits for: ``rank 0``, or what never came where its peer
    returned (``a message rank 0 never sent``)."""
    if op.sends:
        assert op.peer is not None
        return (f"a recv rank {op.peer} never posted" if op.peer in returned
                else f"rank {op.peer}")
    if op.peer is not None:
        return (f"a message rank {op.peer} never sent" if op.peer in returned
                else f"rank {op.peer}")
    others = [rank for rank in range(ranks) if rank != op.rank and rank not in returned]
    return "a message no rank sent" if not others else "a send from any rank"
