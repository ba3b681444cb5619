"""Benchmark: the slow cases of the speed issue (issue 22), profiled before anything is made faster.

Each case runs in a process of its own, so that its peak memory is its own, with a time budget
after which it is stopped and reported as over budget. For each it prints the wall time (process
start included), the peak resident memory, the messages the fabric carried and the instants
(SimPy events, or the vectorised engine's instants: the results' ``events`` column) summed over
its points, µs of wall time per instant, and the issue's target. Training cases report no
messages or instants (a step's bucket results do not keep them). With ``--profile`` a case runs
under cProfile and the functions with the most cumulative time follow its line.

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


def _superpod_auto() -> dict[str, Any]:
    return {"name": "superpod64-auto", "topology": {"preset": "dgx_h100_superpod", "nodes": 64},
            "algorithms": "auto", "sizes": {"from": "1KiB", "to": "8GiB", "factor": 8}}


def _superpod_all() -> dict[str, Any]:
    return {**_superpod_auto(), "name": "superpod64-all", "algorithms": "all"}


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
    Case("h100x8-auto", "8 x DGX H100 (64 GPUs), auto, 1 MiB-8 GiB by 8 (5 sizes)", 20.0,
         _h100x8_auto),
    Case("superpod64-auto", "64 x DGX H100 superpod (512 GPUs), auto, 1 KiB-8 GiB by 8", 60.0,
         _superpod_auto, default=False),
    Case("superpod64-all", "the same with algorithms: all", 300.0, _superpod_all, default=False),
    Case("fat-tree-direct", "direct on the 128-GPU k = 8 fat-tree at 256 MiB", 30.0,
         _fat_tree_direct),
    Case("gb200-2rack-ring", "ring, nccl, 4 channels, 16 MiB on two GB200 NVL72 racks", 5.0,
         _gb200_ring),
    Case("llama-1024", "scenarios/train_llama_7b.yaml swept to 1,024 GPUs", 120.0, _llama_1024,
         training=True, default=False),
)
"""The issue's cases; those not ``default`` take far over a budget of minutes today."""

SCENARIO_TARGET_S = 30.0
"""Every shipped scenario's target."""


def run_case(case: Case, profile: bool, top: int) -> dict[str, Any]:
    """Run ``case`` here and return what the parent prints (this process is the child)."""
    from simulator.runner import simulate
    from simulator.trainer import train

    profiler = cProfile.Profile() if profile else None
    scenario = case.scenario()
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
    out: dict[str, Any] = {"wall_s": wall, "messages": messages, "instants": events,
                           "points": points,
                           "rss_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
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


def _child(name: str, profile: bool, top: int) -> int:
    print(json.dumps(run_case(_all_cases()[name], profile, top)))
    return 0


def _count(n: int | None) -> str:
    return "—" if n is None else f"{n:,}"


def _row(case: Case, result: dict[str, Any] | None, wall_s: float, budget_s: float) -> str:
    if result is None:
        return (f"| {case.name} | {case.what} | > {budget_s:.0f} (stopped) | — | — | — | — | "
                f"{case.target_s:.0f} | no |")
    instants = result["instants"]
    per = f"{1e6 * result['wall_s'] / instants:.1f}" if instants else "—"
    met = "yes" if wall_s <= case.target_s else "no"
    return (f"| {case.name} | {case.what} | {wall_s:.1f} | {result['rss_MiB']:.0f} | "
            f"{_count(result['messages'])} | {_count(instants)} | {per} | {case.target_s:.0f} | "
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
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child, args.profile, args.top)
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
    print("| case | what | wall (s) | peak RSS (MiB) | messages | instants | µs / instant | "
          "target (s) | met |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    for name in dict.fromkeys(names):
        case = cases[name]
        command = [sys.executable, __file__, "--child", name, "--top", str(args.top)]
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
