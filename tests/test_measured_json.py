"""nccl-tests' ``-J`` JSON read as its text log is: the same rows, the same calibration and the
same reference figure's table, and a one-line error naming the JSON path of what is wrong.

``tests/data/nccl-tests-a100.json`` is written by hand as nccl-tests writes ``-J`` (NVIDIA/
nccl-tests ``src/util.cu`` at a0b82b22, JSON_FILE_VERSION 3: one line, numbers as ``%lf``, the
root as ``%6i`` in a string, flags as the strings "true"/"false", ``/`` escaped, one device as
a single process reports it), holding the 34 rows of ``docs/reference/nccl-tests-a100.log``
(8 × A100, microsoft/superbenchmark); that log states no NCCL version, so ``nccl_version`` is 0,
and the times, argv and environment are made up.
"""

import json
import re

import pytest

from simulator import simulate
from simulator.cli import main
from simulator.errors import InputError
from simulator.measured.nccl_tests import load_measurements, parse_nccl_tests_json
from simulator.output.writers import write_results
from simulator.scenario import scenario_from_dict
from simulator.settings import RunSettings
from tests.conftest import REPO

JSON = REPO / "tests" / "data" / "nccl-tests-a100.json"
LOG = REPO / "docs" / "reference" / "nccl-tests-a100.log"


def numbers(series):
    return [(m.size_bytes, m.time_us, m.algbw_GBps, m.busbw_GBps, m.in_place_time_us)
            for m in series.rows]


def test_the_json_twin_of_the_a100_log_gives_its_rows():
    text, twin = load_measurements(LOG), load_measurements(JSON)
    assert numbers(twin) == numbers(text)
    assert len(twin.rows) == 34
    assert numbers(twin)[-1] == (8 << 30, 63896.0, 134.44, 235.26, 63959.0)
    assert (twin.dtype, twin.op, twin.test) == ("float", "sum", "all_reduce_perf")
    assert [m.record for m in twin.rows] == list(range(34))
    assert {m.line for m in twin.rows} == {None}


def test_a_json_file_renamed_by_nccl_tests_is_still_json(tmp_path):
    # -J a100.json writes a100.json.0 when a100.json exists: the text's opening brace says JSON
    renamed = tmp_path / "a100.json.0"
    renamed.write_bytes(JSON.read_bytes())
    assert numbers(load_measurements(renamed)) == numbers(load_measurements(LOG))


def test_calibrate_reads_the_json_as_the_log(tmp_path, capsys):
    outputs = {}
    for name, log in (("log", LOG), ("json", JSON)):
        output = tmp_path / f"{name}.yaml"
        assert main(["calibrate", str(log), "--preset", "dgx_a100", "--output", str(output)]) == 0
        printed = capsys.readouterr().out
        outputs[name] = (printed.replace(str(log), "LOG").replace(str(output), "OUT"),
                         output.read_text().replace(str(log), "LOG"))
    assert outputs["json"] == outputs["log"]
    assert "# geometric mean |error|: before 43.9 %, after 7.8 %" in outputs["json"][0]


@pytest.fixture(scope="module")
def a100_results(tmp_path_factory):
    """A results file of one DGX A100 at sizes the log measured, written as run writes it."""
    scenario = scenario_from_dict({
        "name": "dgx-a100", "topology": {"preset": "dgx_a100"}, "algorithms": ["ring"],
        "sizes": ["64KiB", "1MiB", "16MiB", "256MiB"], "verify": False})
    out = tmp_path_factory.mktemp("a100")
    write_results(simulate(scenario), scenario, RunSettings(), out, ("csv", "json"))
    return out / "dgx-a100.csv"


def test_plot_reference_reads_the_json_as_the_log(a100_results, tmp_path, capsys):
    printed = {}
    for name, log in (("log", LOG), ("json", JSON)):
        output = tmp_path / name
        assert main(["plot", str(a100_results), "--reference", str(log), "--output",
                     str(output)]) == 0
        printed[name] = (capsys.readouterr().out.replace(str(log), "LOG")
                         .replace(str(output), "OUT"))
        assert (output / "dgx-a100-reference.png").read_bytes()[:4] == b"\x89PNG"
    assert printed["json"] == printed["log"]
    assert re.search(r"\n\s+268435456 .*", printed["json"])  # a size both have, in the table


def test_a_json_of_another_collective_is_refused_by_calibrate(tmp_path, capsys):
    document = json.loads(JSON.read_text())
    document["args"][0] = "/opt/nccl-tests/build/all_gather_perf"
    log = tmp_path / "ag.json"
    log.write_text(json.dumps(document))
    assert main(["calibrate", str(log), "--preset", "dgx_a100", "--output",
                 str(tmp_path / "out.yaml")]) == 2
    assert capsys.readouterr().err == (f"{log}: measures all_gather_perf, but calibrate fits "
                                       "allreduce: give an all_reduce_perf log\n")
    assert not (tmp_path / "out.yaml").exists()


def edited(change):
    """The twin's JSON text with ``change(document)`` applied (compact, as nccl-tests writes)."""
    document = json.loads(JSON.read_text())
    change(document)
    return json.dumps(document, separators=(",", ":"))


def set_in(path, value):
    def change(document):
        *parents, last = path
        target = document
        for key in parents:
            target = target[key]
        target[last] = value
    return change


def delete(path):
    def change(document):
        *parents, last = path
        target = document
        for key in parents:
            target = target[key]
        del target[last]
    return change


TEXT = JSON.read_text()
STOPPED = TEXT[:TEXT.index(',{"size":16384')]
"""The file as a run killed after its 8 KiB row leaves it: no list nor object closed."""


@pytest.mark.parametrize("text, message", [
    (STOPPED, f"line 1 column {len(STOPPED) + 1}: expected JSON as nccl-tests -J writes it: "
              "Expecting ',' delimiter"),
    (TEXT.replace('"time":8159.500000', '"time":inf'),
     f"line 1 column {TEXT.index('8159.500000') + 1}: expected JSON as nccl-tests -J writes it: "
     "an infinite value written as inf, which JSON has no word for and no machine measures"),
    ("[" * 100_000 + "]" * 100_000, "expected JSON as nccl-tests -J writes it: nested too deeply "
                                    "to read"),
    ("[1, 2]", "expected JSON as nccl-tests -J writes it: an object with a results list, got a "
               "list"),
    (edited(delete(["results"])), "results: expected the list of results nccl-tests -J writes, "
                                  "got nothing"),
    (edited(set_in(["results"], {"size": 8})), "results: expected the list of results "
                                               "nccl-tests -J writes, got an object"),
    (edited(set_in(["results"], [])), "results: expected at least one result, got an empty list"),
    (edited(set_in(["results", 2], 17)), "results[2]: expected an object (size, type, redop, "
                                         "out_of_place, in_place), got a number"),
    (edited(set_in(["results", 3, "out_of_place", "time"], "nan")),
     "results[3].out_of_place.time: expected a time (a number), got 'nan'"),
    (edited(set_in(["results", 3, "out_of_place", "time"], 0)),
     "results[3].out_of_place.time: expected a time above 0 us, got 0.0"),
    (edited(set_in(["results", 3, "in_place", "time"], -2.5)),
     "results[3].in_place.time: expected a time above 0 us, got -2.5"),
    (edited(set_in(["results", 3, "out_of_place", "bus_bw"], -1)),
     "results[3].out_of_place.bus_bw: expected a bandwidth of 0 GB/s or more, got -1.0"),
    (edited(set_in(["results", 3, "out_of_place", "alg_bw"], True)),
     "results[3].out_of_place.alg_bw: expected a bandwidth (a number), got a boolean"),
    (edited(delete(["results", 3, "out_of_place", "bus_bw"])),
     "results[3].out_of_place.bus_bw: expected a bandwidth (a number), got nothing"),
    (edited(set_in(["results", 3, "out_of_place"], None)),
     "results[3].out_of_place: expected an object with time, alg_bw and bus_bw, got null"),
    (edited(lambda d: d["results"][3]["out_of_place"].update(
        cpu_time=d["results"][3]["out_of_place"].pop("time"))),
     "results[3].out_of_place: expected the collective's time (time), got cpu_time: this file "
     "was written with -C 1, which times the CPU; rerun without it"),
    (edited(set_in(["results", 5, "size"], 2 << 40)),
     "results[5].size: expected a size from 0 bytes to 1 TiB, got 2199023255552"),
    (edited(set_in(["results", 5, "size"], 1024.0)),
     "results[5].size: expected a whole number of bytes, got 1024.0"),
    (edited(set_in(["results", 5, "size"], "1024")),
     "results[5].size: expected a whole number of bytes, got '1024'"),
    (edited(set_in(["results", 7, "type"], "half")),
     "results[7].type: half/sum after float/sum (results[0]); expected one type and operator "
     "per file"),
    (edited(set_in(["results", 7, "redop"], "max")),
     "results[7].redop: float/max after float/sum (results[0]); expected one type and operator "
     "per file"),
    (edited(delete(["results", 0, "type"])),
     "results[0].type: expected a name such as 'float' or 'sum', got nothing"),
])
def test_what_is_not_an_nccl_tests_json_is_one_line_naming_its_path(text, message):
    with pytest.raises(InputError) as error:
        parse_nccl_tests_json(text, "m.json")
    assert [str(p) for p in error.value.problems] == [f"m.json: {message}"]


def test_a_bad_json_reference_is_exit_2_and_nothing_drawn(a100_results, tmp_path, capsys):
    log = tmp_path / "m.json"
    log.write_text(edited(set_in(["results", 3, "out_of_place", "time"], "nan")))
    assert main(["plot", str(a100_results), "--reference", str(log), "--output",
                 str(tmp_path / "figures")]) == 2
    assert capsys.readouterr().err == (f"{log}: results[3].out_of_place.time: expected a time "
                                       "(a number), got 'nan'\n")
    assert not (tmp_path / "figures").exists()
