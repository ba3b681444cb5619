"""Benchmark finding: does NCCL's ring repeat in time on a SuperPOD? (issue 36, docs/benchmark.md).

Runs the ring (LL128, 1 GiB, ``verify: false``) on 16 DGX H100 of the SuperPOD preset as one
scalable unit or as units of ``--unit`` nodes, records when every flow ends (the engine's
``Flows.end``, wrapped), and for each network edge that carries one channel alone (254 sends)
tests its gaps between consecutive sends for an exact period of 1 to 64 steps over steps 60-180.
It prints the distinct end times (what an exact simulation must process as instants) and how
many edges have a period at each tolerance.

    .venv/bin/python bench/ring_phases.py --unit 16      # one unit: lockstep, no period
    .venv/bin/python bench/ring_phases.py --unit 8       # two units: the same since 5ce14a7

Two units of 8 took 27,455 instants (16,037 distinct end times) before 5ce14a7, whose crossing
sends left through their own NICs while every other send between hosts went by PXN.
"""

from __future__ import annotations

import argparse
import collections

import numpy as np

from simulator import simulate
from simulator.engine import flows

STEPS = 254
"""Sends per edge of one channel: the ring's 2(p - 1) steps on 128 GPUs."""


def period(gaps: np.ndarray, tolerance: float) -> int | None:
    """The least number of steps after which the gaps repeat within ``tolerance`` seconds over
    steps 60-180 (past the pipeline's start, before its end), or None up to 64."""
    for steps in range(1, 65):
        if float(np.abs(gaps[60 + steps:180 + steps] - gaps[60:180]).max()) <= tolerance:
            return steps
    return None


def main() -> None:
    """Run the ring once and print its edges' periods."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unit", type=int, default=8, help="nodes per scalable unit (16: one)")
    unit = parser.parse_args().unit
    ends: dict[tuple[int, int], list[float]] = collections.defaultdict(list)
    original = flows.Flows.end

    def recorded(self: flows.Flows, now: float) -> np.ndarray:
        ended = original(self, now)
        schedule = self.held.s
        for src, dst in zip(schedule.src[ended].tolist(), schedule.dst[ended].tolist(),
                            strict=True):
            ends[(src, dst)].append(now)
        return ended

    flows.Flows.end = recorded  # type: ignore[method-assign]
    results = simulate({
        "name": "ring-phases", "algorithms": ["ring"], "sizes": ["1GiB"], "verify": False,
        "topology": {"preset": "dgx_h100_superpod", "nodes": 16, "nodes_per_unit": unit,
                     "spines": 4},
        "nccl": {"algo": "ring", "proto": "LL128"}})
    times = np.concatenate([np.array(t) for t in ends.values()])
    print(f"units of {unit} nodes: {int(results['events'].iloc[0]):,} instants, "
          f"{len(np.unique(times)):,} distinct flow-end times, {len(times):,} flows")
    alone = {edge: np.diff(np.array(t)) for edge, t in ends.items() if len(t) == STEPS}
    for tolerance in (0.0, 1e-15, 1e-12, 1e-9):
        found = collections.Counter(period(gaps, tolerance) for gaps in alone.values())
        print(f"  tolerance {tolerance:g} s: edges by period in steps (None: none up to 64): "
              f"{dict(sorted(found.items(), key=str))} of {len(alone)}")


if __name__ == "__main__":
    main()
