"""Hierarchical allreduce: reduce-scatter inside each host, allreduce across hosts, allgather
inside each host.

The schedule of NCCL's tree/CollNet-style two-level algorithms and of Horovod's hierarchical
allreduce (Sergeev & Del Balso 2018; Jia et al., "Highly scalable deep learning training system
with mixed-precision", 2018): the fast intra-host fabric (NVSwitch) carries (L-1)/L of the data
twice, and the slow network only 1/L of it, split over L parallel rails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated

from simulator.algorithms.algorithm import Algorithm, Inner
from simulator.algorithms.comm import Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.phases.ring import ring_pass, ring_pass_s
from simulator.algorithms.ring import RingAllreduce
from simulator.model.collective import Collective
from simulator.model.machine import Machine


@dataclass(frozen=True)
class HierarchicalOptions:
    """``inter``: the allreduce run across hosts, among the ranks of one rail (default ring)."""

    inter: Annotated[Algorithm, Inner(Collective.ALLREDUCE, "an inter-host allreduce")] = field(
        default_factory=RingAllreduce)


@dataclass(frozen=True)
class Hierarchical(Algorithm):
    """Two-level allreduce over L GPUs per host and N hosts.

    1. ring reduce-scatter among the L ranks of each host: local rank i ends with chunk i;
    2. ``inter`` allreduce of chunk i among the N ranks with local index i (one per host, a
       "rail"), all rails at once;
    3. ring allgather among the L ranks of each host.

    T = T_ring_rs(L, n) + T_inter(N, ⌈n/L⌉) + T_ring_ag(L, n)
      = 2(L-1)·(alpha_intra + c·beta_intra) + (L-1)·g + T_inter(N, ⌈n/L⌉),  c = ⌈n/L⌉,

    with ``inter`` chosen by the scenario (``algorithm_options: {hierarchical: {inter: NAME}}``).
    Exact where the inter-host algorithm is.
    """

    name = "hierarchical"
    collective = Collective.ALLREDUCE
    Options = HierarchicalOptions
    rail_aware = True
    options: HierarchicalOptions = field(default_factory=HierarchicalOptions)

    def unsupported(self, machine: Machine) -> str | None:
        if machine.layout.host_count < 2:
            return ("it needs GPUs on two or more hosts (GPUs with a 'host', as in kind dgx "
                    "with nodes ≥ 2)")
        if len(machine.layout.ranks_per_host) > 1:
            return "it needs the same number of GPUs on every host"
        return None

    def program(self, comm: Comm) -> Program:
        me = comm.rank
        host_ranks = comm.layout.host_ranks(me)      # the L ranks of my host
        rail = comm.layout.rail(me)                  # my local index on every host
        chunks = comm.chunks(len(host_ranks))
        mine = chunks[host_ranks.index(me)]
        steps = len(host_ranks) - 1
        yield from ring_pass(comm, host_ranks, chunks, start=-1, steps=steps, reducing_steps=steps)
        yield from self.options.inter.program(comm.subgroup(rail, mine))
        yield from ring_pass(comm, host_ranks, chunks, start=0, steps=steps, reducing_steps=0)

    def model_s(self, cost: CostInputs, count: int) -> float:
        host_ranks, rail = cost.layout.host_ranks(0), cost.layout.rail(0)
        intra = cost.subgroup(host_ranks)
        steps = len(host_ranks) - 1
        return (ring_pass_s(intra, count, steps=steps, reducing_steps=steps)
                + self.options.inter.model_s(cost.subgroup(rail), math.ceil(count / len(host_ranks)))
                + ring_pass_s(intra, count, steps=steps, reducing_steps=0))
