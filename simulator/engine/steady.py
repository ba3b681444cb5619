"""Steady-state fast-forward for the vectorised engine: a pipeline's repeating instants skipped,
to the bit.

A pipelined collective spends most of its instants in a steady state: the same flows on the
same routes at the same rates, each period moving the next pieces. :class:`Steady` hashes the
run's state at the end of an instant, relative to the instant's time and to the first message
not yet received (its :class:`Signature`: flows, starts and reductions due, busy GPUs and
proxies), and where a hash recurs it has a period: ``instants`` instants, ``period_s`` seconds,
``shift`` messages further on. It confirms the period over two more, comparing every message
from the base to the last one touched (:class:`Snapshot`): where a message repeats the one a
shift before it (:class:`_Columns`: same ends and bytes, pointers a shift on), the same status
and post time; elsewhere (the first pieces of the next region of a schedule numbered edge by
edge) both at rest (:func:`inert`).

Why a jump is exact, not an approximation. Every time the engine computes is a time it already
holds plus an offset computed from bytes, rates and latencies (a route's latency, a flow's
``remaining / rate``, a reduction's duration, the difference of two times to bring bytes up to
date), or a max, min or comparison of times. Inside one binade ``[2^(e-1), 2^e)`` floats are
evenly spaced, so such an addition rounds the same way at ``t`` and at ``t + n·ulp`` (but for a
tie, rounded to even by the last bit of ``t``): the engine's arithmetic is exactly invariant
under a shift by a whole number of ulps. So when every time of the state lies in the binade of
the instant and the state recurs bit for bit, the period repeats bit for bit until the binade
ends; the two confirming periods cover both parities of the time's last bit, which is all a
tie-to-even can depend on. The jump adds ``k·period_s`` to every time of the state (exact: on
the binade's grid) and ``k·shift`` to every message number, and replays what the skipped
periods leave behind, in the order they would have done it:

- the data: every post's snapshot and every receive's copy or reduction of the second
  confirming period, shifted, period after period (so ``verified`` still proves the algorithm);
- the link tally: each instant's busy time added to the links it held, as the run adds it;
- the messages' states: posted, arrived, received, with their times (:class:`_Writes`).

A jump stops before the binade ends, before the capacity timeline's next step (a fault, an
outage), and before a period would touch a message that does not repeat its own (the tail of a
pipeline, the end of a phase); the run then goes on instant by instant, and finds the period
again in the next binade. A run whose parts drift against each other (channels whose pieces
take different times on different routes) never repeats as a whole: after :data:`MISSES`
signatures without a period it takes them less often, down to one every :data:`STRIDE`
instants. ``fast_forward: false`` (:class:`~simulator.settings.RunSettings`) turns it off; the
two give the same times, buffers, link figures and instant counts (tests/test_steady.py).
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

import numpy as np

from simulator.algorithms.schedule import NONE
from simulator.engine.kernel import INF

if TYPE_CHECKING:
    from simulator.engine.buffers import Buffers
    from simulator.engine.devices import Devices
    from simulator.engine.flows import Flows
    from simulator.engine.kernel import CapacityStep
    from simulator.engine.pending import Pending
    from simulator.engine.tally import LinkTally
    from simulator.engine.window import Held

STORE_INSTANTS = 2048
"""How many of the latest instants' signatures are remembered: the longest period found."""

MISSES = 256
"""Signatures taken without finding a period before the run takes them half as often (a
run whose channels drift against each other never repeats). A state that recurs at every
k-th instant recurs at a multiple of the period, so the run then takes every instant's again
to find the period itself (a multiple would be as exact, but take k times as long to
confirm)."""

STRIDE = 64
"""The most instants between two signatures: what seeking costs a run that never repeats is
about 7 × :data:`MISSES` signatures, then one every 64 instants (4-6 % more wall time on
``scenarios/gb200_nvl72.yaml``, 136,603 instants and no period; 9 % with 16)."""

POINTERS = ("posted_after", "connection_previous", "receive_previous")
"""The schedule's pointer columns: in a periodic schedule each points ``shift`` further on."""


class Op(Enum):
    """What the data of a run does at an instant: a post takes its senders' spans, a receive
    copies or reduces them into its receivers'."""

    POST = "post"
    RECEIVE = "receive"


DONE, POSTED, ARRIVED, STARTED, INITIAL = 1, 2, 4, 8, 16
"""A message's status bits: received, posted, arrived, started (its flow or its reduction due
or under way), posted at the start of the run (``posted_after`` none)."""


def inert(status: np.ndarray, since: np.ndarray) -> np.ndarray:
    """Which messages wait for nothing timed: received; not posted; posted and waiting for the
    message before it on its connection with no start depending on its post time any more;
    or arrived and waiting for the receive before it. Such a message moves only when another
    one does (so a period that moves it records it)."""
    waiting = ((status & STARTED) == 0) & ~np.isfinite(since)
    result: np.ndarray = ((status & DONE) != 0) | waiting
    return result


@dataclass(frozen=True)
class Signature:
    """The run's state at the end of one instant, relative to its time ``now`` and to ``base``,
    the first message not yet received: ``digest`` hashes the bits of everything in progress
    (messages posted and not received, flows, starts and reductions due, busy GPUs and
    proxies); ``top`` is the last message touched, ``ceiling`` the latest time the state
    holds, ``instant`` how many instants the run had processed."""

    instant: int
    now: float
    base: int
    top: int
    ceiling: float
    digest: bytes


@dataclass(frozen=True)
class Snapshot:
    """A signature with the status of every message from its base to its top (bits
    :data:`DONE`, posted, arrived) and the times those not received were posted and arrived
    (the post time relative to ``now``, -inf where no start depends on it any more)."""

    signature: Signature
    status: np.ndarray
    since: np.ndarray
    posted: np.ndarray
    arrived: np.ndarray


@dataclass(frozen=True)
class Jump:
    """What a jump went over, for the run to move its state on by: ``messages`` further on
    (every message number in progress), ``seconds`` later (every time in progress), ``instants``
    more instants, and whether those completed receives (the run's time then moves too)."""

    messages: int
    seconds: float
    instants: int
    receives: bool


class _Columns:
    """A copy of the schedule's timing columns from message ``first`` on, extended as the run
    loads blocks, and which messages repeat the one ``shift`` before them (``regular``: same
    ends and bytes, pointers ``shift`` further on, and the same operation where a reduction
    takes the GPU time; where none does, a reduction and a copy take the same time, as the
    two phases of a ring)."""

    def __init__(self, held: Held, first: int, shift: int, reductions_take_time: bool) -> None:
        self.first, self.shift = first, shift
        self.NAMES = ("src", "dst", "nbytes", *(("reduce",) if reductions_take_time
                                               else ()), *POINTERS)
        self.columns: dict[str, np.ndarray] = {name: np.zeros(0, dtype=np.int64)
                                               for name in self.NAMES}
        self.regular = np.zeros(0, dtype=bool)
        self.late = np.zeros(0, dtype=np.int64)
        self.late_pointers = np.zeros((0, len(POINTERS)), dtype=np.int64)
        """The copied messages that do not repeat theirs, and their pointers."""
        self.extend(held)

    @property
    def stop(self) -> int:
        """One past the last message copied."""
        return self.first + len(self.regular)

    def extend(self, held: Held) -> None:
        """Copy the messages the run loaded since (held: nothing loaded is dropped unreceived)."""
        start = held.window.start
        lo, hi = self.stop - start, len(held.window)
        if hi <= lo:
            return
        s = held.s
        fresh = {"src": s.src[lo:hi], "dst": s.dst[lo:hi],  # src and dst: the route
                 "nbytes": s.send_stop[lo:hi] - s.send_start[lo:hi],
                 "reduce": s.reduce[lo:hi].astype(np.int64),
                 **{name: getattr(s, name)[lo:hi] for name in POINTERS}}
        old = len(self.regular)
        for name in self.NAMES:
            self.columns[name] = np.concatenate([self.columns[name], fresh[name]])
        k = np.arange(max(old, self.shift), len(self.columns["src"]), dtype=np.int64)
        same = np.ones(len(k), dtype=bool)
        for name in self.NAMES:
            now, before = self.columns[name][k], self.columns[name][k - self.shift]
            if name in POINTERS:
                same &= np.where(before == NONE, now == NONE, now == before + self.shift)
            else:
                same &= now == before
        regular = np.zeros(len(self.columns["src"]) - old, dtype=bool)
        regular[k - old] = same
        self.regular = np.concatenate([self.regular, regular])
        odd = np.flatnonzero(~regular) + old
        self.late = np.concatenate([self.late, odd + self.first])
        self.late_pointers = np.concatenate([self.late_pointers, np.stack(
            [self.columns[name][odd] for name in POINTERS], axis=1)])

    def trim(self, before: int) -> None:
        """Forget the messages before ``before - shift`` (none of them is compared again)."""
        cut = before - self.shift - self.first
        if cut > 0:
            kept = self.late >= self.first + cut
            self.late, self.late_pointers = self.late[kept], self.late_pointers[kept]
            self.first += cut
            self.regular = self.regular[cut:]
            for name in self.NAMES:
                self.columns[name] = self.columns[name][cut:]

    def regular_at(self, numbers: np.ndarray) -> np.ndarray:
        """Whether each of ``numbers`` is copied and repeats the message ``shift`` before it."""
        at = numbers - self.first
        inside = (at >= 0) & (at < len(self.regular))
        regular: np.ndarray = np.zeros(len(numbers), dtype=bool)
        regular[inside] = self.regular[at[inside]]
        return regular

    def irregular(self, first: int, last: int) -> np.ndarray:
        """The copied messages from ``first`` to ``last`` that do not repeat theirs."""
        lo, hi = np.searchsorted(self.late, [first, last + 1])
        irregular: np.ndarray = self.late[lo:hi]
        return irregular

    def pointing(self, first: int, last: int) -> np.ndarray:
        """The copied messages that do not repeat theirs and point to one of ``first`` to
        ``last``."""
        into = ((self.late_pointers >= first) & (self.late_pointers <= last)).any(axis=1)
        pointing: np.ndarray = self.late[into]
        return pointing


class _Writes:
    """What a period of the jump changes in the messages' states, found once: the template's
    messages (numbered from its first) received in it become received, and those from the
    snapshot's base on take the snapshot's status and times, moved on; a message whose state
    is the one ``shift`` after it, both at rest, keeps the one it has (it had it a period
    before)."""

    def __init__(self, at: Snapshot, received_by: int, shift: int, floor_s: float) -> None:
        status, since = at.status, at.since
        rest = inert(status, since)
        moved = np.zeros(len(status), dtype=bool)
        moved[:-shift] = ((status[:-shift] == status[shift:]) & rest[:-shift] & rest[shift:]
                          if shift < len(status) else False)
        self.received_by = received_by
        self.gone = np.arange(received_by, dtype=np.int64)
        self.live = np.flatnonzero(~moved)
        self.status, self.posted, self.arrived = at.status, at.posted, at.arrived
        self.floor_s = floor_s

    def drop(self, broken: np.ndarray) -> None:
        """Messages of the template whose repeat broke: their states are left as they are."""
        self.gone = self.gone[~np.isin(self.gone, broken)]
        self.live = self.live[~np.isin(self.live + self.received_by, broken)]

    def apply(self, held: Held, first: int, done: int, now: float, period_s: float) -> None:
        """Write period ``done + 1``'s states: the template's first message is at window
        position ``first``; the jump started at ``now``."""
        gone = self.gone + first
        fake = now + done * period_s  # finite, and earlier than any use of it
        held.received[gone] = True
        held.posted[gone] = np.where(held.posted[gone] < INF, held.posted[gone], fake)
        held.arrived[gone] = np.where(held.arrived[gone] < INF, held.arrived[gone], fake)
        live, into = self.live, self.live + self.received_by + first
        later = (done + 1) * period_s
        posted, arrived = self.posted[live], self.arrived[live]
        held.received[into] = (self.status[live] & DONE) != 0
        held.posted[into] = np.where((posted >= self.floor_s) & (posted < INF), posted + later,
                                     posted)
        held.arrived[into] = np.where((arrived >= self.floor_s) & (arrived < INF),
                                      arrived + later, arrived)


@dataclass
class _Period:
    """A period being confirmed: the snapshot it started from, its length in instants and
    seconds and its shift in messages, whether it is the second (whose instants' data
    operations and link tally are kept as the jump's template)."""

    start: Snapshot
    instants: int
    period_s: float
    shift: int
    second: bool = False
    ops: list[tuple[Op, np.ndarray]] = field(default_factory=list)
    tally: list[tuple[np.ndarray, float]] = field(default_factory=list)


class Steady:
    """Finds a run's steady period and jumps over its repeats (see the module). The run calls
    :meth:`boundary` at the end of every instant, :meth:`record` for its data operations,
    :meth:`elapsed` for its link tally and :meth:`loaded` for each block it loads, and moves
    its state on by the :class:`Jump` a boundary returns.

    It reads the run's state through :class:`_State` (the messages ``held``, the ``flows``,
    the ``starts`` and ``completions`` pending, the ``devices``, the capacity ``steps`` still
    to come, the next last); a jump writes the messages' states in ``held``, replays a
    period's data operations on ``buffers`` and its link tally on ``tally``.
    ``initial_ready``: the latest time a message posted at the start may start at."""

    def __init__(self, *, held: Held, flows: Flows, starts: Pending, completions: Pending,
                 devices: Devices, buffers: Buffers, tally: LinkTally | None,
                 steps: list[CapacityStep], initial_ready: float) -> None:
        self.state = _State(held, flows, starts, completions, devices, steps, initial_ready)
        self.held, self.buffers, self.tally, self.steps = held, buffers, tally, steps
        self.reductions_take_time = devices.reductions_take_time
        self.seen: OrderedDict[bytes, Signature] = OrderedDict()
        self.period: _Period | None = None
        self.columns: _Columns | None = None
        self.rest_until: tuple[int, float, int] = (-1, 0.0, -1)
        """Seek no period until the base passes the first, the time reaches the second, and the
        capacity steps left are not the third: where the last jump stopped."""
        self.stride, self.misses, self.tick = 1, 0, 0
        """Take a signature every ``stride``-th instant; ``misses`` since the stride last
        changed."""
        self.jumps = 0
        self.skipped = 0
        """Jumps made, and the instants they went over (:class:`VectorTiming`)."""

    @property
    def recording(self) -> bool:
        """Whether the run's data operations and tally are kept (a second period is confirmed)."""
        return self.period is not None and self.period.second

    def record(self, op: Op, messages: np.ndarray, start: int) -> None:
        """The run posted or received ``messages`` (window positions; ``start``: the window's
        first schedule number)."""
        assert self.period is not None
        self.period.ops.append((op, messages + start))

    def elapsed(self, users: np.ndarray, seconds: float) -> None:
        """``seconds`` passed with ``users`` flows on each link (the tally's step)."""
        assert self.period is not None
        self.period.tally.append((np.flatnonzero(users > 0), seconds))

    def loaded(self) -> None:
        """A block was loaded: copy its columns while a period is known."""
        if self.columns is not None:
            self.columns.extend(self.held)

    # -- at the end of an instant --------------------------------------------------------------

    def boundary(self, now: float, instants: int) -> Jump | None:
        """The end of the run's ``instants``-th instant, at ``now``: look for a period, confirm
        it twice, jump over its repeats. Returns what a jump went over (None: no jump)."""
        if self.period is None:
            self.tick += 1
            if self.tick % self.stride or self._resting(now):
                return None
        signature = self.state.signature(now, instants)
        if signature is None:
            self._forget()
            return None
        if self.period is not None:
            return self._confirm(signature)
        earlier = self.seen.get(signature.digest)
        if earlier is not None and self.stride > 1:  # a multiple of the period: find it itself
            self.stride, self.misses, earlier = 1, 0, None
        if earlier is not None and signature.base > earlier.base and signature.top > earlier.top:
            shift = signature.base - earlier.base
            if signature.top - earlier.top == shift:
                self.held.load_through(signature.top + shift)
                self.columns = _Columns(self.held, signature.base, shift,
                                        self.reductions_take_time)
                self.period = _Period(self.state.snapshot(signature),
                                      signature.instant - earlier.instant,
                                      signature.now - earlier.now, shift)
                return None
        self.misses += 1
        if self.misses == MISSES:
            self.stride, self.misses = min(2 * self.stride, STRIDE), 0
        self.seen[signature.digest] = signature
        self.seen.move_to_end(signature.digest)
        oldest = instants - STORE_INSTANTS
        while self.seen and next(iter(self.seen.values())).instant < oldest:
            self.seen.popitem(last=False)
        return None

    def _resting(self, now: float) -> bool:
        """Whether to seek no period yet: where the last jump stopped is not passed."""
        base, until_s, steps = self.rest_until
        return (now < until_s or len(self.steps) == steps
                or (base >= 0 and self.state.first_unreceived() <= base))

    def _forget(self) -> None:
        """Forget every signature and the period being confirmed."""
        self.seen.clear()
        self.period = None
        self.columns = None

    def _confirm(self, signature: Signature) -> Jump | None:
        """At the end of a period being confirmed: go on to a second, or jump."""
        period, columns = self.period, self.columns
        assert period is not None and columns is not None
        start = period.start.signature
        if signature.instant - start.instant < period.instants:
            return None
        snapshot = self.state.snapshot(signature)
        if not self._repeats(period, snapshot, columns):
            self._forget()
            return None
        if not period.second:
            self.period = _Period(snapshot, period.instants, period.period_s, period.shift,
                                  second=True)
            return None
        self.period = None
        jump = self._jump(period, snapshot, columns)
        self.seen.clear()
        self.columns = None
        return jump

    def _repeats(self, period: _Period, snapshot: Snapshot, columns: _Columns) -> bool:
        """Whether ``snapshot`` is the period's start one period on, bit for bit: where a
        message repeats the one ``shift`` before it, the same status and times; elsewhere
        both received."""
        before, after = period.start, snapshot
        a, b = before.signature, after.signature
        if (b.digest != a.digest or b.base - a.base != period.shift
                or b.top - a.top != period.shift or b.now - a.now != period.period_s):
            return False
        used = (after.since > -INF) & (after.since < INF)
        if np.any(after.posted[used] < 2.0 ** (math.frexp(b.now)[1] - 1)):
            return False  # a start depends on a post time before the binade
        regular = columns.regular_at(np.arange(b.base, b.top + 1, dtype=np.int64))
        same = (after.status == before.status) & (after.since == before.since)
        idle = inert(after.status, after.since) & inert(before.status, before.since)
        return bool(np.all(np.where(regular, same, idle)))

    # -- the jump ------------------------------------------------------------------------------

    def _jump(self, period: _Period, at: Snapshot, columns: _Columns) -> Jump | None:
        """Jump from ``at`` over as many repeats of ``period`` (its template: the operations
        and tally it recorded) as are exact, replaying what they leave behind; what it went
        over (None: not a period)."""
        held = self.held
        shift, period_s = period.shift, period.period_s
        now = at.signature.now
        top_of_binade = 2.0 ** math.frexp(now)[1]
        floor_s = top_of_binade / 2
        horizon = at.signature.ceiling - now
        repeats = math.floor((top_of_binade - at.signature.ceiling - horizon - period_s)
                             / period_s)
        capped = False
        if self.steps:
            step_s = self.steps[-1].at_s
            before_step = math.floor((step_s - at.signature.ceiling - horizon) / period_s) - 1
            capped = before_step < repeats
            repeats = min(repeats, before_step)
        first, base, top = period.start.signature.base, at.signature.base, at.signature.top
        received_by = base - first  # the template's messages before it received in it
        touched = np.zeros(top + 1 - first, dtype=bool)
        touched[received_by:] = ~inert(at.status, at.since)
        for _, messages in period.ops:
            touched[messages - first] = True
        writes = _Writes(at, received_by, period.shift, floor_s)
        broken = np.zeros(len(touched), dtype=bool)  # those whose repeat broke
        done = 0
        while done < repeats:
            offset = (done + 1) * shift
            reach = top + offset
            held.load_through(reach)
            if columns.stop <= reach:
                break
            fresh = columns.irregular(first + offset, reach) - offset - first
            if len(fresh):
                broken[fresh] = True
                if touched[fresh].any():
                    break
                writes.drop(fresh)
            if not self._safe(columns, np.flatnonzero(broken) + first + offset,
                              first + offset, reach, now + done * period_s):
                break
            for op, messages in period.ops:
                self._replay(op, messages + offset - held.window.start)
            if self.tally is not None:
                busy = self.tally.busy
                for links, seconds in period.tally:
                    busy[links] += seconds
            writes.apply(held, first + offset - held.window.start, done, now, period_s)
            done += 1
            if held.drop_due:
                held.drop()
                columns.trim(held.window.start)
        if done < repeats:  # the schedule's period broke
            self.rest_until = (top + done * shift, 0.0, -1)
        elif capped:
            self.rest_until = (-1, 0.0, len(self.steps))
        else:
            self.rest_until = (-1, top_of_binade, -1)
        if done == 0:
            return None
        self.jumps += 1
        self.skipped += done * period.instants
        return Jump(done * shift, done * period_s, period.instants * done,
                    any(op is Op.RECEIVE for op, _ in period.ops))

    def _replay(self, op: Op, messages: np.ndarray) -> None:
        """What posting or receiving ``messages`` (window positions) does to the data, alone:
        the timing is the jump's."""
        if op is Op.POST:
            self.held.load_ahead(messages)
            self.buffers.snapshot(messages)
        else:
            self.buffers.combine(messages)

    def _safe(self, columns: _Columns, broken: np.ndarray, first: int, last: int,
              now: float) -> bool:
        """Whether the next period (from ``now``, on messages ``first`` to ``last``) can repeat
        the template where ``broken`` messages of its range do not repeat theirs: nothing is in
        progress on them, and no message that does not repeat its own, not yet received,
        points into the range (it could move with it where its counterpart does not)."""
        start, size = self.held.window.start, len(self.held.window)
        broken = broken[broken >= start] - start
        if len(broken) and not self.state.inert_now(broken, now).all():
            return False
        pointing = columns.pointing(first, last)
        pointing = pointing[(pointing >= start) & (pointing < start + size)] - start
        return not len(pointing) or bool(self.held.received[pointing].all())


class _State:
    """The run's state as :class:`Steady` reads it: relative to an instant's time and to the
    first message not yet received (:class:`Signature`, :class:`Snapshot`), from the messages
    ``held``, the ``flows``, the ``starts`` and ``completions`` pending, the ``devices`` and
    the capacity ``steps`` still to come. ``initial_ready``: the latest time a message posted
    at the start may start at."""

    def __init__(self, held: Held, flows: Flows, starts: Pending, completions: Pending,
                 devices: Devices, steps: list[CapacityStep], initial_ready: float) -> None:
        self.held, self.flows, self.devices = held, flows, devices
        self.starts, self.completions = starts, completions
        self.steps = steps
        self.initial_ready = initial_ready
        self.base = 0
        """The first message not yet received, as last found (:meth:`first_unreceived`)."""

    def signature(self, now: float, instants: int) -> Signature | None:
        """The run's state at ``now``, after ``instants`` instants, in relative terms, or None
        where no period can be exact from it: nothing in progress, a rank yet to enter, or a
        time of the state outside the binade of ``now``."""
        flows, starts, completions, devices = (self.flows, self.starts, self.completions,
                                               self.devices)
        if now <= 0.0 or (devices.entry is not None and float(devices.entry.max()) > now):
            return None
        start = self.held.window.start
        base = self.first_unreceived()
        top = self.held.top
        if top < base:
            return None
        if now <= self.initial_ready:  # a start may still depend on a post at the start
            return None
        lo = base - start
        times = [starts.at, flows.ends[flows.ends < INF], flows.updated, completions.at]
        gpu = devices.gpu_free[devices.gpu_free > now]
        proxy = devices.proxy_free[devices.proxy_free > now]
        exponent = math.frexp(now)[1]
        low = min((float(t.min()) for t in times if len(t)), default=now)
        high = max([now, *(float(t.max()) for t in (*times, gpu, proxy) if len(t))])
        if low < 2.0 ** (exponent - 1) or high >= 2.0 ** exponent:
            return None
        digest = hashlib.blake2b(digest_size=16)
        digest.update(np.array([len(self.steps), exponent, top - base, len(starts.ids),
                                len(flows.active), len(completions.ids)],
                               dtype=np.int64).tobytes())
        for part in (starts.ids - lo, starts.at - now,
                     flows.active - lo, flows.rate, flows.remaining, flows.ends - now,
                     flows.updated - now, completions.ids - lo, completions.at - now,
                     np.maximum(devices.gpu_free - now, 0.0),
                     np.maximum(devices.proxy_free - now, 0.0)):
            digest.update(np.ascontiguousarray(part).tobytes())
        return Signature(instants, now, base, top, high, digest.digest())

    def since(self, messages: np.ndarray, now: float) -> np.ndarray:
        """When ``messages`` (window positions, posted) were posted, relative to ``now``; -inf
        for those whose start no longer depends on it (the later of now and post + latency is
        now), whichever post time it was."""
        posted = self.held.posted[messages]
        since: np.ndarray = np.where(self.devices.ready(messages, posted) >= now, posted - now,
                                     -INF)
        return since

    def snapshot(self, signature: Signature) -> Snapshot:
        """The statuses and times of every message from the signature's base to its top."""
        held = self.held
        start = held.window.start
        lo, hi = signature.base - start, signature.top - start + 1
        status, since = self.status(np.arange(lo, hi), signature.now)
        return Snapshot(signature, status, since, held.posted[lo:hi].copy(),
                        held.arrived[lo:hi].copy())

    def status(self, messages: np.ndarray, now: float) -> tuple[np.ndarray, np.ndarray]:
        """The status bits of ``messages`` (window positions), and when those posted and not
        received were posted, relative to ``now`` (:meth:`since`; inf for the others)."""
        held = self.held
        received, posted = held.received[messages], held.posted[messages]
        status = (received.astype(np.uint8) | ((posted < INF).astype(np.uint8) * POSTED)
                  | ((held.arrived[messages] < INF).astype(np.uint8) * ARRIVED)
                  | ((held.s.posted_after[messages] == NONE).astype(np.uint8) * INITIAL))
        started = np.concatenate([self.flows.active, self.starts.ids, self.completions.ids])
        status[np.isin(messages, started)] |= STARTED
        since = np.full(len(messages), INF)
        live = np.flatnonzero((posted < INF) & ~received)
        since[live] = self.since(messages[live], now)
        return status, since

    def first_unreceived(self) -> int:
        """The first message not yet received (schedule number), found from the last one."""
        start = self.held.window.start
        at = max(self.base - start, 0)
        received = self.held.received
        while at < len(received):
            chunk = received[at:at + 4096]
            if not chunk.all():
                at += int(np.argmin(chunk))
                break
            at += len(chunk)
        self.base = at + start
        return self.base

    def inert_now(self, messages: np.ndarray, now: float) -> np.ndarray:
        """:func:`inert` of ``messages`` (window positions) as the run holds them at ``now``."""
        result: np.ndarray = self.held.received[messages].copy()
        if result.all():
            return result
        rest = messages[~result]
        result[~result] = inert(*self.status(rest, now))
        return result
