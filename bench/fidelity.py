"""Fidelity: the simulator's bus bandwidth beside published nccl-tests measurements.

For each dataset (a preset and a measured all_reduce_perf sweep, sources in docs/reference/), at
every measured size from 32 KiB up: the algorithm NCCL's own cost model picks
(:func:`simulator.model.nccl.choose`), the measured busbw, the simulated busbw of that algorithm
on the preset, and the error. The summary line is the geometric mean of |simulated / measured|
over those sizes, as the fidelity issue asks.

    python bench/fidelity.py                          # print the tables
    python bench/fidelity.py --write docs/fidelity.md # and regenerate the committed page

The NCCL graphs (channels × per-channel bandwidth) each dataset's cost model uses are stated
below: no published search log gives them, so they are assumptions taken from search.cc's speed
arrays, chosen so that the picks match what NCCL is reported to run (docs/fidelity.md).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from simulator.measured.nccl_tests import Measurement, load_measurements
from simulator.model.nccl import Arch, Graph, NcclAlgorithm, System, choose
from simulator.runner import Setup, prepare, run_point
from simulator.scenario import Scenario, scenario_from_dict

REPO = Path(__file__).resolve().parent.parent

SMALLEST = 32 << 10
"""Sizes below 32 KiB are all latency; the issue's sweep starts here."""

SIMULATED = {NcclAlgorithm.RING: "ring", NcclAlgorithm.TREE: "tree", NcclAlgorithm.NVLS: "nvls"}
"""The registry algorithm that runs each NCCL algorithm's schedule."""


@dataclass(frozen=True)
class Dataset:
    """A measured sweep and the machine it ran on, as a preset and NCCL's view of it."""

    title: str
    measured: str
    preset: str
    reduce_bandwidth: str
    system: System
    note: str


DATASETS = (
    Dataset(
        "8 × H200 SXM, one node (the DGX H100 fabric: NVLink 4, third-generation NVSwitch)",
        "docs/reference/nccl-tests-h200.csv", "dgx_h100", "1.1TB/s",
        System(ranks=8, nodes=1, arch=Arch.HOPPER, graphs={
            NcclAlgorithm.RING: Graph(12, 30.0, 30.0), NcclAlgorithm.TREE: Graph(12, 30.0, 30.0),
            NcclAlgorithm.NVLS: Graph(16, 24.0, 24.0)}),
        "NCCL 2.30.7, default selection (reported: Ring/LL up to 1 MiB, NVLS/Simple from 2 MiB). "
        "Graphs assumed: ring and tree 12 × 30 GB/s, NVLS 16 × 24 GB/s."),
    Dataset(
        "8 × A100-SXM4-40GB, one node (the DGX A100 fabric: NVLink 3, second-generation NVSwitch)",
        "docs/reference/nccl-tests-a100.log", "dgx_a100", "680GB/s",
        System(ranks=8, nodes=1, arch=Arch.AMPERE, graphs={
            NcclAlgorithm.RING: Graph(12, 20.0, 20.0), NcclAlgorithm.TREE: Graph(12, 20.0, 20.0)}),
        "NCCL version not stated, default selection, one process driving 8 GPUs (its ~35 µs "
        "floor is not a per-GPU process's latency). Graphs assumed: ring and tree 12 × 20 GB/s."),
)


@dataclass(frozen=True)
class Row:
    """One size: NCCL's pick, the measured and simulated busbw and time."""

    size_bytes: int
    pick: str
    measured_busbw_GBps: float
    simulated_busbw_GBps: float
    measured_time_us: float
    simulated_time_us: float

    @property
    def ratio(self) -> float:
        """simulated / measured busbw (time's inverse ratio)."""
        return self.simulated_busbw_GBps / self.measured_busbw_GBps


def compare(dataset: Dataset) -> list[Row]:
    """Simulate NCCL's pick at every measured size of ``dataset`` (32 KiB and up)."""
    measured = [m for m in load_measurements(REPO / dataset.measured).rows if m.size_bytes >= SMALLEST]
    scenario = scenario_from_dict({
        "name": f"fidelity-{dataset.preset}", "topology": {"preset": dataset.preset},
        "sizes": [m.size_bytes for m in measured], "algorithms": sorted(set(SIMULATED.values()) & {
            SIMULATED[choose(dataset.system, m.size_bytes).algorithm] for m in measured}),
        "gpu": {"reduce_bandwidth": dataset.reduce_bandwidth}}, source=dataset.measured)
    setup = prepare(scenario)
    return [_row(scenario, setup, dataset.system, m) for m in measured]


def _row(scenario: Scenario, setup: Setup, system: System, measured: Measurement) -> Row:
    pick = choose(system, measured.size_bytes)
    result = run_point(scenario, SIMULATED[pick.algorithm], measured.size_bytes, setup=setup)
    return Row(measured.size_bytes, f"{pick.algorithm.value}/{pick.protocol.value}",
               measured.busbw_GBps, result.busbw_GBps, measured.time_us, result.sim_time_s * 1e6)


def geomean_error(rows: list[Row]) -> float:
    """exp(mean |log(simulated / measured)|) - 1: the typical factor by which the two differ."""
    return math.exp(sum(abs(math.log(row.ratio)) for row in rows) / len(rows)) - 1


def table(dataset: Dataset, rows: list[Row]) -> str:
    """A markdown table of one dataset, then its summary line."""
    lines = [f"### {dataset.title}", "", f"Measured: `{dataset.measured}`. {dataset.note}", "",
             "| size (B) | NCCL pick | measured busbw (GB/s) | simulated busbw (GB/s) | error |"
             " measured time (µs) | simulated time (µs) |",
             "|---:|---|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row.size_bytes} | {row.pick} | {row.measured_busbw_GBps:.2f} | "
                     f"{row.simulated_busbw_GBps:.2f} | {100 * (row.ratio - 1):+.1f} % | "
                     f"{row.measured_time_us:.2f} | {row.simulated_time_us:.2f} |")
    lines += ["", f"Geometric mean |error| over {len(rows)} sizes: "
                  f"**{100 * geomean_error(rows):.1f} %**.", ""]
    return "\n".join(lines)


PAGE_HEAD = """# Fidelity: simulated against measured

Generated by `python bench/fidelity.py --write docs/fidelity.md`; do not edit by hand.

Each table sets the simulator's bus bandwidth beside a published nccl-tests `all_reduce_perf`
sweep on the same machine, at every measured size from 32 KiB up. At each size the simulated
algorithm is the one NCCL's own cost model picks there
([`simulator/model/nccl.py`](../simulator/model/nccl.py), NCCL 2.30.7's `tuning.cc`), and the
error is simulated busbw / measured busbw − 1 (positive: the simulation is too fast). Simulated
runs use the scenario's execution model as it stands:
the ideal wire (spec-sheet link rates, NCCL's LL per-hop latencies split over hops, no protocol
efficiency, no launch latency, one channel), so these tables measure how far that model is from
real NCCL. The data and their sources are in [reference/](reference/).

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
