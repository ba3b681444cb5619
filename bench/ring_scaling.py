"""Benchmark: how the simulator's cost grows with the rank count, on ring allreduce.

Runs ring allreduce of ``--size`` bytes per rank (default 1GiB; float32, op sum, verified against
numpy) on the ``switch`` topology (every rank on its own 25GB/s, 500ns full-duplex link to one
non-blocking switch; no GPU reduction cost) for each ``--ranks`` value (default 64 256 1024), and
prints a header (parameters, the simulator's git commit) and one line per rank count:

- ``wall_s``: wall-clock seconds of :func:`simulator.runner.run_point` (inputs, simulation,
  numpy check), measured with tracemalloc *off*. Building the topology is excluded; routes are
  computed lazily on first use, so their cost is inside ``wall_s``;
- ``py_peak_MiB``: peak of Python allocations (numpy arrays included) during the run, from
  :mod:`tracemalloc`. Tracing every allocation slows the engine about fivefold, so this comes from
  a second, traced run of the same point, which dominates the script's running time (at 1024 ranks
  ~2.5 min untraced, ~10 min traced); skip it with ``--no-tracemalloc``;
- ``maxrss_MiB``: the process's resident-set high-water mark so far
  (``resource.getrusage(RUSAGE_SELF).ru_maxrss``): cumulative over the runs before it, so it is
  per-run only when rank counts are given in increasing order;
- ``sim_s`` / ``model_s``: simulated time and the closed form (docs/algorithms.md), which must agree
  to 1e-9 relative, since on ``switch`` no two ring flows share a link;
- ``messages``, ``events`` (SimPy events processed) and ``events_per_s`` (= events / wall_s).

Exits 1 if a run fails verification, errs, or its simulated time leaves the closed form by more
than 1e-9 relative; 2 on bad arguments. ``make bench`` runs it with the defaults; by hand::

    .venv/bin/python bench/ring_scaling.py                       # 64 256 1024 ranks, 1GiB
    .venv/bin/python bench/ring_scaling.py --ranks 64 256 --size 64MiB --no-tracemalloc

To profile one point: ``python -m cProfile -s tottime bench/ring_scaling.py --ranks 256
--no-tracemalloc``.
"""

from __future__ import annotations

import argparse
import math
import resource
import subprocess
import sys
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.errors import SimulatorError
from simulator.output.results import Result
from simulator.runner import prepare, run_point
from simulator.scenario import Scenario, TopologySpec
from simulator.units import parse_size

BANDWIDTH_BPS = 25e9
LATENCY_S = 500e-9
DTYPE = np.dtype("float32")
REL_TOLERANCE = 1e-9

COLUMNS = ("ranks", "wall_s", "py_peak_MiB", "maxrss_MiB", "sim_s", "model_s", "rel_err",
           "messages", "events", "events_per_s", "status")
_WIDTHS = (6, 9, 11, 10, 14, 14, 9, 9, 10, 12, 6)


@dataclass(frozen=True)
class Measurement:
    """One benchmark point: the simulator's result and what it cost to get it."""

    result: Result
    wall_s: float
    py_peak_bytes: int | None
    maxrss_bytes: int

    @property
    def rel_err(self) -> float:
        """|sim - model| relative to the model (absolute when the model is 0)."""
        model, sim = self.result.model_time_s, self.result.sim_time_s
        return abs(sim - model) / abs(model) if model else abs(sim)

    @property
    def ok(self) -> bool:
        return self.result.verified is True and self.rel_err <= REL_TOLERANCE


def scenario_for(ranks: int, size_bytes: int) -> Scenario:
    """Ring allreduce of ``size_bytes`` per rank on a ``ranks``-GPU switch."""
    topology = TopologySpec("switch", {"ranks": ranks, "bandwidth": BANDWIDTH_BPS,
                                       "latency": LATENCY_S})
    return Scenario(name=f"ring-scaling-{ranks}", source="bench/ring_scaling.py", topology=topology,
                    algorithms=("ring",), sizes=(size_bytes,), dtype=DTYPE,
                    output=Path("/tmp/ring-scaling"))


def measure(ranks: int, size_bytes: int, *, trace_memory: bool) -> Measurement:
    """Time one point untraced; then, if asked, rerun it under tracemalloc for its peak."""
    scenario = scenario_for(ranks, size_bytes)
    setup = prepare(scenario)
    [algorithm] = setup.algorithms
    start = time.perf_counter()
    result = run_point(scenario, algorithm, size_bytes, setup=setup)
    wall_s = time.perf_counter() - start
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
    return Measurement(result, wall_s, peak, maxrss_bytes())


def maxrss_bytes() -> int:
    """The process's peak resident set so far (Linux reports KiB, macOS bytes)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024


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
    rate = r.events / m.wall_s if m.wall_s > 0 else math.nan
    return row((r.ranks, f"{m.wall_s:.3f}", peak, f"{m.maxrss_bytes / 2**20:.1f}",
                f"{r.sim_time_s:.9e}", f"{r.model_time_s:.9e}", f"{m.rel_err:.1e}",
                r.messages, r.events, f"{rate:,.0f}", "ok" if m.ok else "FAIL"))


def _size(text: str) -> int:
    try:
        size = parse_size(text)
    except SimulatorError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if size <= 0 or size % DTYPE.itemsize:
        raise argparse.ArgumentTypeError(f"expected a positive multiple of {DTYPE.itemsize} bytes "
                                         f"({DTYPE.name}), got {text!r}")
    return size


def _ranks(text: str) -> int:
    try:
        ranks = int(text)
    except ValueError:
        ranks = 0
    if ranks < 1:
        raise argparse.ArgumentTypeError(f"expected a positive rank count, got {text!r}")
    return ranks


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=_ranks, nargs="+", default=[64, 256, 1024],
                        help="rank counts to run (default: 64 256 1024)")
    parser.add_argument("--size", type=_size, default=1 << 30,
                        help="bytes per rank, e.g. 1GiB, 64MiB, 4096 (default: 1GiB)")
    parser.add_argument("--no-tracemalloc", dest="trace_memory", action="store_false",
                        help="skip the traced rerun that measures py_peak_MiB")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"# ring allreduce, {args.size} bytes/rank ({DTYPE.name}, sum), switch "
          f"{BANDWIDTH_BPS / 1e9:g}GB/s {LATENCY_S * 1e9:g}ns, no GPU reduction cost; "
          f"simulator {code_version()}, python {sys.version.split()[0]}")
    print("# wall_s: run_point without tracemalloc; py_peak_MiB: tracemalloc peak of a traced rerun "
          "('-' = skipped); maxrss_MiB: getrusage(RUSAGE_SELF).ru_maxrss, process high-water mark so far")
    print(row(COLUMNS), flush=True)
    failures = 0
    for ranks in args.ranks:
        try:
            measurement = measure(ranks, args.size, trace_memory=args.trace_memory)
        except SimulatorError as error:
            print(row((ranks, *["-"] * (len(COLUMNS) - 2), "FAIL")), flush=True)
            print(f"#   {ranks} ranks: {error}", file=sys.stderr)
            failures += 1
            continue
        print(format_measurement(measurement), flush=True)
        if not measurement.ok:
            failures += 1
            r = measurement.result
            print(f"#   {ranks} ranks: verified={r.verified} (max abs error {r.max_abs_error:g}), "
                  f"sim {r.sim_time_s!r} s vs closed form {r.model_time_s!r} s", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
