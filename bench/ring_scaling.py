"""Benchmark: how the simulator's cost grows with the rank count, on ring allreduce, per engine.

Runs ring allreduce of ``--size`` bytes per rank (default 1GiB; float32, op sum, verified against
numpy) on the ``switch`` topology (every rank on its own 25GB/s, 500ns full-duplex link to one
non-blocking switch; no GPU reduction cost) for each ``--ranks`` value (default 64 256 1024), on
the vectorised engine and, up to ``--simpy-max-ranks`` (default 1024), on the SimPy engine, and
beside them a bare SimPy loop of one timeout per rank-step (2(p-1)·p timeouts: the least a
per-message SimPy engine could do), because these machines are noisy and the ratio to that loop
travels better than seconds. One line per (ranks, engine):

- ``wall_s``: wall-clock seconds of :func:`simulator.runner.run_point` (schedule, inputs,
  simulation, numpy check), best of ``--repeat`` runs of the vectorised engine (default 3; the
  first run of a size also pays the operating system's first touch of its memory) and of one run
  of the SimPy engine, measured with tracemalloc *off*.
  Building the topology is excluded; routes are computed lazily inside the run;
- ``first_s``: the first of those runs;
- ``loop_s`` and ``ratio``: the bare SimPy loop's wall time and wall_s / loop_s;
- ``py_peak_MiB``: peak of Python allocations (numpy arrays included) during one more, traced
  run of the vectorised engine (:mod:`tracemalloc`), skipped with ``--no-tracemalloc``;
- ``sim_s`` / ``model_s`` / ``rel_err``: simulated time and the closed form, which must agree
  to 1e-9 relative (on ``switch`` no two ring flows share a link);
- ``messages`` and ``events`` (SimPy events, or instants for the vectorised engine).

It draws wall time against ranks, log-log, to ``--plot`` (default
``results/bench/ring_scaling.png``).

Exits 1 if a run fails verification, errs, or leaves the closed form by more than 1e-9
relative; 2 on bad arguments. ``make bench`` runs the defaults; by hand::

    .venv/bin/python bench/ring_scaling.py --ranks 64 256 1024 4096 --simpy-max-ranks 256
    .venv/bin/python bench/ring_scaling.py --ranks 256 --size 64MiB --no-tracemalloc

To profile one point: ``python -m cProfile -s tottime bench/ring_scaling.py --ranks 1024
--simpy-max-ranks 0 --repeat 1 --no-tracemalloc``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import simpy

from simulator.errors import SimulatorError
from simulator.output.results import Result
from simulator.runner import prepare, run_point
from simulator.scenario import Engine, Scenario, TopologySpec
from simulator.settings import RunSettings
from simulator.units import parse_size

BANDWIDTH_BPS = 25e9
LATENCY_S = 500e-9
DTYPE = np.dtype("float32")
REL_TOLERANCE = 1e-9

COLUMNS = ("ranks", "engine", "wall_s", "first_s", "loop_s", "ratio", "py_peak_MiB", "sim_s",
           "model_s", "rel_err", "messages", "events", "status")
_WIDTHS = (6, 7, 9, 9, 8, 7, 11, 15, 15, 8, 9, 9, 6)


@dataclass(frozen=True)
class Measurement:
    """One benchmark point: the simulator's result and what it cost to get it."""

    result: Result
    engine: Engine
    wall_s: float
    first_s: float
    loop_s: float
    py_peak_bytes: int | None

    @property
    def rel_err(self) -> float:
        """|sim - model| relative to the model (absolute when the model is 0)."""
        model, sim = self.result.model_time_s, self.result.sim_time_s
        return abs(sim - model) / abs(model) if model else abs(sim)

    @property
    def ok(self) -> bool:
        return self.result.verified is True and self.rel_err <= REL_TOLERANCE


def scenario_for(ranks: int, size_bytes: int, engine: Engine) -> Scenario:
    """Ring allreduce of ``size_bytes`` per rank on a ``ranks``-GPU switch."""
    topology = TopologySpec("switch", {"ranks": ranks, "bandwidth": BANDWIDTH_BPS,
                                       "latency": LATENCY_S})
    return Scenario(name=f"ring-scaling-{ranks}", source="bench/ring_scaling.py", topology=topology,
                    algorithms=("ring",), sizes=(size_bytes,), dtype=DTYPE,
                    output=Path("/tmp/ring-scaling"), run=RunSettings(engine=engine))


def bare_simpy_loop(ranks: int) -> float:
    """Wall seconds of SimPy processing one timeout per rank-step of a ring allreduce:
    ``ranks`` processes of 2(ranks-1) timeouts each."""
    env = simpy.Environment()

    def rank() -> simpy.events.ProcessGenerator:
        for _ in range(2 * (ranks - 1)):
            yield env.timeout(1.0)

    for _ in range(ranks):
        env.process(rank())
    start = time.perf_counter()
    env.run()
    return time.perf_counter() - start


def measure(ranks: int, size_bytes: int, engine: Engine, *, repeat: int, loop_s: float,
            trace_memory: bool) -> Measurement:
    """Time one point ``repeat`` times untraced; then, if asked, once more under tracemalloc."""
    scenario = scenario_for(ranks, size_bytes, engine)
    setup = prepare(scenario)
    [algorithm] = setup.algorithms
    walls, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = run_point(scenario, algorithm, size_bytes, setup=setup)
        walls.append(time.perf_counter() - start)
    assert result is not None
    peak = None
    if trace_memory:
        tracemalloc.start()
        try:
            traced = run_point(scenario, algorithm, size_bytes, setup=setup)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        if (traced.sim_time_s, traced.events) != (result.sim_time_s, result.events):
            raise SimulatorError(f"rerun of {ranks} ranks differs: {traced} vs {result}")
    return Measurement(result, engine, min(walls), walls[0], loop_s, peak)


def code_version() -> str:
    """The checkout's commit, marked ``+dirty`` when simulator/ has uncommitted changes (best effort)."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "simulator"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def row(cells: tuple[object, ...]) -> str:
    return " ".join(f"{cell:>{width}}" for cell, width in zip(cells, _WIDTHS, strict=True))


def format_measurement(m: Measurement) -> str:
    r = m.result
    peak = "-" if m.py_peak_bytes is None else f"{m.py_peak_bytes / 2**20:.1f}"
    return row((r.ranks, m.engine.value, f"{m.wall_s:.3f}", f"{m.first_s:.3f}", f"{m.loop_s:.3f}",
                f"{m.wall_s / m.loop_s:.2f}", peak, f"{r.sim_time_s:.9e}", f"{r.model_time_s:.9e}",
                f"{m.rel_err:.1e}", r.messages, r.events, "ok" if m.ok else "FAIL"))


def _size(text: str) -> int:
    try:
        size = parse_size(text)
    except SimulatorError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if size <= 0 or size % DTYPE.itemsize:
        raise argparse.ArgumentTypeError(f"expected a positive multiple of {DTYPE.itemsize} bytes "
                                         f"({DTYPE.name}), got {text!r}")
    return size


def _count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = -1
    if count < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number ≥ 0, got {text!r}")
    return count


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=_count, nargs="+", default=[64, 256, 1024],
                        help="rank counts to run (default: 64 256 1024)")
    parser.add_argument("--size", type=_size, default=1 << 30,
                        help="bytes per rank, e.g. 1GiB, 64MiB, 4096 (default: 1GiB)")
    parser.add_argument("--simpy-max-ranks", type=_count, default=1024,
                        help="run the SimPy engine too up to this many ranks (default 1024)")
    parser.add_argument("--repeat", type=_count, default=3,
                        help="untraced runs per point; wall_s is the best (default 3)")
    parser.add_argument("--no-tracemalloc", dest="trace_memory", action="store_false",
                        help="skip the traced run that measures py_peak_MiB")
    parser.add_argument("--plot", type=Path, default=Path("results/bench/ring_scaling.png"),
                        help="where to draw wall time against ranks, log-log (default "
                             "results/bench/ring_scaling.png)")
    args = parser.parse_args(argv)
    if args.repeat < 1 or min(args.ranks) < 2:
        parser.error("expected --repeat ≥ 1 and every --ranks ≥ 2")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"# ring allreduce, {args.size} bytes/rank ({DTYPE.name}, sum), switch "
          f"{BANDWIDTH_BPS / 1e9:g}GB/s {LATENCY_S * 1e9:g}ns, no GPU reduction cost; "
          f"simulator {code_version()}, python {sys.version.split()[0]}")
    print(f"# wall_s: best of {args.repeat} run_point calls (first_s: the first); loop_s: a bare "
          "SimPy loop of one timeout per rank-step; ratio = wall_s / loop_s; py_peak_MiB: "
          "tracemalloc peak of one more run ('-' = skipped)")
    print(row(COLUMNS), flush=True)
    failures = 0
    measured: list[Measurement] = []
    for ranks in args.ranks:
        loop_s = bare_simpy_loop(ranks)
        engines = [Engine.VECTOR] + ([Engine.SIMPY] if ranks <= args.simpy_max_ranks else [])
        for engine in engines:
            try:
                vector = engine is Engine.VECTOR  # SimPy, minutes a run, is timed once, untraced
                measurement = measure(ranks, args.size, engine,
                                      repeat=args.repeat if vector else 1, loop_s=loop_s,
                                      trace_memory=args.trace_memory and vector)
            except SimulatorError as error:
                print(row((ranks, engine.value, *["-"] * (len(COLUMNS) - 3), "FAIL")), flush=True)
                print(f"#   {ranks} ranks: {error}", file=sys.stderr)
                failures += 1
                continue
            print(format_measurement(measurement), flush=True)
            measured.append(measurement)
            if not measurement.ok:
                failures += 1
                r = measurement.result
                print(f"#   {ranks} ranks: verified={r.verified} (max abs error "
                      f"{r.max_abs_error:g}), sim {r.sim_time_s!r} s vs closed form "
                      f"{r.model_time_s!r} s", file=sys.stderr)
    if measured:
        plot(measured, args.plot)
        print(f"# plot: {args.plot}")
    return 1 if failures else 0


def plot(measured: list[Measurement], path: Path) -> None:
    """Wall time against ranks, log-log, per engine and for the bare SimPy loop."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for engine in Engine.VECTOR, Engine.SIMPY:
        points = [(m.result.ranks, m.wall_s) for m in measured if m.engine is engine]
        if points:
            axes.plot(*zip(*points, strict=True), marker="o", label=f"{engine.value} engine")
    loops = sorted({(m.result.ranks, m.loop_s) for m in measured})
    axes.plot(*zip(*loops, strict=True), linestyle="--", color="grey",
              label="bare SimPy loop (a timeout per rank-step)")
    axes.set(xscale="log", yscale="log", xlabel="ranks", ylabel="wall time (s)",
             title="ring allreduce, 1 GiB per rank, switch")
    axes.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)


if __name__ == "__main__":
    sys.exit(main())
