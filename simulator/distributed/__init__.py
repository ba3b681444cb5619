"""A ``torch.distributed``-shaped API on the simulator, for learning and quick checks.

:func:`spawn` runs ``fn(rank, *args)`` once per simulated rank, each on its own thread. Inside,
``all_reduce``, ``broadcast``, ``reduce``, ``reduce_scatter``, ``all_gather``, ``all_to_all``
and ``barrier``
behave as PyTorch's (blocking, ``async_op=False``): a rank waits in a call until every rank has
made the matching one, the collective is then simulated once on the topology with all ranks'
tensors as its data (:func:`simulator.runner.run_point`), and each rank's tensor ends holding its
result, in place. Tensors are numpy arrays, or CPU ``torch.Tensor``\\s when PyTorch is installed.

>>> import numpy as np
>>> import simulator.distributed as dist  # as torch.distributed is; or: from simulator import dist
>>> def step(rank: int) -> float:
...     tensor = np.array([float(rank)])
...     dist.all_reduce(tensor)            # op=dist.ReduceOp.SUM
...     return float(tensor[0])
>>> result = dist.spawn(step, 3)           # a switch of 3 ranks, 25 GB/s and 1 us per link
>>> result.returns
(3.0, 3.0, 3.0)
>>> call = result.calls[0]
>>> call.name, call.algorithm, call.size_bytes, call.verified
('all_reduce', 'ring', 8, True)
>>> round(result.time_s * 1e6, 5)          # 2(p-1) = 4 steps of two 1 us hops and 8 B at 25 GB/s
8.00128

Point-to-point: ``send``, ``recv``, ``isend`` and ``irecv`` (with :class:`Work`\\s to ``wait``
on), ``P2POp`` and ``batch_isend_irecv``, as torch's. Sends and receives match per (sender,
receiver, tag) in the order each rank posted them (:mod:`.p2p`), when no rank can move, and
every message flies on one fabric of the topology for the whole run, from its own start, so
those in flight at the same time share links (:class:`simulator.engine.messages.Network`). A
``send`` returns once its message has arrived (it blocks until matched, as torch's does for
large messages):

>>> def pair(rank: int) -> int | None:
...     tensor = np.full(1024, float(rank), dtype=np.float32)
...     if rank == 0:
...         dist.send(tensor, dst=1)
...         return None
...     assert dist.recv(tensor) == 0 and tensor[0] == 0.0   # src=None: any rank
...     return rank
>>> result = dist.spawn(pair, 2)
>>> call = result.calls[0]
>>> call.name, call.src, call.dst, call.size_bytes, call.verified
('send/recv', 0, 1, 4096, True)
>>> round(result.time_s * 1e6, 5)          # two 1 us hops and 4 KiB at 25 GB/s
2.16384

Time: each rank has a clock (compute is free). A collective starts at the latest clock and sets
every clock to its end; a message starts when both sides have posted and its arrival moves on
the clocks of the ranks that wait for it. :attr:`SpawnResult.time_s` is the latest clock or
arrival: with collectives only, the sum of their times. A send and a receive matched with
another dtype or shape, or never matched when every rank returned, raise
:class:`MessageMismatch`; a rank waiting on a message nothing will send (its peer returned, or
waits elsewhere) stops the run at once with :class:`Stalled`, naming who waits for whom.
Mismatched calls (another collective, shape, dtype, op or root, or a rank that returns while
others wait) raise :class:`CollectiveMismatch` naming every rank's call; an exception in a
rank's code, or its ``sys.exit``, is raised again from :func:`spawn` as :class:`RankError`
naming the rank. Neither ever hangs: the caller of :func:`spawn` acts when every rank still
running waits in a call. A rank stuck on something else (a barrier of its own, a lock) is the
watchdog's: it raises :class:`Stalled`, naming who waits for whom, once every rank left waits in
a call or has sat still for ``timeout`` seconds (docs/dist.md).

The package (``simulator.dist`` until issue 37, a name kept as an alias: :mod:`simulator.dist`):
this module is the API a rank calls; :mod:`.rendezvous` runs the ranks' threads and
holds their calls, :mod:`.coordinator` acts on them when every rank waits (matches, simulates,
releases), :mod:`.watchdog` watches the ranks outside a call, :mod:`.stops` says why a run
stops (its errors, naming who waits for whom), :mod:`.p2p` queues and matches their sends and
receives, :mod:`.tensors` turns tensors into numpy views and writes results back in place, and
:mod:`.collectives` simulates each matched call or set of messages and records it.

May import: :mod:`simulator.plan`, :mod:`simulator.runner`, :mod:`simulator.scenario`,
:mod:`simulator.algorithms`, :mod:`simulator.model`, :mod:`simulator.engine`,
:mod:`simulator.output`, :mod:`simulator.settings`, :mod:`simulator.limits`,
:mod:`simulator.errors`, numpy, and PyTorch only as the caller's tensors bring it. Never the CLI
nor the trainer: per-rank code whose every collective is a ``run_point`` and whose messages are
the engine's fabric.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np

from simulator.distributed.collectives import (
    DEFAULT_BANDWIDTH,
    DEFAULT_LATENCY,
    CallRecord,
    Simulation,
    SpawnResult,
    base_scenario,
    chosen_algorithms,
)
from simulator.distributed.rendezvous import (
    SOURCE,
    Call,
    Work,
    World,
    as_timeout,
    context,
    current,
)
from simulator.distributed.stops import CollectiveMismatch, MessageMismatch, RankError, Stalled
from simulator.distributed.tensors import (
    ReduceOp,
    TensorLike,
    as_model_op,
    as_view,
    check_rank,
    check_splits,
    check_total,
    chunk,
    op_suffix,
    own_chunk,
    shape_of,
    views_of,
    write,
    write_each,
)
from simulator.distributed.watchdog import DEFAULT_TIMEOUT_S
from simulator.errors import InputError, Problem
from simulator.limits import DEFAULT_PROXY_ELEMENTS
from simulator.model.collective import ROOT, Collective
from simulator.model.execution import Execution
from simulator.model.reduction import ReduceOp as ModelOp
from simulator.scenario.spec import TopologySpec

__all__ = [
    "DEFAULT_BANDWIDTH",
    "DEFAULT_LATENCY",
    "DEFAULT_TIMEOUT_S",
    "SOURCE",
    "CallRecord",
    "CollectiveMismatch",
    "MessageMismatch",
    "P2POp",
    "RankError",
    "ReduceOp",
    "SpawnResult",
    "Stalled",
    "TensorLike",
    "Work",
    "all_gather",
    "all_gather_into_tensor",
    "all_reduce",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "batch_isend_irecv",
    "broadcast",
    "get_rank",
    "get_world_size",
    "irecv",
    "is_initialized",
    "isend",
    "recv",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "send",
    "spawn",
]


def spawn(fn: Callable[..., Any], world_size: int,
          topology: str | Mapping[str, Any] | TopologySpec | None = None, *,
          args: Sequence[Any] = (), algorithm: str | Mapping[str, str] | None = None,
          execution: str | Execution | None = None,
          timeout: float | timedelta | None = DEFAULT_TIMEOUT_S,
          proxy_elements: int | None = DEFAULT_PROXY_ELEMENTS) -> SpawnResult:
    """Run ``fn(rank, *args)`` on ``world_size`` simulated ranks and simulate their collectives.

    ``topology`` is a scenario's topology mapping (``{"kind": "switch", "ranks": 4, ...}``), a
    preset's name (``"dgx_h100"``) or a TopologySpec; by default a ``switch`` of ``world_size``
    ranks with 25 GB/s, 1 us links. ``algorithm`` is a registry name for every collective, or a
    mapping from collective (``"allreduce"``, ``"broadcast"``, ...) to a name; a collective it
    does not name runs NCCL's choice where ``execution`` is ``nccl`` (for allreduce: its tuner's
    algorithm and protocol at the call's size) and ``ring`` otherwise. ``execution`` defaults as
    in a scenario (``nccl`` on presets, ``ideal`` on builders). The tensors' dtype is each call's
    (float16, float32, float64, int32 or int64). ``timeout`` (seconds or a timedelta; None for
    never) is how long every rank not in a call must sit still, stuck on something outside the
    simulator, before the run stops with Stalled. A collective of more than ``proxy_elements``
    elements per rank runs its schedule on a proxy payload of that many, as ``run`` does, timed
    at the tensors' size and checked on the proxy, and the ranks' tensors get numpy's outcome (a
    reduction in float64 rounded once, not in the schedule's order); None moves and reduces the
    whole tensors, in the schedule's order. InputError for bad arguments (a topology of
    another rank count, an unknown algorithm, more ranks than MAX_DIST_RANKS threads),
    CollectiveMismatch, MessageMismatch, RankError and Stalled as the module says.
    """
    if not callable(fn):
        raise InputError([Problem(SOURCE, "fn", f"expected a function of the rank, got {fn!r}")])
    wait = as_timeout(timeout)
    if proxy_elements is not None and (isinstance(proxy_elements, bool)
                                       or not isinstance(proxy_elements, int)
                                       or proxy_elements < 1):
        raise InputError([Problem(SOURCE, "proxy_elements", f"expected a whole number ≥ 1 or "
                                                            f"None, got {proxy_elements!r}")])
    simulation = Simulation(base_scenario(world_size, topology, execution),
                            chosen_algorithms(algorithm), proxy_elements=proxy_elements)
    world = World(world_size, simulation, wait)
    returns = world.run(fn, tuple(args))
    return SpawnResult(returns, tuple(simulation.records), tuple(world.clocks))


def is_initialized() -> bool:
    """True inside the code :func:`spawn` runs for a rank."""
    return current() is not None


def get_rank() -> int:
    """This rank's number, 0 to world_size - 1."""
    return context("get_rank").rank


def get_world_size() -> int:
    """How many ranks :func:`spawn` runs."""
    return context("get_world_size").world.size


def all_reduce(tensor: TensorLike, op: object = ReduceOp.SUM) -> None:
    """Every rank's ``tensor`` becomes the reduction of all of them."""
    me = context("all_reduce")
    view, model_op = as_view(tensor, "tensor", writable=True), as_model_op(op)
    me.collect(Call("all_reduce", f"all_reduce({shape_of(view)}{op_suffix(model_op)})",
                    Collective.ALLREDUCE, model_op, view.reshape(-1),
                    lambda out: write(view, out[me.rank])))


def broadcast(tensor: TensorLike, src: int) -> None:
    """Every rank's ``tensor`` becomes rank ``src``'s. Timed as the broadcast from rank 0 (the
    model's root): the same on a symmetric topology such as a switch."""
    me = context("broadcast")
    view = as_view(tensor, "tensor", writable=True)
    check_rank(src, "src", me.world.size)
    me.collect(Call("broadcast", f"broadcast({shape_of(view)}, src={src})", Collective.BROADCAST,
                    ModelOp.SUM, view.reshape(-1), lambda out: write(view, out[me.rank]),
                    root=src))


def reduce(tensor: TensorLike, dst: int, op: object = ReduceOp.SUM) -> None:
    """Rank ``dst``'s ``tensor`` becomes the reduction of all of them; the others keep theirs.
    Timed as the reduce to rank 0 (the model's root)."""
    me = context("reduce")
    view, model_op = as_view(tensor, "tensor", writable=True), as_model_op(op)
    check_rank(dst, "dst", me.world.size)
    me.collect(Call("reduce", f"reduce({shape_of(view)}, dst={dst}{op_suffix(model_op)})",
                    Collective.REDUCE, model_op, view.reshape(-1),
                    lambda out: write(view, out[ROOT]) if me.rank == dst else None))


def reduce_scatter(output: TensorLike, input_list: Sequence[TensorLike],
                   op: object = ReduceOp.SUM) -> None:
    """``output`` on rank r becomes the reduction over all ranks of their ``input_list[r]``."""
    me = context("reduce_scatter")
    rank, size = me.rank, me.world.size
    out = as_view(output, "output", writable=True)
    parts = views_of(input_list, "input_list", out, size, writable=False)
    model_op = as_model_op(op)
    row = np.concatenate([part.reshape(-1) for part in parts])
    me.collect(Call("reduce_scatter", f"reduce_scatter({shape_of(out)}, [{len(parts)} × "
                    f"{shape_of(out)}]{op_suffix(model_op)})", Collective.REDUCE_SCATTER,
                    model_op, row, lambda result: write(out, chunk(result[rank], rank, size))))


def reduce_scatter_tensor(output: TensorLike, input: TensorLike,
                          op: object = ReduceOp.SUM) -> None:
    """``output`` on rank r becomes the reduction over all ranks of chunk r of their ``input``
    (world_size × ``output``'s elements, cut into world_size equal chunks)."""
    me = context("reduce_scatter_tensor")
    rank, size = me.rank, me.world.size
    out, source = as_view(output, "output", writable=True), as_view(input, "input")
    check_total(source, out, size, "input", "output")
    model_op = as_model_op(op)
    me.collect(Call("reduce_scatter_tensor", f"reduce_scatter_tensor({shape_of(out)}, "
                    f"{shape_of(source)}{op_suffix(model_op)})", Collective.REDUCE_SCATTER,
                    model_op, source.reshape(-1),
                    lambda result: write(out, chunk(result[rank], rank, size))))


def all_gather(tensor_list: Sequence[TensorLike], tensor: TensorLike) -> None:
    """``tensor_list[r]`` on every rank becomes rank r's ``tensor``."""
    me = context("all_gather")
    rank, size = me.rank, me.world.size
    mine = as_view(tensor, "tensor")
    outputs = views_of(tensor_list, "tensor_list", mine, size, writable=True)
    me.collect(Call("all_gather", f"all_gather([{len(outputs)} × {shape_of(mine)}], "
                    f"{shape_of(mine)})", Collective.ALLGATHER, ModelOp.SUM,
                    own_chunk(mine, rank, size), lambda result: write_each(outputs, result[rank])))


def all_gather_into_tensor(output_tensor: TensorLike, input_tensor: TensorLike) -> None:
    """``output_tensor`` on every rank becomes the ranks' ``input_tensor``\\s, in rank order."""
    me = context("all_gather_into_tensor")
    rank, size = me.rank, me.world.size
    out = as_view(output_tensor, "output_tensor", writable=True)
    mine = as_view(input_tensor, "input_tensor")
    check_total(out, mine, size, "output_tensor", "input_tensor")
    me.collect(Call("all_gather_into_tensor", f"all_gather_into_tensor({shape_of(out)}, "
                    f"{shape_of(mine)})", Collective.ALLGATHER, ModelOp.SUM,
                    own_chunk(mine, rank, size), lambda result: write(out, result[rank])))


def all_to_all(output_tensor_list: Sequence[TensorLike],
               input_tensor_list: Sequence[TensorLike]) -> None:
    """``output_tensor_list[j]`` on rank r becomes rank j's ``input_tensor_list[r]``. Every
    tensor of both lists must have one shape and dtype (the model's all-to-all moves equal
    blocks; torch allows them to differ)."""
    me = context("all_to_all")
    rank, size = me.rank, me.world.size
    inputs = views_of(input_tensor_list, "input_tensor_list", None, size, writable=False)
    outputs = views_of(output_tensor_list, "output_tensor_list", inputs[0], size, writable=True)
    row = np.concatenate([part.reshape(-1) for part in inputs])
    me.collect(Call("all_to_all", f"all_to_all([{size} × {shape_of(inputs[0])}], [{size} × "
                    f"{shape_of(inputs[0])}])", Collective.ALLTOALL, ModelOp.SUM, row,
                    lambda result: write_each(outputs, result[rank])))


def all_to_all_single(output: TensorLike, input: TensorLike,
                      output_split_sizes: Sequence[int] | None = None,
                      input_split_sizes: Sequence[int] | None = None) -> None:
    """``output`` on rank r becomes, block j for every rank j, block r of rank j's ``input``;
    blocks cut along dimension 0 into world_size equal parts (split sizes other than None or
    equal ones are a ValueError: unequal blocks are not modelled)."""
    me = context("all_to_all_single")
    rank, size = me.rank, me.world.size
    out, source = as_view(output, "output", writable=True), as_view(input, "input")
    if out.shape != source.shape or out.dtype != source.dtype:
        raise ValueError(f"output: expected {shape_of(source)} (input's), got {shape_of(out)}")
    rows = source.shape[0] if source.ndim else 0
    if source.ndim == 0 or rows % size:
        raise ValueError(f"input: expected a first dimension that world_size {size} divides, "
                         f"got {shape_of(source)}")
    check_splits(output_split_sizes, "output_split_sizes", rows, size)
    check_splits(input_split_sizes, "input_split_sizes", rows, size)
    me.collect(Call("all_to_all_single", f"all_to_all_single({shape_of(out)}, "
                    f"{shape_of(source)})", Collective.ALLTOALL, ModelOp.SUM,
                    source.reshape(-1), lambda result: write(out, result[rank])))


def barrier() -> None:
    """Wait until every rank calls it. Timed as PyTorch's NCCL backend does it: an allreduce of
    one float32 zero (``ProcessGroupNCCL::barrier`` in torch/csrc/distributed/c10d/
    ProcessGroupNCCL.cpp; ``torch.distributed.barrier``'s docstring says as much)."""
    me = context("barrier")
    me.collect(Call("barrier", "barrier()", Collective.ALLREDUCE, ModelOp.SUM,
                    np.zeros(1, dtype=np.float32), lambda out: None))


def isend(tensor: TensorLike, dst: int, group: object = None, tag: int = 0) -> Work:
    """Send ``tensor`` to rank ``dst`` without waiting: the work completes when the message has
    arrived. Its data is taken as it is now (torch leaves changing it before ``wait`` undefined).
    ``dst`` may be this rank, as torch allows: a local copy, taking no time."""
    me = context("isend")
    view = as_view(tensor, "tensor")
    check_rank(dst, "dst", me.world.size)
    return me.post(True, dst, _tag(tag, group), view, "isend", _signature("isend", view, "dst",
                                                                         dst, tag))


def irecv(tensor: TensorLike, src: int | None = None, group: object = None, tag: int = 0) -> Work:
    """Receive into ``tensor`` from rank ``src`` (None: from any rank) without waiting: the
    work completes when the message has arrived, ``tensor`` holding it."""
    me = context("irecv")
    view = as_view(tensor, "tensor", writable=True)
    if src is not None:
        check_rank(src, "src", me.world.size)
    return me.post(False, src, _tag(tag, group), view, "irecv", _signature("irecv", view, "src",
                                                                          src, tag))


def send(tensor: TensorLike, dst: int, group: object = None, tag: int = 0) -> None:
    """Send ``tensor`` to rank ``dst`` and wait until it has arrived: a send blocks until a
    matching receive takes it, as torch's does for messages too large to buffer."""
    me = context("send")
    view = as_view(tensor, "tensor")
    check_rank(dst, "dst", me.world.size)
    _check_not_self(dst, me.rank, "dst", "destination")
    me.post(True, dst, _tag(tag, group), view, "send",
            _signature("send", view, "dst", dst, tag)).wait()


def recv(tensor: TensorLike, src: int | None = None, group: object = None, tag: int = 0) -> int:
    """Receive into ``tensor`` from rank ``src`` (None: from any rank), waiting until it has
    arrived; the sender's rank."""
    me = context("recv")
    view = as_view(tensor, "tensor", writable=True)
    if src is not None:
        check_rank(src, "src", me.world.size)
        _check_not_self(src, me.rank, "src", "source")
    work = me.post(False, src, _tag(tag, group), view, "recv",
                   _signature("recv", view, "src", src, tag))
    work.wait()
    return work.source_rank()


@dataclass(frozen=True)
class P2POp:
    """``torch.distributed.P2POp``: a send or receive for :func:`batch_isend_irecv`. ``op`` is
    :func:`isend` or :func:`irecv` (torch's own are refused: they are not this package's)."""

    op: Callable[..., Work]
    tensor: TensorLike
    peer: int | None = None
    group: object = None
    tag: int = 0

    def __post_init__(self) -> None:
        if self.op is not isend and self.op is not irecv:
            raise ValueError(f"op: expected simulator.dist.isend or simulator.dist.irecv, got "
                             f"{getattr(self.op, '__qualname__', self.op)!r}")


def batch_isend_irecv(p2p_op_list: Sequence[P2POp]) -> list[Work]:
    """Post every op of the list, in order, without waiting; their works, in the same order.
    As torch's: the order of sends against receives does not matter (none waits), that of the
    messages between one pair in one direction does."""
    if (isinstance(p2p_op_list, (str, bytes)) or not isinstance(p2p_op_list, Sequence)
            or not p2p_op_list or not all(isinstance(op, P2POp) for op in p2p_op_list)):
        raise ValueError(f"p2p_op_list: expected a non-empty list of simulator.dist.P2POp, got "
                         f"{p2p_op_list!r}")
    return [op.op(op.tensor, op.peer, op.group, op.tag) for op in p2p_op_list]


def _tag(tag: object, group: object) -> int:
    """The tag, checked to be a whole number; ValueError for a process group (not modelled)."""
    if group is not None:
        raise ValueError(f"group: process groups are not modelled, every call is on the whole "
                         f"world: expected None, got {group!r}")
    if isinstance(tag, bool) or not isinstance(tag, int):
        raise TypeError(f"tag: expected a whole number, got {tag!r}")
    return tag


def _check_not_self(peer: int, rank: int, what: str, kind: str) -> None:
    """ValueError where a blocking send or receive names its own rank, as torch's does."""
    if peer == rank:
        raise ValueError(f"{what}: invalid {kind} rank {peer}: {kind} rank should not be the "
                         "same as the rank of the current process")


def _signature(name: str, view: np.ndarray, what: str, peer: int | None, tag: int) -> str:
    """A send's or receive's call as errors name it: ``recv(float32[4], src=0, tag=3)``."""
    return f"{name}({shape_of(view)}, {what}={peer}{f', tag={tag}' if tag else ''})"
