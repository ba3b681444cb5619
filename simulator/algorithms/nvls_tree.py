"""NVLSTree: NVLS inside each host, a tree between the hosts' NVLS heads, NVLS back (NCCL ≥ 2.18's
NVLS_TREE allreduce, the default on multi-node H100).

As NVIDIA/nccl runs it (read at v2.30.7, commit 5067397c):

- ``src/device/all_reduce.h``, ``RunWorkColl<AllReduce, NVLS_TREE, SIMPLE>``: each channel's
  warps split into scatter, reduce, broadcast and gather groups. The scatter warps of every GPU
  put chunk h of each loop of ``nHeads`` chunks into head h's NVLS buffer; head h's reduce warps
  pull the host's sum of it out of the switch (``multimem.ld_reduce``, ``nvls.down``), reduce in
  what its tree children across the network sent, and send it up the tree (``treeUp``); its
  broadcast warps take the total from the tree parent, pass it to the tree children and store
  it through the switch into every GPU of the host (``multimem.st``); the gather warps copy
  every head's chunk out. The root's reduce warps turn the total straight around.
- ``src/graph/connect.cc``, ``connectNvls``: one head per NVLS graph channel (a GPU and its NIC;
  one per GPU on a DGX), and for each head the tree over the hosts from ``ncclGetDtree``
  (:func:`~simulator.algorithms.host_tree.double_host_tree`), tree c % 2 on channel c, so half
  the channels use each of the two trees.

Here: the buffer's two halves take the two trees; in each, head h (the h-th GPU of every host)
owns chunk h of the half, which moves in pipeline pieces. Every GPU uploads each piece of every
chunk to its host's switch for its head alone (``comm.switch_reduce(to=h)``); the head reduces
its children's pieces into the host's sum, sends it up, gets the total down and multicasts it
(``comm.switch_multicast``), which every GPU takes. Each GPU's scatter runs at most
:data:`WINDOW` pieces ahead of its gather, as NCCL's connections hold ``NCCL_STEPS`` slots.
"""

from __future__ import annotations

import math

from simulator.algorithms.algorithm import Algorithm
from simulator.algorithms.comm import COPY, REDUCE, Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.host_tree import HostNode, double_host_tree
from simulator.algorithms.phases.pieces import PIPELINE_BYTES
from simulator.model.collective import Collective
from simulator.model.machine import Layout, Machine
from simulator.model.nccl import NcclAlgorithm
from simulator.model.span import Span

WINDOW = 8
"""How many pieces a GPU's scatter may run ahead of its gather: ``NCCL_STEPS`` (8 slots per
connection, src/include/device.h), a piece a slot."""


class NvlsTree(Algorithm):
    """NVLSTree allreduce over N hosts of L GPUs: for each of the two inter-host trees, on its
    half of the buffer, every piece of head h's chunk is reduced in the host's switch to head h,
    reduced up the tree of the hosts' h-th GPUs, broadcast down it, and multicast by the switch
    to every GPU of the host.

    Closed form, for k pieces of c bytes per head and tree (see :meth:`model_s`):

        T = delay + chain + (k - 1)·max(step, (delay + chain) / (WINDOW + 1)),

    delay the latencies one piece meets (upload, the switch's reduction latency, copy down,
    2d network hops of the deeper tree, the multicast up and down), chain its transfers (its
    L uploads on a GPU's link, the copy down, 2d network hops, the multicast), and step what the
    busiest link carries per piece of every head of both trees: a GPU's NVLink 2(L+1)·c each
    way (the scatter of both halves and its own multicasts), a NIC c per tree edge it serves.
    The simulation shares the links max-min among dozens of flows a GPU, so this is an estimate
    (exact nowhere: ``exact_on`` is empty); tests/test_nvls_tree.py bounds the gap.
    """

    name = "nvls_tree"
    collective = Collective.ALLREDUCE
    nccl_family = NcclAlgorithm.NVLS_TREE
    nccl_kernel = True
    rail_aware = True  # every GPU of a host is a head, on its own NIC: channels add nothing
    trace_vectorised = True  # dozens of flows an instant: the vectorised engine is the faster

    def unsupported(self, machine: Machine) -> str | None:
        layout = machine.layout
        if layout.host_count < 2:
            return ("it needs GPUs on two or more hosts (NCCL runs NVLS on one host), such as "
                    "dgx_h100 with nodes ≥ 2")
        return host_switch_unsupported(machine)

    def program(self, comm: Comm) -> Program:
        halves = comm.chunks(2)
        yield comm.parallel(*(_tree_half(comm.within_channel(t), t, halves[t])
                              for t in range(2)))

    def model_s(self, cost: CostInputs, count: int) -> float:
        layout = cost.layout
        hosts, local = _shape(layout)
        if cost.ranks == 1:
            return 0.0
        heads = layout.rail(layout.host_ranks(0)[0])  # head 0 of every host, in host order
        switch = cost.subgroup(layout.host_ranks(heads[0])).in_switch()
        assert switch is not None
        nvlink, switch_delay = switch.beta_s_per_byte, switch.reduction_latency_s
        nodes = [double_host_tree(h, hosts) for h in range(hosts)]
        edges = [(heads[h], heads[n.parent]) for h, pair in enumerate(nodes) for n in pair
                 if n.parent is not None]
        net_alpha = cost.alpha(edges + [(b, a) for a, b in edges])
        net_beta = cost.beta(edges + [(b, a) for a, b in edges])
        depth = max(_depth(nodes, t, h) for t in range(2) for h in range(hosts))
        per_nic = max(sum(len(pair[t].children) + (pair[t].parent is not None)
                          for t in range(2)) for pair in nodes)
        half = math.ceil(count / 2)
        pieces = cost.pieces(math.ceil(half / local), PIPELINE_BYTES)
        k, c = len(pieces), cost.nbytes(pieces[0])
        delay = (2 * (switch.alpha_up_s + switch.alpha_down_s) + switch_delay
                 + 2 * depth * net_alpha)
        chain = (local + 3) * c * nvlink + 2 * depth * c * net_beta
        step = max(2 * (local + 1) * c * nvlink, per_nic * c * net_beta)
        return delay + chain + (k - 1) * max(step, (delay + chain) / (WINDOW + 1))


def _tree_half(comm: Comm, tree: int, half: Span) -> Program:
    """One tree's half of the buffer: my scatter and gather, and my head's part in the tree."""
    me, layout = comm.rank, comm.layout
    host, rail = layout.host_ranks(me), layout.rail(me)
    head = host.index(me)
    intra, across = comm.subgroup(host, half), comm.subgroup(rail, half)
    node = double_host_tree(rail.index(me), len(rail))[tree]
    chunks = [comm.pieces(chunk, PIPELINE_BYTES) for chunk in half.split(len(host))]
    threads = [switch_scatter_gather(intra, chunks), _reduce_up(intra, across, node, chunks[head])]
    if node.parent is not None:
        threads.append(_broadcast_down(intra, across.on_channel(1), node, chunks[head]))
    yield comm.parallel(*threads)


def switch_scatter_gather(intra: Comm, chunks: list[list[Span]]) -> Program:
    """Every head's pieces up to the switch for that head alone (NCCL's scatter warps), each
    piece j posted once piece j - WINDOW - 1 of every head has come back (the gather warps)."""
    for j in range(max(len(pieces) for pieces in chunks) + WINDOW):
        for h, pieces in enumerate(chunks):
            if j < len(pieces):
                intra.switch_reduce(pieces[j], "scatter", to=h)
        for h, pieces in enumerate(chunks):
            if 0 <= j - WINDOW < len(pieces):
                yield intra.switch_result(pieces[j - WINDOW], "gather", multicast_from=h)


def _reduce_up(intra: Comm, across: Comm, node: HostNode, pieces: list[Span]) -> Program:
    """My head's reduce warps: the host's sum of each piece out of the switch, my tree
    children's pieces reduced in, the result up to my parent; at the root straight back down to
    the children and through the switch to the host."""
    down = across.on_channel(1)
    for piece in pieces:
        yield intra.switch_result(piece, "host sum", to=intra.rank)
        for child in node.children:
            yield across.recv(child, into=piece, combine=REDUCE, label="tree up")
        if node.parent is not None:
            across.send(node.parent, piece, "tree up")
            continue
        for child in node.children:
            down.send(child, piece, "tree down")
        intra.switch_multicast(piece, "multicast")


def _broadcast_down(intra: Comm, down: Comm, node: HostNode, pieces: list[Span]) -> Program:
    """My head's broadcast warps (below the root): each total from my parent, on to my
    children and through the switch to every GPU of my host."""
    assert node.parent is not None
    for piece in pieces:
        yield down.recv(node.parent, into=piece, combine=COPY, label="tree down")
        for child in node.children:
            down.send(child, piece, "tree down")
        intra.switch_multicast(piece, "multicast")


def _host_switch_missing(machine: Machine, ranks: tuple[int, ...]) -> bool:
    """Whether no switch inside the host (an NVSwitch, not the network) reduces for ``ranks``."""
    switch = machine.reducing_switch(ranks)
    return switch is None or switch.network


def host_switch_unsupported(machine: Machine) -> str | None:
    """Why NVLS cannot reduce inside every host of ``machine`` (None: it can)."""
    layout = machine.layout
    if len(layout.ranks_per_host) > 1:
        return "it needs the same number of GPUs on every host"
    if any(_host_switch_missing(machine, ranks) for ranks in layout.host_groups):
        return ("it needs a switch with in-switch reduction (reduction: true) cabled to every "
                "GPU of each host, such as the NVSwitch of a dgx_h100 node")
    return None


def _shape(layout: Layout) -> tuple[int, int]:
    """Hosts and GPUs per host."""
    return layout.host_count, next(iter(layout.ranks_per_host))


def _depth(nodes: list[tuple[HostNode, HostNode]], tree: int, host: int) -> int:
    """How many edges lie between ``host`` and the root of tree ``tree``."""
    depth, parent = 0, nodes[host][tree].parent
    while parent is not None:
        depth, parent = depth + 1, nodes[parent][tree].parent
    return depth
