"""What a simulated point did besides taking its time: how much each link carried and for how
long it was busy, and, when traced, its timeline (the slices of every rank and in-switch step,
and the utilisation of the busiest links over time).

Plain frozen values: the engine fills them (:mod:`simulator.engine.record`), the output layer
formats them (the ``--links`` table, the Perfetto trace), and a :class:`Watch` passed to
:func:`~simulator.runner.simulate` collects them, one :class:`Activity` per point.

The **bottleneck** of a point is the link busy longest (busy: at least one flow on it); ties,
within rounding (1e-9 relative), go to the link that carried more bytes, then to the smaller
name. Its *busy share* is its busy time over the point's simulated time.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal

SliceKind = Literal["send", "recv-wait", "reduce", "in-switch", "switch-reduce"]
"""What a slice of a timeline is: a message moving (from its first byte injected to its
arrival), a rank waiting for a message it asked for, a reduction on a GPU, a rank waiting for an
in-switch result, or a switch reducing a round."""

TIE = 1e-9
"""Busy times this close (relative) are tied: the two engines agree to rounding, not bits."""


@dataclass(frozen=True)
class LinkUse:
    """One directed link over one point: what it is (its ends' kind and tier, its kind and
    bandwidth as the run timed it) and what it did (bytes carried, seconds busy)."""

    src: str
    dst: str
    kind: str
    """``nvlink``, ``pcie`` or ``net``."""
    src_kind: str
    """``gpu``, ``nic`` or ``switch``."""
    src_tier: int | None
    """The switch's tier (0 in a host, 1 leaf, 2 spine, 3 core) where the graph says; else None."""
    dst_kind: str
    dst_tier: int | None
    bandwidth_Bps: float
    bytes: float
    busy_s: float

    @property
    def name(self) -> str:
        """``src->dst``."""
        return f"{self.src}->{self.dst}"


@dataclass(frozen=True)
class Slice:
    """One span of a timeline: on ``track`` (``rank 3``, or a switch's name), from ``start_s``
    to ``end_s`` of the point's time, with the algorithm's label (phase, step, piece) where
    its program gives one; ``peer`` is the other end (``rank 4``, a switch), ``rank`` -1 on a
    switch's track."""

    track: str
    rank: int
    kind: SliceKind
    label: str
    start_s: float
    end_s: float
    peer: str
    bytes: float


@dataclass(frozen=True)
class LinkRate:
    """One link's utilisation over a point's time: rate carried / bandwidth, a step function
    that takes ``utilisation[i]`` from ``times_s[i]`` on."""

    link: str
    times_s: tuple[float, ...]
    utilisation: tuple[float, ...]


@dataclass(frozen=True)
class Activity:
    """What one (algorithm, size) point did: per-link usage, and when traced its timeline.

    ``links`` holds every link that carried bytes, busiest first. A traced point keeps at most
    a cap of slices: ``dropped_slices`` were left out, the last to end (all ending from
    ``dropped_from_s`` on); ``rates`` follow the ``len(rates)`` busiest of ``links``.
    ``engine`` ran the point; ``note`` says why it is not the scenario's own, if so.
    """

    algorithm: str
    size_bytes: int
    time_s: float
    engine: str
    links: tuple[LinkUse, ...]
    traced: bool = False
    slices: tuple[Slice, ...] = ()
    dropped_slices: int = 0
    dropped_from_s: float | None = None
    rates: tuple[LinkRate, ...] = ()
    dropped_samples: int = 0
    note: str = ""

    @property
    def bottleneck(self) -> LinkUse | None:
        """The point's bottleneck link (:func:`bottleneck`)."""
        return bottleneck(self.links)

    @property
    def bottleneck_share(self) -> float:
        """The bottleneck's busy time over the point's time (NaN without one, or at time 0)."""
        link = self.bottleneck
        if link is None or self.time_s <= 0:
            return float("nan")
        return link.busy_s / self.time_s


def bottleneck(links: Sequence[LinkUse]) -> LinkUse | None:
    """The link busy longest; ties (within :data:`TIE`) to the most bytes, then the least name.

    >>> a = LinkUse("a", "s", "nvlink", "gpu", None, "switch", 0, 1e9, 100.0, 2e-6)
    >>> b = LinkUse("b", "s", "nvlink", "gpu", None, "switch", 0, 1e9, 200.0, 2e-6)
    >>> bottleneck([a, b]).name
    'b->s'
    """
    if not links:
        return None
    top = max(link.busy_s for link in links)
    tied = [link for link in links if link.busy_s >= top * (1 - TIE)]
    return min(tied, key=lambda link: (-link.bytes, link.name))


def busiest_first(links: Sequence[LinkUse]) -> tuple[LinkUse, ...]:
    """``links`` in bottleneck order: longest busy, then most bytes, then name."""
    return tuple(sorted(links, key=lambda link: (-link.busy_s, -link.bytes, link.name)))


@dataclass
class Watch:
    """What to observe of a run beyond its rows, and what was: give one to
    :func:`~simulator.runner.simulate` and read :attr:`activities` after, one per point in
    the order they ran.

    ``trace``: record the timeline of every point (True), of none (False, the default: the
    link usage alone costs little), or of the (algorithm, size_bytes) points listed.

    >>> Watch(trace={("ring", 1024)}).traces("ring", 1024), Watch().traces("ring", 1024)
    (True, False)
    """

    trace: bool | Collection[tuple[str, int]] = False
    activities: list[Activity] = field(default_factory=list)

    def traces(self, algorithm: str, size_bytes: int) -> bool:
        """Whether the point of ``algorithm`` at ``size_bytes`` is to be traced."""
        if isinstance(self.trace, bool):
            return self.trace
        return (algorithm, size_bytes) in self.trace

    def keep(self, activity: Activity) -> None:
        """Add one point's activity."""
        self.activities.append(activity)
