"""Benchmark: dense sharing and deep pipelines, the scale issue's other targets.

1. ``algorithms: all`` on 64 ranks of a ``switch`` (25 GB/s, 500 ns) at 1 MiB, 64 MiB and 1 GiB:
   the wall time of the whole scenario (:func:`simulator.runner.simulate`, ``engine: auto``) and
   of each algorithm's points, with the engine that ran them;
2. ``direct`` on 256 ranks of a ``switch`` at 1 GiB (65,280 flows sharing every link);
3. ``halving_doubling`` on a physical ``ring`` of 256 ranks (distant partners share links) at
   1 GiB.

For 2 and 3 it prints the wall time, the simulated time and the share of the engine's time
spent re-sharing links (vectorised progressive filling), and, with ``--simpy``, the SimPy
engine's wall time on the same point (hours for 2; minutes for 3).

4. With ``--giant NODES`` (8192 for the issue's target): ``hierarchical`` allreduce of 1 GiB on
   NODES DGX H100 nodes of 8 GPUs (``dgx_h100`` preset, ideal wire, ``verify: false``: the
   proxy data to verify 65,536 ranks would be 137 GB), once with its default ring across hosts
   and once with halving-doubling: wall time, peak memory (the process's, so far), messages,
   simulated time and closed form.

    .venv/bin/python bench/scale.py
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import numpy as np

from simulator.algorithms.channels import schedule_on_channels
from simulator.algorithms.schedule import Group
from simulator.engine.payload import Payload, make_inputs
from simulator.engine.run import RunSpec, run_collective
from simulator.engine.vector import run_schedule
from simulator.runner import prepare, simulate
from simulator.scenario import Scenario, scenario_from_dict

SWITCH = {"kind": "switch", "bandwidth": "25GB/s", "latency": "500ns"}


def all_on_64() -> None:
    """Target 1: the whole scenario, then per algorithm."""
    scenario = scenario_from_dict({"name": "all-64", "topology": {**SWITCH, "ranks": 64},
                                   "sizes": ["1MiB", "64MiB", "1GiB"], "algorithms": "all"})
    start = time.perf_counter()
    frame = simulate(scenario)
    wall = time.perf_counter() - start
    print(f"## algorithms: all, 64 ranks of a switch, 1 MiB / 64 MiB / 1 GiB: {wall:.2f} s for "
          f"{len(frame)} points, all verified: {bool(frame.verified.all())}")
    for algorithm in dict.fromkeys(frame.algorithm):
        rows = frame[frame.algorithm == algorithm]
        single = scenario_from_dict({"name": "one", "topology": {**SWITCH, "ranks": 64},
                                     "sizes": ["1MiB", "64MiB", "1GiB"], "algorithms": [algorithm]})
        start = time.perf_counter()
        simulate(single)
        print(f"   {algorithm:>20} {rows.engine.iloc[0]:>6} {time.perf_counter() - start:8.2f} s  "
              f"sim {', '.join(f'{t * 1e3:.3f}' for t in rows.sim_time_s)} ms")


def one_point(title: str, scenario: Scenario, size: int, with_simpy: bool) -> None:
    """Targets 2 and 3: one point on the vectorised engine (and SimPy when asked)."""
    setup = prepare(scenario, select=False)
    machine = setup.machine
    [name] = scenario.algorithms or ()
    algorithm = scenario.algorithm(name)
    payload = Payload.for_size(size, scenario.dtype, machine.ranks)
    inputs = make_inputs(np.random.default_rng(0), machine.ranks, payload, scenario.reduce_op)
    start = time.perf_counter()
    group = Group.whole(machine, payload.count, scenario.dtype.itemsize)
    schedule = schedule_on_channels(algorithm, group, machine.layout, 1)
    assert schedule is not None
    timing = run_schedule(schedule, machine, payload, scenario.reduce_op, inputs.copy(), name)
    wall = time.perf_counter() - start
    print(f"## {title}: vector {wall:.2f} s ({timing.messages} messages, {timing.instants} "
          f"instants, {100 * timing.sharing_wall_s / wall:.0f} % re-sharing links), simulated "
          f"{timing.time_s * 1e3:.4f} ms")
    if with_simpy:
        start = time.perf_counter()
        simpy = run_collective(algorithm, machine, RunSpec(payload, scenario.reduce_op), inputs)
        print(f"   simpy {time.perf_counter() - start:.2f} s, simulated {simpy.time_s * 1e3:.4f} ms")


def giant(nodes: int) -> None:
    """Target 4: hierarchical on ``nodes`` DGX H100 nodes, each inter-host algorithm."""
    for inter in ("ring", "halving_doubling"):
        scenario = scenario_from_dict({
            "name": "giant", "topology": {"preset": "dgx_h100", "nodes": nodes},
            "sizes": ["1GiB"], "algorithms": ["hierarchical"], "execution": "ideal",
            "verify": False, "algorithm_options": {"hierarchical": {"inter": inter}}})
        start = time.perf_counter()
        row = simulate(scenario).iloc[0]
        wall = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"## hierarchical (inter {inter}), {row.ranks} GPUs on {nodes} DGX H100, 1 GiB: "
              f"{wall:.1f} s, peak {peak:.0f} MiB, {row.messages:,} messages, simulated "
              f"{row.sim_time_s * 1e3:.6f} ms, closed form {row.model_time_s * 1e3:.6f} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simpy", action="store_true", help="also time the SimPy engine on 2, 3")
    parser.add_argument("--giant", type=int, metavar="NODES",
                        help="only time hierarchical on NODES DGX H100 nodes (8192: 65,536 GPUs)")
    args = parser.parse_args(argv)
    if args.giant:
        giant(args.giant)
        return 0
    all_on_64()
    one_point("direct, 256 ranks of a switch, 1 GiB",
              scenario_from_dict({"topology": {**SWITCH, "ranks": 256}, "sizes": ["1GiB"],
                                  "algorithms": ["direct"]}), 1 << 30, args.simpy)
    one_point("halving_doubling, physical ring of 256 ranks, 1 GiB",
              scenario_from_dict({"topology": {"kind": "ring", "ranks": 256,
                                               "bandwidth": "25GB/s", "latency": "500ns"},
                                  "sizes": ["1GiB"], "algorithms": ["halving_doubling"]}),
              1 << 30, args.simpy)
    return 0


if __name__ == "__main__":
    sys.exit(main())
