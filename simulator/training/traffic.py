"""A parallel layout's training step as an execution graph: each stage's compute per micro-batch
and the traffic of every parallelism, from the model's own shapes (docs/training.md).

Per stage and micro-batch of ``tokens = micro-batch × sequence`` tokens:

- **compute**: a layer's forward FLOPs (:class:`~simulator.training.transformer.Transformer`)
  over TP, at the GPU's sustained rate; backward twice that (Kaplan et al. 2020, §2.1), plus one
  more forward under full recomputation; the output projection on the last stage;
- **TP** (Megatron, Shoeybi et al. 2019 §3): two allreduces of ``tokens × hidden`` bf16 per layer
  forward and two backward (two more with recomputation, which reruns the forward), one after
  the embedding; with sequence parallelism (Korthikanti et al. 2022 §4.2.2) each becomes a
  reduce-scatter and an all-gather of the same buffer. They block the compute (Megatron runs them
  on the compute stream), so each pass's are one batched operation after its compute;
- **EP**: a dispatch and a combine all-to-all of ``tokens × top_k × hidden`` bf16 (÷ TP with
  sequence parallelism) × the routing ``imbalance`` per MoE layer forward, two more backward;
- **PP**: the pass's output activation (``tokens × hidden`` bf16 ÷ TP: Megatron's scatter/gather
  optimisation, Narayanan et al. 2021 §4.1) sent to the next virtual stage, its gradient back,
  in the order of :func:`~simulator.training.pipeline.stage_order`;
- **DP**: the stage's gradients (the scenario's dtype) in buckets of the bucket cap, filled last
  layer first during the last micro-batch's backward (run layer by layer so that they overlap it,
  as DDP and Megatron's ``overlap_grad_reduce`` do); ZeRO 0: allreduced, then the optimizer;
  ZeRO 1-2 (Megatron's distributed optimizer): reduce-scattered, the optimizer on 1/DP of the
  states, then the bf16 parameters all-gathered; ZeRO 3 (FSDP): every layer's parameters
  all-gathered before its forward and its backward (the next prefetched while one computes) and
  its gradients reduce-scattered after its backward, every micro-batch. Expert parameters
  average over their expert-data-parallel group, the others over the dense one.

The graph's units are ranks; under :attr:`StepPlan.folded` every stage has one unit, standing
for its TP ranks and DP replicas, which run alike: each communication then stands for all its
copies (:meth:`StepPlan.copies`), whose links the execution shares.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from simulator.model.collective import Collective
from simulator.training.buckets import assign_buckets
from simulator.training.compute import Optimizer
from simulator.training.graph import Group, OpKind, Program, StepGraph
from simulator.training.layout import Parallelism, coordinates, group_name, groups, rank_of
from simulator.training.pipeline import Pass, stage_order
from simulator.training.program import ProgramBuilder
from simulator.training.transformer import BF16, Transformer

BLOCK = 256
"""Bytes an all-to-all's per-peer block is rounded up to: a whole number of elements of any
dtype, in chunks every all-to-all algorithm can cut (a rounding of at most 256 bytes a peer)."""


@dataclass(frozen=True)
class StepInputs:
    """What the step's graph needs besides the layout: the model's shape, samples per data-
    parallel replica per step (``batch``), the sustained FLOP/s and memory bandwidth of a GPU
    (infinite: free), the optimizer (and its time per GPU where the user gave one), the
    gradients' bytes per element and DDP's bucket cap."""

    shape: Transformer
    batch: int
    flops: float
    memory_bandwidth: float
    optimizer: Optimizer
    grad_bytes: int
    bucket_cap: int
    optimizer_s: float | None = None


@dataclass(frozen=True)
class StepPlan:
    """A step's graph and what maps it onto the machine: the global rank of each unit, the
    layout's communicators (global ranks), and whether units stand for their TP ranks and DP
    replicas (``folded``)."""

    graph: StepGraph
    unit_ranks: tuple[int, ...]
    layout: Parallelism
    communicators: tuple[Group, ...]
    folded: bool
    _members: dict[str, tuple[int, ...]] = field(init=False, repr=False, compare=False)
    _copies: dict[tuple[int, ...], tuple[tuple[int, ...], ...]] = field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_members", {g.name: g.ranks for g in self.communicators})
        object.__setattr__(self, "_copies", {})

    def members(self, name: str) -> tuple[int, ...]:
        """The global ranks of communicator ``name``."""
        return self._members[name]

    def copies(self, ranks: Sequence[int]) -> tuple[tuple[int, ...], ...]:
        """Every copy of a communication over global ``ranks`` that runs alongside it: itself
        when not folded, else its images over every TP rank and DP replica (distinct sets;
        worked out once per set of ranks)."""
        key = tuple(ranks)
        if key not in self._copies:
            self._copies[key] = self._images(key)
        return self._copies[key]

    def _images(self, ranks: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        if not self.folded:
            return (ranks,)
        layout, places = self.layout, [coordinates(self.layout, rank) for rank in ranks]
        seen: dict[frozenset[int], tuple[int, ...]] = {}
        for t, d in itertools.product(range(layout.tp), range(layout.dp)):
            image = tuple(rank_of(layout, tp=(p.tp + t) % layout.tp, pp=p.pp,
                                  ep=(p.dp + d) % layout.dp % layout.ep,
                                  outer=(p.dp + d) % layout.dp // layout.ep) for p in places)
            seen.setdefault(frozenset(image), image)
        return tuple(seen.values())


def model_problems(shape: Transformer, layout: Parallelism, batch: int) -> list[tuple[str, str]]:
    """What in the model does not divide over ``layout``, as (field, expected) pairs under
    ``training.parallelism``: layers over the virtual stages, heads and the MLP over TP
    (Megatron splits them by column), the key/value heads over TP or TP over them (fewer heads
    than ranks are replicated, tp / kv_heads ranks holding each, as GQA inference and training
    stacks do beyond Megatron-Core's own ``num_query_groups % tp == 0``; the K and V
    projections then computed twice or more are not counted), experts over EP, the batch over
    micro-batches."""
    problems = []
    stages = layout.pp * layout.chunks
    if shape.layers % stages:
        problems.append(("pp", f"a split of the model's {shape.layers} layers: pp × chunks = "
                               f"{stages} does not divide them"))
    for what, count in (("heads", shape.heads), ("MLP width", shape.ffn)):
        if count % layout.tp:
            problems.append(("tp", f"a divisor of the model's {count} {what}, got {layout.tp}"))
    kv = shape.kv_heads
    if kv % layout.tp and layout.tp % kv:  # fewer K/V heads than TP ranks: each replicated
        problems.append(("tp", f"a divisor or a multiple of the model's {kv} key/value heads "
                               f"(each replicated on tp / {kv} ranks), got {layout.tp}"))
    if layout.ep > 1 and shape.experts % layout.ep:
        problems.append(("ep", f"a divisor of the model's {shape.experts} experts, got "
                               f"{layout.ep}"))
    if layout.ep > 1 and not shape.moe:
        problems.append(("ep", f"1 for a dense model (no experts to spread), got {layout.ep}"))
    if layout.zero == 3 and layout.ep > 1:
        problems.append(("zero", "0, 1 or 2 with expert parallelism (ZeRO 3 over the experts' "
                                 "data-parallel groups is not modelled), got 3"))
    if batch % layout.microbatches:
        problems.append(("microbatches", f"a divisor of the batch of {batch} samples per "
                                         f"replica, got {layout.microbatches}"))
    return problems


def step_plan(inputs: StepInputs, layout: Parallelism, *, folded: bool = True) -> StepPlan:
    """The step of ``layout`` (module docstring), every rank a unit unless ``folded``."""
    communicators = groups(layout)
    if folded:
        units = tuple(rank_of(layout, tp=0, pp=s, ep=0, outer=0) for s in range(layout.pp))
    else:
        units = tuple(range(layout.gpus))
    index = {rank: unit for unit, rank in enumerate(units)}
    names = frozenset(group.name for group in communicators)
    programs = tuple(_Stage(inputs, layout, coordinates(layout, rank).pp, unit, units, index,
                            names).program() for unit, rank in enumerate(units))
    graph_groups = tuple(Group(g.name, tuple(index[r] for r in g.ranks if r in index))
                         for g in communicators if any(r in index for r in g.ranks))
    return StepPlan(StepGraph(programs, graph_groups), units, layout, communicators, folded)


class _Stage:
    """One unit's program: its stage's passes in schedule order, then its gradients' sync and
    the optimizer."""

    def __init__(self, inputs: StepInputs, layout: Parallelism, stage: int, unit: int,
                 units: tuple[int, ...], index: dict[int, int], names: frozenset[str]) -> None:
        self.inputs, self.layout, self.stage, self.unit = inputs, layout, stage, unit
        self.out = ProgramBuilder(unit, names)
        self.shape = inputs.shape
        place = coordinates(layout, units[unit])
        self.place, self.units, self.index = place, units, index
        self.tokens = inputs.batch // layout.microbatches * self.shape.sequence
        self.per_chunk = self.shape.layers // (layout.pp * layout.chunks)
        self.last_virtual = layout.pp * layout.chunks - 1

    def message(self, kind: OpKind, name: str, peer_stage: int, nbytes: int, tag: int,
                after: Sequence[int] = ()) -> int:
        """A send to (or receive from) the same place on stage ``peer_stage``."""
        place = self.place
        peer = rank_of(self.layout, tp=place.tp, pp=peer_stage, ep=place.ep, outer=place.outer)
        return self.out.message(kind, name, self.index[peer], nbytes, tag, after)

    # --- the names of this unit's communicators --------------------------------------------------

    @property
    def tp_group(self) -> str:
        """This rank's TP communicator."""
        return group_name("tp", self.stage, self.place.dp)

    @property
    def dp_group(self) -> str:
        """This rank's dense data-parallel communicator."""
        return group_name("dp", self.stage, self.place.tp)

    @property
    def ep_group(self) -> str:
        """This rank's expert-parallel communicator."""
        return group_name("ep", self.stage, self.place.tp, self.place.outer)

    @property
    def edp_group(self) -> str:
        """This rank's expert-data-parallel communicator (the ranks holding its experts)."""
        return group_name("edp", self.stage, self.place.tp, self.place.ep)

    # --- sizes and times -------------------------------------------------------------------------

    def _seconds(self, flops: float) -> float:
        return flops / self.inputs.flops if self.inputs.flops != float("inf") else 0.0

    def layer_forward_s(self) -> float:
        """One layer's forward on this rank's share (÷ TP) of one micro-batch."""
        return self._seconds(self.shape.layer_flops * self.tokens / self.layout.tp)

    def head_forward_s(self) -> float:
        """The output projection's forward on this rank's share of one micro-batch."""
        return self._seconds(self.shape.head_flops * self.tokens / self.layout.tp)

    @property
    def activation(self) -> int:
        """Bytes of one micro-batch's activation (tokens × hidden, bf16)."""
        return self.shape.activation_bytes(self.tokens)

    # --- the passes ------------------------------------------------------------------------------

    def program(self) -> Program:
        """This unit's ops: every pass in schedule order, then the gradients and the optimizer."""
        order = stage_order(self.stage, self.layout.pp, self.layout.microbatches,
                            self.layout.chunks)
        last = {chunk: max(p.micro for p in order if p.chunk == chunk)
                for chunk in range(self.layout.chunks)}
        ready: list[tuple[int, int]] = []  # (layer, op id) of each layer's last backward
        for each in order:
            if each.forward:
                self.forward(each)
            else:
                ready += self.backward(each, by_layer=each.micro == last[each.chunk])
        self.synchronise(ready)
        return self.out.program()

    def _layers(self, each: Pass) -> range:
        first = each.virtual(self.stage, self.layout.pp) * self.per_chunk
        return range(first, first + self.per_chunk)

    def _tp(self, name: str, layers: int, *, after: Sequence[int] = ()) -> None:
        """The TP collectives of ``layers`` allreduce pairs, blocking (module docstring)."""
        if self.layout.tp == 1 or layers == 0:
            return
        nbytes = self.activation
        if self.layout.sequence_parallel:
            self.out.collective(f"{name} tp reduce-scatter", Collective.REDUCE_SCATTER, self.tp_group,
                            nbytes, layers, blocking=True, stream="tp", after=after)
            self.out.collective(f"{name} tp all-gather", Collective.ALLGATHER, self.tp_group,
                            nbytes, layers, blocking=True, stream="tp")
        else:
            self.out.collective(f"{name} tp allreduce", Collective.ALLREDUCE, self.tp_group, nbytes,
                            layers, blocking=True, stream="tp", after=after)

    def _ep(self, name: str, count: int) -> None:
        """The experts' all-to-alls of ``count`` dispatches and combines, blocking; each
        rank's buffer rounded up to whole blocks of :data:`BLOCK` bytes per peer (an
        all-to-all sends every peer an equal block)."""
        if self.layout.ep == 1 or not self.shape.moe or count == 0:
            return
        nbytes = self.shape.top_k * self.activation * self.layout.imbalance
        if self.layout.sequence_parallel:
            nbytes /= self.layout.tp
        whole = BLOCK * self.layout.ep
        self.out.collective(f"{name} ep all-to-all", Collective.ALLTOALL, self.ep_group,
                            math.ceil(nbytes / whole) * whole, 2 * count, blocking=True,
                            stream="ep")

    def _tag(self, each: Pass, virtual: int, forward: bool) -> int:
        """The tag of the message into virtual stage ``virtual`` of ``each``'s micro-batch (its
        activation, or its gradient going back): sender and receiver name it alike, whichever
        model chunk each runs."""
        stages = self.layout.pp * self.layout.chunks
        return (each.micro * stages + virtual) * 2 + (0 if forward else 1)

    def forward(self, each: Pass) -> None:
        """A forward pass: receive, compute, TP, EP, send."""
        layout, virtual = self.layout, each.virtual(self.stage, self.layout.pp)
        name = f"forward {each.micro}" + (f".{each.chunk}" if layout.chunks > 1 else "")
        if virtual > 0:
            self.message(OpKind.RECV, f"{name} recv", (virtual - 1) % layout.pp,
                         self.activation // layout.tp, self._tag(each, virtual, True))
        if layout.zero == 3:
            self._sharded(name, self._layers(each), 1.0, 2, 1, reduce=False)
            if virtual == self.last_virtual:
                self.out.compute(f"{name} head", self.head_forward_s())
            self._tp(name, 1 if virtual == 0 else 0)
        else:
            seconds = self.per_chunk * self.layer_forward_s()
            if virtual == self.last_virtual:
                seconds += self.head_forward_s()
            self.out.compute(name, seconds)
            self._tp(name, 2 * self.per_chunk + (1 if virtual == 0 else 0))
            self._ep(name, self.per_chunk)
        if virtual < self.last_virtual:
            self.message(OpKind.SEND, f"{name} send", (virtual + 1) % layout.pp,
                         self.activation // layout.tp, self._tag(each, virtual + 1, True),
                         after=[self.out.head]
                         if self.out.head is not None else [])

    def backward(self, each: Pass, *, by_layer: bool) -> list[tuple[int, int]]:
        """A backward pass: receive, compute, TP, EP (layer by layer when ``by_layer``, the
        last of its chunk, whose gradients DP synchronises), send; (layer, op) of each layer's
        end when by layer."""
        layout, virtual = self.layout, each.virtual(self.stage, self.layout.pp)
        name = f"backward {each.micro}" + (f".{each.chunk}" if layout.chunks > 1 else "")
        if virtual < self.last_virtual:
            self.message(OpKind.RECV, f"{name} recv", (virtual + 1) % layout.pp,
                         self.activation // layout.tp, self._tag(each, virtual, False))
        factor = 3.0 if layout.recompute else 2.0
        tp_per_layer = 4 if layout.recompute else 2
        ep_per_layer = 2 if layout.recompute else 1
        ends: list[tuple[int, int]] = []
        if virtual == self.last_virtual:
            self.out.compute(f"{name} head", 2.0 * self.head_forward_s())
        if layout.zero == 3:
            self._sharded(name, reversed(self._layers(each)), factor, tp_per_layer, ep_per_layer,
                          reduce=True)
        elif by_layer:
            for layer in reversed(self._layers(each)):
                self.out.compute(f"{name} layer {layer}", factor * self.layer_forward_s())
                self._tp(f"{name} layer {layer}", tp_per_layer)
                self._ep(f"{name} layer {layer}", ep_per_layer)
                assert self.out.head is not None
                ends.append((layer, self.out.head))
        else:
            self.out.compute(name, self.per_chunk * factor * self.layer_forward_s())
            self._tp(name, tp_per_layer * self.per_chunk)
            self._ep(name, ep_per_layer * self.per_chunk)
        if virtual > 0:
            self.message(OpKind.SEND, f"{name} send", (virtual - 1) % layout.pp,
                         self.activation // layout.tp, self._tag(each, virtual - 1, False),
                         after=[self.out.head] if self.out.head is not None else [])
        return ends

    def _sharded(self, name: str, layers: Iterable[int], factor: float, tp_per_layer: int,
                 ep_per_layer: int, *, reduce: bool) -> None:
        """ZeRO 3's pass, layer by layer: each layer's parameters all-gathered over DP before it
        computes (the next one's gather may start once the layer before this one has computed:
        one layer prefetched, as FSDP's default ``BACKWARD_PRE`` and forward prefetch of one
        unit), then ``factor`` × its forward, its TP and EP collectives, and with ``reduce`` its
        gradients reduce-scattered over DP after it (FSDP, Zhao et al. 2023 §3.2-3.3)."""
        dense, expert = self._layer_grad_bytes()
        params = sum(self._layer_params()) * BF16
        computed: list[int | None] = [self.out.head, self.out.head]
        for layer in layers:
            gate = computed[-2]
            gather = self.out.collective(f"{name} layer {layer} params all-gather",
                                         Collective.ALLGATHER, self.dp_group, params,
                                         blocking=False, stream="dp", queue="gather",
                                         after=[] if gate is None else [gate])
            self.out.compute(f"{name} layer {layer}", factor * self.layer_forward_s(),
                             after=[] if gather is None else [gather])
            computed.append(self.out.head)
            self._tp(f"{name} layer {layer}", tp_per_layer)
            self._ep(f"{name} layer {layer}", ep_per_layer)
            if reduce:
                self.out.collective(f"{name} layer {layer} grads reduce-scatter",
                                    Collective.REDUCE_SCATTER, self.dp_group, dense + expert,
                                    blocking=False, stream="dp", queue="reduce",
                                    after=[] if self.out.head is None else [self.out.head])

    # --- gradients and the optimizer -------------------------------------------------------------

    def _layer_params(self) -> tuple[int, int]:
        """One layer's parameters on this rank, averaged over the dense DP group and over the
        expert-data-parallel one (with experts spread by EP; else all dense)."""
        shape, layout = self.shape, self.layout
        expert = shape.experts * shape.expert_params if shape.moe else 0
        dense = shape.layer_params - expert
        if layout.ep == 1:
            return (dense + expert) // layout.tp, 0
        return dense // layout.tp, expert // (layout.tp * layout.ep)

    def _layer_grad_bytes(self) -> tuple[int, int]:
        """One layer's gradient bytes on this rank (:meth:`_layer_params` in the gradients'
        dtype)."""
        dense, expert = self._layer_params()
        return dense * self.inputs.grad_bytes, expert * self.inputs.grad_bytes

    def synchronise(self, ready: list[tuple[int, int]]) -> None:
        """DP's buckets as their layers' gradients are ready (last layer first), the optimizer,
        and ZeRO 1-2's parameter all-gather (module docstring)."""
        layout = self.layout
        dense, expert = self._layer_grad_bytes()
        ends = [op for _, op in sorted(ready)]
        reduce = Collective.ALLREDUCE if layout.zero == 0 else Collective.REDUCE_SCATTER
        synced: list[int] = [self.out.queues["reduce"]] if "reduce" in self.out.queues else []
        for group, per_layer in ((self.dp_group, dense), (self.edp_group, expert)):
            if layout.zero == 3:
                break  # every layer's gradients were reduce-scattered after its backward
            if per_layer == 0:
                continue
            buckets = assign_buckets([per_layer] * len(ends), cap=self.inputs.bucket_cap,
                                     first=self.inputs.bucket_cap)
            for bucket in buckets:
                op = self.out.collective(f"grads {group} bucket {bucket.index}", reduce, group,
                                     bucket.nbytes, blocking=False, stream="dp",
                                     after=[ends[min(bucket.tensors)]])
                if op is not None:
                    synced.append(op)
        params = self.stage_params()
        states = params // layout.dp if layout.zero else params
        seconds = (self.inputs.optimizer_s if self.inputs.optimizer_s is not None else 0.0
                   if self.inputs.memory_bandwidth == float("inf") else
                   states * self.inputs.optimizer.bytes_per_parameter
                   / self.inputs.memory_bandwidth)
        update = self.out.compute("optimizer", seconds, after=synced)
        if layout.zero in (1, 2):  # the updated bf16 parameters, bucketed as the gradients
            per_layer = sum(self._layer_params()) * BF16
            for part in assign_buckets([per_layer] * len(ends), cap=self.inputs.bucket_cap,
                                       first=self.inputs.bucket_cap):
                self.out.collective(f"params {self.dp_group} bucket {part.index}",
                                    Collective.ALLGATHER, self.dp_group, part.nbytes,
                                    blocking=False, stream="dp", after=[update])

    def stage_params(self) -> int:
        """Parameters this rank holds: its layers' (dense ÷ TP, experts ÷ TP·EP) and, on the
        first and last stage, the embedding and output projection ÷ TP."""
        shape, layout = self.shape, self.layout
        layers = self.per_chunk * layout.chunks
        expert = shape.experts * shape.expert_params if shape.moe else 0
        params = layers * ((shape.layer_params - expert) // layout.tp
                           + expert // (layout.tp * layout.ep))
        vocab = shape.vocab * shape.hidden // layout.tp
        if self.stage == 0:
            params += vocab
        if self.stage == layout.pp - 1 and not shape.tied:
            params += vocab
        return params
