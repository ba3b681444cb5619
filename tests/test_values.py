"""One line for every bad value (issue 40, items 4 and 6): an error quotes at most 80 characters
of what it got, a fault's factor is bounded, control characters are refused, a training size is
refused naming the field the file has, and faults strike a training step at every layout."""

from __future__ import annotations

import pytest

from simulator import simulate
from simulator.cli import main
from simulator.errors import MAX_LINE_CHARS, InputError, Problem, quoted
from simulator.measured.nccl_tests import parse_nccl_tests
from simulator.model.faults import LinkDegraded, SlowGpu
from simulator.model.nccl_view import read_log
from simulator.scenario import scenario_from_dict
from simulator.trainer import train
from tests.conftest import REPO, switch_graphml
from tests.test_measured import NEW

H100_XML = REPO / "tests" / "data" / "nccl" / "dgx_h100.xml"
SWITCH = "{kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}"
ALGO_LIST = ("expected a list as NCCL_ALGO takes it: Tree, Ring, CollNetDirect, CollNetChain, "
             "NVLS, NVLSTree, PAT separated by commas (a leading ^: all but those; "
             "COLLECTIVE:LIST after a ; for one collective)")


def run(tmp_path, capsys, text: str) -> tuple[int, list[str]]:
    """``run`` of the scenario ``text`` (written as s.yaml in ``tmp_path``): its exit code and
    its stderr lines; nothing may be written on a refusal."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text, encoding="utf-8")
    code = main(["run", str(scenario), "--output", str(tmp_path / "out"), "--no-plot"])
    if code == 2:
        assert not (tmp_path / "out").exists()
    return code, capsys.readouterr().err.splitlines()


def test_a_short_value_quotes_as_repr_and_a_long_one_is_cut_with_its_length():
    assert quoted("ring") == "'ring'"
    assert quoted("x" * 80) == repr("x" * 80)
    assert quoted(2.2999) == "2.2999"
    assert quoted(["a", 1]) == "['a', 1]"
    assert quoted("x" * 81) == f"'{'x' * 79}… (81 characters)"
    assert quoted("\x00" * 30) == "'" + "\\x00" * 19 + "\\x0… (30 characters)"
    assert quoted(list(range(100))) == repr(list(range(100)))[:80] + "…"


def test_a_problem_line_is_cut_at_the_line_limit():
    line = str(Problem("f.yaml", "name", "got " + "y" * 5000))
    assert len(line) == MAX_LINE_CHARS
    assert line == ("f.yaml: name: got " + "y" * 5000)[:MAX_LINE_CHARS - 1] + "…"
    assert str(Problem("f.yaml", "name", "short")) == "f.yaml: name: short"


@pytest.mark.parametrize(("attribute", "value", "said"), [
    ('vendor="GenuineIntel"', "A" * 100_000,
     f"<cpu> at line 9: expected vendor GenuineIntel or AuthenticAMD, got "
     f"'{'A' * 79}… (100,000 characters)"),
    ('arch="x86_64"', "B" * 15_000_000,
     f"<cpu> at line 9: expected arch x86_64 or arm64 (the CPUs NCCL's model covers), got "
     f"'{'B' * 79}… (15,000,000 characters)"),
])
def test_a_huge_topology_attribute_comes_back_as_80_characters(tmp_path, capsys, attribute,
                                                                 value, said):
    xml = tmp_path / "topo.xml"
    name = attribute.partition("=")[0]
    xml.write_text(H100_XML.read_text(encoding="utf-8").replace(attribute, f'{name}="{value}"', 1),
                   encoding="utf-8")
    code, lines = run(tmp_path, capsys, "topology: {nccl_xml: topo.xml, nodes: 2}\n"
                                        "algorithms: [ring]\nsizes: [1MiB]\n")
    assert (code, lines) == (2, [f"{xml}: {said}"])


def test_a_huge_nccl_algo_is_quoted_short_twice(tmp_path, capsys):
    code, lines = run(tmp_path, capsys, "topology: {preset: dgx_h100}\nalgorithms: auto\n"
                                        f"sizes: [1MiB]\nnccl: {{algo: {'R' * 400_000}}}\n")
    cut = f"'{'R' * 79}… (400,000 characters)"
    assert (code, lines) == (2, [f"{tmp_path / 's.yaml'}: nccl.algo: {ALGO_LIST}, got {cut}: "
                                 f"no algorithm {cut}"])


@pytest.mark.parametrize(("version", "said"), [
    ("'.'", "'.'"), ("'1.2.3'", "'1.2.3'"), ("2.2999", "2.2999"), (".inf", "inf"),
    (".nan", "nan"), ("'" + "2" * 400_000 + "'", f"'{'2' * 79}… (400,000 characters)"),
])
def test_a_version_not_in_the_known_list_is_one_line(tmp_path, capsys, version, said):
    code, lines = run(tmp_path, capsys, "topology: {preset: dgx_h100}\nalgorithms: auto\n"
                                        f"sizes: [1MiB]\nnccl: {{version: {version}}}\n")
    assert (code, lines) == (2, [
        f"{tmp_path / 's.yaml'}: nccl.version: expected the NCCL whose tuner picks: 2.26, 2.30, "
        f"2.31 (2.26: NCCL 2.26-2.27; 2.30: 2.30.x; 2.31: the 2.31.0a7 dev source), got {said}"])


def test_a_30_digit_sm_is_refused(tmp_path, capsys):
    xml = tmp_path / "topo.xml"
    xml.write_text(H100_XML.read_text(encoding="utf-8").replace('sm="90"', f'sm="{"9" * 30}"', 1),
                   encoding="utf-8")
    code, lines = run(tmp_path, capsys, "topology: {nccl_xml: topo.xml}\nalgorithms: [ring]\n"
                                        "sizes: [1MiB]\n")
    assert (code, lines) == (2, [f"{xml}: <gpu> at line 17: expected sm to be a whole number "
                                 f"from 1 to 2147483647, got '{'9' * 30}'"])


@pytest.mark.parametrize(("text", "said"), [
    (f'name: "a\\0b"\ntopology: {SWITCH}\nalgorithms: [ring]\nsizes: [1MiB]\n',
     "line 1: expected text without control characters, got '\\x00' at character 2 of 'a\\x00b'"),
    (f'topology: {SWITCH}\nalgorithms: ["ring\\e"]\nsizes: [1MiB]\n',
     "line 2: expected text without control characters, got '\\x1b' at character 5 of "
     "'ring\\x1b'"),
    (f'topology: {SWITCH}\nalgorithms: [ring]\nsizes: [1MiB]\n'
     'faults: [{kind: link_down, link: ["gpu1\\x9b", switch]}]\n',
     "line 4: expected text without control characters, got '\\x9b' at character 5 of "
     "'gpu1\\x9b'"),
])
def test_a_control_character_in_a_scenario_is_refused_naming_its_line(tmp_path, capsys, text,
                                                                       said):
    code, lines = run(tmp_path, capsys, text)
    assert (code, lines) == (2, [f"{tmp_path / 's.yaml'}: {said}"])


def test_a_control_character_in_a_topology_attribute_is_refused(tmp_path, capsys):
    xml = tmp_path / "topo.xml"
    xml.write_text(H100_XML.read_text(encoding="utf-8").replace(
        'vendor="GenuineIntel"', 'vendor="Genuine\x9bIntel"', 1), encoding="utf-8")
    code, lines = run(tmp_path, capsys, "topology: {nccl_xml: topo.xml}\nalgorithms: [ring]\n"
                                        "sizes: [1MiB]\n")
    assert (code, lines) == (2, [f"{xml}: <cpu> at line 9: vendor: expected text without "
                                 "control characters, got '\\x9b' at character 8 of "
                                 "'Genuine\\x9bIntel'"])


@pytest.mark.parametrize(("fault", "said"), [
    ("{kind: link_degraded, link: [gpu1, switch], factor: 5.0e-324}", "5e-324"),
    ("{kind: link_degraded, link: [gpu1, switch], factor: 9.9e-7}", "9.9e-07"),
])
def test_a_factor_below_a_millionth_is_refused_not_a_deadlock(tmp_path, capsys, fault, said):
    code, lines = run(tmp_path, capsys, f"topology: {SWITCH}\nalgorithms: [ring]\n"
                                        f"sizes: [1MiB]\nfaults: [{fault}]\n")
    assert (code, lines) == (2, [
        f"{tmp_path / 's.yaml'}: faults[0].factor: expected a factor of at least 1e-06 (a "
        f"millionth of the bandwidth; a link that slow is down: link_down), got {said}"])


def test_a_factor_of_a_millionth_runs_and_the_api_refuses_less():
    assert LinkDegraded(("gpu1", "switch"), 0.0, 1e-6).factor == 1e-6
    with pytest.raises(ValueError, match=r"^expected a factor of at least 1e-06 .* got 5e-324$"):
        LinkDegraded(("gpu1", "switch"), 0.0, 5e-324)
    with pytest.raises(ValueError, match=r"^expected a factor of at least 1e-06 .* got 1e-300$"):
        SlowGpu(1, 1e-300)


HUGE_LAYER = """\
topology: {kind: switch, ranks: 2, bandwidth: 25GB/s, latency: 1us}
algorithms: [ring]
training:
  model:
    name: mlp
    layers:
      - {name: fc1, params: {fc1.weight: [1000000000000, 1200000000000]}, flops: 1.0e6}
  batch: 32
  optimizer: 1ms
"""


def test_a_training_size_beyond_a_buffer_names_the_model_not_sizes(tmp_path, capsys):
    code, lines = run(tmp_path, capsys, HUGE_LAYER)
    assert code == 2
    assert lines[-1] == (
        f"{tmp_path / 's.yaml'}: training.model: expected gradients of at most 1 TiB a bucket "
        "(simulator/limits.py), got parameter 'fc1.weight' of "
        "1,200,000,000,000,000,000,000,000 float32 elements "
        "(4,800,000,000,000,000,000,000,000 bytes)")


def test_a_bucket_cap_beyond_a_buffer_names_the_cap(tmp_path, capsys):
    two = HUGE_LAYER.replace("[1000000000000, 1200000000000]}", "[100000000000, 2]}").replace(
        "      - {name: fc1", "      - {name: fc0, params: {fc0.weight: [100000000000, 2]}}\n"
                             "      - {name: fc1")
    code, lines = run(tmp_path, capsys, two + "  bucket_cap: 1TiB\n  first_bucket: 1TiB\n")
    assert code == 2
    assert lines[-1] == (
        f"{tmp_path / 's.yaml'}: training.bucket_cap: expected gradients of at most 1 TiB a "
        "bucket (simulator/limits.py), got a bucket of 1,600,000,000,000 bytes; use a smaller "
        "bucket_cap")


def test_a_nic_that_fails_1ms_into_a_resnet50_step_on_two_dgx_h100s_slows_it():
    # issue 40 item 6: once "Cannot cast ufunc 'add' output from dtype('float64') to
    # dtype('int64')"; the NIC's rail leaves through another NIC for the last bucket.
    step = train({"name": "r", "topology": {"preset": "dgx_h100", "nodes": 2},
                  "algorithms": "auto",
                  "faults": [{"kind": "nic_down", "nic": "n1.nic0", "at": "1ms"}],
                  "training": {"model": "resnet50", "batch": 32, "gpu": "h100",
                               "optimizer": "momentum"}}).step
    assert step.verified
    assert step.step_s > step.healthy_step_s
    assert [b.faults for b in step.buckets][-1] == "nic_down n1.nic0 at 0s"


@pytest.mark.parametrize(("fault", "slower"), [
    ({"kind": "straggler", "rank": 3, "delay": "50us"}, "by_delay"),
    ({"kind": "link_degraded", "link": ["n0.nic0", "leaf"], "at": "1ms", "factor": 0.1}, "yes"),
    ({"kind": "nic_down", "nic": "n0.nic0", "at": "1ms"}, "no_faster"),
])
def test_faults_strike_a_parallel_layout_step(fault, slower):
    # TP 8 inside each of two DGX H100s, DP 2 across them on the NICs.
    step = train({"name": "p", "topology": {"preset": "dgx_h100", "nodes": 2},
                  "algorithms": "auto", "faults": [fault],
                  "training": {"model": "llama_7b", "batch": 4, "gpu": "h100",
                               "optimizer": "adam",
                               "parallelism": {"tp": 8, "microbatches": 4}}}).step
    if slower == "by_delay":
        assert step.step_s == pytest.approx(step.healthy_step_s + 50e-6, rel=1e-9)
    elif slower == "yes":
        assert step.step_s > 2 * step.healthy_step_s
    else:
        assert step.step_s >= step.healthy_step_s


def test_quoted_values_keep_an_input_error_to_one_short_line():
    error = InputError([Problem("f.yaml", "name", f"got {quoted('n' * 10_000)}")])
    assert str(error) == f"f.yaml: name: got '{'n' * 79}… (10,000 characters)"


@pytest.mark.parametrize(("where", "said"), [
    ("6759.0", "'\\x00' at character 56"),  # inside a number: once "expected numeric columns"
    ("\n", "'\\x00' at character 115"),  # after the last column: once read as if absent
])
def test_a_nul_in_an_nccl_tests_row_is_refused_naming_the_line(where, said):
    row = NEW.splitlines()[9]
    bad = row.replace(where, where[:2] + "\x00" + where[2:]) if where != "\n" else row + "\x00"
    with pytest.raises(InputError) as error:
        parse_nccl_tests(NEW.replace(row, bad), "h100.log")
    assert [str(p) for p in error.value.problems] == [
        f"h100.log: line 10: expected text without control characters, got {said} of "
        f"{quoted(bad.strip())}"]


@pytest.mark.parametrize(("value", "said"), [
    ("9" * 30, f"expected nchannels a whole number ≥ 1 and at most 2147483647 (a C int), got "
               f"'{'9' * 30}'"),
    ("2147483648", "expected nchannels a whole number ≥ 1 and at most 2147483647 (a C int), got "
                   "'2147483648'"),
    ("0", "expected nchannels a whole number ≥ 1, got '0'"),
])
def test_an_msccl_count_is_a_c_int(tmp_path, capsys, value, said):
    text = (REPO / "scenarios" / "msccl" / "allpairs_8.xml").read_text(encoding="utf-8")
    bad = tmp_path / "bad.xml"
    bad.write_text(text.replace('nchannels="1"', f'nchannels="{value}"', 1), encoding="utf-8")
    code, lines = run(tmp_path, capsys, f"topology: {SWITCH.replace('4', '8', 1)}\n"
                                        "algorithms: ['msccl:bad.xml']\nsizes: [4096]\n")
    assert (code, lines) == (2, [f"{tmp_path / 's.yaml'}: algorithms[0]: {bad}: line 1: "
                                 f"<algo name=\"allpairs\">: {said}"])


def test_a_tuning_time_that_overflows_is_refused_naming_the_line(tmp_path):
    log = tmp_path / "nccl.log"
    text = (REPO / "tests" / "data" / "nccl-info-h100x2-2.31.log").read_text(encoding="utf-8")
    log.write_text(text.replace("timeUs = 61.163963", f"timeUs = {'6' * 400}.0", 1),
                   encoding="utf-8")
    with pytest.raises(InputError) as error:
        read_log(log)
    assert [str(p) for p in error.value.problems] == [
        f"{log}: line 15: expected a finite time in us, got '{'6' * 79}… (402 characters)"]


def test_a_control_character_in_a_graphml_name_is_refused(tmp_path, capsys):
    switch_graphml(tmp_path / "fabric.graphml", ranks=2, gpu="gpu\x9b{}")
    code, lines = run(tmp_path, capsys, "topology: {kind: graph, file: fabric.graphml}\n"
                                        "algorithms: [ring]\nsizes: [1MiB]\n")
    assert (code, lines) == (2, [
        f"{tmp_path / 's.yaml'}: topology.file: {tmp_path / 'fabric.graphml'}: <node> at line 11: "
        "id: expected text without control characters, got '\\x9b' at character 4 of "
        "'gpu\\x9b0'"])


def test_a_layout_step_beyond_a_buffer_names_the_model_not_a_memory_error(tmp_path, capsys):
    # once a MemoryError from the collectives' planning of a 3.3e16-byte TP allreduce
    code, lines = run(tmp_path, capsys, """\
topology: {preset: dgx_h100}
algorithms: auto
training:
  model:
    name: gpt
    transformer: {layers: 2, hidden: 1000000000000, heads: 8, vocab: 51200, sequence: 2048}
  batch: 8
  parallelism: {tp: 8, microbatches: 1}
""")
    assert code == 2
    assert lines[-1] == (
        f"{tmp_path / 's.yaml'}: training.model: expected communications of at most 1 TiB a "
        "rank (simulator/limits.py), got 'forward 0 tp allreduce' of 32,768,000,000,000,000 "
        "bytes")


@pytest.mark.parametrize(("given", "field"), [
    ({"bucket_cap": 4_800_000_000_000_000_000_000_000}, "training.bucket_cap"),
    ({"first_bucket": 4_800_000_000_000_000_000_000_000}, "training.first_bucket"),
    ({"sweep": {"bucket_cap": ["1MiB", 4_800_000_000_000_000_000_000_000]}},
     "training.sweep.bucket_cap[1]"),
])
def test_a_bucket_limit_beyond_a_buffer_is_refused(given, field):
    with pytest.raises(InputError) as error:
        scenario_from_dict({"topology": {"kind": "switch", "ranks": 2, "bandwidth": "25GB/s",
                                         "latency": "1us"}, "algorithms": ["ring"],
                            "training": {"model": "resnet50", "batch": 8, **given}})
    assert [str(p) for p in error.value.problems] == [
        f"<dict>: {field}: expected a size of at most 1 TiB (a bucket is one buffer), got "
        "4800000000000000000000000"]


def test_a_nul_in_an_nccl_log_line_is_refused_naming_the_line(tmp_path):
    log = tmp_path / "nccl.log"
    text = (REPO / "tests" / "data" / "nccl-info-h100x2-2.31.log").read_text(encoding="utf-8")
    log.write_text(text.replace("timeUs = 61.163963", "timeUs = 61.16\x003963", 1),
                   encoding="utf-8")
    with pytest.raises(InputError) as error:
        read_log(log)
    line = text.splitlines()[14].strip().replace("61.163963", "61.16\x003963")
    assert [str(p) for p in error.value.problems] == [
        f"{log}: line 15: expected text without control characters, got '\\x00' at character "
        f"{line.index(chr(0)) + 1} of {quoted(line)}"]


def test_a_nic_failing_while_no_message_waits_reroutes_the_flows_on_their_way():
    # issue 40 item 6: numpy's bincount of no waiting message is integer zeros, and adding the
    # flows' float bytes to it in place was "Cannot cast ufunc 'add' output from
    # dtype('float64') to dtype('int64')"; a tree on two DGX H100s whose NIC fails at 50 us
    base = {"topology": {"preset": "dgx_h100", "nodes": 2}, "algorithms": ["tree"],
            "sizes": ["1MiB"]}
    healthy = simulate(base)
    hurt = simulate({**base, "faults": [{"kind": "nic_down", "nic": "n1.nic0", "at": "50us"}]})
    assert hurt["verified"].tolist() == [True]
    assert hurt["healthy_time_s"].tolist() == healthy["sim_time_s"].tolist()
    assert hurt["sim_time_s"].iloc[0] > healthy["sim_time_s"].iloc[0]
    assert hurt["faults"].tolist() == ["nic_down n1.nic0 at 50us"]

