"""Benchmark: the simulator's wall time against ranks and against size, per algorithm, with fits.

For ring, the NCCL tree (``double_binary_tree``: NCCL's double binary tree across hosts, a chain
inside each), halving-doubling and hierarchical allreduce (float32, op sum, verified against
numpy), on ``dgx_h100`` hosts of 8 GPUs under ``execution: ideal`` on the vectorised engine:

- against ranks: ``--size`` (default 16 MiB) on ``--ranks`` GPUs (default 64 to 4,096 by 2);
- against size: ``--sizes`` (default 1 MiB to 4 GiB by 4) on ``--size-ranks`` GPUs (default 256).

Each point prints its wall time (:func:`simulator.runner.run_point` with the machine built
beforehand: schedule, inputs, simulation, numpy check), its messages and instants, and its
simulated time. Then, per algorithm and sweep, the least-squares exponents of wall time,
messages and instants (the slope of log y against log x): where the wall time's exponent exceeds
the messages', the per-message cost grows with the run, and ``docs/benchmark.md`` says why.
Draws both sweeps log-log to ``--plot`` (default ``results/bench/scaling_law.png``).

Exits 1 if a point fails verification or errs; 2 on bad arguments. ::

    .venv/bin/python bench/scaling_law.py                              # ~15 minutes on 2 cores
    .venv/bin/python bench/scaling_law.py --ranks 64 256 --sizes 1MiB 16MiB --algorithms ring
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.errors import SimulatorError
from simulator.runner import prepare, run_point
from simulator.scenario import Scenario
from simulator.scenario.parse import scenario_from_dict
from simulator.units import format_size, parse_size

GPUS_PER_HOST = 8
ALGORITHMS = ("ring", "double_binary_tree", "halving_doubling", "hierarchical")
DEFAULT_RANKS = (64, 128, 256, 512, 1024, 2048, 4096)
DEFAULT_SIZES = tuple(1 << s for s in range(20, 33, 2))
COLUMNS = ("sweep", "algorithm", "ranks", "size", "wall_s", "messages", "instants",
           "us_per_message", "sim_s", "verified")
_WIDTHS = (6, 19, 6, 8, 9, 10, 9, 14, 15, 8)


@dataclass(frozen=True)
class Point:
    """One measured point: what ran, what it cost, what it simulated."""

    sweep: str
    algorithm: str
    ranks: int
    size_bytes: int
    wall_s: float
    messages: int
    instants: int
    sim_s: float
    verified: bool


@dataclass(frozen=True)
class Fit:
    """Exponents of one algorithm's sweep: y ∝ x^exponent for wall time, messages, instants."""

    sweep: str
    algorithm: str
    wall: float
    messages: float
    instants: float


def scenario_for(ranks: int, size_bytes: int, algorithm: str) -> Scenario:
    """``algorithm`` at ``size_bytes`` on ``ranks / 8`` DGX H100 hosts, the ideal wire."""
    if ranks % GPUS_PER_HOST:
        raise SimulatorError(f"--ranks: expected multiples of {GPUS_PER_HOST} (whole DGX hosts), "
                             f"got {ranks}")
    return scenario_from_dict({
        "name": f"scaling-{algorithm}-{ranks}",
        "topology": {"preset": "dgx_h100", "nodes": ranks // GPUS_PER_HOST},
        "algorithms": [algorithm], "sizes": [size_bytes], "execution": "ideal",
        "engine": "vector", "output": "/tmp/scaling-law"}, source="bench/scaling_law.py")


def measure(sweep: str, algorithm: str, ranks: int, size_bytes: int) -> Point:
    """Run one point once, the machine built before the clock starts."""
    scenario = scenario_for(ranks, size_bytes, algorithm)
    setup = prepare(scenario)
    [chosen] = setup.algorithms
    gc.collect()
    start = time.perf_counter()
    result = run_point(scenario, chosen, size_bytes, setup=setup)
    wall = time.perf_counter() - start
    return Point(sweep, algorithm, ranks, size_bytes, wall, result.messages, result.events,
                 result.sim_time_s, result.verified is True)


def exponent(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log y against log x (nan with fewer than two points)."""
    if len(xs) < 2 or min(ys) <= 0:
        return float("nan")
    slope, _ = np.polyfit(np.log(xs), np.log(ys), 1)
    return float(slope)


def fits(points: list[Point]) -> list[Fit]:
    """One fit per (sweep, algorithm): against ranks for ``ranks``, against size for ``size``."""
    out = []
    for sweep in ("ranks", "size"):
        for algorithm in dict.fromkeys(p.algorithm for p in points):
            mine = [p for p in points if p.sweep == sweep and p.algorithm == algorithm]
            if not mine:
                continue
            xs = [float(p.ranks if sweep == "ranks" else p.size_bytes) for p in mine]
            out.append(Fit(sweep, algorithm, exponent(xs, [p.wall_s for p in mine]),
                           exponent(xs, [float(p.messages) for p in mine]),
                           exponent(xs, [float(p.instants) for p in mine])))
    return out


def row(cells: tuple[object, ...]) -> str:
    return " ".join(f"{cell:>{width}}" for cell, width in zip(cells, _WIDTHS, strict=True))


def format_point(p: Point) -> str:
    per_message = 1e6 * p.wall_s / p.messages if p.messages else float("nan")
    return row((p.sweep, p.algorithm, p.ranks, format_size(p.size_bytes), f"{p.wall_s:.3f}",
                p.messages, p.instants, f"{per_message:.3f}", f"{p.sim_s:.9e}",
                "yes" if p.verified else "NO"))


def plot(points: list[Point], path: Path) -> None:
    """Wall time against ranks and against size, log-log, one line per algorithm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for axis, sweep, label in ((axes[0], "ranks", "ranks"), (axes[1], "size", "bytes per rank")):
        for algorithm in dict.fromkeys(p.algorithm for p in points):
            mine = [p for p in points if p.sweep == sweep and p.algorithm == algorithm]
            if mine:
                xs = [p.ranks if sweep == "ranks" else p.size_bytes for p in mine]
                axis.loglog(xs, [p.wall_s for p in mine], marker="o", label=algorithm)
        axis.set_xlabel(label)
        axis.set_ylabel("wall seconds")
        axis.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    figure.suptitle("allreduce-sim wall time, dgx_h100 hosts, vectorised engine")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _size(text: str) -> int:
    try:
        size = parse_size(text)
    except SimulatorError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if size <= 0 or size % 4:
        raise argparse.ArgumentTypeError(f"expected a positive multiple of 4 bytes (float32), "
                                         f"got {text!r}")
    return size


def _ranks(text: str) -> int:
    try:
        ranks = int(text)
    except ValueError:
        ranks = 0
    if ranks < 2 * GPUS_PER_HOST or ranks % GPUS_PER_HOST:
        raise argparse.ArgumentTypeError(f"expected a multiple of {GPUS_PER_HOST} of at least "
                                         f"{2 * GPUS_PER_HOST} (two DGX hosts), got {text!r}")
    return ranks


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithms", nargs="+", choices=ALGORITHMS, default=list(ALGORITHMS))
    parser.add_argument("--ranks", type=_ranks, nargs="*", default=list(DEFAULT_RANKS),
                        help="rank counts of the sweep against ranks (default 64 to 4096 by 2)")
    parser.add_argument("--size", type=_size, default=16 << 20,
                        help="bytes per rank of the sweep against ranks (default 16MiB)")
    parser.add_argument("--sizes", type=_size, nargs="*", default=list(DEFAULT_SIZES),
                        help="sizes of the sweep against size (default 1MiB to 4GiB by 4)")
    parser.add_argument("--size-ranks", type=_ranks, default=256,
                        help="ranks of the sweep against size (default 256)")
    parser.add_argument("--plot", type=Path, default=Path("results/bench/scaling_law.png"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    plan = [("ranks", algorithm, ranks, args.size) for algorithm in args.algorithms
            for ranks in args.ranks]
    plan += [("size", algorithm, args.size_ranks, size) for algorithm in args.algorithms
             for size in args.sizes]
    print(row(COLUMNS), flush=True)
    points, failed = [], False
    for sweep, algorithm, ranks, size in plan:
        try:
            point = measure(sweep, algorithm, ranks, size)
        except SimulatorError as error:
            print(f"{sweep} {algorithm} {ranks} {format_size(size)}: {error}", file=sys.stderr)
            failed = True
            continue
        failed |= not point.verified
        points.append(point)
        print(format_point(point), flush=True)
    print()
    print(f"{'sweep':>6} {'algorithm':>19} {'wall_exp':>9} {'messages_exp':>13} "
          f"{'instants_exp':>13}")
    for fit in fits(points):
        print(f"{fit.sweep:>6} {fit.algorithm:>19} {fit.wall:9.2f} {fit.messages:13.2f} "
              f"{fit.instants:13.2f}")
    if points:
        plot(points, args.plot)
        print(f"\nplot: {args.plot}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
