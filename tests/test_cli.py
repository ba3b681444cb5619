"""The command line end to end: the golden run, the files it writes, the exit codes and options."""

import json
import subprocess
import sys

import pandas as pd
import pytest

from simulator import __version__
from simulator.algorithms import REGISTRY, Collective, algorithm_names
from simulator.algorithms.comm import COPY
from simulator.algorithms.ring import RingAllreduce
from simulator.cli import main
from simulator.output.results import RESULT_COLUMNS
from simulator.output.settings_json import settings
from simulator.scenario import scenario_from_dict
from simulator.settings import RunSettings
from tests.conftest import REPO, runs_all

CONTRACT_COLUMNS = ["scenario", "topology", "ranks", "collective", "algorithm", "size_bytes",
                    "dtype", "op", "sim_time_s", "model_time_s", "algbw_GBps", "busbw_GBps",
                    "verified", "max_abs_error"]
GOLDEN = "tests/data/dgx_small.yaml"
"""scenarios/dgx.yaml at three sizes (1 KiB, 1 MiB, 64 MiB): the same machine, in seconds."""


def run_cli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """``python -m simulator ARGS`` from the repository root, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "simulator", *args], cwd=REPO,
                          capture_output=True, text=True, check=False, **kwargs)


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    out = tmp_path_factory.mktemp("golden")
    return run_cli("run", GOLDEN, "--output", str(out)), out


@pytest.mark.golden
def test_golden_run_prints_the_table(golden):
    proc, out = golden
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (f"{GOLDEN}: 39 points to simulate (13 algorithms × 3 sizes); closed "
                           "forms: 6.5ms of simulated time in all (not wall-clock time), longest "
                           "one_shot at 64MiB (1.47ms)\n")  # said before; no bar off a terminal
    lines = proc.stdout.splitlines()
    assert lines[0] == ("# allreduce-sim · scenario dgx-small · topology dgx_h100 · 8 ranks · "
                        "allreduce")
    # one screen: a line per size, the fastest of what runs on unregistered buffers
    assert lines[1:3] == [
        "# one line per size: the fastest of 10 algorithms (39 points simulated: --verbose "
        "prints each, the CSV holds them)",
        "# left aside: one_shot, two_shot, two_shot_multicast, which need buffers registered "
        "as symmetric windows (nccl.symmetric: true)"]
    assert lines[4].split() == ["#", "size(B)", "count", "type", "redop", "algorithm", "time(us)",
                                "algbw(GB/s)", "busbw(GB/s)", "model(us)", "dev(%)", "verified"]
    assert [line.split()[:5] for line in lines[5:8]] == [
        ["1024", "256", "float32", "sum", "direct"], ["1048576", "262144", "float32", "sum",
                                                      "direct"],
        ["67108864", "16777216", "float32", "sum", "nvls"]]  # in-switch reduction at 64 MiB
    assert lines[-1] == (f"# results: {out}/dgx-small.csv, {out}/dgx-small.json, "
                         f"{out}/dgx-small.png, {out}/dgx-small-crossover.png")
    assert lines[-2] == "# --verbose: every point, its busiest link, the averages"
    best = lines.index("# Best algorithm per size (fastest simulated; the closed forms' pick "
                       "beside it)")
    assert [line.split() for line in lines[best + 2:-2]] == [
        ["1024", "direct", "1.20", "direct", "1.20", "yes"],
        ["1048576", "direct", "6.11", "direct", "6.11", "yes"],
        ["67108864", "nvls", "175.90", "nvls", "175.90", "yes"]]
    assert not any(line.startswith("# Avg bus") for line in lines)
    block = lines.index("# Bottleneck per point: the link busy longest (at least one flow on it), "
                        "and that time as a share of the point's")
    assert [line.split()[1:3] for line in lines[block + 2:block + 5]] == [
        ["1024", "direct"], ["1048576", "direct"], ["67108864", "nvls"]]  # the lines shown
    assert (out / "dgx-small.png").stat().st_size > 10_000


@pytest.mark.registry
def test_golden_results_file_has_the_contract_columns_and_values(golden):
    _, out = golden
    frame = pd.read_csv(out / "dgx-small.csv")
    assert list(frame.columns[:14]) == CONTRACT_COLUMNS
    assert list(frame.columns) == list(RESULT_COLUMNS)
    assert set(frame.scenario) == {"dgx-small"} and set(frame.topology) == {"dgx_h100"}
    assert set(frame.ranks) == {8} and frame.verified.all()
    # all runs every registered allreduce that applies, in the registry's order: on one node,
    # all but those that need several hosts (hierarchical, nvls_tree, the CollNet ones) or a
    # torus (bucket)
    needs_more = {"hierarchical", "nvls_tree", "collnet_direct", "collnet_chain", "bucket"}
    assert list(frame.algorithm.unique()) == [
        name for name in algorithm_names(Collective.ALLREDUCE) if name not in needs_more]
    frame = frame[frame.algorithm == "ring"]
    assert list(frame.size_bytes) == [1 << 10, 1 << 20, 64 << 20]
    # one DGX: every ring hop is GPU -> NVSwitch -> GPU on its own links, so no link is shared
    assert frame.sim_time_s.to_numpy() == pytest.approx(frame.model_time_s.to_numpy(), rel=1e-9)
    # 64 MiB by hand: alpha = 2 x 300 ns, beta = 1/450 GB/s, gamma = 1/1.1 TB/s, c = 64 MiB / 8
    c = (64 << 20) / 8
    expected = 14 * (600e-9 + c / 450e9) + 7 * c / 1.1e12
    last = frame.iloc[-1]
    assert last.sim_time_s == pytest.approx(expected, rel=1e-12)
    assert last.algbw_GBps == pytest.approx((64 << 20) / expected / 1e9, rel=1e-12)
    assert last.busbw_GBps == pytest.approx(last.algbw_GBps * 2 * 7 / 8, rel=1e-12)


def test_golden_settings_file_says_how_the_results_were_made(golden):
    _, out = golden
    settings = json.loads((out / "dgx-small.json").read_text())
    assert settings["simulator"] == {"name": "allreduce-sim", "version": __version__}
    assert settings["run"] == {"seed": 0, "proxy_elements": 16384}
    assert (settings["source"], settings["topology_label"]) == (GOLDEN, "dgx_h100")
    described = settings["scenario"]
    assert described["topology"] == {
        "kind": "dgx", "nodes": 1, "gpus_per_node": 8, "nvlink_bandwidth": "450GB/s",
        "nvlink_latency": "300ns", "pcie_bandwidth": "63GB/s", "pcie_latency": "500ns",
        "nic_bandwidth": "50GB/s", "nic_latency": "850ns", "nvswitch_reduction": True,
        "nvswitch_reduction_latency": "25us", "compute_capability": 90, "nvlinks": 18}
    assert (described["execution"], described["protocol"], described["channels"]) == (
        "ideal", "auto", "auto")
    assert described["algorithm_options"] == {  # defaults too
        "hierarchical": {"inter": "ring"}, "swing": {"latency_optimal": False},
        "bine": {"latency_optimal": False}}
    assert described["sizes"] == [1 << 10, 1 << 20, 64 << 20]
    assert described["gpu"] == {"reduce_bandwidth": "1.1TB/s", "launch_latency": "0s"}
    assert described["output"] == str(out)  # where the files went (--output), not the default
    # the settings are themselves a scenario: reading them back gives the same one
    again = scenario_from_dict(described)
    original = scenario_from_dict({**described, "topology": {"preset": "dgx_h100", "nodes": 1}})
    assert again.topology.params == original.topology.params
    assert (again.sizes, again.gpu, again.algorithms) == (original.sizes, original.gpu, None)


def test_settings_record_what_a_scenario_sets_explicitly():
    scenario = scenario_from_dict({
        "topology": {"preset": "dgx_a100", "nodes": 2}, "sizes": ["1MiB"], "algorithms": ["ring"],
        "channels": 4, "protocol": "LL128"})
    described = settings(scenario, RunSettings())["scenario"]
    assert (described["execution"], described["protocol"], described["channels"]) == (
        "nccl", "LL128", 4)  # nccl: the default on a preset of real hardware
    again = scenario_from_dict(described)
    assert (again.execution, again.protocol, again.channels) == (
        scenario.execution, scenario.protocol, scenario.channels)


def test_rerun_gives_identical_results(golden, tmp_path):
    _, out = golden
    assert main(["run", GOLDEN, "--output", str(tmp_path), "--format", "csv,json"]) == 0
    assert (tmp_path / "dgx-small.csv").read_text() == (out / "dgx-small.csv").read_text()
    first, again = (json.loads((where / "dgx-small.json").read_text()) for where in (out, tmp_path))
    assert again["scenario"].pop("output") == str(tmp_path)
    first["scenario"].pop("output")
    assert again == first  # the same settings, but for where the files went
    assert not (tmp_path / "dgx-small.png").exists()


@pytest.mark.registry
def test_table_piped_into_head_still_writes_results(tmp_path):
    # the reader closes the pipe after one line; the run still writes every file and exits 0
    proc = subprocess.run(f"{sys.executable} -m simulator run {GOLDEN} --output {tmp_path} "
                          "--no-plot | head -1; exit ${PIPESTATUS[0]}", shell=True,
                          executable="/bin/bash", cwd=REPO, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# allreduce-sim · scenario dgx-small")
    points = len(runs_all(GOLDEN)) * 3
    assert proc.stderr.startswith(f"{GOLDEN}: {points} points to simulate")
    assert proc.stderr.count("\n") == 1
    assert len(pd.read_csv(tmp_path / "dgx-small.csv")) == points


def test_version_and_help_answer_without_loading_the_simulator():
    probe = ("import sys\nfrom simulator.cli import main\ntry:\n    main(['--help'])\n"
             "except SystemExit:\n    pass\nprint(sorted(m for m in ('pandas', 'simpy', "
             "'matplotlib', 'networkx') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, check=True)
    assert proc.stdout.splitlines()[-1] == "[]"
    assert run_cli("--version").stdout == f"allreduce-sim {__version__}\n"


def test_the_formats_listed_are_the_writers(capsys):
    # --help and the --format error name the registry's formats, in its order: no second list
    from simulator.output.writers import WRITERS

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert list(WRITERS) == ["csv", "json", "png", "parquet", "html"]
    assert "of csv, json, png, parquet, html; the CSV is always written (default csv,json,png;" in help_text


@pytest.mark.parametrize("args, message", [
    (["--proxy-elements", "0"], "command line: --proxy-elements: expected a whole number ≥ 1, got 0"),
    (["--seed", "-1"], "command line: --seed: expected a whole number ≥ 0, got -1"),
    (["--format", "csv,xlsx"],
     "command line: --format: expected a comma-separated list of csv, json, png, parquet, html, "
     "got 'csv,xlsx'"),
    (["--format", "png", "--no-plot"], "command line: --no-plot: drops the only file --format png asks for"),
])
def test_bad_options_exit_2_with_one_line(tmp_path, capsys, args, message):
    assert main(["run", GOLDEN, "--output", str(tmp_path), *args]) == 2
    assert capsys.readouterr().err == message + "\n"
    assert not any(tmp_path.iterdir())


class _ForgetsToReduce(RingAllreduce):
    """A broken ring: the reduce-scatter copies instead of reducing."""

    name = "broken_ring"

    def program(self, comm):
        me, p = comm.rank, comm.size
        chunk = comm.chunks(p)
        for step in range(2 * (p - 1)):
            comm.send((me + 1) % p, chunk[(me - step) % p])
            yield comm.recv((me - 1) % p, into=chunk[(me - step - 1) % p], combine=COPY)


def test_failed_verification_exits_1_and_still_writes_results(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(REGISTRY[Collective.ALLREDUCE], "broken_ring", _ForgetsToReduce())
    scenario = tmp_path / "broken.yaml"
    scenario.write_text("topology: {kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}\n"
                        f"algorithms: [broken_ring]\nsizes: [4KiB]\noutput: {tmp_path}\n")
    assert main(["run", str(scenario), "--no-plot"]) == 1
    said, failed = capsys.readouterr().err.splitlines()
    assert said.startswith(f"{scenario}: 1 point to simulate (1 algorithm × 1 size)")
    assert failed.startswith(f"{scenario}: verification failed for 1 run(s), first broken_ring at "
                             "4096 bytes (max abs error ")
    # where first: the ring's copies leave rank 0's chunk 0 its left neighbour's alone
    assert failed.endswith("): rank 0 chunk 0 of 4 differs from numpy's sum, first at element 0 "
                           "of the 1024 verified")
    assert not pd.read_csv(tmp_path / "broken.csv").verified.any()


def test_out_of_memory_is_one_line_and_exit_1(tmp_path, capsys, monkeypatch):
    import simulator.scenario.parse

    def exhausted(*args, **kwargs):
        raise MemoryError  # as numpy raises when the address space is spent

    monkeypatch.setattr(simulator.scenario.parse, "load_scenario", exhausted)
    assert main(["run", str(tmp_path / "s.yaml"), "--output", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err == (
        f"{tmp_path / 's.yaml'}: out of memory: the machine could not give the run what it "
        "needed; files already written are complete (use fewer ranks or sizes, or a smaller "
        "--proxy-elements)\n")
