"""A step's DDP buckets, assigned from the scenario's model, and a layout's communications,
refused where one would hold more than a buffer may: the error names the field the scenario
wrote (the model, or the bucket cap), not the ``sizes`` of a collective the file does not
have."""

from __future__ import annotations

from simulator.errors import InputError, Problem, quoted
from simulator.limits import MAX_SIZE_BYTES
from simulator.scenario.spec import Scenario
from simulator.training.buckets import Bucket, assign_buckets
from simulator.training.graph import StepGraph
from simulator.training.spec import TrainingSpec


def ddp_buckets(scenario: Scenario, spec: TrainingSpec,
                cap: int | None = None) -> tuple[Bucket, ...]:
    """DDP's buckets of the model's gradients (in the scenario's dtype) with a cap of ``cap``
    bytes (None: the spec's); InputError where one holds more than MAX_SIZE_BYTES, naming
    ``training.model`` and the parameter where one gradient alone does, else
    ``training.bucket_cap``."""
    itemsize = scenario.dtype.itemsize
    tensors = spec.network.tensors
    buckets = assign_buckets([t.numel * itemsize for t in tensors],
                             cap=spec.cap if cap is None else cap, first=spec.first_limit(cap))
    largest = max(buckets, key=lambda bucket: bucket.nbytes, default=None)
    if largest is None or largest.nbytes <= MAX_SIZE_BYTES:
        return buckets
    tensor = tensors[max(largest.tensors, key=lambda i: tensors[i].numel)]
    limit = (f"expected gradients of at most {MAX_SIZE_BYTES >> 40} TiB a bucket "
             "(simulator/limits.py)")
    if tensor.numel * itemsize > MAX_SIZE_BYTES:
        raise InputError([Problem(scenario.source, "training.model", (
            f"{limit}, got parameter {quoted(tensor.name)} of {tensor.numel:,} "
            f"{scenario.dtype.name} elements ({tensor.numel * itemsize:,} bytes)"))])
    raise InputError([Problem(scenario.source, "training.bucket_cap", (
        f"{limit}, got a bucket of {largest.nbytes:,} bytes; use a smaller bucket_cap"))])


def check_layout_step(scenario: Scenario, graph: StepGraph) -> None:
    """InputError naming ``training.model`` where a parallel layout's step moves more than
    MAX_SIZE_BYTES in one communication (a collective's buffer, a pipeline's message): its
    shape makes tensors no buffer holds, which the collectives' own planning would try to cut
    into pieces until memory ran out."""
    largest = max((op for program in graph.programs for op in program.ops),
                  key=lambda op: op.nbytes, default=None)
    if largest is None or largest.nbytes <= MAX_SIZE_BYTES:
        return
    raise InputError([Problem(scenario.source, "training.model", (
        f"expected communications of at most {MAX_SIZE_BYTES >> 40} TiB a rank "
        f"(simulator/limits.py), got {quoted(largest.name)} of {largest.nbytes:,} bytes"))])
