"""The vectorised engine: runs a schedule (:mod:`simulator.algorithms.schedule`) with the SimPy
engine's semantics, processing everything that happens at one instant as arrays. A schedule
given a block at a time (:class:`~simulator.algorithms.schedule.Blocks`) runs in a window of
blocks: loaded before they can be released, dropped once received.

The model is the SimPy engine's (:mod:`simulator.engine.run`, :mod:`simulator.engine.fabric`),
message for message:

- a message is posted at the start or when its sender's receive ``posted_after`` completes;
  one whose route has a ``proxy_s`` (a network message under NCCL's execution) is handed on
  when its sender's network proxy gets to it (:func:`~simulator.engine.kernel.serve_spans`),
  which takes the messages handed it at one time once that time is over, in their threads'
  order (NCCL's channel order: :class:`~simulator.engine.fabric._Proxies`); it
  pays its route's latency, then waits for the message before it on its connection to finish,
  then moves its bytes at its max-min fair share of every link it crosses, recomputed whenever
  a flow starts or ends;
- a receive starts when its message has arrived and the receive before it in the receiver's
  program has completed; a reducing receive then holds the receiver's GPU reducer
  (first come, first served) for ``launch + bytes / reduce_bandwidth``;
- data are taken from the sender's buffer when the message is posted and copied or reduced into
  the receiver's when its receive completes;
- in-switch reduction (a trace's switch uploads and copies down, see
  :mod:`simulator.algorithms.trace`) as :mod:`simulator.engine.inswitch` runs it: an upload
  moves a member's span to the group's switch and adds it to its round's sum; a copy down,
  posted when the round's last upload arrived, waits the switch's reduction latency, then its
  route's, then the copy before it down the same link.

At each instant the engine ends every flow due then, completes receives, posts the messages
they release and starts those ready, cascading until nothing more happens at that instant, and
only then re-shares the links, once, by the kernel's progressive filling over every active flow
(:func:`simulator.engine.kernel.max_min_rates`, which the SimPy engine calls per component);
link capacities follow the machine's capacity timeline, each of its instants an instant here.
Times are computed with the same floating-point operations as the SimPy engine's (the kernel's
rates, bytes brought up to date only when a rate moves), so the two agree to the last bit,
shared links or not.

Given a :class:`~simulator.engine.record.Recorder`, the run also tallies, per link, the bytes
its flows carried and the time it held at least one (:class:`~simulator.engine.tally.LinkTally`):
the SimPy fabric's figures, as arrays (the time between two instants on every link that held a
flow).

This module holds the instant loop; the parts it drives are modules of their own:
:mod:`~simulator.engine.window` (the messages held, a window of blocks),
:mod:`~simulator.engine.routes` (the pairs' routes and the shares of sets of flows),
:mod:`~simulator.engine.flows` (the flows and their re-sharing),
:mod:`~simulator.engine.devices` (latencies, proxies, reducers, late ranks),
:mod:`~simulator.engine.pending` (starts and completions due later),
:mod:`~simulator.engine.buffers` (the data), :mod:`~simulator.engine.tally` (the link figures)
and :mod:`~simulator.engine.steady` (the steady-state fast-forward).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.algorithms.schedule import NONE, Blocks, Schedule
from simulator.engine.buffers import Buffers
from simulator.engine.devices import Devices
from simulator.engine.flows import Flows
from simulator.engine.kernel import INF, CapacityTimeline
from simulator.engine.payload import Payload
from simulator.engine.pending import Pending
from simulator.engine.record import Recorder
from simulator.engine.routes import Routes
from simulator.engine.steady import Jump, Op, Steady
from simulator.engine.tally import LinkTally
from simulator.engine.window import Held
from simulator.model.machine import Machine
from simulator.model.reduction import ReduceOp


@dataclass(frozen=True)
class VectorTiming:
    """What one vectorised run cost: simulated time, messages, instants processed, and the wall
    time spent re-sharing links (for the benchmark's profile)."""

    time_s: float
    messages: int
    instants: int
    sharing_wall_s: float
    held: int = 0
    """The most messages the window held at once (the schedule's size when it is one block)."""
    skipped: int = 0
    """Of ``instants``, those a steady period's jumps went over (:mod:`simulator.engine.steady`)
    instead of processing them one by one."""


class _Run:
    """One schedule on one machine, advanced instant by instant: the loop that ends the flows
    due, completes receives, posts what they release and starts what is ready, over the parts
    of the run (the messages ``held``, ``flows``, ``devices``, ``starts`` and ``completions``
    pending, ``buffers``, the link ``tally``)."""

    def __init__(self, blocks: Blocks, machine: Machine, payload: Payload,
                 reduce_op: ReduceOp, buffers: np.ndarray, name: str,
                 recorder: Recorder | None = None, fast_forward: bool = True) -> None:
        self.name = name
        self.recorder = recorder
        self.fast_forward = fast_forward
        timeline = CapacityTimeline(machine.routing.capacities(), machine.capacity_events,
                                    machine.outages)
        self.routes = Routes(machine, timeline)
        down = timeline.down_at_start()
        if down:  # failed from the start: every route avoids them
            self.routes.routing = machine.routing.rerouted(down)
            self.routes.routing.check_reach(machine.placement, 0.0, down)
        self.capacity_steps = list(reversed(timeline.later()))  # the next step last
        self.tally = None if recorder is None else LinkTally(len(self.routes.capacity))
        self.held = Held(blocks, machine, payload, self.routes, name, self._loaded,
                         self._dropped)
        self.buffers = Buffers(self.held, buffers, reduce_op)
        self.flows = Flows(self.held, self.routes)
        self.devices = Devices(machine, self.held, self.routes)
        self.starts = Pending()  # posted messages that start later
        self.completions = Pending()  # receives that complete later (a reduction, a late rank)
        self.handing: list[np.ndarray] = []  # posted now, for their proxies when the time ends
        self.steady: Steady | None = None  # made when the run starts, if it fast-forwards
        self.finished_s = 0.0  # when the last receive so far completed: the run's time
        self.instants = 0
        self.held.start()

    def _loaded(self, messages: np.ndarray) -> None:
        """A block was loaded: ``messages``, its window positions."""
        if self.tally is not None:
            self.tally.loaded(self.held.pair[messages], self.held.nbytes(messages),
                              len(self.routes.count))
        if self.steady is not None:
            self.steady.loaded()

    def _dropped(self, messages: int) -> None:
        """The window forgot its first ``messages``: window positions move down by as many."""
        self.starts.renumber(messages)
        self.flows.renumber(messages)
        self.completions.renumber(messages)
        self.handing = [handed - messages for handed in self.handing]

    def run(self) -> VectorTiming:
        """Run the schedule to its end; its timing. The window then lets go of this run
        (:meth:`Held.detach <simulator.engine.window.Held.detach>`), so that its messages,
        flows and data are freed when it returns, not at the next cyclic garbage collection
        (three sizes of a 512-GPU ring in one process held a point's run into the next:
        556 MiB peak, 362 without)."""
        try:
            return self._run()
        finally:
            self.held.detach()

    def _run(self) -> VectorTiming:
        """:meth:`run`'s loop."""
        now = 0.0
        held, flows = self.held, self.flows
        initial = np.flatnonzero(held.s.posted_after == NONE)
        starting = self._post(initial, now)
        held.top = -1  # posted at the start: as the schedule says
        if self.fast_forward:
            self.steady = Steady(
                held=held, flows=flows, starts=self.starts, completions=self.completions,
                devices=self.devices, buffers=self.buffers, tally=self.tally,
                steps=self.capacity_steps, initial_ready=float(self.devices.ready(
                    initial, np.zeros(len(initial))).max(initial=0.0)))
        ended = completing = np.zeros(0, dtype=np.int64)
        while True:
            self._cascade(now, starting, ended, completing)
            if held.drop_due:
                held.drop()
            if self.steady is not None and not self.handing:  # (else the time goes on)
                jump = self.steady.boundary(now, self.instants)
                if jump is not None:
                    now = self._jumped(jump, now)
            then, now = now, min(self.starts.next(), flows.next(), self.completions.next())
            if now == INF:
                if not (self.capacity_steps and len(flows.active)):
                    break
                now = self.capacity_steps[-1].at_s  # every flow waits for a link's capacity
            stepping = bool(self.capacity_steps) and self.capacity_steps[-1].at_s <= now
            if stepping:
                now = self.capacity_steps[-1].at_s
            if self.tally is not None and len(flows.active):
                self.tally.elapse(self.routes.users, now - then)  # as the links were till now
                if self.steady is not None and self.steady.recording:
                    self.steady.elapsed(self.routes.users, now - then)
            if stepping:
                flows.step(self.capacity_steps.pop(), self.tally)
            self.instants += 1
            starting = self.starts.pop(now)
            ended = flows.end(now)
            completing = self.completions.pop(now)
        return self._finish()

    def _cascade(self, now: float, starting: np.ndarray, ended: np.ndarray,
                 completing: np.ndarray) -> None:
        """Everything that happens at ``now``, until nothing more does; then re-share once,
        and where no flow ends at this time still (a flow re-timed to end now ends at an
        instant of its own), the proxies take what they were handed at it (:meth:`_hand`)."""
        while True:
            self._instant(now, starting, ended, completing)
            if not self.handing or self.flows.next() <= now:
                return
            starting, ended, completing = self._hand(now), _NONE, _NONE
            if not len(starting):
                return

    def _instant(self, now: float, starting: np.ndarray, ended: np.ndarray,
                 completing: np.ndarray) -> None:
        """What happens at ``now`` till nothing more does; then re-share once."""
        held = self.held
        while len(starting) or len(ended) or len(completing):
            if len(starting):
                moves = self.flows.moves(starting)
                flows = starting
                if not moves.all():  # no bytes or no link: they arrive as they start
                    ended = np.concatenate([ended, starting[~moves]])
                    flows = starting[moves]
                if len(flows):
                    held.touch(flows)
                    self.flows.join(flows, now)
            arrived = completed = None
            if len(ended):
                held.arrived[ended] = now
                held.touch(ended)
                arrived = self._arrive(ended, now)
            if len(completing):
                completed = self._complete(completing, now)
            ended = _NONE
            starting, completing = _joined(arrived, completed)
        self.flows.settle(now)

    def _arrive(self, ended: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
        """Messages whose bytes all arrived: free their connection, request their receive."""
        held = self.held
        following = held.next_on_connection.of(ended)
        following = following[held.posted[following] < INF]
        ready = np.maximum(self.devices.ready(following, held.posted[following]), now)
        starting = self._schedule_starts(following, ready, now)
        previous = held.local(held.s.receive_previous[ended])
        can = previous < 0
        if not can.all():  # a receive waits for the one before it on its rank's thread
            can[~can] = held.received[previous[~can]]
            ended = ended[can]
        return starting, self.devices.receive(ended, now, self.completions)

    def _complete(self, messages: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
        """Receives that complete now: combine their data, post what they release, and request
        the receives that follow them."""
        held = self.held
        held.received[messages] = True
        self.finished_s = now
        if self.steady is not None and self.steady.recording:
            self.steady.record(Op.RECEIVE, messages, held.window.start)
        self.buffers.combine(messages)
        starting = self._post(held.released.of(messages), now)
        following = held.next_receive.of(messages)
        following = following[held.arrived[following] < INF]
        return starting, self.devices.receive(following, now, self.completions)

    def _post(self, messages: np.ndarray, now: float) -> np.ndarray:
        """Post ``messages`` now: take their data; those whose connection is free start after
        their latency, network messages once their proxy takes them (:meth:`_hand`). Returns
        the messages that start now."""
        if len(messages) == 0:
            return messages
        held = self.held
        held.load_ahead(messages)
        held.touch(messages)
        self.buffers.snapshot(messages)
        if self.steady is not None and self.steady.recording:
            self.steady.record(Op.POST, messages, held.window.start)
        proxied = self.devices.proxied(messages)
        if proxied.any():
            self.handing.append(messages[proxied])
            messages = messages[~proxied]
        held.posted[messages] = self.devices.handed(messages, now)
        return self._queue(messages, now)

    def _hand(self, now: float) -> np.ndarray:
        """The proxies take the messages handed them at ``now``: each proxy in its messages'
        threads' order, one thread's in the order posted (a stable sort), as the SimPy fabric's
        proxies do (:class:`~simulator.engine.fabric._Proxies`). Returns those that start
        now."""
        held = self.held
        handing, self.handing = self.handing, []
        messages = handing[0] if len(handing) == 1 else np.concatenate(handing)
        messages = messages[np.argsort(held.thread[messages], kind="stable")]
        held.posted[messages] = self.devices.posts(messages, now)
        return self._queue(messages, now)

    def _queue(self, messages: np.ndarray, now: float) -> np.ndarray:
        """Messages handed on (their ``posted`` time set): those whose connection is free
        start after their latency. Returns the messages that start now."""
        if len(messages) == 0:
            return messages
        held = self.held
        previous = held.local(held.s.connection_previous[messages])
        free = previous < 0
        if not free.all():  # behind another message on its connection: free once it arrived
            free[~free] = held.arrived[previous[~free]] < INF
            messages, previous = messages[free], previous[free]
        ready = self.devices.ready(messages, held.posted[messages])
        behind = previous >= 0
        if behind.any():
            ready[behind] = np.maximum(ready[behind], held.arrived[previous[behind]])
        return self._schedule_starts(messages, ready, now)

    def _schedule_starts(self, messages: np.ndarray, ready: np.ndarray,
                         now: float) -> np.ndarray:
        """Queue starts at ``ready``; those due now are returned."""
        due = ready == now
        if due.all():
            return messages
        if not due.any():
            self.starts.add(messages, ready)
            return _NONE
        self.starts.add(messages[~due], ready[~due])
        due_now: np.ndarray = messages[due]
        return due_now

    def _jumped(self, jump: Jump, now: float) -> float:
        """A steady period's jump from ``now``: move what is in progress ``jump.messages``
        messages and ``jump.seconds`` on, as its instants would have; the time the run goes on
        from."""
        self.starts.shift(jump.messages, jump.seconds)
        self.flows.shift(jump.messages, jump.seconds)
        self.completions.shift(jump.messages, jump.seconds)
        self.devices.shift(jump.seconds, now)
        if jump.receives:
            self.finished_s += jump.seconds
        self.instants += jump.instants
        self.held.top += jump.messages
        return now + jump.seconds

    def _finish(self) -> VectorTiming:
        """The run's timing, once nothing is left to happen; its link figures to the
        recorder."""
        held = self.held
        self.buffers.flush()
        held.finished()
        if self.recorder is not None and self.tally is not None:
            carried = self.tally.bytes(self.routes)
            used = np.flatnonzero(carried)
            links = list(self.routes.number)
            self.recorder.add_links([links[i] for i in used.tolist()], carried[used],
                                    self.tally.busy[used])
        return VectorTiming(time_s=self.finished_s, messages=held.messages,
                            instants=self.instants, sharing_wall_s=self.flows.sharing_wall_s,
                            held=held.most,
                            skipped=self.steady.skipped if self.steady is not None else 0)


_NONE = np.zeros(0, dtype=np.int64)
_NONE.flags.writeable = False
"""No messages (read-only: every step that adds messages makes a new array)."""


def _joined(first: tuple[np.ndarray, np.ndarray] | None,
            second: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
    """The starts and the completions two steps of an instant released, in step order (one
    concatenation only where both released some)."""
    if first is None or second is None:
        found = first if second is None else second
        return found if found is not None else (_NONE, _NONE)
    return (np.concatenate([first[0], second[0]]), np.concatenate([first[1], second[1]]))


def declines(schedule: Schedule | Blocks, machine: Machine, *, asked: bool = False) -> str | None:
    """Why the vectorised engine leaves ``schedule`` to SimPy on ``machine``, or None.

    - Several threads of one rank reducing at once on a GPU whose reductions take time queue
      in an order that same-instant ties decide, and SimPy's event order is the reference for
      those.
    - Unless the scenario ``asked`` for this engine (``engine: vector``), a schedule that is
      only a program's trace (:attr:`Blocks.traced <simulator.algorithms.schedule.Blocks.traced>`:
      no hand-written builder, as for NVLS) runs on SimPy, as ``engine: auto`` did before
      traces existed, so that auto's pick per point (the results' ``engine`` column) stays
      as it was. For NVLS SimPy is the faster anyway: its rounds pipeline a few messages an
      instant (1 GiB on a DGX H100, 32,768 messages: 2.0 s on SimPy, 3.3 s here with the
      trace's 0.3 s).
    """
    if schedule.reducing_threads > 1 and machine.gpu.reduce_s(1.0) > 0:
        return (f"its {schedule.reducing_threads} threads per rank reduce at once on a GPU with a "
                "reduction cost, whose queue only the SimPy engine orders")
    if isinstance(schedule, Blocks) and schedule.traced:
        return declines_trace(asked=asked)
    return None


def declines_trace(*, asked: bool) -> str | None:
    """:func:`declines`' rule for a schedule that is only a program's trace, which a caller can
    apply before tracing (a trace built only to be declined costs Python per message)."""
    return None if asked else "it has no hand-written schedule, and auto runs traced ones on SimPy"


def run_schedule(schedule: Schedule | Blocks, machine: Machine, payload: Payload,
                 reduce_op: ReduceOp, buffers: np.ndarray, name: str,
                 recorder: Recorder | None = None, *, fast_forward: bool = True) -> VectorTiming:
    """Run ``schedule`` (whole, or a block at a time) on ``machine``; ``buffers`` (ranks ×
    proxy) end holding its result (before ``reduce_op.finalize``). ``recorder`` (optional)
    gets every link's bytes and busy time; it must not trace (only SimPy traces).
    ``fast_forward`` jumps over a steady pipeline's repeating periods, to the bit
    (:mod:`simulator.engine.steady`)."""
    blocks = schedule if isinstance(schedule, Blocks) else Blocks.whole(schedule)
    if recorder is not None and recorder.trace:
        raise ValueError("the vectorised engine records links, not timelines: trace on SimPy")
    return _Run(blocks, machine, payload, reduce_op, buffers, name, recorder,
                fast_forward).run()
