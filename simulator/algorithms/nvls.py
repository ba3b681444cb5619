"""NVLS: allreduce reduced inside the NVSwitch (NVLink SHARP), as NCCL's NVLS algorithm does.

Every GPU streams its buffer up to the switch in pieces; the switch sums the p copies of each
piece as they arrive and multicasts the result down to every GPU. Each GPU link thus carries the
buffer once up and once down, instead of the ring's 2(p-1)/p times each way, so the bus bandwidth
(nccl-tests' 2(p-1)/p convention) can exceed the link rate (NVIDIA, "NVLink SHARP" in the H100
architecture whitepaper, 2022; NCCL 2.17 release notes; nccl-tests issue #153).

Across hosts NCCL runs NVLS only with CollNet (tuning.cc disables it on several nodes unless
``collnetEnable``): inside each host as NVLSTree does, the heads' sums then added across the
hosts in the network's switches (InfiniBand SHARP) instead of a tree (src/device/all_reduce.h,
``RunWorkColl<AllReduce, NVLS, SIMPLE>``, its ``nNodes > 1`` branch: the reduce warps send the
host's sum to the CollNet connection, the broadcast warps take the total from it). Here: every
GPU uploads each piece of head h's chunk for head h alone, head h posts the host's sum to the
network switch of its rail, and multicasts the total through the NVSwitch to every GPU.
"""

from __future__ import annotations

from simulator.algorithms.algorithm import Algorithm, ModelKind
from simulator.algorithms.collnet import WINDOW, sharp_costs
from simulator.algorithms.comm import Comm, Program
from simulator.algorithms.cost import CostInputs, proportionate_pipeline_s
from simulator.algorithms.nvls_tree import host_switch_unsupported, switch_scatter_gather
from simulator.algorithms.phases.pieces import PIPELINE_BYTES
from simulator.model.collective import Collective
from simulator.model.machine import Machine
from simulator.model.nccl import NcclAlgorithm
from simulator.model.nccl_point import NcclBinding
from simulator.model.span import Span


class Nvls(Algorithm):
    """In-switch allreduce, pipelined in k pieces of c bytes.

    T = alpha_up + lambda + alpha_down + Σ_j c_j·beta + c_max·beta, i.e. (k + 1)·c·beta for k
    equal pieces: a two-stage pipeline (up the GPU's link, down it), the switch reducing at line
    rate after its fixed latency lambda (``reduction_latency``); no GPU reduction at all.
    """

    name = "nvls"
    collective = Collective.ALLREDUCE
    nccl = NcclBinding(NcclAlgorithm.NVLS, kernel=True)
    rail_aware = True  # across hosts every GPU is a head on its own NIC: channels add nothing
    model_kind = ModelKind.ESTIMATE  # across hosts exact nowhere: an estimate

    def unsupported(self, machine: Machine) -> str | None:
        if machine.layout.host_count > 1:
            reason = host_switch_unsupported(machine) or machine.sharp_unsupported()
            return None if reason is None else f"across hosts NVLS runs with CollNet only: {reason}"
        if machine.reducing_switch() is None:
            return ("it needs one switch with in-switch reduction (reduction: true) cabled to "
                    "every GPU, such as the NVSwitch of a single dgx_h100 node")
        return None

    def program(self, comm: Comm) -> Program:
        if comm.size == 1:
            return
        if comm.layout.host_count > 1:
            yield from _across_hosts(comm)
            return
        pieces = comm.pieces(comm.buffer, PIPELINE_BYTES)
        for piece in pieces:
            comm.switch_reduce(piece)             # up: my copy of the piece to the switch
        for piece in pieces:
            yield comm.switch_result(into=piece)  # down: the switch's sum, multicast

    def model_s(self, cost: CostInputs, count: int) -> float:
        if cost.layout.host_count > 1:
            return _across_hosts_s(cost, count)
        switch = cost.in_switch()
        if cost.ranks == 1 or switch is None:
            return 0.0
        beta = switch.beta_s_per_byte
        pieces = [cost.nbytes(n) * beta for n in cost.pieces(count, PIPELINE_BYTES)]
        delay = switch.alpha_up_s + switch.reduction_latency_s + switch.alpha_down_s
        return proportionate_pipeline_s(delay, 2, pieces)  # up, then down: both links


def _across_hosts(comm: Comm) -> Program:
    """NVLS with SHARP across hosts: my scatter and gather through my host's switch, and as
    head of my chunk its host sum up to the network and the total back through the switch."""
    me, layout = comm.rank, comm.layout
    host, rail = layout.host_ranks(me), layout.rail(me)
    head = host.index(me)
    chunks = comm.chunks(len(host))
    intra, across = comm.subgroup(host, comm.buffer), comm.subgroup(rail, chunks[head])
    pieces = [comm.pieces(chunk, PIPELINE_BYTES) for chunk in chunks]
    yield comm.parallel(switch_scatter_gather(intra, pieces, WINDOW),
                        _host_sum_up(intra, across, pieces[head]),
                        _total_down(intra, across, pieces[head]))


def _host_sum_up(intra: Comm, across: Comm, pieces: list[Span]) -> Program:
    """Head's reduce warps: each piece's host sum out of the NVSwitch, posted to the network."""
    for piece in pieces:
        yield intra.switch_result(piece, "host sum", to=intra.rank)
        across.switch_reduce(piece, "sharp")


def _total_down(intra: Comm, across: Comm, pieces: list[Span]) -> Program:
    """Head's broadcast warps: each piece's total from the network, multicast to the host."""
    for piece in pieces:
        yield across.switch_result(into=piece, label="sharp")
        intra.switch_multicast(piece, "multicast")


def _across_hosts_s(cost: CostInputs, count: int) -> float:
    """NVLS with SHARP on N hosts of L GPUs, k pieces of c bytes per head:

        T = delay + chain + (k - 1)·max(step, (delay + chain) / (WINDOW + 1)),

    delay the latencies one piece meets (upload, the NVSwitch's reduction latency, the host
    sum down to the head, the network switch's round, the multicast up and down), chain its
    transfers (L uploads on a GPU's link, the copy down, c up and down the NIC, the multicast),
    step what the busiest link carries per piece of every head: a GPU's NVLink (L+1)·c each
    way (its L uploads and its multicast up; L copies and its host sum down), a NIC c each
    way. An estimate, exact nowhere (``exact_on`` is empty)."""
    layout = cost.layout
    local = next(iter(layout.ranks_per_host))
    switch = cost.subgroup(layout.host_groups[0]).in_switch()
    assert switch is not None
    sharp = sharp_costs(cost, 0)
    nvlink = switch.beta_s_per_byte
    pieces = cost.pieces(-(-count // local), PIPELINE_BYTES)
    k, c = len(pieces), cost.nbytes(pieces[0])
    delay = (2 * (switch.alpha_up_s + switch.alpha_down_s) + switch.reduction_latency_s
             + sharp.alpha_up_s + sharp.reduction_latency_s + sharp.alpha_down_s)
    chain = (local + 3) * c * nvlink + c * sharp.path_s_per_byte
    step = max((local + 1) * c * nvlink, c * sharp.beta_s_per_byte)
    return delay + chain + (k - 1) * max(step, (delay + chain) / (WINDOW + 1))
