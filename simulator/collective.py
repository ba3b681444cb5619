"""The collectives: what each rank must end with, and nccl-tests' bus-bandwidth factor.

Every rank holds one buffer of ``n`` elements (the scenario's size), cut into p nearly equal
chunks ``Chunk(0, n).split(p)``; chunk r "belongs" to rank r. ``size`` is always that whole
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

Factors from nccl-tests ``doc/PERFORMANCE.md`` (../shared/reference/nccl-model.md §2).
"""

from __future__ import annotations

from enum import Enum

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
