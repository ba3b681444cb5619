"""A parallel layout's training step as text: the layout and its memory, where the step's time went
on its busiest GPU (compute, the bubble, each parallelism's exposed communication), its MFU, each
distinct collective as simulated, and the sweeps (docs/training.md)."""

from __future__ import annotations

from simulator.training.results import Step, Training
from simulator.units import format_size

GB = 1e9


def format_parallel(training: Training) -> str:
    """The step, its collectives and its sweeps as nccl-tests-style text blocks."""
    spec, step = training.spec, training.step
    assert step.parallel is not None
    run, compute = step.parallel, spec.compute
    layout = run.layout
    rate = "free" if compute.free else f"{compute.flops / 1e12:.1f} TFLOP/s sustained"
    lines = [
        f"# training {training.scenario}: {spec.network.name} ({spec.network.numel:,} parameters),"
        f" batch {spec.batch} per replica, {compute.name} ({spec.precision.value}, {rate}), "
        f"{spec.optimizer.value}",
        f"# layout {layout.label()}: {layout.microbatches} micro-batches, {_schedule(step)}"
        f"{', sequence parallel' if layout.sequence_parallel else ''}"
        f"{', full recomputation' if layout.recompute else ''}; {memory_text(step)}",
        f"# each collective: {training.policy}; times on the busiest GPU",
        header(),
        row(step),
        "# collectives, each distinct one simulated once (times in us)",
        f"#{'collective':>15} {'size(B)':>12} {'communicator':>14} {'algorithm':>18} "
        f"{'time(us)':>10} verified",
    ]
    alike: dict[tuple[str, int, str, str, float, bool | None], list[str]] = {}
    for kind, nbytes, group, name, protocol, time, verified in run.collectives:
        alike.setdefault((kind, nbytes, name, protocol, time, verified), []).append(group)
    lines += [f"{kind:>16} {nbytes:>12} {_groups(groups):>14} "
              f"{f'{name}/{protocol}' if protocol else name:>18} {time * 1e6:>10.2f} "
              f"{_mark(verified):>8}"
              for (kind, nbytes, name, protocol, time, verified), groups in alike.items()]
    if training.faults:
        lines.append(f"# Faults: {training.faults} (times from the step's start): step "
                     f"{step.healthy_step_s * 1e3:.3f} ms healthy, {step.step_s * 1e3:.3f} ms "
                     f"faulted (x{step.step_s / step.healthy_step_s:.3f})")
    if training.cap_sweep:
        lines += [f"# bucket-cap sweep on {step.ranks} GPUs", header("cap")]
        lines += [row(s, format_size(s.bucket_cap)) for s in training.cap_sweep]
    if training.scale_sweep:
        lines += ["# GPU-count sweep, DP taking the GPUs TP and PP leave", header()]
        lines += [row(s) for s in training.scale_sweep]
    if training.layouts:
        lines += layouts_text(training)
    return "\n".join(lines) + "\n"


def layouts_text(training: Training) -> list[str]:
    """The layout sweep, best first: each layout's step and breakdown, or why it did not run."""
    first = training.layouts[0]
    lines = [f"# layout sweep: {len(training.layouts)} layouts of {training.step.ranks} GPUs, "
             f"{first.batch * first.layout.dp} samples per step, best first "
             f"(those that do not fit the GPU's memory not simulated)",
             (f"#{'rank':>5} {'layout':>18} {'micro':>6} {'compute(ms)':>12} "
                 f"{'bubble(ms)':>11} {'tp(ms)':>9} {'pp(ms)':>9} {'dp(ms)':>9} {'ep(ms)':>9} "
                 f"{'step(ms)':>10} {'MFU':>6} {'memory(GB)':>11}")]
    for place, row in enumerate(training.layouts, 1):
        memory = f"{row.memory_bytes / GB:>11.1f}"
        if row.step is None or row.step.breakdown is None:
            lines.append(f"{'-':>6} {row.layout.label():>18} {row.layout.microbatches:>6} "
                         f"{'does not fit the GPU':>85} {memory}")
            continue
        b = row.step.breakdown
        lines.append(f"{place:>6} {row.layout.label():>18} {row.layout.microbatches:>6} "
                     f"{b.compute_s * 1e3:>12.3f} {b.bubble_s * 1e3:>11.3f} "
                     f"{b.exposed_tp_s * 1e3:>9.3f} {b.exposed_pp_s * 1e3:>9.3f} "
                     f"{b.exposed_dp_s * 1e3:>9.3f} {b.exposed_ep_s * 1e3:>9.3f} "
                     f"{row.step.step_s * 1e3:>10.3f} {b.mfu * 100:>5.1f}% {memory}")
    return lines


def memory_text(step: Step) -> str:
    """The busiest GPU's memory against its capacity, in words."""
    run = step.parallel
    if run is None or run.memory_bytes is None:
        return "memory not counted (no transformer shape)"
    held = f"{run.memory_bytes / GB:.1f} GB per GPU"
    if run.capacity_bytes is None:
        return f"{held} (capacity unknown)"
    verdict = "fits" if run.fits else "DOES NOT FIT"
    return f"{held} of {run.capacity_bytes / GB:.0f} GB: {verdict}"


def header(first: str = "GPUs") -> str:
    """The column names of :func:`row`."""
    return (f"#{first:>7} {'layout':>16} {'compute(ms)':>12} {'bubble(ms)':>11} {'tp(ms)':>9} "
            f"{'pp(ms)':>9} {'dp(ms)':>9} {'ep(ms)':>9} {'step(ms)':>10} {'MFU':>6} verified")


def row(step: Step, first: str | None = None) -> str:
    """One step: its layout, where its time went, its MFU and its check."""
    assert step.breakdown is not None and step.parallel is not None
    b = step.breakdown
    return (f"{first or step.ranks:>8} {step.parallel.layout.label():>16} "
            f"{b.compute_s * 1e3:>12.3f} {b.bubble_s * 1e3:>11.3f} {b.exposed_tp_s * 1e3:>9.3f} "
            f"{b.exposed_pp_s * 1e3:>9.3f} {b.exposed_dp_s * 1e3:>9.3f} "
            f"{b.exposed_ep_s * 1e3:>9.3f} {step.step_s * 1e3:>10.3f} {b.mfu * 100:>5.1f}% "
            f"{_mark(step.verified):>8}")


def _groups(names: list[str]) -> str:
    """The communicators a row stands for: the first, and how many more ran alike."""
    return names[0] if len(names) == 1 else f"{names[0]} +{len(names) - 1}"


def _schedule(step: Step) -> str:
    assert step.parallel is not None
    layout = step.parallel.layout
    if layout.chunks > 1:
        return f"interleaved with {layout.chunks} chunks per stage"
    return "1F1B"


def _mark(verified: bool | None) -> str:
    """``ok`` (each collective checked against numpy on its own data), ``FAILED`` or ``-``."""
    if verified is None:
        return "-"
    return "ok" if verified else "FAILED"
