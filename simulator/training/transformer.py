"""A decoder transformer's shape, as model parallelism needs it: what a layer holds and costs, so
that tensor, pipeline, data and expert parallelism can split it and size their traffic.

The counts follow the published architectures: attention with ``kv_heads`` key/value heads
(grouped-query attention, Ainslie et al. 2023; ``kv_heads = heads`` is multi-head attention),
an MLP of two matrices (GPT) or three (SwiGLU, LLaMA: gate, up, down; Touvron et al. 2023 §2.2),
replaced in a mixture-of-experts layer by ``experts`` MLPs of which each token visits ``top_k``
(Mixtral, Jiang et al. 2024), each behind a router of ``hidden × experts``. FLOPs count 2 per
multiply-add of the matrix products, including attention's two parameterless products at full
(unmasked) length, as :mod:`simulator.training.zoo` counts them.
"""

from __future__ import annotations

from dataclasses import dataclass

BF16 = 2
"""Bytes of a bf16/fp16 element: activations and the tensors model parallelism moves (Megatron
trains in bf16 with fp32 main parameters; Narayanan et al. 2021 §5)."""


@dataclass(frozen=True)
class Transformer:
    """The shape of a decoder-only transformer: ``layers`` blocks of width ``hidden`` with
    ``heads`` query heads (``kv_heads`` key/value heads), an MLP of inner width ``ffn`` (three
    matrices when ``gated``), ``experts`` MLPs per block of which ``top_k`` run per token (1 and
    1: a dense model), linear layers with biases when ``bias``, a ``vocab``-row embedding
    (shared with the output projection when ``tied``), trained on sequences of ``sequence``
    tokens; ``positions`` rows of learned position embeddings (GPT's; 0 with rotary positions,
    which have no parameters)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    sequence: int
    gated: bool = True
    bias: bool = False
    tied: bool = False
    experts: int = 1
    top_k: int = 1
    positions: int = 0

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden // self.heads

    @property
    def moe(self) -> bool:
        """Whether the MLPs are a mixture of experts."""
        return self.experts > 1

    @property
    def attention_params(self) -> int:
        """One block's attention parameters: Q and O (hidden²), K and V (hidden × kv width),
        their biases when ``bias``, and the block's two norms (a weight each, and a bias with
        ``bias``: LayerNorm, else RMSNorm)."""
        kv = self.kv_heads * self.head_dim
        weights = 2 * self.hidden * self.hidden + 2 * self.hidden * kv
        biases = 2 * self.hidden + 2 * kv if self.bias else 0
        norms = 2 * self.hidden * (2 if self.bias else 1)
        return weights + biases + norms

    @property
    def expert_params(self) -> int:
        """One MLP's parameters (one expert's, in a mixture): 3 or 2 matrices, biases with
        ``bias``."""
        matrices = 3 if self.gated else 2
        biases = (self.ffn * (matrices - 1) + self.hidden) if self.bias else 0
        return matrices * self.hidden * self.ffn + biases

    @property
    def router_params(self) -> int:
        """The router of a mixture-of-experts block (hidden × experts; none when dense)."""
        return self.hidden * self.experts if self.moe else 0

    @property
    def layer_params(self) -> int:
        """One block's parameters, every expert counted."""
        return self.attention_params + self.router_params + self.experts * self.expert_params

    @property
    def embedding_params(self) -> int:
        """The token embedding, the learned position embeddings (if any), the final norm, and the
        output projection unless tied."""
        final_norm = self.hidden * (2 if self.bias else 1)
        tables = self.vocab * (1 if self.tied else 2) + self.positions
        return tables * self.hidden + final_norm

    @property
    def params(self) -> int:
        """Every parameter of the model."""
        return self.layers * self.layer_params + self.embedding_params

    @property
    def dense_layer_params(self) -> int:
        """One block's parameters outside its experts (replicated across expert parallelism)."""
        return self.attention_params + self.router_params + (
            0 if self.moe else self.expert_params)

    @property
    def layer_flops(self) -> float:
        """Forward FLOPs of one block per token: its matrix products (the experts a token
        visits only) and attention's scores and context products at full length."""
        kv = self.kv_heads * self.head_dim
        projections = 2.0 * (2 * self.hidden * self.hidden + 2 * self.hidden * kv)
        scores = 2.0 * 2.0 * self.sequence * self.hidden
        mlp = 2.0 * (3 if self.gated else 2) * self.hidden * self.ffn * self.top_k
        router = 2.0 * self.hidden * self.experts if self.moe else 0.0
        return projections + scores + mlp + router

    @property
    def head_flops(self) -> float:
        """Forward FLOPs of the output projection per token."""
        return 2.0 * self.hidden * self.vocab

    @property
    def flops_per_token(self) -> float:
        """Forward FLOPs per token of the whole model."""
        return self.layers * self.layer_flops + self.head_flops

    def activation_bytes(self, tokens: int) -> int:
        """Bytes of one block's output activation for ``tokens`` tokens in bf16: what a
        pipeline stage sends the next, and what tensor parallelism's allreduce sums
        (``batch · seq · hidden`` elements; Narayanan et al. 2021 §3.2 and §4.1)."""
        return tokens * self.hidden * BF16
