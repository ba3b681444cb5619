"""The Chakra execution trace's protobuf schema and its file framing, built at import time.

The messages are described field by field from MLCommons Chakra's published schema,
``schema/protobuf/et_def.proto`` (mlcommons/chakra at 21585d8; a format, not code):

- ``GlobalMetadata``: ``version = 1`` (string), ``attr = 2`` (repeated ``AttributeProto``);
- ``Node``: ``id = 1`` (uint64), ``name = 2``, ``type = 3`` (``NodeType``), ``ctrl_deps = 4`` and
  ``data_deps = 5`` (repeated uint64), ``start_time_micros = 6``, ``duration_micros = 7``
  (uint64), ``inputs = 8`` and ``outputs = 9`` (``IOInfo``), ``attr = 10``;
- ``IOInfo``: ``values = 1``, ``shapes = 2``, ``types = 3`` (strings);
- ``AttributeProto``: ``name = 1``, ``doc_string = 2``, then the oneof ``value``: a scalar of
  each of 15 types at the odd numbers 3..31 (``double_val = 3`` ... ``bytes_val = 31``), each
  followed by its list message (``DoubleList = 4`` ... ``BytesList = 32``), whose ``values``
  is field 1;
- enums ``NodeType`` (``INVALID_NODE = 0`` ... ``COMM_COLL_NODE = 7``) and
  ``CollectiveCommType`` (``ALL_REDUCE = 0`` ... ``BARRIER = 9``).

A file is one ``GlobalMetadata`` then ``Node`` messages, each preceded by its length as a
base-128 varint (Chakra's ``src/third_party/utils/protolib.py``: ``encodeMessage`` writes
``_EncodeVarint32(len)`` then the bytes; ``decodeMessage`` reads them back and takes a length
of 0, or the end of the file, as the end of the trace).

protobuf is the optional ``chakra`` extra: it is imported when a trace is first read or
written, never when :mod:`simulator` is.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from simulator.errors import InputError, Problem

NODE_TYPES = ("INVALID_NODE", "METADATA_NODE", "MEM_LOAD_NODE", "MEM_STORE_NODE", "COMP_NODE",
              "COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE")
"""``NodeType``'s names, each at its number (et_def.proto ``enum NodeType``)."""

COMM_TYPES = ("ALL_REDUCE", "REDUCE", "ALL_GATHER", "GATHER", "SCATTER", "BROADCAST",
              "ALL_TO_ALL", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER")
"""``CollectiveCommType``'s names, each at its number (et_def.proto ``enum
CollectiveCommType``)."""

VALUE_TYPES = ("double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
               "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes")
"""``AttributeProto``'s value types in field order: ``<type>_val`` is field 3 + 2i and
``<type>_list`` (a ``<Type>List`` message) field 4 + 2i."""

INTEGER_VALUES = tuple(f"{kind}_val" for kind in VALUE_TYPES[2:12])
"""The attribute fields holding one integer, any of which an integer attribute may use
(Chakra's converter writes ``comm_size`` as ``int64_val``, ASTRA-sim's feeder reads
``comm_src`` as ``int32_val``: src/feeder/et_feeder_node.cpp)."""

NO_PROTOBUF = "needs protobuf: pip install 'allreduce-sim[chakra]'"
"""What reading or writing a trace says where protobuf is not installed."""


@dataclass(frozen=True)
class Schema:
    """The message classes of et_def.proto, made by protobuf's message factory."""

    metadata: Any
    node: Any
    attribute: Any
    decode_error: type[Exception]


def _list_name(kind: str) -> str:
    """The list message of a value type (``uint64`` -> ``Uint64List``)."""
    return f"{kind[0].upper()}{kind[1:]}List"


def _file_proto(descriptor_pb2: Any) -> Any:
    """et_def.proto as a ``FileDescriptorProto``, field numbers as published."""
    fields = descriptor_pb2.FieldDescriptorProto
    optional, repeated = fields.LABEL_OPTIONAL, fields.LABEL_REPEATED
    proto = descriptor_pb2.FileDescriptorProto(name="et_def.proto", package="ChakraProtoMsg",
                                               syntax="proto3")

    def message(name: str, *entries: tuple[str, int, str, int, int]) -> Any:
        """Add message ``name``, each entry (field, number, kind, label, oneof index or -1);
        a kind that is no scalar type names a message or enum of the file."""
        described = proto.message_type.add(name=name)
        for field_name, number, kind, label, oneof in entries:
            field = described.field.add(name=field_name, number=number, label=label)
            scalar = getattr(fields, f"TYPE_{kind.upper()}", None)
            if scalar is not None:
                field.type = scalar
            else:
                field.type = fields.TYPE_ENUM if kind.endswith("Type") else fields.TYPE_MESSAGE
                field.type_name = f".ChakraProtoMsg.{kind}"
            if oneof >= 0:
                field.oneof_index = oneof
        return described

    attribute = message(
        "AttributeProto", ("name", 1, "string", optional, -1),
        ("doc_string", 2, "string", optional, -1),
        *((f"{kind}_{form}", 3 + 2 * i + j, kind if j == 0 else _list_name(kind), optional, 0)
          for i, kind in enumerate(VALUE_TYPES) for j, form in enumerate(("val", "list"))))
    attribute.oneof_decl.add(name="value")
    for kind in VALUE_TYPES:
        message(_list_name(kind), ("values", 1, kind, repeated, -1))
    message("GlobalMetadata", ("version", 1, "string", optional, -1),
            ("attr", 2, "AttributeProto", repeated, -1))
    message("Node", ("id", 1, "uint64", optional, -1), ("name", 2, "string", optional, -1),
            ("type", 3, "NodeType", optional, -1), ("ctrl_deps", 4, "uint64", repeated, -1),
            ("data_deps", 5, "uint64", repeated, -1),
            ("start_time_micros", 6, "uint64", optional, -1),
            ("duration_micros", 7, "uint64", optional, -1),
            ("inputs", 8, "IOInfo", optional, -1), ("outputs", 9, "IOInfo", optional, -1),
            ("attr", 10, "AttributeProto", repeated, -1))
    message("IOInfo", *((name, number, "string", optional, -1)
                        for number, name in enumerate(("values", "shapes", "types"), 1)))
    for enum_name, names in (("NodeType", NODE_TYPES), ("CollectiveCommType", COMM_TYPES)):
        enum = proto.enum_type.add(name=enum_name)
        for number, name in enumerate(names):
            enum.value.add(name=name, number=number)
    return proto


def schema(where: str = "chakra") -> Schema:
    """The message classes; InputError naming ``where`` and the extra where protobuf is not
    installed."""
    try:
        return _classes()
    except ImportError:
        raise InputError([Problem(where, "", NO_PROTOBUF)]) from None


@cache
def _classes() -> Schema:
    """The message classes, built once a process (ImportError without protobuf)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

    pool = descriptor_pool.DescriptorPool()  # its own pool: no clash with Chakra's et_def_pb2
    pool.Add(_file_proto(descriptor_pb2))

    def made(name: str) -> Any:
        """The class of message ``name``: ``message_factory.GetMessageClass`` where this
        protobuf has it, else the older ``MessageFactory.GetPrototype`` (removed in protobuf
        6.30: protobuf.dev's migration notes, "Changes in v30.0 (Python)")."""
        found = pool.FindMessageTypeByName(f"ChakraProtoMsg.{name}")
        if hasattr(message_factory, "GetMessageClass"):
            return message_factory.GetMessageClass(found)
        return message_factory.MessageFactory(pool).GetPrototype(found)

    return Schema(made("GlobalMetadata"), made("Node"), made("AttributeProto"),
                  message.DecodeError)


def varint(value: int) -> bytes:
    """``value`` (≥ 0) as a base-128 varint, low group first (protolib.py ``_EncodeVarint32``)."""
    out = bytearray()
    while value > 0x7F:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)


def frame(messages: list[bytes]) -> bytes:
    """Serialised messages as a trace file: each preceded by its length as a varint."""
    return b"".join(varint(len(body)) + body for body in messages)


MAX_LENGTH_BYTES = 5
"""Bytes a message's length may take: protolib.py decodes it as a 32-bit varint (5 groups of
7 bits hold 32)."""


def frames(data: bytes, file: str) -> Iterator[bytes]:
    """The messages of a trace file, in order; InputError naming ``file`` and the message
    where a length is truncated, too long, zero or runs past the end of the file."""
    position, index = 0, 0
    while position < len(data):
        length, shift, start = 0, 0, position
        while True:
            if position == len(data):
                raise InputError([Problem(file, f"message {index} at byte {start}", (
                    "truncated length: expected a varint, the file ends inside it"))])
            byte = data[position]
            position += 1
            length |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
            if position - start == MAX_LENGTH_BYTES:
                raise InputError([Problem(file, f"message {index} at byte {start}", (
                    f"expected a length of at most {MAX_LENGTH_BYTES} varint bytes"))])
        if length == 0:
            raise InputError([Problem(file, f"message {index} at byte {start}", (
                "length 0: expected a message (Chakra's reader stops at an empty one)"))])
        if position + length > len(data):
            raise InputError([Problem(file, f"message {index} at byte {start}", (
                f"expected {length} bytes, the file has {len(data) - position} left"))])
        yield data[position:position + length]
        position += length
        index += 1
