"""NVLS: allreduce reduced inside the NVSwitch (NVLink SHARP), as NCCL's NVLS algorithm does.

Every GPU streams its buffer up to the switch in pieces; the switch sums the p copies of each
piece as they arrive and multicasts the result down to every GPU. Each GPU link thus carries the
buffer once up and once down, instead of the ring's 2(p-1)/p times each way, so the bus bandwidth
(nccl-tests' 2(p-1)/p convention) can exceed the link rate (NVIDIA, "NVLink SHARP" in the H100
architecture whitepaper, 2022; NCCL 2.17 release notes; nccl-tests issue #153).
"""

from __future__ import annotations

import networkx as nx

from simulator.collective import Collective
from simulator.collectives.base import Algorithm
from simulator.collectives.phases import PIPELINE_BYTES
from simulator.costmodel import CostInputs, pipeline_s
from simulator.program import Comm, Program
from simulator.topology import reducing_switch


class Nvls(Algorithm):
    """In-switch allreduce, pipelined in k pieces of c bytes.

    T = alpha_up + lambda + alpha_down + (k + 1)·c·beta: a two-stage pipeline (up the GPU's
    link, down it), the switch reducing at line rate after its fixed latency lambda
    (``reduction_latency``); no GPU reduction at all.
    """

    name = "nvls"
    collective = Collective.ALLREDUCE

    def unsupported(self, graph: nx.DiGraph, placement: tuple[str, ...]) -> str | None:
        if reducing_switch(graph, list(placement)) is None:
            return ("it needs one switch with in-switch reduction (reduction: true) cabled to "
                    "every GPU, such as the NVSwitch of a single dgx_h100 node")
        return None

    def program(self, me: int, comm: Comm) -> Program:
        if comm.size == 1:
            return
        pieces = comm.pieces(comm.buffer, PIPELINE_BYTES)
        for piece in pieces:
            comm.switch_reduce(piece)             # up: my copy of the piece to the switch
        for piece in pieces:
            yield comm.switch_result(into=piece)  # down: the switch's sum, multicast

    def model_time(self, cost: CostInputs, count: int) -> float:
        if cost.ranks == 1:
            return 0.0
        switch = reducing_switch(cost.routing.graph, list(cost.placement))
        routes = [cost.routing.route(gpu, switch) for gpu in cost.placement]
        routes += [cost.routing.route(switch, gpu) for gpu in cost.placement]
        up = max(r.latency_s for r in routes[: cost.ranks])
        down = max(r.latency_s for r in routes[cost.ranks:])
        beta = max(1.0 / r.bottleneck_Bps for r in routes)
        pieces = cost.pieces(count, PIPELINE_BYTES)
        c = cost.nbytes(max(pieces))
        reduction = float(cost.routing.graph.nodes[switch].get("reduction_latency", 0.0))
        return pipeline_s(up + reduction + down, [c * beta, c * beta], len(pieces))
