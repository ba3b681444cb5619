"""Inputs that never end or explode (issue 23): a FIFO, a device, an oversized file, a YAML
alias bomb or deep nesting, given as a scenario, a graph or a log, each get one line and exit 2,
at once, and nothing is written."""

import os
import time

import pytest

from simulator.cli import main
from simulator.limits import MAX_INPUT_BYTES, MAX_YAML_ALIASES, MAX_YAML_NESTING

BOMB = """\
a: &a [1KiB, 1KiB, 1KiB, 1KiB, 1KiB, 1KiB, 1KiB, 1KiB, 1KiB]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
topology: {kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}
sizes: *i
"""
"""9^9 sizes (387 million) in 73 aliases."""


def refused(argv, capsys, tmp_path):
    """Exit 2 within a few seconds of CPU time (not of the clock, which a loaded machine
    stretches), nothing written; the one line on stderr."""
    start = time.process_time()
    assert main([*argv, "--output", str(tmp_path / "out")] if argv[0] == "run" else argv) == 2
    assert time.process_time() - start < 10
    assert not (tmp_path / "out").exists()
    return capsys.readouterr().err


def test_a_fifo_scenario_is_refused_without_opening_it(tmp_path, capsys):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    assert refused(["run", str(fifo)], capsys, tmp_path) == \
        f"{fifo}: expected a regular file, got a FIFO\n"


def test_a_device_scenario_is_refused(tmp_path, capsys):
    assert refused(["run", "/dev/zero"], capsys, tmp_path) == \
        "/dev/zero: expected a regular file, got a device\n"


def test_a_directory_scenario_is_refused(tmp_path, capsys):
    assert refused(["run", str(tmp_path)], capsys, tmp_path) == \
        f"{tmp_path}: expected a regular file, got a directory\n"


def test_an_oversized_scenario_is_refused(tmp_path, capsys):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_INPUT_BYTES + 1))
    assert refused(["run", str(big)], capsys, tmp_path) == \
        f"{big}: expected at most 16 MiB, got a larger file\n"


def test_a_yaml_alias_bomb_is_refused(tmp_path, capsys):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    assert refused(["run", str(bomb)], capsys, tmp_path) == (
        f"{bomb}: line 9: expected at most {MAX_YAML_ALIASES} aliases (*name): more can stand "
        "for billions of values\n")


@pytest.mark.parametrize(("text", "line"), [("{a: " * 5000 + "1" + "}" * 5000 + "\n", 1),
                                            ("[" * 100_000 + "]" * 100_000 + "\n", 1),
                                            ("x:\n" + "".join("  " * i + f"k{i}:\n"
                                                              for i in range(1, 80)), 65)])
def test_deep_nesting_is_refused_before_the_parser_recurses(tmp_path, capsys, text, line):
    deep = tmp_path / "deep.yaml"
    deep.write_text(text)
    assert refused(["run", str(deep)], capsys, tmp_path) == (
        f"{deep}: line {line}: expected mappings and lists nested at most {MAX_YAML_NESTING} "
        "deep\n")


def test_a_fifo_graph_is_refused(tmp_path, capsys):
    fifo = tmp_path / "fabric.yaml"
    os.mkfifo(fifo)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"topology: {{kind: graph, file: {fifo}}}\nsizes: [1KiB]\n")
    err = refused(["run", str(scenario)], capsys, tmp_path)
    assert err.endswith("expected a regular file, got a FIFO\n")


def test_a_fifo_log_is_refused_by_calibrate(tmp_path, capsys):
    fifo = tmp_path / "nccl.log"
    os.mkfifo(fifo)
    assert refused(["calibrate", str(fifo), "--preset", "dgx_h100", "--output",
                    str(tmp_path / "out.yaml")], capsys, tmp_path) == \
        f"{fifo}: expected a regular file, got a FIFO\n"


def test_a_megabyte_name_is_refused_before_anything_is_written(tmp_path, capsys):
    scenario = tmp_path / "long.yaml"
    scenario.write_text("name: " + "n" * (1 << 20) + "\ntopology: {kind: switch, ranks: 4, "
                        "bandwidth: 25GB/s, latency: 1us}\nsizes: [1KiB]\n")
    assert refused(["run", str(scenario)], capsys, tmp_path) == \
        f"{scenario}: name: expected a name of at most 100 characters, got one of 1,048,576\n"


SMALL = "topology: {kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}\nsizes: [1KiB]\n"


def test_a_trace_onto_the_scenario_is_refused(tmp_path, capsys):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SMALL)
    assert refused(["run", str(scenario), "--trace", str(scenario)], capsys, tmp_path) == (
        f"command line: --trace: {scenario} is an input of this run ({scenario}); choose another "
        "path\n")
    assert scenario.read_text() == SMALL


def test_a_scenario_whose_results_would_overwrite_it_is_refused(tmp_path, capsys, monkeypatch):
    # a JSON scenario named s in its own directory: its settings file would be s.json itself
    scenario = tmp_path / "s.json"
    scenario.write_text('{"name": "s", "output": ".", "topology": {"kind": "switch", "ranks": 4, '
                        '"bandwidth": "25GB/s", "latency": "1us"}, "sizes": ["1KiB"]}')
    before = scenario.read_text()
    monkeypatch.chdir(tmp_path)
    assert main(["run", "s.json"]) == 2
    assert capsys.readouterr().err == (
        "s.json: output (s.json): s.json is an input of this run (s.json); choose another path\n")
    assert scenario.read_text() == before


def test_links_onto_a_device_are_refused(tmp_path, capsys):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SMALL)
    assert refused(["run", str(scenario), "--links", "/dev/null"], capsys, tmp_path) == (
        "command line: --links: expected a regular file to write, but /dev/null is not one\n")


def test_calibrate_onto_its_log_is_refused(tmp_path, capsys):
    log = tmp_path / "nccl.yaml"
    log.write_text("size_bytes,time_us,busbw_GBps\n1024,10,0.1\n")
    assert refused(["calibrate", str(log), "--preset", "dgx_h100", "--output", str(log)],
                   capsys, tmp_path) == (
        f"command line: --output: {log} is an input of this run ({log}); choose another path\n")


def test_calibrate_onto_a_directory_is_one_line(tmp_path, capsys):
    log = tmp_path / "h200.csv"
    log.write_text("size_bytes,time_us,busbw_GBps\n1073741824,4049.67,464.0\n")
    (tmp_path / "dir").mkdir()
    assert refused(["calibrate", str(log), "--preset", "dgx_h100", "--output",
                    str(tmp_path / "dir")], capsys, tmp_path) == (
        f"command line: --output: expected a file to write, but {tmp_path / 'dir'} is a "
        "directory\n")
