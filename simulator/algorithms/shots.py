"""One-shot and two-shot allreduce inside one node: the intra-node kernels of NCCL 2.27+'s
symmetric-memory path (``AllReduce_AGxLL_R``, ``AllReduce_RSxLD_AGxST``), of MSCCL++ and of the
custom allreduces of TensorRT-LLM and vLLM.

One-shot: every GPU reads every peer's whole buffer and reduces the p-1 of them into its own,
one message latency in all. Two-shot: a reduce-scatter by loads (each GPU reduces its own shard
from every peer), then an allgather by stores; the schedule of :mod:`.direct`'s allreduce,
registered under the name NCCL and MSCCL++ give it.

Both are data movement on the fabric: the engine moves and reduces the real buffers and verifies
them, and the closed forms are those of the direct phases (exact on ``switch`` and
``fully_connected``, upper bounds elsewhere; :mod:`simulator.algorithms.phases.direct`). A load
from a peer is timed as the peer's send, which moves the same bytes over the same route.

Under ``execution: ideal`` the SMs the kernels get are not charged: the simulation is limited by
the links and by the GPU's reduction rate. Under ``execution: nccl`` they are: NCCL's own model
of these kernels, whose bandwidth is nSMs·smBw capped at a peak
(:mod:`simulator.model.nccl_symmetric`, with its Hopper and Blackwell constants), sets the rate
of every GPU's NVLink and the kernel's start
(:func:`~simulator.model.nccl_symmetric.symmetric_charges`), so the SM limit is a per-GPU rate
cap on the fabric the data still moves over, and the closed form, timed on that machine, stays
exact on one NVSwitch.
Both refuse a machine of more than one host: their loads and stores need every peer's buffer
mapped in one NVLink domain.
"""

from __future__ import annotations

from simulator.algorithms.algorithm import Algorithm, ExactOn
from simulator.algorithms.comm import REDUCE, Comm, Program
from simulator.algorithms.cost import CostInputs, proportionate_pipeline_s
from simulator.algorithms.direct import DirectAllreduce
from simulator.algorithms.phases.direct import all_pairs, exchange, peers
from simulator.algorithms.phases.pieces import PIPELINE_BYTES
from simulator.model.collective import Collective
from simulator.model.machine import Machine
from simulator.model.nccl_point import NcclBinding
from simulator.model.nccl_symmetric import SymKernel

_FLAT = (ExactOn("switch"), ExactOn("fully_connected"))
"""Flows share every link evenly there: none on ``fully_connected``, p-1 per up- and downlink
on ``switch``."""


def _one_node(machine: Machine) -> str | None:
    """Why a one-node kernel cannot run on ``machine``: it spans more than one host."""
    hosts = machine.layout.host_count
    if hosts > 1:
        return (f"it runs inside one node (one NVLink domain), and the ranks sit on {hosts} "
                "hosts")
    return None


class OneShotAllreduce(Algorithm):
    """One-shot allreduce: every rank gets every peer's whole buffer and reduces the p-1 of them
    into its own, in the order me+1, me+2, … (mod p).

    T = alpha + n·beta_shared + (p-1)·g(n),  g(n) = launch + n·gamma,

    with beta_shared = (p-1)·beta on ``switch`` (every up- and downlink carries p-1 whole
    buffers) and beta on ``fully_connected``. All p-1 buffers arrive together, so the
    reductions queue after the arrival. Each rank reduces in its own order, so float results may
    differ between ranks in the last bits.
    """

    name = "one_shot"
    collective = Collective.ALLREDUCE
    exact_on = _FLAT
    nccl = NcclBinding(symmetric=(SymKernel.ONE_SHOT, SymKernel.ONE_SHOT_MULTICAST))
    trace_vectorised = True  # scenarios/dgx.yaml's 11 points: 0.29 s on SimPy, 0.13 s here

    def unsupported(self, machine: Machine) -> str | None:
        return _one_node(machine)

    def program(self, comm: Comm) -> Program:
        whole, others = comm.buffer, peers(comm.rank, comm.size)
        yield from exchange(comm, [(peer, whole) for peer in others],
                            [(peer, whole) for peer in others], REDUCE, "one-shot")

    def model_s(self, cost: CostInputs, count: int) -> float:
        p = cost.ranks
        if p == 1:
            return 0.0
        pairs, n = all_pairs(p), cost.nbytes(count)
        return cost.alpha(pairs) + n * cost.shared_beta(pairs) + (p - 1) * cost.reduce_s(n)


class TwoShotAllreduce(DirectAllreduce):
    """Two-shot allreduce: a reduce-scatter (each rank reduces its shard of every peer's buffer)
    then an allgather (each rank sends its reduced shard to every peer); :class:`DirectAllreduce`'s
    program, closed form and builder, inside one node.

    T = 2·alpha + 2·c·beta_shared + (p-1)·g,  c = ⌈count/p⌉·itemsize,  g = launch + c·gamma.
    """

    name = "two_shot"
    composable = False
    nccl = NcclBinding(symmetric=(SymKernel.TWO_SHOT,))

    def unsupported(self, machine: Machine) -> str | None:
        return _one_node(machine)



class TwoShotMulticastAllreduce(Algorithm):
    """Two-shot allreduce through the NVSwitch (NCCL's ``AllReduce_RSxLDMC_AGxSTMC``): each rank
    pulls its shard's sum from the switch piece by piece (``multimem.ld_reduce``: every rank's
    copy of the piece goes up, the switch's sum comes down to the shard's owner alone), and
    stores each summed piece to every rank at once (``multimem.st``: one copy up, the switch
    copies it down to all). The ranks pull piece j of every shard before piece j + 1, so the
    loads and the stores stream together.

    T ≈ 2·(alpha_up + alpha_down) + lambda + Σ_j (p+1)·c_j·beta + max_j (p+1)·c_j·beta,

    c_j the j-th piece of a shard (:data:`PIPELINE_BYTES`), beta the GPU link's: per piece
    index a rank's uplink carries the p shards' pieces and its own store, its downlink its sum
    and the p stores, (n + n/p)·beta in all, the busBytes NCCL's model charges; a two-stage
    pipeline (up, down) whose latencies (two round trips and the switch's reduction latency
    lambda) overlap. Exact while a shard is one piece (up to 4 MiB on 8 GPUs); a lower bound
    beyond (``exact_on`` is empty): the loads of every piece are posted at once, as the owners
    issue them, and share each uplink, so the sums, and the stores that wait for them, come
    later than in the flow shop (1.34× at 64 MiB on one DGX H100; tests/test_shots.py).
    """

    name = "two_shot_multicast"
    collective = Collective.ALLREDUCE
    nccl = NcclBinding(symmetric=(SymKernel.TWO_SHOT_MULTICAST,))
    trace_vectorised = True  # its pieces move together: 1 GiB on a DGX H100 is 1,024 instants
    # here against 364,976 SimPy events (4.0 s against 9.0 s, the same time to the bit)

    def unsupported(self, machine: Machine) -> str | None:
        reason = _one_node(machine)
        if reason is None and machine.reducing_switch() is None:
            return ("it needs one switch with in-switch reduction (reduction: true) cabled to "
                    "every GPU, such as the NVSwitch of a single dgx_h100 node")
        return reason

    def program(self, comm: Comm) -> Program:
        if comm.size == 1:
            return
        pieces = [comm.pieces(shard, PIPELINE_BYTES) for shard in comm.chunks(comm.size)]
        rounds = max(len(shard) for shard in pieces)
        for j in range(rounds):  # the owners' loads: piece j of every shard before piece j + 1
            for owner, shard in enumerate(pieces):
                if j < len(shard):
                    comm.switch_reduce(shard[j], "ld_reduce", to=owner)
        stores = comm.on_channel(1)  # the stores stream beside the loads, not behind them
        for j in range(rounds):
            if j < len(pieces[comm.rank]):
                yield comm.switch_result(into=pieces[comm.rank][j], label="ld_reduce",
                                         to=comm.rank)
                stores.switch_multicast(pieces[comm.rank][j], "st")
            for owner, shard in enumerate(pieces):
                if j < len(shard):
                    yield stores.switch_result(into=shard[j], label="st", multicast_from=owner)

    def model_s(self, cost: CostInputs, count: int) -> float:
        switch = cost.in_switch()
        p = cost.ranks
        if p == 1 or switch is None:
            return 0.0
        beta = switch.beta_s_per_byte
        shard = cost.pieces(-(-count // p), PIPELINE_BYTES)
        delay = 2 * (switch.alpha_up_s + switch.alpha_down_s) + switch.reduction_latency_s
        return proportionate_pipeline_s(delay, 2, [(p + 1) * cost.nbytes(n) * beta
                                                   for n in shard])
