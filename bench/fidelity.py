"""Fidelity: the simulator's bus bandwidth beside published nccl-tests measurements.

For each dataset (a preset and a measured all_reduce_perf sweep, sources in docs/reference/), at
every measured size from 32 KiB up: the algorithm and protocol NCCL's own cost model picks
(:func:`simulator.model.nccl.choose`), the measured busbw, and the simulated busbw of that
algorithm on the preset under each execution model (ideal, nccl) with its error. The summary
line is the geometric mean of |simulated / measured| over those sizes, as the fidelity issue
asks.

    python bench/fidelity.py                          # print the tables
    python bench/fidelity.py --write docs/fidelity.md # and regenerate the committed page
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from simulator.measured.nccl_tests import load_measurements
from simulator.model.execution import system_of
from simulator.model.nccl import NcclAlgorithm, choose
from simulator.runner import prepare, run_point
from simulator.scenario import scenario_from_dict

REPO = Path(__file__).resolve().parent.parent

SMALLEST = 32 << 10
"""Sizes below 32 KiB are all latency; the issue's sweep starts here."""

SIMULATED = {NcclAlgorithm.RING: "ring", NcclAlgorithm.TREE: "tree", NcclAlgorithm.NVLS: "nvls"}
"""The registry algorithm that runs each NCCL algorithm's schedule."""


@dataclass(frozen=True)
class Dataset:
    """A measured sweep and the preset of the machine it ran on."""

    title: str
    measured: str
    preset: str
    reduce_bandwidth: str
    note: str


DATASETS = (
    Dataset(
        "8 × H200 SXM, one node (the DGX H100 fabric: NVLink 4, third-generation NVSwitch)",
        "docs/reference/nccl-tests-h200.csv", "dgx_h100", "1.1TB/s",
        "NCCL 2.30.7, default selection (reported: Ring/LL up to 1 MiB, NVLS/Simple from 2 MiB)."),
    Dataset(
        "8 × A100-SXM4-40GB, one node (the DGX A100 fabric: NVLink 3, second-generation NVSwitch)",
        "docs/reference/nccl-tests-a100.log", "dgx_a100", "680GB/s",
        "NCCL version not stated, default selection, one process driving 8 GPUs (its ~35 µs "
        "floor is not a per-GPU process's latency)."),
)


@dataclass(frozen=True)
class Row:
    """One size: NCCL's pick, the measured busbw and the simulated one per execution model."""

    size_bytes: int
    pick: str
    measured_busbw_GBps: float
    simulated_busbw_GBps: dict[str, float]

    def ratio(self, execution: str) -> float:
        """simulated / measured busbw under ``execution``."""
        return self.simulated_busbw_GBps[execution] / self.measured_busbw_GBps


EXECUTIONS = ("ideal", "nccl")


def compare(dataset: Dataset) -> list[Row]:
    """Simulate NCCL's pick at every measured size of ``dataset`` (32 KiB and up), under both
    execution models."""
    measured = [m for m in load_measurements(REPO / dataset.measured).rows if m.size_bytes >= SMALLEST]
    busbw: dict[str, list[float]] = {}
    picks: list[str] = []
    for execution in EXECUTIONS:
        scenario = scenario_from_dict({
            "name": f"fidelity-{dataset.preset}", "topology": {"preset": dataset.preset},
            "sizes": [m.size_bytes for m in measured], "algorithms": sorted(SIMULATED.values()),
            "gpu": {"reduce_bandwidth": dataset.reduce_bandwidth}, "execution": execution},
            source=dataset.measured)
        setup = prepare(scenario, select=False)
        system = system_of(setup.machine)
        busbw[execution] = []
        picks = []
        for m in measured:
            pick = choose(system, m.size_bytes)
            picks.append(f"{pick.algorithm.value}/{pick.protocol.value}")
            result = run_point(scenario, SIMULATED[pick.algorithm], m.size_bytes, setup=setup)
            busbw[execution].append(result.busbw_GBps)
    return [Row(m.size_bytes, pick, m.busbw_GBps, {e: busbw[e][i] for e in EXECUTIONS})
            for i, (m, pick) in enumerate(zip(measured, picks, strict=True))]


def geomean_error(rows: list[Row], execution: str) -> float:
    """exp(mean |log(simulated / measured)|) - 1: the typical factor by which the two differ."""
    return math.exp(sum(abs(math.log(row.ratio(execution))) for row in rows) / len(rows)) - 1


def table(dataset: Dataset, rows: list[Row]) -> str:
    """A markdown table of one dataset, then its summary line."""
    lines = [f"### {dataset.title}", "", f"Measured: `{dataset.measured}`. {dataset.note}", "",
             "| size (B) | NCCL pick | measured busbw (GB/s) | ideal (GB/s) | error | "
             "nccl (GB/s) | error |",
             "|---:|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        cells = [f"{row.simulated_busbw_GBps[e]:.2f} | {100 * (row.ratio(e) - 1):+.1f} %"
                 for e in EXECUTIONS]
        lines.append(f"| {row.size_bytes} | {row.pick} | {row.measured_busbw_GBps:.2f} | "
                     + " | ".join(cells) + " |")
    summary = ", ".join(f"{e} **{100 * geomean_error(rows, e):.1f} %**" for e in EXECUTIONS)
    lines += ["", f"Geometric mean |error| over {len(rows)} sizes: {summary}.", ""]
    return "\n".join(lines)


PAGE_HEAD = """# Fidelity: simulated against measured

Generated by `python bench/fidelity.py --write docs/fidelity.md` (`make fidelity`); do not edit
by hand.

Each table sets the simulator's bus bandwidth beside a published nccl-tests `all_reduce_perf`
sweep on the same machine, at every measured size from 32 KiB up. At each size the simulated
algorithm and protocol are the ones NCCL's own cost model picks there
([`simulator/model/nccl.py`](../simulator/model/nccl.py), NCCL 2.30.7's `tuning.cc`, with the
graphs of `DEFAULT_GRAPHS`), and the error is simulated busbw / measured busbw − 1 (positive:
the simulation is too fast). Two execution models: `ideal` (spec-sheet link rates, NCCL's LL
per-hop latencies split over hops, no protocol, no launch latency) and `nccl` (base latency,
per-step latency and link share of the protocol, NVLS at its fitted share;
[model.md](model.md)). The data and their sources are in [reference/](reference/).

"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="also write the markdown page to this file")
    args = parser.parse_args(argv)
    sections = []
    for dataset in DATASETS:
        rows = compare(dataset)
        sections.append(table(dataset, rows))
        print(sections[-1], flush=True)
    if args.write:
        args.write.write_text(PAGE_HEAD + "\n".join(sections), encoding="utf-8")
        print(f"# wrote {args.write}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
