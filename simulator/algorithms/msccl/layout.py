"""Where a rank's MSCCL buffers lie in the buffer its program works on, in chunks.

The simulator gives every rank one buffer, the collective's (its input at the start, its result
at the end), and the program a workspace past it (``Algorithm.workspace_chunks``), all cut into
chunks of one size:

- chunks 0 to N-1, the collective's buffer: the output buffer (for reduce-scatter the rank's
  part of it, as NCCL's in-place reduce-scatter writes it) and, in place, the input (for
  allgather the rank's part, as NCCL's in-place allgather reads it);
- out of place (``inplace="0"``), a copy of the input, made before the first step (a copy costs
  no time in the model);
- the scratch buffer (``s_chunks``, the largest of any GPU);
- for each threadblock with ``rrs`` steps, chunks of its own for the reduced data it sends on
  (the runtime keeps it in registers; here it must lie somewhere to be sent).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.algorithms.msccl.ir import Buffer, Kind, MscclSchedule, Ref
from simulator.model.collective import Collective


@dataclass(frozen=True)
class Layout:
    """Chunk positions of a schedule's buffers (the same on every rank, temporaries aside)."""

    chunks: int
    """N: the collective's buffer."""
    input_copy: int | None
    """Where the copy of the input starts (out of place), else None."""
    scratch: int
    temps: dict[tuple[int, int], int]
    """Per (gpu, threadblock id) with ``rrs`` steps, where its temporary chunks start."""
    total: int
    """Chunks in all, workspace included."""

    @classmethod
    def of(cls, schedule: MscclSchedule) -> Layout:
        """The layout of ``schedule``."""
        n = schedule.chunks
        input_copy = None if schedule.inplace else n
        scratch = n + (0 if schedule.inplace else schedule.input_chunks)
        after = scratch + max((gpu.scratch_chunks for gpu in schedule.gpus), default=0)
        temps: dict[tuple[int, int], int] = {}
        end = after
        for gpu in schedule.gpus:
            at = after
            for tb in gpu.threadblocks:
                need = max((step.count for step in tb.steps
                            if step.kind is Kind.RECV_REDUCE_SEND), default=0)
                if need:
                    temps[(gpu.id, tb.id)] = at
                    at += need
            end = max(end, at)
        return cls(n, input_copy, scratch, temps, end)

    def input_at(self, schedule: MscclSchedule, rank: int) -> int:
        """Where rank ``rank``'s input lies in the collective's buffer at the start."""
        return (rank * schedule.input_chunks
                if schedule.collective is Collective.ALLGATHER else 0)

    def output_at(self, schedule: MscclSchedule, rank: int) -> int:
        """Where rank ``rank``'s output lies in the collective's buffer."""
        return (rank * schedule.output_chunks
                if schedule.collective is Collective.REDUCE_SCATTER else 0)

    def place(self, schedule: MscclSchedule, rank: int, ref: Ref) -> int:
        """The chunk position of ``ref`` on rank ``rank``."""
        if ref.buffer is Buffer.SCRATCH:
            return self.scratch + ref.index
        if ref.buffer is Buffer.OUTPUT:
            return self.output_at(schedule, rank) + ref.index
        if self.input_copy is not None:
            return self.input_copy + ref.index
        return self.input_at(schedule, rank) + ref.index
