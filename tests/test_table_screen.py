"""The table on one screen (issue 41): a line per size where several algorithms ran, every point
with ``--verbose``, and a line saying why for each point or size left out."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from simulator import simulate
from simulator.output.table import format_table
from simulator.plan import LeftOut

REPO = Path(__file__).resolve().parents[1]
SWITCH = {"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s", "latency": "1us"},
          "algorithms": ["ring", "direct", "halving_doubling"], "sizes": [1 << 10, 1 << 20],
          "verify": False}


@pytest.fixture(scope="module")
def frame():
    return simulate(SWITCH)


def _rows(table: str) -> list[list[str]]:
    """The table's lines of points (and of points left out): their first five fields."""
    return [line.split()[:5] for line in table.splitlines()
            if not line.startswith("#") and line.split()[2] == "float32"]


def test_one_screen_has_the_fastest_point_of_each_size_in_size_order(frame):
    table = format_table(frame, verbose=False)
    fastest = [frame[frame.size_bytes == size].sort_values("sim_time_s").iloc[0]
               for size in (1 << 10, 1 << 20)]
    assert [row[4] for row in _rows(table)] == [row.algorithm for row in fastest]
    assert [row[0] for row in _rows(table)] == ["1024", "1048576"]
    lines = table.splitlines()
    assert lines[1] == ("# one line per size: the fastest of 3 algorithms (6 points simulated: "
                        "--verbose prints each, the CSV holds them)")
    assert lines[-1] == "# --verbose: every point, its busiest link, the averages"
    assert not any(line.startswith("# Avg bus") for line in lines)
    block = next(n for n, line in enumerate(lines) if line.startswith("# Bottleneck per point"))
    assert [line.split()[1:3] for line in lines[block + 2:block + 4]] == [
        [str(row.size_bytes), row.algorithm] for row in fastest]  # of the lines shown


def test_verbose_is_every_point_with_its_bottleneck_and_the_averages(frame):
    table = format_table(frame, verbose=True)
    assert table == format_table(frame)  # the library's default: the whole table
    assert [(row[0], row[4]) for row in _rows(table)] == [
        (str(size), name) for name in ("ring", "direct", "halving_doubling")
        for size in (1 << 10, 1 << 20)]
    lines = table.splitlines()
    block = next(n for n, line in enumerate(lines) if line.startswith("# Bottleneck per point"))
    assert [line.split()[1:3] for line in lines[block + 2:block + 8]] == [
        [str(size), name] for name in ("ring", "direct", "halving_doubling")
        for size in (1 << 10, 1 << 20)]
    assert [line for line in table.splitlines() if line.startswith("# Avg bus")] == [
        f"# Avg bus bandwidth ({name}): {frame[frame.algorithm == name].busbw_GBps.mean():.2f} GB/s"
        for name in ("ring", "direct", "halving_doubling")]


def test_a_point_left_out_has_its_line_after_its_algorithms(frame):
    left = LeftOut(1 << 30, "execution: too big", "ring at 1GiB", "ring")
    rows = format_table(frame, verbose=True, left_out=(left,)).splitlines()
    at = rows.index("  1073741824   268435456  float32   sum               ring  left out: "
                    "execution: too big")
    assert rows[at - 1].split()[:5] == ["1048576", "262144", "float32", "sum", "ring"]
    assert rows[at + 1].split()[:5] == ["1024", "256", "float32", "sum", "direct"]


def test_on_one_screen_a_size_left_out_has_its_line_and_an_answered_size_none(frame):
    answered = LeftOut(1 << 10, "execution: no", "ring at 1KiB", "ring")
    nothing = LeftOut(1 << 15, "NCCL's model picks no algorithm on topology t", "no point at 32KiB")
    rows = _rows(format_table(frame, verbose=False, left_out=(answered, nothing)))
    assert [row[0] for row in rows] == ["1024", "32768", "1048576"]
    assert rows[1] == ["32768", "8192", "float32", "sum", "-"]
    assert "left out: NCCL's model picks no algorithm on topology t" in format_table(
        frame, verbose=False, left_out=(answered, nothing))


def test_auto_says_on_its_row_why_a_size_has_no_point(tmp_path):
    scenario = tmp_path / "lo.yaml"
    scenario.write_text("name: lo\ntopology: {preset: dgx_h100, nodes: 1}\nalgorithms: auto\n"
                        "protocol: Simple\nsizes: [1KiB, 64MiB]\nverify: false\n")
    proc = subprocess.run([sys.executable, "-m", "simulator", "run", str(scenario), "--output",
                           str(tmp_path / "out"), "--quiet"], cwd=REPO, capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (f"{scenario}: NCCL's pick at 1KiB (ring/LL) left out: protocol: NCCL "
                           f"runs it with LL, the scenario every point with Simple\n")
    lines = proc.stdout.splitlines()
    assert lines[3:5] == [
        "        1024         256  float32   sum               ring  left out: protocol: NCCL "
        "runs it with LL, the scenario every point with Simple",
        "    67108864    16777216  float32   sum               nvls      302.28      222.01      "
        "388.51      302.28    0.00      off"]
    assert not any(line.startswith("# --verbose") for line in lines)  # nothing is hidden
