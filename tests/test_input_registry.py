"""Every file a run reads is an input no output may replace, compared by identity, and every
file a scenario names resolves beside it (issue 40, items 1 and 2): each output of run, tune
and sweep onto each kind of input is refused with one line, nothing written and the input left
as it was; outputs naming one file are refused; a same-named decoy in the working directory is
never read."""

import os
import shutil
from pathlib import Path

import pytest

from simulator.cli import main
from simulator.scenario.parse import load_scenario

DATA = Path(__file__).parent / "data"
SCENARIOS = Path(__file__).parent.parent / "scenarios"
SWITCH = "topology: {kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}\nsizes: [1KiB]\n"


def graph(ranks: int) -> str:
    """A graph file of ``ranks`` GPUs on one switch."""
    nodes = "".join(f"  - {{name: g{r}, kind: gpu, rank: {r}}}\n" for r in range(ranks))
    edges = "".join(f"  - {{from: g{r}, to: sw, bandwidth: 50GB/s, latency: 500ns}}\n"
                    for r in range(ranks))
    return f"nodes:\n{nodes}  - {{name: sw, kind: switch}}\nedges:\n{edges}"


def refused(argv: list[str], capsys: pytest.CaptureFixture[str], kept: Path,
            written: Path) -> str:
    """Exit 2, ``kept`` byte for byte as it was, ``written`` not created; the stderr."""
    before = kept.read_bytes()
    assert main(argv) == 2
    assert kept.read_bytes() == before
    assert not written.exists()
    return capsys.readouterr().err


def input_line(option: str, path: Path, source: Path | None = None) -> str:
    """The refusal of ``option`` writing onto the input ``path`` (read as ``source``)."""
    where = "command line" if option.startswith("--") else option
    return (f"{where}: {option}: {path} is an input of this run ({source or path}); choose "
            "another path\n")


@pytest.fixture
def msccl(tmp_path: Path) -> Path:
    """A copy of the shipped MSCCL scenario and its schedule."""
    for name in ("allpairs_8.yaml", "allpairs_8.xml"):
        shutil.copy(SCENARIOS / "msccl" / name, tmp_path / name)
    return tmp_path / "allpairs_8.yaml"


@pytest.fixture
def logged(tmp_path: Path) -> Path:
    """A scenario reading an NCCL topology file and an NCCL log beside it."""
    shutil.copy(DATA / "nccl" / "dgx_h100.xml", tmp_path / "topo.xml")
    shutil.copy(DATA / "nccl-info-h100x2.log", tmp_path / "nccl.log")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("topology: {nccl_xml: topo.xml, nodes: 2}\nsizes: [1MiB]\n"
                        "algorithms: auto\nnccl: {log: nccl.log}\n")
    return scenario


def test_a_trace_onto_the_msccl_schedule_it_reads_is_refused(msccl, tmp_path, capsys):
    schedule = tmp_path / "allpairs_8.xml"
    err = refused(["run", str(msccl), "--output", str(tmp_path / "out"), "--trace",
                   str(schedule), "--trace-point", "direct:64KiB"], capsys, schedule,
                  tmp_path / "out")
    assert err == input_line("--trace", schedule)


def test_links_onto_the_nccl_log_it_reads_are_refused(logged, tmp_path, capsys):
    log = tmp_path / "nccl.log"
    err = refused(["run", str(logged), "--output", str(tmp_path / "out"), "--links", str(log)],
                  capsys, log, tmp_path / "out")
    assert err == input_line("--links", log)


def test_a_trace_onto_the_nccl_graph_dump_it_reads_is_refused(tmp_path, capsys):
    dump = tmp_path / "graph.xml"
    shutil.copy(DATA / "nccl-graph-h100.xml", dump)
    scenario = tmp_path / "s.yaml"
    scenario.write_text("topology: {preset: dgx_h100}\nsizes: [1MiB]\nalgorithms: auto\n"
                        "nccl: {graph: graph.xml}\n")
    err = refused(["run", str(scenario), "--output", str(tmp_path / "out"), "--trace",
                   str(dump)], capsys, dump, tmp_path / "out")
    assert err == input_line("--trace", dump)


def test_links_onto_the_graph_file_it_reads_are_refused(tmp_path, capsys):
    fabric = tmp_path / "g.yaml"
    fabric.write_text(graph(4))
    scenario = tmp_path / "s.yaml"
    scenario.write_text("topology: {kind: graph, file: g.yaml}\nsizes: [1KiB]\n")
    err = refused(["run", str(scenario), "--output", str(tmp_path / "out"), "--links",
                   str(fabric)], capsys, fabric, tmp_path / "out")
    assert err == input_line("--links", fabric)


def test_the_figure_of_links_onto_an_input_is_refused(msccl, tmp_path, capsys):
    # --links x.csv also writes x.png: a schedule the run reads by that name is kept
    schedule = tmp_path / "x.png"
    shutil.copy(tmp_path / "allpairs_8.xml", schedule)
    msccl.write_text(msccl.read_text().replace("msccl:allpairs_8.xml", "msccl:x.png"))
    err = refused(["run", str(msccl), "--output", str(tmp_path / "out"), "--links",
                   str(tmp_path / "x.csv")], capsys, schedule, tmp_path / "out")
    assert err == input_line("--links (its figure)", schedule)


def test_a_trace_onto_a_json_scenario_is_refused(tmp_path, capsys):
    scenario = tmp_path / "s.json"
    scenario.write_text('{"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s", '
                        '"latency": "1us"}, "sizes": ["1KiB"]}')
    err = refused(["run", str(scenario), "--output", str(tmp_path / "out"), "--trace",
                   str(scenario)], capsys, scenario, tmp_path / "out")
    assert err == input_line("--trace", scenario)


def test_a_hard_link_or_a_symbolic_link_to_an_input_is_the_input(msccl, tmp_path, capsys):
    schedule = tmp_path / "allpairs_8.xml"
    hard, soft = tmp_path / "hard.json", tmp_path / "soft.json"
    os.link(schedule, hard)
    soft.symlink_to(schedule)
    for link in (hard, soft):
        err = refused(["run", str(msccl), "--output", str(tmp_path / "out"), "--trace",
                       str(link), "--trace-point", "direct:64KiB"], capsys, schedule,
                      tmp_path / "out")
        assert err == (f"command line: --trace: {link} is an input of this run ({schedule}); "
                       "choose another path\n")


@pytest.mark.parametrize("target", ["topo.xml", "nccl.log", "s.yaml"])
def test_tune_onto_a_file_it_reads_is_refused(logged, tmp_path, capsys, target):
    path = tmp_path / target
    err = refused(["tune", str(logged), "--quiet", "--output", str(path)], capsys, path,
                  tmp_path / "results")
    assert err == input_line("--output", path)


def test_tune_onto_the_nccl_graph_dump_it_reads_is_refused(tmp_path, capsys):
    dump = tmp_path / "graph.xml"
    shutil.copy(DATA / "nccl-graph-h100.xml", dump)
    scenario = tmp_path / "s.yaml"
    scenario.write_text("topology: {preset: dgx_h100}\nsizes: [1MiB]\nnccl: {graph: graph.xml}\n")
    err = refused(["tune", str(scenario), "--quiet", "--output", str(dump)], capsys, dump,
                  tmp_path / "results")
    assert err == input_line("--output", dump)


def test_a_sweep_whose_results_replace_its_scenario_is_refused(tmp_path, capsys, monkeypatch):
    # output: . and name: s: the settings file s.json is the scenario itself
    scenario = tmp_path / "s.json"
    scenario.write_text('{"name": "s", "output": ".", "topology": {"kind": "switch", "ranks": 4, '
                        '"bandwidth": "25GB/s", "latency": "1us"}, "sizes": ["1KiB"]}')
    monkeypatch.chdir(tmp_path)
    err = refused(["sweep", "s.json", "--no-progress"], capsys, scenario, tmp_path / "s.csv")
    assert err == "s.json: output (s.json): s.json is an input of this run (s.json); choose " \
                  "another path\n"


def test_a_sweep_whose_results_replace_a_file_another_scenario_reads_is_refused(
        tmp_path, capsys, monkeypatch):
    # b's results (b.csv in a's directory) would replace the NCCL log a reads
    fabric = tmp_path / "b.csv"
    shutil.copy(DATA / "nccl-info-h100x2.log", fabric)
    (tmp_path / "a.yaml").write_text("output: out-a\ntopology: {preset: dgx_h100, nodes: 2}\n"
                                     "sizes: [1MiB]\nalgorithms: auto\nnccl: {log: b.csv}\n")
    (tmp_path / "b.yaml").write_text(f"output: .\n{SWITCH}")
    monkeypatch.chdir(tmp_path)  # output: . is the working directory
    err = refused(["sweep", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"),
                   "--no-progress"], capsys, fabric, tmp_path / "out-a")
    assert err == (f"{tmp_path / 'b.yaml'}: output (b.csv): b.csv is an input of this run "
                   f"({fabric}); choose another path\n")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.yaml", "b.csv", "b.yaml"]


def test_two_outputs_naming_one_file_are_refused(tmp_path, capsys):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SWITCH)
    out = tmp_path / "out"
    same = tmp_path / "x.json"
    assert main(["run", str(scenario), "--output", str(out), "--trace", str(same), "--links",
                 str(tmp_path / "x.csv"), "--trace-point", "ring:1KiB"]) == 0  # two files: fine
    capsys.readouterr()
    for argv, line in (
            (["--trace", str(same), "--links", str(same)],
             f"command line: --links: {same} is also --trace; expected a file of its own\n"),
            (["--trace", str(out / "s.csv")],
             f"command line: --trace: {out / 's.csv'} is also output (s.csv); expected a file "
             "of its own\n"),
            (["--trace", str(tmp_path / "sub" / ".." / "y.json"), "--links",
              str(tmp_path / "y.json")],
             f"command line: --links: {tmp_path / 'y.json'} is also --trace; expected a file "
             "of its own\n")):
        (tmp_path / "sub").mkdir(exist_ok=True)
        before = sorted(p.name for p in tmp_path.iterdir())
        assert main(["run", str(scenario), "--output", str(out), "--trace-point", "ring:1KiB",
                     *argv]) == 2
        assert capsys.readouterr().err == line
        assert sorted(p.name for p in tmp_path.iterdir()) == before


# --- paths resolve beside the file that names them, never in the working directory ---


def decoy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, real: str | bytes,
          fake: str | bytes) -> Path:
    """``sub/name`` holding ``real``, ``name`` in the working directory holding ``fake``; the
    directory ``sub``."""
    sub = tmp_path / "sub"
    sub.mkdir(exist_ok=True)
    for path, text in ((sub / name, real), (tmp_path / name, fake)):
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)
    monkeypatch.chdir(tmp_path)
    return sub


def test_a_graph_file_resolves_beside_the_scenario_not_in_the_working_directory(
        tmp_path, monkeypatch):
    sub = decoy(tmp_path, monkeypatch, "g.yaml", graph(4), graph(8))
    (sub / "s.yaml").write_text("topology: {kind: graph, file: g.yaml}\nsizes: [1KiB]\n")
    assert load_scenario("sub/s.yaml").topology.ranks == 4


def test_a_preset_file_resolves_beside_the_scenario(tmp_path, monkeypatch):
    preset = "kind: switch\nranks: {}\nbandwidth: 25GB/s\nlatency: 1us\n"
    sub = decoy(tmp_path, monkeypatch, "p.yaml", preset.format(4), preset.format(8))
    (sub / "s.yaml").write_text("topology: {preset: p.yaml}\nsizes: [1KiB]\n")
    assert load_scenario("sub/s.yaml").topology.ranks == 4


def test_an_nccl_topology_file_resolves_beside_the_scenario(tmp_path, monkeypatch):
    sub = decoy(tmp_path, monkeypatch, "topo.xml", (DATA / "nccl" / "dgx_h100.xml").read_text(),
                (DATA / "nccl" / "pcie_4gpu.xml").read_text())
    (sub / "s.yaml").write_text("topology: {nccl_xml: topo.xml}\nsizes: [1KiB]\n")
    assert load_scenario("sub/s.yaml").topology.ranks == 8


@pytest.mark.parametrize("key, data", [("log", "nccl-info-h100x2.log"),
                                       ("graph", "nccl-graph-h100.xml")])
def test_an_nccl_log_or_graph_dump_resolves_beside_the_scenario(tmp_path, monkeypatch, key, data):
    sub = decoy(tmp_path, monkeypatch, "n.txt", (DATA / data).read_text(), "not NCCL's\n")
    (sub / "s.yaml").write_text("topology: {preset: dgx_h100, nodes: 2}\nsizes: [1MiB]\n"
                                f"algorithms: auto\nnccl: {{{key}: n.txt}}\n")
    assert load_scenario("sub/s.yaml").nccl.view_file == "n.txt"


def test_an_msccl_schedule_resolves_beside_the_scenario(tmp_path, monkeypatch):
    xml = (SCENARIOS / "msccl" / "allpairs_8.xml").read_text()
    sub = decoy(tmp_path, monkeypatch, "a.xml", xml, "<not msccl/>")
    (sub / "s.yaml").write_text("topology: {preset: dgx_h100}\nexecution: ideal\n"
                                "algorithms: ['msccl:a.xml']\nsizes: [64KiB]\n")
    assert load_scenario("sub/s.yaml").algorithm("msccl:a.xml").name == "msccl:a.xml"


def test_a_missing_file_names_where_it_was_looked_for(tmp_path, monkeypatch, capsys):
    # the file exists in the working directory only: it is not read, and the line says where
    decoy(tmp_path, monkeypatch, "g.yaml", graph(4), graph(8))
    (tmp_path / "sub" / "g.yaml").unlink()
    (tmp_path / "sub" / "s.yaml").write_text("topology: {kind: graph, file: g.yaml}\n"
                                             "sizes: [1KiB]\n")
    assert main(["run", "sub/s.yaml", "--output", "out"]) == 2
    assert capsys.readouterr().err == "sub/s.yaml: topology.file: sub/g.yaml: no such file\n"
    assert not (tmp_path / "out").exists()
