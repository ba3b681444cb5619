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
from dataclasses import dataclass

from simulator.network import Routing


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
class CostInputs:
    """What a closed form may use: the rank count, routes between ranks, and the GPU."""

    ranks: int
    placement: tuple[str, ...]
    routing: Routing
    gpu: GpuSpec

    def alpha(self, pairs: Iterable[tuple[int, int]]) -> float:
        """Largest per-message latency (s) over the routes between the given rank pairs."""
        return max((self._route(a, b).latency_s for a, b in pairs), default=0.0)

    def beta(self, pairs: Iterable[tuple[int, int]]) -> float:
        """Largest seconds-per-byte (1 / bottleneck bandwidth) over the given rank pairs."""
        return max((1.0 / self._route(a, b).bottleneck_Bps for a, b in pairs), default=0.0)

    def reduce_s(self, size_bytes: float) -> float:
        """One reduction of ``size_bytes`` on a GPU (gamma term plus launch latency)."""
        return self.gpu.reduce_s(size_bytes)

    def _route(self, a: int, b: int):
        return self.routing.route(self.placement[a], self.placement[b])
