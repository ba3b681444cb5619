"""The command line end to end: the golden run of scenarios/dgx.yaml and the exit codes."""

import subprocess
import sys

import pandas as pd
import pytest

from simulator.cli import main
from simulator.collectives import REGISTRY, Collective
from simulator.collectives.ring import RingAllreduce
from simulator.program import COPY
from simulator.runner import RESULT_COLUMNS

CONTRACT_COLUMNS = ["scenario", "topology", "ranks", "collective", "algorithm", "size_bytes",
                    "dtype", "op", "sim_time_s", "model_time_s", "algbw_GBps", "busbw_GBps",
                    "verified", "max_abs_error"]


@pytest.fixture(scope="module")
def dgx_run(tmp_path_factory):
    """``python -m simulator run scenarios/dgx.yaml`` as a user runs it, output redirected."""
    from tests.conftest import REPO

    out = tmp_path_factory.mktemp("dgx")
    proc = subprocess.run([sys.executable, "-m", "simulator", "run", "scenarios/dgx.yaml",
                           "--output", str(out)], cwd=REPO, capture_output=True, text=True,
                          check=False)
    return proc, out


def test_dgx_scenario_runs_and_prints_the_table(dgx_run):
    proc, out = dgx_run
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert lines[0] == ("# allreduce-sim · scenario dgx-h100 · topology dgx_h100 · 8 ranks · "
                        "allreduce")
    assert lines[2].split() == ["#", "size(B)", "count", "type", "redop", "algorithm", "time(us)",
                                "algbw(GB/s)", "busbw(GB/s)", "model(us)", "dev(%)", "verified"]
    assert lines[3].split()[:5] == ["1024", "256", "float32", "sum", "ring"]
    assert lines[-1] == f"# results: {out}/dgx-h100.csv, {out}/dgx-h100.png"
    best = lines.index("# Best algorithm per size (fastest simulated; the closed forms' pick "
                       "beside it)")
    assert len(lines[best + 2:-1]) == 11  # one line per size
    assert lines[-2].split()[:2] == ["1073741824", "nvls"]  # in-switch reduction wins at 1 GiB
    assert (out / "dgx-h100.png").stat().st_size > 10_000


def test_dgx_results_file_has_the_contract_columns_and_values(dgx_run):
    _, out = dgx_run
    frame = pd.read_csv(out / "dgx-h100.csv")
    assert list(frame.columns[:14]) == CONTRACT_COLUMNS
    assert list(frame.columns) == list(RESULT_COLUMNS)
    assert set(frame.scenario) == {"dgx-h100"} and set(frame.topology) == {"dgx_h100"}
    assert set(frame.ranks) == {8} and frame.verified.all()
    assert list(frame.algorithm.unique()) == ["ring", "nvls", "direct", "halving_doubling",
                                              "recursive_doubling", "binomial_tree", "tree",
                                              "double_binary_tree"]  # all but hierarchical apply
    frame = frame[frame.algorithm == "ring"]
    assert list(frame.size_bytes) == [1024 * 4**k for k in range(11)]  # 1 KiB .. 1 GiB by x4
    # one DGX: every ring hop is GPU -> NVSwitch -> GPU on its own links, so no link is shared
    assert frame.sim_time_s.to_numpy() == pytest.approx(frame.model_time_s.to_numpy(), rel=1e-9)
    # 1 GiB by hand: alpha = 2 x 300 ns, beta = 1/450 GB/s, gamma = 1/1.1 TB/s, c = 1 GiB / 8
    c = (1 << 30) / 8
    expected = 14 * (600e-9 + c / 450e9) + 7 * c / 1.1e12
    last = frame.iloc[-1]
    assert last.sim_time_s == pytest.approx(expected, rel=1e-12)
    assert last.algbw_GBps == pytest.approx((1 << 30) / expected / 1e9, rel=1e-12)
    assert last.busbw_GBps == pytest.approx(last.algbw_GBps * 2 * 7 / 8, rel=1e-12)


def test_rerun_gives_identical_results(dgx_run, tmp_path):
    _, out = dgx_run
    assert main(["run", "scenarios/dgx.yaml", "--output", str(tmp_path), "--no-plot"]) == 0
    assert (tmp_path / "dgx-h100.csv").read_text() == (out / "dgx-h100.csv").read_text()


class _ForgetsToReduce(RingAllreduce):
    """A broken ring: the reduce-scatter copies instead of reducing."""

    name = "broken_ring"

    def program(self, me, comm):
        p = comm.size
        chunk = comm.chunks(p)
        for step in range(2 * (p - 1)):
            comm.send((me + 1) % p, chunk[(me - step) % p])
            yield comm.recv((me - 1) % p, into=chunk[(me - step - 1) % p], op=COPY)


def test_failed_verification_exits_1_and_still_writes_results(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(REGISTRY[Collective.ALLREDUCE], "broken_ring", _ForgetsToReduce())
    scenario = tmp_path / "broken.yaml"
    scenario.write_text("topology: {kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}\n"
                        f"algorithms: [broken_ring]\nsizes: [4KiB]\noutput: {tmp_path}\n")
    assert main(["run", str(scenario), "--no-plot"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{scenario}: verification failed for 1 run(s), first broken_ring at "
                          "4096 bytes (max abs error ")
    assert not pd.read_csv(tmp_path / "broken.csv").verified.any()
