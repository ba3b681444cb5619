"""GB200 and GB300 NVL72 racks: ``nccl: {nvls: false}`` as NCCL_NVLS_ENABLE=0 (its one-line
errors and the picks it changes), the gb300_nvl72 preset's links and rates as NVIDIA's GB300
NVL72 page states them, and the NVLink rate fitted on a GB200 rack."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from simulator import InputError, simulate
from simulator.model.execution import arch_of, nccl_charges, system_of
from simulator.model.machine import Machine
from simulator.model.nccl import Arch, CpuVendor, NcclAlgorithm, Protocol, choose
from simulator.model.topology import NET_LINK, NVLINK, PCIE
from simulator.output.writers import write_settings
from simulator.plan import prepare
from simulator.scenario.parse import scenario_from_dict
from simulator.scenario.spec import Scenario
from simulator.settings import RunSettings


def scenario(preset: str = "gb200_nvl72", nodes: int = 1, algorithms: Any = "auto",
             **nccl: Any) -> dict[str, Any]:
    """A scenario dict on ``preset`` with ``nodes`` racks and ``nccl`` as given."""
    data: dict[str, Any] = {"topology": {"preset": preset, "nodes": nodes},
                            "algorithms": algorithms, "sizes": [1 << 20, 1 << 30]}
    if nccl:
        data["nccl"] = nccl
    return data


def machine_of(parsed: Scenario) -> Machine:
    """The scenario's machine, as the runner builds it."""
    return prepare(parsed, select=False).machine


def picks(parsed: Scenario) -> list[str]:
    """NCCL's pick at each size of ``parsed`` among what its ``nccl`` leaves."""
    system = system_of(machine_of(parsed))
    return [f"{(c := choose(system, size, parsed.nccl_enabled)).algorithm.value}/"
            f"{c.protocol.value}" for size in parsed.sizes]


def test_nvls_false_takes_nvls_and_nvlstree_from_ncclss_pick():
    # one rack: NVLS from 8 B with NVLS on (a 72-GPU ring's 142 steps cost more than NVLS's
    # 25 µs); without it the 2.26 tuner rates Ring lowest, LL at 1 MiB and Simple at 1 GiB
    rack = scenario(version="2.26")
    assert picks(scenario_from_dict(rack)) == ["NVLS/Simple", "NVLS/Simple"]
    assert picks(scenario_from_dict(scenario(version="2.26", nvls=False))) == [
        "Ring/LL", "Ring/Simple"]
    # two racks: NVLSTree with NVLS on; NCCL's Tree across the racks without it
    assert picks(scenario_from_dict(scenario(nodes=2, version="2.26"))) == [
        "NVLSTree/Simple", "NVLSTree/Simple"]
    assert picks(scenario_from_dict(scenario(nodes=2, version="2.26", nvls=False))) == [
        "Tree/LL", "Tree/LL128"]


def test_nvls_false_is_the_same_as_leaving_both_out_of_nccl_algo():
    off = scenario_from_dict(scenario(nvls=False)).nccl_enabled
    listed = scenario_from_dict(scenario(algo="^NVLS,NVLSTree")).nccl_enabled
    assert off == listed
    assert NcclAlgorithm.NVLS not in off.algorithms
    assert NcclAlgorithm.NVLS_TREE not in off.algorithms
    assert NcclAlgorithm.RING in off.algorithms


@pytest.mark.parametrize("value", ["off", 0, "false", None])
def test_a_bad_nvls_is_a_one_line_error(value: object):
    with pytest.raises(InputError) as error:
        scenario_from_dict(scenario(nvls=value), source="s.yaml")
    assert [str(p) for p in error.value.problems] == [
        f"s.yaml: nccl.nvls: expected true (NCCL's default) or false (as NCCL_NVLS_ENABLE=0: "
        f"no NVLS or NVLSTree), got {value!r}"]


def test_nvls_false_with_symmetric_buffers_is_a_one_line_error():
    with pytest.raises(InputError) as error:
        scenario_from_dict(scenario(nvls=False, symmetric=True), source="s.yaml")
    assert [str(p) for p in error.value.problems] == [
        "s.yaml: nccl.nvls: expected true with symmetric: true: the symmetric kernels modelled "
        "multicast on NVLS's objects, which NCCL_NVLS_ENABLE=0 never creates"]


def test_nvls_false_refuses_nvls_by_name_and_all_leaves_it_out():
    named = scenario_from_dict(scenario("dgx_h100", algorithms=["ring", "nvls"], nvls=False),
                               source="s.yaml")
    with pytest.raises(InputError) as error:
        prepare(named)
    assert [str(p) for p in error.value.problems] == [
        "s.yaml: algorithms[1]: 'nvls' cannot run on topology dgx_h100: NCCL runs no NVLS or "
        "NVLSTree with nccl.nvls: false (NCCL_NVLS_ENABLE=0 creates no multicast objects)"]
    every = prepare(scenario_from_dict(scenario("dgx_h100", nodes=2, algorithms="all",
                                                nvls=False)))
    names = {algorithm.name for algorithm in every.algorithms}
    assert "ring" in names and "nvls" not in names and "nvls_tree" not in names


def test_nvls_false_is_said_in_the_settings_and_read_back(tmp_path: Path):
    parsed = scenario_from_dict({**scenario("dgx_h100", algorithms=["ring"], nvls=False),
                                 "sizes": [1 << 20]})
    write_settings(simulate(parsed), parsed, RunSettings(), tmp_path / "s.json")
    described = json.loads((tmp_path / "s.json").read_text())["scenario"]
    assert described["nccl"] == {"nvls": False}
    assert scenario_from_dict(described).nccl == parsed.nccl


def test_gb300_nvl72_is_gb200s_rack_with_800g_nics():
    # NVIDIA's GB300 NVL72 page: 72 Blackwell Ultra GPUs on NVLink 5 (1.8 TB/s a GPU, 900 GB/s
    # each way), one ConnectX-8 at 800 Gb/s (100 GB/s) per GPU over two PCIe 5.0 x16 (126 GB/s)
    machine = machine_of(scenario_from_dict(scenario("gb300_nvl72", nodes=2,
                                                     algorithms=["ring"])))
    routing = machine.routing
    rates = Counter((routing.link_kind(link), routing.capacity_Bps(link))
                    for link in routing.capacities())
    assert machine.ranks == 144
    assert rates == {(NVLINK, 900e9): 2 * 2 * 72, (PCIE, 126e9): 2 * 2 * 2 * 72,
                     (NET_LINK, 100e9): rates[NET_LINK, 100e9]}
    assert (machine.compute_capability, machine.nvlinks) == (103, 18)
    assert arch_of(machine.compute_capability) is Arch.BLACKWELL
    assert machine.nccl.cpu is CpuVendor.ARM
    assert machine.nccl.nvlink_Bps == 870e9  # fitted on GB200, the same NVLink 5 trays


def test_a_gb200_racks_ring_moves_the_fitted_nvlink_rate():
    # 870 GB/s, fitted to the rack's Ring/Simple (docs/reference/nccl-tests-gb200-nvl72-1rack.csv),
    # in place of NCCL's 18 x 40.1 = 721.8 GB/s; LL128 would move 0.92 x 870 = 800.4 GB/s but
    # is capped at perChMaxRingLL128Bws' 40 GB/s (Blackwell, tuning.cc:189) x 16 channels
    machine = machine_of(scenario_from_dict(scenario(algorithms=["ring"])))
    simple = nccl_charges(machine, NcclAlgorithm.RING, Protocol.SIMPLE, 1 << 30)
    ll128 = nccl_charges(machine, NcclAlgorithm.RING, Protocol.LL128, 512 << 20)
    assert simple.link_rate_Bps[NVLINK] == 870e9
    assert ll128.link_rate_Bps[NVLINK] == pytest.approx(640e9)


def test_an_algo_list_of_nvls_alone_with_nvls_false_leaves_nothing():
    parsed = scenario_from_dict(scenario("dgx_h100", algo="NVLS", nvls=False), source="s.yaml")
    with pytest.raises(InputError) as error:
        simulate(parsed)
    assert [str(p) for p in error.value.problems] == [
        "s.yaml: nccl.algo: expected a list that leaves NCCL's tuner an algorithm it can run on "
        "topology dgx_h100 with nccl.nvls: false (Tree, Ring), got 'NVLS'"]
