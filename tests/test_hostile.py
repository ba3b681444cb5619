"""The hostile corpus (issue 40, item 8): every case of ``tests/hostile/*.yaml`` run as a command
in a scratch directory, its exit code, first stderr line and files checked (``hostile/corpus.py``
says how); the corpus's table in docs/hostile.md kept equal to the corpus; and one run with a
fault repeated under another hash seed, working directory, time zone and locale, its files
compared byte for byte (the full matrix is ``bench/hostile.py determinism``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile import corpus

CASES = corpus.cases()

MIN_CASES = 150
"""Issue 40 asks for a corpus of at least 150 cases."""


@pytest.fixture(scope="session")
def server() -> Iterator[corpus.ForkServer | None]:
    """One fork server per test process (``HOSTILE_FORK=0``: none, every case a fresh
    interpreter)."""
    if os.environ.get("HOSTILE_FORK") == "0":
        yield None
        return
    running = corpus.ForkServer()
    yield running
    running.close()


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_case(case: corpus.Case, server: corpus.ForkServer | None, tmp_path: Path) -> None:
    """The case exits as expected, says the expected first line, and touches what it may only."""
    outcome = corpus.execute(case, tmp_path, server)
    assert corpus.problems(case, outcome, tmp_path / "cwd") == [], outcome.stderr[-2000:]


def test_corpus_covers_every_surface() -> None:
    """At least 150 cases, over every surface issue 40 names."""
    names = {surface.name for surface in corpus.surfaces()}
    assert len(CASES) >= MIN_CASES
    assert names == {"cli", "dist", "graph", "measured", "msccl", "nccl", "output", "resume",
                     "scenario", "topology", "training"}


def test_table_in_docs() -> None:
    """docs/hostile.md holds the corpus's table as it is (``python tests/hostile/corpus.py``
    writes it)."""
    text = (corpus.REPO / "docs" / "hostile.md").read_text(encoding="utf-8")
    assert corpus.table(corpus.surfaces()) in text


FAULTED = """\
name: det
topology: {kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}
algorithms: [ring, halving_doubling]
sizes: [4KiB]
faults:
  - {kind: link_degraded, link: [gpu1, switch], at: 1us, factor: 0.5}
  - {kind: straggler, rank: 2, delay: 3us}
"""
"""A tiny scenario with two faults: its files must not depend on how the process was started."""


def _start(where: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """Start :data:`FAULTED` in ``where`` under ``env``, with its trace."""
    where.mkdir(parents=True)
    (where / "det.yaml").write_text(FAULTED, encoding="utf-8")
    return subprocess.Popen([sys.executable, "-m", "simulator", "run", "det.yaml", "--output",
                             "out", "--quiet", "--no-plot", "--trace", "trace.json"],
                            cwd=where, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)


def _files(where: Path, run: subprocess.Popen[str]) -> dict[str, bytes]:
    """Wait for ``run`` to end well; its CSV, JSON and trace by name."""
    _, said = run.communicate(timeout=120)
    assert run.returncode == 0, said
    return {name: (where / name).read_bytes()
            for name in ("out/det.csv", "out/det.json", "trace.json")}


def test_files_do_not_depend_on_hash_seed_cwd_time_zone_or_locale(tmp_path: Path) -> None:
    """The same faulted run under two hash seeds, directories, time zones and locales writes the
    same bytes."""
    base = corpus.environment()
    one, two = tmp_path / "a", tmp_path / "b" / "deeper"
    first = _start(one, {**base, "PYTHONHASHSEED": "1", "TZ": "UTC", "LC_ALL": "C"})
    second = _start(two, {**base, "PYTHONHASHSEED": "4242", "TZ": "Asia/Kolkata",
                          "LC_ALL": "C.UTF-8"})
    assert _files(one, first) == _files(two, second)
