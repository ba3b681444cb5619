"""Plain data parallelism (no TP, PP, EP or ZeRO, one micro-batch) as an execution graph: the
DDP step of :mod:`simulator.training.timeline`, layer by layer from the network's own layers and
DDP's own buckets, so that a ``parallelism:`` layout of DP alone is the step the simulator ran
before layouts existed, with the kernels' SMs shared as in every other layout.

One unit stands for every rank (they run alike): the forward pass, each layer's backward (last
layer first), each bucket's allreduce over all the GPUs once its gradients are ready (or, without
``overlap``, once the backward pass ends) and after the bucket before it, then the optimizer once
the backward pass and the allreduces are done.
"""

from __future__ import annotations

from simulator.model.collective import Collective
from simulator.training.buckets import Bucket
from simulator.training.graph import Group, Program, StepGraph
from simulator.training.layout import Parallelism
from simulator.training.program import ProgramBuilder
from simulator.training.traffic import StepPlan

GROUP = "dp:0:0"
"""The one communicator: every GPU, as :func:`~simulator.training.layout.groups` names it."""


def ddp_plan(layers: list[tuple[str, float, float]], layer_of_tensor: list[int],
             buckets: tuple[Bucket, ...], optimizer_s: float, layout: Parallelism, *,
             overlap: bool = True, folded: bool = True) -> StepPlan:
    """The DDP step of ``layers`` (name, forward s, backward s, in registration order),
    ``layer_of_tensor[t]`` the layer of gradient t, ``buckets`` DDP's, on ``layout.dp`` GPUs:
    one unit for all, or one per rank unless ``folded``."""
    units = 1 if folded else layout.dp
    names = frozenset({GROUP}) if layout.dp > 1 else frozenset()
    programs = tuple(_program(unit, names, layers, layer_of_tensor, buckets, optimizer_s,
                              overlap) for unit in range(units))
    members = tuple(range(layout.dp))
    graph = StepGraph(programs, (Group(GROUP, tuple(range(units))),) if names else ())
    return StepPlan(graph, tuple(range(units)), layout,
                    (Group(GROUP, members),) if names else (), folded=folded)


def _program(unit: int, names: frozenset[str], layers: list[tuple[str, float, float]],
             layer_of_tensor: list[int], buckets: tuple[Bucket, ...], optimizer_s: float,
             overlap: bool) -> Program:
    """One rank's DDP step (module docstring)."""
    out = ProgramBuilder(unit, names)
    out.compute("forward", sum(forward for _, forward, _ in layers))
    done = [0] * len(layers)
    for index in reversed(range(len(layers))):
        name, _, backward = layers[index]
        done[index] = out.compute(f"backward {name}", backward)
    last = out.head
    for bucket in buckets:
        ready = done[min(layer_of_tensor[t] for t in bucket.tensors)] if overlap else last
        out.collective(f"bucket {bucket.index}", Collective.ALLREDUCE, GROUP, bucket.nbytes,
                       blocking=False, stream="dp", after=[] if ready is None else [ready])
    waits = [] if "dp" not in out.queues else [out.queues["dp"]]
    out.compute("optimizer", optimizer_s, after=waits)
    return out.program()
