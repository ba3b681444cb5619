"""Real data for every run: the proxy payload and seeded inputs (the expected outcome is the
collective's own, :meth:`simulator.model.collective.Collective.expected`).

A rank's buffer nominally holds ``count`` elements; that count sets the timing. The numpy data a
run actually moves is a *proxy* of at most ``proxy_count`` elements per rank, with the same
partitioning: a span of elements ``[start, stop)`` of the nominal buffer maps to proxy elements
``[start·m // count, stop·m // count)``, so every span an algorithm cuts, at any depth, is still
a contiguous, non-overlapping part of the proxy and neighbouring spans tile it exactly. When the
nominal buffer is small enough the proxy *is* the buffer (``exact``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.limits import DEFAULT_PROXY_ELEMENTS
from simulator.model.reduction import LOW_PRECISION, ReduceOp, finfo
from simulator.model.span import Span


@dataclass(frozen=True)
class Payload:
    """Nominal element count per rank (for timing) and the proxy actually moved (for checking)."""

    count: int
    proxy_count: int
    dtype: np.dtype

    @classmethod
    def for_size(cls, size_bytes: int, dtype: np.dtype, ranks: int,
                 proxy_elements: int = DEFAULT_PROXY_ELEMENTS,
                 piece_bytes: int | None = None, channels: int = 1,
                 whole_chunks: int = 1) -> Payload:
        """The payload of a ``size_bytes`` buffer.

        The proxy keeps at least 8 elements per chunk (p chunks on each of the ``channels``)
        and, when the buffer moves in pipeline pieces of ``piece_bytes``, 2 elements per piece
        (pieces of the chunks included), so that no piece maps to an empty slice and escapes
        the check. Where the algorithm moves data between ``whole_chunks`` equal chunks
        (``Algorithm.whole_chunks``; the count a multiple of it), the proxy is a multiple of
        them too, so that every chunk maps to as many proxy elements as every other.
        """
        count = size_bytes // dtype.itemsize
        chunks = ranks * channels
        needed = max(proxy_elements, 8 * chunks)
        if piece_bytes is not None:
            pieces = -(-count // max(1, piece_bytes // dtype.itemsize)) + chunks
            needed = max(needed, 2 * pieces)
        if whole_chunks > 1:
            needed = -(-needed // whole_chunks) * whole_chunks
        return cls(count, min(count, needed), dtype)

    def widened(self, elements: int) -> Payload:
        """This payload over ``elements`` more nominal elements past the buffer (an algorithm's
        workspace), mapped to proxy elements at the same rate, so every span keeps its view.
        ValueError where they would not map to a whole number of proxy elements."""
        extra, left = divmod(elements * self.proxy_count, self.count) if self.count else (0, 0)
        if left:
            raise ValueError(f"{elements} elements past a buffer of {self.count} do not map to "
                             f"a whole number of its {self.proxy_count} proxy elements")
        return Payload(self.count + elements, self.proxy_count + extra, self.dtype)

    @classmethod
    def timing_only(cls, size_bytes: int, dtype: np.dtype) -> Payload:
        """A payload that moves no data (an empty proxy): every span maps to no element, so
        the engines time the messages and skip the copies and reductions."""
        return cls(size_bytes // dtype.itemsize, 0, dtype)

    @property
    def exact(self) -> bool:
        """True when the proxy is the whole nominal buffer."""
        return self.proxy_count == self.count

    def nbytes(self, span: Span) -> int:
        """Nominal bytes of ``span``: what the network and the GPU are charged for."""
        return span.count * self.dtype.itemsize

    def view(self, span: Span) -> slice:
        """The proxy elements standing for ``span``."""
        if self.exact:
            return slice(span.start, span.stop)
        return slice(span.start * self.proxy_count // self.count,
                     span.stop * self.proxy_count // self.count)

    def views(self, starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`view` of many spans at once, as (first proxy element, proxy elements)."""
        if self.exact:
            return starts, stops - starts
        first = starts * self.proxy_count // self.count
        return first, stops * self.proxy_count // self.count - first

    def owned(self, ranks: int) -> list[slice]:
        """The proxy elements of each rank's chunk (chunk r belongs to rank r)."""
        return [self.view(chunk) for chunk in Span(0, self.count).split(ranks)]


def exactly_summable(dtype: np.dtype, reduce_op: ReduceOp) -> bool:
    """Whether :func:`make_inputs` draws ``dtype``'s sums and averages so that they are exact:
    for every dtype but float16 and bfloat16, whose runs measure rounding instead
    (docs/numerics.md). True for the other operators, whose draws do not depend on it."""
    return dtype.name not in LOW_PRECISION or reduce_op not in (ReduceOp.SUM, ReduceOp.AVG)


def make_inputs(rng: np.random.Generator, ranks: int, payload: Payload,
                reduce_op: ReduceOp, *, summable: bool | None = None) -> np.ndarray:
    """Every rank's input, shape ``(ranks, proxy_count)``, drawn so the reduction stays finite.

    Float sums (and averages) use multiples of 2^-6 small enough that every partial sum, in any
    order, is exact in the dtype (|Σ| ≤ ranks·m·2^-6 with ranks·m ≤ 2^mantissa): the result is
    then exact, so a missing or doubled contribution can never hide inside a rounding tolerance.
    Unless ``summable`` says otherwise (None: :func:`exactly_summable`), float16 and bfloat16
    sums draw standard normal gradients instead, rounded to the dtype, so that every algorithm
    rounds as its order makes it (docs/numerics.md).
    Products use factors near 1 (floats within 1 ± 1/ranks; integers from {-1, 1, 2}, whose
    wrap-around is still exact); integers otherwise lie in [-100, 100]; max and min any floats.
    """
    shape = (ranks, payload.proxy_count)
    dtype = payload.dtype
    if np.issubdtype(dtype, np.integer):
        if reduce_op is ReduceOp.PROD:
            return rng.choice(np.array([-1, 1, 2], dtype=dtype), size=shape)
        return rng.integers(-100, 101, size=shape, dtype=dtype)
    if reduce_op is ReduceOp.PROD:
        spread = 1.0 / max(ranks, 2)
        return rng.uniform(1.0 - spread, 1.0 + spread, size=shape).astype(dtype)
    if reduce_op in (ReduceOp.SUM, ReduceOp.AVG):
        if not (exactly_summable(dtype, reduce_op) if summable is None else summable):
            # drawn in float32 (half the memory of float64), rounded once to the dtype
            return rng.standard_normal(size=shape, dtype=np.float32).astype(dtype)
        largest = max(1, min(64, 2 ** (finfo(dtype).nmant + 1) // ranks))
        # drawn as int8 and scaled in place by 2^-6 (exact): an eighth of the memory of int64
        inputs = rng.integers(-largest, largest + 1, size=shape, dtype=np.int8).astype(dtype)
        inputs *= dtype.type(1 / 64)
        return inputs
    return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
