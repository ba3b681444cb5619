"""Real data for every run: seeded inputs, the proxy payload, and the check against numpy.

A rank's buffer nominally holds ``count`` elements; that count sets the timing. The numpy data a
run actually moves is a *proxy* of at most ``proxy_count`` elements per rank, with the same
partitioning: a chunk of elements ``[start, stop)`` of the nominal buffer maps to proxy elements
``[start·m // count, stop·m // count)``, so every chunk an algorithm cuts, at any depth, is still
a contiguous, non-overlapping piece of the proxy and neighbouring chunks tile it exactly. When the
nominal buffer is small enough the proxy *is* the buffer (``exact``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.program import Chunk
from simulator.reduction import ReduceOp

DEFAULT_PROXY_ELEMENTS = 1 << 14
"""Proxy cap per rank: enough to give every chunk of a 1024-rank ring 16 elements."""

DTYPES = ("float16", "float32", "float64", "int32", "int64")


@dataclass(frozen=True)
class Payload:
    """Nominal element count per rank (for timing) and the proxy actually moved (for checking)."""

    count: int
    proxy_count: int
    dtype: np.dtype

    @classmethod
    def for_size(cls, size_bytes: int, dtype: np.dtype, ranks: int,
                 proxy_elements: int = DEFAULT_PROXY_ELEMENTS) -> Payload:
        """The payload of a ``size_bytes`` buffer; the proxy keeps ≥ 8 elements per rank-chunk."""
        count = size_bytes // dtype.itemsize
        return cls(count, min(count, max(proxy_elements, 8 * ranks)), dtype)

    @property
    def exact(self) -> bool:
        """True when the proxy is the whole nominal buffer."""
        return self.proxy_count == self.count

    def nbytes(self, chunk: Chunk) -> int:
        """Nominal bytes of ``chunk``: what the network and the GPU are charged for."""
        return chunk.count * self.dtype.itemsize

    def view(self, chunk: Chunk) -> slice:
        """The proxy elements standing for ``chunk``."""
        if self.exact:
            return slice(chunk.start, chunk.stop)
        return slice(chunk.start * self.proxy_count // self.count,
                     chunk.stop * self.proxy_count // self.count)


def make_inputs(rng: np.random.Generator, ranks: int, payload: Payload, op: ReduceOp) -> np.ndarray:
    """Every rank's input, shape ``(ranks, proxy_count)``, drawn so the reduction stays finite.

    Products use factors near 1 (floats within 1 ± 1/ranks; integers from {-1, 1, 2}, whose
    wrap-around is still exact); other ops use values in [-1, 1) (floats) or [-100, 100] (ints).
    """
    shape = (ranks, payload.proxy_count)
    dtype = payload.dtype
    if np.issubdtype(dtype, np.integer):
        if op is ReduceOp.PROD:
            return rng.choice(np.array([-1, 1, 2], dtype=dtype), size=shape)
        return rng.integers(-100, 101, size=shape, dtype=dtype)
    if op is ReduceOp.PROD:
        spread = 1.0 / max(ranks, 2)
        return rng.uniform(1.0 - spread, 1.0 + spread, size=shape).astype(dtype)
    return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)


@dataclass(frozen=True)
class Expected:
    """numpy's answer for the inputs, and the rounding error a correct run may show per element."""

    result: np.ndarray
    tolerance: np.ndarray

    @classmethod
    def of(cls, inputs: np.ndarray, op: ReduceOp) -> Expected:
        """Reference result over axis 0 and its error bound.

        Integers must match exactly. A float reduction in any order of p terms is within
        (p+1)·eps·Σ|x| of the exact sum (Higham, *Accuracy and Stability*, §4.2); a product
        within (p+1)·eps·|product|; max and min are exact.
        """
        result = op.reference(inputs)
        ranks, dtype = inputs.shape[0], inputs.dtype
        if np.issubdtype(dtype, np.integer) or op in (ReduceOp.MAX, ReduceOp.MIN):
            return cls(result, np.zeros(result.shape))
        eps = float(np.finfo(dtype).eps)
        if op is ReduceOp.PROD:
            scale = np.abs(result)
        else:
            scale = np.abs(inputs.astype(np.float64)).sum(axis=0)
            if op is ReduceOp.AVG:
                scale /= ranks
        return cls(result, (ranks + 1) * eps * scale)

    def check(self, buffers: np.ndarray) -> tuple[bool, float]:
        """Whether every rank's buffer matches, and the largest absolute error seen."""
        if buffers.size == 0:
            return True, 0.0
        error = np.abs(buffers.astype(np.float64) - self.result.astype(np.float64))
        if np.issubdtype(buffers.dtype, np.integer):  # exact, even past float64's 2^53
            return bool(np.array_equal(buffers, np.broadcast_to(self.result, buffers.shape))), \
                float(error.max())
        return bool(np.all(error <= self.tolerance)), float(error.max())
