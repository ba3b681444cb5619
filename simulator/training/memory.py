"""What a parallel layout holds in one GPU's memory: parameters, gradients and optimizer states
(sharded by ZeRO's stage) and the activations of the micro-batches in flight, for the most loaded
GPU, a rank of pipeline stage 0 (it holds the embedding and, under 1F1B, the most micro-batches
in flight); so that a layout that does not fit its GPU can be marked and left out of a ranking.

Mixed precision as Megatron-LM and ZeRO train (Rajbhandari et al. 2020, "ZeRO: Memory
Optimizations Toward Training Trillion Parameter Models", §3.1): bf16 weights (2 bytes a
parameter) and gradients (2), and the optimizer's fp32 states: a master copy of the weights (4)
plus 4 bytes a state, so K = 12 for Adam (momentum and variance: 16 bytes a parameter in all,
ZeRO's "2Ψ + 2Ψ + KΨ"), 8 for SGD with momentum, 4 for plain SGD. ZeRO (§5.1) shards the K
bytes over data parallelism from stage 1, the gradients too from stage 2 and the weights from
stage 3; expert parameters are sharded over the expert-data-parallel group (dp / ep ranks hold
the same experts; :mod:`simulator.training.layout`). Megatron's fp32 gradient accumulation
buffer (``main_grad``), the CUDA context, workspace and fragmentation are not counted.

Activations are Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
Models", §4, Table 2), bytes per transformer layer for a micro-batch of b sequences of s tokens,
hidden h, a heads, tensor parallelism t:

- without tensor parallelism, s·b·h·(34 + 5·a·s/h);
- with it, s·b·h·(10 + 24/t + 5·a·s/(h·t)) (the layer norms' and dropouts' inputs stay whole);
- with sequence parallelism too, s·b·h·(34 + 5·a·s/h)/t;
- with full recomputation, only each layer's input, 2·s·b·h (/t when sequence parallel, as
  Megatron checkpoints the sequence-sharded input).

These are the paper's formulas for a GPT layer (multi-head attention, a 4·h GELU MLP, the
attention scores stored as softmax and dropout keep); here they are applied unchanged to
grouped-query and SwiGLU models, as an approximation. With ``flash_attention`` (the layout's
default) the 5·a·s/h term of the scores is dropped: FlashAttention keeps no s×s scores for
backward, only its output and softmax statistics, recomputing the scores (Dao et al. 2022,
§3.1), as Korthikanti's selective recomputation does (Table 2: 34·s·b·h/t with sequence
parallelism), and Megatron-Core runs it by default (Transformer Engine's fused attention).
The embedding's and the output layer's activations (Korthikanti §4.3) are not counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from simulator.training.compute import Optimizer
from simulator.training.layout import Parallelism, Schedule
from simulator.training.transformer import BF16, Transformer

WEIGHT_BYTES = BF16
"""Bytes of a weight as the forward and backward passes read it: bf16 (ZeRO §3.1, 2Ψ)."""
GRADIENT_BYTES = BF16
"""Bytes of a gradient as backward writes it: bf16 (ZeRO §3.1, 2Ψ)."""
FP32 = 4
"""Bytes of an fp32 optimizer state."""

ACTIVATION_PER_ELEMENT = 34
"""Korthikanti et al. 2022, §4.1, Eq. 1: bytes per element of s·b·h one layer keeps for
backward, apart from the attention scores (11 in attention, 19 in the MLP, 4 in the norms)."""
ACTIVATION_REPLICATED = 10
"""Of those 34, the bytes outside tensor parallelism's regions, so kept whole on every TP rank:
the two layer norms' inputs, the inputs of the attention and MLP blocks, and the two dropout
masks (Korthikanti §4.2.1, Eq. 2); the other 24 are split t ways."""
ACTIVATION_PER_SCORE = 5
"""Bytes per attention score (a·s² of them per sequence): the softmax output (2), the dropout
mask (1) and the dropout output (2) (Korthikanti §4.1)."""
RECOMPUTED_PER_ELEMENT = 2
"""Full recomputation keeps only each layer's bf16 input (Korthikanti Table 2: 2·s·b·h)."""


@dataclass(frozen=True)
class Memory:
    """Bytes one GPU holds during a step: its ``parameters`` (bf16 weights), ``gradients``,
    ``optimizer_states`` (fp32 master weights and states) and ``activations`` (of the
    micro-batches in flight)."""

    parameters: int
    gradients: int
    optimizer_states: int
    activations: int

    @property
    def total(self) -> int:
        """Everything the GPU holds."""
        return self.parameters + self.gradients + self.optimizer_states + self.activations


def optimizer_state_bytes(optimizer: Optimizer) -> int:
    """K, the fp32 bytes an optimizer keeps per parameter under mixed precision: the master
    weight and one fp32 state per moment (ZeRO §3.1: K = 12 for Adam)."""
    states = {Optimizer.SGD: 0, Optimizer.MOMENTUM: 1, Optimizer.ADAM: 2}[optimizer]
    return FP32 * (1 + states)


def stage_layers(shape: Transformer, layout: Parallelism) -> int:
    """Transformer layers on pipeline stage 0 (the first of an uneven split, rounded up)."""
    return -(-shape.layers // layout.pp)


def stage_parameters(shape: Transformer, layout: Parallelism) -> tuple[Fraction, Fraction]:
    """Dense and expert parameters on one GPU of stage 0: its layers' dense parameters, the
    word (and position) embeddings, and with one stage also the final norm and untied output
    layer, over ``tp``; its layers' experts over ``tp · ep``."""
    layers = stage_layers(shape, layout)
    embedding = (shape.embedding_params if layout.pp == 1
                 else (shape.vocab + shape.positions) * shape.hidden)
    dense = Fraction(layers * shape.dense_layer_params + embedding, layout.tp)
    experts = layers * shape.experts * shape.expert_params if shape.moe else 0
    return dense, Fraction(experts, layout.tp * layout.ep)


def layer_activation_bytes(shape: Transformer, layout: Parallelism, microbatch: int) -> Fraction:
    """Bytes one layer keeps for backward for a micro-batch of ``microbatch`` sequences
    (Korthikanti et al. 2022, Table 2; module docstring)."""
    sbh = shape.sequence * microbatch * shape.hidden
    t = layout.tp
    if layout.recompute:
        return Fraction(RECOMPUTED_PER_ELEMENT * sbh, t if layout.sequence_parallel else 1)
    scores = (Fraction(0) if layout.flash_attention else
              Fraction(ACTIVATION_PER_SCORE * shape.heads * shape.sequence, shape.hidden))
    if layout.sequence_parallel:
        return sbh * (ACTIVATION_PER_ELEMENT + scores) / t
    split = ACTIVATION_PER_ELEMENT - ACTIVATION_REPLICATED
    return sbh * (ACTIVATION_REPLICATED + Fraction(split, t) + scores / t)


def in_flight(layout: Parallelism) -> Fraction:
    """Micro-batches whose activations stage 0 holds at once, in units of its whole share of
    layers. 1F1B: its pp − 1 warm-up forwards and one more, at most all micro-batches (min(pp,
    m); Narayanan et al. 2021 §2.2.1). Interleaved with c chunks of 1/c of the layers each:
    Megatron-Core's 2·(pp − 1) + (c − 1)·pp warm-up chunk forwards and one more
    (``get_pp_rank_microbatches``, megatron/core/pipeline_parallel/schedules.py), over c: for
    m ≥ pp that is pp·(1 + (pp − 1)/(pp·c)), Korthikanti et al. 2022 §4.2.3's factor."""
    if layout.pp == 1:
        return Fraction(1)
    if layout.schedule is Schedule.INTERLEAVED:
        chunks = layout.chunks
        warmup = 2 * (layout.pp - 1) + (chunks - 1) * layout.pp
        return Fraction(min(warmup + 1, layout.microbatches * chunks), chunks)
    return Fraction(min(layout.pp, layout.microbatches))


def layout_memory(shape: Transformer, layout: Parallelism, *, microbatch: int,
                  optimizer: Optimizer) -> Memory:
    """What one GPU of pipeline stage 0 holds training ``shape`` on ``layout`` with micro-batches
    of ``microbatch`` sequences and ``optimizer`` in mixed precision (module docstring)."""
    dense, experts = stage_parameters(shape, layout)
    expert_dp = layout.dp // layout.ep

    def held(sharded_from: int) -> Fraction:
        """Parameters per GPU of a quantity ZeRO shards from stage ``sharded_from`` on."""
        if layout.zero < sharded_from:
            return dense + experts
        return dense / layout.dp + experts / expert_dp

    activations = (layer_activation_bytes(shape, layout, microbatch) * stage_layers(shape, layout)
                   * in_flight(layout))
    return Memory(parameters=math.ceil(WEIGHT_BYTES * held(3)),
                  gradients=math.ceil(GRADIENT_BYTES * held(2)),
                  optimizer_states=math.ceil(optimizer_state_bytes(optimizer) * held(1)),
                  activations=math.ceil(activations))


def fits(memory: Memory, capacity: int | None) -> bool:
    """Whether ``memory`` fits a GPU of ``capacity`` bytes (None: unknown, not checked)."""
    return capacity is None or memory.total <= capacity
