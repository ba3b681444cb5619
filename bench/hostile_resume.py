"""Hostile checks of ``run --resume`` and of a run's lock and temporary files (issue 40, items 3
and 5), too slow for the tests. Each section prints a table of what came of its runs.

- ``resume``: 20 runs of a 20-point scenario, each SIGKILLed at a random (seeded) moment, half
  once a random number of rows is on disk (and up to 0.2 s more) and half at a random time
  after its first row, within the time the uninterrupted run took from its first row to its
  end, then ``run --resume`` to the end: the CSV, the JSON and the digest sidecar must be
  byte-identical to an uninterrupted run's, and no lock or temporary file left.
- ``exits``: runs ended after their first row by SIGTERM and SIGINT at random moments and by
  running out of memory (an address-space limit): no lock or temporary file left; one
  SIGKILLed leaves its lock file, which the next run (refused at ``--resume``) removes.

Every trigger waits for an event (a row on disk), then for the random extra time drawn.

    PYTHONPATH=. .venv/bin/python bench/hostile.py resume exits    # as sections of hostile.py
    PYTHONPATH=. .venv/bin/python bench/hostile_resume.py             # alone: both
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Table:
    """What a section found: a titled table and a one-line summary."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    summary: str

    def format(self) -> str:
        """The table as text, columns padded to their widest cell (numbers to the right)."""
        widths = [max(len(cell) for cell in column) for column in zip(self.columns, *self.rows,
                                                                        strict=True)]
        lines = ["  ".join(cell.rjust(width) if cell.isdigit() else cell.ljust(width)
                           for cell, width in zip(row, widths, strict=True)).rstrip()
                 for row in (self.columns, *self.rows)]
        return "\n".join([f"## {self.title}", *lines, self.summary])


def simulator(*args: str, output: Path) -> subprocess.Popen[bytes]:
    """``python -m simulator ARGS --output OUTPUT`` as a child of this tree's source, quiet."""
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "simulator", *args, "--output", str(output),
                             "--no-plot", "--quiet"], cwd=REPO, env=environment,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def finish(child: subprocess.Popen[bytes]) -> int:
    """Wait for ``child``; its exit code, its stderr echoed where it failed."""
    _, err = child.communicate(timeout=RUN_TIMEOUT_S)
    if child.returncode != 0:
        print(err.decode(errors="replace"), file=sys.stderr, end="")
    return child.returncode


RUN_TIMEOUT_S = 600
"""Longest a run of the resume scenario may take: ~15 s alone on the 2-core machine, ten times
that and more under the load of five other engineers' tests."""

RESUME_RUNS = 20
"""Runs killed and resumed: the issue's figure ("SIGKILL at random points in 20 runs")."""

RESUME_SCENARIO = """\
name: hostile
topology: {kind: switch, ranks: 16, bandwidth: 25GB/s, latency: 500ns}
algorithms: [ring, halving_doubling]
sizes: {from: 64KiB, to: 32MiB, factor: 2}
engine: simpy
"""
"""20 points (2 algorithms × 10 sizes) on the SimPy engine, from milliseconds to a second or so
each: a kill at a random moment lands before the first row, between rows or during a write."""


def rows_in(csv: Path) -> int:
    """Data rows a results file holds (0 before it exists): whole lines after the header."""
    return max(csv.read_bytes().count(b"\n") - 1, 0) if csv.exists() else 0


def signal_at(child: subprocess.Popen[bytes], csv: Path, rows: int, after_s: float,
              number: int = signal.SIGKILL) -> bool:
    """Send ``number`` (SIGKILL unless told) to ``child`` once ``csv`` holds ``rows`` rows and
    ``after_s`` seconds more have passed, unless it ended first; whether it was sent."""
    while rows_in(csv) < rows and child.poll() is None:
        time.sleep(0.005)
    deadline = time.monotonic() + after_s
    while time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.005)
    sent = child.poll() is None
    if sent:
        child.send_signal(number)
    return sent


def timed(child: subprocess.Popen[bytes], csv: Path) -> tuple[float, float, int]:
    """Seconds from ``child``'s start to its first row in ``csv`` and to its end, and its exit
    code: the span in which a kill lands between rows."""
    start = time.monotonic()
    while rows_in(csv) < 1 and child.poll() is None:
        time.sleep(0.005)
    first_s = time.monotonic() - start
    code = finish(child)
    return first_s, time.monotonic() - start, code


def resume_table(seed: int) -> Table:
    """Kill runs at random moments and resume them; each must end with an uninterrupted run's
    files, byte for byte, and no lock or temporary file."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="hostile-resume-") as scratch:
        root = Path(scratch)
        scenario = root / "hostile.yaml"
        scenario.write_text(RESUME_SCENARIO)
        out = root / "out"  # every run writes here: the JSON names its directory
        first_s, whole_s, code = timed(simulator("run", str(scenario), output=out),
                                       out / "hostile.csv")
        if code != 0:
            return Table("resume", ("run",), (), "the uninterrupted run failed")
        names = sorted(path.name for path in out.iterdir())
        reference = {name: (out / name).read_bytes() for name in names}
        total = rows_in(out / "hostile.csv")
        table = []
        for run in range(1, RESUME_RUNS + 1):
            shutil.rmtree(out)
            by_rows = run % 2 == 1  # odd runs: after some rows; even runs: at some time
            rows = rng.randrange(1, total) if by_rows else 1
            after_s = rng.uniform(0, 0.2) if by_rows else rng.uniform(0, whole_s - first_s)
            child = simulator("run", str(scenario), output=out)
            killed = signal_at(child, out / "hostile.csv", rows, after_s)
            child.wait()
            kept = rows_in(out / "hostile.csv")
            lock = (out / ".hostile.lock").exists()
            code = finish(simulator("run", str(scenario), "--resume", output=out))
            after = sorted(path.name for path in out.iterdir())
            same = code == 0 and after == names and all(
                (out / name).read_bytes() == data for name, data in reference.items())
            when = (f"after {rows} rows +{after_s:.2f}s" if by_rows
                    else f"at first row +{after_s:.2f}s")
            table.append((str(run), when, "yes" if killed else "no (ended first)",
                          f"{kept} of {total}", "yes" if lock else "no", str(code),
                          "yes" if same else "no"))
    identical = sum(row[-1] == "yes" for row in table)
    return Table(
        f"resume: SIGKILL at a random moment, then run --resume (seed {seed}; uninterrupted "
        f"run: first row at {first_s:.1f} s, all {total} at {whole_s:.1f} s; files "
        f"{', '.join(names)})",
        ("run", "SIGKILL", "sent", "rows kept", "lock left", "resume exit", "identical"),
        tuple(table),
        f"identical: {identical} of {RESUME_RUNS} ({sum(row[2] == 'yes' for row in table)} "
        "killed before they ended)")


EXITS_SCENARIO = """\
name: exits
topology: {kind: switch, ranks: 16, bandwidth: 25GB/s, latency: 500ns}
algorithms: [ring]
engine: simpy
piece_size: 64KiB
sizes: [1KiB, 128MiB, 256MiB]
"""
"""A first point in milliseconds, then two of 30,000 and 60,000 messages on the SimPy engine,
which take seconds: a signal sent after the first row lands in the second."""

MEMORY_SCENARIO = """\
name: exits
topology: {kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 500ns}
algorithms: [ring]
sizes: [1KiB, 512MiB]
"""
"""With ``--proxy-elements 2^27``, a first point of 256 elements, then one of 2 GiB of inputs:
more than the address space :data:`MEMORY_LIMIT_BYTES` leaves, so numpy's allocation fails."""

MEMORY_LIMIT_BYTES = 3 << 30
"""The child's address space (RLIMIT_AS): room for the interpreter, numpy, pandas and SimPy
(~1.2 GiB of address space here) and the first point, not for the second point's 2 GiB."""


def _heeds_ctrl_c() -> None:
    """In the child, before it runs: SIGINT heeded (a shell's background job ignores it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _memory_limited() -> None:
    """In the child, before it runs: SIGINT heeded, the address space capped at
    :data:`MEMORY_LIMIT_BYTES`."""
    import resource

    _heeds_ctrl_c()
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


@dataclass(frozen=True)
class Ending:
    """One way a run ends: what to call it, the scenario text and options, what the child
    does before it runs, and the signal sent ``after_s`` after its first row (None: none)."""

    what: str
    scenario: str
    options: tuple[str, ...]
    setup: Callable[[], None]
    signal: int | None
    after_s: float = 0.0


def endings(rng: random.Random) -> list[Ending]:
    """SIGTERM five times and SIGINT three times at random moments after the first row, out of
    memory at the second point, and SIGKILL after the first row."""
    signalled = [(number, rng.uniform(0, 1)) for number in (signal.SIGTERM,) * 5
                 + (signal.SIGINT,) * 3]
    return [*(Ending(f"{signal.Signals(number).name} at first row +{delay:.2f}s",
                     EXITS_SCENARIO, (), _heeds_ctrl_c, number, delay)
              for number, delay in signalled),
            Ending(f"out of memory (RLIMIT_AS {MEMORY_LIMIT_BYTES >> 30} GiB)", MEMORY_SCENARIO,
                   ("--proxy-elements", str(1 << 27)), _memory_limited, None),
            Ending("SIGKILL at first row", EXITS_SCENARIO, (), _heeds_ctrl_c, signal.SIGKILL)]


def lock_or_tmp(directory: Path) -> list[str]:
    """The lock and temporary files in ``directory``."""
    if not directory.is_dir():
        return []
    return sorted(p.name for p in directory.iterdir() if p.suffix in (".lock", ".tmp"))


def exits_table(seed: int) -> Table:
    """End runs every way a run ends after its first row (SIGTERM and SIGINT at random moments,
    out of memory under an address-space limit): none may leave a lock or temporary file. A
    SIGKILL leaves its lock file; the next run, even one refused (here at --resume, its first
    row edited), must remove it."""
    table = []
    with tempfile.TemporaryDirectory(prefix="hostile-exits-") as scratch:
        root = Path(scratch)
        out = root / "out"
        for ending in endings(random.Random(seed)):
            shutil.rmtree(out, ignore_errors=True)
            scenario = root / "exits.yaml"
            scenario.write_text(ending.scenario)
            command = [sys.executable, "-m", "simulator", "run", str(scenario), *ending.options,
                       "--output", str(out), "--no-plot", "--quiet"]
            environment = {**os.environ, "PYTHONPATH": str(REPO)}
            child = subprocess.Popen(command, cwd=REPO, env=environment,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     preexec_fn=ending.setup)
            if ending.signal is not None:
                signal_at(child, out / "exits.csv", 1, ending.after_s, ending.signal)
            _, err = child.communicate(timeout=RUN_TIMEOUT_S)
            code, kept, what = child.returncode, rows_in(out / "exits.csv"), ending.what
            if ending.signal == signal.SIGKILL:
                what += f", left {', '.join(lock_or_tmp(out)) or 'nothing'}; then --resume"
                edited = (out / "exits.csv").read_text().replace("\nexits,", "\nedited,", 1)
                (out / "exits.csv").write_text(edited)
                rerun = subprocess.run([*command, "--resume"], cwd=REPO, env=environment,
                                       capture_output=True, timeout=RUN_TIMEOUT_S)
                code, err = rerun.returncode, rerun.stderr
            lines = err.decode(errors="replace").replace(str(root), "…").splitlines()
            said = next((line for line in lines if line.startswith(("Traceback", "…"))), "")
            table.append((what, str(code), str(kept), _short(said),
                          ", ".join(lock_or_tmp(out)) or "none"))
    clean = sum(row[-1] == "none" for row in table)
    return Table(f"exits: what a run ended after its first row leaves (seed {seed})",
                 ("how it ended", "exit", "rows", "stderr", "lock/tmp left"), tuple(table),
                 f"no lock or temporary file left: {clean} of {len(table)}")


def _short(text: str, most: int = 80) -> str:
    """``text`` cut to ``most`` characters, with ``…``."""
    return text if len(text) <= most else text[:most - 1] + "…"


SEED = 40
"""The seed of every random choice (the issue's number): the same kills each time it runs."""


def resume() -> None:
    """The ``resume`` section: its table printed."""
    print(resume_table(SEED).format(), end="\n\n", flush=True)


def exits() -> None:
    """The ``exits`` section: its table printed."""
    print(exits_table(SEED).format(), end="\n\n", flush=True)


SECTIONS: dict[str, Callable[[], None]] = {"resume": resume, "exits": exits}
"""This module's sections by name, as ``bench/hostile.py`` lists them in its CHECKS."""

if __name__ == "__main__":  # alone: the sections named, or both
    unknown = [name for name in sys.argv[1:] if name not in SECTIONS]
    if unknown:
        sys.exit(f"hostile_resume.py: no section {', '.join(unknown)}; expected one of "
                 f"{', '.join(SECTIONS)}")
    for name in sys.argv[1:] or list(SECTIONS):
        SECTIONS[name]()
