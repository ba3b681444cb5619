"""Bucket allreduce on a torus or mesh: a ring reduce-scatter along each dimension in turn, then
ring allgathers along them in reverse order.

The multi-dimensional ("bucket") algorithm of Jain & Sabharwal, "Optimal bucket algorithms for
large MPI collectives on torus interconnects", ICS 2010, as TPU pods run their allreduce over a
3-D torus of ICI links and ASTRA-sim's multi-dimensional collectives compose it (Rashidi et al.,
"ASTRA-SIM: Enabling SW/HW co-design exploration for distributed DL training platforms",
ISPASS 2020). Each phase is a ring among the d_i ranks of a line, over the line's own cables;
the rings are those of :mod:`simulator.algorithms.ring`.
"""

from __future__ import annotations

import math

from simulator.algorithms.algorithm import Algorithm, ExactOn
from simulator.algorithms.comm import Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import Footprint
from simulator.algorithms.ring import RingAllgather, RingReduceScatter
from simulator.algorithms.schedule import Blocks, Group, Schedule
from simulator.model.collective import Collective
from simulator.model.machine import Grid, Machine

_REDUCE_SCATTER, _ALLGATHER = RingReduceScatter(), RingAllgather()


class BucketAllreduce(Algorithm):
    """Allreduce on a torus or mesh of dims (d_1, ..., d_k), one dimension at a time.

    1. for i = 1 .. k: ring reduce-scatter along dimension i (among the d_i ranks of each line,
       all lines at once) of the span each rank holds, so that it then holds 1/d_i of it: the
       whole buffer first, 1/(d_1·…·d_k) of it in the end;
    2. for i = k .. 1: ring allgather along dimension i of the span held before step 1's phase i.

    T = Σ_i [2(d_i − 1)·(alpha_i + c_i·beta_i) + (d_i − 1)·(c_i·gamma + launch)],
        c_i = ⌈count / (d_1·…·d_i)⌉·itemsize,

    alpha_i and beta_i those of a hop along dimension i: each phase is the ``ring``
    reduce-scatter or allgather's own closed form on a line, on the largest span it cuts
    (the ranks at coordinate 0 hold it). Every rank sends 2·Σ_i (d_i − 1)·c_i ≈ 2(p−1)/p·n bytes,
    as in the flat ring, but in 2·Σ_i (d_i − 1) steps instead of 2(p − 1). Exact on ``torus``
    (each line's ring runs on its own cables, one flow per link) at any size; with
    ``piece_size`` and unequal chunks an upper bound, as the ring's. On a mesh a line's closing
    step goes back across its d_i − 1 cables the other way (no link shared, d_i − 1 hops of
    latency) and the form charges that longer hop as the ring's does: exact where every span
    divides evenly without ``piece_size``, elsewhere an upper bound (tests/test_bucket.py).

    Ranks that fill no grid (a group without dims) run it as one line: the ring allreduce.
    """

    name = "bucket"
    collective = Collective.ALLREDUCE
    exact_on = (ExactOn("torus"),)

    def unsupported(self, machine: Machine) -> str | None:
        if machine.layout.grid is None:
            return "it needs GPUs on a torus or mesh (kind torus or mesh)"
        return None

    def program(self, comm: Comm) -> Program:
        me, grid = comm.rank, _grid(comm.layout.grid, comm.size)
        held = [comm.buffer]                         # held[i]: my span before phase i
        for dim in range(len(grid.dims)):            # reduce-scatter along dims 1, 2, ..., k
            line = grid.line(me, dim)
            yield from _REDUCE_SCATTER.program(comm.subgroup(line, held[dim]))
            held.append(held[dim].split(len(line))[line.index(me)])
        for dim in reversed(range(len(grid.dims))):  # allgather along dims k, ..., 2, 1
            yield from _ALLGATHER.program(comm.subgroup(grid.line(me, dim), held[dim]))

    def schedule(self, group: Group) -> Schedule:
        return self.blocks(group).schedule()

    def blocks(self, group: Group) -> Blocks:
        """The phases in sequence, each the ring's steps on every line side by side."""
        phases = _line_groups(group)
        reduce_scatters = [Blocks.apart([_REDUCE_SCATTER.blocks(line) for line in lines])
                           for lines in phases]
        allgathers = [Blocks.apart([_ALLGATHER.blocks(line) for line in lines])
                      for lines in phases]
        return Blocks.sequence([*reduce_scatters, *reversed(allgathers)], group.ranks)

    def footprint(self, group: Group) -> Footprint:
        """:meth:`blocks` counted: each dimension's ring reduce-scatter and allgather on
        every line, as the phases hold their spans."""
        phases = [Footprint.joined([ring.footprint(line) for line in lines])
                  for lines in _line_groups(group) for ring in (_REDUCE_SCATTER, _ALLGATHER)]
        return Footprint.joined(phases, ends=group.size if group.size > 1 else 0)

    def model_s(self, cost: CostInputs, count: int) -> float:
        grid = _grid(cost.layout.grid, cost.ranks)
        total = 0.0
        for dim, size in enumerate(grid.dims):
            line = cost.subgroup(grid.line(0, dim))
            total += _REDUCE_SCATTER.model_s(line, count) + _ALLGATHER.model_s(line, count)
            count = math.ceil(count / size)          # the largest span a line cuts
        return total


def _line_groups(group: Group) -> list[list[Group]]:
    """Per dimension, every line of the grid as the subgroup its rings run on, over the span
    its members hold then (the whole buffer along the first dimension, then each member's
    part of the line before): the program's ``held``, for every rank at once."""
    grid = _grid(group.grid, group.size)
    held = [group.buffer] * group.size  # held[position]: as in the program
    phases: list[list[Group]] = []
    for size in grid.dims:
        lines = grid.lines(len(phases))
        phases.append([group.subgroup(line, held[line[0]]) for line in lines])
        after = list(held)
        for line in lines:
            for position, part in zip(line, held[line[0]].split(size), strict=True):
                after[position] = part
        held = after
    return phases


def _grid(grid: Grid | None, size: int) -> Grid:
    """The grid the group fills; one line of all its ranks where it fills none."""
    return grid if grid is not None else Grid.whole((size,))

