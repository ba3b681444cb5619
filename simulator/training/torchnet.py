"""A real ``torch.nn.Module`` as a :class:`Network`: its parameters as ``named_parameters()`` gives
them, grouped by the module that owns each, with forward FLOPs measured by torch's own counter or
estimated from the parameter count. torch is an optional dependency: it is imported only when a
module is converted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from simulator.training.network import Layer, Network, Tensor

if TYPE_CHECKING:
    import torch
    from torch.utils.flop_counter import FlopCounterMode


def network_from_module(module: torch.nn.Module, *, name: str, sample_input: object = None,
                        source: str = "") -> Network:
    """The Network of ``module``: one layer per module owning parameters directly
    (``named_parameters(recurse=False)``), in ``named_modules()`` order, so its tensors are
    ``module.named_parameters()`` exactly: qualified names, registration order, a shared (tied)
    parameter once, under the name of its first owner. A module all of whose parameters an earlier
    one owns (a tied output head) stays, as a parameterless layer, to carry its FLOPs.

    ``sample_input``, the forward's argument (a tensor, or a tuple of positional arguments) for a
    batch of ONE sample, has FLOPs measured (:func:`_measured_flops`; a forward that fails on it is
    a ``ValueError``). Without it a layer costs 2 FLOPs per parameter per sample: exact for a
    linear layer's weight applied once per sample (one multiply-add per weight; a bias counts 2 per
    output where 1 is done), an estimate otherwise (a convolution or a layer applied to many tokens
    costs far more).

    >>> import torch
    >>> net = network_from_module(torch.nn.Linear(3, 2), name="probe")
    >>> [(t.name, t.shape) for t in net.tensors], net.flops
    ([('weight', (2, 3)), ('bias', (2,))], 16.0)
    """
    owners = _owners(module)
    if not any(tensors for _, _, tensors in owners):
        raise ValueError(f"{name}: the module has no parameters, so data-parallel training has no "
                         f"gradients to synchronise")
    if sample_input is None:
        flops = {layer: 2.0 * sum(t.numel for t in tensors) for layer, _, tensors in owners}
        sample = "one sample (FLOPs estimated: 2 per parameter)"
    else:
        flops = _measured_flops(module, owners, sample_input, name)
        sample = f"one sample: input {_describe(sample_input)}"
    layers = tuple(Layer(layer, tensors, flops[layer]) for layer, _, tensors in owners)
    return Network(name, layers, sample=sample, source=source)


def _owners(module: torch.nn.Module) -> list[tuple[str, torch.nn.Module, tuple[Tensor, ...]]]:
    """Each module owning parameters directly: its qualified name, itself, and the parameters
    ``named_parameters()`` attributes to it (those not already yielded through an earlier
    owner) that need gradients: DDP buckets only those (frozen ones have nothing to allreduce)."""
    seen: set[int] = set()
    owners = []
    for prefix, sub in module.named_modules():
        own = list(sub.named_parameters(recurse=False))
        if not own:
            continue
        tensors = []
        for local, parameter in own:
            if id(parameter) not in seen:
                seen.add(id(parameter))
                if not parameter.requires_grad:
                    continue
                tensors.append(Tensor(f"{prefix}.{local}" if prefix else local, tuple(parameter.shape)))
        owners.append((prefix, sub, tuple(tensors)))
    return owners


def _measured_flops(module: torch.nn.Module,
                    owners: list[tuple[str, torch.nn.Module, tuple[Tensor, ...]]],
                    sample_input: object, name: str) -> dict[str, float]:
    """Forward FLOPs of each layer for one sample, counted by
    ``torch.utils.flop_counter.FlopCounterMode`` (matrix products, convolutions and attention,
    2 per multiply-add; elementwise work counts 0) over one forward pass, in eval mode and without
    autograd (the modules' modes are restored after, and BatchNorm's running statistics are not
    touched).

    FlopCounterMode's own per-module counts include each module's children; here the FLOPs are
    attributed by execution instead (:class:`_Attribution`)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    attribution = _Attribution(counter, {id(sub): layer for layer, sub, _ in owners})
    args = sample_input if isinstance(sample_input, tuple) else (sample_input,)
    modes = [(sub, sub.training) for sub in module.modules()]
    hooks = []
    for sub in module.modules():
        hooks += [sub.register_forward_pre_hook(attribution.enter),
                  sub.register_forward_hook(attribution.leave)]
    try:
        module.eval()
        with torch.no_grad(), counter:
            try:
                module(*args)
            except Exception as error:  # a shape or type the module rejects: bad input
                raise ValueError(f"{name}: the forward pass on an input {_describe(sample_input)} "
                                 f"failed: {type(error).__name__}: {error}") from error
            attribution.account()
    finally:
        for hook in hooks:
            hook.remove()
        for sub, training in modes:
            sub.training = training
    return attribution.result(first=owners[0][0])


class _Attribution:
    """Forward hooks on every module that read FlopCounterMode's running total at each module's
    entry and exit, and give the FLOPs counted since to the innermost layer running or, outside
    every layer (an activation module, attention's products in a parent's forward), to the layer
    that last finished: the one whose backward runs right after theirs. FLOPs counted before any
    layer ran go to the first to run (to the first registered if none runs)."""

    def __init__(self, counter: FlopCounterMode, layer_of: dict[int, str]) -> None:
        self.counter = counter
        self.layer_of = layer_of
        self.flops = dict.fromkeys(layer_of.values(), 0.0)
        self.active: list[str] = []  # layers whose forward is running, innermost last
        self.last: str | None = None
        self.pending = 0.0
        self.total = 0

    def account(self) -> None:
        """Give the FLOPs counted since the last call to the layer they belong to."""
        total = self.counter.get_total_flops()
        delta, self.total = float(total - self.total), total
        target = self.active[-1] if self.active else self.last
        if target is None:
            self.pending += delta
        else:
            self.flops[target] += delta

    def enter(self, sub: torch.nn.Module, _args: Any) -> None:
        """Forward pre-hook."""
        self.account()
        layer = self.layer_of.get(id(sub))
        if layer is not None:
            self.active.append(layer)
            self.flops[layer] += self.pending
            self.pending = 0.0

    def leave(self, sub: torch.nn.Module, _args: Any, _output: Any) -> None:
        """Forward hook."""
        self.account()
        layer = self.layer_of.get(id(sub))
        if layer is not None and self.active and self.active[-1] == layer:
            self.active.pop()
            self.last = layer

    def result(self, first: str) -> dict[str, float]:
        """FLOPs per layer, any never attributed given to ``first``."""
        self.flops[first] += self.pending
        return self.flops


def _describe(sample_input: object) -> str:
    """The sample's argument shapes, for :attr:`Network.sample`."""
    args = sample_input if isinstance(sample_input, tuple) else (sample_input,)
    return ", ".join(str(tuple(arg.shape)) if hasattr(arg, "shape") else type(arg).__name__
                     for arg in args)
