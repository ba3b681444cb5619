"""Reduction operators (sum, prod, max, min, avg) on numpy data, as NCCL defines them, and the
element types they run on.

``avg`` reduces with a sum and divides by the number of ranks at the end (NCCL's ``ncclAvg``);
integer averages truncate toward zero, as C integer division does. Every combine happens in the
buffer's own dtype, so a float16 or bfloat16 sum rounds at each step as a GPU's does (numpy's
float16 and ml_dtypes' bfloat16 add in float32 and round once to the dtype: correctly rounded,
since float32's 24 bits are at least 2t + 2 for the dtype's t-bit significand, Figueroa's
condition for double rounding to be innocuous).
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import ml_dtypes
import numpy as np

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
"""bfloat16, which numpy lacks, through ml_dtypes (importing it also makes
``np.dtype("bfloat16")`` work)."""

DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64")
"""Element types a scenario may use."""

LOW_PRECISION = ("float16", "bfloat16")
"""The dtypes whose sums are drawn from a normal distribution and checked against a rounding
bound instead of exactly (:func:`simulator.engine.payload.make_inputs`, docs/numerics.md)."""


def is_float(dtype: np.dtype[Any]) -> bool:
    """Whether ``dtype`` is a floating-point type (bfloat16 included, which numpy's
    ``np.issubdtype(..., np.floating)`` does not count)."""
    return dtype.kind == "f" or dtype == BFLOAT16


def finfo(dtype: np.dtype[Any]) -> Any:
    """numpy's ``finfo`` of a float dtype, bfloat16 included (ml_dtypes')."""
    return ml_dtypes.finfo(dtype)  # type: ignore[no-untyped-call]


def unit_roundoff(dtype: np.dtype[Any]) -> float:
    """u = 2^-t of a float dtype whose significand has t bits (the leading one included):
    round-to-nearest makes fl(a ∘ b) = (a ∘ b)(1 + δ), |δ| ≤ u (Higham, *Accuracy and Stability
    of Numerical Algorithms*, 2nd ed., §2.2). float16: 2^-11, bfloat16: 2^-8, float32: 2^-24."""
    return float(finfo(dtype).eps) / 2


def gamma(k: int, u: float) -> float:
    """Higham's γ_k = k·u / (1 - k·u) (§3.1): k roundings of relative size at most u compound to
    at most γ_k; infinite where k·u ≥ 1 (no bound)."""
    return k * u / (1 - k * u) if k * u < 1 else float("inf")


def ulp(values: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    """The spacing of ``dtype``'s numbers at each of ``values`` (float64): 2^(e - t + 1) for
    2^e ≤ |x| < 2^(e+1), t the dtype's significand bits, e no lower than its least normal
    exponent (then the subnormals' spacing, also at 0): Goldberg's ulp of x's binade."""
    info = finfo(dtype)
    _, exponent = np.frexp(values)  # x = m·2^E, 0.5 ≤ |m| < 1: the binade is 2^(E-1)
    binade = np.where(values == 0, info.minexp, np.maximum(exponent - 1, info.minexp))
    spacing: np.ndarray = np.ldexp(1.0, binade - info.nmant)
    return spacing


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

        Floats are reduced in float64, the reference to compare against: exact for the exactly
        summable draws and for float16 sums of up to 2^13 terms (multiples of 2^-24 below 2^16 fit
        float64's 53 bits), elsewhere within float64's own rounding, far below a float16 or
        bfloat16 ULP. Integers are reduced in their own dtype, so that wrap-around matches the
        simulated result exactly.
        """
        dtype = np.float64 if is_float(inputs.dtype) else inputs.dtype
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
