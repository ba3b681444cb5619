"""Which NCCL's tuner picks (``nccl: {version: ...}``): 2.26 (NCCL 2.26-2.27) rates NVLS and
NVLSTree as v2.26.2's tuning.cc does, 2.30 (2.30.x, the default) as v2.30.7's; the
execution model's costs stay the latest."""

from __future__ import annotations

import json
from dataclasses import fields, replace

import pytest

from simulator import InputError, simulate
from simulator.model.execution import system_of
from simulator.model.nccl import (
    DEFAULT_GRAPHS,
    Arch,
    CpuVendor,
    Hardware,
    NcclAlgorithm,
    Protocol,
    System,
    Version,
    bandwidth_GBps,
    choose,
    latency_us,
)
from simulator.model.nccl_versions import (
    NCCL_2_26,
    NCCL_2_30,
    TUNINGS,
    tree_and_blackwell_nvls_tree_corrected,
    tree_corrected,
)
from simulator.plan import prepare
from simulator.scenario import scenario_from_dict

NT, S = NcclAlgorithm.NVLS_TREE, Protocol.SIMPLE
HOPPER = DEFAULT_GRAPHS[Arch.HOPPER]


def hopper(nodes: int, version: Version) -> System:
    return System(8 * nodes, nodes, Arch.HOPPER, HOPPER, version=version)


def test_nvlstree_as_nccl_2_26_rates_it():
    # v2.26.2: bw = min(bwIntra 40, bwInter 48, halved beyond two nodes) per channel, 8 channels,
    # x 5/6; latency = NVLink 25 µs + 2·log2(nNodes)·14 µs (no base latency)
    two, four = hopper(2, Version.V2_26), hopper(4, Version.V2_26)
    assert bandwidth_GBps(two, NT, S) == pytest.approx(8 * 40 * 5 / 6)
    assert bandwidth_GBps(four, NT, S) == pytest.approx(8 * 24 * 5 / 6)
    assert latency_us(two, NT, S) == pytest.approx(25 + 2 * 14)
    assert latency_us(four, NT, S) == pytest.approx(25 + 2 * 2 * 14)
    # v2.30.7: min(40 · 0.85 · 7/8 · 2 = 59.5, 48 · 2, the cap 57.7) per channel, x nRanks/nsteps;
    # 20.9 µs a step
    latest = hopper(2, Version.V2_30)
    assert bandwidth_GBps(latest, NT, S) == pytest.approx(8 * 57.7 * 16 / 30)
    assert latency_us(latest, NT, S) == pytest.approx(25 + 2 * 20.9)


def test_the_two_tuners_pick_differently_on_two_h100_nodes():
    # NVLSTree's cheaper network step and 5/6 conversion make it NCCL 2.26's pick from 1 MiB,
    # where 2.30 keeps Tree to 4 MiB on these (one-host) graphs: the times nccl-tests#309
    # measured there (71-94 µs) are NVLSTree's latency, not Tree's
    sizes = (512 << 10, 1 << 20, 4 << 20, 8 << 20)
    old = [choose(hopper(2, Version.V2_26), size).algorithm for size in sizes]
    new = [choose(hopper(2, Version.V2_30), size).algorithm for size in sizes]
    assert old == [NcclAlgorithm.TREE, NT, NT, NT]
    assert new == [NcclAlgorithm.TREE] * 3 + [NT]


def test_blackwell_caps_were_twice_hoppers_before_2_28():
    old = System(8, 1, Arch.BLACKWELL, DEFAULT_GRAPHS[Arch.BLACKWELL], version=Version.V2_26)
    new = System(8, 1, Arch.BLACKWELL, DEFAULT_GRAPHS[Arch.BLACKWELL])
    ring = NcclAlgorithm.RING
    assert new.tuning.per_channel_max_ring_ll128_gbps[Arch.BLACKWELL][0] == 40.0
    assert old.tuning.per_channel_max_ring_ll128_gbps[Arch.BLACKWELL][0] == 73.4
    # 16 channels x 45 GB/s x 0.92 = 662.4, under 16 x 73.4 but over 16 x 40
    assert bandwidth_GBps(old, ring, Protocol.LL128) == pytest.approx(662.4 * 8 / 14)
    assert bandwidth_GBps(new, ring, Protocol.LL128) == pytest.approx(16 * 40.0 * 8 / 14)


def test_each_version_selects_its_record():
    assert set(TUNINGS) == set(Version)
    assert hopper(2, Version.V2_26).tuning is NCCL_2_26
    assert hopper(2, Version.V2_30).tuning is NCCL_2_30
    assert System(8, 1, Arch.HOPPER).tuning is NCCL_2_30  # the default, LATEST
    assert NCCL_2_26.source == "NVIDIA/nccl v2.26.2-1 (commit f44ac759) src/graph/tuning.cc"


def test_2_26_is_2_30_but_for_the_tables_and_rules_v2_26_2_has_otherwise():
    changed = {f.name for f in fields(NCCL_2_30)
               if getattr(NCCL_2_26, f.name) != getattr(NCCL_2_30, f.name)}
    assert changed == {"source", "hw_latency_us", "per_channel_max_ring_ll128_gbps",
                       "per_channel_max_tree_ll128_gbps", "per_channel_max_tree_gbps",
                       "per_channel_max_nvls_tree_gbps", "nvls_efficiency", "tree_correction",
                       "nvls", "correction"}
    # hwLat: NVLSTree's network step alone
    old, new = NCCL_2_26.hw_latency_us, NCCL_2_30.hw_latency_us
    assert {key for key in new if old[key] != new[key]} == {(Hardware.NET, NT, S)}
    assert (old[Hardware.NET, NT, S], new[Hardware.NET, NT, S]) == (14.0, 20.9)
    # the three caps of 2.26: Blackwell's row twice Hopper's, every other row 2.30's
    for name in ("per_channel_max_ring_ll128_gbps", "per_channel_max_tree_ll128_gbps",
                 "per_channel_max_tree_gbps"):
        table, latest = getattr(NCCL_2_26, name), getattr(NCCL_2_30, name)
        assert table[Arch.BLACKWELL] == tuple(2 * cap for cap in table[Arch.HOPPER]), name
        assert {arch: table[arch] for arch in latest if arch is not Arch.BLACKWELL} == {
            arch: latest[arch] for arch in latest if arch is not Arch.BLACKWELL}, name
    assert NCCL_2_26.per_channel_max_tree_gbps[Arch.BLACKWELL] == (77.4, 82.8, 72.0)
    assert NCCL_2_26.per_channel_max_nvls_tree_gbps == {} and NCCL_2_26.nvls_efficiency == {}
    # treeCorrectionFactor[3][23]: 2.30's rows but their 24th entry
    for protocol in Protocol:
        assert len(NCCL_2_26.tree_correction[protocol]) == 23
        assert NCCL_2_30.tree_correction[protocol][:23] == NCCL_2_26.tree_correction[protocol]


def test_the_correction_rules_name_the_entries_each_version_corrects():
    tree, ring = NcclAlgorithm.TREE, NcclAlgorithm.RING
    cases = [(tree, Arch.HOPPER, CpuVendor.INTEL), (NT, Arch.BLACKWELL, CpuVendor.INTEL),
             (NT, Arch.BLACKWELL, CpuVendor.AMD), (NT, Arch.BLACKWELL, CpuVendor.ARM),
             (NT, Arch.HOPPER, CpuVendor.INTEL), (ring, Arch.BLACKWELL, CpuVendor.INTEL)]
    assert [tree_corrected(*case) for case in cases] == [23, 0, 0, 0, 0, 0]
    assert [tree_and_blackwell_nvls_tree_corrected(*case) for case in cases] == [
        23, 24, 24, 0, 0, 0]
    assert NCCL_2_26.correction is tree_corrected
    assert NCCL_2_30.correction is tree_and_blackwell_nvls_tree_corrected


def test_the_formulas_read_every_constant_off_the_selected_record(monkeypatch):
    # a record that changes NVLSTree's network step and the NVLSTree cap changes the model's
    # latency and bandwidth, with no code: what a new version's record does
    system = hopper(2, Version.V2_30)
    record = replace(NCCL_2_30,
                     hw_latency_us={**NCCL_2_30.hw_latency_us, (Hardware.NET, NT, S): 30.0},
                     per_channel_max_nvls_tree_gbps={**NCCL_2_30.per_channel_max_nvls_tree_gbps,
                                                     Arch.HOPPER: (0.0, 50.0, 45.5)})
    monkeypatch.setitem(TUNINGS, Version.V2_30, record)
    assert system.tuning is record
    assert latency_us(system, NT, S) == pytest.approx(25 + 2 * 30.0)
    # min(59.5, 96, the cap 50) per channel, 8 channels, x nRanks/nsteps = 16/30
    assert bandwidth_GBps(system, NT, S) == pytest.approx(8 * 50.0 * 16 / 30)


def scenario(**nccl: object) -> dict:
    return {"topology": {"preset": "dgx_h100", "nodes": 2}, "algorithms": "auto",
            "sizes": ["1MiB"], "verify": False, "nccl": nccl}


def test_a_scenario_names_the_version_and_the_pick_follows_it(tmp_path):
    from simulator.output.writers import write_settings
    from simulator.settings import RunSettings

    for version, pick in (("2.26", "nvls_tree"), (2.26, "nvls_tree"), ("2.30", "double_binary_tree"),
                          (2.3, "double_binary_tree")):
        parsed = scenario_from_dict(scenario(version=version))
        machine = prepare(parsed, select=False).machine
        assert system_of(machine).version is Version(f"{float(version):.2f}")
        frame = simulate(parsed)
        assert list(frame[frame.nccl_pick.astype(bool)].algorithm) == [pick]
    parsed = scenario_from_dict(scenario(version="2.26"))
    write_settings(simulate(parsed), parsed, RunSettings(), tmp_path / "s.json")
    described = json.loads((tmp_path / "s.json").read_text())["scenario"]
    assert described["nccl"] == {"version": "2.26"}
    assert scenario_from_dict(described).nccl == parsed.nccl


def test_an_unknown_version_is_a_one_line_error():
    with pytest.raises(InputError) as error:
        scenario_from_dict(scenario(version="2.27"), source="s.yaml")
    assert [str(p) for p in error.value.problems] == [
        "s.yaml: nccl.version: expected the NCCL whose tuner picks: 2.26, 2.30, 2.31 (2.26: "
        "NCCL 2.26-2.27; 2.30: 2.30.x; 2.31: the 2.31.0a7 dev source), got '2.27'"]


@pytest.mark.parametrize("version", [2.2999, ".", "1.2.3", 2.305])
def test_a_version_close_to_a_known_one_is_not_that_one(version):
    # issue 40: 2.2999 was read as 2.30 (it rounds to it); a version names one exactly
    with pytest.raises(InputError) as error:
        scenario_from_dict(scenario(version=version), source="s.yaml")
    assert [str(p) for p in error.value.problems] == [
        "s.yaml: nccl.version: expected the NCCL whose tuner picks: 2.26, 2.30, 2.31 (2.26: "
        f"NCCL 2.26-2.27; 2.30: 2.30.x; 2.31: the 2.31.0a7 dev source), got {version!r}"]
