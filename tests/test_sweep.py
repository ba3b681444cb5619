"""Sweeps on Dask (simulator.sweep): the same rows as a serial run, failed points reported with
their parameters while the others are kept, and the command line around it."""

import pandas as pd
import pytest

from simulator import simulate
from simulator.cli import main
from simulator.scenario import scenario_from_dict
from simulator.sweep import QUIET, Failure, sweep
from tests.conftest import runs_all

SWITCH = {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s", "latency": "1us"}


@pytest.mark.registry
def test_a_sweep_gives_the_rows_of_serial_runs_in_their_order():
    scenarios = [
        scenario_from_dict({"name": "flat", "topology": SWITCH, "sizes": [4096, 1 << 20],
                            "op": "max"}),
        scenario_from_dict({"name": "dgx", "topology": {"preset": "dgx_h100", "nodes": 2,
                                                        "gpus_per_node": 2},
                            "algorithms": ["ring", "hierarchical"], "sizes": [65536]}),
    ]
    done = sweep(scenarios, workers=2, progress=False)
    assert done.failures == ()
    for scenario, frame in zip(scenarios, done.frames, strict=True):
        pd.testing.assert_frame_equal(frame, simulate(scenario))
    assert len(done.frames[0]) == 2 * len(runs_all(scenarios[0]))  # all that apply, 2 sizes


def test_a_sweep_runs_the_points_run_runs_auto_picks_and_all_left_out_with_notes():
    # issue 36: auto's points are NCCL's picks, and all leaves out a point that cannot run at
    # its size (an all-to-all of 4 elements on 3 ranks), said in a note as run says it
    auto = scenario_from_dict({"name": "auto", "topology": {"preset": "dgx_h100"},
                               "algorithms": "auto", "sizes": [32768, 8 << 20]}, source="a.yaml")
    a2a = scenario_from_dict({"name": "a2a", "topology": {**SWITCH, "ranks": 3},
                              "collective": "alltoall", "sizes": [12, 16]}, source="b.yaml")
    done = sweep([auto, a2a], workers=1, progress=False)
    assert done.failures == ()
    for scenario, frame in zip([auto, a2a], done.frames, strict=True):
        pd.testing.assert_frame_equal(frame, simulate(scenario))
    assert list(done.frames[0].algorithm) == ["ring", "nvls"]
    assert done.notes == tuple(
        f"b.yaml: {name} at 16B left out: sizes: '{name}' cuts each rank's buffer into 3 equal "
        "chunks: expected sizes that are multiples of 12 bytes (3 float32 elements), got 16"
        for name in ("direct", "pairwise"))


DECLINED = ("expected auto or simpy for 'double_binary_tree': its 2 threads per rank reduce at "
            "once on a GPU with a reduction cost, whose queue only the SimPy engine orders")


def test_a_failed_point_is_reported_and_the_others_kept():
    scenario = scenario_from_dict({"name": "mixed", "topology": SWITCH, "engine": "vector",
                                   "algorithms": ["ring", "double_binary_tree"],
                                   "gpu": {"reduce_bandwidth": "40GB/s"}, "sizes": [4096, 8192]})
    done = sweep([scenario], workers=1, progress=False)
    assert list(done.frames[0].algorithm) == ["ring", "ring"]
    assert done.failures == (Failure("mixed", "double_binary_tree", 4096, DECLINED, True),
                             Failure("mixed", "double_binary_tree", 8192, DECLINED, True))
    assert str(done.failures[0]) == f"mixed: double_binary_tree at 4096 bytes failed: {DECLINED}"


def test_the_sweep_command_writes_each_scenario_and_exits_as_run_on_a_failed_point(tmp_path,
                                                                                  capsys):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(f"topology: {{kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}}\n"
                    f"algorithms: [ring]\nsizes: [4096]\noutput: {tmp_path / 'out-good'}\n")
    bad.write_text(f"topology: {{kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}}\n"
                   f"algorithms: [ring, double_binary_tree]\nsizes: [4096]\nengine: vector\n"
                   f"gpu: {{reduce_bandwidth: 40GB/s}}\noutput: {tmp_path / 'out-bad'}\n")
    code = main(["sweep", str(good), str(bad), "--workers", "2", "--no-progress", "--no-plot"])
    out, err = capsys.readouterr()
    assert code == 2  # the point's input is at fault: run stops there with 2 too
    assert main(["run", str(bad), "--output", str(tmp_path / "run-bad"), "--quiet"]) == 2
    assert err == f"bad: double_binary_tree at 4096 bytes failed: {DECLINED}\n"
    assert len(pd.read_csv(tmp_path / "out-good" / "good.csv")) == 1
    assert list(pd.read_csv(tmp_path / "out-bad" / "bad.csv").algorithm) == ["ring"]
    assert out.count("# results: ") == 2


def test_two_scenarios_writing_to_one_directory_are_refused_before_running(tmp_path, capsys):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    for path in (first, second):
        path.write_text(f"name: same\ntopology: {{kind: switch, ranks: 2, bandwidth: 1GB/s, "
                        f"latency: 1us}}\nsizes: [64]\noutput: {tmp_path / 'out'}\n")
    assert main(["sweep", str(first), str(second), "--no-progress"]) == 2
    assert capsys.readouterr().err == (f"{second}: output: expected its own directory, but "
                                       f"{first} also writes to {tmp_path / 'out'}\n")


def test_an_unreachable_scheduler_is_one_line(tmp_path, capsys):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("topology: {kind: switch, ranks: 2, bandwidth: 1GB/s, latency: 1us}\n"
                        f"sizes: [64]\noutput: {tmp_path / 'out'}\n")
    assert main(["sweep", str(scenario), "--scheduler", "tcp://127.0.0.1:9", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sweep: scheduler: no Dask scheduler answers at 'tcp://127.0.0.1:9': ")
    assert err.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("workers", ["0", "-1"])
def test_workers_must_be_positive(tmp_path, capsys, workers):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("topology: {kind: switch, ranks: 2, bandwidth: 1GB/s, latency: 1us}\n"
                        f"sizes: [64]\noutput: {tmp_path / 'out'}\n")
    assert main(["sweep", str(scenario), "--workers", workers]) == 2
    assert capsys.readouterr().err == (f"command line: --workers: expected a whole number ≥ 1, "
                                       f"got {workers}\n")


@pytest.mark.parametrize("address", ["udp://1.2.3.4:1", "tcp://host:notaport", "::::", "tcp://",
                                     "tcp://h:99999"])
def test_a_malformed_scheduler_address_is_one_line(tmp_path, capsys, address):
    path = tmp_path / "s.yaml"
    path.write_text(f"topology: {{kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}}\n"
                    f"sizes: [1KiB]\noutput: {tmp_path / 'out'}\n")
    assert main(["sweep", str(path), "--scheduler", address, "--no-progress"]) == 2
    assert capsys.readouterr().err == (f"sweep: scheduler: expected an address like "
                                       f"tcp://host:8786, got {address!r}\n")
    assert not (tmp_path / "out").exists()


def test_ctrl_c_keeps_the_finished_points_and_says_how_many(tmp_path):
    # a sweep stopped part way writes the points that finished (it used to lose them all while
    # saying the files were complete). Ctrl-C comes once the progress bar, drawn at every point
    # (TQDM_MININTERVAL=0), counts the first point done, not after a fixed sleep (under load it
    # could land while the package was still importing, or the cluster starting); the 1 and 2
    # GiB points take far longer (half a million messages each on the SimPy engine), so the
    # small ones are what is kept
    import os
    import re
    import signal
    import subprocess
    import sys

    path = tmp_path / "slow.yaml"
    path.write_text(f"topology: {{kind: switch, ranks: 16, bandwidth: 25GB/s, latency: 1us}}\n"
                    f"algorithms: [ring]\nengine: simpy\npiece_size: 64KiB\n"
                    f"sizes: [1KiB, 2KiB, 1GiB, 2GiB]\noutput: {tmp_path / 'out'}\n")
    child = subprocess.Popen([sys.executable, "-m", "simulator", "sweep", str(path), "--workers",
                              "2", "--no-plot"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env={**os.environ, "TQDM_MININTERVAL": "0", "TQDM_MINITERS": "1"},
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert child.stderr is not None
    seen = b""
    while b"| 1/4 [" not in seen:  # the bar once the first point's outcome is taken
        chunk = os.read(child.stderr.fileno(), 65536)
        assert chunk, seen.decode()  # the sweep ended before its first point
        seen += chunk
    child.send_signal(signal.SIGINT)
    _, rest = child.communicate(timeout=120)
    err = (seen + rest).decode()
    assert child.returncode == 130, err
    # its last line says it (a loaded machine may add Dask's warnings about its own ports and
    # heartbeats above it, which are not the sweep's), and no traceback of the cancelled work
    said = re.fullmatch(r"sweep: interrupted after (\d) of 4 points; those finished are "
                        r"written", err.splitlines()[-1])
    assert said is not None and "Traceback" not in err, err
    finished = int(said[1])
    kept = list(pd.read_csv(tmp_path / "out" / "slow.csv").size_bytes)
    assert len(kept) == finished and set(kept) <= {1024, 2048}, kept  # one or both small ones


def test_a_sweep_resumes_from_the_points_it_kept_whatever_their_order(tmp_path, capsys):
    # a stopped sweep keeps the points that finished, which need not be the first: resuming
    # runs only the others and writes the very file a whole run writes
    path = tmp_path / "s.yaml"
    path.write_text(f"topology: {{kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}}\n"
                    f"algorithms: [ring, direct]\nsizes: [4096, 65536]\n"
                    f"output: {tmp_path / 'out'}\n")
    assert main(["run", str(path), "--no-plot", "--quiet"]) == 0
    csv = tmp_path / "out" / "s.csv"
    whole = csv.read_bytes()
    lines = whole.splitlines(keepends=True)
    csv.write_bytes(lines[0] + lines[2] + lines[4])  # the 2nd and 4th points only
    assert main(["sweep", str(path), "--resume", "--workers", "1", "--no-progress",
                 "--no-plot"]) == 0
    assert csv.read_bytes() == whole
    lines = whole.splitlines(keepends=True)
    csv.write_bytes(lines[0] + lines[4] + lines[2])  # out of the plan's order: not this sweep's
    capsys.readouterr()
    assert main(["sweep", str(path), "--resume", "--workers", "1", "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"{path}: --resume: cannot resume: row 2 of {csv} is ring at 64KiB, not a point this "
        "sweep plans after the rows before it\n")


# --- workers that die -----------------------------------------------------------------------------


@pytest.fixture
def cluster():
    """A local cluster of its own, for the sweep to reach with --scheduler: one worker of 600 MB
    (the nanny kills it at 95 %, as it kills any worker past its memory limit), its scheduler
    giving a point up at the first worker it kills."""
    import dask
    from dask.distributed import LocalCluster

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        local = LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                             memory_limit="600MB", **QUIET)
    yield local
    local.close()


def test_a_point_that_kills_its_worker_fails_alone_and_the_others_are_written(tmp_path, capsys,
                                                                               cluster):
    # 512 MiB of float64 on 4 ranks, all of it verified (--proxy-elements 2^26): 2 GiB of inputs
    # in a 600 MB worker, which the nanny kills, as the kernel kills a process out of memory
    path = tmp_path / "hog.yaml"
    path.write_text(f"topology: {{kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}}\n"
                    f"algorithms: [ring]\ndtype: float64\nsizes: [1KiB, 512MiB]\n"
                    f"output: {tmp_path / 'out'}\n")
    assert main(["sweep", str(path), "--scheduler", cluster.scheduler_address, "--no-progress",
                 "--no-plot", "--proxy-elements", str(1 << 26)]) == 1
    assert capsys.readouterr().err == ("hog: ring at 536870912 bytes failed: 1 Dask worker died "
                                       "running it (killed for the memory it took, or crashed)\n")
    assert list(pd.read_csv(tmp_path / "out" / "hog.csv").size_bytes) == [1024]


def test_a_sweep_with_no_worker_left_stops_and_keeps_what_it_has(tmp_path, capsys, monkeypatch):
    # A scheduler whose workers are all gone (here: never there) used to leave the sweep waiting
    # for ever; it now stops after NO_WORKERS_S, names the points not run, and writes the
    # points it has (here the two a stopped run kept, resumed)
    from dask.distributed import LocalCluster

    monkeypatch.setattr("simulator.sweep.NO_WORKERS_S", 1.0)
    monkeypatch.setattr("simulator.sweep.POLL_S", 0.2)
    path = tmp_path / "s.yaml"
    path.write_text(f"topology: {{kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}}\n"
                    f"algorithms: [ring, direct]\nsizes: [4096, 65536]\n"
                    f"output: {tmp_path / 'out'}\n")
    assert main(["run", str(path), "--no-plot", "--quiet"]) == 0
    csv = tmp_path / "out" / "s.csv"
    lines = csv.read_bytes().splitlines(keepends=True)
    csv.write_bytes(lines[0] + lines[1] + lines[4])  # the 1st and 4th points only
    capsys.readouterr()
    empty = LocalCluster(n_workers=0, processes=True, **QUIET)
    try:
        assert main(["sweep", str(path), "--resume", "--scheduler", empty.scheduler_address,
                     "--no-progress", "--no-plot"]) == 1
    finally:
        empty.close()
    assert capsys.readouterr().err == (
        "sweep: no Dask worker left for 1 s: 2 points (s: ring at 65536 bytes, s: direct at 4096 "
        "bytes) not run; those finished are written\n")
    assert csv.read_bytes() == lines[0] + lines[1] + lines[4]


def test_a_worker_that_dies_as_the_cluster_starts_is_one_line(tmp_path, capsys):
    # A worker that dies before it is up (here a preload in the Dask configuration that exits,
    # as a broken environment would) made LocalCluster raise, and the sweep traceback
    import dask

    die = tmp_path / "die.py"
    die.write_text("import os\nos._exit(3)\n")
    path = tmp_path / "s.yaml"
    path.write_text(f"topology: {{kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}}\n"
                    f"sizes: [4096]\noutput: {tmp_path / 'out'}\n")
    with dask.config.set({"distributed.worker.preload": [str(die)]}):
        assert main(["sweep", str(path), "--workers", "1", "--no-progress"]) == 1
    err = capsys.readouterr().err  # Dask's own words in the middle, folded onto the line
    assert err.startswith("sweep: the local Dask cluster did not start: RuntimeError: Nanny ")
    assert err.endswith("; nothing ran\n") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_the_local_cluster_gives_a_point_up_after_two_worker_deaths():
    from simulator.sweep import ALLOWED_FAILURES, _close, _dask, _local

    cluster, client = _local(_dask([]), 1)
    try:
        assert cluster.scheduler.allowed_failures == ALLOWED_FAILURES == 1
    finally:
        _close(client, cluster)


def test_ctrl_c_while_the_local_cluster_starts_is_taken_once_it_is_up(monkeypatch):
    # Ctrl-C in the middle of LocalCluster(...) left Dask a cluster with its workers still
    # starting, whose close at exit failed with a traceback below the sweep's one line (seen on
    # a loaded machine): the interrupt is held until the cluster is up, which is then closed
    import dataclasses
    import os
    import signal

    import simulator.sweep as module

    started, real_dask = [], module._dask

    def dask(scenarios):
        real = real_dask(scenarios)

        def start(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGINT)  # the handler runs at once, in this thread
            started.append(real.LocalCluster(*args, **kwargs))
            return started[-1]

        return dataclasses.replace(real, LocalCluster=start)

    monkeypatch.setattr(module, "_dask", dask)
    scenario = scenario_from_dict({"topology": SWITCH, "sizes": [4096]})
    # Python's own handler, as in a terminal: a shell that starts the tests in the background
    # (nohup, `make test &`) has SIGINT ignored, and the sweep holds only a handler it knows
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            sweep([scenario], workers=1, progress=False)
        assert [cluster.status.name for cluster in started] == ["closed"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    finally:
        signal.signal(signal.SIGINT, before)


def test_output_puts_each_scenario_in_a_directory_of_its_name(tmp_path, capsys):
    # over the scenario's own output: as run's --output
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(f"topology: {{kind: switch, ranks: 2, bandwidth: 1GB/s, latency: 1us}}\n"
                 f"algorithms: [ring]\nsizes: [64]\noutput: {tmp_path / 'own'}\n")
    b.write_text("topology: {kind: switch, ranks: 2, bandwidth: 1GB/s, latency: 1us}\n"
                 "algorithms: [ring]\nsizes: [128]\n")
    out = tmp_path / "swept"
    assert main(["sweep", str(a), str(b), "--output", str(out), "--workers", "1",
                 "--no-progress", "--no-plot"]) == 0
    assert list(pd.read_csv(out / "a" / "a.csv").size_bytes) == [64]
    assert list(pd.read_csv(out / "b" / "b.csv").size_bytes) == [128]
    assert not (tmp_path / "own").exists()
    assert f"# results: {out / 'a' / 'a.csv'}" in capsys.readouterr().out


def test_output_with_two_scenarios_of_one_name_is_refused_before_running(tmp_path, capsys):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    for path in (first, second):
        path.write_text("name: same\ntopology: {kind: switch, ranks: 2, bandwidth: 1GB/s, "
                        "latency: 1us}\nsizes: [64]\n")
    assert main(["sweep", str(first), str(second), "--output", str(tmp_path / "d"),
                 "--no-progress"]) == 2
    assert capsys.readouterr().err == (f"{second}: output: expected its own directory, but "
                                       f"{first} also writes to {tmp_path / 'd' / 'same'}\n")
    assert not (tmp_path / "d").exists()
