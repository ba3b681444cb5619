"""Code runs only where the user asked for it (issue 23, "Code runs where no one asked for it"):
a training model given as ``{torch: MODULE:FACTORY}`` is imported by ``run`` and ``sweep`` with
``--allow-import`` alone (in a child process); ``plot``, ``topo`` and ``calibrate`` never import
it, and a factory that raises, exits or aborts is one line naming it, exit 2, nothing written."""

import json
from pathlib import Path

import pytest

from simulator.cli import main
from simulator.errors import InputError
from simulator.scenario import Imports, load_scenario, scenario_from_dict
from simulator.trainer import train

SWITCH = "{kind: switch, ranks: 2, bandwidth: 25GB/s, latency: 1us}"

MARKED = '''\
import pathlib
pathlib.Path(__file__).with_name("imported.marker").write_text("imported")


def build():
    import torch
    pathlib.Path(__file__).with_name("built.marker").write_text("built")
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 2))
'''
"""A model module that leaves a file beside itself when imported, and another when built."""

FAILING = '''\
import os
import sys


def raises():
    raise RuntimeError("boom\\non two lines")


def exits():
    sys.exit(3)


def exits_bare():
    sys.exit()


def aborts():
    os.abort()


def ends():
    os._exit(7)


def interrupts():
    raise KeyboardInterrupt
'''


@pytest.fixture
def models(tmp_path, monkeypatch):
    """A directory on the module search path holding the modules above."""
    (tmp_path / "marked_net.py").write_text(MARKED)
    (tmp_path / "failing_net.py").write_text(FAILING)
    (tmp_path / "raising_net.py").write_text("raise ValueError('at import')\n")
    (tmp_path / "exiting_net.py").write_text("import sys\nsys.exit('bye')\n")
    (tmp_path / "needy_net.py").write_text("import absent_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def scenario_file(directory: Path, target: str = "marked_net:build") -> Path:
    path = directory / "x.yaml"
    path.write_text(f"topology: {SWITCH}\nalgorithms: [ring]\noutput: {directory / 'out'}\n"
                    f"training: {{model: {{torch: '{target}', input: [8]}}, batch: 1, "
                    f"gpu: free}}\n")
    return path


def markers(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.glob("*.marker"))


def test_reading_a_torch_model_refuses_to_import_it_by_default(models):
    path = scenario_file(models)
    refused = (f"{path}: training.model.torch: importing 'marked_net:build' runs its code; pass "
               f"--allow-import to run to allow it (imports=Imports.ALLOW from Python)")
    with pytest.raises(InputError) as caught:
        load_scenario(path)
    assert str(caught.value) == refused
    with pytest.raises(InputError) as caught:
        train(path)
    assert str(caught.value) == refused
    assert markers(models) == []


def test_a_model_left_unbuilt_reads_the_rest_and_cannot_be_trained(models):
    # Imports.SKIP (topo, plot): the scenario is read and checked, its model not imported
    scenario = load_scenario(scenario_file(models), imports=Imports.SKIP)
    assert scenario.topology.ranks == 2 and scenario.training is not None
    assert scenario.training.network.layers == ()
    with pytest.raises(InputError) as caught:
        train(scenario)
    assert str(caught.value) == (
        f"{models / 'x.yaml'}: training.model: expected a model to train, got torch module "
        f"marked_net:build, not imported; read the scenario with imports=Imports.ALLOW to "
        f"import it")
    assert markers(models) == []


def test_a_target_that_is_no_python_name_is_refused_before_any_import(models):
    for target in ("../marked_net:build", "marked_net:build:x", "marked net:build", "1x:build",
                   "marked_net:"):
        with pytest.raises(InputError) as caught:
            scenario_from_dict({"topology": {"kind": "switch", "ranks": 2, "bandwidth": "1GB/s",
                                             "latency": "1us"},
                                "training": {"model": {"torch": target}, "batch": 1}},
                               source="x.yaml", imports=Imports.ALLOW)
        assert str(caught.value) == (f"x.yaml: training.model.torch: expected "
                                     f"'package.module:factory', got {target!r}")
    assert markers(models) == []


def test_run_refuses_without_the_flag_and_sweep_never_imports(models, capsys):
    path = scenario_file(models)
    assert main(["run", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"{path}: training.model.torch: importing 'marked_net:build' runs its code; pass "
        f"--allow-import to run to allow it (imports=Imports.ALLOW from Python)\n")
    # a sweep runs no training step: it refuses the scenario, its model unbuilt, flag or not
    for flag in ([], ["--allow-import"]):
        assert main(["sweep", str(path), "--no-progress", *flag]) == 2
        assert capsys.readouterr().err == (
            f"{path}: training: expected a scenario of sizes here: a training step runs with "
            f"simulator.train() or python -m simulator run\n")
    assert not (models / "out").exists()
    assert markers(models) == []


def test_topo_plot_and_calibrate_never_import(models, tmp_path, capsys):
    path = scenario_file(models)
    # topo reads the scenario's topology, leaving its model unbuilt
    assert main(["topo", str(path), "--output", str(tmp_path / "topo")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "# topology switch · builder switch(2)"
    # plot: results whose JSON settings name the model still give the link-rate line
    plain = tmp_path / "plain.yaml"
    plain.write_text(f"topology: {SWITCH}\nalgorithms: [ring]\nsizes: [1KiB, 1MiB]\n")
    results = tmp_path / "results"
    assert main(["run", str(plain), "--output", str(results), "--format", "csv,json",
                 "--quiet"]) == 0
    sidecar = results / "plain.json"
    settings = json.loads(sidecar.read_text())
    del settings["scenario"]["sizes"]
    settings["scenario"]["training"] = {"model": {"torch": "marked_net:build"}, "batch": 1}
    sidecar.write_text(json.dumps(settings))
    capsys.readouterr()
    assert main(["plot", str(results / "plain.csv")]) == 0
    assert capsys.readouterr().out == (f"# figures: {results / 'plain.png'}, "
                                       f"{results / 'plain-crossover.png'}\n")
    # calibrate reads presets, never scenarios: a scenario given as its preset is no preset
    log = Path(__file__).resolve().parent.parent / "docs" / "reference" / "nccl-tests-h200.csv"
    assert main(["calibrate", str(log), "--preset", str(path), "--output",
                 str(tmp_path / "c.yaml")]) == 2
    assert capsys.readouterr().err == f"{log}: --preset: no preset {str(path)!r}\n"
    assert markers(models) == []


def test_run_with_the_flag_imports_and_builds_the_model(models, capsys):
    path = scenario_file(models)
    assert main(["run", str(path), "--allow-import", "--format", "csv,json", "--quiet"]) == 0
    assert markers(models) == ["built.marker", "imported.marker"]
    model = json.loads((models / "out" / "x.json").read_text())["scenario"]["training"]["model"]
    assert model == {"name": "build", "parameters": 8 * 16 + 16 + 16 * 2 + 2,
                     "source": "torch module marked_net:build"}
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("target, said", [
    ("failing_net:raises", "'failing_net:raises' failed: RuntimeError: boom on two lines"),
    ("failing_net:exits", "'failing_net:exits' failed: it called sys.exit(3)"),
    ("failing_net:exits_bare", "'failing_net:exits_bare' failed: it called sys.exit()"),
    ("failing_net:aborts", "'failing_net:aborts' failed: the process importing it was killed by "
                           "SIGABRT (os.abort)"),
    ("failing_net:ends", "'failing_net:ends' failed: the process importing it exited with code 7 "
                         "(os._exit or a crash)"),
    ("failing_net:interrupts", "'failing_net:interrupts' failed: KeyboardInterrupt"),
    ("raising_net:build", "'raising_net:build' failed while importing raising_net: ValueError: "
                          "at import"),
    ("exiting_net:build", "'exiting_net:build' failed while importing exiting_net: it called "
                          "sys.exit('bye')"),
    ("failing_net:missing", "cannot load 'failing_net:missing': module 'failing_net' has no "
                            "attribute 'missing'"),
    ("absent_net:build", "cannot load 'absent_net:build': No module named 'absent_net'; the "
                         "module is looked for on Python's path (the current directory under "
                         "python -m, then PYTHONPATH), not beside the scenario"),
    ("needy_net:build", "cannot load 'needy_net:build': No module named 'absent_dependency'"),
    ("os:abort", "'os:abort' failed: the process importing it was killed by SIGABRT (os.abort)"),
    ("sys:exit", "'sys:exit' failed: it called sys.exit()"),
])
def test_a_factory_that_fails_is_one_line_naming_it(models, capsys, target, said):
    path = scenario_file(models, target)
    assert main(["run", str(path), "--allow-import"]) == 2
    assert capsys.readouterr().err == f"{path}: training.model.torch: {said}\n"
    assert not (models / "out").exists()


def test_a_module_beside_the_scenario_is_not_searched(tmp_path, capsys):
    # the module search path is Python's (sys.path), never the scenario's own directory
    beside = tmp_path / "beside"
    beside.mkdir()
    (beside / "lonely_net.py").write_text(MARKED)
    path = scenario_file(beside, "lonely_net:build")
    assert main(["run", str(path), "--allow-import"]) == 2
    assert capsys.readouterr().err == (
        f"{path}: training.model.torch: cannot load 'lonely_net:build': No module named "
        f"'lonely_net'; the module is looked for on Python's path (the current directory under "
        f"python -m, then PYTHONPATH), not beside the scenario\n")
    assert markers(beside) == []
