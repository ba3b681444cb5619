"""Benchmark: the slow cases of the speed issues (issues 22 and 36), with their targets.

Each case runs in a process of its own, so that its peak memory is its own, with a time budget
after which it is stopped and reported as over budget. For each it prints the wall time (process
start included), the peak resident memory, the messages the fabric carried and the instants
(SimPy events, or the vectorised engine's instants: the results' ``events`` column) summed over
its points, how many of those instants the steady-state fast-forward jumped over instead of
processing (:mod:`simulator.engine.steady`), µs of wall time per instant processed, the issue's
target, and beside it a bare SimPy loop of one timeout per message of the same run (the least
a per-message SimPy engine could do; a yardstick that travels between machines better than
seconds, measured on up to a million timeouts and scaled). Training cases report no messages
or instants (a step's bucket results do not keep them). ``--fast-forward off`` runs every case
with ``fast_forward: false``. With ``--profile`` a case runs under cProfile and the functions
with the most cumulative time follow its line.

    .venv/bin/python bench/pathologies.py                       # the cases that fit the budget
    .venv/bin/python bench/pathologies.py --case h100x8-auto --profile --top 25
    .venv/bin/python bench/pathologies.py --case all --budget 1200

The table in docs/benchmark.md ("Where users wait") is this script's output.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Case:
    """One slow case: a scenario (a mapping, as in a file), what it stands for, and the issue's
    target for its wall time (s); ``training`` runs it as a training step with its sweeps."""

    name: str
    what: str
    target_s: float
    scenario: Callable[[], dict[str, Any] | str]
    training: bool = False
    default: bool = True


def _h100x8_auto() -> dict[str, Any]:
    return {"name": "h100x8-auto", "topology": {"preset": "dgx_h100", "nodes": 8},
            "algorithms": "auto", "sizes": {"from": "1MiB", "to": "8GiB", "factor": 8}}


def _h100x8_all() -> dict[str, Any]:
    return {**_h100x8_auto(), "name": "h100x8-all", "algorithms": "all"}


def _superpod_auto() -> dict[str, Any]:
    return {"name": "superpod64-auto", "topology": {"preset": "dgx_h100_superpod", "nodes": 64},
            "algorithms": "auto", "sizes": {"from": "1KiB", "to": "8GiB", "factor": 8}}


def _superpod_all() -> dict[str, Any]:
    return {**_superpod_auto(), "name": "superpod64-all", "algorithms": "all"}


def _h1024_ring() -> dict[str, Any]:
    return {"name": "h1024-ring", "topology": {"preset": "dgx_h100_superpod", "nodes": 128},
            "algorithms": ["ring"], "sizes": ["4GiB", "8GiB", "16GiB"],
            "nccl": {"algo": "ring", "proto": "LL128"}}


def _superpod_ring(nodes: int) -> Callable[[], dict[str, Any]]:
    """The ring of ``h1024-ring`` at 4 GiB on ``nodes`` DGX H100 of the superpod preset: 32
    nodes (one scalable unit) keep the ring's steps in lockstep, 64 (two units, crossing on the
    spine tier) do not: 7,193 against 472,243 instants (issue 36; docs/benchmark.md)."""
    def scenario() -> dict[str, Any]:
        return {"name": f"su-ring-{nodes}", "topology": {"preset": "dgx_h100_superpod",
                                                         "nodes": nodes},
                "algorithms": ["ring"], "sizes": ["4GiB"], "nccl": {"algo": "ring",
                                                                    "proto": "LL128"}}
    return scenario


def _h1024_auto() -> dict[str, Any]:
    return {"name": "h1024-auto", "topology": {"preset": "dgx_h100_superpod", "nodes": 128},
            "algorithms": "auto", "sizes": ["1MiB", "256MiB", "4GiB"]}


def _h8192_auto() -> dict[str, Any]:
    return {"name": "h8192-auto", "topology": {"preset": "dgx_h100_superpod", "nodes": 1024},
            "algorithms": "auto", "sizes": ["1GiB"]}


def _fat_tree_direct() -> dict[str, Any]:
    return {"name": "fat-tree-direct",
            "topology": {"kind": "fat_tree", "k": 8, "bandwidth": "400Gbps", "latency": "1us",
                         "ecmp": True},
            "algorithms": ["direct"], "sizes": ["256MiB"]}


def _gb200_ring() -> dict[str, Any]:
    return {"name": "gb200-2rack-ring", "topology": {"preset": "gb200_nvl72", "nodes": 2},
            "algorithms": ["ring"], "sizes": ["16MiB"], "channels": 4, "execution": "nccl"}


def _llama_1024() -> dict[str, Any]:
    import yaml

    scenario = yaml.safe_load((REPO / "scenarios" / "train_llama_7b.yaml").read_text())
    scenario["training"]["sweep"] = {"topology": {"nodes": [1, 2, 4, 8, 16, 32, 64, 128]}}
    return {**scenario, "name": "llama-1024"}


CASES = (
    Case("h100x8-auto", "8 x DGX H100 (64 GPUs), auto, 1 MiB-8 GiB by 8 (5 sizes)", 10.0,
         _h100x8_auto),
    Case("h100x8-all", "the same with algorithms: all", 60.0, _h100x8_all, default=False),
    Case("superpod64-auto", "64 x DGX H100 superpod (512 GPUs), auto, 1 KiB-8 GiB by 8", 30.0,
         _superpod_auto, default=False),
    Case("superpod64-all", "the same with algorithms: all", 300.0, _superpod_all, default=False),
    Case("h1024-ring", "128 x DGX H100 (1,024 GPUs), ring LL128 at 4, 8, 16 GiB", 60.0,
         _h1024_ring, default=False),
    Case("su1-ring", "h1024-ring's ring at 4 GiB on 32 x DGX H100 (one SU, 256 GPUs); "
         "target: h1024-ring's", 60.0, _superpod_ring(32), default=False),
    Case("su2-ring", "the same on 64 x DGX H100 (two SUs, 512 GPUs: crossing on the spines)",
         60.0, _superpod_ring(64), default=False),
    Case("h1024-auto", "128 x DGX H100 (1,024 GPUs), auto at 1 MiB, 256 MiB, 4 GiB", 60.0,
         _h1024_auto, default=False),
    Case("h8192-auto", "1,024 x DGX H100 (8,192 GPUs), auto at 1 GiB", 300.0, _h8192_auto,
         default=False),
    Case("fat-tree-direct", "direct on the 128-GPU k = 8 fat-tree at 256 MiB", 30.0,
         _fat_tree_direct),
    Case("gb200-2rack-ring", "ring, nccl, 4 channels, 16 MiB on two GB200 NVL72 racks", 5.0,
         _gb200_ring),
    Case("llama-1024", "scenarios/train_llama_7b.yaml swept to 1,024 GPUs", 60.0, _llama_1024,
         training=True, default=False),
)
"""The issues' cases (issue 36's targets); those not ``default`` take minutes or more."""

SCENARIO_TARGET_S = 10.0
"""Every shipped scenario's target (issue 36)."""

LOOP_TIMEOUTS = 1_000_000
"""The most timeouts the bare SimPy loop runs; a case with more messages is scaled from it."""


def bare_simpy_loop(timeouts: int) -> float:
    """Wall seconds of SimPy processing ``timeouts`` timeouts (a thousand processes), measured
    on at most :data:`LOOP_TIMEOUTS` and scaled linearly beyond."""
    import simpy

    env = simpy.Environment()
    measured = min(timeouts, LOOP_TIMEOUTS)
    each, extra = divmod(measured, 1000)

    def process(count: int) -> simpy.events.ProcessGenerator:
        for _ in range(count):
            yield env.timeout(1.0)

    for k in range(1000):
        env.process(process(each + (k < extra)))
    start = time.perf_counter()
    env.run()
    return (time.perf_counter() - start) * timeouts / max(measured, 1)


def run_case(case: Case, profile: bool, top: int, fast_forward: bool = True) -> dict[str, Any]:
    """Run ``case`` here and return what the parent prints (this process is the child)."""
    from simulator.engine import vector
    from simulator.runner import simulate
    from simulator.trainer import train

    profiler = cProfile.Profile() if profile else None
    scenario = case.scenario()
    copy = None
    if not fast_forward and isinstance(scenario, str):  # a copy beside it, for its paths
        path = Path(scenario)
        copy = path.with_name(f".{path.stem}-no-fast-forward.yaml")
        copy.write_text(path.read_text() + "\nfast_forward: false\n")
        scenario = str(copy)
    elif not fast_forward:
        assert not isinstance(scenario, str)
        scenario = {**scenario, "fast_forward": False}
    skipped = [0]
    run = vector._Run.run

    def counted(self: Any) -> Any:
        timing = run(self)
        skipped[0] += timing.skipped
        return timing

    vector._Run.run = counted  # type: ignore[method-assign]
    start = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    if case.training:
        train(scenario)
        messages = events = None
        points = 0
    else:
        frame = simulate(scenario)
        messages, events, points = int(frame.messages.sum()), int(frame.events.sum()), len(frame)
    if profiler is not None:
        profiler.disable()
    wall = time.perf_counter() - start
    if copy is not None:
        copy.unlink()
    out: dict[str, Any] = {"wall_s": wall, "messages": messages, "instants": events,
                           "skipped": skipped[0], "points": points,
                           "rss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                           "loop_s": bare_simpy_loop(messages) if messages else None}
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(top)
        out["profile"] = text.getvalue()
    return out


def _scenario_cases() -> tuple[Case, ...]:
    """Every shipped scenario as a case, run from its file (its relative paths and YAML read as
    the simulator reads them)."""
    cases = []
    for path in sorted((REPO / "scenarios").glob("*.yaml")):
        training = "\ntraining:" in path.read_text()
        cases.append(Case(f"scenario:{path.stem}", str(path.relative_to(REPO)), SCENARIO_TARGET_S,
                          lambda path=path: str(path), training=training))
    return tuple(cases)


def _all_cases() -> dict[str, Case]:
    return {case.name: case for case in (*CASES, *_scenario_cases())}


def _child(name: str, profile: bool, top: int, fast_forward: bool) -> int:
    print(json.dumps(run_case(_all_cases()[name], profile, top, fast_forward)))
    return 0


def _count(n: int | None) -> str:
    return "—" if n is None else f"{n:,}"


def _row(case: Case, result: dict[str, Any] | None, wall_s: float, budget_s: float) -> str:
    if result is None:
        return (f"| {case.name} | {case.what} | > {budget_s:.0f} (stopped) | — | — | — | — | — | "
                f"{case.target_s:.0f} | — | no |")
    instants, skipped = result["instants"], result.get("skipped", 0)
    processed = instants - skipped if instants else 0
    per = f"{1e6 * result['wall_s'] / processed:.1f}" if processed else "—"
    met = "yes" if wall_s <= case.target_s else "no"
    loop = "—" if result.get("loop_s") is None else f"{result['loop_s']:.1f}"
    return (f"| {case.name} | {case.what} | {wall_s:.1f} | {result['rss_MiB']:.0f} | "
            f"{_count(result['messages'])} | {_count(instants)} | "
            f"{_count(skipped) if instants else '—'} | {per} | {case.target_s:.0f} | {loop} | "
            f"{met} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", default=[],
                        help="a case name, 'scenarios' (every shipped scenario) or 'all'; "
                             "repeat for several (default: the cases that fit a budget)")
    parser.add_argument("--budget", type=float, default=600.0,
                        help="seconds a case may run before it is stopped (default 600)")
    parser.add_argument("--profile", action="store_true", help="print each case's cProfile top")
    parser.add_argument("--top", type=int, default=20, help="functions in a profile (20)")
    parser.add_argument("--fast-forward", choices=("on", "off"), default="on",
                        help="run the cases with fast_forward on (the default) or off")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child, args.profile, args.top, args.fast_forward == "on")
    cases = _all_cases()
    names: list[str] = []
    for wanted in args.case or ["default"]:
        if wanted == "all":
            names += list(cases)
        elif wanted == "default":
            names += [case.name for case in CASES if case.default]
        elif wanted == "scenarios":
            names += [name for name in cases if name.startswith("scenario:")]
        elif wanted in cases:
            names.append(wanted)
        else:
            parser.error(f"no case {wanted!r} ({', '.join(c.name for c in CASES)}, scenarios, all)")
    print("| case | what | wall (s) | peak RSS (MiB) | messages | instants | jumped | "
          "µs / instant run | target (s) | SimPy loop (s) | met |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name in dict.fromkeys(names):
        case = cases[name]
        command = [sys.executable, __file__, "--child", name, "--top", str(args.top),
                   "--fast-forward", args.fast_forward]
        if args.profile:
            command.append("--profile")
        start = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=args.budget,
                                  cwd=REPO, check=False)
        except subprocess.TimeoutExpired:
            print(_row(case, None, args.budget, args.budget), flush=True)
            continue
        wall = time.perf_counter() - start
        if done.returncode != 0:
            print(f"| {name} | failed: {done.stderr.strip().splitlines()[-1:]} |", flush=True)
            continue
        result = json.loads(done.stdout.strip().splitlines()[-1])
        print(_row(case, result, wall, args.budget), flush=True)
        if args.profile:
            print("\n```\n" + result["profile"].strip() + "\n```\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
