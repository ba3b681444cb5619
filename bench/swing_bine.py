"""Swing against the allreduces it was measured against (De Sensi et al., NSDI 2024, §6): ring,
recursive doubling, Rabenseifner's halving and doubling, and on tori the bucket algorithm, on our
torus, dragonfly and fat-tree builders from 32 B to 128 MiB per rank.

    python bench/swing_bine.py            # prints one markdown table per fabric

Each cell is the simulated time on the vectorised engine (``execution: ideal``; every link
50 GB/s and 500 ns, as the paper's uniform links). Swing runs as both of the paper's variants
(bandwidth-optimal, the default, and ``latency_optimal: true``), and the last column is the
faster of the two over the best of the others at that size (> 1: Swing wins), as the paper
picks its variant by size. The paper claims up to 3x over the best on
tori in this range; docs/algorithms.md (Swing) says where ours agrees and why.
"""

from __future__ import annotations

from typing import Any

from simulator import simulate

SIZES = [32, 1 << 11, 1 << 17, 1 << 23, 128 << 20]   # 32 B, 2 KiB, 128 KiB, 8 MiB, 128 MiB
LINK = {"bandwidth": "50GB/s", "latency": "500ns"}
OTHERS = ["ring", "recursive_doubling", "halving_doubling"]

FABRICS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "torus 8 x 8": ({"kind": "torus", "dims": [8, 8], **LINK}, [*OTHERS, "bucket"]),
    "torus 4 x 4 x 4": ({"kind": "torus", "dims": [4, 4, 4], **LINK}, [*OTHERS, "bucket"]),
    "dragonfly 4 groups x 4 routers x 4 GPUs": (
        {"kind": "dragonfly", "groups": 4, "routers": 4, "gpus_per_router": 4, **LINK,
         "global_bandwidth": "50GB/s", "global_latency": "1us"}, OTHERS),
    "fat_tree k = 8 (128 GPUs)": ({"kind": "fat_tree", "k": 8, **LINK}, OTHERS),
}


def table(name: str, topology: dict[str, Any], others: list[str]) -> list[str]:
    """One fabric's markdown table: times in microseconds, Swing's speed-up over the best."""
    scenario = {"name": "swing-bench", "topology": topology, "sizes": SIZES, "engine": "vector",
                "execution": "ideal"}
    frame = simulate({**scenario, "algorithms": ["swing", *others]})
    latency = simulate({**scenario, "algorithms": ["swing"],
                        "algorithm_options": {"swing": {"latency_optimal": True}}})
    assert frame.verified.all() and latency.verified.all()
    times = {(row.algorithm, row.size_bytes): row.sim_time_s for row in frame.itertuples()}
    times |= {("swing (latency)", row.size_bytes): row.sim_time_s for row in latency.itertuples()}
    algorithms = ["swing", "swing (latency)", *others]
    lines = [f"**{name}**", "", "| size | " + " | ".join(algorithms) + " | Swing vs best other |",
             "|---:|" + "---:|" * (len(algorithms) + 1)]
    for size in SIZES:
        cells = [times[algorithm, size] for algorithm in algorithms]
        lines.append(f"| {_size(size)} | " + " | ".join(f"{t * 1e6:.1f}" for t in cells)
                     + f" | {min(cells[2:]) / min(cells[:2]):.2f}x |")
    return [*lines, ""]


def _size(size: int) -> str:
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def main() -> None:
    print("Simulated allreduce time (us) per rank buffer size, execution: ideal.\n")
    for name, (topology, others) in FABRICS.items():
        print("\n".join(table(name, topology, others)))


if __name__ == "__main__":
    main()
