"""NCCL's choice: under ``execution: nccl`` every row states NCCL's model time for its NCCL
algorithm and protocol, the row NCCL's tuner would run is marked, and with ``all`` the report
sets it beside the fastest simulated alternative; ``algorithms: auto`` runs that pick alone, one
point a size, each row the very row ``all`` gives it (issue 36); by hand on one DGX H100."""

import json
import math

import pandas as pd
import pytest

from simulator import InputError, format_table, nccl_choice_per_size, simulate
from simulator.scenario import scenario_from_dict
from tests.conftest import runs_all

H100 = {"topology": {"preset": "dgx_h100"}, "execution": "nccl"}


@pytest.mark.registry
def test_every_row_carries_nccl_model_time_and_the_pick_is_marked():
    frame = simulate({**H100, "algorithms": "all", "sizes": ["32KiB", "8MiB"]})
    assert list(frame.algorithm.unique()) == runs_all({**H100, "sizes": ["32KiB", "8MiB"]})
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
    frame = simulate({**H100, "algorithms": "all", "sizes": ["32KiB", "64MiB"]})
    choice = nccl_choice_per_size(frame)
    first, second = choice.itertuples(index=False)
    # at 32 KiB the direct exchange beats NCCL's ring on this model: 2 LL steps, not 14, each
    # rank's link carrying its 7 chunks of 4 KiB at the LL cap, 141 GB/s
    assert (first.pick, first.protocol, first.fastest, first.best) == ("ring", "LL", "direct", False)
    assert first.fastest_time_s == pytest.approx(6.6e-6 + 2 * (0.6e-6 + 7 * 4096 / 141e9), rel=1e-9)
    # at 64 MiB NCCL's tuner picks NVLS, and nothing the user could run without registering
    # the buffers is faster ...
    assert (second.pick, second.fastest, second.best) == ("nvls", "nvls", True)
    # ... but NVLS's symmetric multicast kernel, which NCCL runs only on buffers registered as
    # symmetric windows (nccl.symmetric), is
    registered = nccl_choice_per_size(frame, registered=True).iloc[1]
    assert (registered.fastest, registered.best) == ("two_shot_multicast", False)
    assert registered.fastest_time_s < second.sim_time_s
    for symmetric, fastest in ((False, "(the pick)"), (True, "two_shot_multicast/Simple")):
        lines = format_table(frame, registered=symmetric).splitlines()
        block = lines[lines.index("# NCCL's choice per size (its tuner's pick and model time; "
                                  "the fastest simulated point beside it)") + 2:]
        assert block[0].split()[:2] == ["32768", "ring/LL"] and block[0].split()[-1] == "NO"
        time_us = (registered if symmetric else second).fastest_time_s * 1e6
        assert block[1].split() == ["67108864", "nvls/Simple", f"{second.nccl_time_s * 1e6:.2f}",
                                    f"{second.sim_time_s * 1e6:.2f}", *fastest.split(),
                                    f"{time_us:.2f}", "NO" if symmetric else "yes"]
        assert len(block) == 2  # the block ends the table


def test_auto_runs_nccls_pick_alone_and_says_how_to_get_the_alternatives():
    # one point a size, NCCL's pick, each the very row all gives it; the choice block has no
    # alternative to name and says how to run them
    auto = simulate({**H100, "algorithms": "auto", "sizes": ["32KiB", "64MiB"]})
    every = simulate({**H100, "algorithms": "all", "sizes": ["32KiB", "64MiB"]})
    assert list(zip(auto.algorithm, auto.size_bytes, auto.protocol, strict=True)) == [
        ("ring", 32768, "LL"), ("nvls", 67108864, "Simple")]
    assert auto.nccl_pick.tolist() == [True, True]
    picks = every[every.nccl_pick.astype(bool)].reset_index(drop=True)
    pd.testing.assert_frame_equal(auto, picks)
    text = format_table(auto, picks_only=True)
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert [line.split()[4] for line in lines[:2]] == ["ring", "nvls"]
    assert lines[2:] == [
        f"{32768:>12} {'ring/LL':>24} {auto.nccl_time_s[0] * 1e6:>11.2f} "
        f"{auto.sim_time_s[0] * 1e6:>11.2f}",
        f"{67108864:>12} {'nvls/Simple':>24} {auto.nccl_time_s[1] * 1e6:>11.2f} "
        f"{auto.sim_time_s[1] * 1e6:>11.2f}"]
    assert text.endswith(
        "# NCCL's choice per size (its tuner's pick and model time; the simulated time beside "
        "it)\n"
        "#    size(B)                NCCL pick    NCCL(us)     sim(us)\n"
        f"{lines[2]}\n{lines[3]}\n"
        "# the fastest simulated alternative beside each pick: algorithms: all (or a list) under "
        "execution: nccl\n")


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


# --- auto runs what NCCL runs (issue 36, item 0) ----------------------------------------------

EIGHT = {"topology": {"preset": "dgx_h100", "nodes": 8}}


@pytest.mark.registry
def test_auto_on_eight_dgx_h100_runs_one_point_a_size_the_row_all_gives_it():
    # 64 H100s: NCCL's tuner picks the double binary tree (LL) at 4 KiB and NVLSTree at 16 MiB;
    # auto simulates those two points only, rows in all's order (by algorithm, then size)
    sizes = ["4KiB", "16MiB"]
    auto = simulate({**EIGHT, "algorithms": "auto", "sizes": sizes})
    every = simulate({**EIGHT, "algorithms": "all", "sizes": sizes})
    assert list(zip(auto.algorithm, auto.size_bytes, auto.protocol, strict=True)) == [
        ("nvls_tree", 16 << 20, "Simple"), ("double_binary_tree", 4096, "LL")]
    assert auto.nccl_pick.tolist() == [True, True] and auto.verified.all()
    assert len(every) == 2 * len(runs_all({**EIGHT, "sizes": sizes}))  # every one that applies
    assert every.nccl_pick.sum() == 2
    pd.testing.assert_frame_equal(auto, every[every.nccl_pick.astype(bool)].reset_index(drop=True))


def _plans(fields):
    from simulator.runner import checked_setup, outlook, plan_points, settings_of

    scenario = scenario_from_dict(fields, source="s.yaml")
    setup = checked_setup(scenario, settings_of(scenario))
    plans = plan_points(scenario, setup, settings_of(scenario))
    return plans, outlook(scenario, setup, plans)


ONE_SHOT_AT_2GIB = (
    "one_shot at 2GiB left out: execution: 'one_shot': NCCL runs no AllReduce_AGxLL_R, "
    "AllReduce_AGxLLMC_R for 2147483648 bytes (LL kernels count in 32-bit ints below 2147483648 "
    "bytes, the others below 68719476736, the size in whole 1024-byte cells)")


@pytest.mark.registry
def test_auto_at_2gib_on_one_dgx_h100_runs_nccls_pick_where_it_exited_2(tmp_path, capsys):
    # it ran every algorithm, one_shot too, whose LL kernels NCCL never runs from 2 GiB: exit 2
    from simulator.cli import main

    path = tmp_path / "big.yaml"
    path.write_text("name: big\ntopology: {preset: dgx_h100}\nalgorithms: auto\n"
                    "sizes: [1MiB, 2GiB]\n")
    assert main(["run", str(path), "--output", str(tmp_path / "out"), "--no-plot"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"{path}: 2 points to simulate (NCCL's pick at each of 2 sizes); ")
    assert err.count("\n") == 1  # nothing left out: NCCL's picks are ring and NVLS
    frame = pd.read_csv(tmp_path / "out" / "big.csv")
    assert list(zip(frame.algorithm, frame.size_bytes, frame.protocol, strict=True)) == [
        ("ring", 1 << 20, "LL"), ("nvls", 2 << 30, "Simple")]
    assert frame.nccl_pick.all() and frame.verified.all()
    # all plans one_shot at 1 KiB and leaves it out at 2 GiB, with a note (planned only here)
    plans, coming = _plans({**H100, "algorithms": "all", "sizes": ["1KiB", "2GiB"]})
    assert coming.notes == tuple(left.note for left in plans.left_out) == (ONE_SHOT_AT_2GIB,)
    assert [(p.algorithm.name, p.size_bytes) for p in plans.plans
            if p.algorithm.name == "one_shot"] == [("one_shot", 1024)]
    applying = len(runs_all({**H100, "sizes": ["1KiB", "2GiB"]}))
    assert coming.describe().startswith(f"{2 * applying - 1} points to simulate ({applying} "
                                        "algorithms × 2 sizes, 1 left out); ")
    # auto, planned: one point a size, said so
    plans, coming = _plans({**H100, "algorithms": "auto", "sizes": ["1KiB", "2GiB"]})
    assert [(p.algorithm.name, p.size_bytes) for p in plans.plans] == [
        ("ring", 1024), ("nvls", 2 << 30)]
    assert coming.notes == () and coming.describe().startswith(
        "2 points to simulate (NCCL's pick at each of 2 sizes); ")


def test_the_line_before_a_run_says_what_nccl_runs_at_each_size(tmp_path, capsys):
    # issue 37: the plans hold NCCL's pick, so it is said before anything runs; on one DGX H100
    # NCCL's tuner runs Ring/LL up to 1 MiB and NVLS from 2 MiB (tests/test_nccl.py)
    from simulator.cli import main

    sizes = ["1KiB", "32KiB", "1MiB", "2MiB", "1GiB"]
    _, coming = _plans({**H100, "algorithms": ["ring", "nvls"], "sizes": sizes})
    assert coming.picks == ((1024, "Ring/LL"), (32 << 10, "Ring/LL"), (1 << 20, "Ring/LL"),
                            (2 << 20, "NVLS/Simple"), (1 << 30, "NVLS/Simple"))
    assert coming.describe().endswith("; NCCL picks Ring/LL from 1KiB to 1MiB, NVLS/Simple from "
                                      "2MiB to 1GiB")
    # registered buffers: the symmetric kernel NCCL launches ahead of its tuner
    _, coming = _plans({**H100, "algorithms": ["one_shot"], "sizes": ["4KiB"],
                        "nccl": {"symmetric": True}})
    assert coming.describe().endswith("; NCCL picks AllReduce_AGxLLMC_R at 4KiB")
    # the ideal wire has no NCCL, and says nothing of it; the command line prints the line
    _, coming = _plans({**H100, "execution": "ideal", "algorithms": ["ring"], "sizes": ["1KiB"]})
    assert coming.picks == () and "NCCL" not in coming.describe()
    path = tmp_path / "two.yaml"
    path.write_text("name: two\ntopology: {preset: dgx_h100}\nalgorithms: [ring]\n"
                    "sizes: [1KiB, 2MiB]\n")
    assert main(["run", str(path), "--output", str(tmp_path / "out"), "--no-plot"]) == 0
    err = capsys.readouterr().err
    assert err.endswith("; NCCL picks Ring/LL at 1KiB, NVLS/Simple at 2MiB\n")
    assert err.count("\n") == 1


def test_all_leaves_out_a_point_that_cannot_run_at_its_size_and_says_so(tmp_path, capsys):
    # an all-to-all cuts each buffer into p = 3 blocks: 16 bytes (4 float32) cannot be cut, so
    # both algorithms are left out there, one note each on stderr (even with --quiet); a list
    # that names them keeps the error
    from simulator.cli import main

    path = tmp_path / "a2a.yaml"
    path.write_text("topology: {kind: switch, ranks: 3, bandwidth: 25GB/s, latency: 1us}\n"
                    "collective: alltoall\nalgorithms: all\nsizes: [12, 16]\n")
    assert main(["run", str(path), "--output", str(tmp_path / "out"), "--quiet",
                 "--no-plot"]) == 0
    why = ("sizes: '{}' cuts each rank's buffer into 3 equal chunks: expected sizes that are "
           "multiples of 12 bytes (3 float32 elements), got 16")
    assert capsys.readouterr().err == "".join(
        f"{path}: {name} at 16B left out: {why.format(name)}\n" for name in ("direct", "pairwise"))
    frame = pd.read_csv(tmp_path / "out" / "a2a.csv")
    assert list(zip(frame.algorithm, frame.size_bytes, strict=True)) == [("direct", 12),
                                                                         ("pairwise", 12)]
    # direct: each 4-byte block over two hops of 1 us + 4 B / 25 GB/s, all at once; pairwise:
    # 3 steps (an odd count idles each rank in one), its sends sharing downlinks
    assert frame.sim_time_s.tolist() == pytest.approx([2 * (1e-6 + 4 / 25e9), 6.00064e-6],
                                                      rel=1e-12)
    path.write_text(path.read_text().replace("algorithms: all", "algorithms: [direct, pairwise]"))
    assert main(["run", str(path), "--output", str(tmp_path / "listed"), "--quiet"]) == 2
    assert capsys.readouterr().err == f"{path}: {why.format('direct')}\n"


def test_where_nccls_pick_cannot_run_its_size_gets_a_note_and_no_row(tmp_path, capsys):
    # without in-switch reduction the nvls schedule cannot run, yet NCCL's model still picks
    # NVLS at 8 MiB: that size gets a note and no row; with no point left it is an error
    from simulator.cli import main

    fields = {"topology": {"preset": "dgx_h100", "nvswitch_reduction": False},
              "algorithms": "auto", "sizes": ["32KiB", "8MiB"]}
    why = ("NCCL's pick at 8MiB (nvls/Simple) left out: algorithm: 'nvls' cannot run on "
           "topology dgx_h100[nvswitch_reduction=False]: it needs one switch with in-switch "
           "reduction (reduction: true) cabled to every GPU, such as the NVSwitch of a single "
           "dgx_h100 node")
    plans, coming = _plans(fields)
    assert [(p.algorithm.name, p.size_bytes) for p in plans.plans] == [("ring", 32768)]
    assert coming.notes == (why,)
    assert coming.describe().startswith("1 point to simulate (NCCL's pick at 1 of 2 sizes); ")
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps({**fields, "sizes": ["8MiB"]}))
    assert main(["run", str(path), "--output", str(tmp_path / "out"), "--quiet"]) == 2
    assert capsys.readouterr().err == f"{path}: algorithms: no point left to simulate: {why}\n"
    assert not (tmp_path / "out").exists()


def test_auto_on_one_rank_is_an_error_that_says_why():
    with pytest.raises(InputError) as error:
        simulate(scenario_from_dict({"topology": {"preset": "dgx_h100", "gpus_per_node": 1},
                                     "algorithms": "auto", "sizes": [1024]}, source="s.yaml"))
    assert str(error.value) == (
        "s.yaml: algorithms: expected a list of algorithms (or all): auto runs NCCL's pick, and "
        "NCCL picks none on one rank (it copies the buffer) on topology "
        "dgx_h100[gpus_per_node=1]")


def test_a_stopped_auto_run_resumes_with_its_pick_rows(tmp_path, capsys):
    from simulator.cli import main

    path = tmp_path / "s.yaml"
    path.write_text("topology: {preset: dgx_h100}\nalgorithms: auto\nsizes: [32KiB, 8MiB]\n")
    out = tmp_path / "out"
    assert main(["run", str(path), "--output", str(out), "--no-plot", "--quiet"]) == 0
    csv = out / "s.csv"
    whole = csv.read_bytes()
    lines = whole.splitlines(keepends=True)
    assert len(lines) == 3  # the header and NCCL's two picks
    csv.write_bytes(lines[0] + lines[1])  # stopped after ring at 32 KiB
    capsys.readouterr()
    assert main(["run", str(path), "--output", str(out), "--no-plot", "--resume"]) == 0
    assert csv.read_bytes() == whole
    assert "(1 kept from the stopped run)" in capsys.readouterr().err


def test_a_trace_point_under_auto_is_one_of_nccls_picks(tmp_path, capsys):
    from simulator.cli import main

    path = tmp_path / "s.yaml"
    path.write_text("topology: {preset: dgx_h100}\nalgorithms: auto\nsizes: [32KiB, 8MiB]\n")
    assert main(["run", str(path), "--output", str(tmp_path / "out"), "--quiet",
                 "--trace", str(tmp_path / "t.json"), "--trace-point", "ring:8MiB"]) == 2
    assert capsys.readouterr().err == (
        "command line: --trace-point: expected ALGO:SIZE, a point of the run (ring:32KiB, "
        "nvls:8MiB), got 'ring:8MiB'\n")
    assert main(["run", str(path), "--output", str(tmp_path / "out"), "--quiet", "--no-plot",
                 "--trace", str(tmp_path / "t.json"), "--trace-point", "nvls:8MiB"]) == 0
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]


def test_auto_prints_one_row_a_size_in_size_order():
    # on two DGX H100 the plan runs NVLSTree's points before the double binary tree's
    two = {"topology": {"preset": "dgx_h100", "nodes": 2}, "algorithms": "auto",
           "sizes": ["1KiB", "4MiB"]}
    auto = simulate(two)
    assert auto.algorithm.tolist() == ["nvls_tree", "double_binary_tree"]
    lines = [line.split() for line in format_table(auto, picks_only=True).splitlines()
             if not line.startswith("#")]
    assert [(int(line[0]), line[4]) for line in lines[:2]] == [
        (1024, "double_binary_tree"), (4194304, "nvls_tree")]
