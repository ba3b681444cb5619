"""An MSCCL schedule as typed values (``<algo>`` → ``<gpu>`` → ``<tb>`` → ``<step>``, each with
the line it came from), and what is wrong with its elements (:func:`element_flaws`).

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

from simulator.errors import rank_spans
from simulator.model.collective import Collective

MAX_CHUNKS = 32767
"""Chunks of a buffer (``nchunksperloop``, ``s_chunks``): the runtime keeps offsets in int16
(``mscclTransfer.srcoffset``, ``src/include/msccl.h``). Also what keeps a few bytes of XML
from asking for billions of chunks."""

MAX_STEPS = 256
"""Steps of a threadblock: the runtime's ``MSCCL_MAX_NUM_STEPS``."""

MAX_THREADBLOCKS = 216
"""Threadblocks of a GPU: the runtime's ``MSCCL_MAX_NUM_THREAD_BLOCKS`` (108 × 2, A100's SMs)."""

MAX_COUNT = 72
"""Chunks a step moves at once, exclusive: the runtime refuses ``cnt`` ≥ ``MSCCL_MAX_COUNT``."""


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


def element_flaws(schedule: MscclSchedule) -> list[Flaw]:
    """What is wrong with ``schedule``'s elements as the MSCCL runtime would read them (ids,
    peers, channels, buffer bounds, dependencies), in file order; :func:`.order.flaws` adds
    what is wrong between them."""
    found = _algo_flaws(schedule)
    for gpu in schedule.gpus:
        found += _gpu_flaws(schedule, gpu)
    return found


def _algo_flaws(schedule: MscclSchedule) -> list[Flaw]:
    tag = f'<algo name="{schedule.name}">'
    found = []
    if schedule.chunks > MAX_CHUNKS:
        found.append(Flaw(schedule.line, tag, (
            f"expected nchunksperloop at most {MAX_CHUNKS} (the runtime's offsets are int16), "
            f"got {schedule.chunks}")))
    ids = [gpu.id for gpu in schedule.gpus]
    if sorted(ids) != list(range(schedule.ngpus)):
        found.append(Flaw(schedule.line, tag, (
            f"expected one <gpu> for each id 0 to {schedule.ngpus - 1} (ngpus="
            f"\"{schedule.ngpus}\"), got {_ids(ids, schedule.ngpus)}")))
    if (schedule.collective in (Collective.ALLGATHER, Collective.REDUCE_SCATTER)
            and schedule.chunks % schedule.ngpus):
        found.append(Flaw(schedule.line, tag, (
            f"expected nchunksperloop a multiple of ngpus for {schedule.collective.value} "
            f"(each rank's share a whole number of chunks), got {schedule.chunks} and "
            f"{schedule.ngpus}")))
    return found


def _gpu_flaws(schedule: MscclSchedule, gpu: Gpu) -> list[Flaw]:
    tag = f'<gpu id="{gpu.id}">'
    found = []
    for given, name, wanted in ((gpu.input_chunks, "i_chunks", schedule.input_chunks),
                                (gpu.output_chunks, "o_chunks", schedule.output_chunks)):
        if given not in (0, wanted):  # the runtime's check: 0, or what nchunksperloop says
            found.append(Flaw(gpu.line, tag, (
                f"expected {name} 0 or {wanted} (nchunksperloop {schedule.chunks} for "
                f"{schedule.collective.value}), got {given}")))
    if gpu.scratch_chunks > MAX_CHUNKS:
        found.append(Flaw(gpu.line, tag, f"expected s_chunks at most {MAX_CHUNKS} (the "
                                         f"runtime's offsets are int16), got {gpu.scratch_chunks}"))
    ids = sorted(tb.id for tb in gpu.threadblocks)
    if len(ids) > MAX_THREADBLOCKS:
        found.append(Flaw(gpu.line, tag, f"expected at most {MAX_THREADBLOCKS} threadblocks (the "
                                         f"runtime's MSCCL_MAX_NUM_THREAD_BLOCKS), got {len(ids)}"))
    if ids != list(range(len(ids))):
        found.append(Flaw(gpu.line, tag, f"expected threadblock ids 0 to {len(ids) - 1}, each "
                                         f"once (the runtime numbers them so), got "
                                         f"{_ids(ids, len(ids))}"))
    sends: dict[tuple[int, int], Threadblock] = {}
    receives: dict[tuple[int, int], Threadblock] = {}
    for tb in gpu.threadblocks:
        for peer, name in ((tb.send, "send"), (tb.recv, "recv")):
            if peer == gpu.id or not -1 <= peer < schedule.ngpus:
                found.append(Flaw(tb.line, tb.tag, (
                    f"expected {name} -1 or another gpu of 0 to {schedule.ngpus - 1}, got "
                    f"{peer}")))
        if tb.channel < 0:
            found.append(Flaw(tb.line, tb.tag, f"expected chan ≥ 0, got {tb.channel}"))
        if len(tb.steps) > MAX_STEPS:
            found.append(Flaw(tb.line, tb.tag, f"expected at most {MAX_STEPS} steps (the "
                                               f"runtime's MSCCL_MAX_NUM_STEPS), got "
                                               f"{len(tb.steps)}"))
        for peer, seen, what in ((tb.send, sends, "sends to"), (tb.recv, receives,
                                                                 "receives from")):
            if peer >= 0 and (peer, tb.channel) in seen:
                found.append(Flaw(tb.line, tb.tag, (
                    f"threadblock {seen[(peer, tb.channel)].id} already {what} gpu {peer} on "
                    f"channel {tb.channel} (one connection, one threadblock)")))
            seen.setdefault((peer, tb.channel), tb)
        for position, step in enumerate(tb.steps):
            found += _step_flaws(schedule, gpu, tb, position, step)
    return found


def _ids(ids: list[int], wanted: int) -> str:
    """What is wrong with ``ids`` as 0 to ``wanted`` - 1, each once: those missing, twice, or
    out of range."""
    seen = set(ids)
    said = []
    missing = sorted(set(range(wanted)) - seen)
    if missing:
        said.append(f"none for {rank_spans(missing)}")
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        said.append(f"{rank_spans(twice)} more than once")
    beyond = sorted(i for i in seen if not 0 <= i < wanted)
    if beyond:
        said.append(f"{rank_spans(beyond)} beyond")
    return ", ".join(said)


def _step_flaws(schedule: MscclSchedule, gpu: Gpu, tb: Threadblock, position: int,
                step: Step) -> list[Flaw]:
    found = []

    def flaw(message: str) -> None:
        found.append(Flaw(step.line, step.tag, f"gpu {gpu.id} tb {tb.id}: {message}"))

    if step.s != position:
        flaw(f"expected s=\"{position}\" (steps numbered in order from 0), got {step.s}")
    if step.kind is not Kind.NOP and not 1 <= step.count < MAX_COUNT:
        flaw(f"expected cnt from 1 to {MAX_COUNT - 1} chunks (the runtime's MSCCL_MAX_COUNT), "
             f"got {step.count}")
    if step.kind.sends and tb.send < 0:
        flaw(f"sends, but its threadblock {tb.id} has send=\"-1\"")
    if step.kind.receives and tb.recv < 0:
        flaw(f"receives, but its threadblock {tb.id} has recv=\"-1\"")
    for uses, ref, name in ((step.kind.reads, step.src, "src"), (step.kind.writes, step.dst,
                                                                "dst")):
        size = schedule.size(gpu, ref.buffer)
        if uses and step.count >= 1 and not 0 <= ref.index <= size - step.count:
            flaw(f"expected {name}off + cnt within the {size} chunks of buffer "
                 f"'{ref.buffer.value}' of gpu {gpu.id}, got {name}off {ref.index} and cnt "
                 f"{step.count}")
    if step.depends is not None:
        depid, deps = step.depends
        other = gpu.threadblock(depid)
        if other is None:
            flaw(f"depends on threadblock {depid}, which gpu {gpu.id} does not have")
        elif not 0 <= deps < len(other.steps):
            flaw(f"depends on step {deps} of threadblock {depid}, which has steps 0 to "
                 f"{len(other.steps) - 1}")
        elif depid == tb.id and deps >= step.s:
            flaw(f"depends on step {deps} of its own threadblock, which runs after it")
        elif not other.steps[deps].has_dep:
            flaw(f"depends on step {deps} of threadblock {depid}, which has hasdep=\"0\" (the "
                 "runtime raises a threadblock's flag only after steps with hasdep=\"1\")")
    return found
