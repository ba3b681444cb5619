"""Point-to-point as a collective: every rank sends its whole buffer to the next rank and
receives the previous rank's (:attr:`~simulator.model.collective.Collective.SENDRECV`), the
pattern nccl-tests' ``sendrecv_perf`` times (``src/sendrecv.cu``: an ``ncclSend`` to rank r+1 and
an ``ncclRecv`` from rank r-1, grouped), and the one ``simulator.distributed``'s ring exchanges make with
``isend``/``irecv``. It measures what a point-to-point message gets from the fabric: every rank's
uplink and downlink each carry one message at once.
"""

from __future__ import annotations

import numpy as np

from simulator.algorithms.algorithm import Algorithm, ExactOn
from simulator.algorithms.comm import COPY, Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import EMPTY, Footprint
from simulator.algorithms.schedule import NONE, Group, Schedule
from simulator.model.collective import Collective


class DirectSendRecv(Algorithm):
    """Every rank posts its buffer to rank r+1, then receives rank r-1's into its own (a send
    takes its data as they are when posted, so the buffer is free to receive into).

    T = alpha + n·beta_shared of the pairs (r, r+1): alpha + n·beta on ``switch``,
    ``fully_connected`` and ``ring`` (each message has its own links), n the whole buffer.
    """

    name = "direct"
    collective = Collective.SENDRECV
    exact_on = (ExactOn("switch"), ExactOn("fully_connected"), ExactOn("ring"))

    def program(self, comm: Comm) -> Program:
        if comm.size == 1:
            return
        after, before = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
        comm.send(after, comm.buffer, "sendrecv")
        yield comm.recv(before, into=comm.buffer, combine=COPY, label="sendrecv")

    def schedule(self, group: Group) -> Schedule:
        p = group.size
        if p == 1:
            return Schedule.empty()
        sender = np.arange(p, dtype=np.int64)
        start = np.full(p, group.buffer.start, dtype=np.int64)
        stop = np.full(p, group.buffer.stop, dtype=np.int64)
        none = np.full(p, NONE, dtype=np.int64)
        return Schedule(group.members[sender], group.members[(sender + 1) % p], start, stop,
                        start, stop, np.zeros(p, dtype=bool), none, none, none)

    def footprint(self, group: Group) -> Footprint:
        p = group.size
        return EMPTY if p == 1 else Footprint.whole(p, p, ends=p)

    def model_s(self, cost: CostInputs, count: int) -> float:
        p = cost.ranks
        if p == 1:
            return 0.0
        pairs = [(r, (r + 1) % p) for r in range(p)]
        return cost.alpha(pairs) + cost.nbytes(count) * cost.shared_beta(pairs)
