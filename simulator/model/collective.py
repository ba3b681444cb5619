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
alltoall       block j: rank j's block r (p equal blocks)             (p-1)/p
sendrecv       the buffer of rank r-1 (mod p): a shift by one            1
============== ===================================================== ===============

An all-to-all cuts every buffer into p equal blocks (the count a multiple of p: the algorithms'
``whole_chunks``, as nccl-tests' ``alltoall_perf`` sends count/p elements to each peer), and
rank r's block j ends up holding what rank j had in its block r: the transpose of the ranks ×
blocks grid, torch.distributed's ``all_to_all_single`` with equal splits. A sendrecv has every
rank send its whole buffer to rank r+1 and receive rank r-1's, as nccl-tests' ``sendrecv_perf``
does (``src/sendrecv.cu``: one ``ncclSend`` to the next rank and one ``ncclRecv`` from the
previous, in a group); its busbw is its algbw.

Factors from nccl-tests ``doc/PERFORMANCE.md`` (docs/reference/nccl-model.md §2). Each collective
also says what every rank must end with (:meth:`Collective.expected`), so a new collective is
one enum member, its factor and its outcome, all here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from simulator.model.reduction import ReduceOp, gamma, is_float, ulp, unit_roundoff

ROOT = 0
"""The root of rooted collectives (broadcast, reduce), as in nccl-tests' default ``-r 0``."""


class Collective(Enum):
    """A collective operation."""

    ALLREDUCE = "allreduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALLGATHER = "allgather"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALLTOALL = "alltoall"
    SENDRECV = "sendrecv"

    def busbw_factor(self, ranks: int) -> float:
        """busbw = algbw × this factor (nccl-tests doc/PERFORMANCE.md)."""
        if self is Collective.ALLREDUCE:
            return 2.0 * (ranks - 1) / ranks
        if self in (Collective.REDUCE_SCATTER, Collective.ALLGATHER, Collective.ALLTOALL):
            return (ranks - 1) / ranks
        return 1.0

    @property
    def by_rank_chunks(self) -> bool:
        """Whether each rank's outcome is laid out by the ranks' chunks (a reduce-scatter leaves
        rank r chunk r, an allgather gathers chunk r from rank r), so that a channel takes a
        part of every chunk rather than a slice of the whole buffer (NCCL's rings:
        src/device/reduce_scatter.h, all_gather.h, ``offset = dataOffset + rankDest * count``)."""
        return self in (Collective.REDUCE_SCATTER, Collective.ALLGATHER)

    @property
    def reduces(self) -> bool:
        """Whether the collective combines data with the reduction operator."""
        return self in (Collective.ALLREDUCE, Collective.REDUCE_SCATTER, Collective.REDUCE)

    def expected(self, inputs: np.ndarray, reduce_op: ReduceOp, owned: Sequence[slice], *,
                 summable: bool = True, depth: int | None = None) -> Expected:
        """What every rank must end with after this collective on ``inputs`` (taken before the
        run, shape ``(ranks, elements)``); ``owned[r]`` are the elements of rank r's chunk.

        Integers must match exactly, and so must copies (allgather, broadcast), max, min and
        float sums of ``summable`` inputs (exactly summable, see ``engine.payload.make_inputs``);
        an average may differ by its final division's rounding, and a product of p factors in
        any order stays within (p+1)·eps·|product| (Higham, *Accuracy and Stability of Numerical
        Algorithms*, 2nd ed., §3.1). Sums of other inputs (float16 and bfloat16 draws, a caller's
        own data) stay within γ_d·Σ|x_i|, d = ``depth`` the most additions any one input goes
        through in the algorithm's order (``Algorithm.reduction_depth``; None: p-1, the bound
        for any order): Higham §4.2, :func:`sum_bound`.
        """
        result, mask = self.outcome(inputs, reduce_op, owned)
        if not self.reduces:  # copies: exact
            return Expected(result, np.zeros(inputs.shape[1:]), mask, _scale_of(result))
        scale = magnitude(inputs, reduce_op) if is_float(inputs.dtype) else None
        return Expected(result, _reduction_tolerance(inputs, reduce_op, scale, summable, depth),
                        mask, scale)

    def outcome(self, inputs: np.ndarray, reduce_op: ReduceOp,
                owned: Sequence[slice]) -> tuple[np.ndarray, np.ndarray]:
        """What every rank ends with after this collective on ``inputs`` (``(ranks, elements)``;
        ``owned[r]`` rank r's chunk), broadcasting against them, and the mask of the elements
        it defines: a reduction numpy's in float64 (:meth:`ReduceOp.reference`), copies
        exact. :meth:`expected` adds the rounding error allowed."""
        mask = np.zeros(inputs.shape, dtype=bool)
        if self is Collective.ALLGATHER:
            gathered = np.empty_like(inputs[0])
            for rank, elements in enumerate(owned):
                gathered[elements] = inputs[rank, elements]
            mask[...] = True
            return gathered, mask
        if self is Collective.ALLTOALL:
            return _transposed(inputs, owned)
        if self is Collective.SENDRECV:
            mask[...] = True
            return np.roll(inputs, 1, axis=0), mask  # rank r holds rank r-1's buffer
        if self is Collective.BROADCAST:
            mask[...] = True
            return inputs[ROOT].copy(), mask
        if self is Collective.REDUCE_SCATTER:
            for rank, elements in enumerate(owned):
                mask[rank, elements] = True
        elif self is Collective.REDUCE:
            mask[ROOT] = True
        else:
            mask[...] = True
        return reduce_op.reference(inputs), mask


@dataclass(frozen=True)
class Verification:
    """What the check of a run found over the elements the collective defines.

    ``verified``: every element within its tolerance (exactly equal where that is 0).
    ``max_abs_error``: the largest ``|result - reference|``. ``max_ulp_error`` and
    ``mean_ulp_error``: that error in units in the last place of the dtype at the element's
    :attr:`Expected.scale` (:func:`~simulator.model.reduction.ulp`; 1 for integers), the largest
    and the mean over every defined element of every rank. ``ranks_identical``: every element
    that more than one rank defines holds the same bits on all of them (True where each element
    has one rank).
    """

    verified: bool
    max_abs_error: float
    max_ulp_error: float
    mean_ulp_error: float
    ranks_identical: bool


@dataclass(frozen=True)
class Expected:
    """What every rank must end with, where that is defined, and the rounding error allowed.

    ``result`` and ``tolerance`` broadcast against the ``(ranks, elements)`` buffers; ``mask``
    marks the elements the collective defines (e.g. only chunk r of rank r for reduce-scatter).
    ``scale`` (float64, per element; None for integers) is where errors are counted in ULP: the
    operator's reduction of the inputs' magnitudes (:func:`magnitude`: Σ|x_i| for a sum), the
    scale at which the reduction rounds and its error bound is stated. The ULP of the result
    itself would not do: a sum of random signs that cancels to near 0 has a tiny ULP, and its
    error in such units grows without bound (their mean over normal gradients diverges).
    """

    result: np.ndarray
    tolerance: np.ndarray
    mask: np.ndarray
    scale: np.ndarray | None = None

    def check(self, buffers: np.ndarray) -> Verification:
        """Every defined element against the result and its tolerance, with the errors in ULP
        and whether the ranks agree bit for bit.

        Where the expected or the simulated value is not finite (a NaN or an infinity among the
        inputs, as simulator.distributed's users may give), the two must be the same special value, NaN
        matching NaN: IEEE arithmetic gives it in any order of reduction, so anything else is a
        wrong result (error infinite), and no rounding tolerance applies. Checked one rank at a
        time, so the float64 temporaries stay the size of one buffer.
        """
        ok, worst, worst_ulp, ulps, checked, identical = True, 0.0, 0.0, 0.0, 0, True
        integer = np.issubdtype(buffers.dtype, np.integer)
        bits = np.dtype(f"u{buffers.dtype.itemsize}")
        first = np.zeros(buffers.shape[1], dtype=bits)  # the first defining rank's bits
        seen = np.zeros(buffers.shape[1], dtype=bool)
        for rank in range(buffers.shape[0]):
            mask = self.mask[rank]
            if not mask.any():
                continue
            got, want = buffers[rank][mask], self._row(self.result, rank)[mask]
            got64, want64 = got.astype(np.float64), want.astype(np.float64)
            with np.errstate(invalid="ignore"):  # inf - inf: the special values come below
                error = np.abs(got64 - want64)
            if integer:  # exact, even past float64's 2^53
                ok = ok and bool(np.array_equal(got, want))
            else:
                fine = error <= self._row(self.tolerance, rank)[mask]
                special = ~(np.isfinite(got64) & np.isfinite(want64))
                if special.any():
                    same = (got64 == want64) | (np.isnan(got64) & np.isnan(want64))
                    error[special] = np.where(same[special], 0.0, np.inf)
                    fine[special] = same[special]
                ok = ok and bool(np.all(fine))
            worst = max(worst, float(error.max()))
            in_ulp = error if self.scale is None else error / ulp(
                self._row(self.scale, rank)[mask], buffers.dtype)
            worst_ulp, ulps = max(worst_ulp, float(in_ulp.max())), ulps + float(in_ulp.sum())
            checked += int(in_ulp.size)
            row = buffers[rank].view(bits)
            both = mask & seen
            identical = identical and bool(np.array_equal(row[both], first[both]))
            new = mask & ~seen
            first[new], seen[new] = row[new], True
        return Verification(ok, worst, worst_ulp, ulps / checked if checked else 0.0, identical)

    def first_wrong(self, buffers: np.ndarray) -> tuple[int, int] | None:
        """The first defined element that does not match, as (rank, element), ranks in order;
        None where :meth:`check` passes."""
        integer = np.issubdtype(buffers.dtype, np.integer)
        for rank in range(buffers.shape[0]):
            mask = self.mask[rank]
            want = np.broadcast_to(self._row(self.result, rank), mask.shape)
            if integer:
                wrong = buffers[rank] != want
            else:
                error = np.abs(buffers[rank].astype(np.float64) - want.astype(np.float64))
                wrong = ~(error <= np.broadcast_to(self._row(self.tolerance, rank), mask.shape))
            found = np.flatnonzero(wrong & mask)
            if found.size:
                return rank, int(found[0])
        return None

    @staticmethod
    def _row(values: np.ndarray, rank: int) -> np.ndarray:
        return values[rank] if values.ndim == 2 else values


def magnitude(inputs: np.ndarray, reduce_op: ReduceOp) -> np.ndarray:
    """The operator's reduction of the ``(ranks, elements)`` float inputs' absolute values, in
    float64, per element: Σ|x_i| for a sum (over p for an average), Π|x_i| for a product, the
    largest or least |x_i| for max and min. Accumulated one rank at a time, so the float64
    temporaries stay the size of one buffer."""
    total: np.ndarray = np.abs(inputs[0]).astype(np.float64)
    for row in inputs[1:]:
        reduce_op.ufunc(total, np.abs(row), out=total)
    if reduce_op is ReduceOp.AVG:
        total /= inputs.shape[0]
    return total


def sum_bound(magnitudes: np.ndarray, dtype: np.dtype[Any], depth: int) -> np.ndarray:
    """|computed - exact| ≤ γ_d·Σ|x_i| for a floating-point sum in ``dtype`` (unit roundoff u)
    of terms whose absolute values sum to ``magnitudes``, in any order in which no term goes
    through more than ``depth`` = d additions, γ_d = d·u / (1 - d·u): Higham, *Accuracy and
    Stability of Numerical Algorithms*, 2nd ed., §4.2 (eq. 4.4 and the summation trees after
    it; d = p-1 holds for every order of p terms, ⌈log2 p⌉ for pairwise summation). Infinite
    where d·u ≥ 1."""
    bound = gamma(depth, unit_roundoff(dtype))
    if math.isinf(bound):
        return np.full(magnitudes.shape, math.inf)
    return np.asarray(bound * magnitudes)


def _transposed(inputs: np.ndarray, owned: Sequence[slice]) -> tuple[np.ndarray, np.ndarray]:
    """An all-to-all's outcome and mask: rank r's block j (``owned[j]``) holds rank j's block
    r. ValueError where the blocks are not all the same length (the plan refuses such
    counts)."""
    lengths = {block.stop - block.start for block in owned}
    if len(lengths) > 1:
        raise ValueError(f"an all-to-all needs equal blocks, got lengths {sorted(lengths)}")
    result = np.empty_like(inputs)
    for rank, mine in enumerate(owned):
        for peer, theirs in enumerate(owned):
            result[rank, theirs] = inputs[peer, mine]
    mask = np.zeros(inputs.shape, dtype=bool)
    mask[:, owned[0].start:owned[-1].stop] = True
    return result, mask


def _scale_of(values: np.ndarray) -> np.ndarray | None:
    """A copy's :attr:`Expected.scale`: its own magnitude (None for integers)."""
    return np.abs(values.astype(np.float64)) if is_float(values.dtype) else None


def _reduction_tolerance(inputs: np.ndarray, reduce_op: ReduceOp, magnitudes: np.ndarray | None,
                         summable: bool = True, depth: int | None = None) -> np.ndarray:
    """Allowed error per element: none for integers, max, min and float sums of inputs made
    exactly summable; one rounding of the final division for averages; for products, p
    roundings of relative eps/2 each ((p+1)·eps·|product| bounds them). Sums of other inputs:
    :func:`sum_bound` for ``depth`` (None: p-1) of their ``magnitudes`` (:func:`magnitude`);
    their averages add the division by p (and p's own rounding to the dtype), γ_2 of the
    computed sum: |ŝ/p̂ - S/p| ≤ B/p + γ_2·(|S| + B)/p for B the sum's bound (Higham §3.1,
    Lemma 3.1)."""
    ranks, dtype = inputs.shape[0], inputs.dtype
    exact = reduce_op in (ReduceOp.MAX, ReduceOp.MIN) or (reduce_op is ReduceOp.SUM and summable)
    if magnitudes is None or exact:
        return np.zeros(inputs.shape[1:])
    if reduce_op in (ReduceOp.SUM, ReduceOp.AVG) and not summable:
        # an average's magnitudes are Σ|x_i|/p already: its bound is B/p
        spread = sum_bound(magnitudes, dtype, ranks - 1 if depth is None else depth)
        if reduce_op is ReduceOp.AVG:
            mean = np.abs(reduce_op.reference(inputs))
            return np.asarray(spread + gamma(2, unit_roundoff(dtype)) * (mean + spread))
        return spread
    eps = 2 * unit_roundoff(dtype)
    scale = np.abs(reduce_op.reference(inputs))
    factor = 2 if reduce_op is ReduceOp.AVG else ranks + 1
    return np.asarray(factor * eps * scale)
