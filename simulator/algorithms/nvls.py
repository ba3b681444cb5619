"""NVLS: allreduce reduced inside the NVSwitch (NVLink SHARP), as NCCL's NVLS algorithm does.

Every GPU streams its buffer up to the switch in pieces; the switch sums the p copies of each
piece as they arrive and multicasts the result down to every GPU. Each GPU link thus carries the
buffer once up and once down, instead of the ring's 2(p-1)/p times each way, so the bus bandwidth
(nccl-tests' 2(p-1)/p convention) can exceed the link rate (NVIDIA, "NVLink SHARP" in the H100
architecture whitepaper, 2022; NCCL 2.17 release notes; nccl-tests issue #153).
"""

from __future__ import annotations

from simulator.algorithms.algorithm import Algorithm
from simulator.algorithms.comm import Comm, Program
from simulator.algorithms.cost import CostInputs, proportionate_pipeline_s
from simulator.algorithms.phases.pieces import PIPELINE_BYTES
from simulator.model.collective import Collective
from simulator.model.machine import Machine
from simulator.model.nccl import NcclAlgorithm


class Nvls(Algorithm):
    """In-switch allreduce, pipelined in k pieces of c bytes.

    T = alpha_up + lambda + alpha_down + Σ_j c_j·beta + c_max·beta, i.e. (k + 1)·c·beta for k
    equal pieces: a two-stage pipeline (up the GPU's link, down it), the switch reducing at line
    rate after its fixed latency lambda (``reduction_latency``); no GPU reduction at all.
    """

    name = "nvls"
    collective = Collective.ALLREDUCE
    nccl_family = NcclAlgorithm.NVLS
    nccl_kernel = True

    def unsupported(self, machine: Machine) -> str | None:
        if machine.reducing_switch() is None:
            return ("it needs one switch with in-switch reduction (reduction: true) cabled to "
                    "every GPU, such as the NVSwitch of a single dgx_h100 node")
        return None

    def program(self, comm: Comm) -> Program:
        if comm.size == 1:
            return
        pieces = comm.pieces(comm.buffer, PIPELINE_BYTES)
        for piece in pieces:
            comm.switch_reduce(piece)             # up: my copy of the piece to the switch
        for piece in pieces:
            yield comm.switch_result(into=piece)  # down: the switch's sum, multicast

    def model_s(self, cost: CostInputs, count: int) -> float:
        switch = cost.in_switch()
        if cost.ranks == 1 or switch is None:
            return 0.0
        beta = switch.beta_s_per_byte
        pieces = [cost.nbytes(n) * beta for n in cost.pieces(count, PIPELINE_BYTES)]
        delay = switch.alpha_up_s + switch.reduction_latency_s + switch.alpha_down_s
        return proportionate_pipeline_s(delay, 2, pieces)  # up, then down: both links
