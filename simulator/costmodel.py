"""Closed-form alpha-beta-gamma costs, with the parameters read off the same topology.

The model (Hockney 1994; Thakur, Rabenseifner & Gropp 2005): a message of ``n`` bytes costs
``alpha + n·beta`` and reducing ``n`` bytes costs ``n·gamma``, where here

- ``alpha`` = the route's summed link latencies plus the per-message latency of the nodes it
  crosses (e.g. a NIC), i.e. :attr:`simulator.network.Route.latency_s`;
- ``beta``  = 1 / the route's bottleneck bandwidth;
- ``gamma`` = 1 / the GPU's reduction bandwidth, plus a launch latency per reduction.

Each algorithm keeps its own formula beside its program (``Algorithm.model_time``) and asks this
module for the parameters of the rank pairs it actually uses, taking the worst pair: a schedule
that advances in lock-step goes at the pace of its slowest hop.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from simulator.network import Routing
from simulator.program import Layout, piece_sizes
from simulator.topology import reducing_switch


@dataclass(frozen=True)
class GpuSpec:
    """A GPU's reduction engine: ``reduce_bandwidth_Bps`` (None = free) and a launch latency."""

    reduce_bandwidth_Bps: float | None = None
    launch_latency_s: float = 0.0

    def reduce_s(self, size_bytes: float) -> float:
        """Time to reduce ``size_bytes`` into a buffer: ``launch + size·gamma`` (0 when unset)."""
        gamma = 0.0 if self.reduce_bandwidth_Bps is None else 1.0 / self.reduce_bandwidth_Bps
        return self.launch_latency_s + size_bytes * gamma


@dataclass(frozen=True)
class InSwitchCosts:
    """Alpha up to and down from a reducing switch, beta of those links, and the switch's fixed
    reduction latency."""

    alpha_up: float
    alpha_down: float
    beta: float
    reduction_latency_s: float


@dataclass(frozen=True)
class CostInputs:
    """What a closed form may use: the ranks and routes between them, the GPU, the element size,
    the scenario's pipelining ``chunk_size`` and where ranks sit (hosts)."""

    ranks: int
    placement: tuple[str, ...]
    routing: Routing
    gpu: GpuSpec
    itemsize: int = 4
    chunk_bytes: int | None = None
    layout: Layout | None = None

    def subgroup(self, ranks: tuple[int, ...]) -> CostInputs:
        """The same inputs for a subgroup of ranks (numbered 0..len-1 in the given order)."""
        layout = self.layout.subset(ranks) if self.layout is not None else None
        return replace(self, ranks=len(ranks), placement=tuple(self.placement[r] for r in ranks),
                       layout=layout)

    def pieces(self, count: int, unset_bytes: int | None = None) -> list[int]:
        """Element counts of the pipeline pieces a program's ``comm.pieces`` makes of ``count``
        elements (same rule, so the closed form counts the pieces the simulation moves)."""
        return piece_sizes(count, self.itemsize, self.chunk_bytes, unset_bytes)

    def nbytes(self, count: int) -> int:
        """Bytes of ``count`` elements."""
        return count * self.itemsize

    def alpha(self, pairs: Iterable[tuple[int, int]]) -> float:
        """Largest per-message latency (s) over the routes between the given rank pairs."""
        return max((self._route(a, b).latency_s for a, b in pairs), default=0.0)

    def beta(self, pairs: Iterable[tuple[int, int]]) -> float:
        """Largest seconds-per-byte (1 / bottleneck bandwidth) over the given rank pairs."""
        return max((1.0 / self._route(a, b).bottleneck_Bps for a, b in pairs), default=0.0)

    def shared_beta(self, pairs: Iterable[tuple[int, int]]) -> float:
        """Seconds per byte of the slowest of ``pairs`` when all of them carry a message at once
        and every link's bandwidth is split equally among the pairs routed over it:
        max over links l of n_l / bandwidth_l, n_l = how many of ``pairs`` cross l.

        Max-min sharing never gives a flow less than this (a connection carries one message at a
        time), so it bounds every message of such a step; it equals :meth:`beta` when no two
        routes share a link, and is exact when every flow's busiest link is shared evenly.
        """
        crossing: dict[tuple[str, str], int] = {}
        for a, b in pairs:
            for link in self._route(a, b).links:
                crossing[link] = crossing.get(link, 0) + 1
        edges = self.routing.graph.edges
        return max((n / edges[link]["bandwidth"] for link, n in crossing.items()), default=0.0)

    def in_switch(self) -> InSwitchCosts | None:
        """Costs of reducing in the switch cabled to every rank (None if there is none)."""
        switch = reducing_switch(self.routing.graph, list(self.placement))
        if switch is None:
            return None
        up = [self.routing.route(gpu, switch) for gpu in self.placement]
        down = [self.routing.route(switch, gpu) for gpu in self.placement]
        return InSwitchCosts(
            alpha_up=max(r.latency_s for r in up), alpha_down=max(r.latency_s for r in down),
            beta=max(1.0 / r.bottleneck_Bps for r in up + down),
            reduction_latency_s=float(self.routing.graph.nodes[switch].get("reduction_latency", 0.0)))

    def reduce_s(self, size_bytes: float) -> float:
        """One reduction of ``size_bytes`` on a GPU (gamma term plus launch latency)."""
        return self.gpu.reduce_s(size_bytes)

    def _route(self, a: int, b: int):
        return self.routing.route(self.placement[a], self.placement[b])


def pipeline_s(delay_s: float, stages_s: list[float], pieces: int) -> float:
    """Time for ``pieces`` equal pieces to stream through single-server ``stages_s`` in series
    (each a link or a GPU reduction engine, serving one piece at a time, in order), plus pure
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
