"""Benchmark: the seconds one message takes to simulate, the figures ``simulator/limits.py``
cites for the estimate a long run states before its first point (VECTOR_MESSAGE_S,
VECTOR_FAULTED_MESSAGE_S, SIMPY_MESSAGE_S).

Each case runs one point, a ring of 1 MiB on 256 GPUs of a switch, in a fresh process: on the
vectorised engine, on it with one straggler (a fault breaks the steady pipeline the engine
fast-forwards into many instants), and on the SimPy engine. It prints each case's wall time of
the run alone (the plan made before), its messages (counted before it runs, as the estimate
counts them) and the seconds a message; the limits take the worst seen, rounded up.

    .venv/bin/python bench/walltime.py          # ~1 minute on a 2-core machine
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

RING = {"topology": {"kind": "switch", "ranks": 256, "bandwidth": "25GB/s", "latency": "1us"},
        "algorithms": ["ring"], "sizes": ["1MiB"], "execution": "ideal"}
CASES = {
    "vectorised": RING,
    "vectorised, one straggler": {**RING, "faults": [{"kind": "straggler", "rank": 3,
                                                      "delay": "50us"}]},
    "SimPy": {**RING, "engine": "simpy"},
}


def one(scenario_text: str) -> dict[str, Any]:
    """Run the scenario's one point in this process: its messages, engine and wall time."""
    from simulator.plan import plan_point, prepare, wall_estimate_s
    from simulator.runner import run_plan, settings_of
    from simulator.scenario import scenario_from_dict

    scenario = scenario_from_dict(json.loads(scenario_text))
    setup = prepare(scenario)
    [algorithm] = setup.algorithms
    plan = plan_point(scenario, setup, algorithm, scenario.sizes[0], settings_of(scenario))
    messages, _ = wall_estimate_s(plan)
    start = time.perf_counter()
    result = run_plan(plan)
    took = time.perf_counter() - start
    return {"engine": result.engine, "messages": messages, "events": result.events,
            "wall_s": round(took, 2), "us_a_message": round(took / (messages or 1) * 1e6, 1)}


def main() -> None:
    """Each case in a fresh process, a line each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return
    for name, scenario in CASES.items():
        done = subprocess.run([sys.executable, __file__, "--one", json.dumps(scenario)],
                              check=True, capture_output=True, text=True)
        print(f"{name:>26}  {done.stdout.strip()}", flush=True)


if __name__ == "__main__":
    main()
