"""A neural network as data-parallel training sees it: its parameters in registration order,
grouped in layers, each layer with the forward FLOPs it costs per sample.

Only what gradient synchronisation needs is kept: a parameter's shape (its gradient has the same
one), the order PyTorch's ``Module.parameters()`` yields them in (DDP buckets them in reverse of
it, and backward produces them roughly in that reverse order), and a layer's compute, from which
its backward time follows (backward ≈ 2 × forward: one matrix product for the gradient of the
input and one for the gradient of the weights; Kaplan et al. 2020, "Scaling Laws for Neural
Language Models", §2.1, C ≈ 6N per token = 2N forward + 4N backward).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.training.transformer import Transformer

BACKWARD_PER_FORWARD = 2.0
"""Backward FLOPs per forward FLOP (Kaplan et al. 2020, §2.1: 4N of the 6N per token)."""


@dataclass(frozen=True)
class Tensor:
    """A parameter (and so its gradient): its qualified name, as ``named_parameters()`` gives
    it, and its shape."""

    name: str
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        """Elements of the parameter."""
        return math.prod(self.shape)


@dataclass(frozen=True)
class Layer:
    """A leaf module: its parameters in registration order and the forward FLOPs it costs per
    sample (one image, or one sequence), or its measured forward and backward times per step
    (``forward_s``, ``backward_s``: a user's own profile, used as given)."""

    name: str
    tensors: tuple[Tensor, ...]
    flops: float
    forward_s: float | None = None
    backward_s: float | None = None

    @property
    def numel(self) -> int:
        """Parameters of the layer."""
        return sum(tensor.numel for tensor in self.tensors)


@dataclass(frozen=True)
class Network:
    """A model: its layers in registration (forward) order, what one sample is, and where its
    shapes come from; a decoder transformer also gives its ``shape``, which model parallelism
    (tensor, pipeline, expert) needs to split it (None: data parallelism only)."""

    name: str
    layers: tuple[Layer, ...]
    sample: str
    source: str
    shape: Transformer | None = None

    @property
    def tensors(self) -> tuple[Tensor, ...]:
        """Every parameter in registration order (``Module.parameters()``)."""
        return tuple(tensor for layer in self.layers for tensor in layer.tensors)

    @property
    def numel(self) -> int:
        """Parameters of the model."""
        return sum(layer.numel for layer in self.layers)

    @property
    def flops(self) -> float:
        """Forward FLOPs per sample."""
        return sum(layer.flops for layer in self.layers)
