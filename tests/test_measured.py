"""Reading measured results: nccl-tests output of both column layouts, the CSV form, and the
one-line error for each kind of log that is not one collective's sweep."""

from pathlib import Path

import pytest

from simulator.errors import InputError
from simulator.measured.nccl_tests import load_measurements, parse_nccl_tests

OLD = """\
# nThread 1 nGpus 8 minBytes 1 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 validation: 0
#
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
hostname:3442:3442 [0] NCCL INFO Launch mode Parallel
  1073741824     268435456   float     sum   8159.5  131.59  230.29    N/A   8176.5  131.32  229.81    N/A
  8589934592    2147483648   float     sum    63896  134.44  235.26    N/A    63959  134.30  235.03    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 68.4048
"""
"""Two rows of 8 × A100-SXM4-40GB, the format of about 2019-2021 (no root, ``error``):
microsoft/superbenchmark tests/data/nccl_allreduce.log @ f1f5c72f."""

NEW = """\
# nccl-tests version 2.20.0 (b4d5bee) nccl-headers=23102 nccl-library=23102
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
[1,0]<stdout>:           8             2     float     sum      -1    135.8    0.00    0.00      0    123.5    0.00    0.00      0
NCCL version 2.21.5+cuda12.4
  1073741824     268435456     float     sum      -1   6759.0  158.86  297.86      0   6737.4  159.37  298.82      0
# Out of bounds values : 0 OK
"""
"""Two rows of 2 × 8 H100 (GCP A3 Mega), the format of 2022 on (``root``, ``#wrong``):
lessizzmore/create-a3mega-ztan-fork ztan-NCCL-test-result @ 02dd8f45, under the 2.20.0 header
lines, with an Open MPI prefix and an NCCL version line added as real logs have them."""


def test_the_old_layout():
    series = parse_nccl_tests(OLD, "a100.log")
    assert [(r.size_bytes, r.time_us, r.algbw_GBps, r.busbw_GBps, r.in_place_time_us, r.line)
            for r in series.rows] == [(1 << 30, 8159.5, 131.59, 230.29, 8176.5, 7),
                                      (8 << 30, 63896.0, 134.44, 235.26, 63959.0, 8)]
    assert (series.dtype, series.op, series.test) == ("float", "sum", None)


def test_the_new_layout_with_prefixes_and_nccl_lines():
    series = parse_nccl_tests(NEW, "h100.log")
    assert [(r.size_bytes, r.time_us, r.busbw_GBps, r.in_place_time_us) for r in series.rows] == [
        (8, 135.8, 0.0, 123.5), (1 << 30, 6759.0, 297.86, 6737.4)]
    assert series.test == "all_reduce_perf"


def test_the_csv_form(tmp_path):
    path = tmp_path / "h200.csv"
    path.write_text("# a comment\nsize_bytes,time_us,busbw_GBps\n32768,17.92,3.2\n1073741824,"
                    "4049.67,464.0\n")
    series = load_measurements(path)
    assert [(r.size_bytes, r.time_us, r.busbw_GBps, r.line) for r in series.rows] == [
        (32768, 17.92, 3.2, 3), (1 << 30, 4049.67, 464.0, 4)]
    assert series.rows[1].algbw_GBps == pytest.approx((1 << 30) / 4049.67 / 1e3, rel=1e-12)


def test_the_shipped_h200_data_reads():
    path = Path(__file__).resolve().parent.parent / "docs" / "reference" / "nccl-tests-h200.csv"
    series = load_measurements(path)
    assert len(series.rows) == 20
    assert (series.rows[0].size_bytes, series.rows[-1].busbw_GBps) == (32768, 480.7)


def test_the_shipped_two_node_data_reads_with_its_in_place_times():
    path = (Path(__file__).resolve().parent.parent / "docs" / "reference"
            / "nccl-tests-h100-2node-ib.csv")
    series = load_measurements(path)
    assert len(series.rows) == 32
    assert [(r.size_bytes, r.time_us, r.in_place_time_us) for r in series.rows[:2]] == [
        (8, 68.52, 24.70), (16, 24.96, 24.93)]
    assert (series.rows[-1].size_bytes, series.rows[-1].busbw_GBps) == (16 << 30, 469.21)


@pytest.mark.parametrize("text, message", [
    ("hello\nworld\n", "line 1: expected nccl-tests output (a '#  size  count  type ...' header "
                       "line), found none"),
    (OLD.split("hostname")[0], "line 4: a header but no data rows"),
    (OLD.replace("   N/A\n  8589934592", "\n  8589934592", 1),
     "line 7: expected 12 columns as in the header at line 4, got 11"),
    (OLD.replace("2147483648   float", "2147483648    half", 1),
     "line 8: half/sum rows after float/sum rows (line 7); expected one type and operator per log"),
    (NEW + "# Collective test starting: all_gather_perf\n",
     "line 12: a second collective (all_gather_perf) after all_reduce_perf; expected one "
     "collective per log"),
    ("#  bytes N type op time algbw busbw res\n1048576 262144 float sum 2.059 0.51 0.89 0\n",
     "line 1: the nccl-tests format of 2019 and before (time in ms) is not supported; rerun "
     "with nccl-tests 2.x"),
])
def test_what_is_not_one_sweep_is_an_error_naming_the_line(text, message):
    with pytest.raises(InputError) as error:
        parse_nccl_tests(text, "x.log")
    assert [str(p) for p in error.value.problems] == [f"x.log: {message}"]


@pytest.mark.parametrize("text, message", [
    ("size,time_us\n8,1.0\n", "line 1: expected columns size_bytes, time_us and busbw_GBps; "
                              "missing busbw_GBps, size_bytes"),
    ("size_bytes,time_us,busbw_GBps\n8,fast,1\n", "line 2: expected numbers in size_bytes, "
                                                 "time_us and busbw_GBps"),
    ("size_bytes,time_us,busbw_GBps\n8,0,1\n", "line 2: expected a positive size and time, got 8 "
                                              "bytes in 0.0 us"),
    ("# only comments\n", "line 1: expected a CSV header line, found none"),
])
def test_bad_csv_is_an_error_naming_the_line(tmp_path, text, message):
    path = tmp_path / "m.csv"
    path.write_text(text)
    with pytest.raises(InputError) as error:
        load_measurements(path)
    assert [str(p) for p in error.value.problems] == [f"{path}: {message}"]


@pytest.mark.parametrize(("row", "message"), [
    ("  1073741824  268435456  float  sum  -1  nan  158.86  297.86  0  6737.4  159.37  298.82  0",
     "expected times above 0 us, got nan, 6737.4"),
    ("  1073741824  268435456  float  sum  -1  0  158.86  297.86  0  6737.4  159.37  298.82  0",
     "expected times above 0 us, got 0.0, 6737.4"),
    ("  1073741824  268435456  float  sum  -1  6759  inf  297.86  0  6737.4  159.37  298.82  0",
     "expected bandwidths of 0 GB/s or more, got algbw inf and busbw 297.86"),
    ("  1000000000000000000000000000000  1  float  sum  -1  6759  158.86  297.86  0  6737.4  "
     "159.37  298.82  0",
     "expected a size from 0 bytes to 1 TiB, got 1000000000000000000000000000000"),
])
def test_values_no_machine_measures_are_one_line_errors(row, message):
    text = NEW.replace(NEW.splitlines()[9], row)
    with pytest.raises(InputError) as error:
        parse_nccl_tests(text, "h100.log")
    assert [str(p) for p in error.value.problems] == [f"h100.log: line 10: {message}"]


def test_a_csv_with_negative_bandwidth_is_an_error(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("size_bytes,time_us,busbw_GBps\n1024,10.5,-3\n")
    with pytest.raises(InputError) as error:
        load_measurements(path)
    assert [str(p) for p in error.value.problems] == [
        f"{path}: line 2: expected bandwidths of 0 GB/s or more, got algbw 0.09752380952380951 "
        "and busbw -3.0"]
