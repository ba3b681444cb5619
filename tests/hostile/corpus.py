"""The hostile corpus (issue 40, item 8): bad inputs over every surface, each a case of data in
``tests/hostile/<surface>.yaml``, loaded, set up in a scratch directory, run and checked here.

A case is a mapping: ``id``; ``files`` (name -> content: text, or ``{gen: [[piece, times], ...]}``
for large generated content, ``{hex: ...}`` for bytes, ``{copy: repo path}``, ``{symlink: target}``,
``{dir: true}``, ``{fifo: true}``, with ``mode`` to chmod); optional ``before`` (command lines run
first, each of which must exit 0), ``then`` (files written after them) and ``replace`` (path ->
``[[old, new], ...]``: text replaced in a file they wrote, each ``old`` present); ``run`` (the arguments
after ``python -m simulator``) or ``python`` (a script and its arguments); ``env``; the expected
``exit`` code and first stderr line (``stderr``, exact, or ``stderr_re``, a regex; ``{cwd}``
stands for the scratch directory); ``lines``, the stderr lines expected (default 1 when the exit
is 2: one line per problem); ``untouched`` (files whose bytes must not change; by default every
file present before the run) and ``absent`` (paths the run must not create). A case that exits
2 (bad input) must leave the directory exactly as it found it: nothing written, nothing changed.

Python's start and the package's imports take about two seconds a process, too long for the
corpus to run in ``make test`` in under two minutes on two cores; so each command runs in a
process forked from a server that imported the package once (:class:`ForkServer`), with its own
working directory, environment and standard streams, as ``python -m simulator`` would.
``HOSTILE_FORK=0`` runs every case in a fresh interpreter instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent

TIMEOUT_S = 60
"""A case's limit: every case fails fast in parsing or runs a few tiny points, well under a
second alone; 60 s leaves room for a loaded two-core machine, and a hang still fails."""

LINE_LIMIT = 1000
"""The longest stderr line any case may print: a line for a person quotes at most ~80 characters
of a value (issue 40), and the longest lines here, which list every name a field accepts, stay
under 500; a line that echoes a 100,000-character input does not pass."""

GEN_LIMIT = 20_000_000
"""The most bytes a ``gen`` entry may make: the largest attack the corpus needs is a
15-million-character attribute (issue 40), and nothing larger belongs in a test."""


@dataclass(frozen=True)
class Case:
    """One hostile input: its files, its command line and what must come of it."""

    surface: str
    id: str
    files: Mapping[str, Any]
    argv: tuple[str, ...]
    script: bool
    exit: int
    stderr: str | None
    stderr_re: str | None
    lines: int | None
    untouched: tuple[str, ...] | None
    absent: tuple[str, ...]
    before: tuple[tuple[str, ...], ...] = ()
    then: Mapping[str, Any] = field(default_factory=dict)
    replace: Mapping[str, list[list[str]]] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The case's test id: ``surface/id``."""
        return f"{self.surface}/{self.id}"


@dataclass(frozen=True)
class Surface:
    """A manifest: one input surface, its title for the table, and its cases."""

    name: str
    title: str
    cases: tuple[Case, ...]


def _case(surface: str, raw: Mapping[str, Any]) -> Case:
    """A case from its manifest entry (see the module's docstring for the keys)."""
    known = {"id", "files", "run", "python", "exit", "stderr", "stderr_re", "lines", "untouched",
             "absent", "before", "then", "replace", "env", "note"}
    unknown = set(raw) - known
    if unknown:
        raise ValueError(f"{surface}/{raw.get('id')}: unknown keys {sorted(unknown)}")
    script = "python" in raw
    return Case(surface=surface, id=str(raw["id"]), files=raw.get("files") or {},
                argv=tuple(str(a) for a in raw["python" if script else "run"]), script=script,
                exit=int(raw["exit"]), stderr=raw.get("stderr"), stderr_re=raw.get("stderr_re"),
                lines=raw.get("lines", 1 if raw["exit"] == 2 else None),
                untouched=None if "untouched" not in raw else tuple(raw["untouched"]),
                absent=tuple(raw.get("absent") or ()),
                before=tuple(tuple(str(a) for a in argv) for argv in raw.get("before") or ()),
                then=raw.get("then") or {}, replace=raw.get("replace") or {},
                env={key: str(value) for key, value in (raw.get("env") or {}).items()})


def surfaces() -> tuple[Surface, ...]:
    """Every manifest of ``tests/hostile/``, in name order."""
    found = []
    for path in sorted(HERE.glob("*.yaml")):
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        cases = tuple(_case(path.stem, entry) for entry in raw["cases"])
        ids = [case.id for case in cases]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{path.name}: duplicate case ids")
        found.append(Surface(path.stem, raw["title"], cases))
    return tuple(found)


def cases() -> list[Case]:
    """Every case of every surface."""
    return [case for surface in surfaces() for case in surface.cases]


def _generated(pieces: list[list[Any]]) -> bytes:
    """The content of a ``gen`` entry: each ``[piece, times]`` repeated, in order."""
    size = sum(len(str(piece).encode()) * int(times) for piece, times in pieces)
    if size > GEN_LIMIT:
        raise ValueError(f"gen: {size} bytes, more than {GEN_LIMIT}")
    return b"".join(str(piece).encode() * int(times) for piece, times in pieces)


def materialise(root: Path, files: Mapping[str, Any]) -> None:
    """Create ``files`` under ``root`` (see the module's docstring for the kinds of entry)."""
    for name, spec in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        entry = spec if isinstance(spec, Mapping) else {"text": spec}
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.is_symlink() or path.exists():
            path.unlink()
        if "symlink" in entry:
            path.symlink_to(entry["symlink"])
            continue
        if entry.get("dir"):
            path.mkdir()
        elif entry.get("fifo"):
            os.mkfifo(path)
        elif "gen" in entry:
            path.write_bytes(_generated(entry["gen"]))
        elif "hex" in entry:
            path.write_bytes(bytes.fromhex(entry["hex"]))
        elif "copy" in entry:
            path.write_bytes((REPO / entry["copy"]).read_bytes())
        else:
            path.write_bytes(str(entry["text"]).encode())
        if "mode" in entry:
            path.chmod(int(entry["mode"]))


def snapshot(root: Path) -> dict[str, tuple[str, bytes]]:
    """Every entry under ``root`` by relative path: its kind and, for a file, its bytes (a
    symlink's target, never followed; a FIFO never opened)."""
    found: dict[str, tuple[str, bytes]] = {}
    for top, dirs, names in os.walk(root):
        for name in dirs + names:
            path = Path(top) / name
            info = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("symlink", os.readlink(path).encode())
            elif stat.S_ISREG(info.st_mode):
                found[rel] = ("file", path.read_bytes())
            elif stat.S_ISDIR(info.st_mode):
                found[rel] = ("dir", b"")
            else:
                found[rel] = ("other", b"")
    return found


SERVER = r"""
import atexit, json, os, runpy, signal, sys, traceback
import simulator.cli, simulator.runner, simulator.output.observed, simulator.distributed
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.chdir(job["cwd"])
            os.environ.clear()
            os.environ.update(job["env"])
            for fd, name in ((0, os.devnull), (1, job["stdout"]), (2, job["stderr"])):
                os.dup2(os.open(name, os.O_RDONLY if fd == 0 else os.O_WRONLY | os.O_CREAT), fd)
            signal.alarm(job["timeout"])
            sys.argv = list(job["argv"])
            try:
                if job["script"]:
                    sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
                    runpy.run_path(sys.argv[0], run_name="__main__")
                else:
                    runpy.run_module("simulator", run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as stop:
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
                if not isinstance(stop.code, int) and stop.code is not None:
                    print(stop.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    sys.stdout.write(json.dumps(code) + "\n")
    sys.stdout.flush()
"""
"""The fork server: imports the package once, then forks a child per command read from stdin
(one JSON line each), which runs it as ``python -m simulator`` (or ``python SCRIPT``) would and
exits with its code; the server answers each with the child's exit code (negative: a signal)."""


def environment(extra: Mapping[str, str] = {}) -> dict[str, str]:
    """The environment every case runs in: this repository on ``PYTHONPATH``, matplotlib headless
    and its cache outside the case's directory, plus the case's own variables."""
    env = {key: os.environ[key] for key in ("PATH", "HOME", "LANG", "TMPDIR") if key in os.environ}
    env.update(PYTHONPATH=str(REPO), MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1",
               MPLCONFIGDIR=str(Path(os.environ.get("TMPDIR", "/tmp")) / "hostile-mpl"))
    env.update(extra)
    return env


class ForkServer:
    """A server process that imported the package (:data:`SERVER`), running commands by fork."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=environment(),
                                        cwd=REPO)

    def run(self, argv: list[str], *, script: bool, cwd: Path, env: Mapping[str, str],
            out: Path, err: Path) -> int:
        """Run one command in a forked child; its exit code (negative: the signal that ended it)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        job = {"argv": argv if script else ["python -m simulator", *argv], "script": script,
               "cwd": str(cwd), "env": dict(env), "stdout": str(out), "stderr": str(err),
               "timeout": TIMEOUT_S}
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        return int(json.loads(self.process.stdout.readline()))

    def close(self) -> None:
        """End the server: close its input, so its loop ends, and reap it."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=TIMEOUT_S)


def run_fresh(argv: list[str], *, script: bool, cwd: Path, env: Mapping[str, str], out: Path,
              err: Path) -> int:
    """Run one command in a fresh interpreter, ``python -m simulator ARGS`` or ``python SCRIPT``."""
    command = [sys.executable, *(argv if script else ["-m", "simulator", *argv])]
    with out.open("wb") as stdout, err.open("wb") as stderr:
        try:
            return subprocess.run(command, cwd=cwd, env=dict(env), stdout=stdout, stderr=stderr,
                                  stdin=subprocess.DEVNULL, timeout=TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            return -14


@dataclass(frozen=True)
class Outcome:
    """What a case did: its exit code, its stderr, and its directory before and after."""

    code: int
    stderr: str
    before: dict[str, tuple[str, bytes]]
    after: dict[str, tuple[str, bytes]]

    @property
    def first_line(self) -> str:
        """The first line of stderr ('' when it said nothing)."""
        return self.stderr.splitlines()[0] if self.stderr.strip() else ""


def execute(case: Case, scratch: Path, server: ForkServer | None) -> Outcome:
    """Set up ``case`` in ``scratch`` (its working directory is ``scratch/cwd``), run it, and
    return what it did."""
    cwd = scratch / "cwd"
    cwd.mkdir()
    materialise(cwd, case.files)
    env = environment({key: value.replace("{cwd}", str(cwd)) for key, value in case.env.items()})

    def one(argv: tuple[str, ...], script: bool, name: str) -> tuple[int, str]:
        out, err = scratch / f"{name}.out", scratch / f"{name}.err"
        args = [arg.replace("{cwd}", str(cwd)) for arg in argv]
        if server is None:
            code = run_fresh(args, script=script, cwd=cwd, env=env, out=out, err=err)
        else:
            code = server.run(args, script=script, cwd=cwd, env=env, out=out, err=err)
        return code, err.read_bytes().decode("utf-8", "replace")

    for index, argv in enumerate(case.before):
        code, said = one(argv, False, f"before{index}")
        if code != 0:
            raise AssertionError(f"{case.name}: before {list(argv)} exited {code}: {said[-2000:]}")
    materialise(cwd, case.then)
    for name, pairs in case.replace.items():
        text = (cwd / name).read_text(encoding="utf-8")
        for old, new in pairs:
            if old not in text:
                raise AssertionError(f"{case.name}: replace: {old!r} not in {name}")
            text = text.replace(old, new)
        (cwd / name).write_text(text, encoding="utf-8")
    before = snapshot(cwd)
    code, said = one(case.argv, case.script, "case")
    after = snapshot(cwd)
    _restore_modes(cwd)
    return Outcome(code, said, before, after)


def _restore_modes(root: Path) -> None:
    """Make every directory under ``root`` writable again, so pytest can remove it."""
    for top, dirs, _ in os.walk(root):
        for name in dirs:
            path = Path(top) / name
            if not path.is_symlink():
                path.chmod(0o755)


def problems(case: Case, outcome: Outcome, cwd: Path) -> list[str]:
    """Every way ``outcome`` differs from what ``case`` expects (empty: it passed)."""
    found = []
    if outcome.code != case.exit:
        found.append(f"exit {outcome.code}, expected {case.exit}")
    first = outcome.first_line
    if case.stderr is not None and first != case.stderr.replace("{cwd}", str(cwd)):
        found.append(f"first stderr line {first[:300]!r}, expected {case.stderr!r}")
    if case.stderr_re is not None and not re.fullmatch(case.stderr_re.replace("{cwd}", re.escape(
            str(cwd))), first):
        found.append(f"first stderr line {first[:300]!r} does not match {case.stderr_re!r}")
    found.extend(f"a stderr line of {len(line):,} characters, more than {LINE_LIMIT}"
                 for line in outcome.stderr.splitlines() if len(line) > LINE_LIMIT)
    lines = len(outcome.stderr.splitlines())
    if case.lines is not None and lines != case.lines:
        found.append(f"{lines} stderr lines, expected {case.lines}: {outcome.stderr[-600:]!r}")
    if case.exit == 2 and outcome.after != outcome.before:
        changed = sorted(name for name in set(outcome.before) | set(outcome.after)
                         if outcome.before.get(name) != outcome.after.get(name))
        found.append(f"a failed run changed its directory: {changed}")
    untouched = case.untouched if case.untouched is not None else tuple(outcome.before)
    for name in untouched:
        if outcome.before.get(name) != outcome.after.get(name):
            found.append(f"{name} changed or removed")
    found.extend(f"{name} was created" for name in case.absent
                 if name not in outcome.before and name in outcome.after)
    return found


def table(found: tuple[Surface, ...]) -> str:
    """The corpus's table in Markdown: each surface, its title and how many cases it holds."""
    rows = [f"| `{surface.name}` | {surface.title} | {len(surface.cases)} |" for surface in found]
    total = sum(len(surface.cases) for surface in found)
    return "\n".join(["| surface | what | cases |", "|---|---|---:|", *rows,
                      f"| **all** | | **{total}** |"])




def write_table(doc: Path) -> None:
    """Put the corpus's table in ``doc`` between its two marker comments."""
    text = doc.read_text(encoding="utf-8")
    start, end = "<!-- corpus table: python tests/hostile/corpus.py -->\n", "<!-- end of table -->"
    head, rest = text.split(start)
    _, tail = rest.split(end)
    doc.write_text(head + start + table(surfaces()) + "\n" + end + tail, encoding="utf-8")


if __name__ == "__main__":
    write_table(REPO / "docs" / "hostile.md")
