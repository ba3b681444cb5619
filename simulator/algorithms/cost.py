"""Closed-form alpha-beta-gamma costs, with the parameters read off the same machine.

The model (Hockney 1994; Thakur, Rabenseifner & Gropp 2005): a message of ``n`` bytes costs
``alpha + n·beta`` and reducing ``n`` bytes costs ``n·gamma``, where here

- ``alpha`` = the route's summed link latencies plus the per-message latency of the nodes it
  crosses (e.g. a NIC), i.e. :attr:`simulator.model.routing.Route.latency_s`;
- ``beta``  = 1 / the route's bottleneck bandwidth;
- ``gamma`` = 1 / the GPU's reduction bandwidth, plus a launch latency per reduction.

Each algorithm keeps its own formula beside its program (``Algorithm.model_s``) and asks this
module for the parameters of the rank pairs it actually uses, taking the worst pair: a schedule
that advances in lock-step goes at the pace of its slowest hop.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from simulator.model.machine import Aggregation, Layout, Machine
from simulator.model.routing import LinkId
from simulator.model.span import piece_sizes


@dataclass(frozen=True)
class InSwitchCosts:
    """Alpha up to and down from a reducing switch, beta of those links, and the switch's fixed
    reduction latency; over a tree of switches (SHARP's aggregation), the sums along its
    deepest path and the slowest hop's beta, and ``hops`` the transfers each way (a piece is
    forwarded whole from switch to switch)."""

    alpha_up_s: float
    alpha_down_s: float
    beta_s_per_byte: float
    reduction_latency_s: float
    hops: int = 1
    path_s_per_byte: float = 0.0
    """Seconds per byte a piece takes over every hop of its way up and back down, one after
    the other (each switch forwards a piece once it has it whole)."""


@dataclass(frozen=True)
class CostInputs:
    """What a closed form may use: the machine (ranks, routes between them, the GPU, where ranks
    sit), the element size, the scenario's pipeline ``piece_size``, and the pieces the execution
    model streams phases in (``stream_bytes``, as :attr:`Comm.stream_bytes`)."""

    machine: Machine
    itemsize: int = 4
    piece_bytes: int | None = None
    stream_bytes: int | None = None

    @property
    def ranks(self) -> int:
        """How many ranks take part."""
        return self.machine.ranks

    @property
    def layout(self) -> Layout:
        """Which host each rank sits on."""
        return self.machine.layout

    def subgroup(self, ranks: Sequence[int]) -> CostInputs:
        """The same inputs for a subgroup of ranks (numbered 0..len-1 in the given order)."""
        return replace(self, machine=self.machine.subgroup(ranks))

    def pieces(self, count: int, default_bytes: int | None = None) -> list[int]:
        """Element counts of the pipeline pieces a program's ``comm.pieces`` makes of ``count``
        elements (same rule, so the closed form counts the pieces the simulation moves)."""
        return piece_sizes(count, self.itemsize, self.piece_bytes, default_bytes)

    def streams(self, count: int) -> list[int]:
        """Element counts of the pieces ``comm.streams`` makes of ``count`` elements."""
        return piece_sizes(count, self.itemsize, None, self.stream_bytes)

    def nbytes(self, count: int) -> int:
        """Bytes of ``count`` elements."""
        return count * self.itemsize

    def alpha(self, pairs: Iterable[tuple[int, int]]) -> float:
        """Largest per-message latency (s) over the routes between the given rank pairs."""
        return max((self.machine.route(a, b).latency_s for a, b in pairs), default=0.0)

    def beta(self, pairs: Iterable[tuple[int, int]]) -> float:
        """Largest seconds-per-byte (1 / bottleneck bandwidth) over the given rank pairs."""
        return max((1.0 / self.machine.route(a, b).bottleneck_Bps for a, b in pairs), default=0.0)

    def shared_beta(self, pairs: Iterable[tuple[int, int]]) -> float:
        """Seconds per byte of the slowest of ``pairs`` when all of them carry a message at once
        and every link's bandwidth is split equally among the pairs routed over it:
        max over links l of n_l / bandwidth_l, n_l = how many of ``pairs`` cross l.

        Max-min sharing never gives a flow less than this (a connection carries one message at a
        time), so it bounds every message of such a step; it equals :meth:`beta` when no two
        routes share a link, and is exact when every flow's busiest link is shared evenly.
        """
        crossing: dict[LinkId, int] = {}
        for a, b in pairs:
            for link in self.machine.route(a, b).links:
                crossing[link] = crossing.get(link, 0) + 1
        routing = self.machine.routing
        return max((n / routing.capacity_Bps(link) for link, n in crossing.items()), default=0.0)

    def in_switch(self) -> InSwitchCosts | None:
        """Costs of reducing in the switches that take every rank's contribution (None if
        there are none): one switch, or a tree of them (:meth:`Machine.aggregation`), whose
        deepest path, from a rank's leaf up to the root, the costs follow."""
        machine = self.machine
        tree = machine.aggregation(range(machine.ranks))
        if tree is None:
            return None
        routing = machine.routing
        node, path = tree, [tree]
        while not any(isinstance(child, int) for child in node.children):
            node = max((c for c in node.children if isinstance(c, Aggregation)),
                       key=lambda c: c.depth)
            path.append(node)
        leaf = path[-1].switch.name
        gpus = [machine.placement[rank] for rank in path[-1].ranks]
        up = [routing.route(gpu, leaf) for gpu in gpus]
        down = [routing.route(leaf, gpu) for gpu in gpus]
        climbs = [routing.route(lower.switch.name, upper.switch.name)
                  for upper, lower in itertools.pairwise(path)]
        falls = [routing.route(upper.switch.name, lower.switch.name)
                 for upper, lower in itertools.pairwise(path)]
        return InSwitchCosts(
            alpha_up_s=max(r.latency_s for r in up) + sum(r.latency_s for r in climbs),
            alpha_down_s=max(r.latency_s for r in down) + sum(r.latency_s for r in falls),
            beta_s_per_byte=max(1.0 / r.bottleneck_Bps for r in up + down + climbs + falls),
            reduction_latency_s=sum(node.switch.reduction_latency_s for node in path),
            hops=len(path),
            path_s_per_byte=(max(1.0 / r.bottleneck_Bps for r in up)
                             + sum(1.0 / r.bottleneck_Bps for r in climbs + falls)
                             + max(1.0 / r.bottleneck_Bps for r in down)))

    def reduce_s(self, size_bytes: float) -> float:
        """One reduction of ``size_bytes`` on a GPU (gamma term plus launch latency)."""
        return self.machine.gpu.reduce_s(size_bytes)


def pipeline_s(delay_s: float, stages_s: list[float], pieces: int) -> float:
    """Time for ``pieces`` equal pieces to stream through single-server ``stages_s`` in series
    (each a link or a GPU reducer, serving one piece at a time, in order), plus pure
    delays summing to ``delay_s`` (latencies, which overlap between pieces).

    The flow-shop makespan for identical jobs: the first piece crosses every stage, then the
    slowest stage releases one piece per its service time: Σ delays + Σ stages + (k-1)·max stage.
    """
    if not stages_s:
        return delay_s
    return delay_s + sum(stages_s) + (pieces - 1) * max(stages_s)


def proportionate_pipeline_s(delay_s: float, stages: int, pieces_s: list[float]) -> float:
    """Time for pieces that take ``pieces_s[j]`` on every one of ``stages`` single-server stages
    in series (stages equally fast per byte, e.g. hops over links of one bandwidth; pieces in
    order, of any sizes), plus pure delays summing to ``delay_s`` (latencies, which overlap).

    The makespan of a proportionate flow shop: Σ_j pieces_s[j] + (stages - 1)·max_j pieces_s[j]
    (Pinedo, *Scheduling: Theory, Algorithms, and Systems*, §6.1). With equal pieces it is
    :func:`pipeline_s`; where pieces differ (by one element, say) it is exact while
    ``pipeline_s`` with the largest piece overestimates by Σ_j (max - pieces_s[j]).
    """
    if stages == 0 or not pieces_s:
        return delay_s
    return delay_s + sum(pieces_s) + (stages - 1) * max(pieces_s)
