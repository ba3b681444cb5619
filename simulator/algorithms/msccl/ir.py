"""An MSCCL schedule as typed values (``<algo>`` → ``<gpu>`` → ``<tb>`` → ``<step>``, each with
the line it came from), and :class:`Flaw`, what is wrong with one (:mod:`.checks`).

The meaning of each attribute is the MSCCL runtime's (``src/graph/topo.cc``,
``mscclGetAlgoFromXMLAndSetAlgo``; ``src/collectives/device/msccl_interpreter.h``):

- ``<algo nchunksperloop=N>``: every rank's buffer is cut into N equal chunks, and offsets and
  counts are in chunks. A buffer is ``i`` (input), ``o`` (output) or ``s`` (scratch, ``s_chunks``
  chunks of the same size). ``inplace="1"`` makes input and output one buffer, as NCCL's
  in-place calls do (for allgather the input is the rank's part of the output, for
  reduce-scatter the output the rank's part of the input).
- ``<tb send=P recv=Q chan=C>``: a threadblock sends only to P and receives only from Q (-1:
  never), on channel C; its steps run one after the other. The k-th message a threadblock sends
  to P on C is the k-th its peer's threadblock receiving from this GPU on C takes.
- ``<step s type srcbuf srcoff dstbuf dstoff cnt depid deps hasdep>``: step ``s`` (numbered
  from 0 in order) of kind ``type`` (:class:`Kind`) on ``cnt`` chunks; with ``depid`` ≥ 0 it
  first waits until step ``deps`` of threadblock ``depid`` of the same GPU is done (the runtime
  raises that threadblock's flag after each step marked ``hasdep="1"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import cached_property

from simulator.model.collective import Collective


class Buffer(Enum):
    """Which buffer of a rank a step reads or writes."""

    INPUT = "i"
    OUTPUT = "o"
    SCRATCH = "s"


class Kind(Enum):
    """What a step does (msccl-tools' ``Instruction``); ``src`` and ``dst`` are the GPU's own
    chunks, the peers are its threadblock's ``send`` and ``recv``."""

    SEND = "s"                        # send src
    RECV = "r"                        # receive into dst
    RECV_COPY_SEND = "rcs"            # receive into dst, send it on
    RECV_REDUCE_SEND = "rrs"          # receive, reduce with src, send the result on (kept nowhere)
    RECV_REDUCE_COPY = "rrc"          # receive, reduce with src into dst
    RECV_REDUCE_COPY_SEND = "rrcs"    # receive, reduce with src into dst, send it on
    COPY = "cpy"                      # copy src into dst
    REDUCE = "re"                     # reduce src into dst
    NOP = "nop"                       # nothing: only its dependency

    @property
    def sends(self) -> bool:
        """Whether the step sends to its threadblock's ``send`` peer."""
        return self in (Kind.SEND, Kind.RECV_COPY_SEND, Kind.RECV_REDUCE_SEND,
                        Kind.RECV_REDUCE_COPY_SEND)

    @property
    def receives(self) -> bool:
        """Whether the step receives from its threadblock's ``recv`` peer."""
        return self in (Kind.RECV, Kind.RECV_COPY_SEND, Kind.RECV_REDUCE_SEND,
                        Kind.RECV_REDUCE_COPY, Kind.RECV_REDUCE_COPY_SEND)

    @property
    def reads(self) -> bool:
        """Whether the step reads its ``src`` chunks."""
        return self in (Kind.SEND, Kind.RECV_REDUCE_SEND, Kind.RECV_REDUCE_COPY,
                        Kind.RECV_REDUCE_COPY_SEND, Kind.COPY, Kind.REDUCE)

    @property
    def writes(self) -> bool:
        """Whether the step writes its ``dst`` chunks."""
        return self in (Kind.RECV, Kind.RECV_COPY_SEND, Kind.RECV_REDUCE_COPY,
                        Kind.RECV_REDUCE_COPY_SEND, Kind.COPY, Kind.REDUCE)


@dataclass(frozen=True)
class Ref:
    """Chunk ``index`` of a rank's ``buffer`` (the first of a step's ``cnt``)."""

    buffer: Buffer
    index: int


@dataclass(frozen=True)
class Step:
    """One ``<step>``: ``depends`` is (threadblock id, step) it waits for, or None."""

    s: int
    kind: Kind
    src: Ref
    dst: Ref
    count: int
    depends: tuple[int, int] | None
    has_dep: bool
    line: int

    @property
    def tag(self) -> str:
        """The element as a message names it."""
        return f'<step s="{self.s}" type="{self.kind.value}">'


@dataclass(frozen=True)
class Threadblock:
    """One ``<tb>``: its peers (-1: none), channel and steps."""

    id: int
    send: int
    recv: int
    channel: int
    steps: tuple[Step, ...]
    line: int

    @property
    def tag(self) -> str:
        """The element as a message names it."""
        return f'<tb id="{self.id}" send="{self.send}" recv="{self.recv}" chan="{self.channel}">'


@dataclass(frozen=True)
class Gpu:
    """One ``<gpu>``: its rank, its buffers' chunk counts as the file states them, and its
    threadblocks in file order."""

    id: int
    input_chunks: int
    output_chunks: int
    scratch_chunks: int
    threadblocks: tuple[Threadblock, ...]
    line: int

    def threadblock(self, id_: int) -> Threadblock | None:
        """The threadblock numbered ``id_``, or None."""
        return self._threadblocks.get(id_)

    @cached_property
    def _threadblocks(self) -> dict[int, Threadblock]:
        return {tb.id: tb for tb in self.threadblocks}


@dataclass(frozen=True)
class MscclSchedule:
    """One ``<algo>`` read from ``file``: every GPU's threadblocks, in the order of the file."""

    file: str
    name: str
    protocol: str
    channels: int
    chunks: int
    """``nchunksperloop``: the equal chunks every rank's buffer is cut into."""
    ngpus: int
    collective: Collective
    inplace: bool
    gpus: tuple[Gpu, ...]
    line: int

    @property
    def input_chunks(self) -> int:
        """Chunks of a rank's input buffer: its share of the output for allgather."""
        return self.chunks // self.ngpus if self.collective is Collective.ALLGATHER else self.chunks

    @property
    def output_chunks(self) -> int:
        """Chunks of a rank's output buffer: its share of the input for reduce-scatter."""
        return (self.chunks // self.ngpus if self.collective is Collective.REDUCE_SCATTER
                else self.chunks)

    def gpu(self, id_: int) -> Gpu:
        """The ``<gpu>`` of rank ``id_``."""
        return self._gpus[id_]

    @cached_property
    def _gpus(self) -> dict[int, Gpu]:
        return {gpu.id: gpu for gpu in self.gpus}

    def size(self, gpu: Gpu, buffer: Buffer) -> int:
        """Chunks of ``buffer`` on ``gpu``."""
        return {Buffer.INPUT: self.input_chunks, Buffer.OUTPUT: self.output_chunks,
                Buffer.SCRATCH: gpu.scratch_chunks}[buffer]


@dataclass(frozen=True)
class Flaw:
    """Something wrong with an element of a schedule: its line, the element, what is wrong."""

    line: int
    element: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.element}: {self.message}"
