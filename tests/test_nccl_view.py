"""NCCL's own view as input (issue 24, item 2): its graph dump (``NCCL_GRAPH_DUMP_FILE``) and its
``NCCL_DEBUG=INFO`` log read into graphs, rings and trees, used in place of the assumed graphs
and channel orders, and every difference from the assumed ones said.

tests/data/nccl-info-h100x2.log is written in NCCL 2.30's line formats (src/init.cc, search.cc,
rings.cc, enqueue.cc) for 2 × 8 H100: graphs of 8 channels at 40 GB/s (not the assumed ones),
the rings and trees the simulator builds (so those agree), and three TUNING picks (those the
model makes on those graphs). tests/data/nccl-graph-h100.xml follows
search.cc's ``ncclTopoGetXmlFromGraphs`` for one DGX H100."""

from pathlib import Path

import pytest

from simulator.cli import main
from simulator.errors import InputError
from simulator.model.execution import system_of
from simulator.model.nccl import Graph, Hardware, NcclAlgorithm, Protocol
from simulator.model.nccl_view import read_graph_dump, read_log
from simulator.output.settings_json import settings
from simulator.plan import prepare
from simulator.runner import checked_setup, outlook, plan_points, settings_of, simulate
from simulator.scenario import scenario_from_dict

DATA = Path(__file__).parent / "data"
LOG = DATA / "nccl-info-h100x2.log"
DUMP = DATA / "nccl-graph-h100.xml"
TWO = {"preset": "dgx_h100", "nodes": 2}


def scenario(nccl, topology=TWO, **more):
    return {"name": "view", "topology": topology, "algorithms": "auto", "sizes": ["1MiB"],
            "nccl": nccl, **more}


def notes(data):
    read = scenario_from_dict(data, source="v.yaml")
    setup = checked_setup(read, settings_of(read))
    return outlook(read, setup, plan_points(read, setup, settings_of(read))).notes


def test_a_log_gives_the_graphs_rings_and_trees():
    view = read_log(LOG)
    assert [(g.id, g.pattern, g.channels, g.bw_intra_GBps, g.bw_inter_GBps)
            for g in view.graphs] == [(0, 4, 8, 40.0, 40.0), (1, 1, 8, 40.0, 40.0),
                                      (3, 5, 8, 40.0, 48.0)]
    assert view.by_algorithm()[NcclAlgorithm.NVLS_TREE] == Graph(8, 40.0, 48.0, Hardware.NVLINK)
    assert len(view.rings) == 8 and view.rings[1][:9] == (1, 2, 3, 4, 5, 6, 7, 0, 9)
    assert len(view.trees) == 16 and dict(view.trees[0])[0] == -1
    assert [(p.collective, p.size_bytes, p.algorithm, p.protocol, p.channels)
            for p in view.picks] == [
        ("AllReduce", 1024, NcclAlgorithm.TREE, Protocol.LL, 2),
        ("AllReduce", 1048576, NcclAlgorithm.TREE, Protocol.LL128, 16),
        ("AllReduce", 67108864, NcclAlgorithm.NVLS_TREE, Protocol.SIMPLE, 8)]


def test_a_graph_dump_gives_the_graphs_and_one_nodes_rings():
    view = read_graph_dump(DUMP)
    by_id = {g.id: g for g in view.graphs}
    assert sorted(by_id) == [0, 1, 2, 3, 4]
    assert (by_id[0].channels, by_id[0].channel_ranks[1]) == (4, (3, 4, 5, 6, 7, 0, 1, 2))
    assert by_id[2].channels == by_id[4].channels == 0
    assert set(view.by_algorithm()) == {NcclAlgorithm.RING, NcclAlgorithm.TREE,
                                        NcclAlgorithm.NVLS, NcclAlgorithm.NVLS_TREE}


def test_the_run_uses_nccls_graphs_and_says_how_they_differ():
    assert notes(scenario({"log": str(LOG)})) == tuple(f"{LOG} (log): {line}" for line in (
        "graph Tree: NCCL's 8 x 40/40 GB/s, assumed 8 x 48/48 GB/s",
        "graph Ring: NCCL's 8 x 40/40 GB/s, assumed 8 x 45/45 GB/s",
        "graph NVLS: NCCL's 8 x 40/48 GB/s, assumed 16 x 24/24 GB/s",
        "picks: the model picks what NCCL ran at all 3 calls logged"))
    machine = prepare(scenario_from_dict(scenario({"log": str(LOG)}))).machine
    graphs = system_of(machine).graphs
    assert (graphs[NcclAlgorithm.RING].channels, graphs[NcclAlgorithm.RING].bw_inter_GBps) == \
        (8, 40.0)
    assert graphs[NcclAlgorithm.NVLS] == graphs[NcclAlgorithm.NVLS_TREE]


def test_one_nodes_graph_dump_changes_ncclls_pick():
    # 4 ring channels at 40 GB/s (160 GB/s) instead of 12 at 30: NCCL's model no longer picks
    # Ring at 1 MiB on one DGX H100 but NVLS.
    one = {"preset": "dgx_h100"}
    for nccl, picked in (({}, "ring"), ({"graph": str(DUMP)}, "nvls")):
        frame = simulate(scenario(nccl, one))
        assert frame[frame.nccl_pick.astype(bool)].algorithm.tolist() == [picked]


def _rewritten(tmp_path, old, new):
    text = LOG.read_text()
    assert old in text
    path = tmp_path / "nccl.log"
    path.write_text(text.replace(old, new))
    return path


def test_ncclls_rings_are_the_channels_orders_and_a_difference_is_said(tmp_path):
    # Ring 0 crosses node 1 backwards: 0..7 then 15..8.
    backwards = " ".join(f"{r:>3}" for r in (*range(8), *range(15, 7, -1)))
    forwards = " ".join(f"{r:>3}" for r in range(16))
    path = _rewritten(tmp_path, f"Channel 00/08 :{' ' + forwards}", f"Channel 00/08 : {backwards}")
    data = scenario({"log": str(path)})
    setup = prepare(scenario_from_dict(data))
    assert setup.machine.layout.channel_order(0) == (*range(8), *range(15, 7, -1))
    assert setup.machine.layout.channel_order(9) == setup.machine.layout.assumed_order(1)
    said = notes(data)  # the rings, then the trees built on them, which the log's are not
    assert said[-3].endswith(
        "rings: 1 of NCCL's 8 differ from the assumed (hosts in order, each rotated by the "
        "channel); ring 0: 0 1 2 3 4 5 6 7 15 14 13 12 11 10 9 8, assumed 0 1 2 3 4 5 6 7 8 9 "
        "10 11 12 13 14 15")


def test_a_tree_that_is_not_double_binary_trees_is_said(tmp_path):
    # Rank 8's parent in channel 0 made 1 instead of 0 (the child host hung from g1).
    line = next(line for line in LOG.read_text().splitlines()
                if line.startswith("dgx1:4108:4208 [0] NCCL INFO Trees"))
    first = line.split(" [1] ")[0]
    assert first.endswith("->8->0")
    path = _rewritten(tmp_path, first, first[:-1] + "1")
    assert notes(scenario({"log": str(path)}))[-2].endswith(
        "trees: 1 of NCCL's 16 channels differ from double_binary_tree's; channel 0: rank 8's "
        "parent is 1, double_binary_tree's 0")


@pytest.mark.parametrize(("text", "message"), [
    ("h:1:1 [0] NCCL INFO Pattern 4, crossNic 0, nChannels x, bw 1/1, type NVL/PIX, "
     "sameChannels 0\n",
     "line 1: expected NCCL's format ('Pattern P, crossNic C, nChannels N, bw INTRA/INTER, type "
     "T/T, sameChannels S'), got 'Pattern 4, crossNic 0, nChannels x, bw 1/1, type NVL/PIX, "
     "sameChannels 0'"),
    ("h:1:1 [0] NCCL INFO Bootstrap : Using eth0\n",
     "expected NCCL_DEBUG=INFO lines: 'Pattern ...' graphs, 'Channel NN/MM :' rings or TUNING "
     "picks; found none (was NCCL_DEBUG=INFO set?)"),
    ("h:1:1 [0] NCCL INFO Channel 01/02 :   0   1\n",
     "expected 2 rings 'Channel 00/02' to 'Channel 01/02', got channels [1]"),
    ("h:1:1 [0] NCCL INFO Pattern 1, crossNic 0, nChannels 2, bw 1.0/1.0, type NVL/PIX, "
     "sameChannels 0\n", "line 1: expected the ring's graph first (Pattern 4), got Pattern 1"),
    (f"h:1:1 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 2, bw {'9' * 400}.0/1.0, type "
     "NVL/PIX, sameChannels 0\n",  # issue 40: read as infinity before
     f"line 1: expected bw in GB/s of at most 10,000, got '{'9' * 79}… (402 characters)"),
])
def test_a_bad_log_is_one_line_naming_file_and_line(tmp_path, text, message):
    path = tmp_path / "bad.log"
    path.write_text(text)
    with pytest.raises(InputError) as error:
        scenario_from_dict(scenario({"log": str(path)}), source="v.yaml")
    assert [str(p) for p in error.value.problems] == [f"v.yaml: nccl.log: {path}: {message}"]


BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
<graphs version="1">&lol2;</graphs>
"""


@pytest.mark.parametrize(("text", "message"), [
    (BILLION_LAUGHS, "line 2: expected no entity declarations, got 'lol': nested entities can "
                     "expand a few lines into gigabytes (the billion laughs)"),
    ('<?xml version="1.0"?>\n<!DOCTYPE g [<!ENTITY s SYSTEM "file:///etc/passwd">]>\n'
     '<graphs>&s;</graphs>\n',
     "line 2: expected no external entity, got 's' reading 'file:///etc/passwd': an XML input "
     "never reads another file or URL"),
    ('<graphs version="1">\n  <graph id="0" pattern="4" crossnic="0" speedintra="1" '
     'speedinter="1" typeintra="NVL" typeinter="PIX"/>\n</graphs>\n',
     "<graph> at line 2: required attribute 'nchannels' is missing"),
    ('<graphs version="1">\n  <graph id="9" pattern="4" nchannels="0" speedintra="1" '
     'speedinter="1" typeintra="NVL" typeinter="PIX"/>\n</graphs>\n',
     "<graph> at line 2: expected a graph id of [0, 1, 2, 3, 4] (0 Ring, 1 Tree, 2 "
     "CollNetChain, 3 NVLS, 4 CollNetDirect), got 9"),
    ('<graphs>\n  <graph id="0"\n</graphs>\n',
     "line 3: expected NCCL_GRAPH_DUMP_FILE's XML, got text that does not parse as XML (not "
     "well-formed (invalid token), column 1)"),
    ('<system version="1"/>\n', "<system> at line 1: expected <graphs> (NCCL_GRAPH_DUMP_FILE's "
                                "root), got <system>"),
])
def test_a_bad_graph_dump_is_one_line_naming_element_and_line(tmp_path, text, message):
    path = tmp_path / "bad.xml"
    path.write_text(text)
    with pytest.raises(InputError) as error:
        scenario_from_dict(scenario({"graph": str(path)}), source="v.yaml")
    assert [str(p) for p in error.value.problems] == [f"v.yaml: nccl.graph: {path}: {message}"]


def test_a_log_of_another_machine_is_refused(tmp_path):
    data = scenario({"log": str(LOG)}, {"preset": "dgx_h100"})
    with pytest.raises(InputError) as error:
        prepare(scenario_from_dict(data, source="v.yaml"))
    assert [str(p) for p in error.value.problems] == [
        f"v.yaml: nccl.log: {LOG}: ring 0 holds ranks [0, 1, 2, 3, 4, 5, 6, 7, ...] (16), "
        "expected each of the topology's 8 ranks once (a log of this machine's job)"]


@pytest.mark.parametrize(("nccl", "more", "message"), [
    ({"log": str(LOG), "graph": str(DUMP)}, {},
     "v.yaml: nccl.log: expected one of nccl.graph (NCCL_GRAPH_DUMP_FILE's XML) and nccl.log "
     "(an NCCL_DEBUG=INFO log), not both"),
    ({"log": 3}, {}, "v.yaml: nccl.log: expected a file name, got 3"),
    ({"log": str(LOG)}, {"execution": "ideal", "algorithms": ["ring"]},
     "v.yaml: nccl.log: expected execution: nccl with NCCL's own graphs and rings (NCCL's model "
     "runs on them), got execution: ideal"),
    ({"log": "missing.log"}, {}, "v.yaml: nccl.log: missing.log: no such file"),
])
def test_bad_nccl_view_keys(nccl, more, message):
    with pytest.raises(InputError) as error:
        scenario_from_dict(scenario(nccl, **more), source="v.yaml")
    assert [str(p) for p in error.value.problems] == [message]


def test_the_settings_file_names_the_log(tmp_path):
    read = scenario_from_dict(scenario({"log": str(LOG)}))
    written = settings(read, read.run)["scenario"]
    assert written["nccl"] == {"log": str(LOG)}
    assert scenario_from_dict(written).nccl.view == read.nccl.view


def test_a_run_says_the_differences_on_stderr(tmp_path, capsys):
    source = tmp_path / "v.yaml"
    source.write_text(f"topology: {{preset: dgx_h100, nodes: 2}}\nalgorithms: [ring]\n"
                      f"sizes: [1MiB]\nnccl: {{log: {LOG}}}\n")
    assert main(["run", str(source), "--output", str(tmp_path / "out"), "--quiet"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"{source}: {LOG} (log): graph Tree: NCCL's 8 x 40/40 GB/s, assumed 8 x 48/48 GB/s",
        f"{source}: {LOG} (log): graph Ring: NCCL's 8 x 40/40 GB/s, assumed 8 x 45/45 GB/s",
        f"{source}: {LOG} (log): graph NVLS: NCCL's 8 x 40/48 GB/s, assumed 16 x 24/24 GB/s",
        f"{source}: {LOG} (log): picks: the model picks what NCCL ran at all 3 calls logged"]


def test_what_nccl_ran_is_compared_with_the_models_pick(tmp_path):
    path = _rewritten(tmp_path, "1048576 Bytes -> Algo TREE proto LL128",
                      "1048576 Bytes -> Algo RING proto SIMPLE")
    assert notes(scenario({"log": str(path)}))[-1].endswith(
        "picks: the model picks otherwise than NCCL ran at 1 of 3 calls logged: AllReduce "
        "1048576 B: NCCL Ring/Simple, the model Tree/LL128")


def test_rings_from_every_ranks_ring_lines(tmp_path):
    # Without rank 0's Channel lines, each rank's 'Ring 00 : prev -> rank -> next' chains them.
    lines = [f"h:1:1 [0] NCCL INFO Ring 00 : {(r - 1) % 4} -> {r} -> {(r + 1) % 4}"
             for r in (2, 0, 3, 1)]
    path = tmp_path / "rings.log"
    path.write_text("\n".join(lines) + "\n")
    assert read_log(path).rings == ((0, 1, 2, 3),)
    path.write_text("\n".join(lines[:3]) + "\n")  # rank 1's line missing: no ring closes
    with pytest.raises(InputError) as error:
        read_log(path)
    assert str(error.value) == (f"{path}: expected the 'Ring 00' lines of every rank to close one "
                                "ring, got 3 ranks whose next from 0 goes 0 -> 1")
