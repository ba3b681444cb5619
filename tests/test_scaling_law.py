"""The scaling-law benchmark's arithmetic and a few real points (bench/scaling_law.py)."""

import math
from pathlib import Path

import pytest

from bench.scaling_law import (
    AUTO,
    Missed,
    Point,
    Task,
    exponent,
    fits,
    main,
    measure,
    measure_within,
    parse_args,
    scenario_for,
    tasks,
)
from simulator.errors import SimulatorError


def test_exponent_is_the_log_log_slope() -> None:
    xs = [64.0, 128.0, 256.0, 512.0]
    assert exponent(xs, [3 * x**2 for x in xs]) == pytest.approx(2.0, abs=1e-12)
    assert exponent(xs, [5.0 * x**0.5 for x in xs]) == pytest.approx(0.5, abs=1e-12)
    assert math.isnan(exponent([64.0], [1.0]))


def test_fits_one_per_sweep_and_algorithm() -> None:
    points = [Point("ranks", "ring", r, 1 << 20, r / 64, r * r, 2 * r, 1.0, True)
              for r in (64, 128, 256)]
    points += [Point("size", "ring", 256, s, 2.0, 1000, 10, 1.0, True) for s in (1 << 20, 1 << 22)]
    [by_ranks, by_size] = fits(points)
    assert (by_ranks.sweep, by_ranks.algorithm, by_ranks.fixed) == ("ranks", "ring", 1 << 20)
    assert (by_ranks.wall, by_ranks.messages, by_ranks.instants) == pytest.approx((1.0, 2.0, 1.0))
    assert (by_size.wall, by_size.messages, by_size.instants) == pytest.approx((0.0, 0.0, 0.0),
                                                                             abs=1e-12)
    assert by_size.fixed == 256


def test_a_fit_leaves_out_the_points_over_budget_and_says_which() -> None:
    points = [Point("nccl-gpus", AUTO, r, 1 << 30, r / 64, r, r, 1.0, True) for r in (64, 128)]
    points.append(Point("nccl-gpus", AUTO, 64, 1 << 28, 1.0, 1, 1, 1.0, True))
    missed = [Missed(Task("nccl-gpus", AUTO, 256, 1 << 30, "nccl"), "over", over_budget=True)]
    [gib, quarter] = fits(points, missed)
    assert (gib.fixed, gib.points, gib.left_out) == (1 << 30, 2, (256,))
    assert gib.wall == pytest.approx(1.0)
    assert (quarter.fixed, quarter.points, quarter.left_out) == (1 << 28, 1, ())
    assert math.isnan(quarter.wall)


def test_a_ring_point_is_verified_and_counts_its_messages() -> None:
    point = measure(Task("ranks", "ring", 64, 16 << 20))
    assert point.verified
    assert point.messages == 2 * 63 * 64  # 2(p-1) steps of p messages; 256 KiB chunks, one piece
    assert point.wall_s > 0
    assert point.pick == "ring"  # no protocol on the ideal wire


def test_a_child_counts_the_jumps_and_names_the_protocol() -> None:
    task = Task("nccl-size", "double_binary_tree", 16, 256 << 20, "nccl")
    point = measure_within(task, 120.0)
    assert isinstance(point, Point) and point.verified
    assert point.pick == "double_binary_tree/LL128"
    assert 0 < point.jumped < point.instants
    off = measure_within(task, 120.0, fast_forward=False)
    assert isinstance(off, Point) and off.jumped == 0
    assert (off.sim_s, off.instants) == (point.sim_s, point.instants)


def test_a_child_over_budget_is_stopped() -> None:
    missed = measure_within(Task("nccl-gpus", AUTO, 64, 1 << 30, "nccl", "dgx_h100_superpod"),
                            0.001)
    assert isinstance(missed, Missed) and missed.over_budget
    assert missed.reason == "over the 0.001 s budget"


def test_a_line_stops_at_its_first_point_over_budget(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    assert main(["--sweep", "nccl-gpus", "--gpus", "64", "128", "--budget", "0.001",
                 "--plot", str(tmp_path / "law.png")]) == 0  # over budget is no failure
    out = capsys.readouterr().out
    assert "stopped" in out and "(not run: 64 GPUs was over budget)" in out
    assert "left out (no measurement): 64 GPUs, 128 GPUs" in out
    assert not (tmp_path / "law.png").exists()  # nothing measured, nothing drawn


def test_a_child_reports_its_error() -> None:
    missed = measure_within(Task("ranks", "ring", 16, 1 << 20, preset="no_such_preset"), 60.0)
    assert isinstance(missed, Missed) and not missed.over_budget
    assert "no preset 'no_such_preset'" in missed.reason


def test_the_sweeps_run_alone() -> None:
    only = tasks(parse_args(["--sweep", "nccl-gpus", "--gpus", "64", "8192",
                             "--gpus-sizes", "256MiB", "1GiB"]))
    assert [(t.sweep, t.algorithm, t.ranks, t.size_bytes, t.execution, t.preset) for t in only] \
        == [("nccl-gpus", AUTO, r, s, "nccl", "dgx_h100_superpod")
            for s in (256 << 20, 1 << 30) for r in (64, 8192)]
    every = tasks(parse_args([]))
    assert [sweep for sweep in dict.fromkeys(t.sweep for t in every)] \
        == ["ranks", "size", "nccl-size", "nccl-gpus"]


def test_ranks_must_fill_whole_hosts() -> None:
    with pytest.raises(SimulatorError, match=r"--ranks: expected multiples of 8 \(whole DGX "
                                             r"hosts\), got 60"):
        scenario_for(60, 1 << 20, "ring")
