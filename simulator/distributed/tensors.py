"""What a rank hands to a call, as the simulation needs it: numpy arrays or CPU ``torch.Tensor``\\s
as numpy views of their own memory (so results land in place), ``torch.distributed``'s reduce
operators as the model's, and ranks checked; every misuse a TypeError or ValueError saying what
was expected, raised in the rank that made it."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from enum import Enum
from typing import TypeAlias

import numpy as np

from simulator.model.reduction import BFLOAT16, DTYPES
from simulator.model.reduction import ReduceOp as ModelOp

TensorLike: TypeAlias = object
"""A numpy array, or a CPU ``torch.Tensor`` (when PyTorch is installed)."""


class ReduceOp(Enum):
    """``torch.distributed.ReduceOp``'s names for the model's operators (BAND, BOR, BXOR and
    PREMUL_SUM are not modelled). ``torch.distributed.ReduceOp.SUM`` and the like work too."""

    SUM = ModelOp.SUM
    PRODUCT = ModelOp.PROD
    MIN = ModelOp.MIN
    MAX = ModelOp.MAX
    AVG = ModelOp.AVG


def as_view(tensor: object, what: str, writable: bool = False) -> np.ndarray:
    """A numpy view of ``tensor``'s memory (a CPU torch tensor shares its own), so writes to it
    land in the tensor in place; TypeError for anything else or a dtype the model lacks."""
    torch = sys.modules.get("torch")  # a torch tensor exists only if torch was imported
    view: np.ndarray
    if torch is not None and isinstance(tensor, torch.Tensor):
        if tensor.device.type != "cpu":
            raise TypeError(f"{what}: expected a CPU tensor (the simulated ranks hold their "
                            f"data on the CPU), got one on {tensor.device}")
        if str(tensor.dtype).removeprefix("torch.") not in DTYPES:
            raise TypeError(f"{what}: expected a tensor of {', '.join(DTYPES)}, got {tensor.dtype}")
        if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16: the same bits, as ml_dtypes'
            view = tensor.detach().view(torch.int16).numpy().view(BFLOAT16)
        else:
            view = tensor.detach().numpy()
    elif isinstance(tensor, np.ndarray):
        view = tensor
        if view.dtype.name not in DTYPES:
            raise TypeError(f"{what}: expected an array of {', '.join(DTYPES)}, got {view.dtype}")
        if writable and not view.flags.writeable:
            raise TypeError(f"{what}: expected a writable array, got a read-only one")
    else:
        raise TypeError(f"{what}: expected a numpy array or a torch tensor, got "
                        f"{type(tensor).__name__}")
    return view


def views_of(tensors: Sequence[object], what: str, like: np.ndarray | None, world_size: int,
             writable: bool) -> list[np.ndarray]:
    """The views of a list of world_size tensors, each of ``like``'s shape and dtype (None: the
    first one's)."""
    if isinstance(tensors, (str, bytes)) or not isinstance(tensors, Sequence):
        raise TypeError(f"{what}: expected a list of {world_size} tensors, got "
                        f"{type(tensors).__name__}")
    if len(tensors) != world_size:
        raise ValueError(f"{what}: expected {world_size} tensors (world_size), got {len(tensors)}")
    views = [as_view(tensor, f"{what}[{i}]", writable) for i, tensor in enumerate(tensors)]
    like = views[0] if like is None else like
    for i, view in enumerate(views):
        if view.shape != like.shape or view.dtype != like.dtype:
            raise ValueError(f"{what}[{i}]: expected {shape_of(like)}, got {shape_of(view)}")
    return views


def check_total(whole: np.ndarray, part: np.ndarray, world_size: int, whole_name: str,
                part_name: str) -> None:
    """ValueError unless ``whole`` holds world_size × ``part``'s elements, of its dtype."""
    if whole.dtype != part.dtype or whole.size != world_size * part.size:
        raise ValueError(f"{whole_name}: expected {world_size} × {part.size} {part.dtype} "
                         f"elements (world_size × {part_name}'s), got {shape_of(whole)}")


def check_rank(rank: object, what: str, world_size: int) -> None:
    """ValueError unless ``rank`` (a ``src`` or ``dst``) is a rank of the world."""
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"{what}: expected a rank from 0 to {world_size - 1}, got {rank!r}")


def own_chunk(mine: np.ndarray, rank: int, world_size: int) -> np.ndarray:
    """An allgather's row: zeros, with this rank's tensor as chunk ``rank``."""
    row = np.zeros(mine.size * world_size, dtype=mine.dtype)
    row[rank * mine.size:(rank + 1) * mine.size] = mine.reshape(-1)
    return row


def chunk(row: np.ndarray, rank: int, world_size: int) -> np.ndarray:
    """Chunk ``rank`` of a row cut in world_size equal chunks (as the model cuts it)."""
    size = row.size // world_size
    return row[rank * size:(rank + 1) * size]


def write(view: np.ndarray, values: np.ndarray) -> None:
    """``values`` into ``view`` in place, in its shape."""
    view[...] = values.reshape(view.shape)


def write_each(views: list[np.ndarray], row: np.ndarray) -> None:
    """Chunk i of ``row`` (cut in len(views) equal chunks) into ``views[i]``."""
    for view, part in zip(views, np.split(row, len(views)), strict=True):
        write(view, part)


def check_splits(splits: object, what: str, rows: int, world_size: int) -> None:
    """ValueError unless ``splits`` (an ``all_to_all_single`` split-size list) is None or
    world_size equal splits of ``rows``: the model's all-to-all moves equal blocks only."""
    if splits is None:
        return
    equal = [rows // world_size] * world_size
    given = list(splits) if isinstance(splits, Sequence) and not isinstance(splits, str) else splits
    if given != equal:
        raise ValueError(f"{what}: unequal splits are not modelled (the simulated all-to-all "
                         f"moves equal blocks): expected None or {equal}, got {splits!r}")


def shape_of(view: np.ndarray) -> str:
    """A view's dtype and shape as a call's signature names them: ``float32[2, 3]``."""
    return f"{view.dtype.name}[{', '.join(str(n) for n in view.shape)}]"


def as_model_op(op: object) -> ModelOp:
    """The model's operator for ours, the model's own, or torch.distributed's (by its name)."""
    if isinstance(op, ReduceOp):
        return op.value
    if isinstance(op, ModelOp):
        return op
    name = getattr(op, "name", None)
    if isinstance(name, str) and name in ReduceOp.__members__:
        return ReduceOp[name].value
    raise TypeError(f"op: expected a simulator.dist.ReduceOp ({', '.join(ReduceOp.__members__)}), "
                    f"got {op!r}")


def op_suffix(op: ModelOp) -> str:
    """``, op=MAX`` for a call's signature; nothing for the default, SUM."""
    return "" if op is ModelOp.SUM else f", op={ReduceOp(op).name}"
