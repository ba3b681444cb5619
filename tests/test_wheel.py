"""The package as users install it: build the wheel, install it into a fresh virtual environment
outside the checkout, and run a preset scenario from another directory (presets are package
data, so they must travel inside the wheel)."""

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pandas as pd

from tests.conftest import REPO


def test_wheel_installs_and_runs_a_preset_scenario_elsewhere(tmp_path):
    # as a user would, without a PYTHONPATH pointing at this checkout (how a worktree runs the
    # suite): it would put the checkout's package before the wheel's in every step below
    clean = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", str(dist), str(REPO)],
                   check=True, capture_output=True, cwd=tmp_path, env=clean)
    [wheel] = dist.glob("allreduce_sim-*.whl")
    # every package of the checkout travels (simulator.measured once did not: calibrate and
    # plot --reference failed on an import in an installed wheel)
    packages = {str(path.parent.relative_to(REPO)).replace("/", ".")
                for path in (REPO / "simulator").rglob("__init__.py")}
    shipped = {name.rsplit("/", 1)[0].replace("/", ".")
               for name in zipfile.ZipFile(wheel).namelist() if name.endswith("/__init__.py")}
    assert packages - shipped == set()

    fresh = tmp_path / "fresh"
    venv.create(fresh, with_pip=False)
    python = fresh / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                    "--no-deps", "--no-index", str(wheel)], check=True, capture_output=True, env=clean)
    # the dependencies (numpy, simpy, ...) come from this environment's site-packages, added as
    # a plain path: its .pth files, the editable install of this checkout among them, stay unread
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig."
                                "get_paths()['purelib'])"], check=True, capture_output=True,
                               text=True, env=clean).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "h100.yaml").write_text("topology: {preset: dgx_h100}\nalgorithms: [ring, nvls]\n"
                                    "sizes: [1MiB]\noutput: out\n")
    proc = subprocess.run([str(python), "-m", "simulator", "run", "h100.yaml", "--no-plot"],
                          cwd=work, capture_output=True, text=True, check=False, env=clean)
    assert proc.returncode == 0, proc.stderr
    frame = pd.read_csv(work / "out" / "h100.csv")
    assert list(frame.algorithm) == ["ring", "nvls"] and frame.verified.all()
    assert set(frame.topology) == {"dgx_h100"}
    log = REPO / "tests" / "data" / "nccl-tests-a100.json"
    proc = subprocess.run([str(python), "-m", "simulator", "calibrate", str(log), "--preset",
                           "dgx_a100", "--output", "a100.yaml"], cwd=work, capture_output=True,
                          text=True, check=False, env=clean)
    assert proc.returncode == 0, proc.stderr
    assert "after 7.8 %" in proc.stdout and (work / "a100.yaml").is_file()

    where = subprocess.run([str(python), "-c", "import simulator; print(simulator.__file__)"],
                           cwd=work, capture_output=True, text=True, check=True, env=clean).stdout
    assert where.startswith(str(fresh))  # the wheel's copy, not this checkout
