"""The fidelity benchmark's arithmetic, and that the NCCL graphs assumed for each preset make
NCCL's cost model pick what NCCL is reported to pick there (bench/fidelity.py)."""

import math
import threading
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from bench.fidelity import (
    Facts,
    Glance,
    MultiNode,
    NodeRow,
    Row,
    ScaleRow,
    _cancel_on_error,
    compare_nodes,
    geomean_error,
    scale_glance,
    scale_table,
    simulate_pick,
    size_label,
    start_sweep,
)
from bench.fidelity import (
    main as fidelity_main,
)
from simulator import simulate
from simulator.calibration import derived, modelled_us
from simulator.measured.nccl_tests import load_measurements
from simulator.model.machine import Machine
from simulator.model.nccl import DEFAULT_GRAPHS, Arch, NcclAlgorithm, Protocol, System, choose
from simulator.scenario.parse import load_preset

RING, NVLS = NcclAlgorithm.RING, NcclAlgorithm.NVLS


def test_geomean_error_is_the_typical_factor_either_way():
    rows = [Row(1, "Ring/LL", 10.0, {"ideal": 20.0}), Row(2, "Ring/LL", 10.0, {"ideal": 5.0})]
    # |log 2| and |log 1/2| average to log 2: the two differ by a factor of 2, error 100 %
    assert geomean_error(rows, "ideal") == pytest.approx(1.0, rel=1e-12)
    assert geomean_error([Row(1, "NVLS/Simple", 400.0, {"nccl": 420.0})], "nccl") == pytest.approx(
        0.05, rel=1e-12)
    assert rows[0].ratio("ideal") == 2.0 and math.isclose(rows[1].ratio("ideal"), 0.5)


def test_a_multi_node_row_has_its_busbw_and_time_errors_each_way():
    # simulated 20 µs where 25 µs is measured: busbw 25 % too high, time 20 % too short
    row = NodeRow(8, NcclAlgorithm.TREE, "LL", 25.2, 25.0, 20.0, 1.875)
    assert row.busbw_error() == pytest.approx(0.25, rel=1e-12)
    assert row.time_error() == pytest.approx(-0.2, rel=1e-12)


def test_the_scale_check_holds_the_simulation_to_nccls_own_model():
    # 1 GiB on 64 GPUs (busbw factor 2·63/64): 6,000 µs in NCCL's model is 352.3 GB/s of busbw,
    # 6,600 simulated 320.3, a gap of 6000/6600 − 1 = −9.1 %. On 128 GPUs the model's 6,047.6 µs
    # keeps 352.3 GB/s; 7,500 simulated is 284.1 GB/s, a gap of 6047.6/7500 − 1 = −19.4 % and
    # 284.1/320.3 − 1 = −11.3 % from 8 nodes where the model falls 0 %: both targets fail
    rows = [ScaleRow(8, 1 << 30, "NVLSTree/Simple", 6000.0, 6600.0, 2 * 63 / 64),
            ScaleRow(16, 1 << 30, "NVLSTree/Simple", 6000.0 * 127 / 128 * 64 / 63, 7500.0,
                     2 * 127 / 128)]
    assert rows[0].busbw_GBps(6000.0) == pytest.approx(352.3, abs=0.05)
    assert rows[0].gap() == pytest.approx(6000 / 6600 - 1, rel=1e-12)
    text = scale_table(rows)
    assert "- worst gap to NCCL's model: **19.4 %** (target ≤ 10 %: not met);" in text
    assert "- 16 nodes against 8: simulated busbw -11.3 %, NCCL's model +0.0 % (not met)." in text
    assert "| 16 | 128 | NVLSTree/Simple |" in text
    # its line in the page's opening table: |log(6000/6600)| = 0.095 and |log(6047.6/7500)| =
    # 0.215 average to 0.156, a typical gap of e^0.156 − 1 = 16.8 %; the worst is 16 nodes'
    assert scale_glance(rows).line() == (
        "| NVIDIA | DGX H100, 400 Gb/s InfiniBand | NCCL's pick on 8-16 nodes, 1 GiB | "
        "NCCL 2.30.7's model | 16.8 % (2 node counts) | -19.4 % at 16 nodes | NCCL's own model; "
        "no measurement | from 8 to 16 nodes the simulated busbw moves -11.3 %, NCCL's model "
        "+0.0 % |")


def test_the_scale_check_takes_the_pipelines_fill_out_by_halving_the_pieces():
    # 8 nodes: 6,600 µs, 6,450 with half pieces, so a fill of 2 × 150 = 300 µs and 6,300 without;
    # 16 nodes: 7,500 and 7,050, a fill of 900 and 6,600 without. Busbw without the fill:
    # (2·127/128 / 6600) / (2·63/64 / 6300) − 1 = −3.8 %, where the model falls 0 %
    rows = [ScaleRow(8, 1 << 30, "NVLSTree/Simple", 6000.0, 6600.0, 2 * 63 / 64, 6450.0),
            ScaleRow(16, 1 << 30, "NVLSTree/Simple", 6000.0 * 127 / 128 * 64 / 63, 7500.0,
                     2 * 127 / 128, 7050.0)]
    assert [row.fill_free_us() for row in rows] == [6300.0, 6600.0]
    assert ScaleRow(8, 1 << 30, "Ring/Simple", 1.0, 2.0, 1.0).fill_free_us() is None
    text = scale_table(rows)
    assert "| 16 | 128 | NVLSTree/Simple | 6047.62 | 352.32 | 7500.00 | 284.09 | -19.4 % | " \
           "7050.00 | 6600.00 |" in text
    assert ("- 16 nodes against 8: simulated busbw -11.3 %, NCCL's model +0.0 % (not met); "
            "without the fill -3.8 %.") in text
    assert scale_glance(rows).line().endswith(
        "from 8 to 16 nodes the simulated busbw moves -11.3 %, NCCL's model +0.0 % (-3.8 % "
        "without the pipeline's fill, which NCCL's model does not charge) |")


def test_a_glance_line_gives_the_typical_error_the_worst_and_what_is_off():
    # 10 % fast and 10/11 of the measured: both a factor of 1.1 off, so 10.0 % typical; the
    # first is the worst
    glance = Glance(Facts("NVIDIA", "NVLink 4", "NCCL 2.30.7", "nothing known"), "8 × H200",
                    (("1 MiB", 0.1), ("2 MiB", 10 / 11 - 1)), "sizes", "as reported at 2 of 2")
    assert glance.line() == ("| NVIDIA | NVLink 4 | 8 × H200 | NCCL 2.30.7 | 10.0 % (2 sizes) | "
                             "+10.0 % at 1 MiB | as reported at 2 of 2 | nothing known |")
    assert [size_label(size) for size in (8, 512 << 10, 3 << 30, 1536 << 20, 1000)] == [
        "8 B", "512 KiB", "3 GiB", "1536 MiB", "1000 B"]


def test_the_h100_picks_are_the_reported_ones():
    # nccl-tests-h200.csv: "Ring/LL up to 1 MiB and NVLS/Simple from 2 MiB"
    h100 = System(ranks=8, nodes=1, arch=Arch.HOPPER, graphs=DEFAULT_GRAPHS[Arch.HOPPER])
    picks = [(size, choose(h100, size)) for size in (2**k for k in range(15, 35))]
    assert all((pick.algorithm, pick.protocol) == (RING, Protocol.LL) for size, pick in picks
               if size <= 1 << 20)
    assert all(pick.algorithm is NVLS for size, pick in picks if size >= 2 << 20)


def test_the_a100_picks_are_ring_as_nccl_runs_there():
    # NCCL runs ring on one DGX A100 at every size (the fidelity issue); its protocol goes from
    # LL through LL128 to Simple as the size grows
    a100 = System(ranks=8, nodes=1, arch=Arch.AMPERE, graphs=DEFAULT_GRAPHS[Arch.AMPERE])
    picks = [choose(a100, 2**k) for k in range(15, 34)]
    assert {pick.algorithm for pick in picks} == {RING}
    protocols = [pick.protocol for pick in picks]
    assert protocols == sorted(protocols, key=[Protocol.LL, Protocol.LL128, Protocol.SIMPLE].index)
    assert protocols[0] is Protocol.LL and protocols[-1] is Protocol.SIMPLE


REPO = Path(__file__).resolve().parent.parent


def errors(preset, log, gpus_per_thread=1):
    """size → closed-form time of NCCL's pick under the nccl model / measured time − 1, from
    32 KiB up (the closed forms equal the simulation for ring and NVLS on one node:
    tests/test_execution.py), one thread launching on ``gpus_per_thread`` GPUs; the busbw error
    is the inverse."""
    machine = Machine.of(load_preset(preset).build())
    machine = replace(machine, nccl=replace(machine.nccl, gpus_per_thread=gpus_per_thread))
    rows = [m for m in load_measurements(REPO / "docs" / "reference" / log).rows
            if m.size_bytes >= 32 << 10]
    times = modelled_us(machine, derived(machine), [m.size_bytes for m in rows])
    return {m.size_bytes: m.time_us / t - 1 for m, t in zip(rows, times, strict=True)}


def geomean(errs):
    return math.exp(sum(abs(math.log1p(e)) for e in errs) / len(errs)) - 1


def test_the_h200_sweep_meets_the_fidelity_targets():
    # the regression test of docs/fidelity.md's nccl column: the sweep's geometric mean error
    # (target ≤ 15 %), NVLS within 5 % from 1 GiB (target), and NCCL's reported picks
    errs = errors("dgx_h100", "nccl-tests-h200.csv")
    assert len(errs) == 20
    assert geomean(errs.values()) == pytest.approx(0.058, abs=0.001)
    assert max(abs(e) for size, e in errs.items() if size >= 1 << 30) < 0.02
    h100 = System(ranks=8, nodes=1, arch=Arch.HOPPER, graphs=DEFAULT_GRAPHS[Arch.HOPPER])
    reported = [(RING, Protocol.LL) if size <= 1 << 20 else (NVLS, Protocol.SIMPLE) for size in errs]
    picked = [(choose(h100, size).algorithm, choose(h100, size).protocol) for size in errs]
    assert picked == reported  # 20 of 20 sizes (target: 80 %)


def test_the_a100_ring_meets_the_large_size_target():
    # ring busbw within 5 % of nccl-tests from 256 MiB (target); the whole sweep is off by the
    # ~35 µs floor of this log's one process driving 8 GPUs, which `calibrate` fits (8 %)
    errs = errors("dgx_a100", "nccl-tests-a100.log")
    large = [e for size, e in errs.items() if size >= 256 << 20]
    assert len(large) == 6 and max(abs(e) for e in large) < 0.035
    assert geomean(errs.values()) == pytest.approx(0.44, abs=0.01)


def test_the_a100_sweep_with_one_thread_driving_its_8_gpus():
    # docs/fidelity.md's A100 nccl column (`-g 8`: gpus_per_thread 8, 7 launches of 2.86 µs):
    # 44 % → 10.8 % over the sweep; within 3 % from 256 MiB; 10.0 % from 1 MiB (target 8 %: the
    # LL and LL128 sizes stay 17-34 % fast)
    errs = errors("dgx_a100", "nccl-tests-a100.log", gpus_per_thread=8)
    assert geomean(errs.values()) == pytest.approx(0.108, abs=0.001)
    assert geomean([e for size, e in errs.items() if size >= 1 << 20]) == pytest.approx(
        0.100, abs=0.001)
    assert max(abs(e) for size, e in errs.items() if size >= 256 << 20) < 0.03
    # 32 KiB: 36.65 µs measured, 35.7 simulated (15.7 without the launches): busbw +2.7 % (the
    # page's +3.0 % is against the log's busbw, rounded to 1.56)
    assert errs[32 << 10] == pytest.approx(0.027, abs=0.001)


def test_a_sweep_in_worker_processes_gives_the_rows_of_one_run_alone(tmp_path):
    # the multi-node points run in a pool's worker processes (bench/fidelity.py --jobs): each
    # point is a run of its own, so the rows are those of the same points run here, one by one,
    # and each time is the plain simulation of NCCL's pick (2 × 8 H100, NCCL 2.26: Tree/LL at
    # 8 B and at 64 KiB)
    measured = tmp_path / "two-sizes.csv"
    measured.write_text("size_bytes,time_us,algbw_GBps,busbw_GBps,inplace_time_us\n"
                        "8,25.0,0.0,0.0,24.0\n65536,40.0,1.6,3.1,41.0\n")
    dataset = MultiNode("two sizes", str(measured), "dgx_h100", 2, "400Gbps", "1.1TB/s",
                        "NVLSTree", "", "2.26", verify=False, name="test",
                        facts=Facts("NVIDIA", "DGX H100", "NCCL 2.26.2", ""))
    with ProcessPoolExecutor(max_workers=2) as pool:
        pooled = start_sweep(dataset, pool).rows()
    alone = compare_nodes(dataset)
    assert pooled == alone
    assert [(row.size_bytes, row.pick, row.protocol) for row in alone] == [
        (8, NcclAlgorithm.TREE, "LL"), (65536, NcclAlgorithm.TREE, "LL")]
    assert [row.measured_us for row in alone] == [24.0, 40.0]  # the faster of the two columns
    plain = simulate({"topology": {"preset": "dgx_h100", "nodes": 2, "nic_bandwidth": "400Gbps"},
                      "algorithms": ["double_binary_tree"], "sizes": [8, 65536],
                      "nccl": {"version": "2.26"}, "gpu": {"reduce_bandwidth": "1.1TB/s"},
                      "execution": "nccl", "verify": False})
    assert [row.simulated_us for row in alone] == [t * 1e6 for t in plain.sim_time_s]
    assert alone[1].simulated_us == simulate_pick(dataset, NcclAlgorithm.TREE, 65536)


def test_the_page_wants_one_worker_or_more(capsys):
    with pytest.raises(SystemExit) as stopped:
        fidelity_main(["--jobs", "0"])
    assert stopped.value.code == 2
    assert ("--jobs: expected a whole number of worker processes, 1 or more, got 0"
            in capsys.readouterr().err)


def test_a_failing_page_drops_the_points_not_yet_run():
    # the page's exit callback: on an error the pool's queued points are cancelled at once
    # (none waits for the rest), and on success nothing is; one worker held busy by an event
    # keeps the second point queued, with no timing involved
    started, busy = threading.Event(), threading.Event()

    def hold() -> bool:
        started.set()
        return busy.wait()

    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(hold)
        queued = pool.submit(int, "7")
        started.wait()  # the worker holds the first point: the second is queued
        _cancel_on_error(pool)(None, None, None)
        assert not queued.cancelled()
        _cancel_on_error(pool)(ValueError, ValueError("a point failed"), None)
        assert queued.cancelled() and not first.cancelled()
        busy.set()
    assert first.result() is True
