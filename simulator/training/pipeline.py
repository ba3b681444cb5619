"""The order a pipeline stage runs its micro-batches' forward and backward passes in, as
Megatron-LM's schedules issue them (``megatron/core/pipeline_parallel/schedules.py``,
``forward_backward_pipelining_without_interleaving`` and ``..._with_interleaving``).

**1F1B** (PipeDream-Flush; Narayanan et al. 2021, §2.2.1): stage s of p first runs
``min(p − s − 1, m)`` forwards (the warm-up), then alternates one forward and one backward,
then runs the backwards left (the cool-down). **Interleaved** (§2.2.2): each stage holds
``v`` model chunks (virtual stage ``c·p + s`` on stage s); forwards go through the chunks in
groups of p micro-batches, backwards likewise with the chunks reversed, and the warm-up is
``(p − s − 1)·2 + (v − 1)·p`` forwards (Megatron's ``num_warmup_microbatches``). The bubble is
then (p − 1)/(v·m) of the ideal time instead of (p − 1)/m.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pass:
    """One pass a stage runs: forward or backward, of micro-batch ``micro`` through its model
    chunk ``chunk``."""

    forward: bool
    micro: int
    chunk: int

    def virtual(self, stage: int, stages: int) -> int:
        """The virtual stage (position in the whole model) this pass runs."""
        return self.chunk * stages + stage


def _chunk_pass(k: int, stages: int, chunks: int, *, forward: bool) -> Pass:
    """The k-th forward (or backward) of a stage under the interleaved order: micro-batches in
    groups of ``stages``, each group through every chunk (backwards: last chunk first)."""
    group, within = divmod(k, stages * chunks)
    chunk = within // stages
    micro = group * stages + within % stages
    return Pass(forward, micro, chunk if forward else chunks - 1 - chunk)


def stage_order(stage: int, stages: int, micros: int, chunks: int = 1) -> tuple[Pass, ...]:
    """Every pass stage ``stage`` of ``stages`` runs for ``micros`` micro-batches, in order
    (``chunks`` > 1: interleaved).

    >>> [("F" if p.forward else "B") + str(p.micro) for p in stage_order(0, 2, 3)]
    ['F0', 'F1', 'B0', 'F2', 'B1', 'B2']
    >>> [("F" if p.forward else "B") + str(p.micro) for p in stage_order(1, 2, 3)]
    ['F0', 'B0', 'F1', 'B1', 'F2', 'B2']
    """
    total = micros * chunks
    if chunks == 1:
        warmup = min(stages - stage - 1, micros)
    else:
        warmup = min((stages - stage - 1) * 2 + (chunks - 1) * stages, total)
    order = [_chunk_pass(k, stages, chunks, forward=True) for k in range(warmup)]
    forwards, backwards = warmup, 0
    while forwards < total:
        order.append(_chunk_pass(forwards, stages, chunks, forward=True))
        forwards += 1
        order.append(_chunk_pass(backwards, stages, chunks, forward=False))
        backwards += 1
    order += [_chunk_pass(k, stages, chunks, forward=False) for k in range(backwards, total)]
    return tuple(order)

