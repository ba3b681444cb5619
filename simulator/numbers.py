"""Numbers read from the text of an input file (an XML attribute, a log's figure), each within
bounds the reader states: no 30-digit integer taken for a C ``int``, no figure that overflows to
infinity, no ``nan``. One primitive for every reader, which words its own error."""

from __future__ import annotations

import math
import re

INT_MAX = 2**31 - 1
"""The largest C ``int``: what NCCL reads an integer attribute of its XML into
(``xmlGetAttrInt``, src/graph/xml.h), and MSCCL's runtime its schedule's
(``mscclXmlGetAttrInt``, src/misc/msccl/msccl_parser.cc of msccl-executor-nccl)."""

MAX_DIGITS = 32
"""Characters of a number worth converting: no C ``int`` or finite figure a machine prints needs
more (a 4,300-digit text would cost Python's int() and float() time for nothing)."""

_DECIMAL = re.compile(r"\s*[-+]?[0-9]+\s*")


def whole_in(text: str, least: int, most: int = INT_MAX, *, prefixed: bool = False) -> int | None:
    """``text`` as a whole number from ``least`` to ``most``, or None: decimal digits, or with
    ``prefixed`` any literal C's ``strtol`` of base 0 reads (``0x`` hex too)."""
    if len(text) > MAX_DIGITS or not (prefixed or _DECIMAL.fullmatch(text)):
        return None
    try:
        number = int(text.strip(), 0 if prefixed else 10)
    except ValueError:
        return None
    return number if least <= number <= most else None


def finite_in(text: str, least: float, most: float) -> float | None:
    """``text`` as a finite number from ``least`` to ``most``, or None (``nan``, ``inf``, a
    figure that overflows, more than MAX_DIGITS characters)."""
    if len(text) > MAX_DIGITS:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) and least <= number <= most else None
