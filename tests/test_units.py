"""Units of docs/design.md §3: sizes, bandwidths, times."""

import pytest

from simulator.errors import UnitError
from simulator.units import format_size, parse_bandwidth, parse_size, parse_time


@pytest.mark.parametrize("text, expected", [
    (4096, 4096), ("4096", 4096), ("4KB", 4000), ("4KiB", 4096), ("1MiB", 1 << 20),
    ("2MB", 2_000_000), ("1GiB", 1 << 30), ("1.5KiB", 1536), ("3GB", 3 * 10**9), ("8B", 8),
    (" 64 MiB ", 64 << 20),
])
def test_sizes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("25GB/s", 25e9), ("200Gbps", 25e9), ("200Gb/s", 25e9), ("400Gbps", 50e9),
    ("1.5TB/s", 1.5e12), ("100MB/s", 1e8), ("8bps", 1.0),
])
def test_bandwidths(text, expected):
    assert parse_bandwidth(text) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("text, expected", [
    ("500ns", 5e-7), ("1us", 1e-6), ("1µs", 1e-6), ("2ms", 2e-3), ("1s", 1.0), ("0ns", 0.0),
])
def test_times(text, expected):
    assert parse_time(text) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("parser, text, message", [
    (parse_size, "4kb", "expected a size like '4MiB', got '4kb'"),
    (parse_size, "1.5B", "expected a whole number of bytes, got '1.5B'"),
    (parse_size, "1.5", "expected a whole number of bytes, got '1.5'"),
    (parse_size, True, "expected a size like '4MiB', got True"),
    (parse_size, "-4KiB", "expected a size like '4MiB', got '-4KiB'"),
    (parse_bandwidth, "25", "expected a bandwidth like '25GB/s', got '25'"),
    (parse_bandwidth, "25GB", "expected a bandwidth like '25GB/s', got '25GB'"),
    (parse_bandwidth, "0GB/s", "expected a positive bandwidth, got '0GB/s'"),
    (parse_time, "500", "expected a time like '500ns', '1us', '2ms' or '1s', got '500'"),
    (parse_time, "2 hours", "expected a time like '500ns', '1us', '2ms' or '1s', got '2 hours'"),
    (parse_time, "fast", "expected a time like '500ns', got 'fast'"),
    (parse_time, None, "expected a time like '500ns', got None"),
])
def test_bad_quantities_say_what_was_expected(parser, text, message):
    with pytest.raises(UnitError) as error:
        parser(text)
    assert str(error.value) == message


@pytest.mark.parametrize("size, label", [(1 << 30, "1GiB"), (3 << 20, "3MiB"), (1536, "1536B"),
                                         (4096, "4KiB"), (10**6, "1MB"), (10**7, "10MB"),
                                         (1_500_000, "1.5MB"), (2_048_000, "2000KiB"),
                                         (123_456_789, "123456789B")])
def test_format_size(size, label):
    assert format_size(size) == label
    assert parse_size(label) == size  # every label reads back exactly


@pytest.mark.parametrize("text, expected", [("2.01KB", 2010), ("1.07GB", 1_070_000_000),
                                            (9007199254740993, 9007199254740993)])
def test_sizes_are_parsed_exactly(text, expected):
    assert parse_size(text) == expected
