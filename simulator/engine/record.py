"""Recording what a run does on its links and, when traced, its timeline.

A :class:`Recorder` is handed to one run. Both engines tell it what each link carried and how
long it was busy (at least one flow on it): the SimPy fabric flow by flow, as flows start and
end; the vectorised engine as arrays, at the end of its run. A traced run (SimPy only: it runs
every rank's program, so its slices carry the program's labels) also gives it slices (sends,
receive-waits, reductions, in-switch steps) and every change of a link's carried rate.
:meth:`Recorder.activity` turns it all into an :class:`~simulator.model.activity.Activity`.

Without a recorder the engines record nothing and pay one ``is None`` test per flow.
"""

from __future__ import annotations

from collections.abc import Iterable

from simulator.limits import MAX_TRACE_SAMPLES, MAX_TRACE_SLICES, TRACE_RATE_LINKS
from simulator.model.activity import (
    TIE,
    Activity,
    LinkRate,
    LinkUse,
    Slice,
    SliceKind,
    bottleneck,
    busiest_first,
)
from simulator.model.routing import LinkId, Routing

_Slice = tuple[str, int, SliceKind, str, float, float, str, float]
_USERS, _SINCE, _BYTES, _BUSY = range(4)
"""A link's state while a run goes (one list per link, so a flow finds it in one lookup):
flows on it now, since when it is busy, bytes carried and seconds busy so far."""


class Recorder:
    """Per-link bytes and busy time of one run, and with ``trace`` its slices and link rates.

    Times are the engine's; ``offset_s`` (the execution model's pipeline fill, which the point's
    time adds to the engine's) is added to every time the activity reports. Beyond
    ``max_slices`` slices, later ones are counted but not kept; rate samples likewise beyond
    ``max_samples``.
    """

    def __init__(self, routing: Routing, *, trace: bool = False, offset_s: float = 0.0,
                 max_slices: int = MAX_TRACE_SLICES, max_samples: int = MAX_TRACE_SAMPLES,
                 rate_links: int = TRACE_RATE_LINKS) -> None:
        self.routing = routing
        self.trace = trace
        self.offset_s = offset_s
        self.max_slices, self.max_samples, self.rate_links = max_slices, max_samples, rate_links
        self._links: dict[LinkId, list[float]] = {}
        self._flow_links: dict[int, tuple[LinkId, ...]] = {}
        self._flow_rate: dict[int, float] = {}
        self._rate: dict[LinkId, float] = {}
        self._samples: dict[LinkId, list[tuple[float, float]]] = {}
        self._sampled = 0
        self._dropped_samples = 0
        self._slices: list[_Slice] = []
        self._dropped = 0
        self._dropped_from: float | None = None

    # -- the SimPy fabric, flow by flow --------------------------------------------------------

    def flow_started(self, flow: int, links: tuple[LinkId, ...], size_bytes: float,
                     now: float) -> list[list[float]]:
        """A flow of ``size_bytes`` starts over ``links``; the state of its links, to give
        back to :meth:`flow_ended`."""
        states = []
        known = self._links
        for link in links:
            state = known.get(link)
            if state is None:
                state = known[link] = [0, now, 0.0, 0.0]
            elif state[_USERS] == 0:
                state[_SINCE] = now
            state[_USERS] += 1
            state[_BYTES] += size_bytes
            states.append(state)
        if self.trace:
            self._flow_links[flow] = links
        return states

    def flow_moved(self, flow: int, states: list[list[float]], links: tuple[LinkId, ...],
                   left_bytes: float, rate: float, now: float) -> list[list[float]]:
        """A flow moves onto ``links`` (a link failed under it) with ``left_bytes`` still to
        move: its old links keep only what it moved on them; the state of its new ones, to give
        back to :meth:`flow_ended`."""
        for state in states:
            state[_BYTES] -= left_bytes
        self.flow_ended(flow, states, now)
        moved = self.flow_started(flow, links, left_bytes, now)
        if self.trace and rate:
            self.flow_rate(flow, rate, now)
        return moved

    def flow_rate(self, flow: int, rate: float, now: float) -> None:
        """A flow's rate changed (traced runs only): the rate its links carry moves with it."""
        delta = rate - self._flow_rate.get(flow, 0.0)
        self._flow_rate[flow] = rate
        for link in self._flow_links[flow]:
            self._sample(link, self._rate.get(link, 0.0) + delta, now)

    def flow_ended(self, flow: int, states: list[list[float]], now: float) -> None:
        """A flow's last byte arrived (``states``: what :meth:`flow_started` gave)."""
        for state in states:
            state[_USERS] -= 1
            if state[_USERS] == 0:
                state[_BUSY] += now - state[_SINCE]
        if self.trace:
            links = self._flow_links.pop(flow)
            rate = self._flow_rate.pop(flow, None)
            if rate is not None:  # an idle link carries exactly nothing, whatever the rounding
                for link in links:
                    idle = self._links[link][_USERS] == 0
                    self._sample(link, 0.0 if idle else self._rate[link] - rate, now)

    def _sample(self, link: LinkId, rate: float, now: float) -> None:
        self._rate[link] = rate
        if self._sampled >= self.max_samples:
            self._dropped_samples += 1
            return
        self._sampled += 1
        self._samples.setdefault(link, []).append((now, rate))

    # -- the vectorised engine, at the end -----------------------------------------------------

    def add_links(self, links: Iterable[LinkId], carried: Iterable[float],
                  busy: Iterable[float]) -> None:
        """Bytes carried and seconds busy of ``links`` over the whole run."""
        for link, nbytes, seconds in zip(links, carried, busy, strict=True):
            state = self._links.setdefault(link, [0, 0.0, 0.0, 0.0])
            state[_BYTES] += float(nbytes)
            state[_BUSY] += float(seconds)

    # -- slices --------------------------------------------------------------------------------

    def add_slice(self, track: str, rank: int, kind: SliceKind, label: str, start_s: float,
                  end_s: float, peer: str, size_bytes: float) -> None:
        """One slice of the timeline (engine times), kept unless the cap is reached."""
        if len(self._slices) < self.max_slices:
            self._slices.append((track, rank, kind, label, start_s, end_s, peer, size_bytes))
            return
        self._dropped += 1
        if self._dropped_from is None or end_s < self._dropped_from:
            self._dropped_from = end_s

    # -- the result ----------------------------------------------------------------------------

    def bottleneck(self) -> LinkUse | None:
        """The run's bottleneck link (:func:`~simulator.model.activity.bottleneck`), without
        describing every link as :meth:`activity` does (a fabric may have used 100,000)."""
        if not self._links:
            return None
        top = max(state[_BUSY] for state in self._links.values())
        return bottleneck([self._use(link, state) for link, state in self._links.items()
                           if state[_BYTES] > 0 and state[_BUSY] >= top * (1 - TIE)])

    def activity(self, algorithm: str, size_bytes: int, time_s: float, engine: str,
                 note: str = "") -> Activity:
        """What the run did, times shifted by ``offset_s``; ``time_s`` is the point's time."""
        links = busiest_first([self._use(link, state) for link, state in self._links.items()
                               if state[_BYTES] > 0])
        offset = self.offset_s
        slices = tuple(Slice(track, rank, kind, label, start + offset, end + offset, peer, size)
                       for track, rank, kind, label, start, end, peer, size in self._slices)
        rates = tuple(self._rate_of(link, offset) for link in links[:self.rate_links]
                      if (link.src, link.dst) in self._samples)
        return Activity(algorithm, size_bytes, time_s, engine, links, self.trace, slices,
                        self._dropped, None if self._dropped_from is None
                        else self._dropped_from + offset, rates, self._dropped_samples, note)

    def _use(self, link: LinkId, state: list[float]) -> LinkUse:
        routing = self.routing
        src, dst = link
        return LinkUse(src, dst, routing.link_kind(link), routing.node_kind(src),
                       routing.node_tier(src), routing.node_kind(dst), routing.node_tier(dst),
                       routing.capacity_Bps(link), state[_BYTES], state[_BUSY])

    def _rate_of(self, link: LinkUse, offset: float) -> LinkRate:
        """The link's utilisation as a step function from 0, one value per instant (the last
        of several changes at one instant)."""
        times, values = [0.0], [0.0]
        for now, rate in self._samples[(link.src, link.dst)]:
            t = now + offset
            if t == times[-1]:
                values[-1] = rate / link.bandwidth_Bps
            else:
                times.append(t)
                values.append(rate / link.bandwidth_Bps)
        return LinkRate(link.name, tuple(times), tuple(values))
