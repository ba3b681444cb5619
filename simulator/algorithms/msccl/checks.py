"""What is wrong with an MSCCL schedule's elements, as the MSCCL runtime reads them
(``src/graph/topo.cc``, ``mscclGetAlgoFromXMLAndSetAlgo``): ids, peers and channels, the
runtime's limits, buffer bounds, dependencies. :func:`.order.flaws` adds what is wrong between
the elements (messages, circles).
"""

from __future__ import annotations

from simulator.algorithms.msccl.ir import Flaw, Gpu, Kind, MscclSchedule, Step, Threadblock
from simulator.errors import clipped, rank_spans
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


def element_flaws(schedule: MscclSchedule) -> list[Flaw]:
    """What is wrong with ``schedule``'s elements as the MSCCL runtime would read them (ids,
    peers, channels, limits, buffer bounds, dependencies), in file order; :func:`.order.flaws`
    adds what is wrong between them."""
    found = _algo_flaws(schedule)
    for gpu in schedule.gpus:
        found += _gpu_flaws(schedule, gpu)
    return found


def _algo_flaws(schedule: MscclSchedule) -> list[Flaw]:
    tag = f'<algo name="{clipped(schedule.name)}">'
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
