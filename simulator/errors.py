"""One exception tree for the whole package.

Library code raises these; only ``cli.py`` turns them into messages and exit codes.
"""

from __future__ import annotations

from dataclasses import dataclass

QUOTE_CHARS = 80
"""Characters of an offending value an error quotes: a value as long as a line of a terminal is
shown whole; a longer one (a 15-million-character XML attribute, a 400,000-character
``nccl.algo``) is cut there, so that the line stays one a person reads."""

MAX_LINE_CHARS = 1000
"""Characters of one line of an error (a :class:`Problem` as printed): the longest messages
written here (an MSCCL schedule's circle of waits, five steps named; the memory a point
needs) take ~400 with their values quoted at QUOTE_CHARS, and a path as long again, so this
cap only catches a message that embeds a value it did not quote: stderr never gets a longer
line."""


def quoted(value: object, limit: int = QUOTE_CHARS) -> str:
    """``repr(value)`` as an error quotes it: whole where it is at most ``limit`` characters
    (quotes apart), else its first ``limit`` characters, ``…`` and, for text, its length.

    >>> quoted("ring")
    "'ring'"
    >>> quoted("x" * 100, limit=8)
    "'xxxxxxx… (100 characters)"
    """
    if isinstance(value, (str, bytes)):
        text = repr(value[:limit])
        if len(value) <= limit and len(text) <= limit + 2:  # + 2: the quotes
            return text
        return f"{text[:limit]}… ({len(value):,} characters)"
    text = repr(value)
    return text if len(text) <= limit + 2 else f"{text[:limit]}…"


PATH_CHARS = 120
"""The most of a file's path a line shows: a path the user gave (up to 4,096 characters on
Linux) is theirs to know, and its two ends say which file it is."""


def short_path(path: str, limit: int = PATH_CHARS) -> str:
    """``path`` as a line names it: whole up to ``limit`` characters, else its start and its
    end (the file's own name) around ``…``.

    >>> short_path("a" * 200 + "/s.yaml", limit=20)
    'aaaaaaaaaa…aa/s.yaml'
    """
    if len(path) <= limit:
        return path
    tail = (limit - 1) // 2
    return f"{path[:limit - 1 - tail]}…{path[-tail:]}"


def clipped(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` as a message shows it inside its own quotes (an XML attribute's value): whole
    up to ``limit`` characters, else its first ``limit`` and ``…``."""
    return text if len(text) <= limit else f"{text[:limit]}…"


def one_line(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` cut to ``limit`` characters with ``…``: the last guard of a line for a person."""
    return text if len(text) <= limit else f"{text[:limit - 1]}…"


class SimulatorError(Exception):
    """Base class of every error this package raises on purpose."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file: where it is and what was expected."""

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        file = short_path(self.file)
        where = f"{file}: {self.field}" if self.field else file
        return one_line(f"{where}: {self.message}")


class InputError(SimulatorError):
    """Bad input (scenario or topology file, or a value given through the API).

    Carries every problem found in the file at once, one line each.
    """

    def __init__(self, problems: list[Problem]) -> None:
        if not problems:
            raise ValueError("InputError needs at least one problem")
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class UnitError(SimulatorError, ValueError):
    """A quantity string (size, bandwidth, time) that does not parse; turned into a Problem."""


class OverBudget(SimulatorError):
    """A point that needs more memory than a run may take (``simulator/limits.py``), found while
    the engine holds it: ``held`` of what ``what`` counts, more than ``limit``. The engine's
    caller, which knows the point, turns it into an :class:`InputError` naming it."""

    def __init__(self, what: str, held: int, limit: int) -> None:
        self.what, self.held, self.limit = what, held, limit
        super().__init__(what, held, limit)  # SimPy raises a process's error anew from its args

    def __str__(self) -> str:
        return f"{self.held:,} {self.what}, more than the {self.limit:,} a point may hold"


class AlgorithmError(SimulatorError):
    """An algorithm's program did something impossible (bad peer, size mismatch, lost message)."""


@dataclass(frozen=True)
class Wait:
    """What a blocked rank waits for, as the deadlock watchdog says it: the ``seq``-th message
    (counted from 1) from ``peer`` on ``channel`` into elements [start, stop), with the
    program's label where it gave one (its phase and piece); ``peer`` None for an in-switch
    result, and the rank itself for a flag (``comm.wait``, the last number of ``channel``)."""

    rank: int
    peer: int | None
    seq: int
    channel: str
    start: int
    stop: int
    label: str = ""

    def __str__(self) -> str:
        if self.peer == self.rank:  # a flag another thread of the rank never signalled
            flag = self.channel.rpartition(".")[2]
            return (f"rank {self.rank} waits for flag {flag} of its own"
                    + (f" ({self.label})" if self.label else ""))
        said = f"{self.label!r}, " if self.label else ""
        what = (f"in-switch result {self.seq}" if self.peer is None
                else f"message {self.seq} from rank {self.peer} on channel {self.channel}")
        return f"rank {self.rank} waits for {what} ({said}elements {self.start} to {self.stop})"


MAX_WAIT_LINES = 16
"""A deadlock names at most this many waits, then counts the rest."""


def deadlock(name: str, ranks: list[int], waits: list[Wait],
             at_s: float | None = None) -> AlgorithmError:
    """The error of programs that wait for each other: which ranks, then a line per wait
    (rank order), and when nothing was left to happen (``at_s``; None where the programs were
    traced rather than run)."""
    when = "" if at_s is None else f" at {at_s * 1e6:.3f} us"
    more = " ..." if len(ranks) > 8 else ""
    lines = [f"  {wait}" for wait in sorted(waits, key=lambda w: w.rank)[:MAX_WAIT_LINES]]
    if len(waits) > MAX_WAIT_LINES:
        lines.append(f"  ... and {len(waits) - MAX_WAIT_LINES} more waits")
    head = (f"{name}: deadlock{when}: ranks {ranks[:8]}{more} wait for messages that are never "
            "sent")
    return AlgorithmError("\n".join([head + (":" if lines else ""), *lines]))


class NetworkCut(SimulatorError):
    """Links failed (a ``link_down`` or ``nic_down`` fault) so that some ranks can no longer
    reach others: the collective cannot finish, and the run stops at that instant."""


def rank_spans(ranks: list[int], most: int = 8) -> str:
    """Ranks as runs of consecutive numbers, the first ``most`` runs (``0-3, 6``).

    >>> rank_spans([0, 1, 2, 3, 6, 8, 9])
    '0-3, 6, 8-9'
    """
    runs: list[list[int]] = []
    for rank in sorted(ranks):
        if runs and rank == runs[-1][1] + 1:
            runs[-1][1] = rank
        else:
            runs.append([rank, rank])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs[:most])
    return text + (", ..." if len(runs) > most else "")


def cut_off(groups: list[list[int]], at_s: float,
            failed: frozenset[tuple[str, str]]) -> NetworkCut:
    """The error of a network split by failed links: which ranks are cut off from which (each
    group reaches only its own members), when, and the links that failed then."""
    links = sorted(failed)
    named = ", ".join(f"{a}->{b}" for a, b in links[:4]) + (
        f" and {len(links) - 4} more" if len(links) > 4 else "")
    when = f"at {at_s * 1e6:.3f} us, once {named} failed"
    if len(groups) == 2:
        small, large = sorted(groups, key=lambda group: (len(group), group[0]))
        return NetworkCut(f"network cut {when}: ranks {rank_spans(small)} cannot reach ranks "
                          f"{rank_spans(large)}")
    parts = " | ".join(rank_spans(group) for group in groups[:8]) + (
        " | ..." if len(groups) > 8 else "")
    return NetworkCut(f"network cut {when}: the ranks fall into {len(groups)} groups that "
                      f"cannot reach each other: {parts}")
