"""Benchmark: the simulator's wall time against ranks and against size, per algorithm, with fits.

Four sweeps, each chosen with ``--sweep`` (repeat it for several; the default runs all four),
on the vectorised engine (float32, op sum, verified against numpy):

- ``ranks`` and ``size``, under ``execution: ideal``, for ring, the NCCL tree
  (``double_binary_tree``: NCCL's double binary tree across hosts, a chain inside each),
  halving-doubling and hierarchical allreduce (``--algorithms``) on ``dgx_h100`` hosts of 8 GPUs:
  against ranks ``--size`` (default 16 MiB) on ``--ranks`` GPUs (default 64 to 4,096 by 2);
  against size ``--sizes`` (default 1 MiB to 4 GiB by 4) on ``--size-ranks`` GPUs (default 256);
- ``nccl-size``, under ``execution: nccl`` (NCCL's protocols, channels and pieces), for ring,
  the NCCL tree and NVLSTree (``nvls_tree``, NVLink SHARP in each host; ``--nccl-algorithms``):
  ``--nccl-sizes`` (default 1 MiB to 4 GiB by 4) on ``--nccl-ranks`` GPUs of ``dgx_h100`` hosts
  on one leaf (default 64, 8 hosts). Once the pipeline is steady, the steady-state fast-forward
  (:mod:`simulator.engine.steady`) should make the wall time independent of the size;
- ``nccl-gpus``, NCCL's pick (``algorithms: auto``, ``execution: nccl``: the algorithm and
  protocol NCCL's tuner picks, as nccl-tests runs it) at ``--gpus-sizes`` (default 1 GiB) on
  ``--gpus`` GPUs of ``--gpus-preset`` (default ``dgx_h100_superpod``, 64 to 8,192 by 2).

Every point runs in a child process (forked, the simulator already imported), stopped after
``--budget`` seconds (default 120) and reported as over budget; such points are left out of
the fits, which say so. Once a point is over budget, the larger points of its line (sweep,
algorithm, fixed size or ranks) are reported over budget without running (``--keep-going``
runs them). Each point prints the seconds building and checking its machine (``setup_s``,
before the clock starts), its wall time (``wall_s``: the plan, the inputs, the simulation and
the numpy check) and the CPU time of it (``cpu_s``: less than ``wall_s`` where others share the
cores), its messages and instants, the instants the fast-forward jumped over instead of
processing (``jumped``, counted in ``vector._Run.run`` as ``bench/pathologies.py`` counts
them), µs of wall time per message, its simulated time, what ran (``pick``: the algorithm, and
NCCL's protocol under ``nccl``), whether it verified, and the child's peak resident memory (the
parent's imports included). Then, per sweep, algorithm and fixed size or ranks, the
least-squares exponents of wall time, CPU time, messages and instants (the slope of log y
against log x): where the wall time's exponent exceeds the messages', the per-message cost
grows with the run, and ``docs/benchmark.md`` says why. ``--fast-forward off`` runs every point
with ``fast_forward: false``. Draws the sweeps log-log to ``--plot`` (default
``results/bench/scaling_law.png``).

Exits 1 if a point fails verification or errs; 2 on bad arguments (over budget is neither).
Time on a 2-core machine: the default run ~12 minutes idle (~6 of them the points, by their CPU
seconds at d0bac39; the rest the points that reach the budget: the NCCL tree at 1 GiB on 256
GPUs, NCCL's pick from 512 GPUs); with the cores shared at load 11, about three times each
point's time (all four sweeps with ``--budget 300 --gpus-sizes 256MiB 1GiB``: 38 minutes). Alone:
``--sweep ranks`` ~2.5 minutes idle, ``size`` ~3, ``nccl-size`` ~1.5, ``nccl-gpus`` ~6. ::

    .venv/bin/python bench/scaling_law.py                              # all four sweeps
    .venv/bin/python bench/scaling_law.py --sweep nccl-size --sweep nccl-gpus --budget 300
    .venv/bin/python bench/scaling_law.py --sweep ranks --ranks 64 256 --algorithms ring
    .venv/bin/python bench/scaling_law.py --sweep nccl-gpus --gpus 64 128 --budget 30
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import resource
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from simulator.errors import SimulatorError
from simulator.runner import checked_setup, plan_points, run_plan, settings_of
from simulator.scenario import Scenario
from simulator.scenario.parse import scenario_from_dict
from simulator.units import format_size, parse_size

GPUS_PER_HOST = 8
ALGORITHMS = ("ring", "double_binary_tree", "halving_doubling", "hierarchical")
"""The algorithms of the ``ranks`` and ``size`` sweeps (``execution: ideal``)."""
NCCL_ALGORITHMS = ("ring", "double_binary_tree", "nvls_tree")
"""The algorithms of the ``nccl-size`` sweep: NCCL's ring, tree and NVLSTree kernels."""
AUTO = "auto"
"""The ``algorithm`` of a ``nccl-gpus`` point: NCCL's pick, whatever it is."""
SWEEPS = ("ranks", "size", "nccl-size", "nccl-gpus")
AGAINST = {"ranks": "ranks", "size": "size", "nccl-size": "size", "nccl-gpus": "ranks"}
"""What each sweep varies: the ranks (its size fixed) or the size (its ranks fixed)."""
PRESETS = ("dgx_h100", "dgx_h100_superpod")
DEFAULT_RANKS = (64, 128, 256, 512, 1024, 2048, 4096)
DEFAULT_SIZES = tuple(1 << s for s in range(20, 33, 2))
DEFAULT_GPUS = tuple(64 << k for k in range(8))
COLUMNS = ("sweep", "algorithm", "ranks", "size", "setup_s", "wall_s", "cpu_s", "messages",
           "instants", "jumped", "us_per_message", "sim_s", "pick", "verified", "rss_MiB")
_WIDTHS = (9, 18, 5, 6, 7, 8, 8, 10, 9, 9, 14, 15, 24, 8, 7)


@dataclass(frozen=True)
class Task:
    """One point to measure: its sweep, the algorithm (a registry name, or :data:`AUTO` for
    NCCL's pick), the GPUs, the bytes per rank, the execution model and the topology preset."""

    sweep: str
    algorithm: str
    ranks: int
    size_bytes: int
    execution: str = "ideal"
    preset: str = "dgx_h100"


@dataclass(frozen=True)
class Point:
    """One measured point: what ran, what it cost, what it simulated. ``jumped`` is how many of
    ``instants`` the fast-forward went over, ``pick`` what ran (``algorithm/protocol`` under
    ``nccl``), ``setup_s`` the seconds the machine took to build and check (outside
    ``wall_s``), ``rss_mib`` the measuring process's peak resident memory, ``cpu_s`` the CPU
    seconds of ``wall_s`` (less than it where other work shares the cores)."""

    sweep: str
    algorithm: str
    ranks: int
    size_bytes: int
    wall_s: float
    messages: int
    instants: int
    sim_s: float
    verified: bool
    jumped: int = 0
    pick: str = ""
    setup_s: float = float("nan")
    rss_mib: float = float("nan")
    cpu_s: float = float("nan")


@dataclass(frozen=True)
class Missed:
    """A point with no measurement: ``over_budget`` (stopped at the budget, or not ``ran``
    since a smaller point of its line was), or ``reason`` the error it ended with."""

    task: Task
    reason: str
    over_budget: bool = False
    ran: bool = True


@dataclass(frozen=True)
class Fit:
    """Exponents of one algorithm's sweep: y ∝ x^exponent for wall time, messages, instants
    (and CPU time, ``cpu``).
    ``fixed`` is what the sweep holds (the size for a sweep against ranks, the ranks for one
    against size), ``left_out`` the x of its points with no measurement."""

    sweep: str
    algorithm: str
    wall: float
    messages: float
    instants: float
    fixed: int = 0
    points: int = 0
    left_out: tuple[int, ...] = ()
    cpu: float = float("nan")


def scenario_for(ranks: int, size_bytes: int, algorithm: str, execution: str = "ideal",
                 preset: str = "dgx_h100", fast_forward: bool = True) -> Scenario:
    """``algorithm`` (or NCCL's pick, for :data:`AUTO`) at ``size_bytes`` on ``ranks / 8``
    hosts of ``preset``, under ``execution``, on the vectorised engine."""
    if ranks % GPUS_PER_HOST:
        raise SimulatorError(f"--ranks: expected multiples of {GPUS_PER_HOST} (whole DGX hosts), "
                             f"got {ranks}")
    return scenario_from_dict({
        "name": f"scaling-{algorithm}-{ranks}",
        "topology": {"preset": preset, "nodes": ranks // GPUS_PER_HOST},
        "algorithms": AUTO if algorithm == AUTO else [algorithm], "sizes": [size_bytes],
        "execution": execution, "engine": "vector", "fast_forward": fast_forward,
        "output": "/tmp/scaling-law"}, source="bench/scaling_law.py")


@contextmanager
def counting_jumps() -> Iterator[list[int]]:
    """Within it, ``[n]``: the instants the fast-forward jumped over in every vectorised run
    (``VectorTiming.skipped``, summed as ``bench/pathologies.py`` sums them)."""
    from simulator.engine import vector

    jumped = [0]
    run = vector._Run.run

    def counted(self: Any) -> Any:
        timing = run(self)
        jumped[0] += timing.skipped
        return timing

    vector._Run.run = counted  # type: ignore[method-assign]
    try:
        yield jumped
    finally:
        vector._Run.run = run  # type: ignore[method-assign]


def measure(task: Task, fast_forward: bool = True) -> Point:
    """Run one point once, here, the machine built and checked before the clock starts."""
    scenario = scenario_for(task.ranks, task.size_bytes, task.algorithm, task.execution,
                            task.preset, fast_forward)
    settings = settings_of(scenario)
    start = time.perf_counter()
    setup = checked_setup(scenario, settings)
    setup_s = time.perf_counter() - start
    gc.collect()
    with counting_jumps() as jumped:
        start, cpu = time.perf_counter(), time.process_time()
        [plan] = plan_points(scenario, setup, settings).plans  # one size, one algorithm or pick
        result = run_plan(plan)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    pick = f"{result.algorithm}/{result.protocol}" if result.protocol else result.algorithm
    return Point(task.sweep, task.algorithm, task.ranks, task.size_bytes, wall, result.messages,
                 result.events, result.sim_time_s, result.verified is True, jumped[0], pick,
                 setup_s, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, cpu)


def _child(sender: Connection, task: Task, fast_forward: bool) -> None:
    """The child process of :func:`measure_within`: measure and send the outcome."""
    outcome: Point | Missed
    try:
        outcome = measure(task, fast_forward)
    except SimulatorError as error:
        outcome = Missed(task, str(error))
    except Exception as error:  # the point's failure, reported rather than raised
        outcome = Missed(task, f"{type(error).__name__}: {error}")
    sender.send(outcome)
    sender.close()


def measure_within(task: Task, budget_s: float, fast_forward: bool = True) -> Point | Missed:
    """:func:`measure` in a forked child process, stopped after ``budget_s`` seconds (the
    machine's setup included): the point, or why there is none."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(sender, task, fast_forward), daemon=True)
    process.start()
    sender.close()  # the child holds its own end: EOF here if it dies before sending
    try:
        if not receiver.poll(budget_s):
            return Missed(task, f"over the {budget_s:g} s budget", over_budget=True)
        outcome: Point | Missed = receiver.recv()
        return outcome
    except EOFError:
        process.join()
        return Missed(task, f"the child process died (exit code {process.exitcode})")
    finally:
        if process.is_alive():
            process.terminate()
        process.join()
        receiver.close()


def exponent(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log y against log x (nan with fewer than two points)."""
    if len(xs) < 2 or min(ys) <= 0:
        return float("nan")
    slope, _ = np.polyfit(np.log(xs), np.log(ys), 1)
    return float(slope)


def _x(sweep: str, ranks: int, size_bytes: int) -> int:
    return ranks if AGAINST[sweep] == "ranks" else size_bytes


def _fixed(sweep: str, ranks: int, size_bytes: int) -> int:
    return size_bytes if AGAINST[sweep] == "ranks" else ranks


def fits(points: Sequence[Point], missed: Sequence[Missed] = ()) -> list[Fit]:
    """One fit per sweep, algorithm and fixed size or ranks, in :data:`SWEEPS`' order, over the
    points measured; those ``missed`` are named in the fit's ``left_out``."""
    out = []
    for sweep in SWEEPS:
        keys = dict.fromkeys([(p.algorithm, _fixed(sweep, p.ranks, p.size_bytes))
                              for p in points if p.sweep == sweep]
                             + [(m.task.algorithm, _fixed(sweep, m.task.ranks, m.task.size_bytes))
                                for m in missed if m.task.sweep == sweep])
        for algorithm, fixed in keys:
            mine = [p for p in points if p.sweep == sweep and p.algorithm == algorithm
                    and _fixed(sweep, p.ranks, p.size_bytes) == fixed]
            left = tuple(_x(sweep, m.task.ranks, m.task.size_bytes) for m in missed
                         if m.task.sweep == sweep and m.task.algorithm == algorithm
                         and _fixed(sweep, m.task.ranks, m.task.size_bytes) == fixed)
            xs = [float(_x(sweep, p.ranks, p.size_bytes)) for p in mine]
            out.append(Fit(sweep, algorithm, exponent(xs, [p.wall_s for p in mine]),
                           exponent(xs, [float(p.messages) for p in mine]),
                           exponent(xs, [float(p.instants) for p in mine]),
                           fixed, len(mine), left,
                           exponent(xs, [max(p.cpu_s, 1e-9) for p in mine])))
    return out


def row(cells: tuple[object, ...]) -> str:
    return " ".join(f"{cell:>{width}}" for cell, width in zip(cells, _WIDTHS, strict=True))


def format_point(p: Point) -> str:
    per_message = 1e6 * p.wall_s / p.messages if p.messages else float("nan")
    return row((p.sweep, p.algorithm, p.ranks, format_size(p.size_bytes), f"{p.setup_s:.2f}",
                f"{p.wall_s:.3f}", f"{p.cpu_s:.3f}", p.messages, p.instants, p.jumped,
                f"{per_message:.3f}",
                f"{p.sim_s:.9e}", p.pick, "yes" if p.verified else "NO", f"{p.rss_mib:.0f}"))


def format_missed(m: Missed) -> str:
    t = m.task
    wall = "failed" if not m.over_budget else "stopped" if m.ran else "not run"
    return row((t.sweep, t.algorithm, t.ranks, format_size(t.size_bytes), "—", wall, "—", "—",
                "—", "—", "—", "—", "—", "—", "—")) + f"  ({m.reason})"


def _label(sweep: str, x: int) -> str:
    """A sweep's x as the tables name it: a size, or GPUs."""
    return format_size(x) if AGAINST[sweep] == "size" else f"{x} GPUs"


def format_fit(fit: Fit) -> str:
    fixed = (format_size(fit.fixed) if AGAINST[fit.sweep] == "ranks"
             else f"{fit.fixed} GPUs")
    left = ("" if not fit.left_out else "  left out (no measurement): "
            + ", ".join(_label(fit.sweep, x) for x in fit.left_out))
    return (f"{fit.sweep:>9} {fit.algorithm:>18} {fixed:>9} {fit.points:>6} {fit.wall:9.2f} "
            f"{fit.cpu:8.2f} {fit.messages:13.2f} {fit.instants:13.2f}{left}")


def plot(points: list[Point], path: Path) -> None:
    """Wall time against ranks and against size, log-log, one line per sweep, algorithm and
    fixed size or ranks (dashed under ``execution: nccl``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for axis, against, label in ((axes[0], "ranks", "ranks"), (axes[1], "size", "bytes per rank")):
        for sweep in (s for s in SWEEPS if AGAINST[s] == against):
            keys = dict.fromkeys((p.algorithm, _fixed(sweep, p.ranks, p.size_bytes))
                                 for p in points if p.sweep == sweep)
            for algorithm, fixed in keys:
                mine = [p for p in points if p.sweep == sweep and p.algorithm == algorithm
                        and _fixed(sweep, p.ranks, p.size_bytes) == fixed]
                name = algorithm
                if sweep.startswith("nccl"):
                    name += (f" (nccl, {format_size(fixed)})" if against == "ranks"
                             else f" (nccl, {fixed} GPUs)")
                axis.loglog([_x(sweep, p.ranks, p.size_bytes) for p in mine],
                            [p.wall_s for p in mine], marker="o", label=name,
                            linestyle="--" if sweep.startswith("nccl") else "-")
        axis.set_xlabel(label)
        axis.set_ylabel("wall seconds")
        axis.grid(True, which="both", alpha=0.3)
        if axis.has_data():
            axis.legend(fontsize=7)
    figure.suptitle("allreduce-sim wall time, DGX H100 hosts, vectorised engine")
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


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweep", action="append", choices=SWEEPS, default=[],
                        help="a sweep to run; repeat for several (default: all four)")
    parser.add_argument("--budget", type=_positive, default=120.0,
                        help="seconds a point may take, its setup included, before it is "
                             "stopped and left out of the fits (default 120)")
    parser.add_argument("--keep-going", action="store_true",
                        help="run a sweep's larger points after one is over budget (default: "
                             "report them over budget unrun)")
    parser.add_argument("--fast-forward", choices=("on", "off"), default="on",
                        help="run every point with fast_forward on (the default) or off")
    parser.add_argument("--algorithms", nargs="+", choices=ALGORITHMS, default=list(ALGORITHMS),
                        help="algorithms of the ranks and size sweeps (default all four)")
    parser.add_argument("--ranks", type=_ranks, nargs="*", default=list(DEFAULT_RANKS),
                        help="rank counts of the sweep against ranks (default 64 to 4096 by 2)")
    parser.add_argument("--size", type=_size, default=16 << 20,
                        help="bytes per rank of the sweep against ranks (default 16MiB)")
    parser.add_argument("--sizes", type=_size, nargs="*", default=list(DEFAULT_SIZES),
                        help="sizes of the sweep against size (default 1MiB to 4GiB by 4)")
    parser.add_argument("--size-ranks", type=_ranks, default=256,
                        help="ranks of the sweep against size (default 256)")
    parser.add_argument("--nccl-algorithms", nargs="+", choices=NCCL_ALGORITHMS,
                        default=list(NCCL_ALGORITHMS),
                        help="algorithms of the nccl-size sweep (default all three)")
    parser.add_argument("--nccl-sizes", type=_size, nargs="*", default=list(DEFAULT_SIZES),
                        help="sizes of the nccl-size sweep (default 1MiB to 4GiB by 4)")
    parser.add_argument("--nccl-ranks", type=_ranks, default=64,
                        help="GPUs of the nccl-size sweep, dgx_h100 hosts on a leaf (default 64)")
    parser.add_argument("--gpus", type=_ranks, nargs="*", default=list(DEFAULT_GPUS),
                        help="GPU counts of the nccl-gpus sweep (default 64 to 8192 by 2)")
    parser.add_argument("--gpus-sizes", type=_size, nargs="+", default=[1 << 30],
                        help="bytes per rank of the nccl-gpus sweep, one fit each (default 1GiB)")
    parser.add_argument("--gpus-preset", choices=PRESETS, default="dgx_h100_superpod",
                        help="hosts and fabric of the nccl-gpus sweep (default dgx_h100_superpod)")
    parser.add_argument("--plot", type=Path, default=Path("results/bench/scaling_law.png"))
    return parser.parse_args(argv)


def tasks(args: argparse.Namespace) -> list[Task]:
    """The points the arguments ask for, sweep by sweep in :data:`SWEEPS`' order."""
    chosen = set(args.sweep or SWEEPS)
    plan: dict[str, Callable[[], list[Task]]] = {
        "ranks": lambda: [Task("ranks", algorithm, ranks, args.size) for algorithm in
                          args.algorithms for ranks in args.ranks],
        "size": lambda: [Task("size", algorithm, args.size_ranks, size) for algorithm in
                         args.algorithms for size in args.sizes],
        "nccl-size": lambda: [Task("nccl-size", algorithm, args.nccl_ranks, size, "nccl")
                              for algorithm in args.nccl_algorithms for size in args.nccl_sizes],
        "nccl-gpus": lambda: [Task("nccl-gpus", AUTO, ranks, size, "nccl", args.gpus_preset)
                              for size in args.gpus_sizes for ranks in args.gpus],
    }
    return [task for sweep in SWEEPS if sweep in chosen for task in plan[sweep]()]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    fast_forward = args.fast_forward == "on"
    print(row(COLUMNS), flush=True)
    points: list[Point] = []
    missed: list[Missed] = []
    failed = False
    start = time.perf_counter()
    over: dict[tuple[str, str, int], int] = {}  # a line's smallest x over budget
    for task in tasks(args):
        line = (task.sweep, task.algorithm, _fixed(task.sweep, task.ranks, task.size_bytes))
        x = _x(task.sweep, task.ranks, task.size_bytes)
        outcome: Point | Missed
        if line in over and x > over[line] and not args.keep_going:
            outcome = Missed(task, f"not run: {_label(task.sweep, over[line])} was over budget",
                             over_budget=True, ran=False)
        else:
            outcome = measure_within(task, args.budget, fast_forward)
        if isinstance(outcome, Missed) and outcome.over_budget:
            over[line] = min(x, over.get(line, x))
        if isinstance(outcome, Missed):
            missed.append(outcome)
            failed |= not outcome.over_budget
            print(format_missed(outcome), flush=True)
            if not outcome.over_budget:
                print(f"{task.sweep} {task.algorithm} {task.ranks} "
                      f"{format_size(task.size_bytes)}: {outcome.reason}", file=sys.stderr)
            continue
        failed |= not outcome.verified
        points.append(outcome)
        print(format_point(outcome), flush=True)
    print()
    print(f"{'sweep':>9} {'algorithm':>18} {'fixed':>9} {'points':>6} {'wall_exp':>9} "
          f"{'cpu_exp':>8} {'messages_exp':>13} {'instants_exp':>13}")
    for fit in fits(points, missed):
        print(format_fit(fit))
    print(f"\ntotal: {time.perf_counter() - start:.0f} s, budget {args.budget:g} s a point, "
          f"fast_forward {args.fast_forward}")
    if points:
        plot(points, args.plot)
        print(f"plot: {args.plot}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
