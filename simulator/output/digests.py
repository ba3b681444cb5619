"""The results file's digest sidecar, ``.NAME.resume`` beside ``NAME.csv``: the SHA-256 of every
row a run wrote, so that ``run --resume`` keeps only rows it can tell this run wrote
(:mod:`simulator.output.resume`), never one edited since.

The sidecar is written with the CSV, and before it: whole when the CSV is written whole, a line
appended when a row is appended. A kill between the two leaves a digest without its row (the row
is then simply run again), never a row without its digest. Its format (docs/results.md):

    # allreduce-sim row digests 1: sha256 of each row of NAME.csv as written
    <64 hex digits>
    ...

one line per row, the SHA-256 of the row's exact bytes in the CSV, its newline included.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from simulator.output.files import write_atomically

_HEADER = "# allreduce-sim row digests 1: sha256 of each row of {name} as written\n"
"""The sidecar's first line: its format's version, and what the digests are of (a file
without it is not trusted, as one missing is not)."""


@dataclass(frozen=True)
class Record:
    """One CSV record: its fields, and its exact text in the file (newline included)."""

    fields: tuple[str, ...]
    text: str

    @property
    def digest(self) -> str:
        """The SHA-256 of the record's bytes, in hex."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()


def sidecar_name(name: str) -> str:
    """The digest sidecar's name for the results of a scenario named ``name``."""
    return f".{name}.resume"


def sidecar(csv_path: Path) -> Path:
    """Where the digests of the results file ``csv_path`` (``NAME.csv``) are."""
    return csv_path.with_name(sidecar_name(csv_path.stem))


def records(text: str) -> list[Record]:
    """Every CSV record of ``text``, header first, with the exact text each was read from (a
    quoted field may span lines); csv.Error where the text is not CSV."""
    taken: list[str] = []
    found = []
    for fields in csv.reader(_Taking(io.StringIO(text, newline=""), taken)):
        found.append(Record(tuple(fields), "".join(taken)))
        taken.clear()
    return found


class _Taking:
    """An iterator over ``lines`` that keeps each line it gives in ``taken``, so that the
    reader's records can be matched to the text they came from."""

    def __init__(self, lines: io.StringIO, taken: list[str]) -> None:
        self._lines, self._taken = lines, taken

    def __iter__(self) -> _Taking:
        return self

    def __next__(self) -> str:
        line = self._lines.readline()
        if not line:
            raise StopIteration
        self._taken.append(line)
        return line


def write_digests(csv_path: Path, rows: Sequence[Record]) -> None:
    """The sidecar of ``csv_path`` written whole, atomically, with the digests of ``rows``."""
    text = _HEADER.format(name=csv_path.name) + "".join(f"{row.digest}\n" for row in rows)

    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8")

    write_atomically(sidecar(csv_path), write)


def append_digests(csv_path: Path, rows: Sequence[Record]) -> None:
    """The digests of ``rows`` added to the end of ``csv_path``'s sidecar, in one write,
    flushed to disk (before the rows themselves are appended to the CSV)."""
    with sidecar(csv_path).open("a", encoding="utf-8", newline="") as file:
        file.write("".join(f"{row.digest}\n" for row in rows))
        file.flush()
        os.fsync(file.fileno())


def read_digests(csv_path: Path) -> tuple[str, ...] | None:
    """The digests in ``csv_path``'s sidecar, in order; None where it is missing, unreadable or
    not a sidecar of this format (its rows then have no digest to match)."""
    try:
        lines = sidecar(csv_path).read_text(encoding="utf-8").splitlines(keepends=True)
    except (OSError, UnicodeDecodeError):
        return None
    if not lines or lines[0] != _HEADER.format(name=csv_path.name):
        return None
    return tuple(line.rstrip("\n") for line in lines[1:] if line.endswith("\n"))
