"""What a run is about to simulate, said before it starts: its points and their closed forms.

A run of many points can take long, and the closed forms cost next to nothing, so the command
line states what is coming before the first point: how many points, the simulated time the
closed forms predict for them (the ``model_time_s`` of their rows; time *inside* the simulation,
not how long the run takes: the simulator's own cost follows the messages and events of each
point, which only running it counts, docs/benchmark.md), and under ``execution: nccl`` what
NCCL itself runs at each size (its pick, which each point's plan holds).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.limits import SLOW_RUN_S
from simulator.units import format_size


@dataclass(frozen=True)
class Upcoming:
    """One point of a run before it runs: its algorithm, size and closed form."""

    algorithm: str
    size_bytes: int
    model_time_s: float
    messages: int | None = None
    """The messages its schedule holds, counted before it runs (None: not counted)."""
    wall_s: float = 0.0
    """At most how long it may take to simulate: its messages at the most a message took here
    (:func:`simulator.plan.wall_estimate_s`); 0 where not counted."""

    @property
    def label(self) -> str:
        """``ring 64MiB``: the point in a few characters (for a progress bar)."""
        return f"{self.algorithm} {format_size(self.size_bytes)}"


@dataclass(frozen=True)
class Outlook:
    """Every point of a run, in the order it runs them, with the closed forms' times."""

    scenario: str
    algorithms: int
    sizes: int
    points: tuple[Upcoming, ...]
    notes: tuple[str, ...] = ()
    """Lines to say beside it: where NCCL's own graph dump or log differs from what the
    simulator would have assumed (:mod:`simulator.algorithms.against_nccl`), and each point
    ``all`` or ``auto`` leaves out because it cannot run at its size."""
    nccl_pick: bool = False
    """Whether the points are NCCL's pick at each size (``algorithms: auto``), one a size, rather
    than every algorithm at every size."""
    picks: tuple[tuple[int, str], ...] = ()
    """What NCCL runs at each size, known before the run (under ``execution: nccl``): (size,
    its tuner's ``Ring/LL``, or the symmetric kernel it launches), in the run's size order."""

    def describe(self) -> str:
        """One line saying what is coming.

        >>> outlook = Outlook("x", 2, 2, (
        ...     Upcoming("ring", 1024, 3e-6), Upcoming("ring", 2048, 4e-6),
        ...     Upcoming("tree", 1024, 2e-6), Upcoming("tree", 2048, 5e-6)))
        >>> print(outlook.describe().replace("; ", ";\\n"))
        4 points to simulate (2 algorithms × 2 sizes);
        closed forms: 14us of simulated time in all (not wall-clock time), longest tree at 2KiB (5us)
        >>> picks = Outlook("x", 2, 3, (Upcoming("ring", 1024, 3e-6),
        ...                             Upcoming("nvls", 2048, 4e-6)), nccl_pick=True)
        >>> print(picks.describe().split("; ")[0])
        2 points to simulate (NCCL's pick at 2 of 3 sizes)
        >>> nccl = Outlook("x", 1, 3, (Upcoming("ring", 1024, 3e-6),), picks=(
        ...     (1024, "Ring/LL"), (1 << 20, "Ring/LL"), (1 << 30, "NVLS/Simple")))
        >>> print(nccl.describe().split("; ")[-1])
        NCCL picks Ring/LL from 1KiB to 1MiB, NVLS/Simple at 1GiB
        """
        count = len(self.points)
        if self.nccl_pick:
            which = "each" if count == self.sizes else str(count)
            what = f"NCCL's pick at {which} of {self.sizes} size{'s' if self.sizes != 1 else ''}"
        else:
            left = self.algorithms * self.sizes - count
            what = (f"{self.algorithms} algorithm{'s' if self.algorithms != 1 else ''} × "
                    f"{self.sizes} size{'s' if self.sizes != 1 else ''}"
                    + (f", {left} left out" if left > 0 else ""))
        line = (f"{count} point{'s' if count != 1 else ''} to simulate ({what}); closed forms: "
                f"{seconds(self.model_time_s)} of simulated time in all (not wall-clock time)")
        if count > 1:
            longest = max(self.points, key=lambda point: point.model_time_s)
            line += (f", longest {longest.algorithm} at {format_size(longest.size_bytes)} "
                     f"({seconds(longest.model_time_s)})")
        if self.picks:
            line += "; NCCL picks " + ", ".join(_runs_of(self.picks))
        return line

    @property
    def model_time_s(self) -> float:
        """The closed forms' times of every point, summed."""
        return sum(point.model_time_s for point in self.points)

    def slow(self) -> str | None:
        """One line saying the run may take long, where its points' estimates add up to more
        than SLOW_RUN_S; None otherwise.

        >>> print(Outlook("x", 1, 1, (Upcoming("ring", 1024, 3e-6, 2_000_000, 300.0),)).slow())
        ... # doctest: +NORMALIZE_WHITESPACE
        may take up to about 5 min to simulate (2,000,000 messages; docs/scenarios.md#limits):
        fewer ranks, sizes or algorithms run sooner
        >>> Outlook("x", 1, 1, (Upcoming("ring", 1024, 3e-6, 1000, 0.1),)).slow() is None
        True
        """
        wall = sum(point.wall_s for point in self.points)
        if wall <= SLOW_RUN_S:
            return None
        messages = sum(point.messages or 0 for point in self.points)
        took = (seconds(wall) if wall < 90 else f"{wall / 60:.0f} min" if wall < 5400
                else f"{wall / 3600:.1f} h")
        return (f"may take up to about {took} to simulate ({messages:,} messages; "
                "docs/scenarios.md#limits): fewer ranks, sizes or algorithms run sooner")


def _runs_of(picks: tuple[tuple[int, str], ...]) -> list[str]:
    """Each run of sizes with the same pick, said once: ``Ring/LL from 1KiB to 1MiB``, or
    ``NVLS/Simple at 1GiB`` for a run of one size."""
    runs: list[tuple[str, int, int]] = []
    for size, pick in picks:
        if runs and runs[-1][0] == pick:
            runs[-1] = (pick, runs[-1][1], size)
        else:
            runs.append((pick, size, size))
    return [f"{pick} at {format_size(first)}" if first == last else
            f"{pick} from {format_size(first)} to {format_size(last)}"
            for pick, first, last in runs]


def seconds(time_s: float) -> str:
    """A time to three significant digits in the unit that reads best (a rounded figure for
    people, unlike :func:`~simulator.units.format_time`, which states a time exactly).

    >>> [seconds(t) for t in (0.0, 4.2e-10, 1.23456e-5, 0.5, 61.0, 12345.6)]
    ['0s', '0.42ns', '12.3us', '500ms', '61s', '12346s']
    """
    for unit, factor in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if time_s >= factor:
            scaled = time_s / factor
            return f"{scaled:.0f}{unit}" if scaled >= 1000 else f"{scaled:.3g}{unit}"
    return f"{time_s / 1e-9:.3g}ns" if time_s > 0 else "0s"
