"""Hostile checks of ``python -m simulator sweep`` under stress (issue 40, item 7), too slow for
the tests: every worker killed again and again, each signal, a scheduler that never answers,
a sweep beside a run of the same scenario and a run beside a sweep. Each case prints the
seconds the command took to end (from the moment it was hit, or started), the bound it is held
to, its exit code and what it said on
stderr (progress bars left out), first line first; a case that misses its bound is marked.

Every trigger waits for an event, never a fixed time: the first point's progress (the bar is
drawn at every point, ``TQDM_MININTERVAL=0``), a listening socket, a lock file.

    PYTHONPATH=. .venv/bin/python bench/hostile.py sweeps
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

DYING_BOUND_S = 60.0
"""Issue 40: dying workers end the sweep in one line within 60 s."""

SIGNAL_BOUND_S = 10.0
"""Issue 40: every signal ends a sweep within 10 s."""

SILENT_BOUND_S = 30.0
"""A scheduler that never answers is said within ``HANDSHAKE_S`` (10 s) of the connection,
which comes after the sweep's own start (its imports, its checks: seconds here)."""

WAIT_S = 300.0
"""How long a case waits for the event it triggers on (the first point's progress, the lock
file) or for the sweep to end before it is killed and reported as hung: generous, for a loaded
machine, and far beyond every bound above."""

KILL_EVERY_S = 0.5
"""How often every worker is killed: faster than the nanny restarts one (~1.4 s here), so that
none lives to take a point."""

SWITCH = "topology: {kind: switch, ranks: 16, bandwidth: 25GB/s, latency: 1us}\n"
SLOW = (f"{SWITCH}algorithms: [ring]\nengine: simpy\npiece_size: 64KiB\n"
        "sizes: [1KiB, 1GiB, 2GiB, 3GiB]\n")
"""One quick point (its progress is the trigger), then three that take minutes each on the
SimPy engine (half a million messages and more), so the sweep is busy when it is hit."""

BAR = re.compile(r"\|\s*\d+/\d+ \[")
"""A progress bar's line (``25%|##   | 1/4 [00:05<00:15, 5.00s/point]``), not something said."""


@dataclass(frozen=True)
class Figure:
    """One case: what was done, the seconds the sweep took to end from then, its exit code,
    its lines on stderr, and its bound."""

    case: str
    seconds: float
    code: int | None
    said: tuple[str, ...]
    bound_s: float

    def row(self) -> str:
        """The case as lines of the table (its first line on stderr, then the others below
        it), marked where it missed its bound."""
        mark = "" if self.seconds <= self.bound_s and self.code is not None else "  MISSED"
        first, *rest = self.said or ("",)
        return "\n".join([f"{self.case:<34} {self.seconds:7.1f} {self.bound_s:6.0f} "
                           f"{self.code!s:>5}  {first}{mark}",
                           *(f"{'':<56}{line}" for line in rest)])


class Sweep:
    """A ``sweep`` command line in a child process, its stderr read as it comes."""

    def __init__(self, arguments: list[str], cwd: Path) -> None:
        environment = {**os.environ, "TQDM_MININTERVAL": "0", "TQDM_MINITERS": "1",
                       "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        self.child = subprocess.Popen([sys.executable, "-m", "simulator", *arguments],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd,
                                      env=environment)
        self.said = b""

    def wait_for(self, marker: bytes) -> bool:
        """Read stderr until ``marker`` comes (True) or the sweep ends without it, or it does
        not come within :data:`WAIT_S` (False)."""
        assert self.child.stderr is not None
        deadline = time.monotonic() + WAIT_S
        while marker not in self.said:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.child.stderr], [], [], left)[0]:
                return False
            chunk = os.read(self.child.stderr.fileno(), 65536)
            if not chunk:
                return False
            self.said += chunk
        return True

    def end(self) -> tuple[float, int | None, tuple[str, ...]]:
        """Wait for the sweep to end (killed, as hung, after :data:`WAIT_S`): the seconds it
        took, its exit code (None where it hung), and its lines that are not a bar."""
        start = time.monotonic()
        try:
            _, rest = self.child.communicate(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            self.child.kill()
            _, rest = self.child.communicate()
            return time.monotonic() - start, None, ("hung: killed",)
        lines = [line.strip() for line in re.split(r"[\r\n]", (self.said + rest).decode())]
        said = [line for line in lines if line and not BAR.search(line)]
        return time.monotonic() - start, self.child.returncode, tuple(said)


def _workers(pid: int) -> list[int]:
    """The worker processes under ``pid`` (its children's children too; not multiprocessing's
    resource tracker), from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, queue = [], list(children.get(pid, []))
    while queue:
        child = queue.pop()
        queue += children.get(child, [])
        with contextlib.suppress(OSError):
            if b"resource_tracker" not in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
    return found


def _scenario(directory: Path, name: str, body: str) -> Path:
    """A scenario file ``name.yaml`` in ``directory`` writing its results there."""
    path = directory / f"{name}.yaml"
    path.write_text(f"name: {name}\n{body}output: {directory / 'out'}\n")
    return path


def dying_workers(directory: Path) -> Figure:
    """Every worker SIGKILLed every :data:`KILL_EVERY_S` from the first point's progress on,
    as the nanny restarts them: seconds from the first kill to the sweep's end."""
    path = _scenario(directory, "dying", SLOW)
    start = time.monotonic()
    sweep = Sweep(["sweep", str(path), "--workers", "2", "--no-plot"], directory)
    if not sweep.wait_for(b"| 1/4 ["):
        return Figure("every worker killed, repeatedly", 0.0, *sweep.end()[1:], DYING_BOUND_S)
    started = time.monotonic() - start
    stop = threading.Event()

    def kill() -> None:
        while not stop.is_set():
            for pid in _workers(sweep.child.pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            stop.wait(KILL_EVERY_S)

    killer = threading.Thread(target=kill)
    killer.start()
    try:
        seconds, code, said = sweep.end()
    finally:
        stop.set()
        killer.join()
    return Figure(f"every worker killed ({started + seconds:.0f} s in all)", seconds, code, said,
                  DYING_BOUND_S)


def signalled(number: signal.Signals) -> Callable[[Path], Figure]:
    """The check of ``number`` sent to a sweep once its first point is done."""

    def check(directory: Path) -> Figure:
        """Signal the sweep at its first point's progress: seconds from the signal to its end,
        and the rows written (the line says how many)."""
        path = _scenario(directory, "signalled", SLOW)
        sweep = Sweep(["sweep", str(path), "--workers", "2", "--no-plot"], directory)
        case = f"{number.name} after the first point"
        if not sweep.wait_for(b"| 1/4 ["):
            return Figure(case, 0.0, *sweep.end()[1:], SIGNAL_BOUND_S)
        sweep.child.send_signal(number)
        return Figure(case, *sweep.end(), SIGNAL_BOUND_S)

    return check


def silent_scheduler(directory: Path) -> Figure:
    """``--scheduler`` at a port that takes connections and never answers: seconds from the
    start of the sweep to its end."""
    path = _scenario(directory, "silent", f"{SWITCH}sizes: [4096]\n")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        taken: list[socket.socket] = []

        def accept() -> None:
            with contextlib.suppress(OSError):
                while True:
                    taken.append(listener.accept()[0])

        threading.Thread(target=accept, daemon=True).start()
        address = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
        start = time.monotonic()
        sweep = Sweep(["sweep", str(path), "--scheduler", address, "--no-progress"], directory)
        _, code, said = sweep.end()
        for connection in taken:
            connection.close()
    return Figure("--scheduler that never answers", time.monotonic() - start, code, said,
                  SILENT_BOUND_S)


def _locked(directory: Path, name: str, holder: Sweep) -> bool:
    """Wait for ``holder`` to take the lock on ``name``'s results in ``directory/out`` (False
    where it ends, or does not within :data:`WAIT_S`). Polled: nothing is said when it is
    taken."""
    lock = directory / "out" / f".{name}.lock"
    deadline = time.monotonic() + WAIT_S
    while not lock.exists():
        if holder.child.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def beside_a_sweep(directory: Path) -> Figure:
    """A ``run`` started while a sweep of the same scenario holds its lock (from before its
    cluster starts, and its later points take minutes): seconds from the run's start to its
    refusal, at its first point."""
    path = _scenario(directory, "shared", SLOW)
    sweep = Sweep(["sweep", str(path), "--workers", "1", "--no-plot"], directory)
    try:
        if not _locked(directory, "shared", sweep):
            return Figure("run beside a running sweep", 0.0, None, ("no lock taken",), 60.0)
        start = time.monotonic()
        run = Sweep(["run", str(path), "--no-plot", "--quiet"], directory)
        _, code, said = run.end()
        return Figure("run beside a running sweep", time.monotonic() - start, code, said, 60.0)
    finally:
        sweep.child.kill()
        sweep.child.communicate()


def beside_a_run(directory: Path) -> Figure:
    """A sweep started while a ``run`` of the same scenario holds its lock (from its first
    point on, and its later points take minutes): seconds from the sweep's start to its
    refusal."""
    path = _scenario(directory, "shared", SLOW)
    run = Sweep(["run", str(path), "--no-plot"], directory)
    try:
        if not _locked(directory, "shared", run):
            return Figure("sweep beside a running run", 0.0, None, ("no lock taken",), 60.0)
        start = time.monotonic()
        sweep = Sweep(["sweep", str(path), "--workers", "1", "--no-progress"], directory)
        _, code, said = sweep.end()
        return Figure("sweep beside a running run", time.monotonic() - start, code, said, 60.0)
    finally:
        run.child.kill()
        run.child.communicate()


CASES: dict[str, Callable[[Path], Figure]] = {
    "dying": dying_workers,
    **{number.name: signalled(number)
       for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)},
    "silent": silent_scheduler,
    "beside a run": beside_a_run,
    "beside a sweep": beside_a_sweep,
}
"""Each case of the section by name, in the order the table lists them."""


@contextlib.contextmanager
def _scratch() -> Iterator[Path]:
    """A directory of its own for one case."""
    with tempfile.TemporaryDirectory(prefix="hostile-sweeps-") as name:
        yield Path(name)


def sweeps() -> None:
    """Every case, one line each: seconds to end, bound, exit code, last line on stderr."""
    print(f"{'sweeps: case':<34} {'end s':>7} {'bound':>6} {'exit':>5}  on stderr")
    for check in CASES.values():
        with _scratch() as directory:
            print(check(directory).row(), flush=True)
    print(f"load average: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
