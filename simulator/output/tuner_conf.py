"""NCCL's tuner configuration out: the CSV that NCCL's example tuner plugin reads
(``plugins/tuner/example`` of NVIDIA/nccl, ``plugin.c``; ``ext-tuner/example`` before 2.29.7),
with a row per range of sizes where the fastest simulated NCCL kernel beats NCCL's own pick.

The plugin reads ``NCCL_TUNER_CONFIG_FILE`` (default ``nccl_tuner.conf``) line by line with
``fgets`` into 256 bytes, skips a line that starts with ``#`` or is empty, and splits the others
at commas into ``collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks
[,numPipeOps[,regBuff]]``. For a collective of ``nBytes`` (the larger of its send and receive
buffers: an allreduce's buffer, an allgather's output, a reduce-scatter's input, as a scenario
counts its sizes) the first row of the same collective with ``min_bytes <= nBytes <= max_bytes``
whose nNodes, nRanks, numPipeOps and regBuff match (``-1`` matches any) sets that algorithm and
protocol's cost to 0, so NCCL's selection takes it, and ``channels`` (``-1``: NCCL's own).

:func:`choices` sets, size by size, NCCL's pick beside the fastest simulated kernel of a results
frame; :func:`tuner_rows` turns the sizes where they differ into rows, :func:`format_tuner_conf`
writes them under comments saying where they came from, and :func:`parse_tuner_conf` reads a
file back as the plugin would, strictly.
"""

from __future__ import annotations

import itertools
import math
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pandas as pd

from simulator.algorithms.registry import REGISTRY
from simulator.errors import InputError, Problem
from simulator.model.collective import Collective
from simulator.model.nccl import NcclAlgorithm, Protocol

_T = TypeVar("_T")

COLLECTIVES: Mapping[Collective, str] = {
    Collective.BROADCAST: "broadcast", Collective.REDUCE: "reduce",
    Collective.ALLGATHER: "allgather", Collective.REDUCE_SCATTER: "reducescatter",
    Collective.ALLREDUCE: "allreduce"}
"""The plugin's names of the collectives (``parseCollType``)."""

ALGORITHMS: Mapping[NcclAlgorithm, str] = {
    NcclAlgorithm.TREE: "tree", NcclAlgorithm.RING: "ring",
    NcclAlgorithm.COLLNET_DIRECT: "collnet_direct", NcclAlgorithm.COLLNET_CHAIN: "collnet_chain",
    NcclAlgorithm.NVLS: "nvls", NcclAlgorithm.NVLS_TREE: "nvls_tree", NcclAlgorithm.PAT: "pat"}
"""The plugin's names of NCCL's algorithms (``parseAlgorithm``)."""

PROTOCOLS: Mapping[Protocol, str] = {Protocol.LL: "ll", Protocol.LL128: "ll128",
                                     Protocol.SIMPLE: "simple"}
"""The plugin's names of NCCL's protocols (``parseProtocol``)."""

COLUMNS = ("collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,"
           "regBuff")
"""The plugin's columns, as its README and example ``nccl_tuner.conf`` name them."""

MAX_LINE_CHARS = 254
"""The longest line the plugin reads whole: ``fgets`` into ``MAX_LINE_LENGTH`` (256) bytes keeps
255, the newline among them; the rest of a longer line would come back as a line of its own, read
as a row unless it starts with ``#``."""

_COMMENT_WIDTH = 100
"""Where comments are wrapped: well within MAX_LINE_CHARS, and readable."""


@dataclass(frozen=True)
class SizeChoice:
    """One size of a sweep: NCCL's pick (its family and protocol) and its simulated time, and
    the fastest simulated NCCL kernel (its registry name, family, protocol and time)."""

    size_bytes: int
    pick: tuple[NcclAlgorithm, Protocol]
    pick_s: float
    fastest_name: str
    fastest: tuple[NcclAlgorithm, Protocol]
    fastest_s: float

    @property
    def differs(self) -> bool:
        """Whether the fastest simulated kernel is not NCCL's pick (ties go to the pick)."""
        return self.fastest != self.pick

    @property
    def gain(self) -> float:
        """How much faster the fastest is than the pick: ``pick_s / fastest_s - 1`` (0 where
        they are one)."""
        return self.pick_s / self.fastest_s - 1 if self.differs else 0.0


@dataclass(frozen=True)
class TunerRow:
    """One row of the plugin's CSV: for ``collective`` of ``min_bytes`` to ``max_bytes``
    (both included) on ``nodes`` nodes and ``ranks`` ranks (-1: any), run ``algorithm`` with
    ``protocol`` on ``channels`` channels (-1: NCCL's count), where the group holds
    ``pipe_ops`` operations per channel and buffers are registered or not (``reg_buff``; -1:
    any)."""

    collective: Collective
    min_bytes: int
    max_bytes: int
    algorithm: NcclAlgorithm
    protocol: Protocol
    channels: int = -1
    nodes: int = -1
    ranks: int = -1
    pipe_ops: int = -1
    reg_buff: int = -1

    def line(self) -> str:
        """The row as the plugin reads it."""
        return ",".join([COLLECTIVES[self.collective], str(self.min_bytes), str(self.max_bytes),
                         ALGORITHMS[self.algorithm], PROTOCOLS[self.protocol],
                         *(str(n) for n in (self.channels, self.nodes, self.ranks,
                                            self.pipe_ops, self.reg_buff))])


def choices(results: pd.DataFrame) -> tuple[SizeChoice, ...]:
    """Per size (ascending) where a row is NCCL's pick (``nccl_pick``): the pick, and the
    fastest simulated row that NCCL could be told to run, one of NCCL's own kernels
    (``NcclBinding.kernel``) that NCCL's model rates there (``nccl_time_s`` not NaN: NCCL
    runs it on this machine). Ties go to the pick, then to the row listed first."""
    collective = Collective(str(results.collective.iloc[0])) if len(results) else None
    found = []
    for size, group in results.groupby("size_bytes", sort=True):
        picked = group[group.nccl_pick.fillna(False).astype(bool)]
        if picked.empty:
            continue
        assert collective is not None
        rows: Iterable[Any] = group.itertuples()
        candidates = []
        for order, row in enumerate(rows):
            algorithm = REGISTRY[collective].get(str(row.algorithm))
            if (algorithm is None or not algorithm.nccl.kernel
                    or not math.isfinite(float(row.nccl_time_s))):
                continue
            key = (algorithm.nccl.family, Protocol(str(row.protocol)))
            candidates.append((float(row.sim_time_s), not bool(row.nccl_pick), order,
                               str(row.algorithm), key))
        pick = next(c for c in candidates if c[1] is False)
        fastest = min(candidates)
        found.append(SizeChoice(int(str(size)), pick[4], pick[0], fastest[3], fastest[4],
                                fastest[0]))
    return tuple(found)


def size_ranges(sizes: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """The bytes each size of a sweep decides, ``(low, high)`` both included: from just above
    the geometric midpoint with the size below (⌊√(a·b)⌋ + 1) to the geometric midpoint with the
    size above (the crossover chart's band edges, so the bytes between two sizes go to the
    nearer one on a log scale), the smallest from itself and the largest to itself: together
    they tile the sweep, and beyond it nothing is decided.

    >>> size_ranges([1024, 4096, 65536])
    ((1024, 2048), (2049, 16384), (16385, 65536))
    """
    if list(sizes) != sorted(set(sizes)):
        raise ValueError(f"sizes must ascend without repeats, got {list(sizes)}")
    edges = [math.isqrt(a * b) for a, b in itertools.pairwise(sizes)]
    return tuple(zip([sizes[0], *(edge + 1 for edge in edges)], [*edges, sizes[-1]],
                     strict=True)) if sizes else ()


def tuner_rows(chosen: Sequence[SizeChoice], collective: Collective, nodes: int,
               ranks: int) -> tuple[TunerRow, ...]:
    """The rows for the sizes where the fastest simulated kernel differs from NCCL's pick, each
    over the bytes its size decides (:func:`size_ranges`); consecutive sizes with the same
    choice make one row. Rows are for ``nodes`` nodes and ``ranks`` ranks, a lone collective
    (numPipeOps 1, as simulated), either buffer (regBuff -1), and NCCL's own channel count (-1).

    >>> def at(size, fastest):
    ...     return SizeChoice(size, (NcclAlgorithm.RING, Protocol.LL), 2.0, "x", fastest, 1.0)
    >>> tree = (NcclAlgorithm.TREE, Protocol.LL)
    >>> ring = (NcclAlgorithm.RING, Protocol.LL)
    >>> rows = tuner_rows([at(1024, tree), at(4096, tree), at(16384, ring), at(65536, tree)],
    ...                   Collective.ALLREDUCE, 1, 8)
    >>> [row.line() for row in rows]
    ['allreduce,1024,8192,tree,ll,-1,1,8,1,-1', 'allreduce,32769,65536,tree,ll,-1,1,8,1,-1']
    """
    spans = size_ranges([c.size_bytes for c in chosen])
    rows: list[TunerRow] = []
    start = 0
    for i in range(1, len(chosen) + 1):
        if (i < len(chosen) and chosen[i].fastest == chosen[start].fastest
                and chosen[i].differs == chosen[start].differs):
            continue
        if chosen[start].differs:
            family, protocol = chosen[start].fastest
            rows.append(TunerRow(collective, spans[start][0], spans[i - 1][1], family, protocol,
                                 -1, nodes, ranks, 1, -1))
        start = i
    return tuple(rows)


def format_tuner_conf(rows: Sequence[TunerRow], chosen: Sequence[SizeChoice],
                      about: Sequence[str]) -> str:
    """The file: ``about`` (what it was simulated from, one paragraph a string) as wrapped
    comments, a comment table of every size (NCCL's pick and the fastest, their simulated times),
    the plugin's columns as a comment, then the rows. Every line fits MAX_LINE_CHARS."""
    lines: list[str] = []
    for paragraph in about:  # a long word (a path) whole on its line where the plugin reads it
        wrapped = textwrap.wrap(paragraph, _COMMENT_WIDTH - 2, break_long_words=False,
                                break_on_hyphens=False, subsequent_indent="  ")
        lines += [f"# {part[i:i + MAX_LINE_CHARS - 4]}" for part in wrapped
                  for i in range(0, len(part), MAX_LINE_CHARS - 4)] or ["#"]
    lines += ["#", f"#{'size(B)':>13}  {'NCCL pick':<18}{'sim(us)':>11}  "
                   f"{'fastest simulated':<34}{'sim(us)':>11}  {'gain':>7}"]
    for c in chosen:
        pick = f"{ALGORITHMS[c.pick[0]]}/{PROTOCOLS[c.pick[1]]}"
        fastest = (f"{ALGORITHMS[c.fastest[0]]}/{PROTOCOLS[c.fastest[1]]} ({c.fastest_name})"
                   if c.differs else "(the pick)")
        gain = f"{100 * c.gain:+.1f}%" if c.differs else ""
        lines.append(f"#{c.size_bytes:>13}  {pick:<18}{c.pick_s * 1e6:>11.2f}  {fastest:<34}"
                     f"{c.fastest_s * 1e6:>11.2f}  {gain:>7}".rstrip())
    lines += ["#", f"# {COLUMNS}", *(row.line() for row in rows)]
    if not rows:
        lines.append("# (no row: NCCL's pick is the fastest simulated at every size)")
    too_long = [line for line in lines if len(line) > MAX_LINE_CHARS]
    assert not too_long, f"lines longer than the plugin reads: {too_long}"
    return "\n".join(lines) + "\n"


def parse_tuner_conf(text: str, source: str) -> tuple[TunerRow, ...]:
    """The rows of a tuner configuration, read as the plugin reads them (comments and empty
    lines skipped, 8 to 10 comma-separated fields, blanks around them ignored) but strictly: a
    name the plugin does not know (which it would silently read as allreduce, ring or simple), a
    number that is not one, a line longer than it reads whole, or ``min_bytes`` above
    ``max_bytes`` is an InputError naming the line."""
    rows = []
    for number, line in enumerate(text.split("\n"), start=1):
        if len(line) > MAX_LINE_CHARS:
            raise _error(source, number, f"expected at most {MAX_LINE_CHARS} characters (the "
                                         f"plugin reads 255 bytes a line), got {len(line)}")
        if not line or line.startswith("#"):
            continue
        fields = [field.strip(" \t") for field in line.split(",")]
        if not 8 <= len(fields) <= 10:
            raise _error(source, number, f"expected 8 to 10 comma-separated fields ({COLUMNS}), "
                                         f"got {len(fields)}")
        collective = _named(source, number, "collective", fields[0], COLLECTIVES)
        algorithm = _named(source, number, "algorithm", fields[3], ALGORITHMS)
        protocol = _named(source, number, "protocol", fields[4], PROTOCOLS)
        columns = COLUMNS.split(",")
        numbers = [_whole(source, number, columns[i], fields[i], 0 if i < 3 else -1)
                   for i in (1, 2, *range(5, len(fields)))]
        numbers += [-1] * (10 - len(fields))  # numPipeOps and regBuff left out match any
        if numbers[0] > numbers[1]:
            raise _error(source, number, f"expected min_bytes at most max_bytes, got "
                                         f"{numbers[0]} > {numbers[1]}")
        rows.append(TunerRow(collective, numbers[0], numbers[1], algorithm, protocol,
                             *numbers[2:]))
    return tuple(rows)


def _named(source: str, line: int, what: str, field: str, names: Mapping[_T, str]) -> _T:
    """The value the plugin's name ``field`` stands for among ``names``."""
    for value, name in names.items():
        if name == field:
            return value
    raise _error(source, line, f"expected one of the plugin's {what}s ({', '.join(names.values())}),"
                               f" got {field!r}")


def _whole(source: str, line: int, column: str, field: str, least: int) -> int:
    """``field`` as a whole number of ``least`` or more."""
    try:
        value = int(field)
    except ValueError:
        raise _error(source, line, f"expected a whole number in {column}, got {field!r}") from None
    if value < least:
        raise _error(source, line, f"expected {column} of {least} or more, got {value}")
    return value


def _error(source: str, line: int, message: str) -> InputError:
    return InputError([Problem(source, f"line {line}", message)])
