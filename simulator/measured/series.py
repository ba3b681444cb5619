"""A measured sweep as typed rows, whatever file it came from (nccl-tests' text output, its
``-J`` JSON, or a CSV of the same numbers), and the check that each row is one a machine could
have measured."""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.errors import InputError, Problem, quoted

MAX_MEASURED_BYTES = 1 << 40
"""The largest size a log may state: 1 TiB per rank, as a scenario's sizes (limits.py)."""


@dataclass(frozen=True)
class Measurement:
    """One size of a measured collective: out-of-place time and bandwidths (what nccl-tests'
    averages and most reports use) and the in-place time, with where it came from: ``line``
    of a text log or CSV, or ``record``, its index in the ``results`` list of a JSON file
    (``line`` is then None: nccl-tests writes the whole JSON on one line)."""

    size_bytes: int
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    in_place_time_us: float | None
    line: int | None
    record: int | None = None


@dataclass(frozen=True)
class MeasuredSeries:
    """A measured sweep of one collective: where it came from, its type and operator when the
    source says so, the binary (``all_reduce_perf``) when it does, and its rows by size."""

    source: str
    rows: tuple[Measurement, ...]
    dtype: str | None = None
    op: str | None = None
    test: str | None = None


def checked(source: str, where: str, m: Measurement) -> Measurement:
    """``m`` if a machine could have measured it: a size from 0 bytes (nccl-tests times empty
    calls too, from ``-b 0``) to 1 TiB, finite times above 0 and finite bandwidths at least 0;
    otherwise InputError naming ``where`` in ``source`` (``line 7``)."""
    problem = size_problem(m.size_bytes)
    times = [m.time_us] + ([] if m.in_place_time_us is None else [m.in_place_time_us])
    if problem is None and not all(time_problem(t) is None for t in times):
        problem = f"expected times above 0 us, got {', '.join(repr(t) for t in times)}"
    if problem is None and not all(bandwidth_problem(b) is None
                                   for b in (m.algbw_GBps, m.busbw_GBps)):
        problem = (f"expected bandwidths of 0 GB/s or more, got algbw {quoted(m.algbw_GBps)} and busbw "
                   f"{quoted(m.busbw_GBps)}")
    if problem is not None:
        raise InputError([Problem(source, where, problem)])
    return m


def size_problem(size_bytes: int) -> str | None:
    """What is wrong with a measured size, or None."""
    if not 0 <= size_bytes <= MAX_MEASURED_BYTES:
        return f"expected a size from 0 bytes to 1 TiB, got {size_bytes}"
    return None


def time_problem(time_us: float) -> str | None:
    """What is wrong with a measured time (µs), or None: NaN, infinite, 0 or below."""
    if not (math.isfinite(time_us) and time_us > 0):
        return f"expected a time above 0 us, got {quoted(time_us)}"
    return None


def bandwidth_problem(rate_GBps: float) -> str | None:
    """What is wrong with a measured bandwidth (GB/s), or None: NaN, infinite, below 0."""
    if not (math.isfinite(rate_GBps) and rate_GBps >= 0):
        return f"expected a bandwidth of 0 GB/s or more, got {quoted(rate_GBps)}"
    return None
