"""Side by side: our vectorised engine and SimGrid on the same ring allreduce schedule.

Ring allreduce of 1GiB per rank (float32) on the ``switch`` topology (every rank on its own
25GB/s, 500ns full-duplex link to one non-blocking switch) for each ``--ranks`` value (default
64 256 1024). Ours is :func:`simulator.runner.run_point` on the vectorised engine (schedule,
inputs, simulation, numpy check; best of ``--repeat``; topology building excluded), as in
``bench/ring_scaling.py``. SimGrid runs the messages of the very schedule ours runs (sources,
destinations, bytes; one actor per rank posting its k-th send after its (k-1)-th receive, as
the schedule's ``posted_after`` says) on a star zone: one host per rank, each with a private
split-duplex 25GB/s, 500ns link to the star's centre, under CM02's max-min sharing with no
correction (``network/crosstraffic:0``, latency and bandwidth factors 1, ``weight-S:0``,
``TCP-gamma:0``), so a lone message takes latency + size/bandwidth. Its wall time counts
actor creation and ``Engine.run``, not building the platform nor reading our schedule; each
point runs in a fresh process (SimGrid has one engine per process).

One row per rank count: wall seconds of each and their ratio (ours / SimGrid), each one's
simulated time, their relative difference, and the closed form 2(p-1)(2·500ns + (1GiB/p)/25GB/s).

SimGrid is an optional extra built from source (C++ compiler, Boost headers, CMake, pybind11
2.13.6; about half an hour on 2 cores), best in its own venv::

    apt-get install -y g++ libboost-dev patchelf cmake
    python3 -m venv /tmp/simgrid-venv
    /tmp/simgrid-venv/bin/pip install pybind11==2.13.6 setuptools wheel
    /tmp/simgrid-venv/bin/pip install --no-build-isolation simgrid
    /tmp/simgrid-venv/bin/pip install 'simpy>=4.1,<5' 'networkx>=3.2,<4' 'numpy>=1.26,<3' \\
        'pandas>=2.1,<4' 'matplotlib>=3.8,<4' 'pyyaml>=6.0,<7'
    PYTHONPATH=. /tmp/simgrid-venv/bin/python bench/simgrid_ring.py --ranks 64 256 1024

(if ``import simgrid`` then fails on a missing ``libsimgrid``, run ``patchelf --set-rpath
'$ORIGIN'`` on the ``simgrid*.so`` in that venv's site-packages). Without SimGrid the script
says so and prints our engine's rows only.
"""

from __future__ import annotations

import argparse
import importlib
import multiprocessing
import time
from pathlib import Path
from typing import Any

import numpy as np

from simulator.algorithms.schedule import Group
from simulator.runner import prepare, run_point
from simulator.scenario import Scenario, TopologySpec
from simulator.settings import Engine, RunSettings

SIZE_BYTES = 1 << 30
BANDWIDTH_BPS = 25e9
LATENCY_S = 500e-9
DTYPE = np.dtype("float32")
SIMGRID_CONFIG = ("network/model:CM02", "network/crosstraffic:0", "network/latency-factor:1",
                  "network/bandwidth-factor:1", "network/weight-S:0", "network/TCP-gamma:0")
INSTALL = ("SimGrid is not installed ({error}): see this script's docstring to build it, e.g. "
           "pip install pybind11==2.13.6 && pip install --no-build-isolation simgrid "
           "(needs g++, libboost-dev, cmake)")
COLUMNS = ("ranks", "ours_wall_s", "simgrid_wall_s", "ratio", "ours_sim_s", "simgrid_sim_s",
           "rel_diff", "closed_form_s")


def scenario_for(ranks: int) -> Scenario:
    """Ring allreduce of 1GiB per rank on a ``ranks``-GPU switch, on the vectorised engine."""
    topology = TopologySpec("switch", {"ranks": ranks, "bandwidth": BANDWIDTH_BPS,
                                       "latency": LATENCY_S})
    return Scenario(name=f"simgrid-ring-{ranks}", source="bench/simgrid_ring.py", topology=topology,
                    algorithms=("ring",), sizes=(SIZE_BYTES,), dtype=DTYPE,
                    output=Path("/tmp/simgrid-ring"), run=RunSettings(engine=Engine.VECTOR))


def ours(ranks: int, repeat: int) -> tuple[float, float]:
    """(best wall seconds, simulated seconds) of our vectorised engine on the point."""
    scenario = scenario_for(ranks)
    setup = prepare(scenario)
    walls, sim_s = [], 0.0
    for _ in range(repeat):
        start = time.perf_counter()
        result = run_point(scenario, setup.algorithms[0], SIZE_BYTES, setup=setup)
        walls.append(time.perf_counter() - start)
        if result.verified is not True:
            raise SystemExit(f"our run of {ranks} ranks failed verification")
        sim_s = float(result.sim_time_s)
    return min(walls), sim_s


def ring_messages(ranks: int) -> tuple[np.ndarray, np.ndarray]:
    """(destination, bytes) of each rank's sends in posting order, shape (ranks, steps), from
    the ring's schedule; SystemExit unless each rank posts its k-th send after its (k-1)-th
    receive, so that a lockstep actor runs exactly that schedule."""
    scenario = scenario_for(ranks)
    setup = prepare(scenario)
    group = Group.whole(setup.machine, SIZE_BYTES // DTYPE.itemsize, DTYPE.itemsize,
                        scenario.piece_bytes, setup.cost.stream_bytes)
    schedule = setup.algorithms[0].scheduled(group)
    assert schedule is not None
    sends = np.argsort(schedule.src, kind="stable").reshape(ranks, -1)
    receives = np.argsort(schedule.dst, kind="stable").reshape(ranks, -1)
    after = schedule.posted_after[sends]
    if (after[:, 0] != -1).any() or (after[:, 1:] != receives[:, :-1]).any():
        raise SystemExit("the ring's schedule is not one send per receive: SimGrid's actor cannot run it")
    nbytes = (schedule.send_stop - schedule.send_start)[sends] * DTYPE.itemsize
    return schedule.dst[sends], nbytes


def simgrid_point(ranks: int) -> tuple[float, float]:
    """(wall seconds, simulated seconds) of SimGrid on the point; run in a fresh process."""
    import simgrid  # type: ignore[import-not-found]

    dsts, nbytes = ring_messages(ranks)
    engine = simgrid.Engine(["simgrid_ring", "--log=root.thres:warning",
                             *(f"--cfg={option}" for option in SIMGRID_CONFIG)])
    star = engine.netzone_root.add_netzone_star("switch")
    hosts = []
    for rank in range(ranks):
        host = star.add_host(f"rank{rank}", 1e9).seal()
        link = star.add_split_duplex_link(f"link{rank}", BANDWIDTH_BPS).set_latency(LATENCY_S).seal()
        star.add_route(host, None, [simgrid.LinkInRoute(link, simgrid.LinkInRoute.Direction.UP)], True)
        hosts.append(host)
    star.seal()

    def actor(rank: int, to: list[int], sizes: list[int]) -> None:
        mine = simgrid.Mailbox.by_name(str(rank))
        boxes = {dst: simgrid.Mailbox.by_name(str(dst)) for dst in set(to)}
        for dst, size in zip(to, sizes, strict=True):
            put: Any = boxes[dst].put_async(None, size)
            mine.get()
            put.wait()

    start = time.perf_counter()
    for rank, host in enumerate(hosts):
        host.add_actor(f"rank{rank}", actor, rank, dsts[rank].tolist(), nbytes[rank].tolist())
    engine.run()
    return time.perf_counter() - start, float(simgrid.Engine.clock)


def closed_form(ranks: int) -> float:
    return 2 * (ranks - 1) * (2 * LATENCY_S + SIZE_BYTES / ranks / BANDWIDTH_BPS)


def simgrid_missing() -> str | None:
    """Why SimGrid cannot be imported, or None when it can."""
    try:
        importlib.import_module("simgrid")
    except ImportError as error:
        return str(error)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[64, 256, 1024],
                        help="rank counts to run (default: 64 256 1024)")
    parser.add_argument("--repeat", type=int, default=3, help="our runs per point; best kept (default 3)")
    args = parser.parse_args(argv)
    if min(args.ranks) < 2 or args.repeat < 1:
        parser.error("expected --ranks ≥ 2 and --repeat ≥ 1")
    missing = simgrid_missing()
    if missing is not None:
        print(INSTALL.format(error=missing))
    print(" ".join(f"{name:>14}" for name in COLUMNS), flush=True)
    spawn = multiprocessing.get_context("spawn")
    for ranks in args.ranks:
        our_wall, our_sim = ours(ranks, args.repeat)
        cells: list[object] = [ranks, f"{our_wall:.3f}", "-", "-", f"{our_sim:.9e}", "-", "-"]
        if missing is None:
            with spawn.Pool(1) as pool:
                sg_wall, sg_sim = pool.apply(simgrid_point, (ranks,))
            cells[2:4] = [f"{sg_wall:.3f}", f"{our_wall / sg_wall:.4f}"]
            cells[5:7] = [f"{sg_sim:.9e}", f"{abs(our_sim - sg_sim) / sg_sim:.1e}"]
        cells.append(f"{closed_form(ranks):.9e}")
        print(" ".join(f"{cell:>14}" for cell in cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
