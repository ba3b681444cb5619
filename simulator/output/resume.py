"""``run --resume``: the points a stopped run already wrote, read back so that only the rest run.

A run keeps its results file whole after every point (:mod:`simulator.output.stream`), so a run
killed at any moment, even by SIGKILL, leaves a valid CSV of the first points in the run's order
and, beside it, the JSON settings that made them. :func:`resumed` checks that those settings are
the ones this run would write (the same resolved scenario, seed, proxy, output and simulator
version: anything else could change the rows), that the rows are the first points this run
plans, in order, that each is the row this run wrote there (its digest is in the sidecar,
:mod:`simulator.output.digests`: an edited row is refused, never continued from), and gives them
back as :class:`~simulator.output.results.Result` rows. Written again with the new points, they
make exactly the file an uninterrupted run writes: CSV floats are written at full precision and
read back to the same bits.
"""

from __future__ import annotations

import csv
import json
import math
import types
import typing
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from simulator.errors import InputError, Problem, quoted
from simulator.output.digests import Record, read_digests, records, sidecar, write_digests
from simulator.output.files import write_atomically
from simulator.output.results import RESULT_COLUMNS, Result
from simulator.output.settings_json import settings
from simulator.output.writers import WRITERS
from simulator.scenario.spec import Scenario
from simulator.settings import RunSettings
from simulator.units import format_size

_TYPES = typing.get_type_hints(Result)


def resumed(scenario: Scenario, run: RunSettings, output: Path,
            planned: Sequence[tuple[str, int]], *, prefix: bool = True) -> list[Result]:
    """The rows already in ``output``'s results file for ``scenario`` run with ``run``, which
    must be the first of the ``planned`` (algorithm, size) points (``prefix``; a sweep, which
    finishes points out of order, keeps any of them in their order: ``prefix=False``); none
    where no results file is there yet. InputError where the file or its settings say it came
    from another run."""
    csv_path = output / WRITERS["csv"].files(scenario.name)[0]
    json_path = output / WRITERS["json"].files(scenario.name)[0]
    if not csv_path.exists():
        return []
    if not json_path.is_file():
        raise _problem(scenario, f"cannot resume {csv_path}: its settings file {json_path.name} "
                                 "is missing, so nothing says which run wrote it")
    try:
        written = json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        why = "nested too deep" if isinstance(error, RecursionError) else str(error)
        raise _problem(scenario, f"cannot resume: {json_path} is not readable JSON "
                                 f"({why})") from None
    expected = json.loads(json.dumps(settings(scenario, run, output)))
    differs = _first_difference(expected, written)
    if differs is not None:
        raise _problem(scenario, f"cannot resume: {json_path} was written by another run "
                                 f"({differs} differs); run without --resume, or into another "
                                 "--output")
    records, whole = _read_records(scenario, csv_path)
    known = read_digests(csv_path)
    rows = []
    position = 0  # where in the plan the next row may be
    expected = ("the point this run plans there" if prefix
                else "a point this sweep plans after the rows before it")
    for i, record in enumerate(records):
        row = _row(scenario, csv_path, i, record)
        point = (row.algorithm, row.size_bytes)
        if not prefix:
            while position < len(planned) and planned[position] != point:
                position += 1
        if position >= len(planned) or planned[position] != point:
            raise _problem(scenario, f"cannot resume: row {i + 1} of {csv_path} is "
                                     f"{row.algorithm} at {format_size(row.size_bytes)}, not "
                                     f"{expected}")
        position += 1
        where = f"row {i + 1} of {csv_path} ({row.algorithm} at {format_size(row.size_bytes)})"
        _check_digest(scenario, csv_path, where, record, known)
        rows.append(row)
    # every row checked: only now is anything written, the file and its digests as kept
    if whole is not None:  # the cut line goes, so that the next point's line follows a whole one
        write_atomically(csv_path, lambda tmp: _write(tmp, whole))
    if known != tuple(record.digest for record in records):  # a digest a kill left, or rerun
        write_digests(csv_path, records)
    return rows


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def _problem(scenario: Scenario, message: str) -> InputError:
    return InputError([Problem(scenario.source, "--resume", message)])


def _first_difference(expected: Any, written: Any, path: str = "") -> str | None:
    """The dotted path of the first place two JSON values differ (None: equal)."""
    if isinstance(expected, dict) and isinstance(written, dict):
        for key in [*expected, *(k for k in written if k not in expected)]:
            found = _first_difference(expected.get(key), written.get(key),
                                      f"{path}.{key}" if path else key)
            if found is not None:
                return found
        return None
    return None if expected == written else (path or "the whole file")


def _read_records(scenario: Scenario, path: Path) -> tuple[list[Record], str | None]:
    """The CSV's data records, each with the text it was read from, and the file's text
    without a last line that a kill cut while it was appended (None: no line was cut)."""
    whole = None
    try:
        text = path.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):
            text = whole = text[:text.rfind("\n") + 1]
        found = records(text)
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise _problem(scenario, f"cannot resume: {path} is not readable ({error})") from None
    if not found or found[0].fields != RESULT_COLUMNS:
        raise _problem(scenario, f"cannot resume: {path} is not a results file of this version "
                                 "(its columns differ)")
    return found[1:], whole


def _row(scenario: Scenario, path: Path, index: int, record: Record) -> Result:
    """Data record ``index`` (from 0) as a result, every value as the writer wrote it."""
    try:
        values: dict[str, Any] = {f.name: _value(f.name, text)
                                  for f, text in zip(fields(Result), record.fields, strict=True)}
        return Result(**values)
    except ValueError as error:
        raise _problem(scenario, f"cannot resume: {path} line {index + 2}: {error}") from None


def _check_digest(scenario: Scenario, path: Path, where: str, record: Record,
                  known: tuple[str, ...] | None) -> None:
    """InputError where a kept row is not one this run wrote: its digest is not in the sidecar
    (the row was edited since), or there is no sidecar to say (missing, or of another
    version)."""
    name = sidecar(path).name
    if known is None:
        raise _problem(scenario, f"cannot resume: {where} has no digest ({name} is missing or "
                                 "not a digest file of this version), so nothing says this run "
                                 "wrote it; run without --resume")
    if record.digest not in known:
        raise _problem(scenario, f"cannot resume: {where} is not the row this run wrote (its "
                                 f"digest is not in {name}): it was edited; delete that row, or "
                                 "run without --resume")


def _value(name: str, text: str) -> object:
    """One CSV field as the Result's field type holds it."""
    kind = _TYPES[name]
    if kind is str:
        return text
    if kind is int:
        return int(text)
    if kind is float:
        return math.nan if text == "" else float(text)
    if isinstance(kind, types.UnionType) and set(kind.__args__) == {bool, type(None)}:
        if text not in ("", "True", "False"):
            raise ValueError(f"{name}: expected True, False or nothing, got {quoted(text)}")
        return None if text == "" else text == "True"
    raise ValueError(f"{name}: no reader for {kind}")
