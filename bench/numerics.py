"""Benchmark: how far each allreduce's float16 and bfloat16 sums land from the exact sum, the
table of docs/numerics.md.

For every rank count of ``--ranks`` (default 8 and 64 GPUs of a ``switch``, 25 GB/s, 500 ns links)
and both low-precision dtypes, runs the allreduces of ``--algorithms`` at the sizes of ``--sizes``
(default 1 KiB, 64 KiB, 1 MiB and 16 MiB; above 16,384 elements per rank on the default proxy)
on seeded standard normal gradients (``--seed``; every algorithm reduces the same data at one
size), and prints one markdown table per rank count and dtype: the algorithms ranked by their
mean error in ULP over the sizes, with each size's mean and largest error, the depth d of the
bound γ_d·Σ|x_i| they are verified against (in the same ULP, about d), and whether every rank
held the same bits.

    .venv/bin/python bench/numerics.py                       # the docs' table, 2-3 minutes
    .venv/bin/python bench/numerics.py --ranks 16 --sizes 4KiB 4MiB

Exits 1 if a point is not verified.
"""

from __future__ import annotations

import argparse
import sys
import time

import pandas as pd

from simulator.runner import prepare, simulate
from simulator.scenario import scenario_from_dict
from simulator.units import format_size

ALGORITHMS = ("ring", "double_binary_tree", "halving_doubling", "recursive_doubling", "direct",
              "tree", "binomial_tree", "swing", "bine", "one_shot", "two_shot")
"""The allreduces of a flat switch that NCCL, MPI and intra-node libraries run
(docs/algorithms.md); ``two_shot_multicast`` and ``nvls`` need a reducing switch, which a
``switch`` is not."""


def run(ranks: int, dtype: str, algorithms: list[str], sizes: list[str],
        seed: int) -> tuple[pd.DataFrame, dict[str, int]]:
    """The points of one rank count and dtype, and each algorithm's reduction depth there."""
    scenario = scenario_from_dict({
        "name": f"numerics-{ranks}-{dtype}",
        "topology": {"kind": "switch", "ranks": ranks, "bandwidth": "25GB/s",
                     "latency": "500ns"},
        "algorithms": algorithms, "sizes": sizes, "dtype": dtype})
    setup = prepare(scenario)
    depths = {a.name: a.reduction_depth(setup.machine.layout) for a in setup.algorithms}
    return simulate(scenario, seed=seed), depths


def table(frame: pd.DataFrame, depths: dict[str, int]) -> str:
    """One markdown table: the algorithms best first (least mean ULP error over the sizes)."""
    sizes = list(dict.fromkeys(frame.size_bytes))
    by = frame.groupby("algorithm", sort=False)
    order = by.mean_ulp_error.mean().sort_values(kind="stable").index
    head = ("| rank | algorithm | d | " + " | ".join(f"{format_size(s)} mean / max"
                                                     for s in sizes)
            + " | ranks identical |")
    lines = [head, "|" + "---|" * (4 + len(sizes))]
    for place, name in enumerate(order, start=1):
        rows = frame[frame.algorithm == name].set_index("size_bytes")
        cells = [f"{rows.loc[s, 'mean_ulp_error']:.3f} / {rows.loc[s, 'max_ulp_error']:.2f}"
                 for s in sizes]
        identical = "yes" if rows.ranks_identical.all() else "no"
        lines.append(f"| {place} | {name} | {depths[name]} | " + " | ".join(cells)
                     + f" | {identical} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--sizes", nargs="+", default=["1KiB", "64KiB", "1MiB", "16MiB"])
    parser.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    failed = 0
    for ranks in args.ranks:
        for dtype in ("float16", "bfloat16"):
            frame, depths = run(ranks, dtype, args.algorithms, args.sizes, args.seed)
            failed += int((~frame.verified.astype(bool)).sum())
            print(f"### {ranks} ranks, {dtype}\n")
            print(table(frame, depths) + "\n")
    print(f"{time.perf_counter() - started:.0f} s; {failed} point(s) not verified")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
