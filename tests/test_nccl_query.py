"""NCCL's model as an API (issue 41, item 4): ``simulator.nccl.query`` and ``python -m simulator
nccl`` against the tuner tests' worked values (tests/test_nccl.py on one DGX H100,
tests/test_nvls_tree.py on two and eight), the channel counts of NCCL's enqueue.cc worked by
hand, the JSON and text forms, the errors, and that a query simulates nothing."""

import json
import math
import re

import pytest

from simulator import nccl
from simulator.cli import main
from simulator.errors import InputError
from simulator.model.nccl import DEFAULT_GRAPHS, Arch, Graph, NcclAlgorithm, Protocol, System
from simulator.model.nccl_channels import channels, comm_channels
from tests.conftest import REPO

RING, TREE, NVLS, NVLS_TREE = (NcclAlgorithm.RING, NcclAlgorithm.TREE, NcclAlgorithm.NVLS,
                               NcclAlgorithm.NVLS_TREE)
LL, LL128, SIMPLE = Protocol.LL, Protocol.LL128, Protocol.SIMPLE
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def rows(table):
    return [(r.size_bytes, r.algorithm, r.protocol, r.channels) for r in table.rows]


def test_one_dgx_h100_is_the_worked_example():
    # tests/test_nccl.py: Ring/LL to 1 MiB (15 µs + n / (141 · 8/14 GB/s)), NVLS from 2 MiB
    # (25 µs + n / (384 · 8/14)). Channels: 2 × 12 (the ring and tree graphs, doubled by
    # ncclTopoPostset) = 24, cut while n < nc × 512 threads × 8 · 8 ranks (Ring LL's threshold):
    # 1 at 32 KiB, 16 at 512 KiB, 24 at 1 MiB; NVLS its own 16 (NVLS_NCHANNELS_SM90)
    table = nccl.query("dgx_h100", "allreduce", ["32KiB", "512KiB", "1MiB", "2MiB"])
    assert rows(table) == [(32 * KIB, "Ring", "LL", 1), (512 * KIB, "Ring", "LL", 16),
                           (MIB, "Ring", "LL", 24), (2 * MIB, "NVLS", "Simple", 16)]
    assert table.rows[0].time_us == pytest.approx(15.0 + 32768 / (1000 * 141 * 8 / 14), rel=1e-12)
    assert table.rows[3].time_us == pytest.approx(25 + 2 * MIB / (1000 * 384 * 8 / 14), rel=1e-12)
    assert (table.topology, table.library, table.version, table.ranks, table.nodes) == (
        "dgx_h100", "nccl", "2.30", 8, 1)
    assert all(row.sim_time_us is None for row in table.rows)


def test_two_dgx_h100_are_the_worked_example():
    # tests/test_nvls_tree.py: Tree/LL128 at 2 MiB, NVLSTree from 4 MiB, 66.8 µs + n /
    # (461.6 · 16/30 GB/s). Channels: 2 × 8 = 16 (the ring's bwIntra, 45 GB/s, is not above
    # 45: no second doubling); Tree LL at 32 KiB cut to 32768 / (512 · 8) = 8
    table = nccl.query("dgx_h100:2", "allreduce", [32 * KIB, 2 * MIB, 4 * MIB, GIB])
    assert rows(table) == [(32 * KIB, "Tree", "LL", 8), (2 * MIB, "Tree", "LL128", 16),
                           (4 * MIB, "NVLSTree", "Simple", 16), (GIB, "NVLSTree", "Simple", 16)]
    assert table.rows[3].time_us == pytest.approx(66.8 + GIB / (1000 * 461.6 * 16 / 30))
    assert (table.ranks, table.nodes) == (16, 2)


def test_eight_dgx_h100_with_nodes_given_apart():
    # tests/test_nvls_tree.py: Tree at 8 MiB, NVLSTree from 16 MiB at 8 · 45.5 · 64/126 GB/s;
    # its latency 25 + 2 · log2(8) · 20.9 = 150.4 µs; Tree LL at 4 KiB on one channel
    table = nccl.query("dgx_h100", "allreduce", ["4KiB", "8MiB", "16MiB"], nodes=8)
    assert rows(table) == [(4 * KIB, "Tree", "LL", 1), (8 * MIB, "Tree", "LL128", 16),
                           (16 * MIB, "NVLSTree", "Simple", 16)]
    assert table.rows[2].time_us == pytest.approx(150.4 + 16 * MIB / (1000 * 8 * 45.5 * 64 / 126))
    assert table.topology == "dgx_h100[nodes=8]"


def test_eight_sizes_on_eight_dgx_h100_simulate_nothing(monkeypatch):
    # the plain query never reaches the runner; with simulate=True it does (the guard can fail)
    import simulator.runner

    def ran(*args, **kwargs):
        raise AssertionError("simulated")

    monkeypatch.setattr(simulator.runner, "simulate", ran)
    monkeypatch.setattr(simulator.runner, "run_plan", ran)
    sizes = [4 * KIB << (2 * i) for i in range(8)]  # 4 KiB to 64 MiB
    table = nccl.query("dgx_h100:8", "allreduce", sizes)
    assert [row.size_bytes for row in table.rows] == sizes
    with pytest.raises(AssertionError, match="simulated"):
        nccl.query("dgx_h100:8", "allreduce", sizes, simulate=True)


def test_simulate_puts_the_runs_time_beside_the_model():
    # auto's run of the same pick: Ring/LL at 32 KiB, whose simulation equals NCCL's model here
    from simulator import simulate

    [row] = nccl.query("dgx_h100", "allreduce", ["32KiB"], simulate=True).rows
    frame = simulate({"topology": {"preset": "dgx_h100"}, "algorithms": "auto",
                      "sizes": ["32KiB"]})
    assert row.sim_time_us == float(frame.sim_time_s[0]) * 1e6
    assert row.sim_time_us == pytest.approx(row.time_us, rel=1e-12)


def test_version_and_env_narrow_the_pick_as_a_scenarios_nccl_does():
    # NCCL_NVLS_ENABLE=0 leaves four nodes Ring at 1 GiB; NCCL_ALGO=Tree forces the tree,
    # NCCL_PROTO=Simple its protocol; the 2.26 tuner rates NVLS differently from 2.30's
    [off] = nccl.query("dgx_h100:4", "allreduce", ["1GiB"], env={"NCCL_NVLS_ENABLE": "0"}).rows
    assert (off.algorithm, off.protocol, off.channels) == ("Ring", "Simple", 16)
    [tree] = nccl.query("dgx_h100", "allreduce", ["1MiB"],
                        env={"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}).rows
    assert (tree.algorithm, tree.protocol, tree.channels) == ("Tree", "Simple", 24)
    old = nccl.query("dgx_h100", "allreduce", ["1GiB"], version="2.26")
    new = nccl.query("dgx_h100", "allreduce", ["1GiB"])
    assert old.version == "2.26" and old.rows[0].time_us != new.rows[0].time_us


def test_topology_files_build_the_machine_a_scenario_builds():
    # NCCL's topology file of a DGX H100, on one host and on two, and a scenario file's topology
    xml = str(REPO / "tests" / "data" / "nccl" / "dgx_h100.xml")
    assert rows(nccl.query(xml, "allreduce", ["1MiB"])) == [(MIB, "Ring", "LL", 24)]
    assert rows(nccl.query(xml, "allreduce", ["1MiB"], nodes=2)) == [(MIB, "Tree", "LL128", 16)]
    scenario = str(REPO / "scenarios" / "dgx_h100_2nodes.yaml")
    assert rows(nccl.query(scenario, "allreduce", ["1MiB"])) == [(MIB, "Tree", "LL128", 16)]


# --- channels, enqueue.cc:2070-2097 worked by hand ---------------------------------------------

def test_channels_follow_enqueue_cc():
    h100 = System(ranks=8, nodes=1, arch=Arch.HOPPER, graphs=DEFAULT_GRAPHS[Arch.HOPPER])
    assert comm_channels(h100) == 24
    # Tree LL128: 640 threads × 8 bytes each, so 5120 bytes a channel
    assert channels(h100, TREE, LL128, 5120 * 24) == 24
    assert channels(h100, TREE, LL128, 5120 * 24 - 1) == 23
    # Simple: 64 a thread; a ring below PCI_BW (12 GB/s: 1 channel × 10) runs 256 threads
    assert channels(h100, RING, SIMPLE, 512 * 64 * 3) == 3
    slow = System(ranks=8, nodes=1, arch=Arch.HOPPER, graphs={RING: Graph(1, 10.0, 10.0)})
    assert channels(slow, RING, SIMPLE, 256 * 64 * 2) == 2
    # the ring's channels as init.cc:1459 leaves them, the fewer of ring and tree: 5 GB/s ×
    # min(4, 2) = 10 is at most PCI_BW (not 5 × 4 = 20), so 256 threads; nc = 2 × 2 = 4, cut
    # while 49152 < nc × 256 × 64: to 3 (512 threads would cut it to 1)
    split = System(ranks=8, nodes=1, arch=Arch.HOPPER,
                   graphs={RING: Graph(4, 5.0, 5.0), TREE: Graph(2, 5.0, 5.0)})
    assert comm_channels(split) == 4
    assert channels(split, RING, SIMPLE, 256 * 64 * 3) == 3
    # SM90 across nodes: a ring faster than 45 GB/s inside the node doubles 2 × 6 = 12 to 24
    fast = System(ranks=16, nodes=2, arch=Arch.HOPPER, graphs={RING: Graph(6, 48.0, 48.0)})
    assert comm_channels(fast) == 24
    # Blackwell across nodes: ncclNvlsTreeSm100Tuning's count is not modelled
    b200 = System(ranks=16, nodes=2, arch=Arch.BLACKWELL, graphs=DEFAULT_GRAPHS[Arch.BLACKWELL])
    assert channels(b200, NVLS_TREE, SIMPLE, GIB) is None
    assert channels(System(ranks=8, nodes=1, arch=Arch.BLACKWELL,
                           graphs=DEFAULT_GRAPHS[Arch.BLACKWELL]), NVLS, SIMPLE, GIB) == 24


# --- the command ---------------------------------------------------------------------------------

def test_the_command_prints_the_table(capsys):
    assert main(["nccl", "dgx_h100", "--sizes", "32KiB,2MiB"]) == 0
    assert capsys.readouterr().out == (
        "# NCCL 2.30's tuner, allreduce on dgx_h100: 8 ranks on 1 node\n"
        " size  algorithm  protocol  channels  nccl_us\n"
        "32KiB  Ring       LL               1   15.407\n"
        " 2MiB  NVLS       Simple          16   34.557\n")


def test_the_command_prints_json(capsys):
    assert main(["nccl", "dgx_h100:2", "--sizes", "4MiB", "--json"]) == 0
    [record] = json.loads(capsys.readouterr().out)
    assert record == {"size_bytes": 4 * MIB, "algorithm": "NVLSTree", "protocol": "Simple",
                      "channels": 16, "time_us": pytest.approx(83.837, abs=5e-4)}


def test_the_command_without_sizes_asks_eleven(capsys):
    assert main(["nccl", "dgx_h100", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["size_bytes"] for r in records] == [KIB << (2 * i) for i in range(11)]


def test_the_docs_example_is_what_the_command_prints(capsys):
    # docs/nccl-api.md: each "$ python -m simulator nccl ..." block, its lines after the command
    page = (REPO / "docs" / "nccl-api.md").read_text(encoding="utf-8")
    examples = re.findall(r"```console\n\$ python -m simulator (nccl [^\n]*)\n(.*?)```", page,
                          re.S)
    assert len(examples) == 3
    for command, printed in examples:
        assert main(command.split()) == 0
        assert capsys.readouterr().out == printed, command


@pytest.mark.parametrize("argv, line", [
    (["dgx_h10"], "command line: TOPOLOGY: no such preset or file 'dgx_h10'; expected a preset "
                  "(dgx1_v100, dgx_a100, dgx_a100_superpod, dgx_b200, dgx_b200_superpod, "
                  "dgx_h100, dgx_h100_superpod, gb200_nvl72, gb300_nvl72, mi300x, "
                  "mi300x_cluster, mi325x, p4d), optionally with :NODES (dgx_h100:8), or a "
                  "topology, scenario, graph or NCCL topology file"),
    (["nope.xml"], "command line: TOPOLOGY: no such file 'nope.xml'"),
    (["dgx_h100:x"], "command line: TOPOLOGY: expected a whole number ≥ 1, got 'x'"),
    (["dgx_h100:0"], "command line: TOPOLOGY: expected a whole number ≥ 1, got 0"),
    (["dgx_h100", "--nodes", "0"], "command line: --nodes: expected a whole number ≥ 1, got 0"),
    (["dgx_h100:2", "--nodes", "3"],
     "command line: TOPOLOGY: expected the node count once, got 'dgx_h100:2' and nodes 3"),
    (["dgx_h100", "--sizes", "1MiB", "3"], "command line: --sizes[1]: expected a positive "
                                           "multiple of the float32 element size (4 bytes), "
                                           "got 3"),
    (["dgx_h100", "--nccl-version", "2.29"],
     "command line: --nccl-version: expected the NCCL whose tuner picks: 2.26, 2.30, 2.31 "
     "(2.26: NCCL 2.26-2.27; 2.30: 2.30.x; 2.31: the 2.31.0a7 dev source), got '2.29'"),
    (["dgx_h100", "--env", "NCCL_ALGO=Rign"],
     "command line: --env NCCL_ALGO: expected a list as NCCL_ALGO takes it: Tree, Ring, "
     "CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT separated by commas (a leading ^: all but "
     "those; COLLECTIVE:LIST after a ; for one collective), got 'Rign': no algorithm 'Rign'; "
     "did you mean 'Ring'?"),
    (["dgx_h100", "--env", "NCCL_DEBUG=INFO"],
     "command line: --env NCCL_DEBUG: expected one of NCCL_ALGO, NCCL_PROTO, NCCL_NVLS_ENABLE, "
     "the variables NCCL's model reads here"),
    (["dgx_h100", "--env", "NCCL_NVLS_ENABLE=off"],
     "command line: --env NCCL_NVLS_ENABLE: expected 0 (no NVLS or NVLSTree) or 1, got 'off'"),
    (["dgx_h100", "--env", "NCCL_ALGO"],
     "command line: --env: expected NAME=VALUE (NCCL_ALGO=Ring), got 'NCCL_ALGO'"),
    (["dgx_h100", "--collective", "alltoall"],
     "command line: --collective: expected allreduce, reduce_scatter or allgather, the "
     "collectives NCCL's model answers, got 'alltoall'"),
    (["mi300x", "--collective", "allgather"],
     "command line: --collective: expected allreduce on topology mi300x, the one collective "
     "RCCL's model answers, got allgather"),
    (["dgx_h100", "--env", "NCCL_ALGO=Ring", "--env", "NCCL_ALGO=Tree"],
     "command line: --env NCCL_ALGO: expected the variable once (NCCL reads one value), got "
     "'NCCL_ALGO=Ring' and 'NCCL_ALGO=Tree'"),
    (["dgx_h100", "--sizes", "1KiB", "1TiB", "--simulate"],
     "command line: --sizes: expected sizes it can simulate: NCCL's pick at 1024GiB "
     "(nvls/Simple) left out: sizes: expected a size whose schedule fits a point: nvls at "
     "1099511627776 bytes on 8 ranks traces at least 33,554,432 schedule entries (two a rank "
     "for each 524288-byte pipeline piece), more than the 28,633,115 a point may hold (600 "
     "bytes each, simulator/limits.py); use smaller sizes"),
])
def test_bad_input_is_one_line_and_exit_2(argv, line, capsys):
    assert main(["nccl", *argv]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", line + "\n")


def test_the_api_names_its_own_parameters():
    with pytest.raises(InputError) as error:
        nccl.query("dgx_h100", "allreduce", ["1MiB"], env={"NCCL_PROTO": "LL129"})
    [problem] = error.value.problems
    assert (problem.file, problem.field) == ("nccl.query", "env NCCL_PROTO")
    with pytest.raises(InputError) as error:
        nccl.query("dgx_h100", "allreduce", ["1MiB", 6])
    assert [str(p) for p in error.value.problems] == [
        "nccl.query: sizes[1]: expected a positive multiple of the float32 element size "
        "(4 bytes), got 6"]


def test_a_time_the_model_does_not_rate_is_null_in_json():
    # RCCL runs its MSCCL all-pairs schedule at 1 MiB on an MI300X node, which its tuner does
    # not rate (NaN): JSON's null, and '-' in the table
    table = nccl.query("mi300x", "allreduce", ["1MiB"])
    assert math.isnan(table.rows[0].time_us) and table.version == ""
    assert table.records() == [{"size_bytes": MIB, "algorithm": "MSCCL allreduce_pairs",
                                "protocol": "Simple", "channels": None, "time_us": None}]
    assert table.text().splitlines()[-1].split() == ["1MiB", "MSCCL", "allreduce_pairs",
                                                     "Simple", "-", "-"]


def test_the_docs_python_runs(capsys):
    page = (REPO / "docs" / "nccl-api.md").read_text(encoding="utf-8")
    [body] = re.findall(r"```python\n(.*?)```", page, re.S)
    exec(compile(body, "docs/nccl-api.md", "exec"), {"__name__": "docs_nccl_api"})
    assert capsys.readouterr().out.startswith("# NCCL 2.30's tuner, allreduce on dgx_h100")


# --- the reviewer's defects (issue 41 item 4, the fixes) -----------------------------------------

def test_the_api_asks_the_default_sizes():
    # sizes=DEFAULT_SIZES, as the command without --sizes: 1 KiB to 1 GiB, ×4
    table = nccl.query("dgx_h100")
    assert [row.size_bytes for row in table.rows] == [KIB << (2 * i) for i in range(11)]
    assert table.collective == "allreduce"


def test_a_topology_mappings_problems_keep_their_key_once_each():
    with pytest.raises(InputError) as error:
        nccl.query({"preset": "dgx_h100", "gpu_per_node": 1}, "allreduce", ["1MiB"])
    assert [str(p) for p in error.value.problems] == [
        "nccl.query: topology.gpu_per_node: unknown key; did you mean 'gpus_per_node'?"]
    with pytest.raises(InputError) as error:
        nccl.query({"kind": "dgx"}, "allreduce", ["1MiB"])
    assert [str(p) for p in error.value.problems] == [
        f"nccl.query: topology.{key}: required but missing" for key in (
            "nodes", "gpus_per_node", "nvlink_bandwidth", "nvlink_latency", "pcie_bandwidth",
            "pcie_latency", "nic_bandwidth", "nic_latency")]
    with pytest.raises(InputError) as error:  # the count given apart is the nodes parameter's
        nccl.query({"preset": "dgx_h100"}, "allreduce", ["1MiB"], nodes=0)
    assert [str(p) for p in error.value.problems] == [
        "nccl.query: nodes: expected a whole number ≥ 1, got 0"]


def test_one_rank_is_refused_in_the_querys_words():
    with pytest.raises(InputError) as error:
        nccl.query({"preset": "dgx_h100", "gpus_per_node": 1}, "allreduce", ["1MiB"])
    assert [str(p) for p in error.value.problems] == [
        "nccl.query: topology: expected more than one GPU: NCCL picks no algorithm on one rank "
        "(it copies the buffer), got topology dgx_h100[gpus_per_node=1] of one GPU"]


def test_env_takes_numbers_and_bools_by_their_text_and_refuses_a_string():
    # NCCL_NVLS_ENABLE=0 leaves one DGX H100 Ring/Simple at 1 GiB on 24 channels; 1 is NVLS
    for off in (0, False, "0"):
        [row] = nccl.query("dgx_h100", sizes=["1GiB"], env={"NCCL_NVLS_ENABLE": off}).rows
        assert (row.algorithm, row.protocol, row.channels) == ("Ring", "Simple", 24)
    [row] = nccl.query("dgx_h100", sizes=["1GiB"], env={"NCCL_NVLS_ENABLE": True}).rows
    assert (row.algorithm, row.channels) == ("NVLS", 16)
    with pytest.raises(InputError) as error:
        nccl.query("dgx_h100", sizes=["1GiB"], env="NCCL_ALGO=Ring")  # type: ignore[arg-type]
    assert [str(p) for p in error.value.problems] == [
        "nccl.query: env: expected a mapping of NCCL variables to their values "
        "({'NCCL_ALGO': 'Ring'}), got 'NCCL_ALGO=Ring'"]
    with pytest.raises(InputError) as error:
        nccl.query("dgx_h100", sizes=["1GiB"], env={"NCCL_NVLS_ENABLE": 2})
    assert [str(p) for p in error.value.problems] == [
        "nccl.query: env NCCL_NVLS_ENABLE: expected 0 (no NVLS or NVLSTree) or 1, got '2'"]


def test_a_scenario_files_collective_and_nccl_are_the_defaults(capsys, tmp_path):
    # scenarios/pat_cluster.yaml is reduce_scatter: PAT at 4 KiB (one GPU a node), and
    # allreduce only where --collective says so
    pat = str(REPO / "scenarios" / "pat_cluster.yaml")
    assert rows(nccl.query(pat, sizes=["4KiB"])) == [(4 * KIB, "PAT", "Simple", 4)]
    assert nccl.query(pat, sizes=["4KiB"]).collective == "reduce_scatter"
    assert main(["nccl", pat, "--sizes", "4KiB", "--collective", "allreduce"]) == 0
    assert capsys.readouterr().out.splitlines()[2].split() == ["4KiB", "Tree", "LL", "1",
                                                               "47.807"]
    # nccl: {algo: Ring, proto: Simple} on two nodes: Ring/Simple at 1 MiB; an --env
    # variable wins over the key it sets, the others hold
    scenario = tmp_path / "ring.yaml"
    scenario.write_text("name: ring\ntopology: {preset: dgx_h100, nodes: 2}\n"
                        "algorithms: auto\nsizes: [1MiB]\n"
                        "nccl: {algo: Ring, proto: Simple, version: '2.26'}\n")
    table = nccl.query(str(scenario), sizes=["1MiB"])
    assert rows(table) == [(MIB, "Ring", "Simple", 16)] and table.version == "2.26"
    assert rows(nccl.query(str(scenario), sizes=["1MiB"], env={"NCCL_PROTO": "LL"})) == [
        (MIB, "Ring", "LL", 16)]
    assert nccl.query(str(scenario), sizes=["1MiB"], version="2.30").version == "2.30"
    # a bad value of the file's is the file's
    scenario.write_text("name: ring\ntopology: {preset: dgx_h100}\nalgorithms: auto\n"
                        "sizes: [1MiB]\ncollective: alltoall\n")
    assert main(["nccl", str(scenario)]) == 2
    assert capsys.readouterr().err == (
        f"{scenario}: collective: expected allreduce, reduce_scatter or allgather, the "
        f"collectives NCCL's model answers, got 'alltoall'\n")


def test_simulate_refuses_a_point_too_large_before_anything_runs(monkeypatch):
    # 1 TiB of NVLS on 8 ranks: 2 entries × 8 ranks × 2^21 pieces of 512 KiB = 33,554,432,
    # above 16 GiB / 600 bytes = 28,633,115 (the executor's trace budget)
    import simulator.runner

    def ran(*args, **kwargs):
        raise AssertionError("simulated")

    monkeypatch.setattr(simulator.runner, "simulate", ran)
    monkeypatch.setattr(simulator.runner, "run_plan", ran)
    with pytest.raises(InputError) as error:
        nccl.query("dgx_h100", sizes=["1KiB", "1TiB"], simulate=True)
    [problem] = error.value.problems
    assert (problem.file, problem.field) == ("nccl.query", "sizes")
    assert "33,554,432 schedule entries" in problem.message
    # 512 GiB is 16,777,216 entries: under the budget, so it reaches the runner
    with pytest.raises(AssertionError, match="simulated"):
        nccl.query("dgx_h100", sizes=["512GiB"], simulate=True)
