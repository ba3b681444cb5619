"""One data-parallel training step on two streams, as DDP runs it: the compute stream does the
forward pass, the backward pass layer by layer (last layer first) and the optimizer step; the
communication stream allreduces each bucket once its last gradient is ready, one bucket after
the other (NCCL kernels of one process group queue on one stream), overlapping the backward
pass; the optimizer waits for the last allreduce.

Times only, no data and no network: the allreduce of each bucket comes in as a duration (the
simulated one, from :mod:`simulator.trainer`), so the step's arithmetic can be read, and tested,
on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from simulator.training.buckets import Bucket


@dataclass(frozen=True)
class Interval:
    """A span of the step on one stream, in seconds from the step's start."""

    name: str
    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        """Its length."""
        return self.end_s - self.start_s


@dataclass(frozen=True)
class Timeline:
    """A step's two streams: ``compute`` (forward, each layer's backward, optimizer) and
    ``communication`` (each bucket's allreduce, in bucket order), with each bucket's ready time."""

    compute: tuple[Interval, ...]
    communication: tuple[Interval, ...]
    ready_s: tuple[float, ...]

    @property
    def step_s(self) -> float:
        """The step's time: the optimizer's end."""
        return self.compute[-1].end_s

    @property
    def compute_s(self) -> float:
        """Time the compute stream is busy: what one GPU alone would take."""
        return sum(interval.duration_s for interval in self.compute)

    @property
    def communication_s(self) -> float:
        """The allreduces' summed time."""
        return sum(interval.duration_s for interval in self.communication)

    @property
    def exposed_s(self) -> float:
        """Communication not hidden behind compute: the step's time beyond the compute's."""
        return self.step_s - self.compute_s


Duration = Callable[[int, float, float], float]
"""A bucket's allreduce time given its position in the step's bucket order, when its gradients
are ready and when it starts (both from the step's start): what a fault in the step needs."""


def step_timeline(layer_names: Sequence[str], forward_s: Sequence[float],
                  backward_s: Sequence[float], layer_of_tensor: Sequence[int],
                  buckets: Sequence[Bucket], allreduce_s: Sequence[float] | Duration,
                  optimizer_s: float, *, overlap: bool = True) -> Timeline:
    """The step's timeline. Layers come in registration (forward) order with their forward and
    backward times; ``layer_of_tensor[t]`` is the layer of parameter t; bucket b takes
    ``allreduce_s[b]``, or ``allreduce_s(b, ready, start)`` where its time depends on when it
    runs. A gradient is ready when its layer's backward ends; a bucket when its last gradient
    is; its allreduce starts then (or, without ``overlap``, once the backward pass ends) and
    after the bucket before it.

    >>> t = step_timeline(["a", "b"], [1.0, 1.0], [2.0, 2.0], [0, 1],
    ...                   [Bucket(0, (1,), 4, 4), Bucket(1, (0,), 4, 4)], [3.0, 1.0], 0.5)
    >>> [(i.name, i.start_s, i.end_s) for i in t.communication]
    [('bucket 0', 4.0, 7.0), ('bucket 1', 7.0, 8.0)]
    >>> t.step_s, t.compute_s, t.exposed_s
    (8.5, 6.5, 2.0)
    """
    if not len(layer_names) == len(forward_s) == len(backward_s):
        raise ValueError("one forward and one backward time per layer")
    if not callable(allreduce_s) and len(allreduce_s) != len(buckets):
        raise ValueError("one allreduce time per bucket")
    times = allreduce_s if callable(allreduce_s) else (
        lambda position, _ready, _start: allreduce_s[position])
    compute = [Interval("forward", 0.0, sum(forward_s))]
    done = [0.0] * len(layer_names)
    for layer in reversed(range(len(layer_names))):
        start = compute[-1].end_s
        compute.append(Interval(f"backward {layer_names[layer]}", start, start + backward_s[layer]))
        done[layer] = compute[-1].end_s
    backward_end = compute[-1].end_s
    ready = tuple(max(done[layer_of_tensor[t]] for t in bucket.tensors) for bucket in buckets)
    communication: list[Interval] = []
    free = 0.0
    for position, (bucket, when) in enumerate(zip(buckets, ready, strict=True)):
        start = max(when if overlap else backward_end, free)
        communication.append(Interval(f"bucket {bucket.index}", start,
                                      start + times(position, when, start)))
        free = communication[-1].end_s
    start = max(backward_end, free)
    compute.append(Interval("optimizer", start, start + optimizer_s))
    return Timeline(tuple(compute), tuple(communication), ready)
