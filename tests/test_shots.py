"""One-shot and two-shot allreduce (simulator/algorithms/shots.py): exact closed-form times by
hand on a switch, verified data, both engines equal, refused across hosts; and NCCL's model of
its symmetric kernels (simulator/model/nccl_symmetric.py) against figures computed by hand."""

import numpy as np
import pandas as pd
import pytest

from simulator import run_point, scenario_from_dict, simulate
from simulator.algorithms import Collective, get_algorithm
from simulator.errors import InputError
from simulator.model import nccl_symmetric as sym
from simulator.model.reduction import ReduceOp
from simulator.runner import prepare

US = 1e-6


def switch_point(name: str, engine: str, size: int, dtype: str = "float32"):
    scenario = scenario_from_dict({
        "topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s", "latency": "500ns"},
        "sizes": [size], "engine": engine, "dtype": dtype,
        "gpu": {"reduce_bandwidth": "100GB/s", "launch_latency": "1us"}})
    return run_point(scenario, get_algorithm(Collective.ALLREDUCE, name), size)


@pytest.mark.parametrize("engine", ["simpy", "vector"])
def test_one_shot_on_a_switch_of_4_by_hand(engine):
    # alpha = 2 x 500 ns = 1 us; every up- and downlink carries 3 whole buffers of 4000 B at
    # 25/3 GB/s: 12000 B / 25 GB/s = 0.48 us; then 3 reductions of 4000 B queue on each GPU:
    # 3 x (1 us + 4000 B / 100 GB/s) = 3.12 us. T = 1 + 0.48 + 3.12 = 4.6 us.
    result = switch_point("one_shot", engine, 4000)
    assert result.verified is True and result.max_abs_error == 0
    assert result.sim_time_s == pytest.approx(4.6 * US, rel=1e-12)
    assert result.model_time_s == pytest.approx(4.6 * US, rel=1e-12)


@pytest.mark.parametrize("engine", ["simpy", "vector"])
def test_two_shot_on_a_switch_of_4_by_hand(engine):
    # c = 4000 B / 4 = 1000 B. Reduce-scatter: 1 us + 3 x 1000 B / 25 GB/s = 1.12 us, then
    # 3 x (1 us + 1000 B / 100 GB/s) = 3.03 us of reductions; allgather: 1 us + 0.12 us.
    # T = 1.12 + 3.03 + 1.12 = 5.27 us.
    result = switch_point("two_shot", engine, 4000)
    assert result.verified is True and result.max_abs_error == 0
    assert result.sim_time_s == pytest.approx(5.27 * US, rel=1e-12)
    assert result.model_time_s == pytest.approx(5.27 * US, rel=1e-12)


def test_one_shot_and_two_shot_give_the_same_times_on_both_engines_with_uneven_sizes():
    for name in ("one_shot", "two_shot"):
        simpy, vector = (switch_point(name, engine, 4 * 4001) for engine in ("simpy", "vector"))
        assert simpy.verified and vector.verified
        assert simpy.sim_time_s == vector.sim_time_s == pytest.approx(simpy.model_time_s,
                                                                        rel=1e-12)


@pytest.mark.parametrize("name", ["one_shot", "two_shot"])
def test_refused_across_hosts(name):
    scenario = scenario_from_dict({"topology": {"preset": "dgx_h100", "nodes": 2},
                                   "algorithms": [name], "sizes": [4096]})
    machine = prepare(scenario, select=False).machine
    reason = get_algorithm(Collective.ALLREDUCE, name).unsupported(machine)
    assert reason == "it runs inside one node (one NVLink domain), and the ranks sit on 2 hosts"
    with pytest.raises(InputError, match=f"'{name}' cannot run on topology"):
        prepare(scenario)


def test_one_dgx_runs_both():
    scenario = scenario_from_dict({"topology": {"preset": "dgx_h100"},
                                   "algorithms": ["one_shot", "two_shot"], "sizes": [1 << 20]})
    setup = prepare(scenario)
    for algorithm in setup.algorithms:
        result = run_point(scenario, algorithm, 1 << 20, setup=setup)
        assert result.verified is True


def test_nccl_symmetric_model_on_hopper_by_hand():
    gib_us = (1 << 30) / 1e6                     # NCCL's GBps: bytes per µs in 1 GiB/s
    # two-shot, 8 GPUs, 16 MiB: busBytes = 2·n·7/8; 64 blocks give 64 x 65 GiB/s, far above the
    # 320 GiB/s peak, so bw = 320 GiB/s (softmin within 1e-12 there) and busBytes/bw ≫ 100.
    n = 16 << 20
    expected = 7.8 + 2 * n * 7 / 8 / (320 * gib_us) - 1
    assert sym.model_us(sym.SymKernel.TWO_SHOT, 8, n, 64) == pytest.approx(expected, rel=1e-12)
    assert sym.bus_bytes(sym.SymKernel.ONE_SHOT, 8, 1024) == 8 * 1024 * 9
    assert sym.constants(sym.SymKernel.ONE_SHOT) == (4.5, 65 * gib_us, 320 * gib_us)
    assert sym.constants(sym.SymKernel.TWO_SHOT, blackwell=True) == (19.5, 55 * gib_us,
                                                                     600 * gib_us)


def test_nccl_picks_the_fewest_blocks_within_2_5_percent():
    # 1 KiB on 8 GPUs: two-shot's 1792 bus bytes take ~0 µs past baseLat on any block count,
    # so one block is within 2.5 %; 16 MiB needs the peak: 320/65 -> 7 blocks (the softmin's
    # knee makes 6 blocks 5.8 % slower than 64).
    assert sym.choose(sym.SymKernel.TWO_SHOT, 8, 1024)[0] == 1
    blocks, time = sym.choose(sym.SymKernel.TWO_SHOT, 8, 16 << 20)
    assert blocks == 7 and time == pytest.approx(94.334009, rel=1e-6)
    assert sym.choose(sym.SymKernel.ONE_SHOT, 8, 1024) == (2, pytest.approx(4.989549, rel=1e-6))


@pytest.mark.parametrize("engine", ["simpy", "vector"])
def test_under_nccl_execution_one_dgx_h100_times_them_as_nccl_s_model(engine):
    # NVLink at the rate NCCL's model gives the blocks it picks, one-shot's scaled by
    # (p-1)/(9p) for the bytes it moves; the start is baseLat plus the model's smoothing: the
    # simulated time, the closed form and nccl_time_s all equal NCCL's modelled time.
    # On the NVSwitch, which multicasts, the one-shot NCCL launches is AGxLLMC_R, rated 1.1x.
    for name, kernel in (("one_shot", sym.SymKernel.ONE_SHOT_MULTICAST),
                         ("two_shot", sym.SymKernel.TWO_SHOT)):
        for size in (1 << 10, 16 << 20):
            scenario = scenario_from_dict({"topology": {"preset": "dgx_h100"}, "sizes": [size],
                                           "algorithms": [name], "execution": "nccl",
                                           "engine": engine})
            setup = prepare(scenario)
            result = run_point(scenario, setup.algorithms[0], size, setup=setup)
            nccl_us = sym.choose(kernel, 8, size)[1]
            assert result.verified is True
            assert result.sim_time_s * 1e6 == pytest.approx(nccl_us, rel=1e-12)
            assert result.model_time_s * 1e6 == pytest.approx(nccl_us, rel=1e-12)
            assert result.nccl_time_s * 1e6 == pytest.approx(nccl_us, rel=1e-12)
            assert result.nccl_pick is False
    # two-shot at 16 MiB by hand: 7 blocks, 94.334 us (test above); one-shot at 1 KiB: 4.99 us
    assert sym.choose(sym.SymKernel.TWO_SHOT, 8, 16 << 20)[1] == pytest.approx(94.334009, rel=1e-6)


@pytest.mark.parametrize("proto, kept", [("LL128", []), ("Simple", ["two_shot"]),
                                         ("LL", ["one_shot"])])
def test_nccl_proto_leaves_a_kernel_out_with_its_protocol(proto, kept):
    # one_shot runs LL, two_shot Simple: all keeps a kernel only where nccl.proto leaves it
    scenario = scenario_from_dict({"topology": {"preset": "dgx_h100"}, "algorithms": "all",
                                   "sizes": [4096], "nccl": {"proto": proto}})
    names = [algorithm.name for algorithm in prepare(scenario).algorithms]
    assert [name for name in names if name in ("one_shot", "two_shot")] == kept


K = sym.SymKernel


def test_nccl_weighs_its_four_symmetric_allreduce_kernels_smaller_blocks_first():
    # 8 Hopper GPUs. AGxLLMC_R at 1 KiB: 8 x 1024 x 9 bus bytes at softmin(2 x 65 x 1.1, 320)
    # GiB/s on 2 blocks; NCCL prefers it to AGxLL_R (4.9895 us, 2 blocks) by its 1.1x rating
    assert sym.pick(tuple(K), 8, 1 << 10) == sym.SymPick(K.ONE_SHOT_MULTICAST, 2,
                                                         pytest.approx(4.971397, rel=1e-6))
    # at 4 KiB AGxLL_R is faster (5.1878 us on 5 blocks), but time x (1 + 2.5 % a block) favours
    # the multicast one on 4: 5.2302 x 1.100 < 5.1878 x 1.125
    assert sym.choose(K.ONE_SHOT, 8, 4096) == (5, pytest.approx(5.187819, rel=1e-6))
    assert sym.pick(tuple(K), 8, 4096).kernel is K.ONE_SHOT_MULTICAST
    # above 16 KiB the multicast two-shot: n/p + n bus bytes at 8 x 65 GiB/s a block, at most
    # ceil(16/8) = 2 blocks, peak 480 GiB/s; 16 MiB: 2 blocks, 43.422 us. 16 KiB + 1 B is rated
    # as 17 KiB: 8.1243 us on 1 block beats the one-shot's 7.3387 us on 6 by the SM penalty
    # (8.3274 < 8.4396)
    assert sym.pick(tuple(K), 8, 16 << 10) == sym.SymPick(K.ONE_SHOT_MULTICAST, 6,
                                                          pytest.approx(7.130936, rel=1e-6))
    assert sym.choose(K.ONE_SHOT_MULTICAST, 8, (16 << 10) + 1) == (
        6, pytest.approx(7.338743, rel=1e-6))
    assert sym.pick(tuple(K), 8, (16 << 10) + 1) == sym.SymPick(
        K.TWO_SHOT_MULTICAST, 1, pytest.approx(8.124277, rel=1e-6))
    assert sym.pick(tuple(K), 8, 24 << 10).kernel is K.TWO_SHOT_MULTICAST
    # Blackwell (8 x B200): the multicast one-shot up to 51 KiB, then the multicast two-shot
    assert sym.pick(tuple(K), 8, 51 << 10, blackwell=True) == sym.SymPick(
        K.ONE_SHOT_MULTICAST, 10, pytest.approx(16.210973, rel=1e-6))
    assert sym.pick(tuple(K), 8, (51 << 10) + 1, blackwell=True) == sym.SymPick(
        K.TWO_SHOT_MULTICAST, 1, pytest.approx(19.848973, rel=1e-6))
    assert sym.max_blocks(K.TWO_SHOT_MULTICAST, 8) == 2
    assert sym.max_blocks(K.TWO_SHOT_MULTICAST, 8, blackwell=True) == 4
    assert sym.pick(tuple(K), 8, 16 << 20) == sym.SymPick(K.TWO_SHOT_MULTICAST, 2,
                                                          pytest.approx(43.421992, rel=1e-6))
    # without multicast (no NVLS): AGxLL_R up to 16 KiB, then RSxLD_AGxST
    plain = (K.ONE_SHOT, K.TWO_SHOT)
    assert sym.pick(plain, 8, 16 << 10) == sym.SymPick(K.ONE_SHOT, 7,
                                                       pytest.approx(7.094602, rel=1e-6))
    assert sym.pick(plain, 8, (16 << 10) + 1) == sym.SymPick(K.TWO_SHOT, 1,
                                                             pytest.approx(8.252566, rel=1e-6))
    assert sym.pick(plain, 8, 24 << 10) == sym.SymPick(K.TWO_SHOT, 1, pytest.approx(8.322705,
                                                                                    rel=1e-6))
    # bus bytes in NCCL's integer arithmetic; sizes rated in whole 1 KiB cells
    assert sym.bus_bytes(K.TWO_SHOT, 3, 1000) == 1333
    assert sym.bus_bytes(K.TWO_SHOT_MULTICAST, 3, 1000) == 1333
    assert sym.model_us(K.TWO_SHOT, 8, 1000, 1) == sym.model_us(K.TWO_SHOT, 8, 1024, 1)
    # no LL kernel from 2 GiB (32-bit element counts), none at all from 64 GiB
    assert sym.pick((K.ONE_SHOT, K.ONE_SHOT_MULTICAST), 8, 2 << 30) is None
    assert sym.pick(tuple(K), 8, 2 << 30).kernel is K.TWO_SHOT_MULTICAST
    assert sym.pick(tuple(K), 8, 64 << 30) is None


def test_the_size_limits_apply_to_the_size_in_whole_cells():
    # ncclSymkPickKernel masks the kernels on the cell-aligned count (symmetric_sched.cc
    # countMax): 2 GiB - 512 B is rated as 2 GiB, so no LL kernel; 64 GiB - 512 B none at all
    # (NCCL falls back to its tuner), 64 GiB - 1 KiB still the multicast two-shot
    assert sym.cells((2 << 30) - 512) == 2 << 30
    assert sym.pick((K.ONE_SHOT, K.ONE_SHOT_MULTICAST), 8, (2 << 30) - 512) is None
    assert sym.pick((K.ONE_SHOT,), 8, (2 << 30) - 1024).kernel is K.ONE_SHOT
    assert sym.pick(tuple(K), 8, (64 << 30) - 512) is None
    assert sym.pick(tuple(K), 8, (64 << 30) - 1024).kernel is K.TWO_SHOT_MULTICAST
    machine = prepare(scenario_from_dict({"topology": {"preset": "dgx_h100"},
                                          "sizes": [1024]})).machine
    with pytest.raises(ValueError) as error:
        sym.symmetric_charges(machine, (K.ONE_SHOT,), (2 << 30) - 512)
    assert str(error.value) == (
        "NCCL runs no AllReduce_AGxLL_R for 2147483136 bytes (LL kernels count in 32-bit ints "
        "below 2147483648 bytes, the others below 68719476736, the size in whole 1024-byte "
        "cells)")


def _symmetric(preset: str, sizes: list[int], algorithms: str = "all", **more: object):
    return simulate({"topology": {"preset": preset}, "algorithms": algorithms, "sizes": sizes,
                     "nccl": {"symmetric": True}, **more})


def test_registered_buffers_make_nccl_pick_its_symmetric_kernel():
    sizes = [1 << 10, 64 << 10, 16 << 20]
    frame = _symmetric("dgx_h100", sizes)
    picks = frame[frame.nccl_pick.astype(bool)]
    assert list(zip(picks.size_bytes, picks.algorithm, picks.protocol, strict=True)) == [
        (1 << 10, "one_shot", "LL"), (64 << 10, "two_shot_multicast", "Simple"),
        (16 << 20, "two_shot_multicast", "Simple")]
    for pick in picks.itertuples():
        assert pick.nccl_time_s * 1e6 == pytest.approx(
            sym.pick(tuple(K), 8, pick.size_bytes).time_us, rel=1e-12)
    assert frame.verified.all()
    # the legacy tuner's choice is no longer the pick; unregistered, it is (ring LL at 1 KiB)
    ring = frame[(frame.algorithm == "ring") & (frame.size_bytes == 1 << 10)]
    assert not ring.nccl_pick.iloc[0]
    plain = simulate({"topology": {"preset": "dgx_h100"}, "algorithms": "auto", "sizes": [1024]})
    assert list(plain[plain.nccl_pick.astype(bool)].algorithm) == ["ring"]
    # auto runs the symmetric kernel NCCL launches, alone, as all's pick rows (issue 36)
    auto = _symmetric("dgx_h100", sizes, "auto")
    pd.testing.assert_frame_equal(auto, picks.reset_index(drop=True))


def test_no_nvls_means_the_plain_kernels_and_float64_means_the_tuner():
    frame = _symmetric("dgx_a100", [1 << 10, 16 << 20])
    picks = frame[frame.nccl_pick.astype(bool)]
    assert list(zip(picks.size_bytes, picks.algorithm, strict=True)) == [
        (1 << 10, "one_shot"), (16 << 20, "two_shot")]
    assert "two_shot_multicast" not in set(frame.algorithm)  # no in-switch reduction on A100
    # NCCL has no symmetric float64 kernel: its tuner picks as without registration
    frame = _symmetric("dgx_h100", [1 << 10], dtype="float64")
    assert list(frame[frame.nccl_pick.astype(bool)].algorithm) == ["ring"]


@pytest.mark.parametrize("engine", ["simpy", "vector"])
def test_two_shot_multicast_closed_form(engine):
    # ideal wire, one DGX H100 (NVLink 450 GB/s and 300 ns a hop, the NVSwitch reduces in 25 us):
    # at 1 MiB each shard is one piece, T = 2(2 x 300 ns) + 25 us + 2 x 9 x 128 KiB / 450 GB/s
    def point(size: int, execution: str):
        scenario = scenario_from_dict({"topology": {"preset": "dgx_h100"}, "sizes": [size],
                                       "algorithms": ["two_shot_multicast"],
                                       "execution": execution, "engine": engine})
        setup = prepare(scenario)
        return run_point(scenario, setup.algorithms[0], size, setup=setup)

    result = point(1 << 20, "ideal")
    assert result.verified is True and result.max_abs_error == 0
    expected = 1.2e-6 + 25e-6 + 2 * 9 * (128 << 10) / 450e9
    assert result.sim_time_s == pytest.approx(expected, rel=1e-12)
    assert result.model_time_s == pytest.approx(expected, rel=1e-12)
    # 64 MiB: 16 pieces a shard; the loads all posted at once share each uplink, so the stores
    # come later than the flow shop says: a lower bound, 1.34x under
    result = point(64 << 20, "ideal")
    assert result.sim_time_s / result.model_time_s == pytest.approx(1.3415, rel=1e-3)
    # under execution: nccl a one-piece shard is NCCL's model but for the program's two stages
    # and the wire: the model's 1-block bandwidth, softmin(8 x 65, 480) GiB/s = 505 GB/s, is
    # more than NVLink's 450 GB/s, which the plan keeps
    result = point(64 << 10, "nccl")
    assert result.nccl_time_s * 1e6 == pytest.approx(sym.pick(tuple(K), 8, 64 << 10).time_us)
    assert result.sim_time_s / result.nccl_time_s == pytest.approx(1.0215, rel=1e-3)
    result = point(1 << 20, "nccl")  # one piece a shard still, the loads then the stores
    assert result.sim_time_s / result.nccl_time_s == pytest.approx(1.2977, rel=1e-3)


def test_two_shot_multicast_needs_a_reducing_switch_and_nccl_three_gpus():
    machine = prepare(scenario_from_dict({"topology": {"preset": "dgx_a100"},
                                          "sizes": [1024]})).machine
    algorithm = get_algorithm(Collective.ALLREDUCE, "two_shot_multicast")
    assert algorithm.unsupported(machine) == (
        "it needs one switch with in-switch reduction (reduction: true) cabled to every GPU, "
        "such as the NVSwitch of a single dgx_h100 node")
    two = prepare(scenario_from_dict({"topology": {"preset": "dgx_h100", "gpus_per_node": 2},
                                     "sizes": [1024]}))
    assert algorithm.nccl.unsupported(two.machine) == (
        "NCCL multicasts only among more than two GPUs (hasLsaMultimem), and the node has 2")


@pytest.mark.parametrize("value, message", [
    ("yes", "nccl.symmetric: expected true (the buffers are registered as symmetric windows) or "
            "false, got 'yes'"),
])
def test_nccl_symmetric_must_be_a_boolean(value, message):
    with pytest.raises(InputError) as error:
        scenario_from_dict({"topology": {"preset": "dgx_h100"}, "sizes": [1024],
                            "nccl": {"symmetric": value}})
    assert message in str(error.value)


def test_nccl_symmetric_needs_the_version_it_models():
    with pytest.raises(InputError) as error:
        scenario_from_dict({"topology": {"preset": "dgx_h100"}, "sizes": [1024],
                            "nccl": {"symmetric": True, "version": "2.26"}})
    assert ("nccl.symmetric: expected nccl.version 2.30 or 2.31 with symmetric: true: the "
            "symmetric kernels modelled are those of NCCL 2.30 or 2.31 (src/sym_kernels.cc), got "
            "version 2.26"
            in str(error.value))


def test_a_plan_rated_above_the_wire_runs_at_the_wire_on_a_dgx_a100():
    # NCCL rates the A100's two-shot with Hopper's constants: on 7 blocks at 1 MiB
    # softmin(7 x 65, 320, 65) = 312.379 GiB/s = 335.414 GB/s, above NVLink's 300 GB/s, so the
    # 2 x 1 MiB x 7/8 bus bytes take 1835008 x (1/300e9 - 1/335.414e9) s = 0.6458 us longer
    scenario = scenario_from_dict({"topology": {"preset": "dgx_a100"}, "sizes": [1 << 20],
                                   "algorithms": ["two_shot"], "execution": "nccl"})
    setup = prepare(scenario)
    result = run_point(scenario, setup.algorithms[0], 1 << 20, setup=setup)
    assert sym.choose(K.TWO_SHOT, 8, 1 << 20) == (7, pytest.approx(12.282248, rel=1e-6))
    assert result.nccl_time_s * 1e6 == pytest.approx(12.282248, rel=1e-6)
    assert (result.sim_time_s - result.nccl_time_s) * 1e6 == pytest.approx(0.645818, rel=1e-5)
    assert result.model_time_s == pytest.approx(result.sim_time_s, rel=1e-12)


@pytest.mark.parametrize("symmetric", [False, True])
def test_one_rank_has_no_nccl_pick_and_no_model_time(symmetric):
    # NCCL copies a lone rank's buffer (ncclLaunchOneRank) before its tuner or its symmetric
    # kernels: no pick, and the tuner's model (whose nsteps 2(p-1) is 0) gives no time; this
    # once raised ZeroDivisionError under execution: nccl
    frame = simulate({"topology": {"preset": "dgx_h100", "gpus_per_node": 1},
                      "algorithms": ["ring", "one_shot"], "sizes": [1024],
                      "nccl": {"symmetric": symmetric}})
    assert list(frame.algorithm) == ["ring", "one_shot"]
    assert frame.verified.all() and (frame.sim_time_s == 0).all()
    assert not frame.nccl_pick.any()
    assert frame.nccl_time_s.isna().tolist() == [True, False]  # one_shot: its own model


@pytest.mark.parametrize("collective", ["allgather", "reduce_scatter"])
def test_nccl_symmetric_is_refused_where_its_kernels_are_not_modelled(collective):
    with pytest.raises(InputError) as error:
        scenario_from_dict({"topology": {"preset": "dgx_h100"}, "sizes": [1024],
                            "collective": collective, "nccl": {"symmetric": True}})
    assert (f"nccl.symmetric: expected false for {collective}: on registered buffers NCCL runs "
            "its symmetric allgather and reduce-scatter kernels, which are not modelled (the "
            "allreduce's are)" in str(error.value))


def test_symmetric_kernels_need_every_gpu_a_direct_nvlink_peer():
    from dataclasses import replace

    def machine(kind: str):
        topology = {"kind": kind, "ranks": 4, "bandwidth": "25GB/s", "latency": "1us"}
        built = prepare(scenario_from_dict({"topology": topology, "sizes": [1024]})).machine
        return replace(built, nvlinks=2)  # as a topology stating its GPUs' NVLinks would

    assert sym.symmetric_path(machine("switch")) is None
    assert sym.symmetric_path(machine("ring")) == (
        "they need every GPU a direct NVLink peer of every other, and rank 0 reaches rank 2 "
        "through GPU gpu1")
    assert sym.symmetric_pick(machine("ring"), 1024, "float32", ReduceOp.SUM) is None


def test_auto_runs_the_shot_traces_vectorised_with_simpys_times_to_the_bit():
    # one_shot and two_shot_multicast have no builder; engine: auto runs their traces on the
    # vectorised engine (Algorithm.trace_vectorised: the faster there), which must give the
    # times SimPy gives, to the bit, under both executions and with a GPU's reduction cost
    for execution in ("ideal", "nccl"):
        scenario = {"topology": {"preset": "dgx_h100"}, "execution": execution,
                    "algorithms": ["one_shot", "two_shot_multicast"],
                    "sizes": [4000, 64 << 20], "gpu": {"reduce_bandwidth": "1.1TB/s"}}
        auto, simpy = (simulate({**scenario, "engine": engine}) for engine in ("auto", "simpy"))
        assert list(auto.engine) == ["vector"] * 4 and list(simpy.engine) == ["simpy"] * 4
        np.testing.assert_array_equal(auto.sim_time_s, simpy.sim_time_s)
        assert auto.verified.all() and simpy.verified.all()
