"""CollNet: allreduce with the sum across hosts taken in the network's switches (InfiniBand
SHARP), as NCCL's CollNetDirect and CollNetChain algorithms run it.

As NVIDIA/nccl runs them (read at v2.30.7, ``src/device/all_reduce.h``,
``RunWorkColl<AllReduce, COLLNET_DIRECT | COLLNET_CHAIN, SIMPLE>``; ``src/graph/connect.cc``
``connectCollNet``; the search's ``NCCL_TOPO_PATTERN_COLLNET_DIRECT``, src/graph/search.cc):

- **CollNetDirect**: each host has up to ``NCCL_MAX_DIRECT_ARITY + 1`` = 8 heads, a GPU and its
  NIC each (every GPU on a DGX). Every GPU sends chunk h of its buffer straight to head h over
  NVLink (the scatter); head h reduces what its host's GPUs sent into its own chunk, posts the
  host's sum to the network, where the switches sum the heads of every host (SHARP), takes the
  total back and sends it straight to every GPU of its host (the broadcast).
- **CollNetChain**: on each channel the host's GPUs form a chain (``NCCL_TOPO_PATTERN_TREE``)
  that ends at the GPU whose NIC the channel uses; the chain reduces up to it, it takes the sum
  across hosts from the network, and the chain passes the total back down.

Here the in-network sum is an in-switch reduction (:meth:`Comm.switch_reduce`) among the hosts'
heads of one rail, which the engine routes to the network switch that takes every one of their
NICs (a topology's ``sharp: true``; :class:`~simulator.model.machine.ReducingSwitch`), or
where a rail spans leaves up SHARP's aggregation tree to the switch joining them
(:meth:`~simulator.model.machine.Machine.aggregation`). Each switch reduces at line rate after
its fixed latency, as SHARP's aggregation nodes do.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.algorithms.algorithm import Algorithm, ModelKind
from simulator.algorithms.comm import COPY, REDUCE, Comm, Program
from simulator.algorithms.cost import CostInputs, InSwitchCosts
from simulator.algorithms.nvls_tree import window
from simulator.algorithms.phases.pieces import PIPELINE_BYTES
from simulator.model.collective import Collective
from simulator.model.machine import Machine
from simulator.model.nccl import NcclAlgorithm
from simulator.model.nccl_point import NcclBinding
from simulator.model.span import Span

WINDOW = window(1)
"""How many pieces a GPU's scatter may run ahead of its gather, 32: ``NCCL_STEPS`` (8 slots,
src/include/device.h) on each of the four connections a piece crosses between the two (the
scatter's to its head, the head's up to the network's switch and back down, the head's
broadcast), as :func:`~simulator.algorithms.nvls_tree.window` gives a host one edge below its
tree's root: the switch's reduction is the one level of this tree. NCCL's CollNet and NVLS
kernels run their scatter, reduce and broadcast warps on their own connections
(src/device/all_reduce.h, ``RunWorkColl<AllReduce, COLLNET_DIRECT | NVLS, SIMPLE>``), each
waiting for another only through those connections' slots (8 before issue 38)."""


def sharp_costs(cost: CostInputs, local: int) -> InSwitchCosts:
    """The in-network reduction's costs for rail ``local`` (the local-th GPU of every host)."""
    layout = cost.layout
    rail = layout.rail(layout.host_groups[0][local])
    switch = cost.subgroup(rail).in_switch()
    assert switch is not None, "Machine.sharp_unsupported said yes"
    return switch


@dataclass(frozen=True)
class _Terms:
    """What both CollNet closed forms read: L-1 other GPUs a host, the worst NVLink alpha and
    beta between them, the network round's costs, and k pieces of c bytes per head or channel."""

    hops: int
    alpha: float
    beta: float
    sharp: InSwitchCosts
    k: int
    c: int

    @classmethod
    def of(cls, cost: CostInputs, count: int) -> _Terms:
        layout = cost.layout
        local = next(iter(layout.ranks_per_host))
        host = layout.host_groups[0]
        pairs = [(a, b) for a in host for b in host if a != b]
        pieces = cost.pieces(-(-count // local), PIPELINE_BYTES)
        return cls(local - 1, cost.alpha(pairs), cost.beta(pairs), sharp_costs(cost, 0),
                   len(pieces), cost.nbytes(pieces[0]))

    @property
    def sharp_delay(self) -> float:
        """A piece's latency up to the switch, its reduction latency and down."""
        sharp = self.sharp
        return sharp.alpha_up_s + sharp.reduction_latency_s + sharp.alpha_down_s


class CollNetDirect(Algorithm):
    """CollNetDirect allreduce over N hosts of L GPUs: every GPU sends chunk h to head h, head h
    reduces its host's chunks, the network sums the heads of rail h, head h sends the total to
    every GPU of its host; in pipeline pieces, the scatter at most :data:`WINDOW` pieces ahead of
    the gather.

    Closed form, for k pieces of c bytes per head (see :meth:`model_s`):

        T = delay + chain + (k - 1)·max(step, (delay + chain) / (WINDOW + 1)),

    delay the latencies one piece meets (NVLink to the head, up to the switch, its reduction
    latency, down, NVLink to the GPUs), chain its transfers ((L-1)·c into the head, c up and c
    down the NIC, (L-1)·c out of the head), and step what the busiest link carries per piece of
    every head: a GPU's NVLink 2(L-1)·c each way (its scatter and its broadcast), a NIC c each
    way. An estimate (exact nowhere: ``exact_on`` is empty, the links are shared max-min among
    many flows); tests/test_collnet.py bounds the gap.
    """

    name = "collnet_direct"
    collective = Collective.ALLREDUCE
    nccl = NcclBinding(NcclAlgorithm.COLLNET_DIRECT, kernel=True)
    rail_aware = True  # every GPU of a host is a head, on its own NIC
    model_kind = ModelKind.ESTIMATE  # exact nowhere: the closed form is an estimate
    trace_vectorised = True

    def unsupported(self, machine: Machine) -> str | None:
        return machine.sharp_unsupported()

    def program(self, comm: Comm) -> Program:
        me, layout = comm.rank, comm.layout
        host, rail = layout.host_ranks(me), layout.rail(me)
        head = host.index(me)
        intra = comm.subgroup(host, comm.buffer)
        chunks = [comm.pieces(chunk, PIPELINE_BYTES) for chunk in comm.chunks(len(host))]
        across = comm.subgroup(rail, comm.chunks(len(host))[head])
        yield comm.parallel(_scatter_gather(intra, chunks),
                            _reduce_up(intra, across, chunks[head]),
                            _broadcast(intra, across, chunks[head]))

    def model_s(self, cost: CostInputs, count: int) -> float:
        t = _Terms.of(cost, count)
        delay = 2 * t.alpha + t.sharp_delay
        chain = 2 * t.hops * t.c * t.beta + t.c * t.sharp.path_s_per_byte
        step = max(2 * t.hops * t.c * t.beta, t.c * t.sharp.beta_s_per_byte)
        return delay + chain + (t.k - 1) * max(step, (delay + chain) / (WINDOW + 1))


def _scatter_gather(intra: Comm, chunks: list[list[Span]]) -> Program:
    """My pieces of every other head's chunk to that head (channel 0), and the totals of their
    chunks back from them (channel 1): piece j posted once piece j - WINDOW - 1 of every head
    has come back, as NCCL's connections hold NCCL_STEPS slots."""
    down = intra.on_channel(1)
    me = intra.rank
    for j in range(max(len(pieces) for pieces in chunks) + WINDOW):
        for h, pieces in enumerate(chunks):
            if h != me and j < len(pieces):
                intra.send(h, pieces[j], "scatter")
        for h, pieces in enumerate(chunks):
            if h != me and 0 <= j - WINDOW < len(pieces):
                yield down.recv(h, into=pieces[j - WINDOW], combine=COPY, label="broadcast")


def _reduce_up(intra: Comm, across: Comm, pieces: list[Span]) -> Program:
    """As head of my chunk (NCCL's reduce warps): each piece reduced from my host's GPUs and
    posted to the network, not waiting for the total."""
    others = [peer for peer in range(intra.size) if peer != intra.rank]
    for piece in pieces:
        for peer in others:
            yield intra.recv(peer, into=piece, combine=REDUCE, label="scatter")
        across.switch_reduce(piece, "sharp")


def _broadcast(intra: Comm, across: Comm, pieces: list[Span]) -> Program:
    """As head of my chunk (NCCL's broadcast warps): each piece's total from the network, sent
    to every GPU of my host."""
    down = intra.on_channel(1)
    others = [peer for peer in range(intra.size) if peer != intra.rank]
    for piece in pieces:
        yield across.switch_result(into=piece, label="sharp")
        for peer in others:
            down.send(peer, piece, "broadcast")


class CollNetChain(Algorithm):
    """CollNetChain allreduce over N hosts of L GPUs, one channel a GPU: on channel c the host's
    GPUs form a chain ending at its c-th GPU, whose NIC the channel uses; each piece of the
    channel's part of the buffer is reduced up the chain, summed across hosts in the network
    among the c-th GPUs, and passed back down the chain.

    Closed form, for k pieces of c bytes per channel (see :meth:`model_s`):

        T = delay + chain + (k - 1)·step,

    delay the latencies one piece meets (L-1 NVLink hops up, the switch, L-1 hops down), chain
    its transfers ((L-1)·c each way on NVLink, c up and c down the NIC), step what the busiest
    link carries per piece of every channel: a GPU's NVLink 2(L-1)·c each way (a piece up in
    every chain but the one it ends, a piece down in every chain but the one it starts), a NIC
    c each way. An estimate, as
    :class:`CollNetDirect`'s.
    """

    name = "collnet_chain"
    collective = Collective.ALLREDUCE
    nccl = NcclBinding(NcclAlgorithm.COLLNET_CHAIN, kernel=True)
    rail_aware = True  # one channel a GPU and its NIC: the program opens its own channels
    model_kind = ModelKind.ESTIMATE  # exact nowhere: the closed form is an estimate
    trace_vectorised = True

    def unsupported(self, machine: Machine) -> str | None:
        return machine.sharp_unsupported()

    def program(self, comm: Comm) -> Program:
        local = len(comm.layout.host_ranks(comm.rank))
        parts = comm.chunks(local)
        yield comm.parallel(*(_chain(comm.within_channel(c), c, parts[c]) for c in range(local)))

    def model_s(self, cost: CostInputs, count: int) -> float:
        t = _Terms.of(cost, count)
        delay = 2 * t.hops * t.alpha + t.sharp_delay
        chain = 2 * t.hops * t.c * t.beta + t.c * t.sharp.path_s_per_byte
        step = max(2 * t.hops * t.c * t.beta, t.c * t.sharp.beta_s_per_byte)
        return delay + chain + (t.k - 1) * step


def _chain(comm: Comm, channel: int, part: Span) -> Program:
    """Channel ``channel``'s part: up my host's chain (rotated to end at its ``channel``-th
    GPU), across hosts in the network at that GPU, back down the chain; up and down run at
    once, each piece in turn."""
    me, layout = comm.rank, comm.layout
    host = layout.host_ranks(me)
    order = host[channel + 1:] + host[:channel + 1]  # ends at the channel's GPU, its NIC's
    intra = comm.subgroup(order, part)
    at = intra.rank
    below = at - 1 if at > 0 else None  # toward the chain's start
    above = at + 1 if at < len(order) - 1 else None  # toward its end, the NIC's GPU
    across = comm.subgroup(layout.rail(me), part)
    pieces = comm.pieces(part, PIPELINE_BYTES)
    yield comm.parallel(_chain_up(intra, across, below, above, pieces),
                        _chain_down(intra.on_channel(1), across, below, above, pieces))


def _chain_up(intra: Comm, across: Comm, below: int | None, above: int | None,
              pieces: list[Span]) -> Program:
    """Each piece reduced from below into mine and passed up, or at the chain's end posted to
    the network."""
    for piece in pieces:
        if below is not None:
            yield intra.recv(below, into=piece, combine=REDUCE, label="chain up")
        if above is not None:
            intra.send(above, piece, "chain up")
        else:
            across.switch_reduce(piece, "sharp")


def _chain_down(down: Comm, across: Comm, below: int | None, above: int | None,
                pieces: list[Span]) -> Program:
    """Each piece's total from above, or at the chain's end from the network, passed down."""
    for piece in pieces:
        if above is not None:
            yield down.recv(above, into=piece, combine=COPY, label="chain down")
        else:
            yield across.switch_result(into=piece, label="sharp")
        if below is not None:
            down.send(below, piece, "chain down")
