"""A training step drawn: its timeline (compute stream above, communication stream below, each
bucket's allreduce labelled with its algorithm and protocol, an arrow where it became ready),
and its sweeps (step time and scaling efficiency against the bucket cap and the GPU count).
matplotlib's object API (rendered by Agg), never pyplot."""

from __future__ import annotations

from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from simulator.output.training import allreduces
from simulator.training.results import Step, Training
from simulator.units import format_size

DPI = 110
_COLOURS = {"forward": "#4C72B0", "backward": "#55A868", "optimizer": "#8172B2",
            "bucket": "#DD8452", "exposed": "#C44E52"}
_LANES = {"compute": 1.0, "communication": 0.0}


def timeline_figure(training: Training) -> Figure:
    """The scenario's step on two lanes, times in ms; the bars' extents are the step's
    intervals (so a test can read them back from the axes' patches)."""
    step = training.step
    figure = Figure(figsize=(11.0, 3.2))
    axes = figure.add_subplot()
    ms = 1e3
    compute = step.timeline.compute
    backward = [i for i in compute if i.name.startswith("backward")]
    spans = [("forward", compute[0].start_s, compute[0].end_s),
             ("backward", backward[0].start_s, backward[-1].end_s) if backward else None,
             ("optimizer", compute[-1].start_s, compute[-1].end_s)]
    for span in spans:
        if span is None or span[2] <= span[1]:
            continue
        name, start, end = span
        axes.broken_barh([(start * ms, (end - start) * ms)], (_LANES["compute"] - 0.35, 0.7),
                         facecolors=_COLOURS[name], label=name, edgecolor="white")
        axes.text((start + end) / 2 * ms, _LANES["compute"], name, ha="center", va="center",
                  fontsize=8, color="white", clip_on=True)
    for bucket in step.buckets:
        width = (bucket.end_s - bucket.start_s) * ms
        axes.broken_barh([(bucket.start_s * ms, width)], (_LANES["communication"] - 0.35, 0.7),
                         facecolors=_COLOURS["bucket"], edgecolor="white",
                         label="allreduce" if bucket.index == 0 else None)
        axes.annotate("", xy=(bucket.ready_s * ms, _LANES["communication"] + 0.4),
                      xytext=(bucket.ready_s * ms, _LANES["compute"] - 0.4),
                      arrowprops={"arrowstyle": "->", "color": "0.5", "linewidth": 0.6})
        label = f"b{bucket.index}"
        if width >= 0.09 * step.step_s * ms:  # room for the algorithm too
            label += f"\n{bucket.algorithm}" + (f"\n{bucket.protocol}" if bucket.protocol else "")
        if width >= 0.02 * step.step_s * ms:
            axes.text(bucket.start_s * ms + width / 2, _LANES["communication"], label,
                      ha="center", va="center", fontsize=6.5, clip_on=True)
    if step.exposed_s > 0:
        end = step.step_s - step.optimizer_s
        axes.axvspan((end - step.exposed_s) * ms, end * ms, color=_COLOURS["exposed"],
                     alpha=0.12, label=f"exposed {step.exposed_s * ms:.3g} ms")
    axes.set_yticks(list(_LANES.values()), [f"{lane} stream" for lane in _LANES])
    axes.set_ylim(-0.6, 1.6)
    axes.set_xlim(0, step.step_s * ms * 1.01 or 1.0)
    axes.set_xlabel("time in the step (ms)")
    axes.set_title(f"{training.scenario}: {step.model} on {step.ranks} GPUs, batch {step.batch}, "
                   f"buckets of {format_size(step.bucket_cap)}: step {step.step_s * ms:.3g} ms, "
                   f"efficiency {step.efficiency:.1%}", fontsize=9)
    axes.legend(loc="upper left", fontsize=7, ncols=5, frameon=False,
                bbox_to_anchor=(0.0, -0.28))
    figure.tight_layout()
    return figure


def sweeps_figure(training: Training) -> Figure:
    """Step time (compute and exposed communication stacked) and scaling efficiency against
    the bucket cap, and against the GPU count, each point labelled with its buckets'
    algorithms; one panel per sweep the scenario has."""
    panels = [(sweep, name) for sweep, name in ((training.cap_sweep, "cap"),
                                                 (training.scale_sweep, "gpus")) if sweep]
    figure = Figure(figsize=(6.0 * len(panels), 4.8))
    for i, (steps, name) in enumerate(panels, start=1):
        _sweep_panel(figure.add_subplot(1, len(panels), i), steps, name)
    per = "replica" if training.step.parallel is not None else "GPU"
    figure.suptitle(f"{training.scenario}: {training.step.model}, batch {training.step.batch} "
                    f"per {per}", fontsize=10)
    figure.tight_layout()
    return figure


def _sweep_panel(axes: Axes, steps: tuple[Step, ...], name: str) -> None:
    ms = 1e3
    x = list(range(len(steps)))
    compute = [s.compute_s * ms for s in steps]
    exposed = [s.exposed_s * ms for s in steps]
    axes.bar(x, compute, color=_COLOURS["backward"], label="compute")
    idle = ("exposed communication and bubble" if any(s.parallel for s in steps)
            else "exposed communication")
    axes.bar(x, exposed, bottom=compute, color=_COLOURS["exposed"], label=idle)
    labels = ([format_size(s.bucket_cap) for s in steps] if name == "cap"
              else [str(s.ranks) for s in steps])
    axes.set_xticks(x, labels, fontsize=8, rotation=45 if len(x) > 8 else 0)
    axes.set_xlabel("DDP bucket cap" if name == "cap" else "GPUs")
    axes.set_ylabel("step time (ms)")
    for xi, step in zip(x, steps, strict=True):  # what ran the buckets, up the bar
        axes.text(xi, 0.03 * max(compute), allreduces(step).replace(", ", "\n"), ha="center",
                  va="bottom", fontsize=5.5, rotation=90, color="white")
    axes.margins(y=0.1)
    twin = axes.twinx()
    twin.plot(x, [s.efficiency * 100 for s in steps], "o-", color="black", label="efficiency")
    twin.set_ylim(0, 115)
    twin.set_ylabel("scaling efficiency (%)")
    axes.set_title("bucket-cap sweep" if name == "cap" else "GPU-count sweep", fontsize=9)
    handles, names = axes.get_legend_handles_labels()
    more, more_names = twin.get_legend_handles_labels()
    axes.legend(handles + more, names + more_names, fontsize=7, loc="upper center", ncols=3,
                frameon=False, bbox_to_anchor=(0.5, -0.2))


def draw_timeline(training: Training, path: Path) -> None:
    """:func:`timeline_figure` to ``path`` as PNG (the caller writes atomically)."""
    timeline_figure(training).savefig(path, format="png", dpi=DPI)


def draw_sweeps(training: Training, path: Path) -> None:
    """:func:`sweeps_figure` to ``path`` as PNG (the caller writes atomically)."""
    sweeps_figure(training).savefig(path, format="png", dpi=DPI)
