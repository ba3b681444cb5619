"""The dragonfly (Kim, Dally, Scott & Abts, "Technology-driven, highly-scalable dragonfly
topology", ISCA 2008), as HPE Slingshot and Cray Aries machines are built: groups of routers
joined all-to-all inside the group by local cables, every pair of groups joined by a global
cable, GPUs on the routers. Routes are minimal (local, global, local hop), the routing such
machines use when the network is not congested; adaptive (UGAL) and Valiant routing, which
detour through a third group under adversarial traffic, are not modelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import networkx as nx

from simulator.limits import MAX_ALL_TO_ALL_CABLES
from simulator.model.parts import (
    GPU,
    NET_LINK,
    SWITCH,
    Bandwidth,
    Count,
    ParamValue,
    Time,
    cable,
)


@dataclass(frozen=True)
class DragonflyShape:
    """Where a :func:`dragonfly`'s GPUs and global cables sit."""

    groups: int
    routers: int
    gpus_per_router: int

    def router(self, rank: int) -> tuple[int, int]:
        """(group, router) of the router GPU ``rank`` is cabled to."""
        group, router = divmod(rank // self.gpus_per_router, self.routers)
        return group, router

    def gateway(self, group: int, to: int) -> int:
        """The router of ``group`` that holds the global cable to group ``to``: the other
        groups, in order after this one, dealt out evenly over the group's routers."""
        offset = (to - group) % self.groups
        return (offset - 1) * self.routers // (self.groups - 1)


def _router(group: int, router: int) -> str:
    return f"g{group}.r{router}"


@dataclass(frozen=True)
class DragonflyPaths:
    """The minimal route between two GPUs: to the source router, over a local cable to the
    router holding the global cable to the destination group (if another), over that global
    cable, over a local cable to the destination router (if another), to the GPU. Unique."""

    shape: DragonflyShape

    def __call__(self, src: str, dst: str) -> Sequence[tuple[str, ...]] | None:
        if not (src.startswith("gpu") and dst.startswith("gpu")) or src == dst:
            return None
        (ga, ra), (gb, rb) = self.shape.router(int(src[3:])), self.shape.router(int(dst[3:]))
        hops = [(ga, ra)]
        if ga != gb:
            hops += [(ga, self.shape.gateway(ga, gb)), (gb, self.shape.gateway(gb, ga))]
        hops.append((gb, rb))
        routers = [_router(*hop) for i, hop in enumerate(hops) if i == 0 or hop != hops[i - 1]]
        return [(src, *routers, dst)]


def dragonfly(groups: Count, routers: Count, gpus_per_router: Count, bandwidth: Bandwidth,
              latency: Time, global_bandwidth: Bandwidth, global_latency: Time) -> nx.DiGraph:
    """``groups`` groups of ``routers`` routers, ``gpus_per_router`` GPUs on each router
    (cables of ``bandwidth``, ``latency``), the routers of a group cabled all-to-all (the same),
    and one global cable (``global_bandwidth``, ``global_latency``: longer, often optical)
    between every two groups, held by the routers of each group in turn
    (:meth:`DragonflyShape.gateway`). Rank = (group × routers + router) × gpus_per_router +
    index. Routers are tier 1. Minimal routes (:class:`DragonflyPaths`): at most one global hop
    and two local ones, so the GPU-to-GPU diameter is 5 hops.

    >>> g = dragonfly(5, 4, 2, 50e9, 1e-6, 25e9, 2e-6)
    >>> g.number_of_nodes(), g.number_of_edges() // 2
    (60, 80)
    """
    shape = DragonflyShape(groups, routers, gpus_per_router)
    graph = nx.DiGraph(name=f"dragonfly({groups}x{routers}x{gpus_per_router})",
                       paths=DragonflyPaths(shape))
    for group in range(groups):
        for router in range(routers):
            name = _router(group, router)
            graph.add_node(name, kind=SWITCH, tier=1)
            for other in range(router):
                cable(graph, _router(group, other), name, bandwidth, latency, NET_LINK)
            for i in range(gpus_per_router):
                rank = (group * routers + router) * gpus_per_router + i
                graph.add_node(f"gpu{rank}", kind=GPU, rank=rank)
                cable(graph, f"gpu{rank}", name, bandwidth, latency, NET_LINK)
    for group in range(groups):
        for to in range(group + 1, groups):
            cable(graph, _router(group, shape.gateway(group, to)),
                  _router(to, shape.gateway(to, group)), global_bandwidth, global_latency, NET_LINK)
    return graph


def dragonfly_problems(params: Mapping[str, ParamValue]) -> list[tuple[str, str]]:
    """The cables :func:`dragonfly` draws all-to-all, within each group and between groups, at
    most MAX_ALL_TO_ALL_CABLES (the rank limit does not bound them)."""
    groups, routers = params["groups"], params["routers"]
    assert isinstance(groups, int) and isinstance(routers, int)
    cables = groups * routers * (routers - 1) // 2 + groups * (groups - 1) // 2
    if cables <= MAX_ALL_TO_ALL_CABLES:
        return []
    return [("", f"expected at most {MAX_ALL_TO_ALL_CABLES:,} all-to-all cables (groups × "
                 f"routers × (routers - 1) / 2 within groups, groups × (groups - 1) / 2 between "
                 f"them), got {cables:,}; use fewer groups or routers")]
