"""Channels: one algorithm run on several slices of the buffer at once, as NCCL runs a
collective on ``nChannels`` rings or trees side by side.

Channel c takes the c-th of C near-equal slices of every rank's buffer and runs the algorithm on
it over its own connections (:meth:`~simulator.algorithms.comm.Comm.within_channel`), with the
ranks of each host in an order rotated by c (:meth:`~simulator.model.machine.Layout.channel_order`).
A flat ring or tree therefore leaves and enters each host through a different GPU on every
channel: where every GPU has its own NIC (a rail), C channels cross between hosts on C NICs at
once, where one channel crosses on one. Inside a host the channels share each GPU's links.

Any allreduce runs on channels unchanged: its program never learns that its buffer is a slice
and its group a rotation. A reduce-scatter or allgather, whose buffer is laid out by the ranks'
chunks, runs channel c on the c-th part of every rank's chunk instead (:meth:`Span.split_chunks
<simulator.model.span.Span.split_chunks>`), as NCCL's rings do: the scheduler cuts the per-rank
count (``recvcount``, ``sendcount``: src/collectives.cc:238, :131) over up to ``nChannels``
channels (src/enqueue.cc:583, 656-704), each channel's ``gridOffset`` within it
(src/include/device.h ``ncclCollCbdPart``), and the kernel finds rank r's chunk at
``dataOffset + rankDest * count`` (src/device/reduce_scatter.h:41, all_gather.h:53). Its ring
program takes those parts as its members' chunks (:attr:`Comm.owned
<simulator.algorithms.comm.Comm.owned>`), listed in channel c's rotated order, so that every
rank still ends with its own chunk.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from simulator.algorithms.algorithm import Algorithm, ModelKind
from simulator.algorithms.comm import Comm, Program
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.footprint import Footprint
from simulator.algorithms.schedule import Blocks, Group, Schedule
from simulator.algorithms.trace import trace_program
from simulator.model.floor import floor_s
from simulator.model.machine import Layout
from simulator.model.span import Span


@dataclass(frozen=True)
class ChannelShare:
    """What channel c runs on: its ranks in its rotated ``order``, the ``buffer`` span it works
    within, and where the collective is laid out by rank chunks, ``owned``: the channel's part
    of each member's chunk in ``order``'s numbering (None: the whole of ``buffer``)."""

    order: tuple[int, ...]
    buffer: Span
    owned: tuple[Span, ...] | None


def channel_shares(algorithm: Algorithm, buffer: Span, layout: Layout,
                   channels: int) -> list[ChannelShare]:
    """Every channel's share of ``buffer`` (:class:`ChannelShare`): the c-th of ``channels``
    contiguous slices, or for a reduce-scatter or allgather (:attr:`Collective.by_rank_chunks
    <simulator.model.collective.Collective.by_rank_chunks>`) the c-th part of every rank's chunk,
    ranks in the order of channel c (:meth:`Layout.channel_order`)."""
    orders = [layout.channel_order(c) for c in range(channels)]
    if not algorithm.collective.by_rank_chunks:
        return [ChannelShare(order, part, None)
                for order, part in zip(orders, buffer.split(channels), strict=True)]
    parts = buffer.split_chunks(len(layout.hosts), channels)
    return [ChannelShare(order, buffer, _in_order(parts[c], order))
            for c, order in enumerate(orders)]


def _in_order(parts: Sequence[Span], order: tuple[int, ...]) -> tuple[Span, ...]:
    """Rank ``order[i]``'s part at position i: the channel's member i owns its own chunk."""
    return tuple(parts[rank] for rank in order)


def on_channels(algorithm: Algorithm, comm: Comm, channels: int) -> Program:
    """Rank ``comm.rank``'s program for ``algorithm`` split over ``channels`` channels."""
    if channels == 1:
        yield from algorithm.program(comm)
        return
    shares = channel_shares(algorithm, comm.buffer, comm.layout, channels)
    yield comm.parallel(*(
        algorithm.program(comm.subgroup(share.order, share.buffer, share.owned).within_channel(c))
        for c, share in enumerate(shares)))


def on_channels_s(algorithm: Algorithm, cost: CostInputs, count: int, channels: int) -> float:
    """The closed form of one channel alone: ``algorithm`` on ⌈count / channels⌉ elements.

    Exact with one channel, and wherever the channels share no link; where they do (every GPU's
    link inside a host carries all of them), a lower bound, as each channel is charged the
    whole of each link it crosses, but one that can fall below what the links carry:
    :func:`channels_bound_s` adds what the channels share.
    """
    return algorithm.model_s(cost, math.ceil(count / channels))


def channels_bound_s(algorithm: Algorithm, cost: CostInputs, count: int, channels: int,
                     alone_s: float) -> float:
    """The closed form on ``channels`` channels, given one channel's alone (``alone_s``,
    :func:`on_channels_s`): that, and never less than the fabric's floor for the whole buffer
    (:func:`~simulator.model.floor.floor_s`) on several channels or where it claims a bound.

    One channel alone is charged the whole of each link it crosses, as if the others were not
    there. Where the channels share links (every GPU's NVLink in a host; 72 channels of a
    GB200 rack on its NICs; 32 channels of a ring on 8 NICs a host) that falls below what the
    links can carry (issue 38: a 32-channel ring's closed form on 1,024 H100 at 1,412 GB/s
    busbw, against a 403 GB/s host cut). The channels together move the whole buffer over the
    same links, so a run takes at least the floor too: the larger of the two lower bounds is
    one. On one channel a bound is held to the floor as well, where its parts share links its
    form charges apart (``hierarchical``'s rails on p4d, two GPUs a NIC: 17.0 ms against the
    floor's 21.5 at 1 GiB on two hosts); an estimate is left as it is.
    """
    if channels == 1 and algorithm.model_kind is ModelKind.ESTIMATE:
        return alone_s
    return max(alone_s, floor_s(cost.machine, algorithm.collective, cost.nbytes(count)))


def blocks_on_channels(algorithm: Algorithm, group: Group, layout: Layout,
                       channels: int) -> Blocks:
    """:func:`schedule_on_channels` as the engine takes it: on one channel the algorithm's own
    :meth:`~simulator.algorithms.algorithm.Algorithm.in_blocks` (a window of blocks where it has
    them); on several, where a channel's count says it comes a block at a time, every
    channel's blocks side by side (:meth:`Blocks.channels
    <simulator.algorithms.schedule.Blocks.channels>`: the same messages, numbered a block at a
    time, so that memory follows the messages in flight), else the channels' schedules as one
    block (:attr:`Blocks.traced <simulator.algorithms.schedule.Blocks.traced>` where that is
    the trace)."""
    if channels == 1:
        return algorithm.in_blocks(group)
    if _windowed(algorithm, group, layout, channels):
        return Blocks.channels([algorithm.in_blocks(_channel_group(group, share, channels))
                                for share in channel_shares(algorithm, group.buffer, layout,
                                                            channels)])
    return Blocks.whole(schedule_on_channels(algorithm, group, layout, channels),
                        traced=not algorithm.has_builder())


def _channel_group(group: Group, share: ChannelShare, channels: int) -> Group:
    """The group channel ``share`` of ``channels`` runs on, a block at a time: its share of
    the blocks the channels join (:attr:`Group.block_share
    <simulator.algorithms.schedule.Group.block_share>`)."""
    return replace(group.subgroup(share.order, share.buffer, share.owned), block_share=channels)


def _counted(algorithm: Algorithm, group: Group, layout: Layout,
             channels: int) -> list[Footprint | None]:
    """Every channel's count (:meth:`Algorithm.counted
    <simulator.algorithms.algorithm.Algorithm.counted>`; None where it has none)."""
    return [algorithm.counted(_channel_group(group, share, channels))
            for share in channel_shares(algorithm, group.buffer, layout, channels)]


def _windowed(algorithm: Algorithm, group: Group, layout: Layout, channels: int) -> bool:
    """Whether the channels run as :meth:`Blocks.channels
    <simulator.algorithms.schedule.Blocks.channels>`: every channel counted and one of them a
    block at a time (its count says so without building anything)."""
    counted = _counted(algorithm, group, layout, channels)
    return all(one is not None for one in counted) and any(
        one.windowed for one in counted if one is not None)


def footprint_on_channels(algorithm: Algorithm, group: Group, layout: Layout,
                          channels: int) -> Footprint | None:
    """:func:`blocks_on_channels` counted (:meth:`Algorithm.counted
    <simulator.algorithms.algorithm.Algorithm.counted>`): on several channels every channel's
    count, held as their blocks hold them where one comes a block at a time, else the whole
    held at once; None where the algorithm has no count."""
    if channels == 1:
        return algorithm.counted(group)
    counted = [one for one in _counted(algorithm, group, layout, channels) if one is not None]
    if len(counted) < channels:
        return None
    if any(one.windowed for one in counted):
        return Footprint.joined(counted)
    return Footprint.joined([one.as_whole() for one in counted])


def schedule_on_channels(algorithm: Algorithm, group: Group, layout: Layout,
                         channels: int) -> Schedule:
    """:func:`on_channels` as a schedule: channel c runs ``algorithm``'s schedule on the c-th
    slice of the buffer over the ranks in channel c's order, on connections of its own; where
    the algorithm has no builder (:meth:`~simulator.algorithms.algorithm.Algorithm.has_builder`),
    the trace of :func:`on_channels` itself."""
    if channels == 1:
        return algorithm.scheduled(group)
    if not algorithm.has_builder():
        return trace_program(group, lambda comm: on_channels(algorithm, comm, channels),
                             algorithm.name)
    return Schedule.concat([algorithm.scheduled(group.subgroup(share.order, share.buffer,
                                                               share.owned))
                            for share in channel_shares(algorithm, group.buffer, layout, channels)])
