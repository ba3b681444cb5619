"""Chakra execution traces to and from the step's execution graph (:mod:`.graph`).

A trace is one file per rank (:mod:`.chakra_schema`: a ``GlobalMetadata`` then its nodes).
Each node becomes one :class:`~.graph.Op` of that rank, with the node's id:

================== ==================================================================
node type          operation
================== ==================================================================
``COMP_NODE``      compute of ``duration_micros`` µs (stream ``cpu`` where the
                   ``is_cpu_op`` attribute is true, else ``compute``)
``COMM_COLL_NODE`` collective ``comm_type`` of ``comm_size`` bytes on communicator
                   ``pg_name`` (the group of every rank, ``world``, where it has none)
``COMM_SEND_NODE`` send of ``comm_size`` bytes to ``comm_dst`` with ``comm_tag`` (0)
``COMM_RECV_NODE`` receive of ``comm_size`` bytes from ``comm_src`` with ``comm_tag``
the others         compute of ``duration_micros`` (``INVALID``, ``METADATA``,
                   ``MEM_LOAD``, ``MEM_STORE``: nothing here runs them)
================== ==================================================================

Attribute names and value types are those Chakra's PyTorch converter writes
(``src/converter/pytorch_converter.py``: ``comm_type``, ``comm_size`` as int64, ``pg_name``)
and ASTRA-sim's feeder reads (``src/feeder/et_feeder_node.cpp``: ``comm_src``, ``comm_dst``,
``comm_tag`` as int32); any integer value type is accepted. A node's dependencies are its
``ctrl_deps`` then its ``data_deps`` (Chakra 0.0.4's names), and a rank's operations are put in
an order where each comes after those it depends on (file order among the ready ones).

``comm_size`` is what Chakra's converter measures: the bytes of the collective's input tensors
(``src/converter/pytorch_node.py``, ``PyTorchNode.comm_size``), which ASTRA-sim takes as each
rank's contribution (``astra-sim/system/collective/Ring.cc``: an all-gather ends with
``data_size × nodes_in_ring``, a reduce-scatter with ``data_size / nodes_in_ring``).
:attr:`Op.nbytes <.graph.Op.nbytes>` is each rank's whole buffer as nccl-tests counts it, so an
all-gather's is ``comm_size`` × its communicator's size; every other collective's input is
that buffer already.

Communicators: a ``METADATA_NODE`` named ``process_group:init`` declares them as PyTorch's
execution trace records its process groups, a list whose one string is the JSON of
``[{"pg_name", "ranks", ...}]`` in ``inputs.values`` (read by ASTRA-sim's
``Workload::issue_pytorch_pg_metadata``; no ranks: every rank). It is a declaration, not an
operation. A communicator no file declares holds the ranks whose files use its name.

Collectives run on the communicator's rank 0 for a root (Chakra names no root). Not read:
tensor sizes of ``inputs``/``outputs``, ``num_ops`` (ASTRA-sim's roofline), ``involved_dim``,
gzip-compressed files and ASTRA-sim's separate communicator file
(``--comm-group-configuration``). The writer (:mod:`.chakra_write`) records two attributes of
its own, ``stream_name`` and ``duration_s`` (exact seconds), so that a graph read back is the
graph written; where a node has them they are taken over the defaults above.
"""

from __future__ import annotations

import ast
import heapq
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from simulator.errors import InputError, Problem, quoted
from simulator.model.collective import Collective
from simulator.training.chakra_schema import (
    COMM_TYPES,
    INTEGER_VALUES,
    NODE_TYPES,
    Schema,
    frames,
    schema,
)
from simulator.training.graph import Group, Op, OpKind, Program, StepGraph

COLLECTIVES = {"ALL_REDUCE": Collective.ALLREDUCE, "ALL_GATHER": Collective.ALLGATHER,
               "REDUCE_SCATTER": Collective.REDUCE_SCATTER, "ALL_TO_ALL": Collective.ALLTOALL,
               "BROADCAST": Collective.BROADCAST, "REDUCE": Collective.REDUCE}
"""The ``CollectiveCommType`` values run here, as collectives (GATHER, SCATTER,
REDUCE_SCATTER_BLOCK and BARRIER are not)."""

KINDS = {"COMP_NODE": OpKind.COMPUTE, "COMM_COLL_NODE": OpKind.COLLECTIVE,
         "COMM_SEND_NODE": OpKind.SEND, "COMM_RECV_NODE": OpKind.RECV}
"""Node types as operations; every other type is a zero-cost compute."""

WORLD = "world"
"""The communicator of a collective without ``pg_name``: every rank (ASTRA-sim's default)."""

PG_INIT = "## process_group:init ##"
"""The name PyTorch's execution trace gives the node declaring its process groups (Chakra's
``tests/converter/test_pytorch_node.py``); a metadata node whose name holds
``process_group:init`` declares."""

UINT64 = 1 << 64
"""Node ids are uint64 (et_def.proto ``Node.id``)."""


def graph_from_chakra(files: Sequence[tuple[str, bytes]]) -> StepGraph:
    """The step ``files`` (rank r's (name, bytes) at position r) hold; InputError, one line
    naming the file and the node, where one is not a sound Chakra trace of this step. What it
    returns passes :func:`~.graph.graph_problems`: every check of it is made here first, where
    the file and node can be named."""
    messages = schema(files[0][0] if files else "chakra")
    declared: dict[str, tuple[tuple[int, ...], str]] = {}
    programs: list[list[Op]] = []
    for rank, (file, data) in enumerate(files):
        if not data:
            raise InputError([Problem(file, "", "empty: expected a GlobalMetadata message, "
                                                "then nodes")])
        ops: list[Op] = []
        declarations: set[int] = set()
        for index, body in enumerate(frames(data, file)):
            if index == 0:
                _parse(messages.metadata, body, file, "message 0 (GlobalMetadata)", messages)
                continue
            node = _parse(messages.node, body, file, f"message {index} (Node)", messages)
            if node.type == NODE_TYPES.index("METADATA_NODE") and "process_group:init" in \
                    node.name:
                _declare(node, file, len(files), declared)
                declarations.add(node.id)
            else:
                ops.append(_op(node, rank, file, len(files)))
        programs.append(_ordered([replace(op, deps=tuple(
            dep for dep in op.deps if dep not in declarations)) if declarations else op
            for op in ops], file))
    groups = _groups(programs, declared, [file for file, _ in files])
    sizes = {group.name: len(group.ranks) for group in groups}
    return StepGraph(tuple(Program(rank, tuple(
        replace(op, nbytes=op.nbytes * sizes[op.group]) if op.collective is Collective.ALLGATHER
        else op for op in ops)) for rank, ops in enumerate(programs)), groups)


def _parse(kind: Any, body: bytes, file: str, where: str, messages: Schema) -> Any:
    """``body`` parsed as message class ``kind``; InputError naming ``where`` otherwise."""
    message = kind()
    try:
        message.ParseFromString(body)
    except messages.decode_error:
        raise InputError([Problem(file, where, f"expected a {kind.DESCRIPTOR.name} message "
                                               "of et_def.proto")]) from None
    return message


def _where(node: Any) -> str:
    """A node as an error names it."""
    return f"node {node.id} ({node.name})" if node.name else f"node {node.id}"


def _attribute(node: Any, name: str, file: str, required: str) -> Any:
    """The node's first attribute named ``name``; None where it has none and ``required`` is
    empty, else InputError saying what it should hold."""
    for attr in node.attr:
        if attr.name == name:
            return attr
    if required:
        raise InputError([Problem(file, _where(node), f"missing attr {name}: expected {required}")])
    return None


def _integer(node: Any, name: str, file: str, required: str = "") -> int | None:
    """The integer attribute ``name`` (any integer value type), at least 0."""
    attr = _attribute(node, name, file, required)
    if attr is None:
        return None
    kind = attr.WhichOneof("value")
    value = getattr(attr, kind) if kind in INTEGER_VALUES else None
    if value is None or value < 0:
        got = f"{kind} {value}" if value is not None else (kind or "no value")
        raise InputError([Problem(file, f"{_where(node)}: attr {name}",
                                  f"expected an integer ≥ 0, got {got}")])
    return int(value)


def _string(node: Any, name: str, file: str) -> str | None:
    """The string attribute ``name``, None where the node has none."""
    attr = _attribute(node, name, file, "")
    if attr is None:
        return None
    if attr.WhichOneof("value") != "string_val":
        raise InputError([Problem(file, f"{_where(node)}: attr {name}",
                                  f"expected a string, got {attr.WhichOneof('value')}")])
    return str(attr.string_val)


def _op(node: Any, rank: int, file: str, ranks: int) -> Op:
    """One node of rank ``rank``'s file as an operation (an all-gather's ``nbytes`` still its
    ``comm_size``: the communicator's size is known once every file is read)."""
    if not 0 <= node.type < len(NODE_TYPES):
        raise InputError([Problem(file, f"{_where(node)}: type", (
            f"{node.type}: expected a NodeType of et_def.proto (0..{len(NODE_TYPES) - 1})"))])
    kind = KINDS.get(NODE_TYPES[node.type], OpKind.COMPUTE)
    deps = tuple(dict.fromkeys([*node.ctrl_deps, *node.data_deps]))
    stream = _string(node, "stream_name", file)
    if kind is OpKind.COMPUTE:
        exact = _attribute(node, "duration_s", file, "")
        cpu = _attribute(node, "is_cpu_op", file, "")
        held = "double_val" if exact is None else exact.WhichOneof("value")
        seconds = node.duration_micros * 1e-6 if exact is None else exact.double_val
        if held != "double_val" or not 0 <= seconds < math.inf:
            raise InputError([Problem(file, f"{_where(node)}: attr duration_s", (
                "expected a duration of seconds ≥ 0 (a double_val), got "
                f"{seconds if held == 'double_val' else held}"))])
        return Op(node.id, node.name, kind, deps, duration_s=seconds, stream=stream or (
            "cpu" if cpu is not None and cpu.bool_val else "compute"))
    nbytes = _integer(node, "comm_size", file, "the bytes it moves")
    group = _string(node, "pg_name", file)
    if kind is OpKind.COLLECTIVE:
        number = _integer(node, "comm_type", file, "a CollectiveCommType")
        name = COMM_TYPES[number] if number is not None and number < len(COMM_TYPES) else \
            str(number)
        if name not in COLLECTIVES:
            raise InputError([Problem(file, f"{_where(node)}: attr comm_type", (
                f"{name}: expected one of {', '.join(COLLECTIVES)}"))])
        group = group or WORLD
        return Op(node.id, node.name, kind, deps, collective=COLLECTIVES[name], group=group,
                  nbytes=nbytes or 0, stream=stream or group)
    mine, theirs = ("comm_src", "comm_dst") if kind is OpKind.SEND else ("comm_dst", "comm_src")
    peer = _integer(node, theirs, file, "the peer's rank")
    if _integer(node, mine, file) not in (None, rank):
        raise InputError([Problem(file, f"{_where(node)}: attr {mine}",
                                  f"expected this file's rank, {rank}")])
    if peer is None or peer >= ranks or peer == rank:
        raise InputError([Problem(file, f"{_where(node)}: attr {theirs}", (
            f"{peer}: expected another rank of 0..{ranks - 1}"))])
    return Op(node.id, node.name, kind, deps, nbytes=nbytes or 0, peer=peer,
              tag=_integer(node, "comm_tag", file) or 0, stream=stream or group or "p2p")


def _declare(node: Any, file: str, ranks: int,
             declared: dict[str, tuple[tuple[int, ...], str]]) -> None:
    """Add the process groups a ``process_group:init`` node declares to ``declared`` (name ->
    ranks, file first declaring it); InputError where they do not parse or disagree."""
    where = f"{_where(node)}: inputs.values"
    expected = ("expected a list holding the JSON list of process groups, each with its pg_name "
                "and ranks")
    try:
        outer = ast.literal_eval(node.inputs.values)
        entries = json.loads(outer[0]) if isinstance(outer, list) and outer and isinstance(
            outer[0], str) else None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        entries = None
    if not isinstance(entries, list) or not all(
            isinstance(entry, dict) and isinstance(entry.get("pg_name"), str)
            and isinstance(entry.get("ranks"), list)
            and all(type(r) is int and 0 <= r < ranks for r in entry["ranks"])
            for entry in entries):
        raise InputError([Problem(file, where, f"{expected} (ranks of 0..{ranks - 1})")])
    for entry in entries:
        members = tuple(entry["ranks"]) or tuple(range(ranks))
        first = declared.setdefault(entry["pg_name"], (members, file))
        if first[0] != members:
            raise InputError([Problem(file, where, (
                f"process group {quoted(entry['pg_name'])} holds ranks {list(members)}: expected "
                f"{list(first[0])}, as {first[1]} declares it"))])


def _ordered(ops: list[Op], file: str) -> list[Op]:
    """A rank's operations in an order where each follows its dependencies, the earliest in
    the file first among those ready; InputError on a duplicate id, an unknown dependency or
    a cycle."""
    position: dict[int, int] = {}
    for index, op in enumerate(ops):
        if position.setdefault(op.id, index) != index:
            raise InputError([Problem(file, f"node {op.id}", "expected a unique id, got it twice")])
    waiting = [0] * len(ops)
    children: list[list[int]] = [[] for _ in ops]
    for index, op in enumerate(ops):
        for dep in op.deps:
            if dep not in position:
                raise InputError([Problem(file, f"node {op.id} ({op.name})", (
                    f"depends on node {dep}: expected a node of this file"))])
            children[position[dep]].append(index)
            waiting[index] += 1
    ready = [index for index, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order: list[Op] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(ops[index])
        for child in children[index]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, child)
    if len(order) < len(ops):
        stuck = [str(op.id) for op, count in zip(ops, waiting, strict=True) if count][:4]
        raise InputError([Problem(file, f"nodes {', '.join(stuck)}", (
            "wait for each other: expected dependencies without a cycle"))])
    return order


def _groups(programs: list[list[Op]], declared: dict[str, tuple[tuple[int, ...], str]],
            files: list[str]) -> tuple[Group, ...]:
    """The communicators: those declared, in order, then the others, in order of first use,
    each the ranks using it (``world``: every rank); InputError on a rank using a declared
    communicator it is not in."""
    used: dict[str, list[int]] = {}
    for rank, ops in enumerate(programs):
        for op in ops:
            if op.kind is OpKind.COLLECTIVE:
                members = used.setdefault(op.group, [])
                if rank not in members:
                    members.append(rank)
                held = declared.get(op.group, ((rank,), ""))[0]
                if rank not in held:
                    raise InputError([Problem(files[rank], f"node {op.id} ({op.name}): "
                                              "attr pg_name", (
                        f"{quoted(op.group)}: expected a process group holding rank {rank}, it is "
                        f"declared with ranks {list(held)}"))])
    everyone = tuple(range(len(programs)))
    return (*(Group(name, ranks) for name, (ranks, _) in declared.items()),
            *(Group(name, everyone if name == WORLD else tuple(ranks))
              for name, ranks in used.items() if name not in declared))
