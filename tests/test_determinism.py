"""Same inputs, same outputs (issue 23, item 7): two processes with different hash seeds, run
from different working directories, write byte-identical CSV, JSON, trace and PNG files."""

import os
import subprocess
import sys
from pathlib import Path

SCENARIO = """\
name: same
topology: {kind: switch, ranks: 8, bandwidth: 25GB/s, latency: 500ns}
algorithms: [ring, double_binary_tree]
sizes: [64KiB, 4MiB]
faults:
  - {kind: straggler, rank: 2, delay: 5us}
"""


def run_in(directory: Path, hash_seed: str) -> dict[str, bytes]:
    """Every file one run writes, by name, run from ``directory`` with relative paths."""
    directory.mkdir()
    (directory / "same.yaml").write_text(SCENARIO)
    environment = {**os.environ, "PYTHONHASHSEED": hash_seed}
    subprocess.run([sys.executable, "-m", "simulator", "run", "same.yaml", "--output", "out",
                    "--trace", "out/trace.json", "--trace-point", "ring:64KiB", "--quiet"],
                   cwd=directory, env=environment, check=True, capture_output=True)
    return {path.name: path.read_bytes() for path in sorted((directory / "out").iterdir())}


def test_two_processes_write_the_same_bytes(tmp_path):
    first, second = run_in(tmp_path / "a", "1"), run_in(tmp_path / "b", "4242")
    assert sorted(first) == [".same.resume", "same-crossover.png", "same.csv", "same.json",
                             "same.png", "trace.json"]
    for name, data in first.items():
        assert data == second[name], name
