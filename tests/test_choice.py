"""NCCL's choice (``algorithms: auto``): every row states NCCL's model time for its NCCL
algorithm and protocol, the row NCCL's tuner would run is marked, and the report sets it beside
the fastest simulated alternative; by hand on one DGX H100."""

import json
import math

import pytest

from simulator import InputError, format_table, nccl_choice_per_size, simulate
from simulator.scenario import scenario_from_dict

H100 = {"topology": {"preset": "dgx_h100"}, "execution": "nccl"}


def test_every_row_carries_nccl_model_time_and_the_pick_is_marked():
    frame = simulate({**H100, "algorithms": "auto", "sizes": ["32KiB", "8MiB"]})
    assert set(frame.algorithm) == {"ring", "direct", "one_shot", "two_shot", "two_shot_multicast",
                                    "halving_doubling", "recursive_doubling", "swing", "bine",
                                    "binomial_tree", "tree", "double_binary_tree", "nvls"}
    picks = frame[frame.nccl_pick.astype(bool)]
    assert list(zip(picks.size_bytes, picks.algorithm, picks.protocol, strict=True)) == [
        (32768, "ring", "LL"), (8388608, "nvls", "Simple")]
    # Ring LL at 32 KiB (nccl-model.md §1.4-1.5): 6.6 + 14 × 0.6 µs, then 32768 B at
    # min(llMaxBw 141, 0.5 × 12 × 30) GB/s of busbw × 8/14
    ring = picks.iloc[0]
    assert ring.nccl_time_s == pytest.approx((15.0 + 32768 / (1000 * 141 * 8 / 14)) * 1e-6)
    # NVLS at 8 MiB: hwLat 25 µs, then 16 channels × min(24 × 0.85 × 15/16 × 2, bwInter 24)
    # GB/s of busbw, × 8/14
    nvls = picks.iloc[1]
    assert nvls.nccl_time_s == pytest.approx((25.0 + 8388608 / (1000 * 16 * 24 * 8 / 14)) * 1e-6)
    # every other family's row states its own prediction; schedules NCCL lacks are never picked
    direct = frame[(frame.algorithm == "direct") & (frame.size_bytes == 32768)].iloc[0]
    assert direct.nccl_time_s == pytest.approx(ring.nccl_time_s)  # Ring LL's model, same family
    assert not direct.nccl_pick


def test_choice_block_names_the_fastest_alternative():
    frame = simulate({**H100, "algorithms": "auto", "sizes": ["32KiB", "64MiB"]})
    choice = nccl_choice_per_size(frame)
    first, second = choice.itertuples(index=False)
    # at 32 KiB the direct exchange beats NCCL's ring on this model: 2 LL steps, not 14, each
    # rank's link carrying its 7 chunks of 4 KiB at the LL cap, 141 GB/s
    assert (first.pick, first.protocol, first.fastest, first.best) == ("ring", "LL", "direct", False)
    assert first.fastest_time_s == pytest.approx(6.6e-6 + 2 * (0.6e-6 + 7 * 4096 / 141e9), rel=1e-9)
    # at 64 MiB NCCL's tuner picks NVLS; its symmetric multicast kernel, which NCCL runs only on
    # buffers registered as symmetric windows (nccl.symmetric), would be faster
    assert (second.pick, second.fastest, second.best) == ("nvls", "two_shot_multicast", False)
    text = format_table(frame, picks_only=True)
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert [line.split()[4] for line in lines[:2]] == ["ring", "nvls"]  # only the picks
    assert "# NCCL's choice per size" in text
    assert lines[2].split()[:2] == ["32768", "ring/LL"] and lines[2].split()[-1] == "NO"
    assert lines[3].split() == ["67108864", "nvls/Simple", f"{second.nccl_time_s * 1e6:.2f}",
                                f"{second.sim_time_s * 1e6:.2f}", "two_shot_multicast/Simple",
                                f"{second.fastest_time_s * 1e6:.2f}", "NO"]


def test_ideal_rows_have_no_nccl_view():
    frame = simulate({"topology": {"preset": "dgx_h100"}, "execution": "ideal",
                      "algorithms": ["ring"], "sizes": [4096]})
    assert math.isnan(frame.nccl_time_s[0]) and frame.nccl_pick.isna().all()
    assert nccl_choice_per_size(frame).empty


@pytest.mark.parametrize(("fields", "message"), [
    ({"topology": {"preset": "dgx_h100"}, "execution": "ideal"},
     "algorithms: expected 'all' or a list of algorithm names with execution: ideal: 'auto' "
     "(NCCL's choice) needs execution: nccl"),
    ({**H100, "collective": "broadcast"},
     "algorithms: expected 'all' or a list of algorithm names for broadcast: 'auto' (NCCL's "
     "choice) is modelled for allreduce, reduce_scatter and allgather only"),
])
def test_auto_needs_nccl_allreduce(fields, message):
    with pytest.raises(InputError) as error:
        scenario_from_dict({**fields, "algorithms": "auto", "sizes": [4096]}, source="s.yaml")
    assert str(error.value) == f"s.yaml: {message}"


def test_settings_record_auto(tmp_path):
    from simulator.output.writers import write_settings
    from simulator.settings import RunSettings

    scenario = scenario_from_dict({**H100, "algorithms": "auto", "sizes": [4096]})
    frame = simulate(scenario)
    write_settings(frame, scenario, RunSettings(), tmp_path / "s.json")
    assert json.loads((tmp_path / "s.json").read_text())["scenario"]["algorithms"] == "auto"


def test_auto_where_nccls_model_cannot_pick_is_an_error_that_says_why(tmp_path, capsys):
    # the NCCL model has graphs for Ampere, Hopper and Blackwell only: on a Volta GPU auto would
    # print an empty table and exit 0; it is a one-line input error (exit 2) instead, before
    # anything is simulated
    from simulator.cli import main

    label = "dgx_h100[compute_capability=70]"
    message = ("expected a list of algorithms (or all): auto reports NCCL's pick, and NCCL's cost "
               "model here has no graphs for Volta GPUs (compute capability 70) on topology "
               f"{label}")
    scenario = {"topology": {"preset": "dgx_h100", "compute_capability": 70},
                "algorithms": "auto", "sizes": [8]}
    with pytest.raises(InputError) as error:
        simulate(scenario_from_dict(scenario, source="api"))
    assert [str(p) for p in error.value.problems] == [f"api: algorithms: {message}"]
    path = tmp_path / "v100.yaml"
    path.write_text("name: v100\ntopology: {preset: dgx_h100, compute_capability: 70}\n"
                    "algorithms: auto\nsizes: [8]\n")
    assert main(["run", str(path), "--output", str(tmp_path / "out"), "--quiet"]) == 2
    assert capsys.readouterr().err == f"{path}: algorithms: {message}\n"
    assert not (tmp_path / "out" / "v100.csv").exists()
