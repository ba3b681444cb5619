"""NCCL's answer for one point (simulator/model/nccl_point.py) on one DGX H100, whose NCCL model
is tests/test_nccl.py's worked example: the charges, the predicted time, NCCL's pick, the
refusals, and what a binding says NCCL would not run."""

import math
from dataclasses import replace

import pytest

from simulator.model.collective import Collective
from simulator.model.execution import nccl_charges
from simulator.model.machine import Machine
from simulator.model.nccl import NcclAlgorithm, Protocol
from simulator.model.nccl_env import NcclEnv
from simulator.model.nccl_point import (
    NcclBinding,
    NcclPick,
    NcclRefusal,
    nccl_pick,
    nccl_point,
    pick_problem,
)
from simulator.model.nccl_symmetric import SymKernel
from simulator.model.reduction import ReduceOp
from simulator.plan import plan_point, prepare
from simulator.scenario.parse import scenario_from_dict

RING, NVLS, PAT = NcclAlgorithm.RING, NcclAlgorithm.NVLS, NcclAlgorithm.PAT
LL, LL128, SIMPLE = Protocol.LL, Protocol.LL128, Protocol.SIMPLE
ALLREDUCE = Collective.ALLREDUCE
RING_KERNEL, NVLS_KERNEL = NcclBinding(kernel=True), NcclBinding(NVLS, kernel=True)
ONE_SHOT = NcclBinding(symmetric=(SymKernel.ONE_SHOT, SymKernel.ONE_SHOT_MULTICAST))
RING_LL_GBPS = 141 * 8 / 14  # llMaxBw over nsteps/nRanks (tests/test_nccl.py)
NVLS_GBPS = 384 * 8 / 14


def machine(**params: object) -> Machine:
    """The machine of a DGX H100 preset with ``params``."""
    topology = {"preset": "dgx_h100", **params}
    return prepare(scenario_from_dict({"topology": topology, "sizes": [1024]})).machine


H100 = machine()


DEFAULTS = NcclEnv()
"""NCCL's defaults: no NCCL_ALGO, no NCCL_PROTO, buffers not registered."""


def point(binding: NcclBinding, size: int, protocol: Protocol | None = None,
          env: NcclEnv = DEFAULTS, dtype: str = "float32"):
    """NCCL's answer for an allreduce of ``size`` bytes of ``dtype`` summed on the DGX H100."""
    return nccl_point(H100, binding, size, ALLREDUCE, env, protocol, dtype=dtype, op=ReduceOp.SUM)


def test_ring_ll_at_32_kib_is_nccls_pick_at_the_worked_examples_time():
    got = point(RING_KERNEL, 32 << 10)
    assert got.protocol is LL  # the family's best protocol at this size
    assert got.charges == nccl_charges(H100, RING, LL, 32 << 10, kernel=True)
    assert got.predicted_s == pytest.approx((15.0 + 32768 / (1000 * RING_LL_GBPS)) * 1e-6,
                                            rel=1e-12)
    assert got.pick == NcclPick(LL, family=RING)
    assert got.picked


def test_a_schedule_timed_as_ring_is_charged_as_ring_but_is_not_the_pick():
    got = point(NcclBinding(), 32 << 10)
    assert got.charges == nccl_charges(H100, RING, LL, 32 << 10, kernel=False)
    assert got.predicted_s == point(RING_KERNEL, 32 << 10).predicted_s
    assert got.pick == NcclPick(LL, family=RING) and not got.picked


def test_at_2_mib_nvls_is_the_pick_and_a_forced_protocol_is_never_it():
    nvls = point(NVLS_KERNEL, 2 << 20)
    assert nvls.picked and nvls.protocol is SIMPLE
    assert nvls.predicted_s == pytest.approx((25 + (2 << 20) / (1000 * NVLS_GBPS)) * 1e-6,
                                             rel=1e-12)
    ring = point(RING_KERNEL, 2 << 20, LL)
    assert ring.protocol is LL and ring.pick == NcclPick(SIMPLE, family=NVLS)
    assert not ring.picked
    assert not point(RING_KERNEL, 32 << 10, SIMPLE).picked  # NCCL picks Ring with LL there


def test_nccl_proto_narrows_the_protocol_and_the_pick():
    # with Simple alone NCCL's tuner takes NVLS at 32 KiB: 25 + 0.15 us against Ring's 56 + 0.16
    simple = NcclEnv(proto="Simple")
    ring = point(RING_KERNEL, 32 << 10, env=simple)
    assert ring.protocol is SIMPLE and ring.pick == NcclPick(SIMPLE, family=NVLS)
    assert not ring.picked
    assert point(NVLS_KERNEL, 32 << 10, env=simple).picked


def test_registered_buffers_make_a_symmetric_kernel_the_pick_for_its_dtypes_only():
    symmetric = NcclEnv(symmetric=True)
    one_shot = point(ONE_SHOT, 4 << 10, env=symmetric)  # the multicast one-shot at 4 KiB
    assert one_shot.pick == NcclPick(LL, symmetric=SymKernel.ONE_SHOT_MULTICAST)
    assert one_shot.protocol is LL and one_shot.picked and math.isfinite(one_shot.predicted_s)
    assert not point(RING_KERNEL, 4 << 10, env=symmetric).picked
    two_shot = NcclBinding(symmetric=(SymKernel.TWO_SHOT_MULTICAST,))  # the multicast two-shot
    assert point(two_shot, 64 << 10, env=symmetric).picked  # at 64 KiB
    assert not point(ONE_SHOT, 64 << 10, env=symmetric).picked
    # float64 has no symmetric kernel: NCCL's tuner picks, as without registration
    assert point(RING_KERNEL, 64 << 10, env=symmetric, dtype="float64").picked
    assert nccl_pick(H100, 64 << 10, ALLREDUCE, symmetric, dtype="float64",
                     op=ReduceOp.SUM) == NcclPick(LL, family=RING)


@pytest.mark.parametrize("binding, size, protocol, env, field, message", [
    (NVLS_KERNEL, 1 << 20, None, NcclEnv(proto="LL128"), "nccl.proto",
     "NCCL runs NVLS with Simple only, which 'LL128' leaves out"),
    (NVLS_KERNEL, 1 << 20, LL, NcclEnv(), "protocol",
     "NCCL runs NVLS with the Simple protocol only"),
    (ONE_SHOT, 2 << 30, None, NcclEnv(), "execution",
     "NCCL runs no AllReduce_AGxLL_R, AllReduce_AGxLLMC_R for 2147483648 bytes (LL kernels "
     "count in 32-bit ints below 2147483648 bytes, the others below 68719476736, the size in "
     "whole 1024-byte cells)"),
])
def test_what_nccl_cannot_time_is_refused_naming_the_field(binding, size, protocol, env, field,
                                                           message):
    with pytest.raises(NcclRefusal) as refused:
        point(binding, size, protocol, env)
    assert (refused.value.field, refused.value.message) == (field, message)


def test_a_binding_says_where_nccl_would_not_run_it():
    two_a_host = machine(preset="dgx_h100_superpod", nodes=4, gpus_per_node=2)
    one_a_host = machine(preset="dgx_h100_superpod", nodes=4, gpus_per_node=1)
    assert NcclBinding(PAT, kernel=True).unsupported(two_a_host) == (
        "NCCL runs PAT only with one GPU per node (src/graph/tuning.cc: PAT's bandwidth is 0 "
        "where nNodes != nRanks); here 8 ranks sit on 4 host(s)")
    assert NcclBinding(PAT, kernel=True).unsupported(one_a_host) is None
    two = machine(gpus_per_node=2)
    assert NcclBinding(symmetric=(SymKernel.TWO_SHOT_MULTICAST,)).unsupported(two) == (
        "NCCL multicasts only among more than two GPUs (hasLsaMultimem), and the node has 2")
    assert ONE_SHOT.unsupported(two) is None  # it has a kernel that does not multicast
    assert RING_KERNEL.unsupported(two) is None


def test_a_binding_runs_a_protocol_the_environment_leaves():
    ll128 = NcclEnv(proto="LL128")
    assert not NVLS_KERNEL.leaves_a_protocol(ll128, ALLREDUCE)  # NVLS runs Simple only
    assert RING_KERNEL.leaves_a_protocol(ll128, ALLREDUCE)
    assert NcclBinding().leaves_a_protocol(ll128, Collective.BROADCAST)  # the model has none
    simple = NcclEnv(proto="Simple")
    assert not ONE_SHOT.leaves_a_protocol(simple, ALLREDUCE)  # its kernels run LL
    assert NcclBinding(symmetric=(SymKernel.TWO_SHOT,)).leaves_a_protocol(simple, ALLREDUCE)
    assert ONE_SHOT.leaves_a_protocol(NcclEnv(proto="Simple", symmetric=True), ALLREDUCE)


def test_the_pick_problems_name_the_field():
    assert pick_problem(H100, 1024, ALLREDUCE, NcclEnv(), "dgx_h100") is None
    lone = machine(gpus_per_node=1)
    assert pick_problem(lone, 1024, ALLREDUCE, NcclEnv(), "dgx_h100") == (
        "algorithms", "expected a list of algorithms (or all): auto runs NCCL's pick, and NCCL "
                      "picks none on one rank (it copies the buffer) on topology dgx_h100")
    assert pick_problem(H100, 1024, ALLREDUCE, NcclEnv(algo="NVLSTree"), "dgx_h100") == (
        "nccl.algo", "expected a list that leaves NCCL's tuner an algorithm it can run on "
                     "topology dgx_h100 (Tree, Ring, NVLS), got 'NVLSTree'")
    assert pick_problem(H100, 1024, ALLREDUCE, NcclEnv(algo="NVLS", proto="LL"),
                          "dgx_h100") == (
        "nccl.proto", "expected a list that leaves NCCL's tuner a protocol for the algorithms "
                      "nccl.algo leaves on topology dgx_h100 (NVLS/Simple), got 'LL'")


def test_plan_point_plans_the_protocol_it_is_told_as_a_scenario_forcing_it_did():
    # tune and dist say the protocol to plan; they used to make a scenario with it forced
    scenario = scenario_from_dict({"topology": {"preset": "dgx_h100"}, "algorithms": ["ring"],
                                   "sizes": ["1MiB"]})
    setup = prepare(scenario)
    ring, size = setup.algorithms[0], 1 << 20
    told = plan_point(scenario, setup, ring, size, scenario.run, protocol=LL128)
    forced = replace(scenario, protocol=LL128)
    assert told.nccl == plan_point(forced, setup, ring, size, forced.run).nccl
    assert told.nccl is not None and told.nccl.protocol is LL128 and not told.nccl.picked
    assert told.model_s == plan_point(forced, setup, ring, size, forced.run).model_s
    own = plan_point(scenario, setup, ring, size, scenario.run).nccl  # NCCL's Ring/LL at 1 MiB
    assert own is not None and own.protocol is LL and own.picked
