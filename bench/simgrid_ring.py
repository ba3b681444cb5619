"""Side by side: our vectorised engine and SimGrid on the same schedules: a ring, a tree, shared links.

Three cases (``--case``, default all), each at ``--ranks`` (default 64 256 1024), float32, sum:

- ``ring``: ring allreduce of 1 GiB per rank on ``switch`` (every rank on its own 25 GB/s,
  500 ns full-duplex link to one non-blocking switch): one flow a link, the closed form
  2(p-1)(2·500ns + (1GiB/p)/25GB/s) exact;
- ``tree``: NCCL's split tree (``tree``: reduce up and broadcast down at once, 512 KiB pieces)
  of 64 MiB on the same switch: a parent's link carries its piece up and its two children's
  down, so flows share links at changing rates while the pipeline fills and drains;
- ``shared``: halving-doubling of 64 MiB on a physical ``ring`` of 25 GB/s, 500 ns cables: a
  partner 2^k ranks away is reached over 2^k cables, and every cable carries many exchanges
  at once.

Ours is :func:`simulator.runner.run_point` on the vectorised engine (schedule, inputs,
simulation, numpy check; best of ``--repeat``; the machine built beforehand), as in
``bench/ring_scaling.py``. SimGrid runs the messages of the very schedule ours runs, over the
very routes: one host per rank, one SimGrid link per directed link of our graph (its bandwidth
and latency), and for each pair that talks our route's links. One actor per rank keeps the
schedule's order: it posts a message once the receive the schedule posts it after has
completed, behind the message before it on its connection (sender, receiver, channel), and
completes a receive once it has arrived and the rank's receive before it has completed (free
reductions on these topologies, as in ours). Sharing is CM02's max-min with no correction
(``network/crosstraffic:0``, latency and bandwidth factors 1, ``weight-S:0``,
``TCP-gamma:0``), so a lone message takes latency + size/bandwidth, as ours. SimGrid's wall
time counts actor creation and ``Engine.run``, not building the platform nor reading our
schedule; each point runs in a fresh process (SimGrid has one engine per process).

One row per (case, ranks): wall seconds of each and their ratio (ours / SimGrid), each one's
simulated time, their relative difference, and the closed form (``model_s``; a lower bound
where links are shared, ``docs/algorithms.md``).

SimGrid is built from source beside the project (C++ compiler, Boost headers, CMake, pybind11
2.13.6; 12-30 minutes on 2 cores), best in its own venv::

    apt-get install -y g++ libboost-dev patchelf cmake
    python3 -m venv /tmp/simgrid-venv
    /tmp/simgrid-venv/bin/pip install pybind11==2.13.6 setuptools wheel
    /tmp/simgrid-venv/bin/pip install --no-build-isolation simgrid==4.1
    /tmp/simgrid-venv/bin/pip install 'simpy>=4.1,<5' 'networkx>=3.2,<4' 'numpy>=1.26,<3' \\
        'pandas>=2.1,<4' 'matplotlib>=3.8,<4' 'pyyaml>=6.0,<7'
    PYTHONPATH=. /tmp/simgrid-venv/bin/python bench/simgrid_ring.py --ranks 64 256 1024

(if ``import simgrid`` then fails on a missing ``libsimgrid``, run ``patchelf --set-rpath
'$ORIGIN'`` on the ``simgrid*.so`` in that venv's site-packages). Without SimGrid the script
says so and prints our engine's rows only.
"""

from __future__ import annotations

import argparse
import heapq
import importlib
import multiprocessing
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simulator.algorithms.schedule import NONE, Group, Op, Schedule
from simulator.model.machine import Machine
from simulator.runner import prepare, run_point
from simulator.scenario import Scenario, TopologySpec
from simulator.settings import Engine, RunSettings

BANDWIDTH_BPS = 25e9
LATENCY_S = 500e-9
DTYPE = np.dtype("float32")
SIMGRID_CONFIG = ("network/model:CM02", "network/crosstraffic:0", "network/latency-factor:1",
                  "network/bandwidth-factor:1", "network/weight-S:0", "network/TCP-gamma:0")
INSTALL = ("SimGrid is not installed ({error}): see this script's docstring to build it, e.g. "
           "pip install pybind11==2.13.6 && pip install --no-build-isolation simgrid "
           "(needs g++, libboost-dev, cmake)")
COLUMNS = ("case", "ranks", "ours_wall_s", "simgrid_wall_s", "ratio", "ours_sim_s",
           "simgrid_sim_s", "rel_diff", "closed_form_s")


@dataclass(frozen=True)
class Case:
    """One side-by-side case: an algorithm and a size on a topology kind."""

    name: str
    topology: str
    algorithm: str
    size_bytes: int


CASES = {case.name: case for case in (Case("ring", "switch", "ring", 1 << 30),
                                      Case("tree", "switch", "tree", 64 << 20),
                                      Case("shared", "ring", "halving_doubling", 64 << 20))}


def scenario_for(case: Case, ranks: int) -> Scenario:
    """``case`` on ``ranks`` GPUs of its topology, on the vectorised engine."""
    topology = TopologySpec(case.topology, {"ranks": ranks, "bandwidth": BANDWIDTH_BPS,
                                            "latency": LATENCY_S})
    return Scenario(name=f"simgrid-{case.name}-{ranks}", source="bench/simgrid_ring.py",
                    topology=topology, algorithms=(case.algorithm,), sizes=(case.size_bytes,),
                    dtype=DTYPE, output=Path("/tmp/simgrid-bench"),
                    run=RunSettings(engine=Engine.VECTOR))


def ours(case: Case, ranks: int, repeat: int) -> tuple[float, float, float]:
    """(best wall seconds, simulated seconds, closed form) of our vectorised engine."""
    scenario = scenario_for(case, ranks)
    setup = prepare(scenario)
    walls, sim_s, model_s = [], 0.0, 0.0
    for _ in range(repeat):
        start = time.perf_counter()
        result = run_point(scenario, setup.algorithms[0], case.size_bytes, setup=setup)
        walls.append(time.perf_counter() - start)
        if result.verified is not True:
            raise SystemExit(f"our run of {case.name} on {ranks} ranks failed verification")
        sim_s, model_s = float(result.sim_time_s), float(result.model_time_s)
    return min(walls), sim_s, model_s


@dataclass(frozen=True)
class Plan:
    """What SimGrid needs of a schedule, as plain lists for the actors.

    ``posts[r][p]``: the messages rank r posts once its receive p completes (``NONE``: at the
    start); ``next_on[m]``: the message after m on its connection; ``followers[m]``: the
    receives whose receive before them is m; ``mailbox[m]``: m's connection's name;
    ``inbound[r]``: how many messages rank r takes from each connection into it;
    ``receives[r]``: how many receives rank r completes (join markers included, which arrive
    as they are posted)."""

    src: list[int]
    dst: list[int]
    nbytes: list[int]
    posts: list[dict[int, list[int]]]
    connection_previous: list[int]
    next_on: dict[int, int]
    followers: dict[int, list[int]]
    receive_previous: list[int]
    mailbox: list[str]
    latency: list[float]
    inbound: list[dict[str, int]]
    receives: list[int]
    pairs: list[tuple[int, int]]


def plan_of(schedule: Schedule, machine: Machine) -> Plan:
    """The per-rank plan of ``schedule``; SystemExit where it holds ops SimGrid does not run
    here (local reductions, which cost GPU time; switch rounds)."""
    kinds = schedule.kinds
    if ((kinds != Op.MESSAGE) & (kinds != Op.JOIN)).any():
        raise SystemExit("the schedule holds local reductions or switch rounds: not run on SimGrid")
    src, dst = schedule.src.tolist(), schedule.dst.tolist()
    nbytes = ((schedule.send_stop - schedule.send_start) * DTYPE.itemsize).tolist()
    previous = schedule.connection_previous.tolist()
    receive_previous = schedule.receive_previous.tolist()
    posted_after = schedule.posted_after.tolist()
    mailbox = [f"{s}>{d}#{t}" for s, d, t in zip(src, dst, schedule.threads.tolist(), strict=True)]
    ranks = machine.ranks
    posts: list[dict[int, list[int]]] = [defaultdict(list) for _ in range(ranks)]
    followers: dict[int, list[int]] = defaultdict(list)
    inbound: list[dict[str, int]] = [defaultdict(int) for _ in range(ranks)]
    receives = [0] * ranks
    latency = [0.0 if s == d else machine.route(s, d).latency_s for s, d in zip(src, dst, strict=True)]
    for m, (s, d) in enumerate(zip(src, dst, strict=True)):
        posts[s][posted_after[m]].append(m)
        receives[d] += 1
        if receive_previous[m] != NONE:
            followers[receive_previous[m]].append(m)
        if s != d:
            inbound[d][mailbox[m]] += 1
    next_on = {p: m for m, p in enumerate(previous) if p != NONE}
    pairs = sorted({(s, d) for s, d in zip(src, dst, strict=True) if s != d})
    return Plan(src, dst, nbytes, [dict(p) for p in posts], previous, next_on, dict(followers),
                receive_previous, mailbox, latency, [dict(i) for i in inbound], receives, pairs)


def schedule_of(case: Case, ranks: int) -> tuple[Schedule, Machine]:
    scenario = scenario_for(case, ranks)
    setup = prepare(scenario)
    group = Group.whole(setup.machine, case.size_bytes // DTYPE.itemsize, DTYPE.itemsize,
                        scenario.piece_bytes, setup.cost.stream_bytes)
    return setup.algorithms[0].scheduled(group), setup.machine


def rank_actor(simgrid: Any, plan: Plan, rank: int) -> None:
    """Rank ``rank`` running its part of ``plan``: posts, the connection queues, receives.

    A message's transfer starts at the later of its posting plus its route's latency and the
    arrival of the message before it on its connection (our model's connections: latencies
    overlap, so k back-to-back pieces cost alpha + k·c·beta, docs/model.md). SimGrid charges
    every message its route's latency before its transfer, so the platform's links have no
    latency and the actor waits it out itself."""
    posted: dict[int, float] = {}  # message: when its transfer may start
    left: set[int] = set()  # messages that have arrived
    arrived: set[int] = set()
    completed: set[int] = set()
    sending: dict[Any, int] = {}
    listening: dict[Any, str] = {}
    timers: list[tuple[float, int]] = []
    activities = simgrid.ActivitySet()
    expected = dict(plan.inbound[rank])
    outstanding = plan.receives[rank]

    def start(m: int, at: float) -> None:
        """Message m's transfer starts at ``at`` (now, or later by a timer)."""
        if at > simgrid.Engine.clock:
            heapq.heappush(timers, (at, m))
            return
        comm = simgrid.Mailbox.by_name(plan.mailbox[m]).put_async(m, plan.nbytes[m])
        sending[comm] = m
        activities.push(comm)

    def post(m: int) -> None:
        """Message m is posted: a marker arrives at once; a message starts after its latency
        unless its connection's message before it is still on its way."""
        if plan.src[m] == plan.dst[m]:
            arrive(m)
            return
        posted[m] = simgrid.Engine.clock + plan.latency[m]
        before = plan.connection_previous[m]
        if before == NONE or before in left:
            start(m, posted[m])

    def sent(m: int) -> None:
        """Message m has arrived: the next one on its connection starts if it is posted."""
        left.add(m)
        after = plan.next_on.get(m)
        if after is not None and after in posted:
            start(after, max(posted[after], simgrid.Engine.clock))

    def arrive(m: int) -> None:
        arrived.add(m)
        previous = plan.receive_previous[m]
        if previous == NONE or previous in completed:
            complete(m)

    def complete(m: int) -> None:
        """Receive m is complete: post what follows it, complete the receive waiting on it."""
        nonlocal outstanding
        completed.add(m)
        outstanding -= 1
        for n in plan.posts[rank].get(m, ()):
            post(n)
        for n in plan.followers.get(m, ()):
            if n in arrived:
                complete(n)

    def listen(name: str) -> None:
        comm = simgrid.Mailbox.by_name(name).get_async()
        listening[comm] = name
        activities.push(comm)

    for name in expected:
        listen(name)
    for m in plan.posts[rank].get(NONE, ()):
        post(m)
    while outstanding or sending or timers:
        while timers and timers[0][0] <= simgrid.Engine.clock:
            start(heapq.heappop(timers)[1], simgrid.Engine.clock)
        if not (sending or listening):
            simgrid.this_actor.sleep_until(timers[0][0])
            start(heapq.heappop(timers)[1], simgrid.Engine.clock)
            continue
        if not timers:
            comm = activities.wait_any()
        else:
            try:
                comm = activities.wait_any_for(timers[0][0] - simgrid.Engine.clock)
            except simgrid.TimeoutException:
                comm = None
            if comm is None or (comm not in sending and comm not in listening):
                start(heapq.heappop(timers)[1], simgrid.Engine.clock)  # its time has come
                continue
        if comm in sending:
            sent(sending.pop(comm))
            continue
        name = listening.pop(comm)
        arrive(int(comm.get_payload()))
        expected[name] -= 1
        if expected[name]:
            listen(name)


def simgrid_point(case: Case, ranks: int) -> tuple[float, float]:
    """(wall seconds, simulated seconds) of SimGrid on the point; run in a fresh process."""
    import simgrid  # type: ignore[import-not-found]

    schedule, machine = schedule_of(case, ranks)
    plan = plan_of(schedule, machine)
    engine = simgrid.Engine(["simgrid_bench", "--log=root.thres:warning",
                             *(f"--cfg={option}" for option in SIMGRID_CONFIG)])
    zone = engine.netzone_root.add_netzone_full("machine")
    hosts = [zone.add_host(f"rank{rank}", 1e9).seal() for rank in range(ranks)]
    links: dict[tuple[str, str], Any] = {}
    for a, b in plan.pairs:
        route = machine.route(a, b)
        for u, v in route.links:
            if (u, v) not in links:
                links[u, v] = zone.add_link(f"{u}>{v}",
                                            machine.routing.capacity_Bps((u, v))).seal()
        zone.add_route(hosts[a], hosts[b], [simgrid.LinkInRoute(links[link])
                                            for link in route.links], False)
    zone.seal()
    start = time.perf_counter()
    for rank, host in enumerate(hosts):
        host.add_actor(f"rank{rank}", rank_actor, simgrid, plan, rank)
    engine.run()
    return time.perf_counter() - start, float(simgrid.Engine.clock)


def simgrid_missing() -> str | None:
    """Why SimGrid cannot be imported, or None when it can."""
    try:
        importlib.import_module("simgrid")
    except ImportError as error:
        return str(error)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", choices=sorted(CASES), nargs="+", default=list(CASES),
                        help="cases to run (default: ring tree shared)")
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
    for name in args.case:
        case = CASES[name]
        for ranks in args.ranks:
            our_wall, our_sim, model = ours(case, ranks, args.repeat)
            cells: list[object] = [name, ranks, f"{our_wall:.3f}", "-", "-", f"{our_sim:.9e}",
                                   "-", "-", f"{model:.9e}"]
            if missing is None:
                with spawn.Pool(1) as pool:
                    sg_wall, sg_sim = pool.apply(simgrid_point, (case, ranks))
                cells[3:5] = [f"{sg_wall:.3f}", f"{our_wall / sg_wall:.4f}"]
                cells[6:8] = [f"{sg_sim:.9e}", f"{abs(our_sim - sg_sim) / sg_sim:.1e}"]
            print(" ".join(f"{cell:>14}" for cell in cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
