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

from simulator.collective import ROOT, Collective
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
                 proxy_elements: int = DEFAULT_PROXY_ELEMENTS,
                 piece_bytes: int | None = None) -> Payload:
        """The payload of a ``size_bytes`` buffer.

        The proxy keeps at least 8 elements per rank-chunk and, when the buffer moves in
        pipeline pieces of ``piece_bytes``, 2 elements per piece (pieces of the p chunks
        included), so that no piece maps to an empty slice and escapes the check.
        """
        count = size_bytes // dtype.itemsize
        needed = max(proxy_elements, 8 * ranks)
        if piece_bytes is not None:
            pieces = -(-count // max(1, piece_bytes // dtype.itemsize)) + ranks
            needed = max(needed, 2 * pieces)
        return cls(count, min(count, needed), dtype)

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

    Float sums (and averages) use multiples of 2^-6 small enough that every partial sum, in any
    order, is exact in the dtype (|Σ| ≤ ranks·m·2^-6 with ranks·m ≤ 2^mantissa): the result is
    then exact, so a missing or doubled contribution can never hide inside a rounding tolerance.
    Products use factors near 1 (floats within 1 ± 1/ranks; integers from {-1, 1, 2}, whose
    wrap-around is still exact); integers otherwise lie in [-100, 100]; max and min any floats.
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
    if op in (ReduceOp.SUM, ReduceOp.AVG):
        largest = max(1, min(64, 2 ** (np.finfo(dtype).nmant + 1) // ranks))
        return (rng.integers(-largest, largest + 1, size=shape) / 64.0).astype(dtype)
    return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)


@dataclass(frozen=True)
class Expected:
    """What every rank must end with, where that is defined, and the rounding error allowed.

    ``result`` and ``tolerance`` broadcast against the ``(ranks, proxy_count)`` buffers; ``mask``
    marks the elements the collective defines (e.g. only chunk r of rank r for reduce-scatter).
    """

    result: np.ndarray
    tolerance: np.ndarray
    mask: np.ndarray

    @classmethod
    def of(cls, inputs: np.ndarray, op: ReduceOp, collective: Collective,
           payload: Payload) -> Expected:
        """The expected outcome of ``collective`` on ``inputs`` (taken before the run).

        Integers must match exactly, and so must copies (allgather, broadcast), max, min and
        float sums (their inputs are exactly summable, see :func:`make_inputs`); an average may
        differ by its final division's rounding, and a product of p factors in any order stays
        within (p+1)·eps·|product| (Higham, *Accuracy and Stability of Numerical Algorithms*,
        §3.1).
        """
        ranks = inputs.shape[0]
        owned = [payload.view(chunk) for chunk in Chunk(0, payload.count).split(ranks)]
        mask = np.zeros(inputs.shape, dtype=bool)
        exact = np.zeros(inputs.shape[1:])
        if collective is Collective.ALLGATHER:
            gathered = np.empty_like(inputs[0])
            for rank, piece in enumerate(owned):
                gathered[piece] = inputs[rank, piece]
            mask[...] = True
            return cls(gathered, exact, mask)
        if collective is Collective.BROADCAST:
            mask[...] = True
            return cls(inputs[ROOT].copy(), exact, mask)
        if collective is Collective.REDUCE_SCATTER:
            for rank, piece in enumerate(owned):
                mask[rank, piece] = True
        elif collective is Collective.REDUCE:
            mask[ROOT] = True
        else:
            mask[...] = True
        return cls(op.reference(inputs), _reduction_tolerance(inputs, op), mask)

    def check(self, buffers: np.ndarray) -> tuple[bool, float]:
        """Whether every defined element matches, and the largest absolute error among them.

        Checked one rank at a time, so the float64 temporaries stay the size of one buffer.
        """
        ok, worst = True, 0.0
        integer = np.issubdtype(buffers.dtype, np.integer)
        for rank in range(buffers.shape[0]):
            mask = self.mask[rank]
            if not mask.any():
                continue
            got, want = buffers[rank][mask], self._row(self.result, rank)[mask]
            error = np.abs(got.astype(np.float64) - want.astype(np.float64))
            worst = max(worst, float(error.max()))
            if integer:  # exact, even past float64's 2^53
                ok = ok and bool(np.array_equal(got, want))
            else:
                ok = ok and bool(np.all(error <= self._row(self.tolerance, rank)[mask]))
        return ok, worst

    @staticmethod
    def _row(values: np.ndarray, rank: int) -> np.ndarray:
        return values[rank] if values.ndim == 2 else values


def _reduction_tolerance(inputs: np.ndarray, op: ReduceOp) -> np.ndarray:
    """Allowed error per element: none for integers, max, min and float sums (whose inputs
    :func:`make_inputs` makes exactly summable); one rounding of the final division for averages;
    for products, p roundings of relative eps/2 each ((p+1)·eps·|product| bounds them)."""
    ranks, dtype = inputs.shape[0], inputs.dtype
    if np.issubdtype(dtype, np.integer) or op in (ReduceOp.MAX, ReduceOp.MIN, ReduceOp.SUM):
        return np.zeros(inputs.shape[1:])
    eps = float(np.finfo(dtype).eps)
    scale = np.abs(op.reference(inputs))
    if op is ReduceOp.AVG:
        return 2 * eps * scale
    return (ranks + 1) * eps * scale
