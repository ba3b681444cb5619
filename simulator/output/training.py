"""A training scenario's results as text and tables: the step (compute, communication, exposed
communication, step time, scaling efficiency), its buckets (what each held, when it ran, which
algorithm and protocol), and the sweeps over the bucket cap and the GPU count
(docs/training.md). Figures are :mod:`simulator.output.training_figure`'s; the files, in every
format, :data:`simulator.output.writers.WRITERS`'."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

import pandas as pd

from simulator.output.training_parallel import format_parallel
from simulator.training.results import Breakdown, Step, Training
from simulator.units import format_size

STEP_COLUMNS = ("scenario", "sweep", "topology", "ranks", "model", "batch", "bucket_cap_bytes",
                "first_bucket_bytes", "overlap", "buckets", "forward_s", "backward_s",
                "optimizer_s", "compute_s", "communication_s", "exposed_s", "step_s",
                "efficiency", "allreduces", "verified", "identical", "max_abs_error",
                "checked_tensors", "whole", "healthy_step_s", "fault_slowdown", "tp", "pp", "dp",
                "ep", "zero", "bubble_ms", "exposed_tp_ms", "exposed_pp_ms", "exposed_dp_ms",
                "exposed_ep_ms", "mfu")
"""Columns of ``<name>-steps.csv``: one row per step (``sweep``: empty for the scenario's own
step, ``bucket_cap`` or ``topology`` for a sweep's); ``healthy_step_s`` and
``fault_slowdown`` empty without faults; from ``tp`` on (issue 39), the layout and where the
step's time went on its busiest rank (a DDP step: ``dp`` its GPUs, all its exposed time DP's)
and its model FLOP utilisation (:class:`~simulator.training.results.Breakdown`)."""
BUCKET_COLUMNS = ("scenario", "sweep", "ranks", "bucket_cap_bytes", "bucket", "tensors",
                  "size_bytes", "ready_s", "start_s", "end_s", "algorithm", "protocol",
                  "time_s", "model_time_s", "verified", "faults", "healthy_time_s", "model_kind")
"""Columns of ``<name>-buckets.csv``: one row per bucket of every step; ``faults`` and
``healthy_time_s`` say what struck a bucket's allreduce and its time without (empty
without faults); ``model_kind`` what ``model_time_s`` is, as the results' column says."""


def labelled_steps(training: Training) -> list[tuple[str, Step]]:
    """Every step with the sweep it belongs to ("" for the scenario's own)."""
    return ([("", training.step)] + [("bucket_cap", s) for s in training.cap_sweep]
            + [("topology", s) for s in training.scale_sweep])


def allreduces(step: Step) -> str:
    """Which algorithm (and protocol) the step's buckets got, with counts, in bucket order:
    ``ring/LL128 ×2, ring/Simple ×3``."""
    names = Counter(f"{b.algorithm}/{b.protocol}" if b.protocol else b.algorithm
                    for b in step.buckets)
    return ", ".join(f"{name} ×{count}" for name, count in names.items())


def steps_frame(training: Training) -> pd.DataFrame:
    """One row per step, columns :data:`STEP_COLUMNS`."""
    rows = [{
        "scenario": training.scenario, "sweep": sweep, "topology": step.topology,
        "ranks": step.ranks, "model": step.model, "batch": step.batch,
        "bucket_cap_bytes": step.bucket_cap, "first_bucket_bytes": step.first_bucket,
        "overlap": step.overlap, "buckets": len(step.buckets), "forward_s": step.forward_s,
        "backward_s": step.backward_s, "optimizer_s": step.optimizer_s,
        "compute_s": step.compute_s, "communication_s": step.communication_s,
        "exposed_s": step.exposed_s, "step_s": step.step_s, "efficiency": step.efficiency,
        "allreduces": allreduces(step), "verified": step.verified, "identical": step.identical,
        "max_abs_error": step.max_abs_error, "checked_tensors": step.checked_tensors,
        "whole": step.whole, "healthy_step_s": step.healthy_step_s,
        "fault_slowdown": step.step_s / step.healthy_step_s,
        **_layout_columns(training, step),
    } for sweep, step in labelled_steps(training)]
    return pd.DataFrame(rows, columns=list(STEP_COLUMNS))


def _layout_columns(training: Training, step: Step) -> dict[str, float | int]:
    """A step's layout and breakdown columns (ms) and its MFU
    (:meth:`~simulator.training.spec.TrainingSpec.mfu`)."""
    layout = step.parallel.layout if step.parallel is not None else None
    breakdown = step.breakdown
    if breakdown is None:
        mfu = training.spec.mfu(step.ranks, step.ranks, step.step_s)
        breakdown = Breakdown(step.compute_s, 0.0, 0.0, step.exposed_s, 0.0, 0.0, mfu)
    return {"tp": layout.tp if layout else 1, "pp": layout.pp if layout else 1,
            "dp": layout.dp if layout else step.ranks, "ep": layout.ep if layout else 1,
            "zero": layout.zero if layout else 0, "bubble_ms": breakdown.bubble_s * 1e3,
            "exposed_tp_ms": breakdown.exposed_tp_s * 1e3,
            "exposed_pp_ms": breakdown.exposed_pp_s * 1e3,
            "exposed_dp_ms": breakdown.exposed_dp_s * 1e3,
            "exposed_ep_ms": breakdown.exposed_ep_s * 1e3, "mfu": breakdown.mfu}


def buckets_frame(training: Training) -> pd.DataFrame:
    """One row per bucket of every step, columns :data:`BUCKET_COLUMNS`."""
    rows = [{
        "scenario": training.scenario, "sweep": sweep, "ranks": step.ranks,
        "bucket_cap_bytes": step.bucket_cap, "bucket": b.index, "tensors": b.tensors,
        "size_bytes": b.nbytes, "ready_s": b.ready_s, "start_s": b.start_s, "end_s": b.end_s,
        "algorithm": b.algorithm, "protocol": b.protocol, "time_s": b.time_s,
        "model_time_s": b.model_time_s, "verified": b.verified, "faults": b.faults,
        "healthy_time_s": b.healthy_time_s, "model_kind": b.model_kind,
    } for sweep, step in labelled_steps(training) for b in step.buckets]
    return pd.DataFrame(rows, columns=list(BUCKET_COLUMNS))


LAYOUT_COLUMNS = ("scenario", "rank", "tp", "pp", "dp", "ep", "zero", "microbatches", "batch",
                  "memory_bytes", "capacity_bytes", "fits", "step_s", "compute_ms", "bubble_ms",
                  "exposed_tp_ms", "exposed_pp_ms", "exposed_dp_ms", "exposed_ep_ms", "mfu")
"""Columns of ``<name>-layouts.csv`` (a layout sweep, best first; ``rank`` and the times empty
for a layout that does not fit the GPU's memory, which was not simulated)."""


def layouts_frame(training: Training) -> pd.DataFrame:
    """One row per layout of the layout sweep, best first, columns :data:`LAYOUT_COLUMNS`."""
    rows = []
    for place, row in enumerate(training.layouts, 1):
        layout, step = row.layout, row.step
        b = step.breakdown if step is not None else None
        rows.append({
            "scenario": training.scenario, "rank": place if step is not None else None,
            "tp": layout.tp, "pp": layout.pp, "dp": layout.dp, "ep": layout.ep,
            "zero": layout.zero, "microbatches": layout.microbatches, "batch": row.batch,
            "memory_bytes": row.memory_bytes, "capacity_bytes": row.capacity_bytes,
            "fits": step is not None, "step_s": step.step_s if step is not None else None,
            **({f"{name}_ms": getattr(b, f"{name}_s") * 1e3 for name in (
                "compute", "bubble", "exposed_tp", "exposed_pp", "exposed_dp", "exposed_ep")}
               if b is not None else {}),
            "mfu": b.mfu if b is not None else None})
    return pd.DataFrame(rows, columns=list(LAYOUT_COLUMNS)).astype(
        {"rank": "Int64", "capacity_bytes": "Int64"})


TABLES: dict[str, Callable[[Training], pd.DataFrame]] = {"steps": steps_frame,
                                                        "buckets": buckets_frame,
                                                        "layouts": layouts_frame}
"""A training run's tables by name: the files ``<name>-steps`` and ``<name>-buckets``, and
``<name>-layouts`` where the scenario sweeps layouts."""


def format_training(training: Training) -> str:
    """The step, its buckets and the sweeps as nccl-tests-style text blocks (a parallel
    layout's: :func:`~simulator.output.training_parallel.format_parallel`)."""
    if training.step.parallel is not None:
        return format_parallel(training)
    spec, step = training.spec, training.step
    compute = spec.compute
    rate = "free" if compute.free else f"{compute.flops / 1e12:.1f} TFLOP/s sustained"
    optimizer = (f"optimizer {spec.optimizer_s * 1e3:.3g} ms" if spec.optimizer_s is not None
                 else spec.optimizer.value)
    first = format_size(step.first_bucket)
    lines = [
        f"# training {training.scenario}: {spec.network.name} ({spec.network.numel:,} parameters),"
        f" batch {spec.batch} per GPU, {compute.name} ({spec.precision.value}, {rate}), "
        f"{optimizer}",
        f"# DDP: buckets of {format_size(spec.cap)} (first {first}), overlap "
        f"{'on' if spec.overlap else 'off'}; each bucket's allreduce: {training.policy}",
        _step_header(),
        _step_row(step),
        "# buckets, in allreduce order (times in ms from the step's start)",
        f"#{'bucket':>7} {'tensors':>8} {'size(B)':>12} {'ready':>9} {'start':>9} {'end':>9}"
        f" {'algorithm':>18} {'time(us)':>10} {'model(us)':>10} verified",
    ]
    lines += [f"{b.index:>8} {b.tensors:>8} {b.nbytes:>12} {b.ready_s * 1e3:>9.3f} "
              f"{b.start_s * 1e3:>9.3f} {b.end_s * 1e3:>9.3f} "
              f"{_algorithm(b.algorithm, b.protocol):>18} {b.time_s * 1e6:>10.2f} "
              f"{b.model_time_s * 1e6:>10.2f} {_mark(b.verified, step.whole):>8}" for b in step.buckets]
    lines += _faults(training)
    if training.cap_sweep:
        lines += [f"# bucket-cap sweep on {step.ranks} GPUs", _step_header("cap")]
        lines += [_step_row(s, format_size(s.bucket_cap)) for s in training.cap_sweep]
    if training.scale_sweep:
        lines += [f"# GPU-count sweep, buckets of {format_size(spec.cap)}",
                  _step_header()]
        lines += [_step_row(s) for s in training.scale_sweep]
    return "\n".join(lines) + "\n"


def _faults(training: Training) -> list[str]:
    """What the faults cost the step, and which buckets' allreduces they struck (none when the
    scenario has no faults)."""
    step = training.step
    if math.isnan(step.healthy_step_s):
        return []
    struck = [b for b in step.buckets if b.faults]
    lines = [f"# Faults: {training.faults} (times from the backward pass's start)",
             f"#   step {step.healthy_step_s * 1e3:.3f} ms healthy, {step.step_s * 1e3:.3f} ms "
             f"faulted (x{step.step_s / step.healthy_step_s:.3f}); the GPU-count sweep runs "
             f"healthy" if training.scale_sweep else
             f"#   step {step.healthy_step_s * 1e3:.3f} ms healthy, {step.step_s * 1e3:.3f} ms "
             f"faulted (x{step.step_s / step.healthy_step_s:.3f})"]
    lines += [f"#   bucket {b.index:>4}: {b.healthy_time_s * 1e6:.2f} -> {b.time_s * 1e6:.2f} us "
              f"({b.faults})" for b in struck if b.time_s != b.healthy_time_s]
    return lines


def _step_header(first: str = "GPUs") -> str:
    return (f"#{first:>7} {'compute(ms)':>12} {'comm(ms)':>10} {'exposed(ms)':>12} "
            f"{'step(ms)':>10} {'efficiency':>10} {'buckets':>8} verified  allreduces")


def _step_row(step: Step, first: str | None = None) -> str:
    return (f"{first or step.ranks:>8} {step.compute_s * 1e3:>12.3f} "
            f"{step.communication_s * 1e3:>10.3f} {step.exposed_s * 1e3:>12.3f} "
            f"{step.step_s * 1e3:>10.3f} {step.efficiency * 100:>9.1f}% {len(step.buckets):>8} "
            f"{_mark(step.verified, step.whole):>8}  {allreduces(step)}")


def _algorithm(name: str, protocol: str) -> str:
    return f"{name}/{protocol}" if protocol else name


def _mark(verified: bool | None, whole: bool | None = True) -> str:
    """``ok``, ``ok*`` (checked on a proxy), ``FAILED`` or ``-`` (not checked), as a run's
    table marks its points."""
    if verified is None:
        return "-"
    return ("ok" if whole else "ok*") if verified else "FAILED"
