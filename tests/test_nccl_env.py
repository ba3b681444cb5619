"""NCCL_ALGO / NCCL_PROTO in a scenario (``nccl: {algo, proto}``, issue 21 item 5): NCCL's list
syntax (parseList of src/graph/tuning.cc), what it does to NCCL's pick and to the protocols
``protocol: auto`` picks, and every error, on one DGX H100 with the pick's time worked by hand
(docs/reference/nccl-model.md §1.3-§1.5)."""

import json

import pytest

from simulator import InputError, nccl_choice_per_size, simulate
from simulator.model.collective import Collective
from simulator.model.nccl import NcclAlgorithm, Protocol
from simulator.model.nccl_env import NcclEnv, enabled_by
from simulator.scenario import scenario_from_dict

H100 = {"topology": {"preset": "dgx_h100"}, "verify": False}
A, P = NcclAlgorithm, Protocol
ALLREDUCE, BROADCAST = Collective.ALLREDUCE, Collective.BROADCAST


@pytest.mark.parametrize(("text", "collective", "enabled"), [
    ("", ALLREDUCE, set(A)),                                   # unset: everything
    ("ring", ALLREDUCE, {A.RING}),
    ("Tree,RING", ALLREDUCE, {A.TREE, A.RING}),                # case does not matter
    (" ring , tree ", ALLREDUCE, {A.TREE, A.RING}),            # blanks around names neither
    ("^nvlstree", ALLREDUCE, set(A) - {A.NVLS_TREE}),          # ^: all but those
    ("^", ALLREDUCE, set(A)),
    ("ring;allreduce:tree", ALLREDUCE, {A.TREE}),              # a later entry replaces its own
    ("ring;allreduce:tree", BROADCAST, {A.RING}),              # ... and no other collective's
    ("allreduce:^ring", ALLREDUCE, set(A) - {A.RING}),
    ("allreduce:^ring", BROADCAST, set(A)),
    ("broadcast:ring;AllReduce:nvls,tree", ALLREDUCE, {A.NVLS, A.TREE}),
])
def test_algo_list_syntax(text, collective, enabled):
    assert enabled_by(text, tuple(A), collective, "algorithm") == enabled


@pytest.mark.parametrize(("text", "enabled"), [
    ("LL128", {P.LL128}), ("^LL128;allreduce:LL128", {P.LL128}), ("ll,simple", {P.LL, P.SIMPLE}),
    ("^LL128", {P.LL, P.SIMPLE}), ("LL,Simple;allreduce:^LL", {P.LL128, P.SIMPLE}),
])
def test_proto_list_syntax(text, enabled):
    # the examples of parseList's comment in tuning.cc, read for allreduce
    assert NcclEnv(proto=text).enabled(ALLREDUCE).protocols == enabled


def picks(frame):
    picked = frame[frame.nccl_pick.astype(bool)]
    return list(zip(picked.size_bytes, picked.algorithm, picked.protocol, strict=True))


def test_algo_restricts_the_pick_and_the_choice_block():
    frame = simulate({**H100, "algorithms": "all", "sizes": ["8MiB"], "nccl": {"algo": "^nvls"}})
    # without NVLS, Ring LL128 wins at 8 MiB (NVLS/Simple otherwise, test_choice.py): latency
    # baseLat 14 + 14 steps × hwLat 1.9 µs; busbw min(0.92 × 12 × 30, 12 × 36.7) = 331.2 GB/s
    # × nRanks/nsteps 8/14
    assert picks(frame) == [(8388608, "ring", "LL128")]
    ring = frame[frame.nccl_pick.astype(bool)].iloc[0]
    assert ring.nccl_time_s == pytest.approx((40.6 + 8388608 / (1000 * 331.2 * 8 / 14)) * 1e-6)
    assert "nvls" in set(frame.algorithm)  # every algorithm still runs: only the pick narrows
    assert list(nccl_choice_per_size(frame).pick) == ["ring"]


def test_proto_restricts_the_pick_and_the_rows_protocols():
    frame = simulate({**H100, "algorithms": "all", "sizes": ["32KiB"],
                      "nccl": {"proto": "LL128"}})
    # Tree LL128 on one node: latency 14 + 2 × 7 × 1.25 µs; busbw min(0.92 × 12 × 30, 12 × 38.7)
    # = 331.2, × 7/9 = 257.6 (under 12 × 36.7), halved, × the tree correction at 32 KiB (0.7)
    assert picks(frame) == [(32768, "double_binary_tree", "LL128")]
    tree = frame[frame.nccl_pick.astype(bool)].iloc[0]
    assert tree.nccl_time_s == pytest.approx((31.5 + 32768 / (1000 * 257.6 * 0.5 * 0.7)) * 1e-6)
    assert set(frame.protocol) == {"LL128"}
    assert "nvls" not in set(frame.algorithm)  # NVLS runs Simple only: all leaves it out
    auto = simulate({**H100, "algorithms": "auto", "sizes": ["32KiB"], "nccl": {"proto": "LL128"}})
    assert picks(auto) == [(32768, "double_binary_tree", "LL128")]  # the pick alone


def test_settings_record_the_restriction(tmp_path):
    from simulator.output.writers import write_settings
    from simulator.settings import RunSettings

    scenario = scenario_from_dict({**H100, "algorithms": "auto", "sizes": [4096],
                                   "nccl": {"algo": "^nvlstree"}})
    write_settings(simulate(scenario), scenario, RunSettings(), tmp_path / "s.json")
    described = json.loads((tmp_path / "s.json").read_text())["scenario"]
    assert described["nccl"] == {"algo": "^nvlstree"}
    assert scenario_from_dict(described).nccl == scenario.nccl


ALGO_LIST = ("expected a list as NCCL_ALGO takes it: Tree, Ring, CollNetDirect, CollNetChain, "
             "NVLS, NVLSTree, PAT separated by commas (a leading ^: all but those; "
             "COLLECTIVE:LIST after a ; for one collective), got ")
PROTO_LIST = ("expected a list as NCCL_PROTO takes it: LL, LL128, Simple separated by commas (a "
              "leading ^: all but those; COLLECTIVE:LIST after a ; for one collective), got ")


@pytest.mark.parametrize(("nccl", "message"), [
    ({"algo": "^nvlstre"},
     f"nccl.algo: {ALGO_LIST}'^nvlstre': no algorithm 'nvlstre'; did you mean 'NVLSTree'?"),
    ({"proto": "ll129"}, f"nccl.proto: {PROTO_LIST}'ll129': no protocol 'll129'; did you mean 'LL128'?"),
    ({"algo": "allredce:ring"},
     f"nccl.algo: {ALGO_LIST}'allredce:ring': no collective 'allredce' (Broadcast, Reduce, "
     f"AllGather, ReduceScatter, AllReduce); did you mean 'AllReduce'?"),
    ({"algo": "ring;tree"},
     f"nccl.algo: {ALGO_LIST}'ring;tree': entry 'tree' has no COLLECTIVE: prefix, which only "
     f"the first may lack"),
    ({"algo": "allreduce:ring:tree"},
     f"nccl.algo: {ALGO_LIST}'allreduce:ring:tree': entry 'allreduce:ring:tree' has more than "
     f"one ':'"),
    ({"proto": "allreduce:"},
     f"nccl.proto: {PROTO_LIST}'allreduce:': entry 'allreduce:' names no protocol"),
    ({"algo": ["ring"]}, f"nccl.algo: {ALGO_LIST}['ring']"),
    ({"proto": "^LL,LL128,Simple"},
     "nccl.proto: expected a list that leaves allreduce a protocol, got '^LL,LL128,Simple'"),
    ({"algos": "ring"}, "nccl.algos: unknown key; did you mean 'algo'?"),
])
def test_a_bad_list_is_a_one_line_error(nccl, message, tmp_path, capsys):
    with pytest.raises(InputError) as error:
        scenario_from_dict({**H100, "sizes": [4096], "nccl": nccl}, source="s.yaml")
    assert str(error.value) == f"s.yaml: {message}"
    from simulator.cli import main

    path = tmp_path / "s.yaml"
    path.write_text(json.dumps({**H100, "sizes": [4096], "nccl": nccl}))  # JSON is YAML
    assert main(["run", str(path), "--output", str(tmp_path / "out"), "--quiet"]) == 2
    assert capsys.readouterr().err == f"{path}: {message}\n"


@pytest.mark.parametrize(("fields", "message"), [
    ({"execution": "ideal", "nccl": {"algo": "ring"}},
     "nccl: expected no nccl with execution: ideal (NCCL_ALGO and NCCL_PROTO restrict NCCL's "
     "choice: set execution: nccl)"),
    ({"protocol": "LL", "nccl": {"proto": "^LL"}},
     "protocol: expected a protocol nccl.proto '^LL' leaves (LL128, Simple), got LL"),
])
def test_a_restriction_that_contradicts_the_scenario_is_an_error(fields, message):
    with pytest.raises(InputError) as error:
        scenario_from_dict({**H100, "sizes": [4096], **fields}, source="s.yaml")
    assert str(error.value) == f"s.yaml: {message}"


@pytest.mark.parametrize(("fields", "message"), [
    # NVLS across nodes needs CollNet (tuning.cc): two DGX H100 run Tree, Ring and NVLSTree
    ({"topology": {"preset": "dgx_h100", "nodes": 2}, "algorithms": "auto",
      "nccl": {"algo": "nvls"}},
     "nccl.algo: expected a list that leaves NCCL's tuner an algorithm it can run on topology "
     "dgx_h100[nodes=2] (Tree, Ring, NVLSTree), got 'nvls'"),
    ({"algorithms": "auto", "nccl": {"algo": "nvls", "proto": "LL"}},
     "nccl.proto: expected a list that leaves NCCL's tuner a protocol for the algorithms "
     "nccl.algo leaves on topology dgx_h100 (NVLS/Simple), got 'LL'"),
    ({"algorithms": ["ring", "nvls"], "nccl": {"proto": "LL128"}},
     "nccl.proto: 'nvls': NCCL runs NVLS with Simple only, which 'LL128' leaves out"),
])
def test_a_restriction_that_leaves_nothing_here_is_an_error_before_anything_runs(fields, message):
    with pytest.raises(InputError) as error:
        simulate(scenario_from_dict({**H100, "sizes": [4096], **fields}, source="s.yaml"))
    assert [str(p) for p in error.value.problems] == [f"s.yaml: {message}"]
