"""Swing and Bine against the allreduces they were measured against (De Sensi et al., NSDI 2024,
§6; De Sensi et al., SC'25): ring, recursive doubling, Rabenseifner's halving and doubling, and
on tori the bucket algorithm, on our torus, dragonfly, fat-tree and oversubscribed leaf-spine
builders from 32 B to 128 MiB per rank; then the bytes each puts on the links between groups.

    python bench/swing_bine.py            # prints markdown tables, ~1 minute

Each time cell is the simulated time on the vectorised engine (``execution: ideal``; every link
50 GB/s and 500 ns, as the papers' uniform links; the dragonfly's one global cable between two
groups and the leaf-spine's 4:1 uplinks are where the fabric tapers). Swing and Bine run as both
of their variants (bandwidth-optimal, the default, and ``latency_optimal: true``); the last two
columns are the faster variant over the best of ring, recursive doubling, halving and doubling
(and bucket) at that size (> 1: it wins), as the papers pick their variant by size. Swing claims
up to 3x on tori, Bine up to 5x and 33 % less global-link traffic; docs/algorithms.md (swing,
bine) says where ours agrees and why.

The global-link table counts, from the run's link recorder, the bytes on the links that leave a
group of consecutive ranks (dragonfly: router to router between groups; fat tree: aggregation to
core, out of a pod; leaf-spine: leaf to spine), over the buffer size n. Its last row is not
simulated: the binomial butterfly with distance doubling (rank r XOR 2^s at step s, the largest
messages first, as Open MPI's Rabenseifner allreduce), the paper's baseline for the 33 %,
counted from its pairs as the messages that cross a group boundary (each crosses one such link
on these fabrics' minimal routes; the bine row counted the same way equals the recorder's). Our
builders number ranks so that every group is an aligned block of 2^k ranks, where XOR partners
leave a group only in the last steps; the two "shifted" rows count both butterflies with the
job's ranks starting at each place of a group in turn (the mean), as on a machine whose jobs are
not aligned to its groups.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from simulator import simulate
from simulator.algorithms.phases.bine import bine_butterfly
from simulator.model.activity import Watch
from simulator.output.links import links_frame

SIZES = [32, 1 << 11, 1 << 17, 1 << 23, 128 << 20]   # 32 B, 2 KiB, 128 KiB, 8 MiB, 128 MiB
LINK = {"bandwidth": "50GB/s", "latency": "500ns"}
OTHERS = ["ring", "recursive_doubling", "halving_doubling"]
VARIANTS = ["swing", "bine"]
TRAFFIC_BYTES = 1 << 20
"""The size of the global-link count (bytes scale with n; 1 MiB keeps every message whole)."""

FABRICS: dict[str, tuple[dict[str, Any], list[str], int]] = {
    # name: (topology, the others it is compared with, ranks per group for the traffic table)
    "torus 8 x 8": ({"kind": "torus", "dims": [8, 8], **LINK}, [*OTHERS, "bucket"], 0),
    "torus 4 x 4 x 4": ({"kind": "torus", "dims": [4, 4, 4], **LINK}, [*OTHERS, "bucket"], 0),
    "dragonfly 4 groups x 4 routers x 4 GPUs": (
        {"kind": "dragonfly", "groups": 4, "routers": 4, "gpus_per_router": 4, **LINK,
         "global_bandwidth": "50GB/s", "global_latency": "1us"}, OTHERS, 16),
    "fat_tree k = 8 (128 GPUs)": ({"kind": "fat_tree", "k": 8, **LINK}, OTHERS, 16),
    "leaf_spine 8 leaves x 8 GPUs, 2 spines, 4:1": (
        {"kind": "leaf_spine", "leaves": 8, "gpus_per_leaf": 8, "spines": 2,
         "oversubscription": 4, **LINK}, OTHERS, 8),
}


def table(name: str, topology: dict[str, Any], others: list[str]) -> list[str]:
    """One fabric's markdown table: times in microseconds, each variant's speed-up over the best
    other."""
    scenario = {"name": "swing-bine-bench", "topology": topology, "sizes": SIZES,
                "engine": "vector", "execution": "ideal"}
    frame = simulate({**scenario, "algorithms": [*VARIANTS, *others]})
    latency = simulate({**scenario, "algorithms": VARIANTS, "algorithm_options": {
        variant: {"latency_optimal": True} for variant in VARIANTS}})
    assert frame.verified.all() and latency.verified.all()
    times = {(row.algorithm, row.size_bytes): row.sim_time_s for row in frame.itertuples()}
    times |= {(f"{row.algorithm} (latency)", row.size_bytes): row.sim_time_s
              for row in latency.itertuples()}
    algorithms = [f"{v}{kind}" for v in VARIANTS for kind in ("", " (latency)")] + others
    lines = [f"**{name}**", "", "| size | " + " | ".join(algorithms)
             + " | Swing vs best other | Bine vs best other |",
             "|---:|" + "---:|" * (len(algorithms) + 2)]
    for size in SIZES:
        cells = [times[algorithm, size] for algorithm in algorithms]
        best = min(cells[4:])
        lines.append(f"| {_size(size)} | " + " | ".join(f"{t * 1e6:.1f}" for t in cells)
                     + f" | {best / min(cells[:2]):.2f}x | {best / min(cells[2:4]):.2f}x |")
    return [*lines, ""]


def crossing(links: pd.DataFrame, kind: str) -> pd.Series:
    """Which rows of a links table leave a group: between two dragonfly groups' routers
    (``g<i>.r<j>``), from an aggregation to a core switch (fat tree, tiers 2 to 3), or from a
    leaf to a spine (leaf-spine, tiers 1 to 2)."""
    if kind == "dragonfly":
        ends = [links[end].str.split(".").str[0] for end in ("from", "to")]
        return (links.from_kind == "switch") & (links.to_kind == "switch") & (ends[0] != ends[1])
    low = 2 if kind == "fat_tree" else 1
    return (links.from_tier == low) & (links.to_tier == low + 1)


def counted(ranks: int, group: int, partners: list[list[int]], shifts: int = 1) -> float:
    """Bytes / n across group boundaries of a reduce-scatter whose step s sends n/2^{s+1} to
    ``partners[s][r]``, and the allgather back, each crossing message counted once; with
    ``shifts`` > 1 the mean over the job's ranks starting at each of the first ``shifts``
    places of a group (rank r in group (r + shift) // group), an allocation not aligned to the
    groups as the paper's jobs on shared machines."""
    return sum(2 * sum(sum((r + shift) // group != (partner[r] + shift) // group
                           for r in range(ranks)) / 2 ** (s + 1)
                       for s, partner in enumerate(partners))
               for shift in range(shifts)) / shifts


def traffic() -> list[str]:
    """The global-link table: bytes / n on links out of a group, per fabric and algorithm."""
    fabrics = {name: spec for name, spec in FABRICS.items() if spec[2]}
    rows: dict[str, list[str]] = {}
    for name, (topology, others, group) in fabrics.items():
        watch = Watch()
        algorithms = [*VARIANTS, *others]
        frame = simulate({"name": "swing-bine-traffic", "topology": topology, "engine": "vector",
                          "execution": "ideal", "sizes": [TRAFFIC_BYTES],
                          "algorithms": algorithms}, watch=watch)
        assert frame.verified.all()
        links = links_frame(watch.activities)
        carried = links[crossing(links, topology["kind"])].groupby("algorithm").bytes.sum()
        for algorithm in algorithms:
            rows.setdefault(algorithm, []).append(f"{carried.get(algorithm, 0) / TRAFFIC_BYTES:g}")
        ranks = len(frame.ranks) and int(frame.ranks.iloc[0])
        steps = ranks.bit_length() - 1
        fly = bine_butterfly(ranks)
        bine = counted(ranks, group, [list(row) for row in fly.partners])
        assert bine == carried["bine"] / TRAFFIC_BYTES, (name, bine, carried["bine"])
        xor = [[r ^ (1 << s) for r in range(ranks)] for s in range(steps)]
        binomial = counted(ranks, group, xor)
        rows.setdefault("binomial butterfly, distance doubling (counted)", []).append(
            f"{binomial:g} (bine {100 * (bine / binomial - 1):+.0f} %)")
        shifted = [counted(ranks, group, partners, group)
                   for partners in ([list(row) for row in fly.partners], xor)]
        rows.setdefault("bine, allocation shifted (counted, mean of the shifts)", []).append(
            f"{shifted[0]:.2f}")
        rows.setdefault("binomial, distance doubling, shifted (counted)", []).append(
            f"{shifted[1]:.2f} (bine {100 * (shifted[0] / shifted[1] - 1):+.0f} %)")
    return ["**Bytes on the links out of a group, over n (1 MiB per rank)**", "",
            "| algorithm | " + " | ".join(fabrics) + " |", "|---|" + "---:|" * len(fabrics),
            *(f"| {algorithm} | " + " | ".join(cells) + " |" for algorithm, cells in rows.items()),
            ""]


def _size(size: int) -> str:
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def main() -> None:
    print("Simulated allreduce time (us) per rank buffer size, execution: ideal.\n")
    for name, (topology, others, _) in FABRICS.items():
        print("\n".join(table(name, topology, others)))
    print("\n".join(traffic()))


if __name__ == "__main__":
    main()
