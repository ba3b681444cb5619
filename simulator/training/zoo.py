"""Published networks as data-parallel training sees them: each preset builds its parameters' names,
shapes and registration order from the paper's hyperparameters, following the reference PyTorch
implementation named in its docstring (so a preset's ``tensors`` equal that implementation's
``named_parameters()``), with each layer's forward FLOPs per sample.

FLOPs count 2 per multiply-add of the matrix products and convolutions, as
``torch.utils.flop_counter.FlopCounterMode`` does; normalisations, activations, softmax, bias and
residual additions (a few FLOPs per element, under 1 % of any preset here) count 0, and so do
embedding lookups. Attention's two parameterless products (scores Q·Kᵀ and context P·V:
2·2·seq²·d per block, over all heads, full and not halved by a causal mask, as an unfused matmul or
``scaled_dot_product_attention`` costs in FlopCounterMode) go to the block's attention output
projection.

>>> [round(NETWORKS[name]().numel / 1e6, 1) for name in network_names()]
[25.6, 336.2, 1557.6, 6738.4, 68976.6, 174615.8, 46702.8]
"""

from __future__ import annotations

from collections.abc import Callable

from simulator.training.modules import (
    attention,
    check_sequence,
    conv1d,
    conv2d,
    embedding,
    linear,
    norm,
    tied_head,
)
from simulator.training.network import Layer, Network, Tensor
from simulator.training.transformer import Transformer
from simulator.training.zoo_llm import gpt3_175b, hf_llama, llama2_70b, mixtral_8x7b

# --- ResNet-50 --------------------------------------------------------------------------------------

IMAGE = 224
"""Input side in pixels: the 224×224 crop of He et al. 2016, §3.4."""
IMAGENET_CLASSES = 1000
"""Outputs of ``fc``: the 1000 classes of ImageNet 2012 (He et al. 2016, §4.1)."""
RESNET_STEM = 64
"""Channels of ``conv1``, 7×7 stride 2, then a 3×3 stride-2 max pool (He et al. 2016, Table 1)."""
RESNET50_STAGES = ((3, 64), (4, 128), (6, 256), (3, 512))
"""Bottleneck blocks and their width per stage, conv2_x..conv5_x (He et al. 2016, Table 1, 50-layer)."""
BOTTLENECK_EXPANSION = 4
"""A bottleneck's 1×1, 3×3, 1×1 convolutions end 4× wider than its width (He et al. 2016, §4.1,
Fig. 5; ``Bottleneck.expansion`` in torchvision)."""


def _out(size: int, kernel: int, stride: int, padding: int) -> int:
    """Output side of a convolution or pooling window."""
    return (size + 2 * padding - kernel) // stride + 1


def _bottleneck(name: str, c_in: int, width: int, stride: int, size: int) -> tuple[list[Layer], int]:
    """torchvision's ``Bottleneck`` (ResNet v1.5: the stride on the 3×3 ``conv2``, not on ``conv1`` as
    in the paper: the same parameters, more FLOPs) and its output side; registration order conv1,
    bn1, conv2, bn2, conv3, bn3, then the projection shortcut ``downsample`` (1×1 conv, BN) when the
    shape changes."""
    c_out = width * BOTTLENECK_EXPANSION
    out = _out(size, 3, stride, 1)
    layers = [
        conv2d(f"{name}.conv1", c_in, width, 1, size), norm(f"{name}.bn1", width),
        conv2d(f"{name}.conv2", width, width, 3, out), norm(f"{name}.bn2", width),
        conv2d(f"{name}.conv3", width, c_out, 1, out), norm(f"{name}.bn3", c_out),
    ]
    if stride != 1 or c_in != c_out:
        layers += [conv2d(f"{name}.downsample.0", c_in, c_out, 1, out), norm(f"{name}.downsample.1", c_out)]
    return layers, out


def resnet50() -> Network:
    """ResNet-50 (He et al. 2016, "Deep Residual Learning for Image Recognition", Table 1) as
    torchvision's ``resnet50()`` registers it: 25,557,032 parameters, 8.18 GFLOPs per image."""
    size = _out(IMAGE, 7, 2, 3)
    layers = [conv2d("conv1", 3, RESNET_STEM, 7, size), norm("bn1", RESNET_STEM)]
    size = _out(size, 3, 2, 1)
    channels = RESNET_STEM
    for stage, (blocks, width) in enumerate(RESNET50_STAGES, start=1):
        for block in range(blocks):
            stride = 2 if stage > 1 and block == 0 else 1
            block_layers, size = _bottleneck(f"layer{stage}.{block}", channels, width, stride, size)
            layers += block_layers
            channels = width * BOTTLENECK_EXPANSION
    layers.append(linear("fc", channels, IMAGENET_CLASSES, tokens=1))
    return Network("resnet50", tuple(layers), sample=f"one {IMAGE}×{IMAGE} RGB image",
                   source="He et al. 2016, Table 1; torchvision.models.resnet50 (v1.5)")


# --- BERT-large -------------------------------------------------------------------------------------

BERT_LAYERS, BERT_WIDTH, BERT_HEADS = 24, 1024, 16
"""BERT-large: L=24, H=1024, A=16 (Devlin et al. 2019, §3)."""
BERT_FFN = 4 * BERT_WIDTH
"""Feed-forward size 4H (Devlin et al. 2019, §3, Model Architecture, footnote)."""
BERT_VOCAB = 30522
"""Entries of the released WordPiece vocabulary (the paper's "30,000 token vocabulary", §3; its
vocab.txt, and ``BertConfig.vocab_size``)."""
BERT_POSITIONS = 512
"""Position embeddings: pre-training ends on sequences of 512 tokens (Devlin et al. 2019, Appendix
A.2; ``BertConfig.max_position_embeddings``)."""
BERT_TOKEN_TYPES = 2
"""Segment embeddings for sentences A and B (Devlin et al. 2019, §3, Fig. 2)."""
NSP_CLASSES = 2
"""Next-sentence prediction: IsNext or NotNext (Devlin et al. 2019, §3.1, Task #2)."""


def _bert_block(name: str, sequence: int) -> list[Layer]:
    """``BertLayer``: self-attention (query, key, value, output dense, LayerNorm), then the
    feed-forward (intermediate dense, output dense, LayerNorm)."""
    d = BERT_WIDTH
    return [
        linear(f"{name}.attention.self.query", d, d, sequence),
        linear(f"{name}.attention.self.key", d, d, sequence),
        linear(f"{name}.attention.self.value", d, d, sequence),
        linear(f"{name}.attention.output.dense", d, d, sequence,
               extra_flops=attention(sequence, d, BERT_HEADS)),
        norm(f"{name}.attention.output.LayerNorm", d),
        linear(f"{name}.intermediate.dense", d, BERT_FFN, sequence),
        linear(f"{name}.output.dense", BERT_FFN, d, sequence),
        norm(f"{name}.output.LayerNorm", d),
    ]


def bert_large(sequence: int = BERT_POSITIONS) -> Network:
    """BERT-large (Devlin et al. 2019, "BERT: Pre-training of Deep Bidirectional Transformers for
    Language Understanding") as Hugging Face's ``BertForPreTraining`` registers it: 336,226,108
    parameters. The pre-training model, since pre-training is what data-parallel BERT training
    runs: ``BertModel`` (335,141,888) plus the masked-LM transform and output bias and the
    next-sentence classifier. The MLM decoder's weight is the word embeddings' (and its bias is
    ``cls.predictions.bias``), so the decoder is a parameterless layer with its FLOPs, over every
    position as Hugging Face computes it. The pooler and the next-sentence classifier see one
    token (``[CLS]``)."""
    check_sequence(sequence, BERT_POSITIONS)
    d = BERT_WIDTH
    layers = [
        embedding("bert.embeddings.word_embeddings", BERT_VOCAB, d),
        embedding("bert.embeddings.position_embeddings", BERT_POSITIONS, d),
        embedding("bert.embeddings.token_type_embeddings", BERT_TOKEN_TYPES, d),
        norm("bert.embeddings.LayerNorm", d),
    ]
    for index in range(BERT_LAYERS):
        layers += _bert_block(f"bert.encoder.layer.{index}", sequence)
    layers += [
        linear("bert.pooler.dense", d, d, tokens=1),
        Layer("cls.predictions", (Tensor("cls.predictions.bias", (BERT_VOCAB,)),), 0.0),
        linear("cls.predictions.transform.dense", d, d, sequence),
        norm("cls.predictions.transform.LayerNorm", d),
        tied_head("cls.predictions.decoder", d, BERT_VOCAB, sequence),
        linear("cls.seq_relationship", d, NSP_CLASSES, tokens=1),
    ]
    return Network("bert_large", tuple(layers), sample=f"one sequence of {sequence} tokens",
                   source="Devlin et al. 2019, §3; transformers BertForPreTraining")


# --- GPT-2 XL ---------------------------------------------------------------------------------------

GPT2_LAYERS, GPT2_WIDTH = 48, 1600
"""The largest GPT-2: 48 layers, d_model 1600 (Radford et al. 2019, Table 2)."""
GPT2_HEADS = 25
"""Attention heads of the released 1558M model (its hparams.json ``n_head``; ``GPT2Config`` of
gpt2-xl)."""
GPT2_FFN = 4 * GPT2_WIDTH
"""Feed-forward inner size 4·d, as in GPT (Radford et al. 2018, §4.1: 3072 for d=768), which GPT-2
follows (Radford et al. 2019, §2.3)."""
GPT2_VOCAB = 50257
"""Byte-level BPE vocabulary of 50,257 (Radford et al. 2019, §2.3)."""
GPT2_CONTEXT = 1024
"""Context of 1024 tokens (Radford et al. 2019, §2.3)."""


def _gpt2_block(name: str, sequence: int) -> list[Layer]:
    """``GPT2Block``: ln_1, attention (c_attn: Q, K, V in one Conv1D; c_proj), ln_2, MLP (c_fc,
    c_proj)."""
    d = GPT2_WIDTH
    return [
        norm(f"{name}.ln_1", d),
        conv1d(f"{name}.attn.c_attn", d, 3 * d, sequence),
        conv1d(f"{name}.attn.c_proj", d, d, sequence, extra_flops=attention(sequence, d, GPT2_HEADS)),
        norm(f"{name}.ln_2", d),
        conv1d(f"{name}.mlp.c_fc", d, GPT2_FFN, sequence),
        conv1d(f"{name}.mlp.c_proj", GPT2_FFN, d, sequence),
    ]


def gpt2_xl(sequence: int = GPT2_CONTEXT) -> Network:
    """GPT-2 XL (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners") as
    Hugging Face's ``GPT2LMHeadModel`` registers it: 1,557,611,200 parameters. ``lm_head`` is tied
    to ``transformer.wte``, so it is a parameterless layer at the end (it runs last in forward)
    carrying its FLOPs."""
    check_sequence(sequence, GPT2_CONTEXT)
    d = GPT2_WIDTH
    layers = [embedding("transformer.wte", GPT2_VOCAB, d), embedding("transformer.wpe", GPT2_CONTEXT, d)]
    for index in range(GPT2_LAYERS):
        layers += _gpt2_block(f"transformer.h.{index}", sequence)
    layers += [norm("transformer.ln_f", d), tied_head("lm_head", d, GPT2_VOCAB, sequence)]
    shape = Transformer(layers=GPT2_LAYERS, hidden=d, heads=GPT2_HEADS, kv_heads=GPT2_HEADS,
                        ffn=GPT2_FFN, vocab=GPT2_VOCAB, sequence=sequence, gated=False,
                        bias=True, tied=True, positions=GPT2_CONTEXT)
    return Network("gpt2_xl", tuple(layers), sample=f"one sequence of {sequence} tokens",
                   source="Radford et al. 2019, Table 2; transformers GPT2LMHeadModel", shape=shape)


# --- LLaMA-7B ---------------------------------------------------------------------------------------

LLAMA_LAYERS, LLAMA_WIDTH, LLAMA_HEADS = 32, 4096, 32
"""LLaMA 6.7B: 32 layers, dimension 4096, 32 heads (Touvron et al. 2023, Table 2)."""
LLAMA_FFN_MULTIPLE = 256
"""The SwiGLU hidden size, 2/3·4d (Touvron et al. 2023, §2.2), rounded up to a multiple of 256
(``ModelArgs.multiple_of`` and ``FeedForward`` in Meta's reference llama/model.py)."""
LLAMA_VOCAB = 32000
"""SentencePiece BPE vocabulary of the released tokenizer (Touvron et al. 2023, §2.1;
``LlamaConfig.vocab_size``)."""
LLAMA_CONTEXT = 2048
"""Training context (``max_seq_len`` of Meta's reference model, ``max_position_embeddings`` of the
LLaMA-1 configs); rotary positions have no table, so this is the default, not a limit."""


def llama_ffn(width: int) -> int:
    """SwiGLU hidden size as Meta's reference computes it: int(2·4d/3) rounded up to a multiple of
    256 (11008 for d=4096).

    >>> llama_ffn(4096)
    11008
    """
    hidden = int(2 * (4 * width) / 3)
    return LLAMA_FFN_MULTIPLE * -(-hidden // LLAMA_FFN_MULTIPLE)


def llama_7b(sequence: int = LLAMA_CONTEXT) -> Network:
    """LLaMA-7B (Touvron et al. 2023, "LLaMA: Open and Efficient Foundation Language Models") as
    Hugging Face's ``LlamaForCausalLM`` registers it (:func:`~simulator.training.zoo_llm.hf_llama`):
    6,738,415,616 parameters, ``lm_head`` its own (untied) weight."""
    check_sequence(sequence, None)
    shape = Transformer(layers=LLAMA_LAYERS, hidden=LLAMA_WIDTH, heads=LLAMA_HEADS,
                        kv_heads=LLAMA_HEADS, ffn=llama_ffn(LLAMA_WIDTH), vocab=LLAMA_VOCAB,
                        sequence=sequence)
    return hf_llama("llama_7b", shape,
                    source="Touvron et al. 2023, Table 2; transformers LlamaForCausalLM")


# --- registry ---------------------------------------------------------------------------------------

NETWORKS: dict[str, Callable[..., Network]] = {
    "resnet50": resnet50,
    "bert_large": bert_large,
    "gpt2_xl": gpt2_xl,
    "llama_7b": llama_7b,
    "llama2_70b": llama2_70b,
    "gpt3_175b": gpt3_175b,
    "mixtral_8x7b": mixtral_8x7b,
}
"""The presets by name; the language models take ``sequence`` (tokens per sample)."""


def network_names() -> tuple[str, ...]:
    """Names of the presets, in registry order."""
    return tuple(NETWORKS)
