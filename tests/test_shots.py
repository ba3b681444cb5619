"""One-shot and two-shot allreduce (simulator/algorithms/shots.py): exact closed-form times by
hand on a switch, verified data, both engines equal, refused across hosts; and NCCL's model of
its symmetric kernels (simulator/model/nccl_symmetric.py) against figures computed by hand."""

import pytest

from simulator import run_point, scenario_from_dict
from simulator.algorithms import Collective, get_algorithm
from simulator.errors import InputError
from simulator.model import nccl_symmetric as sym
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
    for name, kernel in (("one_shot", sym.SymKernel.ONE_SHOT), ("two_shot", sym.SymKernel.TWO_SHOT)):
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
    # one_shot runs LL, two_shot Simple: auto keeps a kernel only where nccl.proto leaves it
    scenario = scenario_from_dict({"topology": {"preset": "dgx_h100"}, "algorithms": "auto",
                                   "sizes": [4096], "nccl": {"proto": proto}})
    names = [algorithm.name for algorithm in prepare(scenario).algorithms]
    assert [name for name in names if name in ("one_shot", "two_shot")] == kept
