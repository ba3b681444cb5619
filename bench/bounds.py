"""Benchmark: every registered algorithm's closed form against the fabric's floor (issue 38).

For every preset in ``topologies/``, at 1 to 32 nodes (and ``--nodes`` to choose), on the ideal
wire and under ``execution: nccl``, each collective's every applicable algorithm is planned
(:func:`simulator.plan.plan_point`, as a run plans its row) at a few sizes, and its closed
form (the row's ``model_time_s``) compared with :func:`simulator.model.floor.floor_s` on the
machine the closed form is timed on. A line per point below the floor, with the row's
``model_kind`` (``bound`` rows below the floor are bugs), then the counts.

    PYTHONPATH=. .venv/bin/python bench/bounds.py [--nodes 1 2 4 8 16 32] [--presets dgx_h100 ...]
        [--all-collectives]

On main before issue 38: 173 allreduce points below the floor at 1-32 nodes (gb200_nvl72 to 4
racks), every one under ``execution: nccl`` on several channels (swing and bine 55 each,
double_binary_tree 29, direct 14, ...); after it, none of those 173 (each re-planned), and
none on any preset at 1-2 nodes (tests/test_bounds.py).
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from simulator.errors import InputError
from simulator.model.collective import Collective
from simulator.model.floor import floor_s
from simulator.plan import plan_point, prepare
from simulator.runner import settings_of
from simulator.scenario import scenario_from_dict

TOPOLOGIES = Path(__file__).resolve().parent.parent / "topologies"
SIZES = ("1MiB", "64MiB", "1GiB")
"""A pipeline's start, its middle and the bandwidth-bound end."""


def presets() -> list[str]:
    """Every shipped preset's name."""
    return sorted(path.stem for path in TOPOLOGIES.glob("*.yaml"))


def check(preset: str, nodes: int, execution: str, collective: Collective,
          counts: Counter[str]) -> None:
    """Plan every algorithm of ``collective`` on ``nodes`` of ``preset`` and print each point
    whose closed form falls below the floor."""
    try:
        scenario = scenario_from_dict({
            "name": "bounds", "topology": {"preset": preset, "nodes": nodes},
            "collective": collective.value, "sizes": list(SIZES), "algorithms": "all",
            "execution": execution, "verify": False})
        setup = prepare(scenario)
    except InputError:
        return  # the preset has no such node count, or no algorithm of this collective applies
    settings = settings_of(scenario)
    for algorithm in setup.algorithms:
        for size in scenario.sizes:
            try:
                plan = plan_point(scenario, setup, algorithm, size, settings)
            except InputError:
                continue  # cannot run at this size (chunks, NCCL refuses the protocol)
            floor = floor_s(plan.cost.machine, collective, size)
            counts["points"] += 1
            if plan.model_s < floor * (1 - 1e-9):
                kind = algorithm.model_kind.value
                counts[kind] += 1
                busbw = collective.busbw_factor(plan.machine.ranks) * size / 1e9
                print(f"{preset:>18} {nodes:>3} {execution:>5} {collective.value:>14} "
                      f"{algorithm.name:>20} {size:>11} {kind:>8}: closed form "
                      f"{busbw / plan.model_s:8.1f} GB/s busbw, floor {busbw / floor:8.1f}")


def main() -> None:
    """Every preset, node count, execution model and collective."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32])
    parser.add_argument("--presets", nargs="+", default=presets(), choices=presets())
    parser.add_argument("--all-collectives", action="store_true",
                        help="every collective, not only allreduce")
    args = parser.parse_args()
    collectives = list(Collective) if args.all_collectives else [Collective.ALLREDUCE]
    counts: Counter[str] = Counter()
    for preset in args.presets:
        for nodes in args.nodes:
            for execution in ("ideal", "nccl"):
                for collective in collectives:
                    check(preset, nodes, execution, collective, counts)
    print(f"{counts['points']} points; below the floor: {counts['bound']} claiming a bound, "
          f"{counts['estimate']} estimates")


if __name__ == "__main__":
    main()
