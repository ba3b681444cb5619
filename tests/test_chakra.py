"""Chakra execution traces in and out: a hand-encoded 4-rank trace read to the exact step graph,
the writer's round trip and on-disk layout, and every malformed input's one-line error.

Messages are encoded here by hand from et_def.proto's field numbers (mlcommons/chakra
schema/protobuf/et_def.proto), independently of simulator/training/chakra_schema.py, so a
wrong field number there fails these tests."""

import json
import math
import struct
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.model.collective import Collective
from simulator.output.chakra import write_chakra
from simulator.scenario import chakra as scenario_chakra
from simulator.scenario.chakra import read_chakra
from simulator.training import chakra_schema
from simulator.training.chakra import graph_from_chakra
from simulator.training.chakra_write import chakra_from_graph, unbatched
from simulator.training.graph import Group, Op, OpKind, Program, StepGraph, graph_problems
from tests.conftest import REPO

# et_def.proto: NodeType and CollectiveCommType numbers
METADATA, MEM_LOAD, COMP, SEND, RECV, COLL = 1, 2, 4, 5, 6, 7
ALL_REDUCE, ALL_GATHER, GATHER = 0, 2, 3
BIG = (1 << 63) + 5  # a node id beyond int64: ids are uint64


def varint(value: int) -> bytes:
    """Base-128, low group first; a negative int64 as its 64-bit two's complement."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append(0x80 | value & 0x7F)
        value >>= 7
    return bytes(out + bytes([value]))


def number(field: int, value: int) -> bytes:
    """A varint field (wire type 0)."""
    return varint(field << 3) + varint(value)


def chunk(field: int, value: bytes | str) -> bytes:
    """A length-delimited field (wire type 2)."""
    data = value.encode() if isinstance(value, str) else value
    return varint(field << 3 | 2) + varint(len(data)) + data


def attr(name: str, **value: float | str | bool) -> bytes:
    """AttributeProto: name = 1; double_val = 3 (wire type 1), int32_val = 7, int64_val = 9,
    bool_val = 27, string_val = 29."""
    fields = {"double_val": 3, "int32_val": 7, "int64_val": 9, "bool_val": 27, "string_val": 29}
    (kind, val), = value.items()
    if isinstance(val, str):
        body = chunk(fields[kind], val)
    elif isinstance(val, float):
        body = varint(fields[kind] << 3 | 1) + struct.pack("<d", val)
    else:
        body = number(fields[kind], int(val))
    return chunk(10, chunk(1, name) + body)


def node(node_id: int, name: str, kind: int, *fields: bytes, ctrl: tuple[int, ...] = (),
         data: tuple[int, ...] = (), micros: int = 0) -> bytes:
    """Node: id 1, name 2, type 3, ctrl_deps 4 (one field each), data_deps 5 (packed),
    duration_micros 7, attr 10."""
    body = number(1, node_id) + chunk(2, name) + number(3, kind)
    body += b"".join(number(4, dep) for dep in ctrl)
    if data:
        body += chunk(5, b"".join(varint(dep) for dep in data))
    return body + (number(7, micros) if micros else b"") + b"".join(fields)


def trace(*nodes: bytes) -> bytes:
    """A file: GlobalMetadata (version = 1) then the nodes, each after its varint length."""
    return b"".join(varint(len(m)) + m for m in (chunk(1, "0.0.4"), *nodes))


def pg_init(node_id: int, groups: list[dict[str, object]]) -> bytes:
    """PyTorch's process-group declaration: inputs (IOInfo = 8) values (1) = str([json])."""
    return node(node_id, "## process_group:init ##", METADATA,
                chunk(8, chunk(1, str([json.dumps(groups)]))))


def coll(node_id: int, comm_type: int, size: int, pg: str, **deps: tuple[int, ...]) -> bytes:
    return node(node_id, "nccl:" + ("all_gather" if comm_type else "all_reduce"), COLL,
                attr("comm_type", int64_val=comm_type), attr("comm_size", int64_val=size),
                attr("pg_name", string_val=pg), **deps)


def write(directory: Path, files: dict[str, bytes]) -> Path:
    directory.mkdir(exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return directory


def four_ranks() -> dict[str, bytes]:
    """Forward, a world allreduce (pg "0", declared), then rank 0 sends to rank 1 and ranks 2, 3
    all-gather on pg "7" (undeclared); rank 1 lists its backward before its receive, rank 3
    has a MEM_LOAD node."""
    declared = pg_init(9, [{"pg_name": "0", "pg_desc": "default_pg", "ranks": []}])
    fwd = node(BIG, "fwd", COMP, micros=1500, ctrl=(9,))
    reduce = coll(101, ALL_REDUCE, 1 << 20, "0", ctrl=(BIG,))
    return {
        "llama.0.et": trace(declared, fwd, reduce, node(
            102, "send", SEND, attr("comm_dst", int32_val=1), attr("comm_tag", int32_val=3),
            attr("comm_size", int64_val=4096), data=(101,))),
        "llama.1.et": trace(declared, fwd, reduce, node(
            103, "bwd", COMP, attr("is_cpu_op", bool_val=False), micros=2000, data=(102,)),
            node(102, "recv", RECV, attr("comm_src", int32_val=0), attr("comm_dst", int32_val=1),
                 attr("comm_tag", int32_val=3), attr("comm_size", int64_val=4096),
                 ctrl=(101,), data=(101,))),
        "llama.2.et": trace(declared, fwd, reduce, coll(104, ALL_GATHER, 2048, "7", data=(101,))),
        "llama.3.et": trace(declared, fwd, reduce, coll(104, ALL_GATHER, 2048, "7", data=(101,)),
                            node(105, "load", MEM_LOAD, data=(104,))),
        "notes.txt": b"not a trace",
    }


def test_a_hand_encoded_four_rank_trace_reads_to_its_step(tmp_path):
    graph = read_chakra(write(tmp_path / "et", four_ranks()))
    fwd = Op(BIG, "fwd", OpKind.COMPUTE, duration_s=1500e-6)
    reduce = Op(101, "nccl:all_reduce", OpKind.COLLECTIVE, (BIG,),
                collective=Collective.ALLREDUCE, group="0", nbytes=1 << 20, stream="0")
    # comm_size 2048 is each rank's share: the gathered buffer of 2 ranks is 4096 bytes
    gather = Op(104, "nccl:all_gather", OpKind.COLLECTIVE, (101,),
                collective=Collective.ALLGATHER, group="7", nbytes=4096, stream="7")
    assert graph == StepGraph((
        Program(0, (fwd, reduce, Op(102, "send", OpKind.SEND, (101,), nbytes=4096, peer=1,
                                    tag=3, stream="p2p"))),
        Program(1, (fwd, reduce, Op(102, "recv", OpKind.RECV, (101,), nbytes=4096, peer=0,
                                    tag=3, stream="p2p"),
                    Op(103, "bwd", OpKind.COMPUTE, (102,), duration_s=2000e-6))),
        Program(2, (fwd, reduce, gather)),
        Program(3, (fwd, reduce, gather, Op(105, "load", OpKind.COMPUTE, (104,))))),
        (Group("0", (0, 1, 2, 3)), Group("7", (2, 3))))


def every_kind() -> StepGraph:
    """Three ranks: every collective Chakra names, sends and receives, computes on two streams,
    counts above 1, three communicators (one of two ranks, in an order not sorted)."""
    ops = [Op(0, "fwd", OpKind.COMPUTE, duration_s=1.234567e-3)]
    for index, kind in enumerate(Collective):
        if kind is not Collective.SENDRECV:
            ops.append(Op(10 + index, kind.value, OpKind.COLLECTIVE, (ops[-1].id,),
                          collective=kind, group="world", nbytes=3 * 1024, count=1 + index % 3,
                          stream="dp"))
    programs = [Program(rank, (*ops, Op(40, "tp", OpKind.COLLECTIVE, (0,),
                                        collective=Collective.ALLGATHER, group="tp",
                                        nbytes=512, count=2, stream="tp")))
                for rank in (0, 1)]
    programs[0] = Program(0, (*programs[0].ops, Op(
        50, "act", OpKind.SEND, (40,), nbytes=777, peer=2, tag=9, count=2, stream="pp")))
    programs.append(Program(2, (*ops, Op(50, "act", OpKind.RECV, nbytes=777, peer=0, tag=9,
                                         count=2, stream="pp"),
                                Op(51, "opt", OpKind.COMPUTE, (50, 0), duration_s=0.5,
                                   stream="cpu"))))
    return StepGraph(tuple(programs), (Group("world", (0, 1, 2)), Group("tp", (1, 0)),
                                       Group("unused", (2,))))


def test_a_written_step_reads_back_unbatched(tmp_path):
    graph = every_kind()
    paths = write_chakra(graph, tmp_path / "out", prefix="mix")
    assert [path.name for path in paths] == ["mix.0.et", "mix.1.et", "mix.2.et"]
    back = read_chakra(tmp_path / "out")
    assert back == unbatched(graph)
    assert graph_problems(back) == []
    # rank 0's all-gather of count 3: fresh ids 51, 52 (after its largest, 50), then its own
    gathers = [op for op in back.programs[0].ops if op.name == "allgather"]
    assert [(op.id, op.deps, op.count) for op in gathers] == [
        (52, (11,), 1), (53, (52,), 1), (12, (53,), 1)]  # 51 went to the reduce-scatter's
    assert back.programs[2].ops[-1].deps == (50, 0)  # waits for the last receive of the two
    assert [op.id for op in back.programs[2].ops[-3:]] == [58, 50, 51]


def read_varint(data: bytes, at: int) -> tuple[int, int]:
    """The varint at ``data[at]`` and where it ends."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def fields(message: bytes) -> list[tuple[int, int | bytes]]:
    """A protobuf message's (field number, value) pairs, decoded by hand: a varint's value, a
    64-bit or length-delimited field's bytes."""
    out: list[tuple[int, int | bytes]] = []
    at = 0
    while at < len(message):
        key, at = read_varint(message, at)
        if key & 7 == 0:
            value, at = read_varint(message, at)
            out.append((key >> 3, value))
            continue
        length = 8 if key & 7 == 1 else None
        if length is None:
            assert key & 7 == 2
            length, at = read_varint(message, at)
        out.append((key >> 3, message[at:at + length]))
        at += length
    return out


def test_the_files_written_hold_global_metadata_then_nodes_by_et_def_numbers(tmp_path):
    gather = Op(8, "ag", OpKind.COLLECTIVE, collective=Collective.ALLGATHER, group="g",
                nbytes=4096, stream="dp")
    graph = StepGraph((Program(0, (Op(7, "fwd", OpKind.COMPUTE, duration_s=2.5e-6),
                                   replace(gather, deps=(7,)))),
                       Program(1, (gather,))), (Group("g", (0, 1)),))
    data = write_chakra(graph, tmp_path)[0].read_bytes()
    messages, at = [], 0
    while at < len(data):
        length, at = read_varint(data, at)
        messages.append(data[at:at + length])
        at += length
    assert fields(messages[0]) == [(1, b"0.0.4")]  # GlobalMetadata.version
    pg = dict(fields(messages[1]))
    assert (pg[1], pg[2], pg[3]) == (9, b"## process_group:init ##", METADATA)  # id 9: 8 + 1
    assert fields(pg[8]) == [(1, str([json.dumps([{  # IOInfo values, then types
        "pg_name": "g", "pg_desc": "g", "pg_size": 2, "ranks": [0, 1]}])]).encode()),
        (3, b"['String']")]
    compute = fields(messages[2])
    assert compute[:4] == [(1, 7), (2, b"fwd"), (3, COMP), (7, 2)]  # 2.5 µs, rounded to even
    assert [fields(value) for _, value in compute[4:]] == [
        [(1, b"stream_name"), (29, b"compute")],
        [(1, b"duration_s"), (3, struct.pack("<d", 2.5e-6))], [(1, b"is_cpu_op"), (27, 0)]]
    written = fields(messages[3])
    assert written[:4] == [(1, 8), (2, b"ag"), (3, COLL), (5, b"\x07")]  # data_deps packed
    assert [fields(value) for _, value in written[4:]] == [
        [(1, b"stream_name"), (29, b"dp")], [(1, b"comm_size"), (9, 2048)],  # 4096 / 2 ranks
        [(1, b"comm_type"), (9, ALL_GATHER)], [(1, b"pg_name"), (29, b"g")]]
    assert len(messages) == 4


def broken(tmp_path: Path, *nodes: bytes, raw: bytes | None = None) -> str:
    """The one-line error of a 2-rank directory whose rank 1 holds ``nodes`` (or ``raw``)."""
    ok = trace(node(1, "ar", COLL, attr("comm_type", int64_val=ALL_REDUCE),
                    attr("comm_size", int64_val=8)))
    write(tmp_path / "bad", {"s.0.et": ok, "s.1.et": trace(*nodes) if raw is None else raw})
    with pytest.raises(InputError) as error:
        read_chakra(tmp_path / "bad")
    assert len(error.value.problems) == 1
    return str(error.value).replace(str(tmp_path / "bad") + "/", "")


SIZE = attr("comm_size", int64_val=8)


@pytest.mark.parametrize(("nodes", "raw", "message"), [
    ((), b"\x85", "s.1.et: message 0 at byte 0: truncated length: expected a varint, the file "
                  "ends inside it"),
    ((), b"\xff\xff\xff\xff\xff\x01", "s.1.et: message 0 at byte 0: expected a length of at "
                                      "most 5 varint bytes"),
    ((), b"\x02\x0a\x00\x05ab", "s.1.et: message 1 at byte 3: expected 5 bytes, the file has "
                                "2 left"),
    ((), b"\x00", "s.1.et: message 0 at byte 0: length 0: expected a message (Chakra's reader "
                  "stops at an empty one)"),
    ((), b"", "s.1.et: empty: expected a GlobalMetadata message, then nodes"),
    ((b"\x0a\x05ab",), None, "s.1.et: message 1 (Node): expected a Node message of et_def.proto"),
    ((node(1, "x", 9),), None, "s.1.et: node 1 (x): type: 9: expected a NodeType of "
                               "et_def.proto (0..7)"),
    ((node(1, "g", COLL, attr("comm_type", int64_val=GATHER), SIZE),), None,
     "s.1.et: node 1 (g): attr comm_type: GATHER: expected one of ALL_REDUCE, ALL_GATHER, "
     "REDUCE_SCATTER, ALL_TO_ALL, BROADCAST, REDUCE"),
    ((node(1, "g", COLL, attr("comm_type", int64_val=42), SIZE),), None,
     "s.1.et: node 1 (g): attr comm_type: 42: expected one of ALL_REDUCE, ALL_GATHER, "
     "REDUCE_SCATTER, ALL_TO_ALL, BROADCAST, REDUCE"),
    ((node(1, "g", COLL, attr("comm_type", int64_val=ALL_REDUCE)),), None,
     "s.1.et: node 1 (g): missing attr comm_size: expected the bytes it moves"),
    ((node(1, "g", COLL, attr("comm_type", string_val="ALL_REDUCE"), SIZE),), None,
     "s.1.et: node 1 (g): attr comm_type: expected an integer ≥ 0, got string_val"),
    ((node(1, "g", COLL, attr("comm_type", int64_val=ALL_REDUCE),
           attr("comm_size", int64_val=-8)),), None,
     "s.1.et: node 1 (g): attr comm_size: expected an integer ≥ 0, got int64_val -8"),
    ((node(1, "c", COMP, attr("duration_s", double_val=-1.5)),), None,
     "s.1.et: node 1 (c): attr duration_s: expected a duration of seconds ≥ 0 (a double_val), "
     "got -1.5"),
    ((node(1, "c", COMP, attr("duration_s", double_val=math.inf)),), None,
     "s.1.et: node 1 (c): attr duration_s: expected a duration of seconds ≥ 0 (a double_val), "
     "got inf"),
    ((node(1, "c", COMP, attr("duration_s", int64_val=2)),), None,
     "s.1.et: node 1 (c): attr duration_s: expected a duration of seconds ≥ 0 (a double_val), "
     "got int64_val"),
    ((node(1, "s", SEND, SIZE),), None, "s.1.et: node 1 (s): missing attr comm_dst: expected "
                                        "the peer's rank"),
    ((node(1, "s", SEND, SIZE, attr("comm_dst", int32_val=1)),), None,
     "s.1.et: node 1 (s): attr comm_dst: 1: expected another rank of 0..1"),
    ((node(1, "r", RECV, SIZE, attr("comm_src", int32_val=0), attr("comm_dst", int32_val=0)),),
     None, "s.1.et: node 1 (r): attr comm_dst: expected this file's rank, 1"),
    ((node(1, "a", COMP, data=(2,)),), None,
     "s.1.et: node 1 (a): depends on node 2: expected a node of this file"),
    ((node(1, "a", COMP), node(1, "b", COMP)), None,
     "s.1.et: node 1: expected a unique id, got it twice"),
    ((node(1, "a", COMP, data=(2,)), node(2, "b", COMP, ctrl=(1,)), node(3, "c", COMP)), None,
     "s.1.et: nodes 1, 2: wait for each other: expected dependencies without a cycle"),
    ((pg_init(5, [{"pg_name": "0", "ranks": [0, 2]}]),), None,
     "s.1.et: node 5 (## process_group:init ##): inputs.values: expected a list holding the "
     "JSON list of process groups, each with its pg_name and ranks (ranks of 0..1)"),
    ((pg_init(5, [{"pg_name": "world", "ranks": [1]}]),), None,
     "s.0.et: node 1 (ar): attr pg_name: 'world': expected a process group holding rank 0, it "
     "is declared with ranks [1]"),
])
def test_each_malformed_trace_is_one_line_naming_the_file(tmp_path, nodes, raw, message):
    assert broken(tmp_path, *nodes, raw=raw) == message


def test_two_files_declaring_one_group_differently(tmp_path):
    write(tmp_path / "d", {"s.0.et": trace(pg_init(1, [{"pg_name": "0", "ranks": [0, 1]}])),
                           "s.1.et": trace(pg_init(1, [{"pg_name": "0", "ranks": [1, 0]}]))})
    with pytest.raises(InputError, match=(
            r"s\.1\.et: node 1 \(## process_group:init ##\): inputs\.values: process group '0' "
            r"holds ranks \[1, 0\]: expected \[0, 1\], as .*/s\.0\.et declares it$")):
        read_chakra(tmp_path / "d")


@pytest.mark.parametrize(("names", "message"), [
    (["s.0.et", "s.2.et"], "s.1.et: expected every rank of 0..2, rank 1 is missing"),
    (["s.0.et", "t.0.et"], "expected the traces of one prefix (<prefix>.<rank>.et), found s, t"),
    (["s.01.et", "notes"], "expected the traces of one prefix (<prefix>.<rank>.et), found none"),
])
def test_a_directory_not_one_set_of_ranks(tmp_path, names, message):
    write(tmp_path / "d", dict.fromkeys(names, trace()))
    with pytest.raises(InputError) as error:
        read_chakra(tmp_path / "d")
    assert str(error.value) == f"{tmp_path / 'd'}: {message}"


def test_files_beyond_the_limits_are_refused_before_they_are_read(tmp_path, monkeypatch):
    write(tmp_path / "d", {"s.0.et": trace(node(1, "a", COMP)), "s.1.et": trace()})
    monkeypatch.setattr(scenario_chakra, "MAX_CHAKRA_BYTES", 8 << 20)
    monkeypatch.setattr(scenario_chakra, "MAX_CHAKRA_TOTAL_BYTES", 20)
    with pytest.raises(InputError) as error:
        read_chakra(tmp_path / "d")
    assert str(error.value) == (f"{tmp_path / 'd'}: expected at most 0 MiB of traces, s.1.et "
                                "takes it beyond")
    (tmp_path / "d" / "s.0.et").write_bytes(bytes(9 << 20))
    with pytest.raises(InputError) as error:
        read_chakra(tmp_path / "d")
    assert str(error.value) == f"{tmp_path / 'd' / 's.0.et'}: expected at most 8 MiB, got a " \
                               "larger file"


def test_the_writer_refuses_what_chakra_cannot_hold_and_writes_nothing(tmp_path):
    gather = Op(1, "ag", OpKind.COLLECTIVE, collective=Collective.ALLGATHER, group="g",
                nbytes=1001)
    graph = StepGraph((Program(0, (gather,)), Program(1, (gather,))), (Group("g", (0, 1)),))
    with pytest.raises(InputError) as error:
        write_chakra(graph, tmp_path / "out")
    assert str(error.value) == (f"{tmp_path / 'out'}: rank 0 op 1 (ag): all-gather of 1001 bytes "
                                "on 2 ranks: expected a multiple of the ranks (Chakra's "
                                "comm_size is each rank's share)")
    assert not (tmp_path / "out").exists()
    pair = replace_kind(graph, Collective.SENDRECV)
    with pytest.raises(InputError) as error:
        chakra_from_graph(pair, "x")
    assert str(error.value) == ("x: rank 0 op 1 (ag): sendrecv: expected a collective Chakra "
                                "names (allreduce, allgather, reduce_scatter, alltoall, "
                                "broadcast, reduce)")
    endless = StepGraph((Program(0, (Op(3, "c", OpKind.COMPUTE, duration_s=math.inf),)),), ())
    with pytest.raises(InputError) as error:
        chakra_from_graph(endless, "x")
    assert str(error.value) == ("x: rank 0 op 3 (c): inf s: expected fewer than 2^64 µs "
                                "(duration_micros is uint64)")


def replace_kind(graph: StepGraph, kind: Collective) -> StepGraph:
    return StepGraph(tuple(Program(p.rank, tuple(Op(op.id, op.name, op.kind, collective=kind,
                                                    group=op.group, nbytes=op.nbytes)
                                                 for op in p.ops)) for p in graph.programs),
                     graph.groups)


def test_the_writer_never_writes_over_an_input_nor_beside_a_stale_rank(tmp_path):
    graph = every_kind()
    paths = write_chakra(graph, tmp_path)
    with pytest.raises(InputError) as error:
        write_chakra(graph, tmp_path, inputs=[paths[1]])
    assert str(error.value) == (f"{paths[1]}: {paths[1]} is an input of this run ({paths[1]}); "
                                "choose another path")
    two = StepGraph(graph.programs[:2], (Group("world", (0, 1)), Group("tp", (1, 0))))
    with pytest.raises(InputError) as error:
        write_chakra(two, tmp_path)
    assert str(error.value) == (f"{tmp_path / 'step.2.et'}: expected no trace beyond rank 1 with "
                                "prefix 'step': it would be read with these; remove it or "
                                "choose another prefix")


def test_without_protobuf_reading_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "google.protobuf", None)
    monkeypatch.setattr(chakra_schema, "_classes", chakra_schema._classes.__wrapped__)
    with pytest.raises(InputError) as error:
        chakra_schema.schema("s.0.et")
    assert str(error.value) == "s.0.et: needs protobuf: pip install 'allreduce-sim[chakra]'"


def test_importing_the_reader_does_not_import_protobuf():
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, simulator.scenario.chakra, simulator.output.chakra; "
                               "print('google.protobuf' in sys.modules)"],
        capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert loaded.strip() == "False"


def test_bytes_in_memory_read_as_files_do():
    files = four_ranks()
    graph = graph_from_chakra([(name, files[name]) for name in sorted(files)[:4]])
    assert [len(program.ops) for program in graph.programs] == [3, 4, 3, 4]


def test_an_astra_sim_microbenchmark_reads_as_nccl_tests_counts_it(tmp_path):
    # as ASTRA-sim's examples/workload/microbenchmarks/generator_scripts/all_gather.py writes
    # its "4npus_1MB" traces: one node each, no pg_name, comm_size 1 MiB (each rank's share);
    # these bytes equal its published all_gather.1.et to the byte
    files = {f"all_gather.{npu}.et": trace(node(
        npu, "all_gather_4npus_1MB", COLL, attr("is_cpu_op", bool_val=False),
        attr("comm_type", int64_val=ALL_GATHER), attr("comm_size", int64_val=1 << 20)))
        for npu in range(1, 4)}
    files["all_gather.0.et"] = files["all_gather.1.et"]
    graph = read_chakra(write(tmp_path / "ag", files))
    assert graph.groups == (Group("world", (0, 1, 2, 3)),)
    assert {(op.collective, op.nbytes, op.group) for _, op in graph.ops()} == {
        (Collective.ALLGATHER, 4 << 20, "world")}


@pytest.mark.parametrize(("ops", "groups", "message"), [
    ((Op(-1, "c", OpKind.COMPUTE),), (), "x: rank 0 op -1 (c): expected ids of 0..2^64-1 "
                                         "(Chakra's node ids are uint64)"),
    ((Op((1 << 64) - 1, "ar", OpKind.COLLECTIVE, collective=Collective.ALLREDUCE, group="g"),),
     (Group("g", (0,)),), "x: rank 0: expected an id below 2^64-1 free for the process "
                          "groups' declaration"),
    ((Op(1, "ar", OpKind.COLLECTIVE, collective=Collective.ALLREDUCE, group="g"),), (),
     "x: rank 0 op 1 (ar): communicator 'g' is not declared"),
])
def test_the_writer_refuses_ids_chakra_cannot_hold_and_graphs_that_cannot_run(ops, groups,
                                                                               message):
    with pytest.raises(InputError) as error:
        chakra_from_graph(StepGraph((Program(0, ops),), groups), "x")
    assert str(error.value) == message
