"""Output files: atomic writes that respect the umask, and figures that leave matplotlib's global
state alone."""

import os
import stat
import subprocess
import sys

import pandas as pd
import pytest

from simulator.output.files import write_atomically
from tests.conftest import REPO


def test_a_failed_write_keeps_the_previous_file_and_leaves_nothing_behind(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("previous\n")

    def fails(tmp):
        tmp.write_text("half a fi")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        write_atomically(path, fails)
    assert path.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]


def test_a_new_file_gets_the_mode_the_umask_gives(tmp_path):
    previous = os.umask(0o027)
    try:
        write_atomically(tmp_path / "a.csv", lambda tmp: tmp.write_text("x\n"))
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "a.csv").stat().st_mode) == 0o640
    assert os.umask(previous) == previous  # write_atomically left the umask as it was


def test_plotting_leaves_the_backend_and_pyplot_alone(tmp_path):
    probe = f"""
import sys, matplotlib
before = matplotlib.get_backend()
from simulator import simulate
from simulator.output.plots import plot_results
frame = simulate({{"topology": {{"kind": "switch", "ranks": 2, "bandwidth": "1GB/s",
                  "latency": "1us"}}, "sizes": [8, 64]}})
plot_results(frame, __import__("pathlib").Path({str(tmp_path / "f.png")!r}))
print(before == matplotlib.get_backend(), "matplotlib.pyplot" in sys.modules)
"""
    proc = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True,
                          check=True, env={**os.environ, "MPLBACKEND": "svg"})
    assert proc.stdout.split() == ["True", "False"]
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_timing_only_table_says_off_and_has_no_proxy_footnote():
    from simulator import simulate
    from simulator.output.table import format_table

    frame = simulate({"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s",
                                   "latency": "1us"}, "algorithms": ["ring"],
                      "sizes": [1 << 30], "verify": False})
    table = format_table(frame)
    assert "verified on a proxy payload" not in table
    assert table.splitlines()[3].split()[-1] == "off"


def test_suffers_least_is_the_least_time_added_not_the_least_ratio():
    from simulator.output.table import _fault_table

    # fast: 10 -> 30 us (x3, +20 us); slow: 100 -> 150 us (x1.5, +50 us): fast suffers least
    frame = pd.DataFrame({"faults": ["straggler rank 3 +20us"] * 2, "size_bytes": [1024, 1024],
                          "algorithm": ["fast", "slow"], "healthy_time_s": [10e-6, 100e-6],
                          "sim_time_s": [30e-6, 150e-6], "fault_slowdown": [3.0, 1.5]})
    lines = _fault_table(frame, frame)
    assert lines[-2:] == ["# Suffers least per size (least time added; its slowdown beside it):",
                          "#       1024               fast +20.00 us (x3.000)"]
