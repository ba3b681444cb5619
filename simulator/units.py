"""Quantities with units: sizes, bandwidths and times, parsed into SI (bytes, bytes/s, seconds).

This is the only module that knows about unit suffixes (docs/design.md §3):

- sizes: ``4096``, ``4KB`` (10^3), ``4KiB`` (2^10), ``MB``/``MiB``, ``GB``/``GiB``, ``TB``/``TiB``;
- bandwidths: ``25GB/s`` (bytes, 10^9), ``200Gbps`` or ``200Gb/s`` (bits), also ``KB/s`` ... ``TB/s``;
- times: ``500ns``, ``1us`` (or ``1µs``), ``2ms``, ``1s``;
- compute rates: ``150TFLOP/s`` (also ``GFLOP/s``, ``PFLOP/s``; ``TFLOPS`` alike), or FLOP/s.

Bare numbers in the text of an input file (an XML attribute, a log's figure) are read here too,
each within bounds its reader states (:func:`whole_in`, :func:`finite_in`): no 30-digit integer
taken for a C ``int``, no figure that overflows to infinity, no ``nan``.

>>> parse_size("4KiB"), parse_bandwidth("200Gbps"), parse_time("500ns")
(4096, 25000000000.0, 5e-07)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from fractions import Fraction

from simulator.errors import UnitError, quoted

_LARGEST = Fraction(10) ** 30  # any quantity beyond this is a typo, not a machine

_NUMBER = r"(?P<num>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)"

_SIZE_FACTORS: dict[str, int] = {  # exact integers
    "": 1, "B": 1,
    "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
}
_BYTE_RATE_FACTORS: dict[str, float] = {
    "B/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
}
_BIT_RATE_FACTORS: dict[str, float] = {
    "bps": 1.0, "Kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, "Tbps": 1e12,
    "b/s": 1.0, "Kb/s": 1e3, "Mb/s": 1e6, "Gb/s": 1e9, "Tb/s": 1e12,
}
_FLOP_RATE_FACTORS: dict[str, float] = {
    "": 1.0, "FLOP/s": 1.0, "GFLOP/s": 1e9, "TFLOP/s": 1e12, "PFLOP/s": 1e15,
    "FLOPS": 1.0, "GFLOPS": 1e9, "TFLOPS": 1e12, "PFLOPS": 1e15,
}
_TIME_DIVISORS: dict[str, float] = {"ns": 1e9, "us": 1e6, "µs": 1e6, "ms": 1e3, "s": 1.0}

_QUANTITY = re.compile(_NUMBER + r"\s*(?P<unit>[A-Za-zµ/]*)$")


def _split(text: object, what: str, example: str) -> tuple[Fraction, str, str]:
    """The exact number and the unit of a quantity (a Fraction: '2.01KB' is exactly 2010 B)."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise UnitError(f"expected {what} like {quoted(example)}, got {quoted(text)}")
    raw = str(text).strip()
    match = _QUANTITY.match(raw)
    if not match or (isinstance(text, float) and not math.isfinite(text)):
        raise UnitError(f"expected {what} like {quoted(example)}, got {quoted(text)}")
    value = Fraction(match["num"])
    if value > _LARGEST:
        raise UnitError(f"expected {what} like {quoted(example)}, got {quoted(text)} (too large)")
    return value, match["num"], match["unit"]


def parse_size(text: object) -> int:
    """Bytes in a size such as ``4096``, ``4KB`` or ``4KiB``; must be a whole number of bytes."""
    value, digits, unit = _split(text, "a size", "4MiB")
    if unit not in _SIZE_FACTORS:
        raise UnitError(f"expected a size like '4MiB', "
                        f"got {quoted(text)}")
    if unit == "" and not re.fullmatch(r"[0-9]+", digits):
        raise UnitError(f"expected a whole number of bytes, got {quoted(text)}")
    size = value * _SIZE_FACTORS[unit]
    if size.denominator != 1:
        raise UnitError(f"expected a whole number of bytes, got {quoted(text)}")
    return int(size)


def parse_bandwidth(text: object) -> float:
    """Bytes per second in a bandwidth such as ``25GB/s`` (bytes) or ``200Gbps`` (bits)."""
    value, _, unit = _split(text, "a bandwidth", "25GB/s")
    if unit in _BYTE_RATE_FACTORS:
        rate = float(value * Fraction(_BYTE_RATE_FACTORS[unit]))
    elif unit in _BIT_RATE_FACTORS:
        rate = float(value * Fraction(_BIT_RATE_FACTORS[unit]) / 8)
    else:
        raise UnitError(f"expected a bandwidth like '25GB/s', got {quoted(text)}")
    if rate <= 0:
        raise UnitError(f"expected a positive bandwidth, got {quoted(text)}")
    return rate


def parse_time(text: object) -> float:
    """Seconds in a time such as ``500ns``, ``1us``, ``2ms`` or ``1s`` (a unit is required)."""
    value, _, unit = _split(text, "a time", "500ns")
    if unit not in _TIME_DIVISORS:
        raise UnitError(f"expected a time like '500ns', '1us', '2ms' or '1s', got {quoted(text)}")
    return float(value / Fraction(_TIME_DIVISORS[unit]))  # exact, then rounded once


def format_size(size_bytes: int) -> str:
    """Short label for a size, used in plots: binary-prefixed where a whole number of KiB, MiB
    or GiB says it (``64MiB``), else decimal-prefixed where that is shorter than bytes (``10MB``,
    ``1.5KB``), else bytes. :func:`parse_size` reads every label back exactly.

    >>> [format_size(s) for s in (1 << 30, 1536, 10**6, 10**7, 2_500_000_000, 1000, 999)]
    ['1GiB', '1536B', '1MB', '10MB', '2.5GB', '1KB', '999B']
    """
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size_bytes >= factor and size_bytes % factor == 0:
            return f"{size_bytes // factor}{unit}"
    label = f"{size_bytes}B"
    for unit, power in (("TB", 12), ("GB", 9), ("MB", 6), ("KB", 3)):
        if size_bytes >= 10**power:
            whole, rest = divmod(size_bytes, 10**power)
            decimal = f"{whole}.{rest:0{power}d}".rstrip("0").rstrip(".") + unit
            return decimal if len(decimal) < len(label) else label
    return label


def parse_flops(text: object) -> float:
    """FLOP per second in a compute rate such as ``150TFLOP/s`` or ``1.5e14``.

    >>> parse_flops("150TFLOP/s"), parse_flops(2e9)
    (150000000000000.0, 2000000000.0)
    """
    value, _, unit = _split(text, "a compute rate", "150TFLOP/s")
    if unit not in _FLOP_RATE_FACTORS or value <= 0:
        raise UnitError(f"expected a positive compute rate like '150TFLOP/s', got {quoted(text)}")
    return float(value * Fraction(_FLOP_RATE_FACTORS[unit]))


def parse_count(value: object) -> int:
    """A whole number ≥ 1 (booleans and strings refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UnitError(f"expected a whole number ≥ 1, got {quoted(value)}")
    return value


def parse_counts(value: object) -> tuple[int, ...]:
    """A non-empty list of whole numbers ≥ 1, such as a torus's ``dims: [4, 4, 8]``."""
    if not isinstance(value, list) or not value:
        raise UnitError(f"expected a list of whole numbers ≥ 1, got {quoted(value)}")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or item < 1:
            raise UnitError(f"expected a list of whole numbers ≥ 1, got {quoted(value)}")
    return tuple(value)


def parse_seed(value: object) -> int:
    """A whole number ≥ 0, such as a hash seed (booleans and strings refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UnitError(f"expected a whole number ≥ 0, got {quoted(value)}")
    return value


def parse_ratio(value: object) -> float:
    """A ratio ≥ 1 such as an oversubscription: a number (``3``, ``1.5``) or ``'3:1'``."""
    ratio: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        ratio = float(value)
    elif isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*:\s*([0-9]+(?:\.[0-9]+)?)\s*", value)
        if match and float(match[2]) > 0:
            ratio = float(match[1]) / float(match[2])
    if ratio is None or not math.isfinite(ratio) or ratio < 1:
        raise UnitError(f"expected a ratio ≥ 1 like 3 or '3:1', got {quoted(value)}")
    return ratio


def parse_file(value: object) -> str:
    """A file path (text; whether the file exists is checked where it is read)."""
    if not isinstance(value, str) or not value.strip():
        raise UnitError(f"expected a file path, got {quoted(value)}")
    return value


def parse_flag(value: object) -> bool:
    """``true`` or ``false``."""
    if not isinstance(value, bool):
        raise UnitError(f"expected true or false, got {quoted(value)}")
    return value


def _shortest(value: float, units: dict[str, float], parse: Callable[[str], float]) -> str:
    """``value`` in the largest unit that states it exactly (parsing the text gives it back)."""
    for unit, factor in sorted(units.items(), key=lambda item: -item[1]):
        scaled = value / factor
        text = f"{scaled:.15g}"
        if (scaled >= 1 or value == 0) and "e" not in text and parse(text + unit) == value:
            return text + unit
    return f"{quoted(value)}{next(unit for unit, factor in units.items() if factor == 1)}"


def format_bandwidth(bandwidth_Bps: float) -> str:
    """A bandwidth as text that :func:`parse_bandwidth` reads back exactly, e.g. ``'450GB/s'``.

    >>> format_bandwidth(450e9), format_bandwidth(1.1e12), format_bandwidth(63e9)
    ('450GB/s', '1.1TB/s', '63GB/s')
    """
    return _shortest(bandwidth_Bps, _BYTE_RATE_FACTORS, parse_bandwidth)


def format_time(time_s: float) -> str:
    """A time as text that :func:`parse_time` reads back exactly, e.g. ``'300ns'``.

    >>> format_time(3e-07), format_time(2.5e-05), format_time(0.0)
    ('300ns', '25us', '0s')
    """
    divisors = {unit: 1 / divisor for unit, divisor in _TIME_DIVISORS.items() if unit != "µs"}
    return _shortest(time_s, divisors, parse_time)


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
