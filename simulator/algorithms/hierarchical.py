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

import numpy as np

from simulator.algorithms.algorithm import Algorithm, Inner
from simulator.algorithms.comm import Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import Footprint
from simulator.algorithms.phases.ring import (
    ring_pass,
    ring_pass_footprint,
    ring_pass_s,
    ring_pass_schedule,
)
from simulator.algorithms.ring import RingAllreduce
from simulator.algorithms.schedule import Blocks, Group, Schedule, Together
from simulator.model.collective import Collective
from simulator.model.machine import Machine
from simulator.model.span import Span, piece_sizes


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

    Where the execution model streams phases (``comm.streams``: under NCCL's, in the number of
    pieces k ≤ 64 this closed form finds fastest), the buffer flows through the three phases as
    a pipeline of k pieces, each phase on its own channel: at tick t a rank reduce-scatters
    piece t, runs ``inter`` on piece t-1 and allgathers piece t-2 at once. Then

    T = Σ_t max(T_pass(piece t + piece t-2) + G(piece t), T_inter(piece t-1)),  t = 0 .. k+1,

    the two intra-host phases sharing each GPU's links as one ring pass moving both chunks at
    every step (plus the reduce-scatter's reductions G), the inter-host phase on the NICs beside
    them. It holds the phases of a tick in lockstep; so does the simulation where the inter-host
    algorithm's closed form is exact (2 × DGX A100 by hand: tests/test_two_level.py). One piece
    is the formula above.
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
        steps = len(host_ranks) - 1
        channels = [comm.within_channel(phase) for phase in range(3)] if len(comm.streams(
            comm.buffer)) > 1 else [comm] * 3

        def reduce_scatter(piece: Span) -> Program:
            yield from ring_pass(channels[0], host_ranks, piece.split(len(host_ranks)), start=-1,
                                 steps=steps, reducing_steps=steps)

        def across_hosts(piece: Span) -> Program:
            mine = piece.split(len(host_ranks))[host_ranks.index(me)]
            yield from self.options.inter.program(channels[1].subgroup(rail, mine))

        def allgather(piece: Span) -> Program:
            yield from ring_pass(channels[2], host_ranks, piece.split(len(host_ranks)), start=0,
                                 steps=steps, reducing_steps=0)

        pieces = comm.streams(comm.buffer)
        for tick in range(len(pieces) + 2):
            now = [phase(pieces[tick - i]) for i, phase in
                   enumerate((reduce_scatter, across_hosts, allgather))
                   if 0 <= tick - i < len(pieces)]
            if len(now) == 1:
                yield from now[0]
            else:
                yield comm.parallel(*now)

    def has_builder(self) -> bool:
        """The builder below composes ``inter``'s schedule: it is one where ``inter`` has one."""
        return super().has_builder() and self.options.inter.has_builder()

    def schedule(self, group: Group) -> Schedule:
        by_host, rails = _hosts_and_rails(group)
        local = len(by_host[0])
        pieces = group.buffer.cut(piece_sizes(group.buffer.count, group.itemsize, None,
                                              group.stream_bytes))
        channels = (0, 1, 2) if len(pieces) > 1 else (0, 0, 0)
        steps = local - 1

        def reduce_scatter(piece: Span) -> Schedule:
            return Schedule.apart([ring_pass_schedule(group.subgroup(ranks, piece), start=-1,
                                                      steps=steps, reducing_steps=steps)
                                   for ranks in by_host])

        def across_hosts(piece: Span) -> Schedule:
            return Schedule.apart([self.options.inter.scheduled(group.subgroup(rail, mine))
                                   for rail, mine in zip(rails, piece.split(local), strict=True)])

        def allgather(piece: Span) -> Schedule:
            return Schedule.apart([ring_pass_schedule(group.subgroup(ranks, piece), start=0,
                                                      steps=steps, reducing_steps=0)
                                   for ranks in by_host])

        ticks: list[Schedule | Together] = []
        for tick in range(len(pieces) + 2):
            now = [(phase(pieces[tick - i]), channels[i]) for i, phase in
                   enumerate((reduce_scatter, across_hosts, allgather))
                   if 0 <= tick - i < len(pieces)]
            ticks.append(Together(tuple(b for b, _ in now), tuple(channel for _, channel in now)))
        return Schedule.sequence(ticks, group.ranks)

    def blocks(self, group: Group) -> Blocks:
        """Unstreamed (one piece), the three phases in sequence with ``inter``'s steps on every
        rail side by side, so that a ring across thousands of hosts runs a window at a time;
        streamed, the whole schedule."""
        pieces = piece_sizes(group.buffer.count, group.itemsize, None, group.stream_bytes)
        if len(pieces) > 1:
            return super().blocks(group)
        by_host, rails = _hosts_and_rails(group)
        local, steps = len(by_host[0]), len(by_host[0]) - 1
        inter = [self.options.inter.in_blocks(group.subgroup(rail, mine))
                 for rail, mine in zip(rails, group.buffer.split(local), strict=True)]
        reduce_scatter, allgather = (
            Schedule.apart([ring_pass_schedule(group.subgroup(ranks, group.buffer), start=start,
                                               steps=steps, reducing_steps=reducing)
                            for ranks in by_host])
            for start, reducing in ((-1, steps), (0, 0)))
        return Blocks.sequence([reduce_scatter, Blocks.apart(inter), allgather], group.ranks)

    def footprint(self, group: Group) -> Footprint | None:
        """:meth:`blocks` counted: each host's ring pass (every host alike) for the
        reduce-scatter and again for the allgather, ``inter``'s count on every rail; in
        sequence, whose join markers wait for the threads that end on one rank beyond its
        first (the two of a tree's interior ranks, the three phases of a streamed tick)."""
        by_host, rails = _hosts_and_rails(group)
        local, p = len(by_host[0]), group.size
        pieces = group.buffer.cut(piece_sizes(group.buffer.count, group.itemsize, None,
                                              group.stream_bytes))

        def intra(piece: Span) -> Footprint:  # either ring phase, on every host at once
            one = ring_pass_footprint(group.subgroup(by_host[0], piece), steps=local - 1,
                                      blocks=False)
            hosts = len(by_host)
            return Footprint.whole(hosts * one.entries, hosts * one.pairs, hosts * one.ends)

        def across(piece: Span) -> Footprint | None:  # inter on every rail at once
            counted = [self.options.inter.counted(group.subgroup(rail, mine))
                       for rail, mine in zip(rails, piece.split(local), strict=True)]
            if any(one is None for one in counted):
                return None
            return Footprint.joined([one for one in counted if one is not None])

        def joins(ends: int) -> int:  # every rank ends a thread in each phase (or none)
            return max(0, ends - p)

        inters = [across(piece) for piece in pieces]
        if any(inter is None for inter in inters):
            return None
        if len(pieces) == 1:
            [inter] = inters
            assert inter is not None
            phases = [intra(group.buffer), inter, intra(group.buffer)]
            return Footprint.joined(phases, 0 if inter.windowed else joins(inter.ends), ends=p)

        def phase(i: int, piece: int) -> Footprint:  # reduce-scatter, inter, allgather
            inter = inters[piece]
            assert inter is not None
            return inter.as_whole() if i == 1 else intra(pieces[piece])

        ticks = []
        for tick in range(len(pieces) + 2):
            now = [phase(i, tick - i) for i in range(3) if 0 <= tick - i < len(pieces)]
            ticks.append(Footprint.joined(now, joins(sum(branch.ends for branch in now))))
        entries = Footprint.joined(ticks).entries
        pairs = 2 * intra(pieces[0]).pairs + phase(1, 0).pairs  # every piece between the same
        return Footprint.whole(entries, pairs, p)

    def model_s(self, cost: CostInputs, count: int) -> float:
        host_ranks, rail = cost.layout.host_ranks(0), cost.layout.rail(0)
        intra, across = cost.subgroup(host_ranks), cost.subgroup(rail)
        steps = len(host_ranks) - 1
        pieces = cost.streams(count)
        k = len(pieces)

        def intra_s(tick: int) -> float:
            """Reduce-scatter of piece ``tick`` beside allgather of piece ``tick - 2``: one ring
            pass moving both chunks at each step, plus the reduce-scatter's reductions."""
            rs, ag = (pieces[tick] if tick < k else 0), (pieces[tick - 2] if tick >= 2 else 0)
            reductions = (ring_pass_s(intra, rs, steps=steps, reducing_steps=steps)
                          - ring_pass_s(intra, rs, steps=steps, reducing_steps=0)) if rs else 0.0
            return ring_pass_s(intra, rs + ag, steps=steps, reducing_steps=0) + reductions

        def inter_s(piece: int) -> float:
            return (self.options.inter.model_s(across, math.ceil(pieces[piece] / len(host_ranks)))
                    if 0 <= piece < k else 0.0)

        # the rails' inter-host allreduces are charged as one rail's, each on its own path;
        # where rails share a NIC (p4d: two GPUs a NIC) that is below what the NICs carry: the
        # plan holds every bound to the fabric's floor (channels.channels_bound_s)
        return sum(max(intra_s(t), inter_s(t - 1)) for t in range(k + 2))


def _hosts_and_rails(group: Group) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The group's positions on each host (hosts in order, positions in rank order), and each
    rail: the positions with the same local index on every host."""
    hosts = group.hosts if group.hosts is not None else np.zeros(group.size, dtype=np.int64)
    by_host = [np.flatnonzero(hosts == host) for host in np.unique(hosts)]
    rails = [np.array([ranks[i] for ranks in by_host]) for i in range(len(by_host[0]))]
    return by_host, rails
