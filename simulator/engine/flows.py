"""The flows of a vectorised run: the messages moving their bytes over links, at their max-min
fair share of every link they cross (:func:`~simulator.engine.kernel.max_min_rates`).

A flow joins when its message starts and leaves when its bytes are through; the capacity
timeline's steps change links under it, and a failed link moves it onto its pair's new route.
The links re-share once per instant, at its end, and only the flows connected to a link whose
flows or capacity changed (:meth:`Reach.component`): the kernel gives a component alone the rates it
gets among every flow, to the bit. A flow's remaining bytes are brought up to date only when
its rate moves (``remaining -= rate · (now - updated)``, then ``end = now + remaining / rate``),
with the SimPy fabric's operations.
"""

from __future__ import annotations

import time

import numpy as np

from simulator.engine.compiled import compiled_component, wanted
from simulator.engine.kernel import INF, CapacityStep, distinct
from simulator.engine.routes import Routes
from simulator.engine.tally import LinkTally
from simulator.engine.window import Held


class Reach:
    """Which pairs with flows are connected to a changed link through links they share
    (:meth:`component`), with scratch kept from call to call: a pair reached is stamped with
    the call's number, so that a call costs the pairs and links it reaches, not every pair
    known (40,416 for NVLSTree at 128 MiB on 128 DGX H100, where a median re-share reaches
    64)."""

    def __init__(self) -> None:
        self.stamp = np.zeros(0, dtype=np.int64)
        """The last call that reached each pair (by pair number)."""
        self.call = 0
        self.pair_slots = np.zeros(0, dtype=np.int64)
        self.link_slots = np.zeros(0, dtype=np.int64)

    def component(self, dirty: np.ndarray, routes: Routes, copies: np.ndarray, busy: int,
                  compiled: bool = False) -> np.ndarray:
        """The pairs (sorted) with flows on them (``copies`` > 0, ``busy`` of them) that are
        connected to a ``dirty`` link: grown a layer a round (the pairs that cross a link the
        last round reached) until no pair joins, or every busy pair once more than half have
        (re-sharing all is exact too, and then cheaper than finding the rest). A round reads
        only the links the last one reached (their crossers, :meth:`Routes.crossers`), not
        every busy pair's row: the pairs that cross a link reached before were all taken in
        by an earlier round. ``compiled``: in numba's loops where it is installed (the same
        pairs; :func:`~simulator.engine.compiled.wanted`)."""
        pairs = len(routes.count)
        assert len(copies) == pairs, "the counts must cover every pair routed"
        if len(self.stamp) < pairs:  # pairs routed since: never reached
            self.stamp = np.concatenate([self.stamp, np.zeros(pairs - len(self.stamp),
                                                              dtype=np.int64)])
        if len(self.pair_slots) < pairs:
            self.pair_slots = np.empty(pairs, dtype=np.int64)
        if len(self.link_slots) < len(dirty):
            self.link_slots = np.empty(len(dirty), dtype=np.int64)
        self.call += 1
        call, stamp = self.call, self.stamp
        loops = compiled_component() if compiled else None
        if loops is not None:  # the same layers in loops (the ``fast`` extra)
            cross_start, cross_pairs = routes.crossers_index()
            walked, half = loops(np.flatnonzero(dirty), len(dirty), cross_start, cross_pairs,
                                 routes.first, routes.count, routes.links, copies, stamp, call,
                                 busy)
            return np.flatnonzero(copies) if half else walked
        reached = dirty.copy()
        frontier = np.flatnonzero(dirty)
        found: list[np.ndarray] = []
        taken = 0
        while True:
            crossing = routes.crossers(frontier)
            crossing = crossing[(copies[crossing] > 0) & (stamp[crossing] != call)]
            new = distinct(crossing, self.pair_slots)
            if len(new) == 0:
                touched = np.concatenate(found) if found else new
                touched.sort()
                return touched
            stamp[new] = call
            found.append(new)
            taken += len(new)
            if 2 * taken > busy:
                every: np.ndarray = np.flatnonzero(copies)
                return every
            links = routes.links_of(new)
            frontier = distinct(links[~reached[links]], self.link_slots)
            reached[frontier] = True


class Flows:
    """The active flows, by message (window positions of the messages ``held`` holds): bytes
    left as of ``updated``, rate, and when each ends at that rate (inf before its first
    share); the links whose flows or capacity changed since the last re-share."""

    def __init__(self, held: Held, routes: Routes) -> None:
        self.held, self.routes = held, routes
        self.active = np.zeros(0, dtype=np.int64)
        self.pair = np.zeros(0, dtype=np.int64)
        """Each active flow's pair (``held.pair`` of its message), kept beside it: read at
        every re-share, where gathering it from the window would cost a pass over the
        flows."""
        self.remaining = np.zeros(0)
        self.rate = np.zeros(0)
        self.updated = np.zeros(0)
        self.ends = np.zeros(0)
        self.dirty = np.zeros(len(routes.users), dtype=bool)
        """Links whose flows or capacity changed since the last re-share."""
        self.copies = np.zeros(0, dtype=np.int64)
        """Active flows on each pair (by pair number), kept as flows join and leave."""
        self.busy = 0
        """How many pairs have flows on them (``copies`` > 0)."""
        self.slots = np.zeros(0, dtype=np.int64)
        """Scratch for :func:`distinct` over pairs (any contents)."""
        self.fingerprint = 0
        """The sum of the active flows' pairs' weights (``Routes.weight``), modulo 2**64."""
        self.reach = Reach()
        self.which = np.zeros(0, dtype=np.int64)
        """Scratch: each pair's place among those a re-share solves, -1 between re-shares."""
        self.stale = False
        """Whether a steady period's jump moved the flows onto other messages since ``copies``
        and ``fingerprint`` were counted: counted afresh, with the flows' pairs, at the next
        re-share, when the window holds them."""
        self.changed = False
        """Whether a flow joined or left, or a capacity changed, since the last re-share."""
        self.reshares = 0
        """Re-shares so far that walked a component (solved, or its set's rates recalled):
        :func:`~simulator.engine.compiled.wanted` reads it."""
        self.sharing_wall_s = 0.0
        """Wall time spent re-sharing (:class:`~simulator.engine.vector.VectorTiming`)."""

    def moves(self, messages: np.ndarray) -> np.ndarray:
        """Which messages move bytes over links (the others end when they start, as in the
        fabric: no bytes, or no link between the two ranks)."""
        moves: np.ndarray = (self.held.nbytes(messages) > 0) & (
            self.routes.count[self.held.pair[messages]] > 0)
        return moves

    def next(self) -> float:
        """When the first flow ends at its rate now (inf: none does)."""
        earliest: float = self.ends.min(initial=INF)
        return earliest

    def join(self, flows: np.ndarray, now: float) -> None:
        """``flows`` (messages) start moving their bytes ``now``, at no rate until re-shared."""
        routes = self.routes
        pairs = self.held.pair[flows]
        links = routes.links_of(pairs)
        np.add.at(routes.users, links, 1)  # whole numbers: as a bincount added, cheaper
        self.dirty[links] = True
        self._count(pairs, 1)
        self.active = np.concatenate([self.active, flows])
        self.pair = np.concatenate([self.pair, pairs])
        self.remaining = np.concatenate([self.remaining, self.held.nbytes(flows)])
        self.rate = np.concatenate([self.rate, np.zeros(len(flows))])
        self.updated = np.concatenate([self.updated, np.full(len(flows), now)])
        self.ends = np.concatenate([self.ends, np.full(len(flows), INF)])
        self.changed = True

    def end(self, now: float) -> np.ndarray:
        """The flows that end ``now``, no longer active."""
        over = self.ends == now
        ended: np.ndarray = self.active[over]
        self._keep(~over)
        return ended

    def _keep(self, keep: np.ndarray) -> None:
        """Only the active flows ``keep`` says stay active."""
        if keep.all():
            return
        routes = self.routes
        pairs = self.pair[~keep]
        links = routes.links_of(pairs)
        np.subtract.at(routes.users, links, 1)
        self.dirty[links] = True
        self._count(pairs, -1)
        self.active, self.pair, self.remaining = (self.active[keep], self.pair[keep],
                                                  self.remaining[keep])
        self.rate, self.updated, self.ends = self.rate[keep], self.updated[keep], self.ends[keep]
        self.changed = True

    def _count(self, pairs: np.ndarray, sign: int) -> None:
        """Flows on ``pairs`` join (``sign`` 1) or leave (-1): their pairs' counts, how many
        pairs have flows, and the fingerprint follow (wrapping sums: the order of joins and
        leaves does not matter)."""
        if self.stale:
            return
        self._cover_pairs()
        if len(self.slots) < len(self.copies):
            self.slots = np.empty(len(self.copies), dtype=np.int64)
        each = pairs if len(pairs) == 1 else distinct(pairs, self.slots)
        before = int(np.count_nonzero(self.copies[each]))
        np.add.at(self.copies, pairs, sign)
        self.busy += int(np.count_nonzero(self.copies[each])) - before
        weight = int(self.routes.weight[pairs].sum())  # numpy's sum wraps at 2**64
        self.fingerprint = (self.fingerprint + sign * weight) % (1 << 64)

    def _cover_pairs(self) -> None:
        """Counts (none) for the pairs routed since ``copies`` last grew."""
        known = len(self.routes.count)
        if len(self.copies) < known:
            self.copies = np.concatenate([self.copies,
                                          np.zeros(known - len(self.copies), dtype=np.int64)])

    def settle(self, now: float) -> None:
        """The end of an instant: re-share if anything changed in it."""
        if self.changed:
            self._reshare(now)
        self.changed = False

    def _reshare(self, now: float) -> None:
        """New max-min rates for the active flows connected to a link whose flows or capacity
        changed since the last re-share (the component the instant touched: the kernel gives
        a component alone the rates it gets among every flow, to the bit, and the others keep
        theirs); retime those whose rate moved."""
        dirty, self.dirty = self.dirty, np.zeros(len(self.dirty), dtype=bool)
        if len(self.active) == 0 or not self.routes.users[dirty].any():
            return  # no flow crosses a changed link: the component is empty, no rate moves
        clock = time.perf_counter()
        routes = self.routes
        if self.stale:  # the flows moved on: their pairs and counts afresh
            self.pair = self.held.pair[self.active]
            self.copies, self.fingerprint, self.stale = np.zeros(0, dtype=np.int64), 0, False
            self.busy = 0
            self._count(self.pair, 1)
        pair = self.pair
        remembered: np.ndarray | None = np.zeros(0)  # only sets sharing links are remembered
        if routes.users.max() <= 1:  # no link shared: every flow alone on its route
            moving = np.arange(len(pair))
            rates = routes.alone[pair]
        else:
            remembered = routes.whole(self.fingerprint, self.copies)
            if remembered is not None:  # this very set of flows met before: its rates then
                moving, rates = np.arange(len(pair)), remembered[pair]
            else:  # flows on one route get one rate: share each route once, with its count
                self._cover_pairs()
                copies = self.copies
                self.reshares += 1
                compiled = wanted(len(copies), self.reshares)
                touched = self.reach.component(dirty, routes, copies, self.busy, compiled)
                if len(self.which) < len(copies):
                    self.which = np.full(len(copies), -1, dtype=np.int64)
                which = self.which
                which[touched] = np.arange(len(touched), dtype=np.int64)
                shared = routes.shares(touched, copies[touched], compiled)
                mine = which[pair]
                which[touched] = -1
                moving = np.flatnonzero(mine >= 0)  # the others keep their rates
                rates = shared[mine[moving]]
        moved = rates != self.rate[moving]
        if moved.any():
            rates, moved = rates[moved], moving[moved]
            remaining = np.maximum(self.remaining[moved] - self.rate[moved]
                                   * (now - self.updated[moved]), 0.0)
            self.remaining[moved] = remaining
            self.updated[moved] = now
            self.rate[moved] = rates
            with np.errstate(divide="ignore", invalid="ignore"):  # rate 0: a link carries
                ends = now + remaining / rates  # nothing, the flow waits
            self.ends[moved] = np.where(rates > 0, ends, INF)
        if remembered is None:  # every flow now has its rate in this set: one per pair
            by_pair = np.full(len(self.copies), np.nan)
            by_pair[pair] = self.rate
            routes.keep_whole(self.fingerprint, self.copies.copy(), by_pair)
        self.sharing_wall_s += time.perf_counter() - clock

    def step(self, step: CapacityStep, tally: LinkTally | None) -> None:
        """Apply a step of the capacity timeline (re-shared at the end of its instant); where
        links fail, ``tally`` keeps the bytes their pairs moved on their old routes."""
        self.routes.set_capacity(step.links, step.capacities)
        self.dirty[step.links] = True
        self.changed = True
        if step.down:
            self._reroute(step.down, step.at_s, tally)

    def _reroute(self, failed: frozenset[tuple[str, str]], now: float,
                 tally: LinkTally | None) -> None:
        """Links ``failed`` fail at ``now``: the pairs whose route crosses one take a new
        route, their flows on their way moved onto it with the bytes they have left, re-shared
        at the end of the instant (a flow's bytes are brought up to date when its rate moves,
        as ever)."""
        routes, held = self.routes, self.held
        after = routes.routing.rerouted(failed)
        after.check_reach(held.machine.placement, now, failed)
        pairs = routes.crossing(failed)
        pair = held.pair[self.active]
        moving = np.isin(pair, pairs)
        flows = np.flatnonzero(moving)
        old = routes.links_of(pair[flows])
        routes.users -= np.bincount(old, minlength=len(routes.users))
        self.dirty[old] = True
        if tally is not None:
            left = np.maximum(self.remaining[flows] - self.rate[flows]
                              * (now - self.updated[flows]), 0.0)
            waiting = np.flatnonzero((held.arrived == INF) & np.isin(held.pair, pairs))
            waiting = waiting[~np.isin(waiting, self.active)]
            # bytes as floats even where no message waits: numpy's bincount of nothing gives
            # integer zeros, weights or not, which cannot take the flows' float bytes in place
            unmoved = np.zeros(len(pairs))
            unmoved += np.bincount(np.searchsorted(pairs, held.pair[waiting]),
                                   weights=held.nbytes(waiting), minlength=len(pairs))
            unmoved += np.bincount(np.searchsorted(pairs, pair[flows]), weights=left,
                                   minlength=len(pairs))
            tally.settle(routes, pairs, unmoved)
        routes.reroute(after, pairs)
        new = routes.links_of(pair[flows])
        routes.users += np.bincount(new, minlength=len(routes.users))
        self.dirty[new] = True

    def renumber(self, dropped: int) -> None:
        """The window dropped ``dropped`` messages from its front (the flows' pairs, and so
        their counts, stay as they are)."""
        self.active = self.active - dropped

    def shift(self, messages: int, seconds: float) -> None:
        """A steady period's jump: each flow ``messages`` further on, its times ``seconds``
        later (its bytes, rate and pair as they are: a period repeats the senders and
        receivers of the messages in progress, so the pairs stay; the counts are recounted
        at the next re-share all the same)."""
        self.active = self.active + messages
        self.ends, self.updated = self.ends + seconds, self.updated + seconds
        self.stale = True
