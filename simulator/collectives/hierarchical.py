"""Hierarchical allreduce: reduce-scatter inside each node, allreduce across nodes, allgather
inside each node.

The schedule of NCCL's tree/CollNet-style two-level algorithms and of Horovod's hierarchical
allreduce (Sergeev & Del Balso 2018; Jia et al., "Highly scalable deep learning training system
with mixed-precision", 2018): the fast intra-node fabric (NVSwitch) carries (L-1)/L of the data
twice, and the slow network only 1/L of it, split over L parallel rails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import networkx as nx

from simulator.collective import Collective
from simulator.collectives.base import Algorithm, Options
from simulator.collectives.phases import ring_pass
from simulator.collectives.ring import RingAllreduce, ring_pass_time
from simulator.costmodel import CostInputs
from simulator.program import Comm, Layout, Program
from simulator.topology import hosts


@dataclass(frozen=True)
class Hierarchical(Algorithm):
    """Two-level allreduce over L GPUs per node and N nodes.

    1. ring reduce-scatter among the L ranks of each node: local rank i ends with chunk i;
    2. ``inter`` allreduce of chunk i among the N ranks with local index i (one per node, a
       "rail"), all rails at once;
    3. ring allgather among the L ranks of each node.

    T = T_ring_rs(L, n) + T_inter(N, ⌈n/L⌉) + T_ring_ag(L, n)
      = 2(L-1)·(alpha_intra + c·beta_intra) + (L-1)·g + T_inter(N, ⌈n/L⌉),  c = ⌈n/L⌉,

    with ``inter`` chosen by the scenario's ``inter_algorithm`` (ring, tree or halving_doubling).
    """

    name = "hierarchical"
    collective = Collective.ALLREDUCE
    inter: Algorithm = field(default_factory=RingAllreduce)

    def unsupported(self, graph: nx.DiGraph, placement: tuple[str, ...]) -> str | None:
        layout = Layout(hosts(graph, placement))
        per_host = {len(layout.host_ranks(r)) for r in range(len(placement))}
        if len(set(layout.hosts)) < 2:
            return "it needs GPUs on two or more nodes (GPUs with a 'host', as in kind dgx)"
        if len(per_host) > 1:
            return "it needs the same number of GPUs on every node"
        return None

    def configure(self, options: Options) -> Algorithm:
        return replace(self, inter=options.inter) if options.inter is not None else self

    def program(self, me: int, comm: Comm) -> Program:
        node = comm.layout.host_ranks(me)            # the L ranks of my node
        rail = comm.layout.rail(me)                  # my local index on every node
        chunks = comm.chunks(len(node))
        mine = chunks[node.index(me)]
        steps = len(node) - 1
        yield from ring_pass(me, comm, node, chunks, start=-1, steps=steps, reducing_steps=steps)
        yield from self.inter.program(rail.index(me), comm.subgroup(rail, mine))
        yield from ring_pass(me, comm, node, chunks, start=0, steps=steps, reducing_steps=0)

    def model_time(self, cost: CostInputs, count: int) -> float:
        layout = cost.layout or Layout((0,) * cost.ranks)
        node, rail = layout.host_ranks(0), layout.rail(0)
        intra = cost.subgroup(node)
        steps = len(node) - 1
        return (ring_pass_time(intra, count, steps=steps, reducing_steps=steps)
                + self.inter.model_time(cost.subgroup(rail), math.ceil(count / len(node)))
                + ring_pass_time(intra, count, steps=steps, reducing_steps=0))
