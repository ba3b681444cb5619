"""``run --resume`` (issue 23, item 6): a run killed with SIGKILL at a random point, then resumed,
ends with exactly the results file an uninterrupted run writes; a results file from another run
is refused with one line."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from simulator.cli import main

SCENARIO = """\
name: killed
topology: {kind: switch, ranks: 48, bandwidth: 25GB/s, latency: 500ns}
algorithms: [ring, halving_doubling]
sizes: [1MiB, 4MiB, 16MiB, 64MiB]
engine: simpy
"""
POINTS = 8


def write(tmp_path: Path, text: str = SCENARIO) -> Path:
    path = tmp_path / "killed.yaml"
    path.write_text(text)
    return path


def rows(csv: Path) -> int:
    """Data rows in a results file (0 before it exists)."""
    return len(csv.read_text().splitlines()) - 1 if csv.exists() else 0


def test_a_run_killed_at_a_random_point_resumes_to_the_same_file(tmp_path):
    scenario = write(tmp_path)
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main(["run", str(scenario), "--output", str(whole), "--no-plot", "--quiet"]) == 0
    kill_after = int(np.random.default_rng(23).integers(1, POINTS))  # 1 to 7 points written
    csv = part / "killed.csv"
    child = subprocess.Popen([sys.executable, "-m", "simulator", "run", str(scenario), "--output",
                              str(part), "--no-plot", "--quiet"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        while rows(csv) < kill_after and child.poll() is None:
            time.sleep(0.005)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    kept = rows(csv)
    assert 1 <= kept < POINTS  # killed part way, the file whole at the instant of the kill
    assert (part / ".killed.lock").exists()  # what a SIGKILL leaves: a file that holds nothing
    assert main(["run", str(scenario), "--output", str(part), "--no-plot", "--quiet",
                 "--resume"]) == 0
    for name in ("killed.csv", ".killed.resume"):  # the JSON names its own directory
        assert (part / name).read_bytes() == (whole / name).read_bytes(), name
    assert sorted(p.name for p in part.iterdir()) == [".killed.resume", "killed.csv",
                                                      "killed.json"]


def finished(tmp_path, capsys):
    """(scenario, output) of a run of every point on the vectorised engine, its words dropped."""
    scenario = write(tmp_path, SCENARIO.replace("engine: simpy", "engine: vector"))
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--output", str(out), "--no-plot", "--quiet"]) == 0
    capsys.readouterr()
    return scenario, out


def test_resuming_a_finished_run_runs_nothing_and_keeps_the_file(tmp_path, capsys):
    scenario, out = finished(tmp_path, capsys)
    before = (out / "killed.csv").read_bytes()
    assert main(["run", str(scenario), "--output", str(out), "--no-plot", "--resume"]) == 0
    assert (out / "killed.csv").read_bytes() == before
    assert "(8 kept from the stopped run)" in capsys.readouterr().err


def test_results_of_another_run_are_refused(tmp_path, capsys):
    scenario, out = finished(tmp_path, capsys)
    assert main(["run", str(scenario), "--output", str(out), "--no-plot", "--quiet", "--seed",
                 "7", "--resume"]) == 2
    assert capsys.readouterr().err == (
        f"{scenario}: --resume: cannot resume: {out / 'killed.json'} was written by another run "
        "(run.seed differs); run without --resume, or into another --output\n")


def test_rows_that_are_not_this_runs_first_points_are_refused(tmp_path, capsys):
    scenario, out = finished(tmp_path, capsys)
    lines = (out / "killed.csv").read_text().splitlines(keepends=True)
    (out / "killed.csv").write_text(lines[0] + lines[2])  # the first point left out
    assert main(["run", str(scenario), "--output", str(out), "--quiet", "--resume"]) == 2
    assert capsys.readouterr().err == (
        f"{scenario}: --resume: cannot resume: row 1 of {out / 'killed.csv'} is ring at 4MiB, "
        "not the point this run plans there\n")


def test_a_results_file_without_its_settings_is_refused(tmp_path, capsys):
    scenario, out = finished(tmp_path, capsys)
    (out / "killed.json").unlink()
    assert main(["run", str(scenario), "--output", str(out), "--quiet", "--resume"]) == 2
    assert capsys.readouterr().err == (
        f"{scenario}: --resume: cannot resume {out / 'killed.csv'}: its settings file "
        "killed.json is missing, so nothing says which run wrote it\n")


def test_resume_refuses_a_trace(tmp_path, capsys):
    scenario = write(tmp_path)
    assert main(["run", str(scenario), "--output", str(tmp_path / "o"), "--resume", "--trace",
                 str(tmp_path / "t.json")]) == 2
    assert capsys.readouterr().err == (
        "command line: --resume: expected no --trace with --resume: the points kept from the "
        "stopped run left no timeline\n")


def test_the_settings_file_says_where_the_results_went(tmp_path):
    # why two runs into two directories write the same CSV but settings files that differ
    scenario = write(tmp_path, SCENARIO.replace("engine: simpy", "engine: vector"))
    assert main(["run", str(scenario), "--output", str(tmp_path / "o"), "--no-plot",
                 "--quiet"]) == 0
    written = json.loads((tmp_path / "o" / "killed.json").read_text())
    assert written["scenario"]["output"] == str(tmp_path / "o")


def test_a_training_scenario_cannot_resume(tmp_path, capsys):
    path = tmp_path / "t.yaml"
    path.write_text("topology: {kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}\n"
                    "training: {model: resnet50, batch: 32}\n")
    assert main(["run", str(path), "--output", str(tmp_path / "o"), "--resume"]) == 2
    assert capsys.readouterr().err == (
        "command line: --resume: expected no --resume with a training scenario (its files are "
        "written once, at the end)\n")


def test_a_line_cut_while_it_was_appended_is_run_again(tmp_path, capsys):
    scenario, out = finished(tmp_path, capsys)
    whole = (out / "killed.csv").read_bytes()
    lines = whole.splitlines(keepends=True)
    (out / "killed.csv").write_bytes(b"".join(lines[:4]) + lines[4][:17])  # killed mid-write
    assert main(["run", str(scenario), "--output", str(out), "--no-plot", "--resume"]) == 0
    assert (out / "killed.csv").read_bytes() == whole
    assert "(3 kept from the stopped run)" in capsys.readouterr().err


def test_appending_point_by_point_writes_what_one_write_would(tmp_path):
    # every later point appends its line; the file equals the whole frame written at once
    from simulator.output.writers import to_csv
    from simulator.runner import simulate

    scenario, out = finished(tmp_path, _NoCapture())
    to_csv(simulate(scenario), tmp_path / "at-once.csv")
    assert (out / "killed.csv").read_bytes() == (tmp_path / "at-once.csv").read_bytes()


class _NoCapture:
    def readouterr(self):
        return None


def test_sigterm_stops_a_run_with_one_line_and_no_temporary_file(tmp_path):
    scenario = write(tmp_path)
    out = tmp_path / "out"
    child = subprocess.Popen([sys.executable, "-m", "simulator", "run", str(scenario), "--output",
                              str(out), "--no-plot", "--quiet"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    while rows(out / "killed.csv") < 2 and child.poll() is None:
        time.sleep(0.005)
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 143
    kept = rows(out / "killed.csv")
    assert err == (f"{scenario}: terminated (SIGTERM): {kept} of {POINTS} points written to "
                   f"{out / 'killed.csv'}\n")
    assert sorted(p.name for p in out.iterdir()) == [".killed.resume", "killed.csv",
                                                     "killed.json"]


def test_the_next_run_removes_what_a_kill_left_mid_write(tmp_path):
    scenario = write(tmp_path, SCENARIO.replace("engine: simpy", "engine: vector"))
    out = tmp_path / "out"
    out.mkdir()
    (out / ".killed.csv.1a2b3c4d.tmp").write_text("half a file")
    (out / ".other.csv.1a2b3c4d.tmp").write_text("not ours")
    assert main(["run", str(scenario), "--output", str(out), "--no-plot", "--quiet"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [".killed.resume", ".other.csv.1a2b3c4d.tmp",
                                                     "killed.csv", "killed.json"]


def test_a_new_run_leaves_no_figure_of_the_last_one_beside_its_results(tmp_path, capsys):
    # the figures and the report are drawn when a run ends: a run stopped before that must not
    # leave the last run's (or a Parquet file it did not ask for) beside its own results
    scenario = write(tmp_path, SCENARIO.replace("engine: simpy", "engine: vector"))
    out = tmp_path / "out"
    out.mkdir()
    for name in ("killed.png", "killed-crossover.png", "killed-reference.png", "killed.parquet",
                 "killed.html", "other.png"):
        (out / name).write_text("from the last run")
    assert main(["run", str(scenario), "--output", str(out), "--no-plot", "--quiet"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [".killed.resume", "killed.csv", "killed.json",
                                                     "other.png"]


def test_two_runs_into_one_directory_do_not_interleave(tmp_path, capsys):
    # another run holds the scenario's files (its lock, as a run's first point takes it): this
    # one is refused before it writes, and runs once the other has let go
    import fcntl

    scenario = write(tmp_path, SCENARIO.replace("engine: simpy", "engine: vector"))
    out = tmp_path / "out"
    out.mkdir()
    with (out / ".killed.lock").open("a") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert main(["run", str(scenario), "--output", str(out), "--no-plot", "--quiet"]) == 2
        assert capsys.readouterr().err == (
            f"{scenario}: output: another run is writing killed's results in {out}; wait for it "
            "to end, or give another --output\n")
        assert sorted(p.name for p in out.iterdir()) == [".killed.lock"]
    assert main(["run", str(scenario), "--output", str(out), "--no-plot", "--quiet"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [".killed.resume", "killed.csv",
                                                     "killed.json"]


# --- the kept rows are the rows this run wrote (issue 40, item 3) --------------------------------


def edit_time(csv: Path, row: int, value) -> None:
    """Data row ``row`` (from 1) of a results file with ``sim_time_s`` (column 9) made
    ``value(old)``, every other byte as it was."""
    lines = csv.read_text().splitlines(keepends=True)
    fields = lines[row].split(",")
    fields[8] = value(fields[8])
    lines[row] = ",".join(fields)
    csv.write_text("".join(lines))


def refused_edit(tmp_path, capsys, value) -> tuple[Path, Path, str]:
    """A finished run whose third row's time was edited, resumed: the exit code checked, the
    files checked untouched, and the scenario, output and stderr given back."""
    scenario, out = finished(tmp_path, capsys)
    edit_time(out / "killed.csv", 3, value)
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    assert main(["run", str(scenario), "--output", str(out), "--no-plot", "--resume"]) == 2
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before  # nothing written
    return scenario, out, capsys.readouterr().err


@pytest.mark.parametrize("value", [lambda old: repr(float(old) * 10), lambda old: "nan"],
                         ids=["x10", "nan"])
def test_a_kept_row_edited_since_its_run_wrote_it_is_refused(tmp_path, capsys, value):
    scenario, out, err = refused_edit(tmp_path, capsys, value)
    assert err == (
        f"{scenario}: --resume: cannot resume: row 3 of {out / 'killed.csv'} (ring at 16MiB) "
        "is not the row this run wrote (its digest is not in .killed.resume): it was edited; "
        "delete that row, or run without --resume\n")


def test_a_sweep_refuses_an_edited_row_as_run_does(tmp_path, capsys):
    scenario, out = finished(tmp_path, capsys)
    scenario.write_text(scenario.read_text() + f"output: {out}\n")
    assert main(["run", str(scenario), "--no-plot", "--quiet"]) == 0
    edit_time(out / "killed.csv", 3, lambda old: repr(float(old) * 10))
    capsys.readouterr()
    assert main(["sweep", str(scenario), "--resume", "--workers", "1", "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"{scenario}: --resume: cannot resume: row 3 of {out / 'killed.csv'} (ring at 16MiB) "
        "is not the row this run wrote (its digest is not in .killed.resume): it was edited; "
        "delete that row, or run without --resume\n")


@pytest.mark.parametrize("sidecar", ["missing", "of another version"])
def test_rows_without_a_digest_are_not_trusted(tmp_path, capsys, sidecar):
    scenario, out = finished(tmp_path, capsys)
    if sidecar == "missing":
        (out / ".killed.resume").unlink()
    else:
        (out / ".killed.resume").write_text("a digest file of some other format\n")
    before = (out / "killed.csv").read_bytes()
    assert main(["run", str(scenario), "--output", str(out), "--no-plot", "--resume"]) == 2
    assert capsys.readouterr().err == (
        f"{scenario}: --resume: cannot resume: row 1 of {out / 'killed.csv'} (ring at 1MiB) has "
        "no digest (.killed.resume is missing or not a digest file of this version), so "
        "nothing says this run wrote it; run without --resume\n")
    assert (out / "killed.csv").read_bytes() == before


def test_rows_removed_from_the_end_are_run_again_to_the_same_files(tmp_path, capsys):
    # and a digest written just before a kill, whose row never came, is harmless: the sidecar
    # ends as an uninterrupted run's
    scenario, out = finished(tmp_path, capsys)
    whole = {name: (out / name).read_bytes() for name in ("killed.csv", ".killed.resume")}
    lines = whole["killed.csv"].splitlines(keepends=True)
    (out / "killed.csv").write_bytes(b"".join(lines[:4]))  # 3 of 8 rows kept
    assert main(["run", str(scenario), "--output", str(out), "--no-plot", "--resume"]) == 0
    assert "(3 kept from the stopped run)" in capsys.readouterr().err
    assert {name: (out / name).read_bytes() for name in whole} == whole


def test_an_unedited_row_whose_neighbour_was_removed_is_still_refused_out_of_order(tmp_path,
                                                                                   capsys):
    # the digest vouches for the row's bytes, the plan for its place: both are checked
    scenario, out = finished(tmp_path, capsys)
    lines = (out / "killed.csv").read_text().splitlines(keepends=True)
    (out / "killed.csv").write_text(lines[0] + lines[2])
    assert main(["run", str(scenario), "--output", str(out), "--quiet", "--resume"]) == 2
    assert "is ring at 4MiB, not the point this run plans there" in capsys.readouterr().err


# --- no lock or temporary file left, however a run ends (issue 40, item 5) ----------------------


def hidden(directory: Path) -> list[str]:
    """The lock and temporary files in ``directory``."""
    return sorted(p.name for p in directory.iterdir() if p.suffix in (".lock", ".tmp"))


@pytest.mark.parametrize("failure", ["memory budget", "MemoryError", "algorithm failed"])
def test_a_run_ended_by_an_error_after_its_first_point_leaves_no_lock(tmp_path, capsys,
                                                                       monkeypatch, failure):
    # the second point ends the run: past the memory budget (exit 2), out of the process's
    # memory (a MemoryError, as under a memory rlimit), or an algorithm's bug (exit 1); the
    # first point, and its lock, were there
    from simulator.engine import executor
    from simulator.errors import AlgorithmError, OverBudget

    scenario = write(tmp_path, SCENARIO.replace("engine: simpy", "engine: vector"))
    out = tmp_path / "out"
    real, calls, seen = executor._run, [], []

    def second_fails(plan, buffers, recorder):
        calls.append(plan)
        if len(calls) == 2:
            seen.append(hidden(out))
            raise {"memory budget": OverBudget("messages in flight", 10, 9),
                   "MemoryError": MemoryError(),
                   "algorithm failed": AlgorithmError("ring: deadlock")}[failure]
        return real(plan, buffers, recorder)

    monkeypatch.setattr(executor, "_run", second_fails)
    assert main(["run", str(scenario), "--output", str(out), "--no-plot",
                 "--quiet"]) == (2 if failure == "memory budget" else 1)
    if failure == "MemoryError":  # one line, as the command line says it
        assert capsys.readouterr().err.endswith(
            "killed.yaml: out of memory: the machine could not give the run what it needed; "
            "files already written are complete (use fewer ranks or sizes, or a smaller "
            "--proxy-elements)\n")
    assert seen == [[".killed.lock"]]  # held while the second point ran
    assert sorted(p.name for p in out.iterdir()) == [".killed.resume", "killed.csv",
                                                     "killed.json"]
    assert rows(out / "killed.csv") == 1


def test_sigterm_at_the_first_point_on_disk_leaves_no_lock_or_temporary_file(tmp_path):
    # the child holds its lock from its first point: SIGTERM once that point (milliseconds) is
    # on disk lands in the second (seconds: 30,000 messages on the SimPy engine)
    scenario = write(tmp_path, SCENARIO.replace("ranks: 48", "ranks: 16").replace(
        "sizes: [1MiB, 4MiB, 16MiB, 64MiB]", "sizes: [1KiB, 128MiB]\npiece_size: 64KiB"))
    out = tmp_path / "out"
    child = subprocess.Popen([sys.executable, "-m", "simulator", "run", str(scenario), "--output",
                              str(out), "--no-plot", "--quiet"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: rows(out / "killed.csv") >= 1 or child.poll() is not None)
        assert hidden(out) == [".killed.lock"]
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=120)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 143, err
    assert hidden(out) == []
    assert sorted(p.name for p in out.iterdir()) == [".killed.resume", "killed.csv",
                                                     "killed.json"]


def wait_for(condition, timeout_s: float = 120.0) -> None:
    """Poll ``condition`` (a file on disk, a process gone) until it holds; fail after
    ``timeout_s`` (generous: a loaded 2-core machine)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_the_next_run_removes_a_lock_file_no_run_holds(tmp_path, capsys):
    # a SIGKILLed run's lock file holds nothing: the next run removes it, even one refused
    scenario, out = finished(tmp_path, capsys)
    (out / ".killed.lock").write_text("")
    edit_time(out / "killed.csv", 1, lambda old: "nan")
    assert main(["run", str(scenario), "--output", str(out), "--no-plot", "--quiet",
                 "--resume"]) == 2
    assert hidden(out) == []


def test_a_lock_file_another_run_holds_is_left_alone(tmp_path):
    import fcntl

    from simulator.output.files import remove_stale_lock

    with (tmp_path / ".s.lock").open("a") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        remove_stale_lock(tmp_path, "s")
        assert hidden(tmp_path) == [".s.lock"]
    remove_stale_lock(tmp_path, "s")
    assert hidden(tmp_path) == []
