"""Calibration from an nccl-tests log: a log made from known parameters is fitted back, the
shipped H200 data calibrate and the result runs as a preset, and bad input is one line."""

from dataclasses import replace

import numpy as np
import pytest

from simulator import simulate
from simulator.calibration import calibrate, derived, modelled_us, nelder_mead
from simulator.cli import main
from simulator.measured.nccl_tests import parse_csv
from simulator.model.machine import Machine, NcclFacts
from simulator.scenario.parse import load_preset
from simulator.scenario.spec import TopologySpec
from tests.conftest import REPO

SIZES = [2**k for k in range(15, 34, 2)]  # 32 KiB .. 8 GiB


def test_nelder_mead_finds_a_quadratics_minimum():
    minimum = nelder_mead(lambda x: float((x[0] - 3) ** 2 + 10 * (x[1] + 1) ** 2), np.zeros(2))
    assert minimum == pytest.approx([3.0, -1.0], abs=1e-5)


def synthetic(preset: str, truth: NcclFacts) -> str:
    """A CSV log of the modelled times with ``truth`` in force, as a measurement would give."""
    machine = Machine.of(load_preset(preset).build())
    times = modelled_us(machine, truth, SIZES)
    return "size_bytes,time_us,busbw_GBps\n" + "".join(
        f"{size},{time!r},{size / time / 1e3 * 1.75!r}\n" for size, time in zip(SIZES, times,
                                                                              strict=True))


def test_a_log_made_from_known_parameters_is_fitted_back_within_1_percent():
    # A100: NCCL's picks are rings at every size (LL, LL128, Simple): the NVLink rate and the
    # launch latency are both pinned down; no size runs NVLS, so its rate stays as derived
    truth = NcclFacts(nvlink_Bps=220e9, nvls_Bps=1.0, launch_s=3e-6)
    result = calibrate(parse_csv(synthetic("dgx_a100", truth), "synthetic.csv"), "dgx_a100")
    machine = Machine.of(load_preset("dgx_a100").build())
    assert result.before == derived(machine)
    assert result.after.nvlink_Bps == pytest.approx(220e9, rel=0.01)
    assert result.after.launch_s == pytest.approx(3e-6, rel=0.01)
    assert result.fixed == ("nccl_nvls_bandwidth",)
    assert result.after.nvls_Bps == result.before.nvls_Bps
    assert result.geomean_error("after") < 1e-3 < result.geomean_error("before")


def test_on_h100_the_ll_cap_leaves_the_nvlink_rate_to_the_model():
    # H100: rings run LL up to 1 MiB, capped at llMaxBw (141 GB/s) below 0.5 × the NVLink rate,
    # then NVLS: the NVLink rate moves no modelled time, and is reported so
    truth = NcclFacts(nvlink_Bps=330e9, nvls_Bps=250e9, launch_s=3e-6)
    result = calibrate(parse_csv(synthetic("dgx_h100", truth), "synthetic.csv"), "dgx_h100")
    assert result.fixed == ("nccl_nvlink_bandwidth",)
    assert result.after.nvls_Bps == pytest.approx(250e9, rel=0.01)
    assert result.after.launch_s == pytest.approx(3e-6, rel=0.01)


def test_the_h200_data_calibrate_and_the_preset_runs(tmp_path, capsys):
    output = tmp_path / "h100.yaml"
    log = REPO / "docs" / "reference" / "nccl-tests-h200.csv"
    assert main(["calibrate", str(log), "--preset", "dgx_h100", "--output", str(output)]) == 0
    out = capsys.readouterr().out
    before, after = (float(part.split()[1]) for part in out.split("geometric mean |error|: ")[1]
                     .split("\n")[0].split(", "))
    assert after < before == pytest.approx(5.8, abs=0.05)  # the fidelity table's figure
    text = output.read_text()
    assert text.startswith(load_preset_text("dgx_h100"))
    assert "# Calibrated by `python -m simulator calibrate" in text
    fitted = {line.split(":")[0]: line.split(":")[1].split("#")[0].strip()
              for line in text.splitlines() if line.startswith("nccl_")}
    assert set(fitted) == {"nccl_nvlink_bandwidth", "nccl_nvls_bandwidth", "nccl_launch_latency"}
    # the calibrated preset as a scenario's topology: ring Simple at 1 GiB moves at its rate
    [row] = simulate({"topology": {"preset": str(output)}, "execution": "nccl",
                      "protocol": "Simple", "algorithms": ["ring"], "sizes": ["1GiB"]}).itertuples()
    rate = float(fitted["nccl_nvlink_bandwidth"].removesuffix("GB/s")) * 1e9
    launch = float(fitted["nccl_launch_latency"].removesuffix("us")) * 1e-6
    fill = (2 << 20) * 12 / rate  # one 2 MiB chunk on one of 12 channels (fill_s)
    assert row.sim_time_s == pytest.approx(
        8.4e-6 + launch + fill + 14 * (3.4e-6 + (1 << 30) / 8 / rate), rel=1e-9)
    assert row.topology == "h100"


def load_preset_text(name):
    from simulator.scenario.presets import preset_text

    return preset_text(name).rstrip()


@pytest.mark.parametrize("text, args, message", [
    ("not a log\n", ["--preset", "dgx_h100"],
     "line 1: expected nccl-tests output (a '#  size  count  type ...' header line), found none"),
    ("size_bytes,time_us,busbw_GBps\n8,10.0,0\n", ["--preset", "dgx_h100"],
     ": expected sizes of 32768 bytes or more to fit, found none"),
])
def test_bad_logs_are_one_line_errors(tmp_path, capsys, text, args, message):
    log = tmp_path / ("m.csv" if text.startswith("size") else "m.log")
    log.write_text(text)
    assert main(["calibrate", str(log), *args, "--output", str(tmp_path / "o.yaml")]) == 2
    assert capsys.readouterr().err == f"{log}{'' if message.startswith(':') else ': '}{message}\n"
    assert not (tmp_path / "o.yaml").exists()


def test_a_preset_without_gpu_facts_is_refused(tmp_path, capsys):
    log = REPO / "docs" / "reference" / "nccl-tests-h200.csv"
    assert main(["calibrate", str(log), "--preset", "nope", "--output", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == f"{log}: --preset: no preset 'nope'\n"


def test_a_two_node_log_fits_the_networks_terms_back():
    # 2 × DGX H100: a log made with NCCL reaching 40 GB/s a NIC and 4 µs more a network step is
    # fitted back; the hosts' own terms (NVLink, NVLS, launch) are a one-node log's to fit
    spec = load_preset("dgx_h100")
    machine = Machine.of(TopologySpec(spec.kind, {**spec.params, "nodes": 2}, spec.label).build())
    truth = replace(derived(machine), net_Bps=40e9, net_latency_s=4e-6)
    times = modelled_us(machine, truth, SIZES)
    log = "size_bytes,time_us,busbw_GBps\n" + "".join(
        f"{size},{time!r},1\n" for size, time in zip(SIZES, times, strict=True))
    result = calibrate(parse_csv(log, "two-node.csv"), "dgx_h100", nodes=2)
    assert result.parameters == ("nccl_net_bandwidth", "nccl_net_latency")
    assert result.before.net_Bps == pytest.approx(48e9, rel=1e-12)  # 400 Gb/s × NET_BW's 0.96
    assert result.after.net_Bps == pytest.approx(40e9, rel=0.01)
    assert result.after.net_latency_s == pytest.approx(4e-6, rel=0.02)
    assert (result.after.nvlink_Bps, result.after.launch_s) == (result.before.nvlink_Bps, 0.0)
    assert result.geomean_error("after") < 1e-3 < result.geomean_error("before")


def test_nodes_below_one_is_a_one_line_error(tmp_path, capsys):
    log = REPO / "docs" / "reference" / "nccl-tests-h100-2node-ib.csv"
    assert main(["calibrate", str(log), "--preset", "dgx_h100", "--nodes", "0",
                 "--output", str(tmp_path / "o.yaml")]) == 2
    assert capsys.readouterr().err == "command line: --nodes: expected a whole number ≥ 1, got 0\n"


def test_a_log_of_another_collective_is_refused(tmp_path, capsys):
    log = tmp_path / "ag.log"
    log.write_text("# Collective test starting: all_gather_perf\n"
                   "#       size         count      type   redop    root     time   algbw   busbw "
                   "#wrong     time   algbw   busbw #wrong\n"
                   "  1073741824     268435456     float    none      -1   6759.0  158.86  297.86"
                   "      0   6737.4  159.37  298.82      0\n")
    assert main(["calibrate", str(log), "--preset", "dgx_h100", "--output",
                 str(tmp_path / "out.yaml")]) == 2
    assert capsys.readouterr().err == (f"{log}: measures all_gather_perf, but calibrate fits "
                                       "allreduce: give an all_reduce_perf log\n")


def test_a_preset_is_a_name_not_a_path(tmp_path, capsys):
    log = tmp_path / "h200.csv"
    log.write_text("size_bytes,time_us,busbw_GBps\n1073741824,4049.67,464.0\n")
    assert main(["calibrate", str(log), "--preset", "../../topologies/dgx_h100", "--output",
                 str(tmp_path / "out.yaml")]) == 2
    assert capsys.readouterr().err == (f"{log}: --preset: no preset "
                                       "'../../topologies/dgx_h100'\n")
