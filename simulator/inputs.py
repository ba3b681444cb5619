"""Reading input files safely: only regular files, at most MAX_INPUT_BYTES, as UTF-8 text; and
YAML bounded in nesting and aliases before it is built, its text free of control characters
(docs/scenarios.md#limits).

Every reader of a scenario, preset, graph or nccl-tests log comes through :func:`read_text`
(of a binary input, a Chakra trace, through :func:`read_bytes`), so a FIFO, a device or an
oversized file is refused with one line instead of hanging, filling the memory or ending in a
traceback. Being the one way in, it is also where the files a run reads are recorded
(:func:`recording`), by identity, so that no output of that run may replace one of them
(:func:`simulator.commands.paths.check_outputs`).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import yaml

from simulator.errors import InputError, Problem, quoted
from simulator.limits import MAX_INPUT_BYTES, MAX_YAML_ALIASES, MAX_YAML_NESTING

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters refused in the text of an input's values and names: C0 but tab and
newline, DEL, and C1. None belongs in a name, a number or a path, and they would reach a
terminal or a CSV cell as they are (a NUL ends a C string; an ESC starts a terminal command)."""


def control_problem(text: str) -> str | None:
    """What is wrong with ``text`` as a value or name read from a file: a control character
    (:data:`CONTROL`); None where there is none."""
    found = CONTROL.search(text)
    if found is None:
        return None
    return (f"expected text without control characters, got {quoted(found[0])} at character "
            f"{found.start() + 1:,} of {quoted(text)}")


@dataclass(frozen=True)
class InputFile:
    """A file a run read: its path as named, and its identity (device and inode, after
    following links), which is what an output is compared with: two names of one file, through
    a symbolic or hard link or a different spelling of its path, are one input."""

    path: Path
    device: int
    inode: int

    @classmethod
    def of(cls, path: Path, status: os.stat_result) -> InputFile:
        """``path``, whose ``status`` was taken (links followed), as an input file."""
        return cls(path, status.st_dev, status.st_ino)

    def is_(self, status: os.stat_result) -> bool:
        """Whether ``status`` (of a path, links followed) is this file."""
        return (status.st_dev, status.st_ino) == (self.device, self.inode)


_READS: ContextVar[list[InputFile] | None] = ContextVar("reads", default=None)
"""The registry of the files read while a :func:`recording` is open (None: none is)."""


@contextmanager
def recording() -> Iterator[list[InputFile]]:
    """The registry of every file :func:`read_bytes` reads while this is open, in the order
    read (each once); a recording opened inside another adds to the outer one's registry."""
    outer = _READS.get()
    if outer is not None:
        yield outer
        return
    reads: list[InputFile] = []
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)


def note_read(path: Path, status: os.stat_result) -> None:
    """Record ``path`` (whose ``status`` was taken, links followed) as read, if a
    :func:`recording` is open."""
    reads = _READS.get()
    if reads is not None and not any(read.is_(status) for read in reads):
        reads.append(InputFile.of(path, status))


def identified(paths: Iterable[Path]) -> list[InputFile]:
    """``paths`` that exist, as input files (by identity), for a caller that names its inputs
    itself rather than recording them."""
    found = []
    for path in paths:
        try:
            status = path.stat()
        except OSError:
            continue
        found.append(InputFile.of(path, status))
    return found


def read_text(path: Path, expected: str = "UTF-8 text") -> str:
    """The UTF-8 text of the regular file ``path``; InputError naming it otherwise: missing, not
    a regular file (a FIFO, a device, a directory), larger than MAX_INPUT_BYTES, unreadable, or
    not UTF-8 (then saying it ``expected`` that)."""
    data = read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError([Problem(str(path), "", f"expected {expected}")]) from None


def read_bytes(path: Path, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the regular file ``path``; InputError naming it otherwise: missing, not a
    regular file (a FIFO, a device, a directory), larger than ``limit`` or unreadable."""
    file = str(path)
    try:
        status = path.stat()
    except FileNotFoundError:
        raise InputError([Problem(file, "", "no such file")]) from None
    except OSError as error:
        raise InputError([Problem(file, "", f"cannot read: {error.strerror}")]) from None
    kind = status.st_mode
    if not stat.S_ISREG(kind):
        what = "a directory" if stat.S_ISDIR(kind) else "a FIFO" if stat.S_ISFIFO(kind) else \
            "a device" if stat.S_ISCHR(kind) or stat.S_ISBLK(kind) else "not a regular file"
        raise InputError([Problem(file, "", f"expected a regular file, got {what}")])
    note_read(path, status)
    try:
        with path.open("rb") as stream:
            data = stream.read(limit + 1)
    except OSError as error:
        raise InputError([Problem(file, "", f"cannot read: {error.strerror}")]) from None
    if len(data) > limit:
        raise InputError([Problem(file, "", f"expected at most {limit >> 20} MiB, "
                                            "got a larger file")])
    return data


def check_yaml_shape(text: str, file: str, loader: type[yaml.SafeLoader],
                     lists: Mapping[str, Callable[[int], str | None]] | None = None) -> None:
    """InputError if the YAML ``text`` nests deeper than MAX_YAML_NESTING or uses more than
    MAX_YAML_ALIASES aliases, or holds a control character in a key or value (an escape such as
    ``"\\0"``; PyYAML refuses them raw), found from its parse events (no recursion, nothing
    built), or if a list under a top-level key of ``lists`` grows past what its rule (called
    with the items so far) allows: refused where it does, before the rest of a long list is
    parsed.
    yaml.YAMLError where it does not parse (the caller words it)."""
    depth = aliases = items = 0
    key: str | None = None  # the top-level key whose value comes next (None: a key comes next)
    counted: Callable[[int], str | None] | None = None

    def line(event: yaml.Event) -> str:
        return "" if event.start_mark is None else f"line {event.start_mark.line + 1}"

    for event in yaml.parse(text, Loader=loader):
        starts = isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent))
        if counted is not None and depth == 2 and (starts or isinstance(
                event, (yaml.ScalarEvent, yaml.AliasEvent))):
            items += 1
            if (problem := counted(items)) is not None:
                raise InputError([Problem(file, str(key), problem)])
        if depth == 1 and isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
            key = event.value if key is None and isinstance(event, yaml.ScalarEvent) else None
        if starts:
            if depth == 1 and isinstance(event, yaml.SequenceStartEvent) and key is not None:
                counted, items = (lists or {}).get(key), 0
            depth += 1
            if depth > MAX_YAML_NESTING:
                raise InputError([Problem(file, line(event), (
                    f"expected mappings and lists nested at most {MAX_YAML_NESTING} deep"))])
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
            if depth == 1:
                key, counted = None, None
        elif isinstance(event, yaml.ScalarEvent) and (problem := control_problem(event.value)):
            raise InputError([Problem(file, line(event), problem)])
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_YAML_ALIASES:
                raise InputError([Problem(file, line(event), (
                    f"expected at most {MAX_YAML_ALIASES} aliases (*name): more can stand for "
                    "billions of values"))])
