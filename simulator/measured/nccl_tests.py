"""Measured results in: the standard output of an nccl-tests binary (``all_reduce_perf`` ...), the
JSON file it writes with ``-J`` (:mod:`simulator.measured.nccl_tests_json`) or a CSV of the same
numbers, as typed rows (:mod:`simulator.measured.series`) to set beside the simulation.

nccl-tests prints a ``#`` header naming its columns, then one row per size: the size, the
element count, the type, the reduction operator, (since about 2022) the root, then time (µs),
algbw and busbw (GB/s) and an error count, first out of place, then in place (NVIDIA/nccl-tests
``src/common.cu``, docs/reference/nccl-model.md §2). The reader takes the columns from the header,
so the formats of 2019-2021 (no ``root``, an ``error`` column) and of 2022 on (``root``,
``#wrong``) both work, and it skips what real logs interleave: NCCL INFO lines, ``NCCL version``
lines, and launcher prefixes such as ``[1,0]<stdout>:``. A log must hold one collective, one data
type and one operator; anything else is an :class:`~simulator.errors.InputError` naming the line.
"""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path

from simulator.errors import InputError, Problem
from simulator.inputs import control_problem, read_text
from simulator.measured.nccl_tests_json import parse_nccl_tests_json
from simulator.measured.series import MeasuredSeries, Measurement, checked

__all__ = ["MeasuredSeries", "Measurement", "load_measurements", "parse_csv", "parse_nccl_tests",
           "parse_nccl_tests_json"]

_PREFIX = re.compile(r"^(?:\[[^\]]*\](?:<std(?:out|err)>)?:?\s*|\S.*<std(?:out|err)>:\s*)")
"""A launcher's line prefix: ``[1,0]<stdout>:`` (Open MPI), ``[0]`` (Slurm), or a timestamp
ending in ``<stdout>:``."""

_SKIPPED = ("NCCL INFO", "NCCL WARN", "NCCL version")
"""Lines NCCL itself prints between the rows of a log."""

_STARTING = re.compile(r"#\s*Collective test starting:\s*(\S+)")


def load_measurements(path: str | Path) -> MeasuredSeries:
    """The measurements in ``path``: a CSV with columns ``size_bytes``, ``time_us`` and
    ``busbw_GBps`` (``#`` lines are comments), the JSON nccl-tests writes with ``-J`` (a
    ``.json`` file, or any file whose text opens with ``{``: nccl-tests names the file
    ``FILE.json.0`` when ``FILE.json`` exists), or else nccl-tests' standard output."""
    path = Path(path)
    text = read_text(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return parse_csv(text, str(path))
    if suffix == ".json" or text.lstrip().startswith("{"):
        return parse_nccl_tests_json(text, str(path))
    return parse_nccl_tests(text, str(path))


def parse_nccl_tests(text: str, source: str) -> MeasuredSeries:
    """The rows of nccl-tests standard output; InputError, naming the line, if it is not one."""
    columns: list[str] | None = None
    header_line = 0
    test: str | None = None
    rows: list[Measurement] = []
    kind: tuple[str, str, int] | None = None  # (type, redop, line) of the first row
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _PREFIX.sub("", raw.strip())
        if not line or any(marker in line for marker in _SKIPPED):
            continue
        if line.startswith("#"):
            started = _STARTING.match(line)
            if started and test is not None and started[1] != test:
                raise _error(source, number, f"a second collective ({started[1]}) after {test}; "
                                             "expected one collective per log")
            test = started[1] if started else test
            names = line.lstrip("#").split()
            if {"size", "count", "type", "time"} <= set(names):
                if columns is not None and rows and names != columns:
                    raise _error(source, number, "a second table with other columns; expected "
                                                 "one collective per log")
                columns, header_line = names, number
            elif names[:2] == ["bytes", "N"]:
                raise _error(source, number, "the nccl-tests format of 2019 and before (time in "
                                             "ms) is not supported; rerun with nccl-tests 2.x")
            continue
        if columns is None or not line[0].isdigit():
            continue  # launcher banners and other text before or between tables
        if problem := control_problem(line):  # a NUL is no whitespace: "0\x00" went unread
            raise _error(source, number, problem)
        fields = line.split()
        if len(fields) != len(columns):
            raise _error(source, number, f"expected {len(columns)} columns as in the header at "
                                         f"line {header_line}, got {len(fields)}")
        row = dict(zip(columns, fields, strict=False))  # a name seen twice keeps its second
        measurement = _measurement(source, number, columns, fields)
        this = (row["type"], row.get("redop", "none"))
        if kind is None:
            kind = (*this, number)
        elif this != kind[:2]:
            raise _error(source, number, f"{'/'.join(this)} rows after {'/'.join(kind[:2])} "
                                         f"rows (line {kind[2]}); expected one type and operator "
                                         "per log")
        rows.append(measurement)
    if columns is None:
        raise _error(source, 1, "expected nccl-tests output (a '#  size  count  type ...' header "
                                "line), found none")
    if not rows:
        raise _error(source, header_line, "a header but no data rows")
    return MeasuredSeries(source, tuple(rows), kind[0] if kind else None,
                          kind[1] if kind else None, test)


def parse_csv(text: str, source: str) -> MeasuredSeries:
    """Rows of a CSV with at least ``size_bytes``, ``time_us`` and ``busbw_GBps`` (``algbw_GBps``
    optional: size / time when absent; ``inplace_time_us`` optional, the in-place time); ``#``
    lines are comments."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise _error(source, 1, "expected a CSV header line, found none")
    reader = csv.DictReader(io.StringIO("\n".join(line for _, line in lines)))
    missing = {"size_bytes", "time_us", "busbw_GBps"} - set(reader.fieldnames or ())
    if missing:
        raise _error(source, lines[0][0], f"expected columns size_bytes, time_us and busbw_GBps; "
                                          f"missing {', '.join(sorted(missing))}")
    rows = []
    for (number, line), row in zip(lines[1:], reader, strict=True):
        if problem := control_problem(line):
            raise _error(source, number, problem)
        try:
            size, time = int(row["size_bytes"]), float(row["time_us"])
            busbw = float(row["busbw_GBps"])
            given = float(row["algbw_GBps"]) if row.get("algbw_GBps") else None
            in_place = float(row["inplace_time_us"]) if row.get("inplace_time_us") else None
        except (TypeError, ValueError):
            raise _error(source, number, "expected numbers in size_bytes, time_us and "
                                         "busbw_GBps") from None
        if size <= 0 or not (math.isfinite(time) and time > 0):
            raise _error(source, number, f"expected a positive size and time, got {size} bytes "
                                         f"in {time} us")
        algbw = given if given is not None else size / time / 1e3
        rows.append(checked(source, f"line {number}",
                            Measurement(size, time, algbw, busbw, in_place, number)))
    if not rows:
        raise _error(source, lines[0][0], "a header but no data rows")
    return MeasuredSeries(source, tuple(rows))


def _measurement(source: str, number: int, columns: list[str], fields: list[str]) -> Measurement:
    """The out-of-place (first) and in-place (second) time, algbw and busbw of one row."""
    times = [i for i, name in enumerate(columns) if name == "time"]
    try:
        size = int(fields[columns.index("size")])
        first = times[0]
        time, algbw, busbw = (float(fields[first + k]) for k in range(3))
        in_place = float(fields[times[1]]) if len(times) > 1 else None
    except (ValueError, IndexError):
        raise _error(source, number, "expected a whole size and numeric time, algbw and busbw "
                                     "columns") from None
    return checked(source, f"line {number}", Measurement(size, time, algbw, busbw, in_place, number))


def _error(source: str, line: int, message: str) -> InputError:
    return InputError([Problem(source, f"line {line}", message)])
