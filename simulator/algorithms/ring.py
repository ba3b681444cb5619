"""Ring algorithms around the logical ring 0 → 1 → … → p-1 → 0, and chains along it.

Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
JPDC 69(2), 2009: the schedule NCCL's ring uses (nccl-tests' busbw assumes its traffic). The
phases and their closed forms are in :mod:`simulator.algorithms.phases.ring`.
"""

from __future__ import annotations

import itertools

from simulator.algorithms.algorithm import Algorithm, ExactOn
from simulator.algorithms.comm import Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import Footprint
from simulator.algorithms.phases.pieces import PIPELINE_BYTES
from simulator.algorithms.phases.ring import (
    chain,
    chain_s,
    ring_pass,
    ring_pass_blocks,
    ring_pass_footprint,
    ring_pass_s,
)
from simulator.algorithms.phases.tree import TreeNode, edges_footprint, tree_schedule
from simulator.algorithms.schedule import Blocks, Group, Schedule
from simulator.model.collective import ROOT, Collective
from simulator.model.nccl_point import NcclBinding

_FLAT = (ExactOn("switch"), ExactOn("fully_connected"))
"""Each chunk travels its own chain of hops: with one flow per link the simulation meets the
closed form exactly."""


class RingAllreduce(Algorithm):
    """Ring allreduce: a reduce-scatter, then an allgather, each of p-1 steps of one chunk.

    T = 2(p-1)·alpha + 2(p-1)·c·beta + (p-1)·(c·gamma + launch),  c = ⌈count/p⌉·itemsize,

    the textbook 2(p-1)·alpha + 2(p-1)/p·n·beta + (p-1)/p·n·gamma when p divides n (pipelined
    form with ``piece_size``: :func:`~simulator.algorithms.phases.ring.ring_pass_s`).
    """

    name = "ring"
    collective = Collective.ALLREDUCE
    exact_on = _FLAT
    composable = True
    nccl = NcclBinding(kernel=True)

    def program(self, comm: Comm) -> Program:
        p = comm.size
        yield from ring_pass(comm, range(p), comm.chunks(p), start=0, steps=2 * (p - 1),
                             reducing_steps=p - 1)

    def schedule(self, group: Group) -> Schedule:
        return self.blocks(group).schedule()

    def blocks(self, group: Group) -> Blocks:
        p = group.size
        return ring_pass_blocks(group, start=0, steps=2 * (p - 1), reducing_steps=p - 1)

    def footprint(self, group: Group) -> Footprint:
        return ring_pass_footprint(group, steps=2 * (group.size - 1))

    def model_s(self, cost: CostInputs, count: int) -> float:
        p = cost.ranks
        return ring_pass_s(cost, count, steps=2 * (p - 1), reducing_steps=p - 1)


class RingReduceScatter(Algorithm):
    """Ring reduce-scatter: p-1 reducing steps, after which rank r holds chunk r.

    T = (p-1)·(alpha + c·beta + c·gamma + launch)  (Patarasuk & Yuan 2009).
    """

    name = "ring"
    collective = Collective.REDUCE_SCATTER
    exact_on = _FLAT
    nccl = NcclBinding(kernel=True)

    def program(self, comm: Comm) -> Program:
        p = comm.size
        yield from ring_pass(comm, range(p), comm.chunks(p), start=-1, steps=p - 1,
                             reducing_steps=p - 1)

    def schedule(self, group: Group) -> Schedule:
        return self.blocks(group).schedule()

    def blocks(self, group: Group) -> Blocks:
        p = group.size
        return ring_pass_blocks(group, start=-1, steps=p - 1, reducing_steps=p - 1)

    def footprint(self, group: Group) -> Footprint:
        return ring_pass_footprint(group, steps=group.size - 1)

    def model_s(self, cost: CostInputs, count: int) -> float:
        return ring_pass_s(cost, count, steps=cost.ranks - 1, reducing_steps=cost.ranks - 1)


class RingAllgather(Algorithm):
    """Ring allgather: p-1 steps passing every rank's own chunk on.

    T = (p-1)·(alpha + c·beta)  (Patarasuk & Yuan 2009).
    """

    name = "ring"
    collective = Collective.ALLGATHER
    exact_on = _FLAT
    nccl = NcclBinding(kernel=True)

    def program(self, comm: Comm) -> Program:
        p = comm.size
        yield from ring_pass(comm, range(p), comm.chunks(p), start=0, steps=p - 1,
                             reducing_steps=0)

    def schedule(self, group: Group) -> Schedule:
        return self.blocks(group).schedule()

    def blocks(self, group: Group) -> Blocks:
        return ring_pass_blocks(group, start=0, steps=group.size - 1, reducing_steps=0)

    def footprint(self, group: Group) -> Footprint:
        return ring_pass_footprint(group, steps=group.size - 1)

    def model_s(self, cost: CostInputs, count: int) -> float:
        return ring_pass_s(cost, count, steps=cost.ranks - 1, reducing_steps=0)


class RingBroadcast(Algorithm):
    """Pipelined chain broadcast from the root along the ring, as NCCL's ring broadcast.

    T = (p-1)·alpha + (k + p - 2)·c·beta  for k pieces of c bytes (pipeline fill, then one
    piece per c·beta), the classic pipelined-chain cost (e.g. Pjesivac-Grbovic et al. 2007).
    """

    name = "ring"
    collective = Collective.BROADCAST
    exact_on = _FLAT

    def program(self, comm: Comm) -> Program:
        p = comm.size
        yield from chain(comm, [(ROOT + i) % p for i in range(p)], reduce=False)

    def schedule(self, group: Group) -> Schedule:
        p = group.size
        return chain_schedule(group, [(ROOT + i) % p for i in range(p)], reduce=False)

    def footprint(self, group: Group) -> Footprint:
        return chain_footprint(group, reduce=False)

    def model_s(self, cost: CostInputs, count: int) -> float:
        return chain_s(cost, count, reduce=False)


class RingReduce(Algorithm):
    """Pipelined chain reduce towards the root: 1 → 2 → … → p-1 → 0, reducing at every hop.

    T = (p-1)·(alpha + c·beta + g) + (k-1)·max(c·beta, g),  g = launch + c·gamma.
    """

    name = "ring"
    collective = Collective.REDUCE
    exact_on = _FLAT

    def program(self, comm: Comm) -> Program:
        p = comm.size
        yield from chain(comm, [(ROOT - i) % p for i in range(p - 1, -1, -1)], reduce=True)

    def schedule(self, group: Group) -> Schedule:
        p = group.size
        return chain_schedule(group, [(ROOT - i) % p for i in range(p - 1, -1, -1)], reduce=True)

    def footprint(self, group: Group) -> Footprint:
        return chain_footprint(group, reduce=True)

    def model_s(self, cost: CostInputs, count: int) -> float:
        return chain_s(cost, count, reduce=True)


def chain_schedule(group: Group, order: list[int], *, reduce: bool) -> Schedule:
    """:func:`~simulator.algorithms.phases.ring.chain` as a schedule: a chain is a tree of one
    child per rank, rooted at its first rank for a broadcast and at its last for a reduce."""
    nodes = [TreeNode(None, ())] * group.size
    for before, after in itertools.pairwise(order):
        parent, child = (after, before) if reduce else (before, after)
        nodes[child] = TreeNode(parent, nodes[child].children)
        nodes[parent] = TreeNode(nodes[parent].parent, (child,))
    return tree_schedule(group, nodes, group.buffer, up=reduce, down=not reduce)


def chain_footprint(group: Group, *, reduce: bool) -> Footprint:
    """:func:`chain_schedule` counted: a chain's p-1 edges, each carrying every piece once."""
    edges = group.size - 1
    return edges_footprint(group, group.buffer, PIPELINE_BYTES, below=edges, parents=edges,
                           up=reduce, down=not reduce)
