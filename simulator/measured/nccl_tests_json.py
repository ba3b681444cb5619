"""Measured results in from the JSON file an nccl-tests binary writes with ``-J FILE.json``
(nccl-tests 2.17.3 on, ``src/util.cu``: JSON_FILE_VERSION 1 to 3 so far, one record layout).

The file is one object: ``version``, ``start_time``, ``args`` (the binary's argv, so
``args[0]`` names the test as the text log's ``# Collective test starting:`` line does),
``env``, ``nccl_version``, ``config``, then ``results``: one record per size, each
``{size, count, type, redop, root, out_of_place: {time, alg_bw, bus_bw, nwrong}, in_place:
{...}, actual_iterations, experiment_name}`` (with ``-I 1`` also per-iteration statistics), and
the footers (``out_of_bounds``, ``average_bus_bandwidth``, ``errors``, ``end_time``). Times are
µs and bandwidths GB/s, as in the text table; a value that is not a number (NaN) is written as
the string ``"nan"``. The reader takes the same rows as from the text log, refuses what the text
reader refuses, and names the JSON path of what is wrong (``results[3].out_of_place.time``):
nccl-tests writes the whole file on one line, so a line number would say nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

from simulator.errors import InputError, Problem
from simulator.measured.series import (
    MeasuredSeries,
    Measurement,
    bandwidth_problem,
    size_problem,
    time_problem,
)

EXPECTED = "expected JSON as nccl-tests -J writes it"
"""How a file that is not such JSON is told apart, at the start of its error."""

_MISSING = object()
"""A key a record lacks, told apart from one whose value is null."""


def parse_nccl_tests_json(text: str, source: str) -> MeasuredSeries:
    """The rows of an nccl-tests ``-J`` file; InputError naming the JSON path (or, where the
    text is not JSON, the line and column) of the first thing wrong."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        infinite = text[error.pos:error.pos + 4].lstrip("-").startswith("inf")
        why = ("an infinite value written as inf, which JSON has no word for and no machine "
               "measures" if infinite else error.msg)
        raise _error(source, f"line {error.lineno} column {error.colno}",
                     f"{EXPECTED}: {why}") from None
    except RecursionError:  # json's decoder recurses once per level of nesting
        raise _error(source, "", f"{EXPECTED}: nested too deeply to read") from None
    if not isinstance(document, dict):
        raise _error(source, "", f"{EXPECTED}: an object with a results list, got "
                                 f"{_kind(document)}")
    results = document.get("results")
    if not isinstance(results, list):
        raise _error(source, "results", "expected the list of results nccl-tests -J writes, got "
                                        + ("nothing" if "results" not in document
                                           else _kind(results)))
    if not results:
        raise _error(source, "results", "expected at least one result, got an empty list")
    rows: list[Measurement] = []
    kind: tuple[str, str] | None = None  # type and redop of results[0]
    for index, record in enumerate(results):
        at = f"results[{index}]"
        if not isinstance(record, dict):
            raise _error(source, at, f"expected an object (size, type, redop, out_of_place, "
                                     f"in_place), got {_kind(record)}")
        this = (_text(source, f"{at}.type", record.get("type", _MISSING)),
                _text(source, f"{at}.redop", record.get("redop", _MISSING)))
        if kind is None:
            kind = this
        elif this != kind:
            field = "type" if this[0] != kind[0] else "redop"
            raise _error(source, f"{at}.{field}", f"{'/'.join(this)} after {'/'.join(kind)} "
                                                  "(results[0]); expected one type and operator "
                                                  "per file")
        size = _size(source, f"{at}.size", record.get("size", _MISSING))
        time, algbw, busbw = _timing(source, f"{at}.out_of_place",
                                     record.get("out_of_place", _MISSING))
        in_place = record.get("in_place")
        in_place_time = (None if in_place is None
                         else _timing(source, f"{at}.in_place", in_place)[0])
        rows.append(Measurement(size, time, algbw, busbw, in_place_time, None, index))
    assert kind is not None
    return MeasuredSeries(source, tuple(rows), kind[0], kind[1], _test(document.get("args")))


def _timing(source: str, at: str, value: object) -> tuple[float, float, float]:
    """The time (µs), algbw and busbw (GB/s) of an ``out_of_place`` or ``in_place`` object."""
    if not isinstance(value, dict):
        raise _error(source, at, f"expected an object with time, alg_bw and bus_bw, got "
                                 f"{_shown(value)}")
    if "time" not in value and "cpu_time" in value:
        raise _error(source, at, "expected the collective's time (time), got cpu_time: this "
                                 "file was written with -C 1, which times the CPU; rerun "
                                 "without it")
    time = _number(source, f"{at}.time", value.get("time", _MISSING), "time", time_problem)
    algbw = _number(source, f"{at}.alg_bw", value.get("alg_bw", _MISSING), "bandwidth",
                    bandwidth_problem)
    busbw = _number(source, f"{at}.bus_bw", value.get("bus_bw", _MISSING), "bandwidth",
                    bandwidth_problem)
    return time, algbw, busbw


def _number(source: str, at: str, value: object, what: str,
            problem: Callable[[float], str | None]) -> float:
    """``value`` as a float if it is a JSON number (a ``what``) that ``problem`` finds nothing
    wrong with."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _error(source, at, f"expected a {what} (a number), got {_shown(value)}")
    found = problem(float(value))
    if found is not None:
        raise _error(source, at, found)
    return float(value)


def _size(source: str, at: str, value: object) -> int:
    """A record's size: a whole number of bytes from 0 to 1 TiB."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise _error(source, at, f"expected a whole number of bytes, got {_shown(value)}")
    found = size_problem(value)
    if found is not None:
        raise _error(source, at, found)
    return value


def _text(source: str, at: str, value: object) -> str:
    """A record's type or operator name."""
    if not isinstance(value, str) or not value.strip():
        raise _error(source, at, f"expected a name such as 'float' or 'sum', got {_shown(value)}")
    return value.strip()


def _test(args: object) -> str | None:
    """The nccl-tests binary (``all_reduce_perf``): the last part of ``args[0]``, as nccl-tests
    names its ``programName``; None where the file has no such list."""
    if not isinstance(args, list) or not args or not isinstance(args[0], str):
        return None
    name = args[0].replace("\\", "/").rsplit("/", 1)[-1]
    return name or None


def _kind(value: object) -> str:
    """A JSON value's kind, as an error names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _shown(value: object) -> str:
    """A value as an error quotes it: numbers and strings as written, else their kind, and
    ``nothing`` for a key the record lacks."""
    if value is _MISSING:
        return "nothing"
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return repr(value)
    return _kind(value)


def _error(source: str, at: str, message: str) -> InputError:
    return InputError([Problem(source, at, message)])
