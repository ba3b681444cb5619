"""Each writer names the files it writes for a run (``Writer.files``), and a run asks it rather
than a list of its own: it writes exactly those files and lists them, refuses any of them that
is not a regular file before it runs, and clears what a killed run left half-written beside
each (docs/results.md)."""

from pathlib import Path

import pytest
import yaml

from simulator import simulate
from simulator.cli import main
from simulator.output.writers import WRITERS, write_results
from simulator.scenario import scenario_from_dict
from simulator.settings import RunSettings

SCENARIO = """\
name: tiny
topology: {kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 500ns}
algorithms: [ring, halving_doubling]
sizes: [1KiB, 1MiB]
"""
EVERY_FILE = ["tiny.csv", "tiny.json", "tiny.png", "tiny-crossover.png", "tiny.parquet",
              "tiny.html"]


def write(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(SCENARIO)
    return path


def test_each_writer_names_its_files_results_file_first():
    assert {name: writer.files("tiny") for name, writer in WRITERS.items()} == {
        "csv": ("tiny.csv",), "json": ("tiny.json",), "png": ("tiny.png", "tiny-crossover.png"),
        "parquet": ("tiny.parquet",), "html": ("tiny.html",)}
    assert [file for writer in WRITERS.values() for file in writer.files("tiny")] == EVERY_FILE


def test_a_run_writes_and_lists_exactly_its_writers_files(tmp_path, capsys):
    scenario, out = write(tmp_path), tmp_path / "out"
    assert main(["run", str(scenario), "--output", str(out), "--format", "parquet,png,json",
                 "--quiet"]) == 0
    written = ["tiny.csv", "tiny.parquet", "tiny.png", "tiny-crossover.png", "tiny.json"]
    assert sorted(path.name for path in out.iterdir()) == sorted([*written, ".tiny.resume"])
    assert capsys.readouterr().out.splitlines()[-1] == (
        "# results: " + ", ".join(str(out / name) for name in written))


def test_write_results_gives_back_every_file_it_wrote(tmp_path):
    # what a sweep lists: the figure's crossover chart beside it, as its writer names it
    scenario = scenario_from_dict(yaml.safe_load(SCENARIO))
    paths = write_results(simulate(scenario), scenario, RunSettings(), tmp_path, ("csv", "png"))
    assert paths == [tmp_path / "tiny.csv", tmp_path / "tiny.png", tmp_path / "tiny-crossover.png"]
    assert sorted(tmp_path.iterdir()) == sorted([*paths, tmp_path / ".tiny.resume"])


@pytest.mark.parametrize("name", EVERY_FILE)
def test_any_writers_file_that_is_a_directory_is_refused_before_the_run(tmp_path, capsys, name):
    # every writer's files are checked, whichever formats this run asks for
    scenario, out = write(tmp_path), tmp_path / "out"
    (out / name).mkdir(parents=True)
    assert main(["run", str(scenario), "--output", str(out), "--format", "csv", "--quiet"]) == 2
    assert capsys.readouterr().err == (f"{scenario}: output ({name}): expected a file to write, "
                                       f"but {out / name} is a directory\n")
    assert [path.name for path in out.iterdir()] == [name]


def test_a_run_clears_what_a_kill_left_beside_any_writers_file(tmp_path, capsys):
    scenario, out = write(tmp_path), tmp_path / "out"
    out.mkdir()
    for name in [*EVERY_FILE, "other.csv"]:
        (out / f".{name}.1a2b3c4d.tmp").write_text("half a file")
    assert main(["run", str(scenario), "--output", str(out), "--format", "csv", "--quiet"]) == 0
    assert sorted(path.name for path in out.iterdir()) == [".other.csv.1a2b3c4d.tmp",
                                                           ".tiny.resume", "tiny.csv"]
