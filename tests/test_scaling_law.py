"""The scaling-law benchmark's arithmetic and one real point (bench/scaling_law.py)."""

import math

import pytest

from bench.scaling_law import Point, exponent, fits, measure, scenario_for
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
    assert (by_ranks.sweep, by_ranks.algorithm) == ("ranks", "ring")
    assert (by_ranks.wall, by_ranks.messages, by_ranks.instants) == pytest.approx((1.0, 2.0, 1.0))
    assert (by_size.wall, by_size.messages, by_size.instants) == pytest.approx((0.0, 0.0, 0.0),
                                                                             abs=1e-12)


def test_a_ring_point_is_verified_and_counts_its_messages() -> None:
    point = measure("ranks", "ring", 64, 16 << 20)
    assert point.verified
    assert point.messages == 2 * 63 * 64  # 2(p-1) steps of p messages; 256 KiB chunks, one piece
    assert point.wall_s > 0


def test_ranks_must_fill_whole_hosts() -> None:
    with pytest.raises(SimulatorError, match=r"--ranks: expected multiples of 8 \(whole DGX "
                                             r"hosts\), got 60"):
        scenario_for(60, 1 << 20, "ring")
