"""DDP's gradient buckets, assigned as PyTorch's ``DistributedDataParallel`` does.

DDP allreduces gradients in buckets: flat buffers of several gradients, each allreduced as soon
as its last gradient is ready. After its first iteration DDP rebuilds the buckets in the order
the gradients became ready (``Reducer::rebuild_buckets`` in torch/csrc/distributed/c10d/
reducer.cpp), about the reverse of registration, and fills them greedily: a bucket closes once
it holds at least its limit, the first bucket's limit being ``_DEFAULT_FIRST_BUCKET_BYTES``
(1 MiB) and every later one's ``bucket_cap_mb`` (25 MiB by default): the first gradients of the
backward pass then start their allreduce early instead of waiting to fill 25 MiB
(``compute_bucket_assignment_by_size``; torch/nn/parallel/distributed.py, torch 2.13).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MiB = 1 << 20
BUCKET_CAP_BYTES = 25 * MiB
"""DDP's default ``bucket_cap_mb=25``, in MiB (``_MB_TO_BYTES = 1024 * 1024``)."""
FIRST_BUCKET_BYTES = 1 * MiB
"""``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES``: the first bucket's limit."""


@dataclass(frozen=True)
class Bucket:
    """One allreduce of DDP: its position in the backward pass (0 goes first), the gradients it
    holds (indices into the model's parameters in registration order, in the order they fill
    it), its bytes, and the limit it was filled to."""

    index: int
    tensors: tuple[int, ...]
    nbytes: int
    limit: int


def assign_buckets(nbytes: Sequence[int], *, cap: int = BUCKET_CAP_BYTES,
                   first: int | None = FIRST_BUCKET_BYTES) -> tuple[Bucket, ...]:
    """DDP's buckets for gradients of ``nbytes`` each (registration order), filled in reverse
    registration order (the order backward makes them ready): a bucket closes as soon as it
    holds ``limit`` bytes or more, the first one's limit being ``first`` (None: ``cap``, as DDP
    does when a user sets ``bucket_cap_mb``), every later one's ``cap``.

    >>> [b.tensors for b in assign_buckets([400_000, 800_000, 600_000, 2_000_000], cap=2 * MiB)]
    [(3,), (2, 1, 0)]
    """
    if cap < 1 or (first is not None and first < 1):
        raise ValueError(f"bucket limits must be ≥ 1 byte, got cap={cap}, first={first}")
    buckets: list[Bucket] = []
    held: list[int] = []
    size = 0
    for tensor in reversed(range(len(nbytes))):
        held.append(tensor)
        size += nbytes[tensor]
        limit = first if not buckets and first is not None else cap
        if size >= limit:
            buckets.append(Bucket(len(buckets), tuple(held), size, limit))
            held, size = [], 0
    if held:
        limit = first if not buckets and first is not None else cap
        buckets.append(Bucket(len(buckets), tuple(held), size, limit))
    return tuple(buckets)
