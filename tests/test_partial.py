"""A run point by point (issue 10): what it says before it starts, the progress bar, results
kept as each point finishes, Ctrl-C, Parquet, and the Python API's frame against the CSV."""

import io
import json
import signal
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import simulator.runner
from simulator import simulate
from simulator.cli import main
from simulator.output.results import Result
from simulator.output.writers import WRITERS
from simulator.runner import checked_setup, outlook, plan_points
from simulator.scenario import load_scenario
from tests.conftest import REPO, runs_all

GOLDEN = "tests/data/dgx_small.yaml"

SMALL = ("name: small\ntopology: {kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}\n"
         "algorithms: [ring, direct]\nsizes: [4KiB, 64KiB, 1MiB]\n")
"""Six quick points: ring then direct, each at three sizes."""


def heeds_ctrl_c() -> None:
    """SIGINT at its default in a child, as in a terminal: a shell that starts the tests in the
    background (``make test &``) has them ignore it, and Python then leaves it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture(autouse=True)
def ctrl_c_heard():
    """The same for this process (Python's own handler), restored after each test."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.fixture
def small(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text(SMALL + f"output: {tmp_path / 'out'}\n")
    return path, tmp_path / "out"


def leftovers(directory):
    """Temporary files a write left behind (write_atomically's are hidden, ``.<name>.*.tmp``),
    and lock files."""
    return [path.name for path in directory.iterdir() if path.suffix in (".tmp", ".lock")]


def read_csv_as(path, frame):
    """The CSV read back with pandas into ``frame``'s dtypes: an empty field is NaN, but for
    the empty texts of ``protocol``, ``faults`` and ``mismatch``, and None where ``frame`` holds
    None (``nccl_pick`` under the ideal execution model)."""
    back = pd.read_csv(path, dtype=frame.dtypes.to_dict(), keep_default_na=False,
                       na_values={column: [""] for column in frame.columns
                                  if column not in ("protocol", "faults", "mismatch")})
    for column in [column for column in frame.columns if frame[column].dtype == np.dtype("O")]:
        back[column] = back[column].astype(object).where(back[column].notna(), None)
    return back


def interrupt_on_call(monkeypatch, number, interrupt):
    """Make the runner's point function call ``interrupt()`` instead of running its
    ``number``-th point."""
    calls = []
    real = simulator.runner.run_plan

    def run_plan(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == number:
            interrupt()
        return real(*args, **kwargs)

    monkeypatch.setattr(simulator.runner, "run_plan", run_plan)


def press_ctrl_c():
    raise KeyboardInterrupt


def test_ctrl_c_at_the_third_point_keeps_the_two_done(small, capsys, monkeypatch):
    path, out = small
    interrupt_on_call(monkeypatch, 3, press_ctrl_c)
    assert main(["run", str(path), "--quiet"]) == 130
    captured = capsys.readouterr()
    assert captured.err == f"{path}: interrupted: 2 of 6 points written to {out / 'small.csv'}\n"
    assert captured.out == ""  # no table for a run that did not finish
    written = pd.read_csv(out / "small.csv")
    expected = simulate(path).head(2)
    assert list(written.algorithm) == ["ring", "ring"]
    assert list(written.size_bytes) == [4096, 65536]
    pd.testing.assert_frame_equal(read_csv_as(out / "small.csv", expected), expected)
    assert json.loads((out / "small.json").read_text())["scenario"]["name"] == "small"
    assert sorted(p.name for p in out.iterdir()) == [".small.resume", "small.csv",
                                                     "small.json"]  # no figure yet
    assert leftovers(out) == []


def test_ctrl_c_before_the_first_point_writes_nothing(small, capsys, monkeypatch):
    path, out = small
    interrupt_on_call(monkeypatch, 1, press_ctrl_c)
    assert main(["run", str(path)]) == 130
    err = capsys.readouterr().err.splitlines()
    assert err[1:] == [f"{path}: interrupted: 0 of 6 points done, nothing written"]
    assert not out.exists()


def test_ctrl_c_during_a_write_is_held_until_every_results_file_has_the_point(small, capsys,
                                                                             monkeypatch):
    # a real SIGINT, delivered while the second point's Parquet file is being written (after
    # its CSV line was appended): the Parquet file still gets that point, and only then does
    # the run stop
    path, out = small
    real = WRITERS["parquet"]
    writes = []

    def write_parquet(results, scenario, run, where):
        writes.append(len(results))
        if len(writes) == 2:
            signal.raise_signal(signal.SIGINT)  # its handler has run when this returns
        real.results(results, scenario, run, where)

    monkeypatch.setitem(WRITERS, "parquet", replace(real, results=write_parquet))
    assert main(["run", str(path), "--quiet", "--format", "parquet"]) == 130
    assert capsys.readouterr().err == (f"{path}: interrupted: 2 of 6 points written to "
                                       f"{out / 'small.csv'} and {out / 'small.parquet'}\n")
    assert len(pd.read_csv(out / "small.csv")) == len(pd.read_parquet(out / "small.parquet")) == 2
    assert leftovers(out) == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


SLOW = ("name: slow\ntopology: {kind: switch, ranks: 16, bandwidth: 25GB/s, latency: 1us}\n"
        "algorithms: [ring]\nengine: simpy\npiece_size: 64KiB\nsizes: [1KiB, 128MiB, 256MiB]\n")
"""A first point done in milliseconds, then two of 30,000 and 60,000 messages on the SimPy
engine, which take seconds: a SIGINT sent once the first point is on disk lands in the second."""


def test_sigint_stops_a_run_with_one_line_and_keeps_the_finished_points(tmp_path):
    scenario = tmp_path / "slow.yaml"
    scenario.write_text(SLOW)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "simulator", "run", str(scenario), "--output",
                             str(out)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=heeds_ctrl_c)
    while not (out / "slow.csv").exists() and proc.poll() is None:  # the first point written
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.splitlines() == [
        f"{scenario}: 3 points to simulate (1 algorithm × 3 sizes); closed forms: 30.3ms of "
        "simulated time in all (not wall-clock time), longest ring at 256MiB (20.1ms)",
        f"{scenario}: interrupted: 1 of 3 points written to {out / 'slow.csv'}"]
    assert stdout == ""
    assert list(pd.read_csv(out / "slow.csv").size_bytes) == [1024]
    assert sorted(p.name for p in out.iterdir()) == [".slow.resume", "slow.csv", "slow.json"]


def test_ctrl_c_while_the_command_line_imports_is_one_line_and_130(monkeypatch, capsys):
    # a SIGINT landing before main can catch it, while `python -m simulator` still imports the
    # command line (a second or more on a loaded machine), was death by SIGINT after a
    # traceback (exit -2); it ends as any other Ctrl-C: one line, 130
    import importlib.abc
    import runpy

    class Interrupts(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "simulator.cli":
                raise KeyboardInterrupt  # where Python raises it for a signal in an import
            return None

    monkeypatch.delitem(sys.modules, "simulator.cli")
    monkeypatch.setattr(sys, "meta_path", [Interrupts(), *sys.meta_path])
    exited: BaseException | None = None
    try:
        runpy.run_module("simulator", run_name="__main__")
    except BaseException as error:  # not pytest.raises: an interrupt let out would stop pytest
        exited = error
    assert isinstance(exited, SystemExit) and exited.code == 130, exited
    assert capsys.readouterr().err == ("python -m simulator: interrupted; files already written "
                                       "are complete\n")


def test_the_line_before_a_run_counts_the_points_and_sums_their_closed_forms(small, capsys):
    path, _ = small
    assert main(["run", str(path), "--no-plot"]) == 0
    err = capsys.readouterr().err
    frame = simulate(path)
    assert err == (f"{path}: 6 points to simulate (2 algorithms × 3 sizes); closed forms: "
                   "182us of simulated time in all (not wall-clock time), longest ring at 1MiB "
                   "(74.9us)\n")
    # ring 12.25 + 15.93 + 74.91 us, direct 4.25 + 7.93 + 66.91 us (the table's model column)
    assert frame.model_time_s.sum() == pytest.approx(182.18e-6, abs=0.01e-6)
    assert frame.model_time_s.max() == pytest.approx(74.91e-6, abs=0.01e-6)


@pytest.mark.parametrize("source", [GOLDEN, "scenarios/dgx.yaml"])
def test_the_outlook_is_every_point_in_run_order_with_the_closed_form_its_row_gets(source):
    # dgx.yaml runs NCCL's execution model (protocols, channels, pipeline fill), the golden
    # scenario the ideal wire; the closed forms must be the very model_time_s of the rows
    scenario = load_scenario(REPO / source)
    if source != GOLDEN:
        scenario = replace(scenario, sizes=scenario.sizes[::3])
    setup = checked_setup(scenario, scenario.run)
    coming = outlook(scenario, setup, plan_points(scenario, setup, scenario.run))
    frame = simulate(scenario)
    assert [(p.algorithm, p.size_bytes) for p in coming.points] == list(
        zip(frame.algorithm, frame.size_bytes, strict=True))
    assert [p.model_time_s for p in coming.points] == list(frame.model_time_s)


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    def isatty(self):
        return True


@pytest.mark.parametrize("quiet", [False, True])
def test_the_progress_bar_is_drawn_on_a_terminal_unless_quiet(small, monkeypatch, quiet):
    path, _ = small
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["run", str(path), "--no-plot", *(["--quiet"] if quiet else [])]) == 0
    drawn = terminal.getvalue()
    if quiet:
        assert drawn == ""
    else:
        line, bar = drawn.split("\n", 1)
        assert line.startswith(f"{path}: 6 points to simulate")
        assert "| 0/6 [" in bar and "point" in bar  # redrawn at most every 0.1 s: 0/6 for sure
        assert bar.endswith("\r")  # then wiped, so the table follows on a clean screen


def test_no_progress_bar_when_stderr_is_not_a_terminal(small):
    path, _ = small
    proc = subprocess.run([sys.executable, "-m", "simulator", "run", str(path), "--no-plot"],
                          cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0
    assert proc.stderr.count("\n") == 1 and "\r" not in proc.stderr  # the one line, no bar
    quiet = subprocess.run([sys.executable, "-m", "simulator", "run", str(path), "--no-plot",
                            "--quiet"], cwd=REPO, capture_output=True, text=True, check=False)
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert quiet.stdout == proc.stdout


def test_parquet_holds_what_the_csv_holds_with_its_types(tmp_path):
    assert main(["run", GOLDEN, "--output", str(tmp_path), "--format", "json,parquet",
                 "--quiet"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [".dgx-small.resume", "dgx-small.csv",
                                                          "dgx-small.json", "dgx-small.parquet"]
    frame = simulate(GOLDEN)
    parquet = pd.read_parquet(tmp_path / "dgx-small.parquet")
    pd.testing.assert_frame_equal(parquet, frame)  # the types too: no parsing to guess them
    pd.testing.assert_frame_equal(read_csv_as(tmp_path / "dgx-small.csv", frame), parquet)


def test_parquet_without_pyarrow_is_one_line_naming_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if it were not installed
    assert main(["run", GOLDEN, "--output", str(tmp_path), "--format", "parquet"]) == 2
    assert capsys.readouterr().err == ("command line: --format: parquet needs pyarrow, which is "
                                       "not installed: pip install 'allreduce-sim[parquet]'\n")
    assert list(tmp_path.iterdir()) == []


def test_the_api_frame_is_the_csv_the_command_line_writes(tmp_path):
    scenario = load_scenario(REPO / GOLDEN)
    assert main(["run", GOLDEN, "--output", str(tmp_path), "--format", "csv", "--quiet"]) == 0
    frame = simulate(GOLDEN)  # a path ...
    pd.testing.assert_frame_equal(read_csv_as(tmp_path / "dgx-small.csv", frame), frame)
    pd.testing.assert_frame_equal(simulate(scenario), frame)  # ... a Scenario ...
    mapping = {"name": "dgx-small", "topology": {"preset": "dgx_h100", "nodes": 1},
               "algorithms": "all", "sizes": ["1KiB", "1MiB", "64MiB"], "dtype": "float32",
               "op": "sum", "execution": "ideal", "gpu": {"reduce_bandwidth": "1.1TB/s"}}
    pd.testing.assert_frame_equal(simulate(mapping), frame)  # ... or a mapping: one frame


@pytest.mark.registry
def test_run_points_streams_the_rows_of_simulate():
    points = simulator.runner.run_points(GOLDEN)
    first = next(points)
    assert isinstance(first, Result) and (first.algorithm, first.size_bytes) == ("ring", 1024)
    rest = list(points)
    # every algorithm that applies, by algorithm then size: 13 × 3 when it was written
    assert [(row.algorithm, row.size_bytes) for row in [first, *rest]] == [
        (name, size) for name in runs_all(GOLDEN) for size in (1 << 10, 1 << 20, 64 << 20)]
