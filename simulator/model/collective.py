"""The collectives: what each rank must end with, and nccl-tests' bus-bandwidth factor.

Every rank holds one buffer of ``n`` elements (the scenario's size), cut into p nearly equal
chunks ``Span(0, n).split(p)``; chunk r "belongs" to rank r. ``size`` is always that whole
buffer, which is how nccl-tests counts it (for allgather the gathered output, for reduce-scatter
the input), so ``algbw = size / time`` compares across collectives.

============== ===================================================== ===============
collective     every rank ends with                                  busbw factor
============== ===================================================== ===============
allreduce      the reduction of all buffers                          2(p-1)/p
reduce_scatter chunk r: the reduction of chunk r over all ranks      (p-1)/p
allgather      chunk c everywhere: rank c's own chunk c               (p-1)/p
broadcast      the root's buffer (root = rank 0)                     1
reduce         root only: the reduction of all buffers               1
============== ===================================================== ===============

Factors from nccl-tests ``doc/PERFORMANCE.md`` (docs/reference/nccl-model.md §2). Each collective
also says what every rank must end with (:meth:`Collective.expected`), so a new collective is
one enum member, its factor and its outcome, all here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from simulator.model.reduction import ReduceOp

ROOT = 0
"""The root of rooted collectives (broadcast, reduce), as in nccl-tests' default ``-r 0``."""


class Collective(Enum):
    """A collective operation."""

    ALLREDUCE = "allreduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALLGATHER = "allgather"
    BROADCAST = "broadcast"
    REDUCE = "reduce"

    def busbw_factor(self, ranks: int) -> float:
        """busbw = algbw × this factor (nccl-tests doc/PERFORMANCE.md)."""
        if self is Collective.ALLREDUCE:
            return 2.0 * (ranks - 1) / ranks
        if self in (Collective.REDUCE_SCATTER, Collective.ALLGATHER):
            return (ranks - 1) / ranks
        return 1.0

    @property
    def reduces(self) -> bool:
        """Whether the collective combines data with the reduction operator."""
        return self in (Collective.ALLREDUCE, Collective.REDUCE_SCATTER, Collective.REDUCE)

    def expected(self, inputs: np.ndarray, reduce_op: ReduceOp, owned: Sequence[slice], *,
                 summable: bool = True) -> Expected:
        """What every rank must end with after this collective on ``inputs`` (taken before the
        run, shape ``(ranks, elements)``); ``owned[r]`` are the elements of rank r's chunk.

        Integers must match exactly, and so must copies (allgather, broadcast), max, min and
        float sums (their inputs are exactly summable, see ``engine.payload.make_inputs``); an
        average may differ by its final division's rounding, and a product of p factors in any
        order stays within (p+1)·eps·|product| (Higham, *Accuracy and Stability of Numerical
        Algorithms*, §3.1).
        """
        mask = np.zeros(inputs.shape, dtype=bool)
        exact = np.zeros(inputs.shape[1:])
        if self is Collective.ALLGATHER:
            gathered = np.empty_like(inputs[0])
            for rank, elements in enumerate(owned):
                gathered[elements] = inputs[rank, elements]
            mask[...] = True
            return Expected(gathered, exact, mask)
        if self is Collective.BROADCAST:
            mask[...] = True
            return Expected(inputs[ROOT].copy(), exact, mask)
        if self is Collective.REDUCE_SCATTER:
            for rank, elements in enumerate(owned):
                mask[rank, elements] = True
        elif self is Collective.REDUCE:
            mask[ROOT] = True
        else:
            mask[...] = True
        return Expected(reduce_op.reference(inputs),
                        _reduction_tolerance(inputs, reduce_op, summable), mask)


@dataclass(frozen=True)
class Expected:
    """What every rank must end with, where that is defined, and the rounding error allowed.

    ``result`` and ``tolerance`` broadcast against the ``(ranks, elements)`` buffers; ``mask``
    marks the elements the collective defines (e.g. only chunk r of rank r for reduce-scatter).
    """

    result: np.ndarray
    tolerance: np.ndarray
    mask: np.ndarray

    def check(self, buffers: np.ndarray) -> tuple[bool, float]:
        """Whether every defined element matches, and the largest absolute error among them.

        Where the expected or the simulated value is not finite (a NaN or an infinity among the
        inputs, as simulator.dist's users may give), the two must be the same special value, NaN
        matching NaN: IEEE arithmetic gives it in any order of reduction, so anything else is a
        wrong result (error infinite), and no rounding tolerance applies. Checked one rank at a
        time, so the float64 temporaries stay the size of one buffer.
        """
        ok, worst = True, 0.0
        integer = np.issubdtype(buffers.dtype, np.integer)
        for rank in range(buffers.shape[0]):
            mask = self.mask[rank]
            if not mask.any():
                continue
            got, want = buffers[rank][mask], self._row(self.result, rank)[mask]
            got64, want64 = got.astype(np.float64), want.astype(np.float64)
            with np.errstate(invalid="ignore"):  # inf - inf: the special values come below
                error = np.abs(got64 - want64)
            if integer:  # exact, even past float64's 2^53
                worst = max(worst, float(error.max()))
                ok = ok and bool(np.array_equal(got, want))
                continue
            fine = error <= self._row(self.tolerance, rank)[mask]
            special = ~(np.isfinite(got64) & np.isfinite(want64))
            if special.any():
                same = (got64 == want64) | (np.isnan(got64) & np.isnan(want64))
                error[special] = np.where(same[special], 0.0, np.inf)
                fine[special] = same[special]
            worst = max(worst, float(error.max()))
            ok = ok and bool(np.all(fine))
        return ok, worst

    @staticmethod
    def _row(values: np.ndarray, rank: int) -> np.ndarray:
        return values[rank] if values.ndim == 2 else values


def _reduction_tolerance(inputs: np.ndarray, reduce_op: ReduceOp,
                         summable: bool = True) -> np.ndarray:
    """Allowed error per element: none for integers, max, min and float sums of inputs made
    exactly summable; one rounding of the final division for averages; for products, p
    roundings of relative eps/2 each ((p+1)·eps·|product| bounds them). Sums (and averages) of
    other inputs add p-1 roundings of the partial sums: (p-1)·eps·Σ|x| (Higham, §4.2)."""
    ranks, dtype = inputs.shape[0], inputs.dtype
    exact = reduce_op in (ReduceOp.MAX, ReduceOp.MIN) or (reduce_op is ReduceOp.SUM and summable)
    if np.issubdtype(dtype, np.integer) or exact:
        return np.zeros(inputs.shape[1:])
    eps = float(np.finfo(dtype).eps)
    if reduce_op in (ReduceOp.SUM, ReduceOp.AVG) and not summable:
        magnitude = np.abs(inputs).sum(axis=0, dtype=np.float64)
        spread = (ranks - 1) * eps * magnitude
        if reduce_op is ReduceOp.AVG:
            return np.asarray(spread / ranks + 2 * eps * np.abs(reduce_op.reference(inputs)))
        return np.asarray(spread)
    scale = np.abs(reduce_op.reference(inputs))
    factor = 2 if reduce_op is ReduceOp.AVG else ranks + 1
    return np.asarray(factor * eps * scale)
