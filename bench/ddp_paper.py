"""The PyTorch DDP paper's two findings, simulated: overlapping the allreduces with the backward
pass, and the bucket size (S. Li et al., "PyTorch Distributed: Experiences on Accelerating Data
Parallel Training", VLDB 2020). For ResNet50 and BERT on 32 V100s (scenarios/ddp_paper_*.yaml):
the step with and without overlap, the speedup overlap gives (the paper, NCCL: 38.0 % for
ResNet50 and 35.2 % for BERT), and the step against the bucket cap from one bucket per gradient
("0 MB", as the paper's x axis starts) to one bucket for the whole model.

    python bench/ddp_paper.py      # about 20 s; docs/training.md quotes its output
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from simulator.runner import prepare
from simulator.scenario.parse import load_scenario
from simulator.trainer import simulate_step

REPO = Path(__file__).resolve().parent.parent
PAPER_OVERLAP = {"ddp_paper_resnet50": 0.380, "ddp_paper_bert": 0.352}
"""The paper's speedup from overlap with NCCL on 32 GPUs (§5; quoted in secondary sources,
the paper's text itself could not be read here)."""
CAPS_MB = (0, 1, 5, 10, 25, 50, 100, 200)
"""Bucket caps in MiB, each set as ``bucket_cap_mb`` (so no smaller first bucket); 0 means one
gradient per bucket."""


def main() -> None:
    for name, paper in PAPER_OVERLAP.items():
        scenario = load_scenario(REPO / "scenarios" / f"{name}.yaml")
        timed = replace(scenario.run, verify=False)
        assert scenario.training is not None
        setup = prepare(scenario)
        cache: dict = {}
        on = simulate_step(scenario, setup, timed, cache=cache)
        off = simulate_step(replace(scenario, training=replace(scenario.training, overlap=False)),
                            setup, timed, cache=cache)
        speedup = (off.step_s - on.step_s) / off.step_s
        print(f"## {name}: {on.model}, {on.ranks} GPUs, batch {on.batch}")
        print(f"compute {on.compute_s * 1e3:.1f} ms, allreduces {on.communication_s * 1e3:.1f} ms;"
              f" step {off.step_s * 1e3:.1f} ms without overlap, {on.step_s * 1e3:.1f} ms with: "
              f"overlap saves {speedup:.1%} of the step, a speedup of "
              f"{off.step_s / on.step_s - 1:.1%} (paper: {paper:.1%})")
        print("| bucket cap | buckets | allreduces (ms) | exposed (ms) | step (ms) |")
        print("|---:|---:|---:|---:|---:|")
        for cap_mb in CAPS_MB:
            # a cap set as DDP(bucket_cap_mb=...) is: the first bucket is as large as the rest
            step = simulate_step(scenario, setup, timed, cap=max(1, cap_mb << 20), cache=cache)
            label = f"{cap_mb} MiB" if cap_mb else "0 (one per gradient)"
            print(f"| {label} | {len(step.buckets)} | "
                  f"{step.communication_s * 1e3:.1f} | {step.exposed_s * 1e3:.1f} | "
                  f"{step.step_s * 1e3:.1f} |")
        print()


if __name__ == "__main__":
    main()
