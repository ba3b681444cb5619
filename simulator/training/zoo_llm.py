"""Decoder transformers built from their :class:`~simulator.training.transformer.Transformer`
shape, with the parameter names and registration order of a reference implementation: Hugging
Face's LLaMA and Mixtral (:func:`hf_llama`) or Megatron-Core's ``GPTModel`` (:func:`megatron_gpt`,
also what a user's ``model: {transformer: ...}`` builds), and the presets ``llama2_70b``,
``mixtral_8x7b`` and ``gpt3_175b``.

FLOPs are counted as :mod:`simulator.training.zoo` counts them (2 per multiply-add, attention's
scores and context products at full length on the output projection), so a network's forward
FLOPs per sample are exactly ``shape.flops_per_token × sequence`` and its parameters exactly
``shape.params``. In a mixture of experts every expert's parameters are tensors and a token runs
``top_k`` of them: each expert's matrices carry top_k/experts of the tokens' FLOPs (balanced
routing), so the layer costs the active FLOPs.
"""

from __future__ import annotations

from simulator.training.modules import attention, check_sequence, embedding, linear, norm, tied_head
from simulator.training.network import Layer, Network
from simulator.training.transformer import Transformer


def _sample(shape: Transformer) -> str:
    """What one sample of a language model is."""
    return f"one sequence of {shape.sequence} tokens"


def _attention_flops(shape: Transformer) -> float:
    """The parameterless score and context products of one block per sequence."""
    return attention(shape.sequence, shape.hidden, shape.heads)


def _expert_tokens(shape: Transformer) -> float:
    """Tokens per sequence one expert processes under balanced routing (all of them when dense)."""
    return shape.sequence * shape.top_k / shape.experts


# --- Hugging Face LLaMA / Mixtral -------------------------------------------------------------------


def _llama_mlp(name: str, shape: Transformer) -> list[Layer]:
    """``LlamaMLP`` (gate, up, down projections) or, with experts, transformers 4.x's
    ``MixtralSparseMoeBlock``: the router ``gate`` (hidden → experts, no bias), then each
    ``experts.N`` (``MixtralBlockSparseTop2MLP``: w1 gate, w2 down, w3 up, in that order)."""
    d, ffn, s = shape.hidden, shape.ffn, shape.sequence
    if not shape.moe:
        return [linear(f"{name}.mlp.gate_proj", d, ffn, s, bias=False),
                linear(f"{name}.mlp.up_proj", d, ffn, s, bias=False),
                linear(f"{name}.mlp.down_proj", ffn, d, s, bias=False)]
    moe, tokens = f"{name}.block_sparse_moe", _expert_tokens(shape)
    layers = [linear(f"{moe}.gate", d, shape.experts, s, bias=False)]
    for expert in range(shape.experts):
        prefix = f"{moe}.experts.{expert}"
        layers += [linear(f"{prefix}.w1", d, ffn, tokens, bias=False),
                   linear(f"{prefix}.w2", ffn, d, tokens, bias=False),
                   linear(f"{prefix}.w3", d, ffn, tokens, bias=False)]
    return layers


def _llama_block(name: str, shape: Transformer) -> list[Layer]:
    """``LlamaDecoderLayer`` / ``MixtralDecoderLayer`` in registration order: attention
    projections (K and V ``kv_heads`` heads wide), the MLP or mixture, then the two RMSNorms
    (in forward each runs before its sublayer); no biases."""
    d, s = shape.hidden, shape.sequence
    kv = shape.kv_heads * shape.head_dim
    attn = f"{name}.self_attn"
    return [
        linear(f"{attn}.q_proj", d, d, s, bias=False),
        linear(f"{attn}.k_proj", d, kv, s, bias=False),
        linear(f"{attn}.v_proj", d, kv, s, bias=False),
        linear(f"{attn}.o_proj", d, d, s, bias=False, extra_flops=_attention_flops(shape)),
        *_llama_mlp(name, shape),
        norm(f"{name}.input_layernorm", d, bias=False),
        norm(f"{name}.post_attention_layernorm", d, bias=False),
    ]


def hf_llama(name: str, shape: Transformer, *, source: str) -> Network:
    """A LLaMA-family model as Hugging Face's ``LlamaForCausalLM`` (or, with experts,
    ``MixtralForCausalLM`` of transformers 4.x, the names of Mixtral's released checkpoint)
    registers it: ``model.embed_tokens``, the blocks, ``model.norm``, ``lm_head`` (untied).
    Raises ValueError for a shape the family cannot have (biases, tied or learned-position
    embeddings, an ungated MLP)."""
    if shape.bias or shape.tied or shape.positions or not shape.gated:
        raise ValueError(f"{name}: a LLaMA-family model has a gated MLP and no biases, tied or "
                         f"position embeddings")
    d = shape.hidden
    layers = [embedding("model.embed_tokens", shape.vocab, d)]
    for index in range(shape.layers):
        layers += _llama_block(f"model.layers.{index}", shape)
    layers += [norm("model.norm", d, bias=False),
               linear("lm_head", d, shape.vocab, shape.sequence, bias=False)]
    return Network(name, tuple(layers), sample=_sample(shape), source=source, shape=shape)


# --- Megatron-Core GPTModel -------------------------------------------------------------------------


def _megatron_mlp(name: str, shape: Transformer) -> list[Layer]:
    """Megatron-Core's ``MLP`` (``linear_fc1``, 2·ffn rows when gated as SwiGLU fuses gate and up,
    then ``linear_fc2``; megatron/core/transformer/mlp.py) or its ``MoELayer``: the router
    (``TopKRouter.weight``, experts × hidden, registered before the experts, moe_layer.py) and
    ``SequentialMLP``'s ``experts.local_experts.N`` (experts.py). The router's bias, which
    Megatron adds with ``add_bias_linear``, is left out, as :class:`Transformer` counts none."""
    d, ffn, bias = shape.hidden, shape.ffn, shape.bias
    fc1 = ffn * (2 if shape.gated else 1)
    if not shape.moe:
        s = shape.sequence
        return [linear(f"{name}.mlp.linear_fc1", d, fc1, s, bias=bias),
                linear(f"{name}.mlp.linear_fc2", ffn, d, s, bias=bias)]
    tokens = _expert_tokens(shape)
    layers = [linear(f"{name}.mlp.router", d, shape.experts, shape.sequence, bias=False)]
    for expert in range(shape.experts):
        prefix = f"{name}.mlp.experts.local_experts.{expert}"
        layers += [linear(f"{prefix}.linear_fc1", d, fc1, tokens, bias=bias),
                   linear(f"{prefix}.linear_fc2", ffn, d, tokens, bias=bias)]
    return layers


def _megatron_block(name: str, shape: Transformer) -> list[Layer]:
    """Megatron-Core's ``TransformerLayer`` of the local spec (``get_gpt_layer_local_submodules``
    in megatron/core/models/gpt/gpt_layer_specs.py) in registration order: ``input_layernorm``,
    ``self_attention`` (whose ``linear_proj`` the base ``Attention`` registers before
    ``SelfAttention`` adds ``linear_qkv``, of (heads + 2·kv_heads)·head_dim rows; attention.py),
    ``pre_mlp_layernorm``, ``mlp``. LayerNorm (weight, bias) with biases, else RMSNorm."""
    d, s, bias = shape.hidden, shape.sequence, shape.bias
    qkv = d + 2 * shape.kv_heads * shape.head_dim
    attn = f"{name}.self_attention"
    return [
        norm(f"{name}.input_layernorm", d, bias=bias),
        linear(f"{attn}.linear_proj", d, d, s, bias=bias, extra_flops=_attention_flops(shape)),
        linear(f"{attn}.linear_qkv", d, qkv, s, bias=bias),
        norm(f"{name}.pre_mlp_layernorm", d, bias=bias),
        *_megatron_mlp(name, shape),
    ]


def megatron_gpt(name: str, shape: Transformer, *, source: str) -> Network:
    """Any decoder shape as Megatron-Core's ``GPTModel`` registers it (gpt_model.py):
    ``embedding.word_embeddings`` and, with learned positions, ``embedding.position_embeddings``
    (``LanguageModelEmbedding``), ``decoder.layers.N``, ``decoder.final_layernorm``
    (``TransformerBlock``), then ``output_layer``: without a weight of its own when ``tied``
    (``share_embeddings_and_output_weights`` skips its allocation on the first stage), so a
    parameterless layer carrying its FLOPs."""
    d = shape.hidden
    layers = [embedding("embedding.word_embeddings", shape.vocab, d)]
    if shape.positions:
        layers.append(embedding("embedding.position_embeddings", shape.positions, d))
    for index in range(shape.layers):
        layers += _megatron_block(f"decoder.layers.{index}", shape)
    layers.append(norm("decoder.final_layernorm", d, bias=shape.bias))
    if shape.tied:
        layers.append(tied_head("output_layer", d, shape.vocab, shape.sequence))
    else:
        layers.append(linear("output_layer", d, shape.vocab, shape.sequence, bias=False))
    return Network(name, tuple(layers), sample=_sample(shape), source=source, shape=shape)


# --- presets ----------------------------------------------------------------------------------------

LLAMA2_70B_CONTEXT = 4096
"""Llama 2's context length, 4k (Touvron et al. 2023b, Table 1; ``max_position_embeddings`` of
meta-llama/Llama-2-70b-hf); rotary positions have no table, so a default, not a limit."""


def llama2_70b(sequence: int = LLAMA2_70B_CONTEXT) -> Network:
    """Llama 2 70B (Touvron et al. 2023b, "Llama 2: Open Foundation and Fine-Tuned Chat Models",
    Table 1: grouped-query attention) as Hugging Face's ``LlamaForCausalLM`` registers it with
    the config.json of meta-llama/Llama-2-70b-hf: 80 layers, hidden 8192, 64 heads, 8 key/value
    heads, SwiGLU of 28672 (Meta's reference llama/model.py: int(2·4·8192/3) × ffn_dim_multiplier
    1.3 rounded up to multiple_of 4096), vocabulary 32000; 68,976,648,192 parameters."""
    check_sequence(sequence, None)
    shape = Transformer(layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, vocab=32000,
                        sequence=sequence)
    return hf_llama("llama2_70b", shape,
                    source="Touvron et al. 2023b, Table 1; transformers LlamaForCausalLM "
                           "(meta-llama/Llama-2-70b-hf config)")


MIXTRAL_SEQUENCE = 4096
"""Training sequence of Megatron-LM's Mixtral 8x7B example (examples/mixtral/
train_mixtral_8x7b_distributed.sh:30, ``--seq-length 4096``); the model takes up to 32,768
(Jiang et al. 2024, Table 1, ``context_len``), rotary, so no limit here."""


def mixtral_8x7b(sequence: int = MIXTRAL_SEQUENCE) -> Network:
    """Mixtral 8x7B (Jiang et al. 2024, "Mixtral of Experts", Table 1: dim 4096, 32 layers, 32
    heads of 128, 8 key/value heads, hidden_dim 14336, 8 experts, top 2, vocabulary 32000; the
    same in ``MixtralConfig`` of mistralai/Mixtral-8x7B-v0.1) as transformers 4.x's
    ``MixtralForCausalLM`` registers it (router ``block_sparse_moe.gate``, experts
    ``block_sparse_moe.experts.N.w1/w2/w3``): 46,702,792,704 parameters, each token running 2 of
    the 8 experts of every layer."""
    check_sequence(sequence, None)
    shape = Transformer(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, vocab=32000,
                        sequence=sequence, experts=8, top_k=2)
    return hf_llama("mixtral_8x7b", shape,
                    source="Jiang et al. 2024, Table 1; transformers 4.x MixtralForCausalLM")


GPT3_CONTEXT = 2048
"""GPT-3's context, n_ctx = 2048 tokens (Brown et al. 2020, Table 2.1 and §2.1): also its learned
position table's rows."""
GPT3_VOCAB = 51200
"""The GPT-2 BPE vocabulary of 50,257 (Brown et al. 2020, §2.1: GPT-2's model and tokenizer) as
Megatron-LM pads it, to a multiple of ``make_vocab_size_divisible_by`` 128 × TP 8 = 1024
(megatron/training/vocab_utils.py:58; arguments.py ``--make-vocab-size-divisible-by``
default 128): the V = 51,200 of Narayanan et al. 2021's FLOP formula (§5.1) and Table 1.
Chosen because this preset exists for that comparison, and because tensor parallelism splits
the embedding's rows, which 50,257 (odd) cannot be."""


def gpt3_175b(sequence: int = GPT3_CONTEXT) -> Network:
    """GPT-3 175B (Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1: 96
    layers, d_model 12288, 96 heads of 128, 4·d feed-forward; GPT-2's architecture, §2.1:
    biases, LayerNorm, learned positions, tied embedding) as Megatron-Core's ``GPTModel``
    registers it: 174,615,846,912 parameters (the paper's "175.0B" rounds its own count; the
    alternating locally banded sparse attention of §2.1 has no parameters and is costed
    dense here, as Megatron-LM runs it)."""
    check_sequence(sequence, GPT3_CONTEXT)
    shape = Transformer(layers=96, hidden=12288, heads=96, kv_heads=96, ffn=4 * 12288,
                        vocab=GPT3_VOCAB, sequence=sequence, gated=False, bias=True, tied=True,
                        positions=GPT3_CONTEXT)
    return megatron_gpt("gpt3_175b", shape,
                        source="Brown et al. 2020, Table 2.1; Megatron-Core GPTModel "
                               "(vocabulary padded to 51,200)")


# --- a user's shape ---------------------------------------------------------------------------------


def shape_problems(shape: Transformer) -> list[tuple[str, str]]:
    """What makes ``shape`` no transformer, as (field, expected) pairs (empty: it is one):
    heads that do not split the width, key/value heads that do not group the query heads
    evenly, more experts per token than there are, a sequence longer than a learned position
    table."""
    problems = []
    if shape.hidden % shape.heads:
        problems.append(("heads", f"expected a divisor of hidden {shape.hidden}, got {shape.heads}"))
    if shape.heads % shape.kv_heads:
        problems.append(("kv_heads", f"expected a divisor of heads {shape.heads} (query heads share "
                                     f"each key/value head evenly), got {shape.kv_heads}"))
    if shape.top_k > shape.experts:
        problems.append(("top_k", f"expected at most experts {shape.experts}, got {shape.top_k}"))
    if shape.positions and shape.sequence > shape.positions:
        problems.append(("sequence", f"expected at most positions {shape.positions} (the rows of "
                                     f"the learned position table), got {shape.sequence}"))
    return problems
