"""What the simulator would have assumed, against what NCCL's own graph dump or log says
(:mod:`simulator.model.nccl_view`): the graphs of its topology search (channels and speeds per
algorithm), its rings, and its trees (the two trees of ``double_binary_tree``, NCCL's Tree).
A run with ``nccl: {graph: FILE}`` or ``{log: FILE}`` uses NCCL's graphs and rings and says,
line by line, where they differ from the assumed ones; the trees are compared, not replaced:
``double_binary_tree`` builds NCCL's trees by NCCL's rules (trees.cc, connect.cc) over the
channels' orders, so a difference there names a rule the simulator does not follow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from simulator.algorithms.double_binary_tree import trees_of
from simulator.model.collective import Collective
from simulator.model.execution import system_of
from simulator.model.machine import Layout, Machine
from simulator.model.nccl import (
    EVERYTHING,
    Enabled,
    Graph,
    NcclAlgorithm,
    choose,
    predicted_time_us,
)
from simulator.model.nccl_view import NcclView


def differences(machine: Machine, view: NcclView,
                enabled: Enabled = EVERYTHING) -> tuple[str, ...]:
    """One line per way ``view`` (applied to ``machine``: its graphs and rings) differs from
    what the simulator assumes without it, and how the model's pick (among ``enabled``) compares
    with what NCCL ran where the log says; a line saying they agree where nothing differs."""
    assumed = replace(machine, nccl=replace(machine.nccl, graphs=()),
                      layout=replace(machine.layout, rings=()))
    lines = [*_graphs(system_of(assumed).graphs, dict(machine.nccl.graphs)),
             *_rings(machine.layout), *_trees(machine.layout, view)]
    if not lines:
        lines.append("NCCL's graphs, rings and trees are those assumed")
    return (*lines, *_picks(machine, view, enabled), *_predicted(machine, view))


COLLECTIVES = {"AllReduce": Collective.ALLREDUCE, "AllGather": Collective.ALLGATHER,
               "ReduceScatter": Collective.REDUCE_SCATTER}
"""The collectives of a TUNING line (src/collectives.cc ``ncclFuncToString``) whose pick NCCL's
model here covers (:data:`~simulator.model.nccl.CANDIDATES`)."""


def _picks(machine: Machine, view: NcclView, enabled: Enabled) -> list[str]:
    """A line comparing what NCCL ran (its log's TUNING lines) with the model's pick on
    ``machine`` (NCCL's graphs where the view gives them) at each call's size."""
    system = system_of(machine)
    compared, differ = 0, []
    for pick in view.picks:
        collective = COLLECTIVES.get(pick.collective)
        if collective is None:
            continue
        compared += 1
        try:
            mine = choose(system, pick.size_bytes, enabled, collective)
        except ValueError:
            differ.append(f"{pick.collective} {pick.size_bytes} B: NCCL {pick.algorithm.value}/"
                          f"{pick.protocol.value}, the model none")
            continue
        if (mine.algorithm, mine.protocol) != (pick.algorithm, pick.protocol):
            differ.append(f"{pick.collective} {pick.size_bytes} B: NCCL "
                          f"{pick.algorithm.value}/{pick.protocol.value}, the model "
                          f"{mine.algorithm.value}/{mine.protocol.value}")
    if not compared:
        return []
    if not differ:
        return [f"picks: the model picks what NCCL ran at all {compared} calls logged"]
    shown = "; ".join(differ[:3]) + ("; ..." if len(differ) > 3 else "")
    return [f"picks: the model picks otherwise than NCCL ran at {len(differ)} of {compared} "
            f"calls logged: {shown}"]


def _predicted(machine: Machine, view: NcclView) -> list[str]:
    """A line comparing the times NCCL 2.31's own cost model predicted (its ``Best tuning``
    lines, for the general kernels it picked) with this model's time for the same pair and
    size on ``machine``: the largest difference, where the log has such lines."""
    system = system_of(machine)
    worst: tuple[float, str] | None = None
    compared = 0
    for tuned in view.tunings:
        collective = COLLECTIVES.get(tuned.collective)
        if collective is None or tuned.algorithm is None or tuned.protocol is None:
            continue
        mine = predicted_time_us(system, tuned.algorithm, tuned.protocol, tuned.size_bytes,
                                 collective)
        if mine is None or tuned.time_us <= 0:
            continue
        compared += 1
        off = mine / tuned.time_us - 1
        if worst is None or abs(off) > abs(worst[0]):
            worst = (off, f"{tuned.collective} {tuned.size_bytes} B {tuned.algorithm.value}/"
                          f"{tuned.protocol.value}: NCCL {tuned.time_us:g} us, the model "
                          f"{mine:.6g} us")
    if worst is None:
        return []
    return [f"predicted times: the model is within {abs(worst[0]):.1%} of NCCL's own at the "
            f"{compared} calls its Best tuning lines rate (the farthest: {worst[1]})"]


def _said(graph: Graph | None) -> str:
    if graph is None:
        return "none"
    return f"{graph.channels} x {graph.bw_intra_GBps:g}/{graph.bw_inter_GBps:g} GB/s"


def _graphs(assumed: Mapping[NcclAlgorithm, Graph],
            found: Mapping[NcclAlgorithm, Graph]) -> list[str]:
    """A line per algorithm whose graph (channels, speeds) differs."""
    lines = []
    for algorithm in NcclAlgorithm:
        mine, theirs = assumed.get(algorithm), found.get(algorithm)
        same = (mine is None) == (theirs is None) and (mine is None or theirs is None or (
            (mine.channels, mine.bw_intra_GBps, mine.bw_inter_GBps, mine.plain_tree)
            == (theirs.channels, theirs.bw_intra_GBps, theirs.bw_inter_GBps, theirs.plain_tree)))
        if not same:
            lines.append(f"graph {algorithm.value}: NCCL's {_said(theirs)}, assumed {_said(mine)}"
                         + (" (plain TREE pattern: x0.85)" if theirs is not None
                            and theirs.plain_tree else ""))
    return lines


def _rings(layout: Layout) -> list[str]:
    """A line where NCCL's rings are not the assumed channel orders (as cycles)."""
    if not layout.rings:
        return []
    differ = [c for c, ring in enumerate(layout.rings)
              if not _same_cycle(ring, layout.assumed_order(c))]
    if not differ:
        return []
    c = differ[0]
    return [f"rings: {len(differ)} of NCCL's {len(layout.rings)} differ from the assumed "
            f"(hosts in order, each rotated by the channel); ring {c}: "
            f"{_list(layout.rings[c])}, assumed {_list(layout.assumed_order(c))}"]


def _trees(layout: Layout, view: NcclView) -> list[str]:
    """A line where NCCL's trees (channel c of n: tree c // (n/2) over channel c mod n/2's
    order, as NCCL duplicates its channels for the second tree) differ from those
    ``double_binary_tree`` builds."""
    if not view.trees or len(view.trees) % 2:
        return []
    half = len(view.trees) // 2
    differ = []
    for c, parents in enumerate(view.trees):
        order = layout.channel_order(c % half)
        tree = trees_of(layout.subgroup(order))[c // half]
        mine = {order[i]: (-1 if node.parent is None else order[node.parent])
                for i, node in enumerate(tree)}
        theirs = dict(parents)
        wrong = sorted(rank for rank in theirs if mine.get(rank) != theirs[rank])
        if wrong:
            differ.append((c, wrong[0], theirs[wrong[0]], mine.get(wrong[0])))
    if not differ:
        return []
    c, rank, theirs_up, mine_up = differ[0]
    return [f"trees: {len(differ)} of NCCL's {len(view.trees)} channels differ from "
            f"double_binary_tree's; channel {c}: rank {rank}'s parent is {theirs_up}, "
            f"double_binary_tree's {mine_up}"]


def _same_cycle(ring: tuple[int, ...], order: tuple[int, ...]) -> bool:
    if len(ring) != len(order) or not ring:
        return ring == order
    start = order.index(ring[0]) if ring[0] in order else -1
    return start >= 0 and order[start:] + order[:start] == ring


def _list(ranks: tuple[int, ...]) -> str:
    return " ".join(str(rank) for rank in ranks[:16]) + (" ..." if len(ranks) > 16 else "")
