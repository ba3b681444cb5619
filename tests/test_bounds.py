"""The fabric's floor and the closed forms held to it (issue 38): the floor worked by hand on a
switch and on DGX H100 hosts, every registered algorithm's closed form that claims a bound at
or above it on every preset, and the channels' closed form that fell below it before."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.algorithms import ModelKind
from simulator.algorithms.channels import on_channels_s
from simulator.algorithms.registry import REGISTRY
from simulator.engine.plan import PointPlan
from simulator.errors import InputError
from simulator.model.collective import Collective
from simulator.model.floor import floor, floor_s, host_domains
from simulator.model.machine import Machine
from simulator.model.topology import switch
from simulator.output.training import buckets_frame
from simulator.plan import plan_point, prepare
from simulator.runner import run_point, settings_of
from simulator.scenario import scenario_from_dict
from simulator.trainer import train

TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"
PRESETS = sorted(path.stem for path in TOPOLOGIES.glob("*.yaml"))
TIMED = [(preset, execution) for preset in PRESETS for execution in ("ideal", "nccl")
         if execution == "ideal"
         or "\ncompute_capability:" in (TOPOLOGIES / f"{preset}.yaml").read_text()]
"""Every preset on the ideal wire, and under NCCL those that state what NCCL's model needs."""
GIB = 1 << 30
SIZES = (1 << 20, GIB)
ESTIMATES = {"nvls", "nvls_tree", "collnet_direct", "collnet_chain"}
MLP = {"name": "mlp", "layers": [
    {"name": "fc1", "params": {"fc1.weight": [256, 128]}, "backward": "1ms"},
    {"name": "fc2", "params": {"fc2.weight": [10, 256]}, "backward": "1ms"}]}


def busbw(collective: Collective, ranks: int, size: float, seconds: float) -> float:
    """nccl-tests' busbw (bytes/s) of ``size`` in ``seconds``."""
    return collective.busbw_factor(ranks) * size / seconds


def plans(preset: str, nodes: int, execution: str, collective: Collective,
          algorithms: list[str] | str = "all", **more: object) -> list[PointPlan]:
    """Every point of ``algorithms`` at :data:`SIZES` on ``nodes`` of ``preset``, planned as a
    run plans its rows; none where no algorithm of the collective applies."""
    try:
        scenario = scenario_from_dict({
            "name": "bounds", "topology": {"preset": preset, "nodes": nodes},
            "collective": collective.value, "sizes": list(SIZES), "algorithms": algorithms,
            "execution": execution, "verify": False, **more})
        setup = prepare(scenario)
    except InputError as error:
        assert "no " in str(error) and "applies" in str(error), str(error)
        return []
    settings = settings_of(scenario)
    planned = []
    for algorithm in setup.algorithms:
        for size in scenario.sizes:
            try:
                planned.append(plan_point(scenario, setup, algorithm, size, settings))
            except InputError:
                continue  # cannot run at this size: its chunks, or the protocol NCCL refuses
    return planned


def below_floor(planned: list[PointPlan]) -> list[str]:
    """Every bound closed form among ``planned`` below the floor of the machine it is timed on."""
    found = []
    for plan in planned:
        limit = floor_s(plan.cost.machine, plan.algorithm.collective, plan.size_bytes)
        if plan.algorithm.model_kind is ModelKind.BOUND and plan.model_s < limit * (1 - 1e-12):
            found.append(f"{plan.algorithm.name} at {plan.size_bytes}: {plan.model_s} < {limit}")
    return found


def test_floor_on_a_switch_by_hand():
    """4 GPUs of 1 GB/s each way on a switch, S = 4 GB: an allreduce 2·3/4·S over a GPU's
    1 GB/s (6 s), an allgather, a reduce-scatter, a broadcast and an all-to-all 3/4·S (3 s), a
    sendrecv its whole buffer out of every GPU (4 s); no host cut on one switch."""
    machine = Machine.of(switch(4, 1e9, 0.0))
    expected = {Collective.ALLREDUCE: 6.0, Collective.ALLGATHER: 3.0,
                Collective.REDUCE_SCATTER: 3.0, Collective.BROADCAST: 3.0,
                Collective.REDUCE: 3.0, Collective.ALLTOALL: 3.0, Collective.SENDRECV: 4.0}
    for collective, seconds in expected.items():
        found = floor(machine, collective, 4e9)
        assert (found.gpu_s, found.host_s) == (pytest.approx(seconds, rel=1e-15), 0.0)


def test_host_cut_of_dgx_h100_is_the_issues_450_and_403_gbps():
    """8 DGX H100 (8 × 50 GB/s NICs a host): the host cut holds an allreduce's busbw to
    400 · (2·63/64) / (2·7/8) = 450 GB/s; 128 of them (1,024 GPUs) to 400 · (2·1023/1024) /
    (2·127/128) = 402.8 GB/s. A GPU's links, 450 GB/s NVLink and 63 GB/s PCIe, with the
    NVSwitch reducing: S out and S in each, busbw 2(p−1)/p · 513 GB/s."""
    for preset, nodes, ceiling in (("dgx_h100", 8, 450e9),
                                   ("dgx_h100_superpod", 128, 400e9 * (2046 / 1024) / (254 / 128))):
        scenario = scenario_from_dict({"name": "cut", "sizes": ["1GiB"],
                                       "topology": {"preset": preset, "nodes": nodes}})
        machine = prepare(scenario, select=False).machine
        domains = host_domains(machine, machine.routing.capacities())
        assert domains.count == nodes and set(domains.out_Bps) == {400e9}
        found = floor(machine, Collective.ALLREDUCE, GIB)
        ranks = 8 * nodes
        assert busbw(Collective.ALLREDUCE, ranks, GIB, found.host_s) == pytest.approx(ceiling,
                                                                                       rel=1e-12)
        assert found.gpu_s == pytest.approx(GIB / 513e9, rel=1e-12)
        assert found.seconds == found.host_s


def test_estimates_are_the_closed_forms_documented_exact_nowhere():
    """``model_kind`` is data on each class: the four closed forms documented as estimates."""
    marked = {name for algorithms in REGISTRY.values() for name, algorithm in algorithms.items()
              if algorithm.model_kind is ModelKind.ESTIMATE}
    assert marked == ESTIMATES


@pytest.mark.parametrize(("preset", "execution"), TIMED)
def test_every_bound_closed_form_is_at_least_the_floor(preset, execution):
    """Every registered algorithm of every collective on one node of ``preset``, and every
    allreduce and the ring reduce-scatter and allgather on two (where NCCL's channels split
    the buffer, or each rank's chunk): each closed form claiming a bound is at or above the
    fabric's floor. A GB200 rack is 72 GPUs: on two of them, the allreduces whose closed forms
    stay cheap at 144 ranks."""
    planned = [plan for collective in Collective
               for plan in plans(preset, 1, execution, collective)]
    two = ["ring", "tree", "double_binary_tree", "halving_doubling", "swing", "nvls_tree"]
    planned += plans(preset, 2, execution, Collective.ALLREDUCE,
                     two if preset == "gb200_nvl72" else "all")
    for collective in (Collective.REDUCE_SCATTER, Collective.ALLGATHER):
        planned += plans(preset, 2, execution, collective, ["ring"])
    assert len(planned) >= 20
    assert below_floor(planned) == []


def test_tree_on_eight_dgx_h100_is_held_at_the_host_cut():
    """The issue's Tree (``double_binary_tree``, NCCL's kernel) on 8 DGX H100 at 1 GiB under
    NCCL, 8 channels: one channel alone on 1/8 of the buffer said 501 GB/s busbw, past the
    host cut's 432 GB/s (400 GB/s of NICs a host as NCCL's charges rate them: 384 GB/s); the
    closed form is now the floor, plus NCCL's start."""
    [plan] = [plan for plan in plans("dgx_h100", 8, "nccl", Collective.ALLREDUCE,
                                     ["double_binary_tree"]) if plan.size_bytes == GIB]
    assert plan.channels == 8
    alone = on_channels_s(plan.algorithm, plan.cost, GIB // 4, 8) + plan.start_s
    assert busbw(Collective.ALLREDUCE, 64, GIB, alone) == pytest.approx(501.3e9, rel=1e-3)
    limit = floor(plan.cost.machine, Collective.ALLREDUCE, GIB)
    assert limit.seconds == limit.host_s
    assert busbw(Collective.ALLREDUCE, 64, GIB, limit.seconds) == pytest.approx(432e9,
                                                                                   rel=1e-12)
    assert plan.model_s == limit.seconds + plan.start_s


def test_32_channel_ring_on_1024_gpus_is_held_at_the_host_cut():
    """The larger case: a ring on 32 channels over 128 DGX H100 (1,024 GPUs) at 1 GiB under
    NCCL. One channel alone, on 1/32 of the buffer and every link to itself, says more than
    the NICs carry; the closed form is at least the host cut."""
    [plan] = [plan for plan in plans("dgx_h100_superpod", 128, "nccl", Collective.ALLREDUCE,
                                     ["ring"], channels=32, engine="simpy")
              if plan.size_bytes == GIB]
    limit = floor_s(plan.cost.machine, Collective.ALLREDUCE, GIB)
    alone = on_channels_s(plan.algorithm, plan.cost, GIB // 4, 32)
    assert alone < limit
    assert plan.model_s == max(alone, limit) + plan.start_s
    assert below_floor([plan]) == []


def test_results_rows_say_what_their_closed_form_is():
    """The ``model_kind`` column: ``bound`` for a ring, ``estimate`` for NVLS."""
    scenario = scenario_from_dict({"name": "kind", "topology": {"preset": "dgx_h100"},
                                   "algorithms": ["ring", "nvls"], "sizes": ["1MiB"]})
    assert run_point(scenario, "ring", 1 << 20).model_kind == "bound"
    assert run_point(scenario, "nvls", 1 << 20).model_kind == "estimate"


def test_training_buckets_say_what_their_closed_form_is():
    """A training step's buckets carry the column too: a ring's allreduce is a bound."""
    training = train({"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s",
                                   "latency": "1us"},
                      "algorithms": ["ring"],
                      "training": {"model": MLP, "batch": 8, "optimizer": "1ms"}})
    frame = buckets_frame(training)
    assert list(frame.columns)[-1] == "model_kind"
    assert len(frame) >= 1 and set(frame.model_kind) == {"bound"}
