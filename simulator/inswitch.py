"""In-switch reduction (NVLink SHARP, as NCCL's NVLS algorithm uses it), for the SimPy engine.

Each member of a group posts a chunk to the group's reducing switch; when the k-th contribution
of every member has arrived, the switch combines them (at line rate, as NVSwitch reduces in its
datapath; only the switch's fixed ``reduction_latency`` is charged, as a delay that overlaps
between rounds) and multicasts the result back, one copy down each member's link. Contributions
from one rank inject one after another (a FIFO per rank), as do the copies the switch sends down
each link, so chunked contributions pipeline up against results coming down.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
import simpy

from simulator.data import Payload
from simulator.errors import AlgorithmError
from simulator.network import Fabric
from simulator.program import Chunk, SwitchContribution, SwitchResult
from simulator.reduction import ReduceOp
from simulator.topology import reducing_switch

Group = tuple[int, ...]


@dataclass
class _Round:
    """The k-th reduction of a group: contributions so far, and the members' result slots."""

    chunk: Chunk
    arrived: dict[int, np.ndarray] = field(default_factory=dict)
    results: dict[int, simpy.Event] = field(default_factory=dict)


class InSwitchReductions:
    """Every in-switch reduction of one run."""

    def __init__(self, env: simpy.Environment, fabric: Fabric, placement: tuple[str, ...],
                 payload: Payload, op: ReduceOp, name: str) -> None:
        self.env, self.fabric, self.placement = env, fabric, placement
        self.payload, self.op, self.name = payload, op, name
        self._rounds: dict[tuple[Group, int], _Round] = {}
        self._posted: dict[tuple[Group, int], int] = {}
        self._taken: dict[tuple[Group, int], int] = {}
        self._switches: dict[Group, str] = {}

    def contribute(self, rank: int, post: SwitchContribution, data: np.ndarray) -> None:
        """Start moving ``rank``'s contribution up to the switch."""
        switch = self._switch(post.group)
        k = self._posted.get((post.group, rank), 0)
        self._posted[(post.group, rank)] = k + 1
        round_ = self._round(post.group, k, post.chunk)
        if round_.chunk != post.chunk:
            raise AlgorithmError(f"{self.name}: rank {rank} contributed {post.chunk} to in-switch "
                                 f"reduction {k}, others {round_.chunk}")
        upload = self.fabric.transfer(self.placement[rank], switch, self.payload.nbytes(post.chunk),
                                      connection=(rank, switch))
        upload.callbacks.append(lambda _: self._arrive(post.group, k, rank, data))

    def result(self, rank: int, wait: SwitchResult) -> Generator[simpy.Event, object, np.ndarray]:
        """Wait for ``rank``'s copy of the group's next result; returns its data."""
        k = self._taken.get((wait.group, rank), 0)
        self._taken[(wait.group, rank)] = k + 1
        round_ = self._round(wait.group, k, wait.into)
        if round_.chunk.count != wait.into.count:
            raise AlgorithmError(f"{self.name}: rank {rank} takes in-switch result {k} of "
                                 f"{round_.chunk.count} elements into a chunk of {wait.into.count}")
        data = yield round_.results.setdefault(rank, self.env.event())
        return data

    def unfinished(self) -> int:
        """Rounds that never received every contribution."""
        return sum(len(r.arrived) < len(group) for (group, _), r in self._rounds.items())

    def _arrive(self, group: Group, k: int, rank: int, data: np.ndarray) -> None:
        round_ = self._rounds[(group, k)]
        round_.arrived[rank] = data
        if len(round_.arrived) < len(group):
            return
        total = round_.arrived[group[0]].copy()
        for member in group[1:]:
            self.op.combine(total, round_.arrived[member])
        switch = self._switches[group]
        delay = float(self.fabric.routing.graph.nodes[switch].get("reduction_latency", 0.0))
        if delay > 0:
            self.env.timeout(delay).callbacks.append(lambda _: self._multicast(round_, group, total))
        else:
            self._multicast(round_, group, total)

    def _multicast(self, round_: _Round, group: Group, total: np.ndarray) -> None:
        switch = self._switches[group]
        for member in group:
            copy = self.fabric.transfer(switch, self.placement[member],
                                        self.payload.nbytes(round_.chunk), connection=(switch, member))
            slot = round_.results.setdefault(member, self.env.event())
            copy.callbacks.append(lambda _, slot=slot: slot.succeed(total))

    def _round(self, group: Group, k: int, chunk: Chunk) -> _Round:
        return self._rounds.setdefault((group, k), _Round(chunk))

    def _switch(self, group: Group) -> str:
        if group not in self._switches:
            graph: nx.DiGraph = self.fabric.routing.graph
            switch = reducing_switch(graph, [self.placement[r] for r in group])
            if switch is None:
                raise AlgorithmError(f"{self.name}: ranks {list(group)} share no switch that "
                                     "reduces (a switch node with reduction: true)")
            self._switches[group] = switch
        return self._switches[group]
