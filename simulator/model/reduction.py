"""Reduction operators (sum, prod, max, min, avg) on numpy data, as NCCL defines them, and the
element types they run on.

``avg`` reduces with a sum and divides by the number of ranks at the end (NCCL's ``ncclAvg``);
integer averages truncate toward zero, as C integer division does.
"""

from __future__ import annotations

from enum import Enum

import numpy as np

DTYPES = ("float16", "float32", "float64", "int32", "int64")
"""Element types a scenario may use (numpy has no bfloat16)."""


class ReduceOp(Enum):
    """A reduction operator of the scenario's ``op`` field."""

    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"
    AVG = "avg"

    @property
    def ufunc(self) -> np.ufunc:
        """The elementwise binary operation used to combine two partial results."""
        return _UFUNCS[self]

    def combine(self, into: np.ndarray, other: np.ndarray) -> None:
        """``into ⊕= other`` in place, in ``into``'s dtype (integers wrap, as on a GPU)."""
        self.ufunc(into, other, out=into)

    def finalize(self, data: np.ndarray, ranks: int) -> None:
        """Last step after all combines: only ``avg`` does anything (divide by ``ranks``)."""
        if self is ReduceOp.AVG and ranks > 1:
            if np.issubdtype(data.dtype, np.integer):  # C division: truncate toward zero
                data[...] = np.sign(data) * (np.abs(data) // ranks)
            else:
                data /= data.dtype.type(ranks)

    def reference(self, inputs: np.ndarray) -> np.ndarray:
        """numpy's reduction over axis 0 of ``(ranks, n)`` inputs: what every rank must end with.

        Floats are reduced in float64 (the exact answer to compare against); integers in their own
        dtype, so that wrap-around matches the simulated result exactly.
        """
        dtype = np.float64 if np.issubdtype(inputs.dtype, np.floating) else inputs.dtype
        # reduce() casts row by row: no float64 copy of all the inputs (1 GiB at 4096 ranks)
        result: np.ndarray = self.ufunc.reduce(inputs, axis=0, dtype=dtype)
        ranks = inputs.shape[0]
        if self is ReduceOp.AVG and np.issubdtype(dtype, np.integer):
            # written apart from finalize() so that one checks the other: floor, then step
            # toward zero where the division was inexact and the sum negative
            quotient, remainder = np.divmod(result, ranks)
            return np.asarray(quotient + ((result < 0) & (remainder != 0)))
        if self is ReduceOp.AVG:
            return np.asarray(result / ranks)
        return result


_UFUNCS = {
    ReduceOp.SUM: np.add,
    ReduceOp.PROD: np.multiply,
    ReduceOp.MAX: np.maximum,
    ReduceOp.MIN: np.minimum,
    ReduceOp.AVG: np.add,
}
