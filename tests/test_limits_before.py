"""Bounded before running (issue 40): each input that would make unbounded work from a few bytes
is refused with one line before the work starts, on inputs small enough that only the check
runs (an 8-GPU topology file on 8,193 hosts, 4,097 sizes, one log line); and a run that may
take long says so before its first point."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.cli import main
from simulator.errors import InputError
from simulator.limits import MAX_SIZES
from simulator.plan import footprint_problem, prepare
from simulator.runner import checked_setup, outlook, plan_points, settings_of
from simulator.scenario import scenario_from_dict
from simulator.scenario.parse import load_scenario

DATA = Path(__file__).resolve().parent / "data"
SWITCH = "{kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}"


def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
            *more: str) -> str:
    """The one line ``run`` gives for the scenario ``text`` (exit 2, nothing written)."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text)
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--output", str(out), *more]) == 2
    err = capsys.readouterr().err
    assert not out.exists()
    assert err.count("\n") == 1
    return err.rstrip("\n").replace(str(tmp_path) + "/", "")


def test_a_topology_file_on_too_many_hosts_is_refused_before_its_host_is_walked(tmp_path,
                                                                                  capsys):
    (tmp_path / "h100.xml").write_text((DATA / "nccl" / "dgx_h100.xml").read_text())
    assert refused(tmp_path, capsys, "topology: {nccl_xml: h100.xml, nodes: 8193}\n"
                                     "sizes: [1MiB]\n") == (
        "s.yaml: topology.nodes: expected at most 65536 GPUs, got 65544 (8193 hosts of 8 GPUs)")


@pytest.mark.parametrize(("topology", "kind"), [
    ("{kind: cluster, nodes: 4, gpus_per_node: 20000, nvlink_bandwidth: 450GB/s, "
     "nvlink_latency: 300ns, pcie_bandwidth: 63GB/s, pcie_latency: 500ns, nic_bandwidth: 400Gbps, "
     "nic_latency: 850ns, uplink_latency: 850ns, gpus_per_pcie_switch: 3}", "cluster"),
    ("{preset: dgx_h100_superpod, nodes: 4, gpus_per_node: 20000}", "cluster"),
    ("{preset: dgx_h100, nodes: 4, gpus_per_node: 20000}", "dgx"),
])
def test_gpus_per_node_times_nodes_is_the_rank_limit_before_the_wiring(tmp_path, capsys,
                                                                       topology, kind):
    # the first also breaks a wiring rule (3 does not divide 20000): the count comes first
    assert refused(tmp_path, capsys, f"topology: {topology}\nsizes: [1MiB]\n") == (
        f"s.yaml: topology: expected at most 65536 GPUs for kind {kind}, got 80000")


def test_a_dragonfly_of_few_ranks_and_billions_of_cables_is_refused(tmp_path, capsys):
    assert refused(tmp_path, capsys, (
        "topology: {kind: dragonfly, groups: 60000, routers: 1, gpus_per_router: 1, "
        "bandwidth: 25GB/s, latency: 1us, global_bandwidth: 25GB/s, global_latency: 1us}\n"
        "sizes: [1MiB]\n")) == (
        "s.yaml: topology: expected at most 523,776 all-to-all cables (groups × routers × "
        "(routers - 1) / 2 within groups, groups × (groups - 1) / 2 between them), got "
        "1,799,970,000; use fewer groups or routers")


def test_a_log_counting_a_billion_channels_is_refused_at_its_line(tmp_path, capsys):
    log = (DATA / "nccl-info-h100x2.log").read_text()
    assert "Channel 00/08 :" in log
    (tmp_path / "n.log").write_text(log.replace("Channel 00/08 :", "Channel 00/999999999 :", 1)
                                    .replace("/08 :", "/999999999 :"))
    line = 1 + log.split("Channel 00/08 :")[0].count("\n")
    assert refused(tmp_path, capsys, "topology: {preset: dgx_h100, nodes: 2}\nsizes: [1MiB]\n"
                                     "nccl: {log: n.log}\n") == (
        f"s.yaml: nccl.log: n.log: line {line}: expected the channel count MM of "
        "'Channel NN/MM' to be from 1 to 128 (NCCL runs at most MAXCHANNELS, 64; "
        "simulator/limits.py), got 999999999")


def test_a_channel_number_of_a_thousand_digits_is_one_line(tmp_path, capsys):
    log = (DATA / "nccl-info-h100x2.log").read_text()
    (tmp_path / "n.log").write_text(log.replace("Channel 00/08 :", f"Channel {'9' * 1000}/08 :",
                                                1))
    line = 1 + log.split("Channel 00/08 :")[0].count("\n")
    assert refused(tmp_path, capsys, "topology: {preset: dgx_h100, nodes: 2}\nsizes: [1MiB]\n"
                                     "nccl: {log: n.log}\n") == (
        f"s.yaml: nccl.log: n.log: line {line}: expected the channel NN of 'Channel NN/MM' to be "
        "from 0 to 128 (NCCL runs at most MAXCHANNELS, 64; simulator/limits.py), got "
        f"{'9' * 20}…")


def test_a_list_of_too_many_sizes_is_refused_as_it_is_read(tmp_path, capsys):
    sizes = ", ".join(str(4 * (i + 1)) for i in range(MAX_SIZES + 1))
    assert refused(tmp_path, capsys, f"topology: {SWITCH}\nsizes: [{sizes}]\n") == (
        "s.yaml: sizes: expected at most 4,096 sizes (each is a point to simulate; "
        "simulator/limits.py), got more than 4,096")


def test_as_many_sizes_as_the_limit_are_read(tmp_path):
    sizes = ", ".join(str(4 * (i + 1)) for i in range(MAX_SIZES))
    (tmp_path / "s.yaml").write_text(f"topology: {SWITCH}\nsizes: [{sizes}]\n")
    assert len(load_scenario(tmp_path / "s.yaml").sizes) == MAX_SIZES


def test_too_many_sizes_given_in_code_are_counted():
    with pytest.raises(InputError) as refusal:
        scenario_from_dict({"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s",
                                         "latency": "1us"},
                            "sizes": [4 * (i + 1) for i in range(MAX_SIZES + 1)]})
    assert str(refusal.value) == (
        "<dict>: sizes: expected at most 4,096 sizes (each is a point to simulate; "
        "simulator/limits.py), got 4,097")


def test_direct_on_the_simpy_engine_is_refused_where_its_flows_would_not_fit(tmp_path, capsys):
    assert refused(tmp_path, capsys, (
        "topology: {kind: switch, ranks: 400, bandwidth: 25GB/s, latency: 1us}\n"
        "algorithms: [direct]\nsizes: [1MiB]\nengine: simpy\nverify: false\n")) == (
        "s.yaml: algorithms: 'direct' at 1048576 bytes on 400 ranks needs ~20.0 GiB to "
        "simulate on the SimPy engine (~31,840,200 messages in flight and flow timers at 670 "
        "bytes, 159,600 rank pairs at 760 bytes), more than the 16 GiB a point may take "
        "(simulator/limits.py); use fewer ranks, a larger piece_size or another algorithm, or "
        "engine: vector")


def test_direct_fits_on_the_vectorised_engine_where_simpy_would_not():
    def problem(engine: str) -> str | None:
        scenario = scenario_from_dict({
            "topology": {"kind": "switch", "ranks": 400, "bandwidth": "25GB/s",
                         "latency": "1us"},
            "algorithms": ["direct"], "sizes": ["1MiB"], "engine": engine, "verify": False})
        setup = prepare(scenario)
        [direct] = setup.algorithms
        found = footprint_problem(scenario, setup.machine, direct, 1 << 20,
                                  settings_of(scenario), 1)
        return None if found is None else found.message

    assert problem("vector") is None
    assert problem("simpy") is not None


def test_a_run_that_may_take_long_says_so_before_its_first_point():
    scenario = scenario_from_dict({
        "topology": {"kind": "switch", "ranks": 1024, "bandwidth": "25GB/s", "latency": "1us"},
        "algorithms": ["ring"], "sizes": ["1MiB"],
        "faults": [{"kind": "straggler", "rank": rank, "delay": "50us"} for rank in range(4)]})
    settings = settings_of(scenario)
    setup = checked_setup(scenario, settings)
    coming = outlook(scenario, setup, plan_points(scenario, setup, settings))
    assert coming.slow() == (
        "may take up to about 5 min to simulate (2,095,104 messages; docs/scenarios.md#limits): "
        "fewer ranks, sizes or algorithms run sooner")


def test_a_short_run_says_nothing_of_its_time(tmp_path, capsys):
    (tmp_path / "s.yaml").write_text(f"topology: {SWITCH}\nsizes: [1KiB]\n")
    assert main(["run", str(tmp_path / "s.yaml"), "--output", str(tmp_path / "out"),
                 "--quiet", "--no-plot"]) == 0
    assert capsys.readouterr().err == ""


def test_a_dist_collective_that_may_take_long_warns_before_it_runs(monkeypatch):
    import numpy as np

    import simulator.distributed as dist
    from simulator.output import outlook as said

    monkeypatch.setattr(said, "SLOW_RUN_S", 0.0)  # four ranks stand for 16,384

    def step(rank: int) -> float:
        tensor = np.array([float(rank)])
        dist.all_reduce(tensor)
        return float(tensor[0])

    with pytest.warns(UserWarning) as warned:
        assert dist.spawn(step, 4).returns == (6.0,) * 4
    assert [str(warning.message) for warning in warned] == [
        "dist.spawn: all_reduce on 4 ranks may take up to about 480us to simulate (24 messages; "
        "docs/scenarios.md#limits): fewer ranks, sizes or algorithms run sooner"]


def test_nvls_traced_past_what_a_point_may_hold_is_refused_before_it_runs(tmp_path, capsys):
    # NVLS's schedule is traced as it runs: 2 entries a rank per 512 KiB piece, 8 ranks at
    # 1 TiB = 33,554,432 > 16 GiB / 600 B = 28,633,115 (run ran out of memory here before)
    assert refused(tmp_path, capsys, "topology: {preset: dgx_h100, nodes: 1}\n"
                                     "algorithms: [nvls]\nsizes: [1TiB]\n") == (
        "s.yaml: sizes: expected a size whose schedule fits a point: nvls at 1099511627776 "
        "bytes on 8 ranks traces at least 33,554,432 schedule entries (two a rank for each "
        "524288-byte pipeline piece), more than the 28,633,115 a point may hold (600 bytes "
        "each, simulator/limits.py); use smaller sizes")
