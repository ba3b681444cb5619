"""Sweeps under stress (issue 40, item 7): a sweep and a run into one directory refuse each
other, a sweep checks its outputs against its inputs as run does, a scheduler that never
answers is one line in bounded time, workers killed as soon as they start do not keep a sweep
waiting, and every signal stops a sweep with what finished written. The slow cases, on real
Dask clusters (every worker killed again and again, each signal sent to a sweep and timed), are
in bench/hostile_sweeps.py; tests/test_sweep.py sends Ctrl-C to one."""

import json
import os
import signal
import socket
from dataclasses import dataclass

import pytest

from simulator.cli import main
from simulator.output.files import DirectoryLock, Terminated, interrupts_held, raise_terminated

SWITCH = "topology: {kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}\n"


def _scenario(tmp_path, body=f"{SWITCH}algorithms: [ring]\nsizes: [4096, 8192]\n"):
    """``s.yaml`` in ``tmp_path``, its results in ``tmp_path/out``."""
    path = tmp_path / "s.yaml"
    path.write_text(f"{body}output: {tmp_path / 'out'}\n")
    return path


def test_a_sweep_beside_a_running_run_is_refused_and_writes_nothing(tmp_path, capsys):
    # a running run holds this very lock from its first point on (ResultsStream.add): the sweep
    # takes it before its cluster starts, so it is refused at once, exit 2, one line
    path = _scenario(tmp_path)
    held = DirectoryLock(tmp_path / "out", "s", str(path))
    try:
        assert main(["sweep", str(path), "--workers", "1", "--no-progress"]) == 2
    finally:
        held.release()
    assert capsys.readouterr().err == (
        f"{path}: output: another run is writing s's results in {tmp_path / 'out'}; wait for it "
        "to end, or give the scenario another output\n")
    assert os.listdir(tmp_path / "out") == []  # the run's lock file gone with it, nothing else


def test_a_run_beside_a_running_sweep_is_refused(tmp_path, capsys, monkeypatch):
    # the sweep holds its lock while it runs: a run of the same scenario, started while the
    # sweep's points run (here: in the sweep's place, so exactly then), is refused as a second
    # run is; the lock is let go and its file removed when the sweep ends
    import simulator.sweep

    path = _scenario(tmp_path)
    lock = tmp_path / "out" / ".s.lock"
    seen = []

    def sweeping(scenarios, **options):
        seen.append(lock.exists())
        seen.append(main(["run", str(path), "--no-plot", "--quiet"]))
        raise simulator.sweep.ClusterError("stopped here by the test")

    monkeypatch.setattr(simulator.sweep, "sweep", sweeping)
    assert main(["sweep", str(path), "--workers", "1", "--no-progress"]) == 1
    assert seen == [True, 2]
    assert capsys.readouterr().err == (
        f"{path}: output: another run is writing s's results in {tmp_path / 'out'}; wait for it "
        "to end, or give another --output\n"
        "sweep: stopped here by the test; nothing ran\n")
    assert not (tmp_path / "out").exists()  # made for the lock only, and removed with it


def test_a_json_sweep_into_its_own_directory_does_not_replace_its_scenario(tmp_path, capsys,
                                                                           monkeypatch):
    # issue 40: `sweep s.json` with `output: .` wrote its settings, s.json, over its scenario
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"name": "s", "topology": {"kind": "switch", "ranks": 4,
                                                          "bandwidth": "25GB/s",
                                                          "latency": "1us"},
                                "algorithms": ["ring"], "sizes": [4096], "output": "."}))
    before = path.read_bytes()
    assert main(["sweep", str(path), "--workers", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err == (f"{path}: output (s.json): s.json is an input of this run ({path}); choose "
                   "another path\n")
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["s.json"]


def test_a_scheduler_that_never_answers_is_one_line_within_its_bound(tmp_path, capsys,
                                                                     monkeypatch):
    # issue 40: a port that takes the connection and never answers Dask's handshake hung the
    # sweep past 300 s; it is now said after HANDSHAKE_S (shortened here), exit 1, nothing run.
    # The kernel takes the connection into the listening socket's backlog: no accept needed
    monkeypatch.setattr("simulator.sweep.HANDSHAKE_S", 0.5)
    path = _scenario(tmp_path)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        assert main(["sweep", str(path), "--scheduler", address, "--no-progress"]) == 1
    assert capsys.readouterr().err == (f"sweep: the Dask scheduler at {address!r} took the "
                                       "connection but did not answer within 0.5 s; nothing ran\n")
    assert not (tmp_path / "out").exists()


@dataclass(frozen=True)
class _Future:
    """A point that never finishes."""

    key: str


class _Client:
    """A scheduler whose workers are killed as soon as they start: a new one at every poll."""

    def __init__(self):
        self.polls = 0
        self.cancelled = []

    def nthreads(self):
        self.polls += 1
        if self.polls > 1000:  # the sweep would wait for ever
            pytest.fail("the sweep still waits after 1000 polls")
        return {f"tcp://127.0.0.1:{40000 + self.polls}": 1}

    def cancel(self, futures):
        self.cancelled += futures


def test_workers_killed_as_they_start_do_not_keep_a_sweep_waiting(monkeypatch):
    # every worker killed again and again: the nanny restarts each, which the scheduler lists
    # for a moment, so "no worker at all" never held for NO_WORKERS_S and the sweep waited on.
    # A worker counts only once it is there at two polls running. The clock is the test's: a
    # second at each reading, so NO_WORKERS_S (20 s) is some twenty polls
    from types import SimpleNamespace

    from simulator.sweep import NO_WORKERS_S, _taken

    readings = iter(range(1_000_000))
    monkeypatch.setattr("simulator.sweep.time", SimpleNamespace(monotonic=lambda: next(readings)))

    def wait(pending, timeout, return_when):
        return set(), pending

    futures = [_Future("a"), _Future("b")]
    client = _Client()
    taken = _taken(client, SimpleNamespace(wait=wait, KilledWorker=RuntimeError), futures,
                   [("s", "ring", 4096), ("s", "ring", 8192)], None)
    assert taken.stranded and taken.stop is None and taken.outcomes == [None, None]
    assert sorted(future.key for future in client.cancelled) == ["a", "b"]
    assert NO_WORKERS_S <= client.polls <= NO_WORKERS_S + 2


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_held_while_files_are_written_stops_the_run_after_them(number):
    # the command line stops on SIGTERM and SIGHUP as on Ctrl-C; one that comes while files are
    # written together is held until they are, then raised, naming its signal
    before = signal.signal(number, raise_terminated)
    try:
        with pytest.raises(Terminated) as stop, interrupts_held():
            os.kill(os.getpid(), number)  # the handler runs at once, in this thread
            assert signal.getsignal(number) is not raise_terminated  # held
        assert stop.value.signum == number
        assert signal.getsignal(number) is raise_terminated  # put back
    finally:
        signal.signal(number, before)


@pytest.mark.parametrize(("stop", "code", "said"), [
    (KeyboardInterrupt(), 130, "interrupted"), (Terminated(signal.SIGTERM), 143,
                                                "terminated (SIGTERM)"),
    (Terminated(signal.SIGHUP), 129, "terminated (SIGHUP)")])
def test_a_stopped_sweep_says_which_signal_and_exits_with_its_code(capsys, stop, code, said):
    from simulator.commands.sweep import _outcome
    from simulator.output.results import results_frame
    from simulator.sweep import Sweep

    done = Sweep((results_frame([]),), (), interrupted_of=4, stop=stop)
    assert _outcome(done, 0) == code
    assert capsys.readouterr().err == (f"sweep: {said} after 0 of 4 points; those finished are "
                                       "written\n")


@dataclass(frozen=True)
class _Done:
    """A point finished: its outcome, as a Dask future gives it."""

    key: str
    status: str = "finished"

    def result(self, timeout):
        return f"the outcome of {self.key}"

    def release(self):
        pass


def test_a_signal_while_points_run_keeps_those_finished():
    # SIGHUP (or SIGTERM, Ctrl-C) raises its interrupt in the main thread, which waits in
    # Dask's wait: the points taken so far are kept, with the signal, for the caller to write
    from types import SimpleNamespace

    from simulator.sweep import _taken

    first, second = _Done("a"), _Done("b")
    calls = []

    def wait(pending, timeout, return_when):
        calls.append(set(pending))
        if len(calls) == 1:
            return {first}, pending - {first}
        raise Terminated(signal.SIGHUP)

    client = SimpleNamespace(nthreads=lambda: {"tcp://127.0.0.1:40000": 1})
    taken = _taken(client, SimpleNamespace(wait=wait, KilledWorker=RuntimeError),
                   [first, second], [("s", "ring", 4096), ("s", "ring", 8192)],
                   SimpleNamespace(update=lambda count: None))
    assert taken.outcomes == ["the outcome of a", None] and not taken.stranded
    assert isinstance(taken.stop, Terminated) and taken.stop.signum == signal.SIGHUP
    assert calls == [{first, second}, {second}]


@pytest.mark.parametrize(("before", "during"), [(signal.SIG_DFL, raise_terminated),
                                                (signal.SIG_IGN, signal.SIG_IGN)])
def test_the_command_line_stops_on_sighup_unless_nohup_ignores_it(tmp_path, capsys,
                                                                  monkeypatch, before, during):
    # the terminal closing killed a sweep outright (nothing written, no line); SIGHUP now stops
    # it as SIGTERM does, except where it is ignored (nohup: the user asked the run to outlive
    # the terminal), and the handler before is put back when the command ends
    import simulator.sweep

    seen = []

    def sweeping(scenarios, **options):
        seen.append(signal.getsignal(signal.SIGHUP))
        raise simulator.sweep.ClusterError("stopped here by the test")

    monkeypatch.setattr(simulator.sweep, "sweep", sweeping)
    old = signal.signal(signal.SIGHUP, before)
    try:
        assert main(["sweep", str(_scenario(tmp_path)), "--no-progress"]) == 1
        assert signal.getsignal(signal.SIGHUP) is before
    finally:
        signal.signal(signal.SIGHUP, old)
    assert seen == [during]
    assert capsys.readouterr().err == "sweep: stopped here by the test; nothing ran\n"
