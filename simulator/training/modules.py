"""Leaf ``torch.nn`` modules as :class:`~simulator.training.network.Layer` s: each one's parameters
in registration order (their names and shapes as ``named_parameters()`` gives them) and its
forward FLOPs, shared by the model presets (:mod:`simulator.training.zoo`,
:mod:`simulator.training.zoo_llm`).

FLOPs count 2 per multiply-add of the matrix products and convolutions, as
``torch.utils.flop_counter.FlopCounterMode`` does; normalisations, activations and embedding
lookups count 0 (a few FLOPs per element, under 1 % of any preset).
"""

from __future__ import annotations

from simulator.training.network import Layer, Tensor


def linear(name: str, d_in: int, d_out: int, tokens: float, *, bias: bool = True,
           extra_flops: float = 0.0) -> Layer:
    """``torch.nn.Linear(d_in, d_out)``: weight (d_out, d_in) then bias (d_out,); 2·d_in·d_out FLOPs
    per token, ``extra_flops`` (parameterless work folded in) on top. ``tokens`` per sample may
    be a fraction: an expert of a mixture sees top_k/experts of them on average."""
    tensors = [Tensor(f"{name}.weight", (d_out, d_in))]
    if bias:
        tensors.append(Tensor(f"{name}.bias", (d_out,)))
    return Layer(name, tuple(tensors), 2.0 * d_in * d_out * tokens + extra_flops)


def conv1d(name: str, d_in: int, d_out: int, tokens: int, *, extra_flops: float = 0.0) -> Layer:
    """Hugging Face's ``Conv1D`` (GPT-2): a linear layer whose weight is stored (d_in, d_out)."""
    tensors = (Tensor(f"{name}.weight", (d_in, d_out)), Tensor(f"{name}.bias", (d_out,)))
    return Layer(name, tensors, 2.0 * d_in * d_out * tokens + extra_flops)


def conv2d(name: str, c_in: int, c_out: int, kernel: int, out_size: int) -> Layer:
    """``torch.nn.Conv2d(c_in, c_out, kernel, bias=False)`` (torchvision's ResNet convolutions have no
    bias) with a square output of ``out_size``²: 2·k²·c_in·c_out FLOPs per output pixel."""
    weight = Tensor(f"{name}.weight", (c_out, c_in, kernel, kernel))
    return Layer(name, (weight,), 2.0 * kernel * kernel * c_in * c_out * out_size * out_size)


def norm(name: str, width: int, *, bias: bool = True) -> Layer:
    """BatchNorm2d, LayerNorm (weight then bias) or RMSNorm (``bias=False``): its affine parameters;
    running statistics are buffers, not parameters. FLOPs counted 0 (module docstring)."""
    tensors = [Tensor(f"{name}.weight", (width,))]
    if bias:
        tensors.append(Tensor(f"{name}.bias", (width,)))
    return Layer(name, tuple(tensors), 0.0)


def embedding(name: str, rows: int, width: int) -> Layer:
    """``torch.nn.Embedding(rows, width)``: a lookup, 0 FLOPs."""
    return Layer(name, (Tensor(f"{name}.weight", (rows, width)),), 0.0)


def tied_head(name: str, width: int, vocab: int, tokens: int) -> Layer:
    """An output projection whose weight is the word embedding's (counted there, so no tensors
    here): only its 2·width·vocab FLOPs per token."""
    return Layer(name, (), 2.0 * width * vocab * tokens)


def attention(sequence: int, width: int, heads: int) -> float:
    """Forward FLOPs of one block's scores and context products: per head two (seq × d_head) by
    (d_head × seq)-sized products of 2·seq²·d_head FLOPs each."""
    if width % heads:
        raise ValueError(f"width {width} is not a multiple of {heads} heads")
    return heads * 2 * (2.0 * sequence * sequence * (width // heads))


def check_sequence(sequence: int, positions: int | None) -> None:
    """A sequence the model can take: at least one token, and no more than its position table."""
    if sequence < 1 or (positions is not None and sequence > positions):
        limit = f"1..{positions}" if positions is not None else ">= 1"
        raise ValueError(f"sequence {sequence} out of range ({limit} tokens)")
