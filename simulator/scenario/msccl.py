"""MSCCL schedules named in a scenario (``algorithms: [msccl:path/to/algo.xml]``), read from
the XML msccl-tools writes into an :class:`~simulator.algorithms.msccl.Msccl`.

The path is relative to the scenario file's directory (to the current directory for a scenario
made in code), so a scenario and its schedules move together and run from anywhere. Every
problem is one line naming the file, the line and the element: XML that does not parse, an
element or attribute missing or of the wrong kind, and what
:func:`~simulator.algorithms.msccl.flaws` finds (a dependency on a step that does not exist, a
send no step receives, steps waiting in a circle). A schedule is read once per process while
its file is unchanged.

The XML is read by :func:`simulator.xmlsafe.read_xml`, the one safe reader of every XML input:
a regular file, bounded in size, then defusedxml's parser, which refuses entity declarations
(billion laughs) and external references, keeping each element's line.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from simulator.algorithms.msccl import (
    Buffer,
    Gpu,
    Kind,
    Msccl,
    MscclSchedule,
    Ref,
    Step,
    Threadblock,
    flaws,
)
from simulator.errors import InputError, Problem, clipped, quoted
from simulator.inputs import note_read
from simulator.model.collective import Collective
from simulator.units import INT_MAX, MAX_DIGITS, whole_in
from simulator.xmlsafe import XmlElement, read_xml

PREFIX = "msccl:"
"""How a scenario names an MSCCL schedule among its algorithms."""

PROTOCOLS = ("Simple", "LL", "LL128")
"""The ``proto`` values the MSCCL runtime accepts (``mscclProtocolStrToId``)."""


def is_msccl(name: object) -> bool:
    """Whether an ``algorithms`` entry names an MSCCL schedule."""
    return isinstance(name, str) and name.startswith(PREFIX)


def schedule_path(name: str, scenario_file: str) -> Path:
    """The file ``msccl:PATH`` names: PATH, relative to the scenario file's directory."""
    return Path(scenario_file).parent / name.removeprefix(PREFIX)


def load_msccl(name: str, scenario_file: str, collective: Collective) -> Msccl:
    """The schedule ``name`` (``msccl:PATH``) names, as an algorithm of that name; InputError,
    every problem one line naming the schedule's file, where it cannot be read, is not a sound
    MSCCL schedule or is not one of ``collective``."""
    path = schedule_path(name, scenario_file)
    try:
        status = path.stat()
        key = (status.st_mtime_ns, status.st_size)
        note_read(path, status)  # read once per version: each run that names it reads it
    except OSError:
        key = (0, 0)  # read_text words what is wrong
    algorithm = _load(str(path), key, name)
    schedule = algorithm.msccl
    if schedule.collective is not collective:
        raise InputError([Problem(schedule.file, f"line {schedule.line}", (
            f"<algo coll=\"{schedule.collective.value}\">: expected coll=\"{collective.value}\", "
            "the scenario's collective"))])
    return algorithm


def msccl_problems(name: str, scenario_file: str, collective: Collective) -> list[str]:
    """What is wrong with the schedule ``name`` names, one message per problem (each naming
    the schedule's file, its line and the element); none where it is sound."""
    try:
        load_msccl(name, scenario_file, collective)
    except InputError as error:
        return [str(problem) for problem in error.problems]
    return []


MAX_PROBLEMS = 16
"""Problems of one schedule file said, then how many more: a file wrong throughout (an XML of
another kind) would otherwise print a line per element."""

CACHED_SCHEDULES = 64
"""Schedules kept read per process: a scenario names a few, a sweep's workers read the same
ones again. Read, a schedule takes about 8 times its file (measured with tracemalloc: 289 kB for
the 36 kB allpairs_8.xml, 271 kB for the 38 kB two_level_ring_16.xml), so 64 of the shipped
size hold ~20 MB."""


@lru_cache(maxsize=CACHED_SCHEDULES)
def _load(file: str, _version: tuple[int, int], name: str) -> Msccl:
    """The schedule in ``file`` as it is at ``_version`` (mtime, size), named ``name``."""
    root = read_xml(Path(file), "an MSCCL schedule (msccl-tools' XML)")
    reader = _Reader(file)
    schedule = reader.algo(root)
    if schedule is not None and not reader.problems:
        reader.problems += [Problem(file, f"line {flaw.line}", f"{flaw.element}: {flaw.message}")
                            for flaw in flaws(schedule)]
    if reader.problems or schedule is None:
        problems = reader.problems[:MAX_PROBLEMS]
        if len(reader.problems) > MAX_PROBLEMS:
            problems.append(Problem(file, "", f"and {len(reader.problems) - MAX_PROBLEMS} more "
                                              "problems"))
        raise InputError(problems)
    return Msccl(schedule, name)


_INTEGER = re.compile(r"-?[0-9]+")

_NAMING = ("name", "id", "s", "type")
"""The attributes that tell an element from its siblings, which a message shows."""


def _tag(element: XmlElement) -> str:
    """``<step s="3" type="rrc">``: the element with the attributes that name it."""
    shown = "".join(f' {name}="{clipped(element.attrs[name])}"' for name in _NAMING
                    if name in element.attrs)
    return f"<{element.tag}{shown}>"


class _Reader:
    """Turns elements into the schedule's values, recording every problem of the file."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []

    def problem(self, element: XmlElement, message: str) -> None:
        self.problems.append(Problem(self.file, f"line {element.line}",
                                     f"{_tag(element)}: {message}"))

    def values(self, element: XmlElement, names: tuple[str, ...]) -> dict[str, str] | None:
        """The attributes ``names`` of ``element``, or None after recording those missing."""
        missing = [name for name in names if name not in element.attrs]
        if missing:
            self.problem(element, f"expected attribute{'s' if len(missing) > 1 else ''} "
                                  f"{', '.join(missing)}, missing")
            return None
        return {name: element.attrs[name] for name in names}

    def integer(self, element: XmlElement, name: str, value: str, least: int) -> int:
        """``value`` as a whole number from ``least`` to INT_MAX (a C ``int``, as MSCCL's runtime
        reads it); ``least`` after recording a problem."""
        number = whole_in(value, least)
        if number is not None:
            return number
        digits = value.strip()
        above = _INTEGER.fullmatch(digits) and not digits.startswith("-") and (
            len(digits) > MAX_DIGITS or int(digits) > INT_MAX)
        most = f" and at most {INT_MAX} (a C int)" if above else ""
        self.problem(element, f"expected {name} a whole number ≥ {least}{most}, got "
                              f"{quoted(value)}")
        return least

    def choice(self, element: XmlElement, name: str, value: str, choices: tuple[str, ...],
               note: str = "") -> str | None:
        if value in choices:
            return value
        self.problem(element, f"expected {name} one of {', '.join(choices)}{note}, got "
                              f"{quoted(value)}")
        return None

    def children(self, element: XmlElement, tag: str) -> list[XmlElement]:
        """The children of ``element``, after recording any that is not a ``tag``."""
        for child in element.children:
            if child.tag != tag:
                hint = (" (msccl-tools' old_format, which the MSCCL runtime reads)"
                        if child.tag == "op" else "")
                self.problem(child, f"unknown element inside <{element.tag}>: expected "
                                    f"<{tag}>{hint}")
        return [child for child in element.children if child.tag == tag]

    def algo(self, root: XmlElement) -> MscclSchedule | None:
        if root.tag != "algo":
            self.problem(root, "expected <algo> at the top (an MSCCL schedule, as msccl-tools "
                               "writes it)")
            return None
        given = self.values(root, ("name", "proto", "nchannels", "nchunksperloop", "ngpus",
                                   "coll", "inplace"))
        gpus = tuple(gpu for gpu in map(self.gpu, self.children(root, "gpu")) if gpu)
        if given is None:
            return None
        collective = self.choice(root, "coll", given["coll"], tuple(c.value for c in Collective),
                                 " (alltoall and custom collectives are not simulated)")
        protocol = self.choice(root, "proto", given["proto"], PROTOCOLS)
        inplace = self.choice(root, "inplace", given["inplace"], ("0", "1"))
        channels = self.integer(root, "nchannels", given["nchannels"], 1)
        chunks = self.integer(root, "nchunksperloop", given["nchunksperloop"], 1)
        ngpus = self.integer(root, "ngpus", given["ngpus"], 1)
        if collective is None or protocol is None or inplace is None:
            return None
        return MscclSchedule(self.file, given["name"], protocol, channels, chunks, ngpus,
                             Collective(collective), inplace == "1", gpus, root.line)

    def gpu(self, element: XmlElement) -> Gpu | None:
        given = self.values(element, ("id", "i_chunks", "o_chunks", "s_chunks"))
        tbs = tuple(tb for tb in map(self.tb, self.children(element, "tb")) if tb)
        if given is None:
            return None
        return Gpu(self.integer(element, "id", given["id"], 0),
                   self.integer(element, "i_chunks", given["i_chunks"], 0),
                   self.integer(element, "o_chunks", given["o_chunks"], 0),
                   self.integer(element, "s_chunks", given["s_chunks"], 0), tbs, element.line)

    def tb(self, element: XmlElement) -> Threadblock | None:
        given = self.values(element, ("id", "send", "recv", "chan"))
        steps = tuple(step for step in map(self.step, self.children(element, "step")) if step)
        if given is None:
            return None
        return Threadblock(self.integer(element, "id", given["id"], 0),
                           self.integer(element, "send", given["send"], -1),
                           self.integer(element, "recv", given["recv"], -1),
                           self.integer(element, "chan", given["chan"], 0), steps, element.line)

    def step(self, element: XmlElement) -> Step | None:
        given = self.values(element, ("s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt",
                                      "depid", "deps", "hasdep"))
        if given is None:
            return None
        kind = self.choice(element, "type", given["type"], tuple(k.value for k in Kind))
        buffers = tuple(b.value for b in Buffer)
        src = self.choice(element, "srcbuf", given["srcbuf"], buffers)
        dst = self.choice(element, "dstbuf", given["dstbuf"], buffers)
        hasdep = self.choice(element, "hasdep", given["hasdep"], ("0", "1"))
        s = self.integer(element, "s", given["s"], 0)
        srcoff = self.integer(element, "srcoff", given["srcoff"], -1)
        dstoff = self.integer(element, "dstoff", given["dstoff"], -1)
        count = self.integer(element, "cnt", given["cnt"], 0)
        depid = self.integer(element, "depid", given["depid"], -1)
        deps = self.integer(element, "deps", given["deps"], -1)
        if kind is None or src is None or dst is None or hasdep is None:
            return None
        return Step(s, Kind(kind), Ref(Buffer(src), srcoff), Ref(Buffer(dst), dstoff), count,
                    (depid, deps) if depid >= 0 else None, hasdep == "1", element.line)
