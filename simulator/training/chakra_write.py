"""A step's execution graph as Chakra execution traces, one file's bytes per rank: the inverse
of :func:`simulator.training.chakra.graph_from_chakra` (whose docstring says what each node
type and attribute means), so that a graph written and read back is the graph written, its
batched operations unbatched (:func:`unbatched`).

Each file is a ``GlobalMetadata`` (version 0.0.4, Chakra's schema the names follow), then a
``process_group:init`` metadata node declaring every communicator as PyTorch's execution trace
does (``pg_name``, ``pg_desc``, ``pg_size``, ``ranks``), then one node per operation in issue
order, its dependencies as ``data_deps`` (what ASTRA-sim schedules on). Attributes take the
value types Chakra's converter and ASTRA-sim's feeder use (``comm_size`` and ``comm_type``
int64, ``comm_src``/``comm_dst``/``comm_tag`` int32, ``pg_name`` string); a compute also keeps
its exact ``duration_s`` (double) beside ``duration_micros`` (whole µs), and every node its
``stream_name``. ASTRA-sim reads communicator names as integers (``std::stoi``), so a graph
meant for it names its communicators ``"0"``, ``"1"``, ...
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from simulator.errors import InputError, Problem
from simulator.model.collective import Collective
from simulator.training.chakra import COLLECTIVES, KINDS, PG_INIT, UINT64
from simulator.training.chakra_schema import COMM_TYPES, NODE_TYPES, Schema, frame, schema
from simulator.training.graph import Op, OpKind, Program, StepGraph, graph_problems

INT32 = 1 << 31
"""``comm_src``, ``comm_dst`` and ``comm_tag`` are int32 attributes (ASTRA-sim's feeder)."""

INT64 = 1 << 63
"""``comm_size`` is an int64 attribute (Chakra's converter, ASTRA-sim's feeder)."""


def unbatched(graph: StepGraph) -> StepGraph:
    """``graph`` with every operation of ``count`` k > 1 made k chained operations of count 1,
    as a trace holds it: the last keeps the id (so what waits for the operation waits for all
    k), the others take the rank's next free ids in order, each after the one before."""
    programs = []
    for program in graph.programs:
        free = max((op.id for op in program.ops), default=-1) + 1
        ops: list[Op] = []
        for op in program.ops:
            deps = op.deps
            for copy in range(op.count - 1):
                ops.append(replace(op, id=free + copy, deps=deps, count=1))
                deps = (free + copy,)
            free += op.count - 1
            ops.append(replace(op, deps=deps, count=1))
        programs.append(Program(program.rank, tuple(ops)))
    return StepGraph(tuple(programs), graph.groups)


def chakra_from_graph(graph: StepGraph, source: str) -> list[bytes]:
    """Each rank's trace file of ``graph`` (:func:`unbatched`, after the ``process_group:init``
    declaration of every communicator); InputError naming ``source`` and the operation where
    the graph cannot run (:func:`~.graph.graph_problems`) or an operation has no Chakra form."""
    problems = graph_problems(graph)
    if problems:
        raise InputError([Problem(source, "", problems[0])])
    messages = schema(source)
    flat = unbatched(graph)
    sizes = {group.name: len(group.ranks) for group in graph.groups}
    pgs = json.dumps([{"pg_name": group.name, "pg_desc": group.name, "pg_size": len(group.ranks),
                       "ranks": list(group.ranks)} for group in graph.groups])
    files = []
    for program in flat.programs:
        for op in program.ops:
            refused = _refusal(op, sizes)
            if refused:
                raise InputError([Problem(source, f"rank {program.rank} op {op.id} ({op.name})",
                                          refused)])
        body = [messages.metadata(version="0.0.4").SerializeToString()]
        free = max((op.id for op in program.ops), default=-1) + 1
        if graph.groups:
            if free == UINT64:
                raise InputError([Problem(source, f"rank {program.rank}", (
                    "expected an id below 2^64-1 free for the process groups' declaration"))])
            declaration = messages.node(id=free, name=PG_INIT,
                                        type=NODE_TYPES.index("METADATA_NODE"))
            declaration.inputs.values, declaration.inputs.types = str([pgs]), str(["String"])
            body.append(declaration.SerializeToString())
        body += [_node(messages, op, program.rank, sizes).SerializeToString()
                 for op in program.ops]
        files.append(frame(body))
    return files


def _refusal(op: Op, sizes: dict[str, int]) -> str:
    """Why ``op`` (of a sound graph) has no Chakra form, in words; empty where it has one."""
    if not 0 <= op.id < UINT64 or not all(0 <= dep < UINT64 for dep in op.deps):
        return "expected ids of 0..2^64-1 (Chakra's node ids are uint64)"
    if not op.duration_s * 1e6 < UINT64:
        return f"{op.duration_s} s: expected fewer than 2^64 µs (duration_micros is uint64)"
    if op.collective is not None and op.collective not in COLLECTIVES.values():
        return (f"{op.collective.value}: expected a collective Chakra names "
                f"({', '.join(kind.value for kind in COLLECTIVES.values())})")
    if op.nbytes >= INT64 or not 0 <= op.tag < INT32:
        return (f"{op.nbytes} bytes, tag {op.tag}: expected bytes below 2^63 (comm_size is "
                "int64) and a tag of 0..2^31-1 (comm_tag is int32)")
    if op.collective is Collective.ALLGATHER and op.nbytes % sizes[op.group]:
        return (f"all-gather of {op.nbytes} bytes on {sizes[op.group]} ranks: expected a "
                "multiple of the ranks (Chakra's comm_size is each rank's share)")
    return ""


def _node(messages: Schema, op: Op, rank: int, sizes: dict[str, int]) -> Any:
    """One operation of rank ``rank`` (one :func:`_refusal` accepts) as a Chakra node."""
    type_name = next(name for name, kind in KINDS.items() if kind is op.kind)
    node = messages.node(id=op.id, name=op.name, type=NODE_TYPES.index(type_name),
                         data_deps=op.deps)

    def attr(name: str, form: str, value: object) -> None:
        """Add attribute ``name`` holding ``value`` in field ``form``."""
        setattr(node.attr.add(name=name), form, value)

    attr("stream_name", "string_val", op.stream)
    if op.kind is OpKind.COMPUTE:
        node.duration_micros = round(op.duration_s * 1e6)
        attr("duration_s", "double_val", op.duration_s)
        attr("is_cpu_op", "bool_val", op.stream == "cpu")
        return node
    share = sizes[op.group] if op.collective is Collective.ALLGATHER else 1
    attr("comm_size", "int64_val", op.nbytes // share)
    if op.kind is OpKind.COLLECTIVE:
        chakra = next(name for name, kind in COLLECTIVES.items() if kind is op.collective)
        attr("comm_type", "int64_val", COMM_TYPES.index(chakra))
        attr("pg_name", "string_val", op.group)
        return node
    source_rank, target = (rank, op.peer) if op.kind is OpKind.SEND else (op.peer, rank)
    attr("comm_src", "int32_val", source_rank)
    attr("comm_dst", "int32_val", target)
    attr("comm_tag", "int32_val", op.tag)
    return node
