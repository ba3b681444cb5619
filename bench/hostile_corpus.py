"""Two sections of ``bench/hostile.py`` (issue 40): ``corpus-slow``, the hostile cases too slow
for the tests (inputs that take memory or time to refuse, signals mid-run, two runs at once),
and ``determinism``, a faulted run's files (CSV, JSON, trace, PNGs) compared byte for byte
across hash seeds, working directories, time zones and locales.

Each prints a table of figures. Every command runs in a fresh interpreter, as a user's would.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import yaml

REPO = Path(__file__).resolve().parent.parent


def _load_corpus() -> ModuleType:
    """``tests/hostile/corpus.py``, loaded by path: ``tests`` is no package, and the name
    ``hostile`` is this directory's ``hostile.py`` when it runs as a script."""
    spec = importlib.util.spec_from_file_location("hostile_corpus_cases",
                                                  REPO / "tests" / "hostile" / "corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


corpus = _load_corpus()

TIMEOUT_S = 300
"""A slow case's limit: the slowest here, a million XML elements, takes ~5 s alone and ~30 s on
a loaded two-core machine; ten times that is a hang."""

POLL_S = 0.05
"""How often a signal case looks for the first written row (a benchmark may poll; a test may
not)."""

SIGNALLED = """\
name: sig
topology: {kind: switch, ranks: 8, bandwidth: 25GB/s, latency: 1us}
algorithms: all
sizes: {from: 4KiB, to: 4MiB, factor: 2}
"""
"""A run of 11 algorithms × 11 sizes on 8 ranks: a few seconds, long enough to stop in the middle."""


@dataclass(frozen=True)
class Ran:
    """A finished command: its exit code, seconds, peak resident memory and stderr."""

    code: int
    seconds: float
    peak_mib: float
    stderr: str

    @property
    def first_line(self) -> str:
        """The first line of stderr, cut to 70 characters for the table."""
        return (self.stderr.splitlines() or [""])[0][:70]


def _env(extra: Mapping[str, str] = {}) -> dict[str, str]:
    """The cases' environment (:func:`corpus.environment`)."""
    env: dict[str, str] = corpus.environment(extra)
    return env


def _start(argv: list[str], cwd: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start ``python -m simulator ARGV`` in ``cwd``."""
    return subprocess.Popen([sys.executable, "-m", "simulator", *argv], cwd=cwd, env=dict(env),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def _finish(process: subprocess.Popen[bytes], started: float) -> Ran:
    """Wait for ``process`` (killed past :data:`TIMEOUT_S`) and measure it: ``wait4`` gives this
    child's own peak memory."""
    assert process.stderr is not None
    timer = threading.Timer(TIMEOUT_S, process.kill)
    timer.start()
    said = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    return Ran(process.returncode, time.monotonic() - started, usage.ru_maxrss / 1024,
               said.decode("utf-8", "replace"))


def _run(argv: list[str], cwd: Path, env: Mapping[str, str] | None = None) -> Ran:
    """Run ``python -m simulator ARGV`` in ``cwd`` to its end."""
    started = time.monotonic()
    return _finish(_start(argv, cwd, env or _env()), started)


def _slow_manifests() -> None:
    """The cases of ``tests/hostile/slow/*.yaml``, each in a fresh interpreter."""
    print(f"{'case':<34} {'exit':>4} {'want':>4} {'s':>6} {'MiB':>6}  verdict / first line")
    for path in sorted((corpus.HERE / "slow").glob("*.yaml")):
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        for entry in raw["cases"]:
            case = corpus._case(path.stem, entry)
            with tempfile.TemporaryDirectory() as scratch:
                cwd = Path(scratch) / "cwd"
                cwd.mkdir()
                corpus.materialise(cwd, case.files)
                before = corpus.snapshot(cwd)
                ran = _run(list(case.argv), cwd)
                outcome = corpus.Outcome(ran.code, ran.stderr, before, corpus.snapshot(cwd))
                flaws = corpus.problems(case, outcome, cwd)
            verdict = "ok" if not flaws else "FAIL " + "; ".join(flaws)[:60]
            print(f"{case.name:<34} {ran.code:>4} {case.exit:>4} {ran.seconds:>6.1f} "
                  f"{ran.peak_mib:>6.0f}  {verdict}: {ran.first_line}")


def _rows(path: Path) -> list[list[str]]:
    """The CSV's rows (header included); raises where a row is cut short."""
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    widths = {len(row) for row in rows}
    if len(widths) > 1:
        raise ValueError(f"rows of {sorted(widths)} fields")
    return rows


def _signals() -> None:
    """Stop a run with each signal once its first row is written; then ``--resume`` it and
    compare with a run never stopped."""
    print(f"\n{'signal':<8} {'exit':>4} {'stop s':>6} {'rows':>5} {'whole':>5} {'left':>14} "
          f"{'resumed=':>8}  first line")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "sig.yaml").write_text(SIGNALLED, encoding="utf-8")
        whole = _run(["run", "sig.yaml", "--output", "ref", "--quiet", "--no-plot"], root)
        reference = (root / "ref" / "sig.csv").read_bytes() if whole.code == 0 else b""
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            out = f"out-{number.name}"
            started = time.monotonic()
            process = _start(["run", "sig.yaml", "--output", out, "--quiet", "--no-plot"],
                             root, _env())
            target = root / out / "sig.csv"
            while process.poll() is None and not (target.exists()
                                                  and target.read_bytes().count(b"\n") >= 2):
                time.sleep(POLL_S)
            sent = time.monotonic()
            process.send_signal(number)
            ran = _finish(process, started)
            stop_s = time.monotonic() - sent
            try:
                rows, intact = len(_rows(target)) - 1, "yes"
            except (OSError, ValueError):
                rows, intact = -1, "NO"
            left = sorted(p.name for p in (root / out).iterdir()
                          if p.name.startswith(".") or p.name.endswith(".tmp"))
            resumed = _run(["run", "sig.yaml", "--output", out, "--quiet", "--no-plot",
                            "--resume"], root)
            same = resumed.code == 0 and target.read_bytes() == reference
            print(f"{number.name:<8} {ran.code:>4} {stop_s:>6.2f} {rows:>5} {intact:>5} "
                  f"{','.join(left) or '-':>14} {'yes' if same else 'NO':>8}  {ran.first_line}")


def _concurrency() -> None:
    """Two commands on one scenario and one output directory at once: one must be refused."""
    print(f"\n{'pair':<14} {'exits':>8}  first lines")
    pairs = {"run + run": (["run", "--quiet"], ["run", "--quiet"]),
             "run + sweep": (["run", "--quiet"], ["sweep", "--workers", "1", "--no-progress"])}
    for name, (one, two) in pairs.items():
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch)
            (root / "sig.yaml").write_text(SIGNALLED + "output: out\n", encoding="utf-8")
            started = time.monotonic()
            first = _start([*one, "sig.yaml", "--no-plot"], root, _env())
            second = _start([*two, "sig.yaml", "--no-plot"], root, _env())
            done = [_finish(first, started), _finish(second, started)]
            lines = " | ".join(ran.first_line[:50] for ran in done if ran.code != 0)
            print(f"{name:<14} {done[0].code:>4},{done[1].code:<3}  {lines or '-'}")


def corpus_slow() -> None:
    """The hostile cases too slow for ``make test``: big inputs, signals, two runs at once."""
    print("# corpus-slow: hostile cases too slow for the tests (fresh interpreter each)")
    _slow_manifests()
    _signals()
    _concurrency()


FAULTED = """\
name: det
topology: {kind: switch, ranks: 8, bandwidth: 25GB/s, latency: 1us}
algorithms: [ring, halving_doubling, double_binary_tree]
sizes: [4KiB, 256KiB]
faults:
  - {kind: link_degraded, link: [gpu1, switch], at: 1us, factor: 0.5}
  - {kind: link_flapping, link: [switch, gpu5], at: 2us, period: 10us, down: 3us, until: 60us}
  - {kind: straggler, rank: 3, delay: 4us}
"""
"""The determinism check's sweep of sizes: three faults, three algorithms, two sizes."""

TRAINED = """\
name: step
topology: {kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}
algorithms: [ring]
training: {model: resnet50, batch: 32, gpu: a100, optimizer: sgd}
faults:
  - {kind: link_degraded, link: [gpu1, switch], at: 1ms, factor: 0.5}
  - {kind: straggler, rank: 2, delay: 50us}
"""
"""The determinism check's training step, with two faults."""

RUNS: dict[str, tuple[str, list[str], tuple[str, ...]]] = {
    "det": (FAULTED, ["--trace", "trace.json", "--links", "links.csv"],
            ("out/det.csv", "out/det.json", "out/det.png", "trace.json", "links.csv",
             "links.png")),
    "step": (TRAINED, [], ("out/step-steps.csv", "out/step-buckets.csv", "out/step.json",
                           "out/step-timeline.png")),
}
"""Each run of the check by scenario name: its file, its extra arguments and every file it
writes (results as CSV, JSON and figure; the trace; the links table and heatmap)."""


def _locales() -> list[str]:
    """The locales of this machine (``locale -a``), C first."""
    try:
        found = subprocess.run(["locale", "-a"], capture_output=True, text=True,
                               check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        found = []
    return ["C", *sorted(name for name in found if name not in ("C", "POSIX"))]


def _variants() -> dict[str, tuple[str, dict[str, str]]]:
    """Each variant by name: the directory it runs in and its environment; one factor changed
    at a time from the first, then all at once."""
    base = {"PYTHONHASHSEED": "0", "TZ": "UTC", "LC_ALL": "C"}
    locales = _locales()
    variants = {"reference": ("a", base),
                "hash seed 1": ("a", {**base, "PYTHONHASHSEED": "1"}),
                "hash seed random": ("a", {**base, "PYTHONHASHSEED": "random"}),
                "cwd deeper": ("b/c/d", base),
                "TZ Asia/Kolkata": ("a", {**base, "TZ": "Asia/Kolkata"}),
                "TZ America/St_Johns": ("a", {**base, "TZ": "America/St_Johns"})}
    for name in locales[1:]:
        variants[f"LC_ALL {name}"] = ("a", {**base, "LC_ALL": name})
    variants["all at once"] = ("e/f", {"PYTHONHASHSEED": "31337", "TZ": "Pacific/Chatham",
                                       "LC_ALL": locales[-1]})
    return variants


def _written(cwd: Path, extra: Mapping[str, str]) -> dict[str, bytes] | str:
    """Run every scenario of :data:`RUNS` in ``cwd`` under ``extra``; every file written by
    name, or the first line of a run that failed."""
    files: dict[str, bytes] = {}
    for name, (text, args, written) in RUNS.items():
        (cwd / f"{name}.yaml").write_text(text, encoding="utf-8")
        ran = _run(["run", f"{name}.yaml", "--output", "out", "--quiet", "--format",
                    "csv,json,png", *args], cwd, _env(extra))
        if ran.code != 0:
            return f"{name}: exit {ran.code}: {ran.first_line}"
        files.update((file, (cwd / file).read_bytes()) for file in written)
    return files


def determinism() -> None:
    """Each run's files under each variant, compared byte for byte with the reference's."""
    print("# determinism: faulted runs' files, byte for byte against the reference run")
    names = [file for _, _, written in RUNS.values() for file in written]
    labels = [Path(name).name.removeprefix("step-") for name in names]
    print(f"{'variant':<20} " + " ".join(f"{label:>12}" for label in labels))
    reference: dict[str, bytes] = {}
    for variant, (where, extra) in _variants().items():
        with tempfile.TemporaryDirectory() as scratch:
            cwd = Path(scratch) / where
            cwd.mkdir(parents=True)
            files = _written(cwd, extra)
        if isinstance(files, str):
            print(f"{variant:<20} {files}")
            continue
        reference = reference or files
        print(f"{variant:<20} " + " ".join(
            f"{'same' if files[name] == reference[name] else 'DIFFERS':>12}" for name in names))
