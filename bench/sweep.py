"""Benchmark: a sweep of many points on Dask against the same points run one after another.

Builds ``--scenarios`` scenarios (default 4) of every allreduce algorithm that applies to 32 GPUs
of a ``switch`` (25 GB/s, 500 ns links), at the sizes 1 MiB, 4 MiB, ... 1 GiB (6 sizes), each
scenario on its own element type and operator, which is 4 × 7 × 6 = 168 points; runs them
serially (:func:`simulator.runner.simulate`, one scenario after another) and as one sweep on a
local Dask cluster of ``--workers`` processes (default: one per core), checks that the frames are
equal row for row, and prints both wall times and the speed-up.

    .venv/bin/python bench/sweep.py                # 168 points, one worker per core
    .venv/bin/python bench/sweep.py --workers 2 --scenarios 8

Exits 1 if the frames differ or a point fails.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import pandas as pd

from simulator.runner import simulate
from simulator.scenario import Scenario, scenario_from_dict
from simulator.sweep import sweep

KINDS = (("float32", "sum"), ("float64", "max"), ("int32", "sum"), ("float16", "min"),
         ("int64", "prod"), ("float32", "avg"), ("float64", "sum"), ("int32", "max"))


def scenarios(count: int) -> list[Scenario]:
    """``count`` scenarios of every allreduce on 32 GPUs of a switch, 1 MiB to 1 GiB."""
    return [scenario_from_dict({
        "name": f"sweep-{i}", "topology": {"kind": "switch", "ranks": 32, "bandwidth": "25GB/s",
                                           "latency": "500ns"},
        "sizes": {"from": "1MiB", "to": "1GiB", "factor": 4}, "dtype": KINDS[i % len(KINDS)][0],
        "op": KINDS[i % len(KINDS)][1], "output": f"/tmp/sweep-bench/{i}"})
        for i in range(count)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", type=int, default=4, help="scenarios (default 4)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="Dask worker processes (default: one per core)")
    args = parser.parse_args(argv)
    chosen = scenarios(args.scenarios)
    start = time.perf_counter()
    serial = [simulate(scenario) for scenario in chosen]
    serial_s = time.perf_counter() - start
    points = sum(len(frame) for frame in serial)
    start = time.perf_counter()
    done = sweep(chosen, workers=args.workers, progress=False)
    sweep_s = time.perf_counter() - start
    start = time.perf_counter()
    sweep([], workers=args.workers, progress=False)  # no point: the cluster's start and stop
    overhead_s = time.perf_counter() - start
    same = all(frame.equals(other) for frame, other in zip(serial, done.frames, strict=True))
    print(f"# {points} points ({args.scenarios} scenarios), {os.cpu_count()} cores")
    print(f"serial_s {serial_s:.2f}  sweep_s {sweep_s:.2f} ({args.workers} workers; of which "
          f"~{overhead_s:.2f} s starting and stopping the cluster)  speed-up "
          f"{serial_s / sweep_s:.2f} ({serial_s / max(sweep_s - overhead_s, 1e-9):.2f} without "
          f"the cluster's start)  identical {same}  failures {len(done.failures)}")
    if not same:
        for frame, other in zip(serial, done.frames, strict=True):
            print(pd.concat([frame, other]).drop_duplicates(keep=False), file=sys.stderr)
    return 0 if same and not done.failures else 1


if __name__ == "__main__":
    sys.exit(main())
