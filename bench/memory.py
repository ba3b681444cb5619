"""Benchmark: the memory a point takes per schedule entry, rank pair and SimPy object, the
figures ``simulator/limits.py`` cites (VECTOR_ENTRY_BYTES, PAIR_BYTES, TRACE_ENTRY_BYTES,
SIMPY_HELD_BYTES).

Each case runs one point (``verify: false``: data are not the subject) at two sizes, each in
a fresh process, so that the process's peak resident set (``ru_maxrss``) is that point's: from
the machine built (the baseline) through the plan, its closed form, the schedule and the run.
What the two runs count apart (the schedule's entries held at once and its rank pairs,
:meth:`Algorithm.footprint <simulator.algorithms.algorithm.Algorithm.footprint>`; the entries
of a trace; the SimPy engine's most messages in flight and flow timers, ``Timing.held``)
divides the difference of their peaks above the baseline:

- ``entry``: cases whose pairs are few, bytes per entry held;
- ``pair``: ``direct``, whose every pair carries a message (and holds a flow) at once: what its
  peak holds beyond ``entry`` bytes per entry, per pair;
- ``trace``: algorithms without a builder on the vectorised engine, bytes per traced entry;
- ``simpy``: ``direct`` on the SimPy engine, bytes per message in flight or timer pending.

It prints a line per case and run, then the four figures (each case's worst, rounded up to
10 bytes).

    .venv/bin/python bench/memory.py            # ~4 minutes on a 2-core machine
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

SWITCH = {"kind": "switch", "bandwidth": "25GB/s", "latency": "1us"}


@dataclass(frozen=True, eq=False)
class Case:
    """One point at two scales: ``kind`` says what its slope measures."""

    name: str
    kind: str
    runs: tuple[dict[str, Any], dict[str, Any]]


def switch(ranks: int, algorithm: str, size: int, **more: Any) -> dict[str, Any]:
    """A scenario of one point on ``ranks`` GPUs of a switch."""
    return {"topology": {**SWITCH, "ranks": ranks}, "algorithms": [algorithm], "sizes": [size],
            "verify": False, "execution": "ideal", **more}


def dgx(nodes: int, algorithm: str, size: int, **more: Any) -> dict[str, Any]:
    """A scenario of one point on ``nodes`` DGX H100."""
    return {"topology": {"preset": "dgx_h100", "nodes": nodes}, "algorithms": [algorithm],
            "sizes": [size], "verify": False, **more}


CASES = (
    Case("ring, 2 pieces a chunk", "entry",
         (switch(256, "ring", 256 * 256, piece_size=128),
          switch(512, "ring", 512 * 256, piece_size=128))),
    Case("ring on 4 channels, 2 pieces a chunk", "entry",  # held whole (one piece: windowed)
         (switch(180, "ring", 180 * 256, channels=4, piece_size=32),
          switch(360, "ring", 360 * 256, channels=4, piece_size=32))),
    Case("tree, 2048 pieces", "entry",
         (switch(32, "tree", 1 << 17, piece_size=64), switch(96, "tree", 1 << 17, piece_size=64))),
    Case("double_binary_tree, 1024 pieces a tree", "entry",
         (switch(32, "double_binary_tree", 1 << 17, piece_size=64),
          switch(96, "double_binary_tree", 1 << 17, piece_size=64))),
    Case("halving_doubling, 64-byte pieces", "entry",
         (switch(256, "halving_doubling", 1 << 16, piece_size=64),
          switch(512, "halving_doubling", 1 << 17, piece_size=64))),
    Case("hierarchical streamed (nccl)", "entry",
         (dgx(32, "hierarchical", 1 << 30, piece_size="1MiB"),
          dgx(64, "hierarchical", 1 << 30, piece_size="1MiB"))),
    Case("direct allreduce", "pair", (switch(500, "direct", 500 * 256),
                                      switch(1000, "direct", 1000 * 256))),
    Case("direct reduce_scatter", "pair",
         (switch(700, "direct", 700 * 256, collective="reduce_scatter"),
          switch(1400, "direct", 1400 * 256, collective="reduce_scatter"))),
    Case("nvls_tree, 64 KiB pieces", "entry", (dgx(2, "nvls_tree", 1 << 30, piece_size="64KiB"),
                                               dgx(4, "nvls_tree", 1 << 30, piece_size="64KiB"))),
    Case("pat on the vectorised engine (its trace)", "trace",
         (switch(64, "pat", 1 << 20, piece_size=256, collective="allgather", engine="vector"),
          switch(128, "pat", 1 << 20, piece_size=256, collective="allgather", engine="vector"))),
    Case("direct on the SimPy engine", "simpy",
         (switch(30, "direct", 30 * 256, engine="simpy"),
          switch(60, "direct", 60 * 256, engine="simpy"))),
)


def one(scenario_text: str) -> dict[str, Any]:
    """Run one point in this process: its counts and peak resident set above the baseline."""
    import numpy as np

    from simulator.algorithms.channels import footprint_on_channels
    from simulator.algorithms.schedule import Group
    from simulator.engine import executor
    from simulator.engine.executor import Vector
    from simulator.engine.record import Recorder
    from simulator.plan import plan_point, prepare
    from simulator.runner import settings_of
    from simulator.scenario import scenario_from_dict

    scenario = scenario_from_dict(json.loads(scenario_text))
    setup = prepare(scenario)
    settings = settings_of(scenario)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    [algorithm] = setup.algorithms
    size = scenario.sizes[0]
    plan = plan_point(scenario, setup, algorithm, size, settings)
    spec = plan.spec
    group = Group.whole(setup.machine, spec.payload.count, scenario.dtype.itemsize,
                        spec.piece_bytes, spec.stream_bytes)
    counted = footprint_on_channels(algorithm, group, setup.machine.layout, spec.channels)
    buffers = np.zeros((setup.machine.ranks, 0), dtype=scenario.dtype)
    timing, engine = executor.run(plan, buffers, Recorder(plan.machine.routing))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    traced = None if counted is not None else Vector().blocks(plan).size
    return {"engine": engine.value, "messages": timing.messages, "simpy_held": timing.held,
            "entries": counted.entries if counted else traced,
            "held": counted.held if counted else traced,
            "pairs": counted.pairs if counted else 0, "bytes": peak - base}


def measured(case: Case) -> list[dict[str, Any]]:
    """Both runs of a case, each in a fresh process."""
    runs = []
    for scenario in case.runs:
        done = subprocess.run([sys.executable, __file__, "--one", json.dumps(scenario)],
                              check=True, capture_output=True, text=True)
        runs.append(json.loads(done.stdout))
        print(f"{case.name:>42}  {json.dumps(runs[-1])}", flush=True)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return
    results = [(case, measured(case)) for case in CASES]

    def slope(runs: list[dict[str, Any]], counted: str, less: float = 0.0) -> float:
        small, large = runs
        grown = large["bytes"] - small["bytes"] - less * (large["held"] - small["held"])
        return grown / (large[counted] - small[counted])

    figures: dict[str, list[float]] = {"entry": [], "pair": [], "trace": [], "simpy": []}
    for case, runs in results:
        if case.kind == "entry":
            figures["entry"].append(slope(runs, "held"))
    entry = max(figures["entry"])
    for case, runs in results:
        if case.kind == "pair":
            figures["pair"].append(slope(runs, "pairs", less=entry))
        elif case.kind == "trace":
            figures["trace"].append(slope(runs, "held"))
        elif case.kind == "simpy":
            figures["simpy"].append(slope(runs, "simpy_held"))
    print()
    names = {"entry": "VECTOR_ENTRY_BYTES", "pair": "PAIR_BYTES", "trace": "TRACE_ENTRY_BYTES",
             "simpy": "SIMPY_HELD_BYTES"}
    for kind, values in figures.items():
        shown = ", ".join(f"{value:.0f}" for value in values)
        print(f"{names[kind]:>20} = {10 * math.ceil(max(values) / 10):>6}   (cases: {shown})")


if __name__ == "__main__":
    main()
