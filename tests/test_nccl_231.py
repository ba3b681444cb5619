"""NCCL 2.31 as ``nccl: {version: "2.31"}`` (issue 38, item 1): its record read from the dev
branch at 2.31.0a7 (src/tuning/*.cc), times worked by hand from its lines, the pick where it
differs from 2.30.7, the symmetric LL kernel on unregistered buffers, and its log lines.

tests/data/nccl-info-h100x2-2.31.log is written from 2.31.0a7's format strings (its first line
says so), not captured from a run: the Pattern lines of nccl-info-h100x2.log, then two calls'
``Input``/``Best tuning`` lines for ranks 0 and 1 and rank 0's ``Bytes -> Algo`` line, with the
times this model predicts on those graphs."""

from dataclasses import fields
from pathlib import Path

import pytest

from simulator import InputError, simulate
from simulator.model.collective import Collective
from simulator.model.nccl import (
    DEFAULT_GRAPHS,
    Arch,
    Graph,
    NcclAlgorithm,
    Protocol,
    System,
    Version,
    bandwidth_GBps,
    choose,
    latency_us,
    predicted_time_us,
)
from simulator.model.nccl_tuning_log import Tuned, TuningLines
from simulator.model.nccl_versions import (
    NCCL_2_30,
    NCCL_2_31,
    TUNINGS,
    intra_up_to_two_nodes,
    ring_inter_tree_least,
)
from simulator.model.nccl_view import read_log
from simulator.runner import checked_setup, outlook, plan_points, settings_of
from simulator.scenario import scenario_from_dict

R, T, NT, P = NcclAlgorithm.RING, NcclAlgorithm.TREE, NcclAlgorithm.NVLS_TREE, NcclAlgorithm.PAT
LL, LL128, S = Protocol.LL, Protocol.LL128, Protocol.SIMPLE
LOG = Path(__file__).parent / "data" / "nccl-info-h100x2-2.31.log"


def test_2_31_is_2_30_but_for_the_rules_its_source_changed():
    changed = {f.name for f in fields(NCCL_2_30)
               if getattr(NCCL_2_31, f.name) != getattr(NCCL_2_30, f.name)}
    assert changed == {"source", "channel_bw", "ppn_one_tree_network", "pat_flushes",
                       "ties_to_later", "symmetric_ll_unregistered"}
    assert NCCL_2_31.source == "NVIDIA/nccl dev 2.31.0a7 (commit 86fa684d) src/tuning/*.cc"
    assert TUNINGS[Version.V2_31] is NCCL_2_31 and Version("2.31") is Version.V2_31
    assert (NCCL_2_30.channel_bw, NCCL_2_31.channel_bw) == (intra_up_to_two_nodes,
                                                            ring_inter_tree_least)
    assert (NCCL_2_30.pat_flushes, NCCL_2_31.pat_flushes) == (2, 1)
    assert (NCCL_2_30.ppn_one_tree_network, NCCL_2_31.ppn_one_tree_network) == (True, False)
    assert (NCCL_2_30.ties_to_later, NCCL_2_31.ties_to_later) == (False, True)
    assert NCCL_2_31.symmetric_ll_unregistered and not NCCL_2_30.symmetric_ll_unregistered
    # cost_model.cc:141-226: the tables of v2.30.7's tuning.cc, e.g. hwLat NET NVLSTree 20.9 µs
    # (line 181) and Hopper's perChMaxNVLSTreeBws {0, 57.7, 45.5} (line 217)
    assert NCCL_2_31.hw_latency_us is NCCL_2_30.hw_latency_us
    assert NCCL_2_31.per_channel_max_nvls_tree_gbps[Arch.HOPPER] == (0.0, 57.7, 45.5)


def test_the_channel_rules_on_a_graph_whose_intra_and_inter_differ():
    graph = Graph(8, 48.0, 24.0)
    # 2.30 (tuning.cc:306): bwIntra up to two nodes, bwInter from three
    assert [intra_up_to_two_nodes(a, graph, n) for a in (R, T, P) for n in (1, 2, 3)] == [
        48.0, 48.0, 24.0] * 3
    # 2.31: Ring bwInter across nodes (ring.cc:35-36); Tree, PAT the least (tree.cc:28, pat.cc:41)
    assert [ring_inter_tree_least(a, graph, n) for a in (R, T, P) for n in (1, 2, 3)] == [
        48.0, 24.0, 24.0, 24.0, 24.0, 24.0, 24.0, 24.0, 24.0]


def dgx_h100(nodes: int, version: Version) -> System:
    """2 × DGX H100 as the simulator's presets give NCCL's search (execution._across): Ring 8 ×
    45/45, Tree 8 × 48/48, NVLSTree 8 × 40/48 GB/s, an Intel CPU, no extra network latency."""
    graphs = {R: Graph(8, 45.0, 45.0), T: Graph(8, 48.0, 48.0), NT: Graph(8, 40.0, 48.0)}
    return System(8 * nodes, nodes, Arch.HOPPER, graphs, version=version)


def test_ring_simple_on_two_dgx_h100_by_hand():
    system = dgx_h100(2, Version.V2_31)
    # ring.cc:35-45: 8 channels × bwInter 45 = 360 GB/s bus, × nRanks/nSteps = 16/30: 192
    assert bandwidth_GBps(system, R, S) == pytest.approx(192.0)
    # ring.cc:43-78: baseLat 8.4 + (30 - 2) × max(NVLink 3.4, 3 × the Intel overhead 1.0)
    # + 2 network steps × 14 = 131.6 µs
    assert latency_us(system, R, S) == pytest.approx(131.6)
    # ring.cc:97-100: × 1.4 from 64 B per rank and channel; + bytes / 192 GB/s
    assert predicted_time_us(system, R, S, 1 << 20) == pytest.approx(1.4 * 131.6 + 1048576 / 192e3)
    assert predicted_time_us(system, R, S, 1 << 30) == pytest.approx(
        1.4 * 131.6 + 1073741824 / 192e3)


def test_tree_ll128_on_two_dgx_h100_by_hand():
    system = dgx_h100(2, Version.V2_31)
    # tree.cc:28-40: min(48, 48) × 8 = 384; min(× .92, 8 × 41.4) = 331.2; × 120/128 = 310.5;
    # min(that, 8 × 36.7 = 293.6); × 0.5 = 146.8 GB/s
    assert bandwidth_GBps(system, T, LL128) == pytest.approx(146.8)
    # tree.cc:52-54: baseLat 14 + 2 × (7 × NVLink 1.25 + log2i(2) × NET 8.5) = 48.5 µs
    assert latency_us(system, T, LL128) == pytest.approx(48.5)
    # tree.cc:72-76: 1 MiB is log2i(16384) = 14, LL128's factor .6; 64 MiB entry 20, .9
    assert predicted_time_us(system, T, LL128, 1 << 20) == pytest.approx(
        48.5 + 1048576 / (146.8e3 * 0.6))
    assert predicted_time_us(system, T, LL128, 64 << 20) == pytest.approx(
        48.5 + 67108864 / (146.8e3 * 0.9))


def test_nvlstree_simple_on_two_dgx_h100_by_hand():
    system = dgx_h100(2, Version.V2_31)
    # nvls.cc:63-74, 104: min(40 × .85 × 7/8 × 2 = 59.5, 48 × 2, the cap 57.7) × 8 channels
    # × 16/30
    assert bandwidth_GBps(system, NT, S) == pytest.approx(57.7 * 8 * 16 / 30)
    # nvls.cc:105-121: 0 + NVLink 25 + 2 × log2i(2) × NET 20.9 = 66.8 µs
    assert latency_us(system, NT, S) == pytest.approx(66.8)
    assert predicted_time_us(system, NT, S, 64 << 20) == pytest.approx(
        66.8 + 67108864 / (57.7e3 * 8 * 16 / 30))
    # the same graphs, bwIntra = bwInter for Ring and Tree: 2.30 and 2.31 agree on every pair
    older = dgx_h100(2, Version.V2_30)
    for size in (1 << 20, 64 << 20, 1 << 30):
        assert choose(system, size) == choose(older, size)


def test_where_the_two_node_tree_takes_the_smaller_bandwidth_the_pick_moves():
    # a two-node graph whose search raised bwIntra to 48 (pass 2, trees on two nodes) over a
    # 200 Gb/s NIC's 24 GB/s
    graphs = {R: Graph(8, 48.0, 24.0), T: Graph(8, 48.0, 24.0), NT: Graph(8, 40.0, 48.0)}
    old, new = (System(16, 2, Arch.HOPPER, graphs, version=v) for v in (Version.V2_30,
                                                                          Version.V2_31))
    size = 256 << 10
    # 2.30: Tree/LL128 at bwIntra: 293.6 × 0.5 = 146.8 GB/s, × .6 (entry 12) = 88.08;
    # 48.5 + 262144 / 88080 = 51.4762 µs
    assert choose(old, size).algorithm is T and choose(old, size).protocol is LL128
    assert choose(old, size).time_us == pytest.approx(48.5 + 262144 / 88.08e3)
    # 2.31: Tree/LL128 at min(48, 24): min(8 × 24 × .92, 331.2) × 120/128 × 0.5 = 82.8, × .6;
    # 48.5 + 262144 / 49680 = 53.7767 µs, behind Ring/LL: min(llMaxBws 39, 8 × 24 × .5) ×
    # 16/30 = 20.8 GB/s; 6.6 + 28 × max(0.6, 1.0) + 2 × 2.7 = 40 µs; 40 + 262144 / 20800
    assert predicted_time_us(new, T, LL128, size) == pytest.approx(48.5 + 262144 / 49.68e3)
    assert choose(new, size).algorithm is R and choose(new, size).protocol is LL
    assert choose(new, size).time_us == pytest.approx(40.0 + 262144 / 20.8e3)


def test_one_gpu_per_node_pays_each_algorithms_own_network_step():
    graphs = {R: Graph(4, 12.0, 12.0, latency_inter_us=3.5),
              T: Graph(4, 12.0, 12.0, latency_inter_us=3.5)}
    old, new = (System(4, 4, Arch.HOPPER, graphs, version=v) for v in (Version.V2_30,
                                                                         Version.V2_31))
    gather = Collective.ALLGATHER
    # Ring LL AllGather, 3 network steps: 2.30 at Tree's NET LL 5.0 (tuning.cc:387), 2.31 at
    # Ring's own 2.7 (ring.cc:52-54), each + latencyInter 3.5
    assert latency_us(old, R, LL, gather) == pytest.approx(6.6 + 3 * (5.0 + 3.5))
    assert latency_us(new, R, LL, gather) == pytest.approx(6.6 + 3 * (2.7 + 3.5))
    # PAT: 8 + log2i(4) × interLat / 3.5 + 4 × 2.8, interLat 14 + latencyInter twice (2.30,
    # tuning.cc:389-391) or once (pat.cc:47-48)
    assert latency_us(old, P, S, gather) == pytest.approx(8 + 2 * (14 + 7.0) / 3.5 + 11.2)
    assert latency_us(new, P, S, gather) == pytest.approx(8 + 2 * (14 + 3.5) / 3.5 + 11.2)


def one_node(version: str, size: str, **nccl: object) -> str:
    read = scenario_from_dict({"topology": {"preset": "dgx_h100"}, "algorithms": "auto",
                               "sizes": [size], "verify": False, "execution": "nccl",
                               "nccl": {"version": version, **nccl}})
    frame = simulate(read)
    assert len(frame) == 1
    return str(frame.algorithm.iloc[0])


def test_2_31_runs_the_symmetric_ll_kernel_where_its_tuner_picks_ll():
    # on one DGX H100 the tuner picks Ring/LL at 64 KiB; 2.31 then keeps its best one-shot LL
    # kernel (tuning.cc:265-283) on unregistered buffers, where 2.30.7 falls back always
    assert choose(System(8, 1, Arch.HOPPER, DEFAULT_GRAPHS[Arch.HOPPER],
                         version=Version.V2_31), 64 << 10).protocol is LL
    assert one_node("2.30", "64KiB") == "ring"
    assert one_node("2.31", "64KiB") == "one_shot"
    # NCCL_ALGO set disables every symmetric kernel (cost_model.cc:315-318)
    assert one_node("2.31", "64KiB", algo="ring") == "ring"
    # registered buffers: the symmetric kernels as 2.30's (sym_model.cc:181-275)
    assert one_node("2.31", "64MiB", symmetric=True) == one_node("2.30", "64MiB", symmetric=True)


def test_a_bad_version_names_the_accepted_ones():
    with pytest.raises(InputError) as error:
        scenario_from_dict({"topology": {"preset": "dgx_h100"}, "sizes": [1024],
                            "nccl": {"version": "2.31.2"}}, source="s.yaml")
    assert [str(p) for p in error.value.problems] == [
        "s.yaml: nccl.version: expected the NCCL whose tuner picks: 2.26, 2.30, 2.31 (2.26: "
        "NCCL 2.26-2.27; 2.30: 2.30.x; 2.31: the 2.31.0a7 dev source), got '2.31.2'"]


def test_a_2_31_log_reads_its_tuning_lines():
    view = read_log(LOG)
    assert [(g.id, g.channels, g.bw_intra_GBps, g.bw_inter_GBps) for g in view.graphs] == [
        (0, 8, 40.0, 40.0), (1, 8, 40.0, 40.0), (3, 8, 40.0, 48.0)]
    # the first process's lines only (rank 1 prints its own)
    assert view.tunings == (
        Tuned("AllReduce", 1048576, 61.163963, T, LL128, None, 16),
        Tuned("AllReduce", 67108864, 339.393402, NT, S, None, 8))
    assert [(p.size_bytes, p.algorithm, p.protocol) for p in view.picks] == [
        (1048576, T, LL128), (67108864, NT, S)]


def test_a_run_on_a_2_31_log_compares_nccls_predicted_times():
    read = scenario_from_dict({"name": "v", "topology": {"preset": "dgx_h100", "nodes": 2},
                               "algorithms": "auto", "sizes": ["1MiB"],
                               "nccl": {"log": str(LOG), "version": "2.31"}}, source="v.yaml")
    setup = checked_setup(read, settings_of(read))
    notes = outlook(read, setup, plan_points(read, setup, settings_of(read))).notes
    assert notes[-2:] == (
        f"{LOG} (log): picks: the model picks what NCCL ran at all 2 calls logged",
        f"{LOG} (log): predicted times: the model is within 0.0% of NCCL's own at the 2 calls "
        f"its Best tuning lines rate (the farthest: AllReduce 67108864 B NVLSTree/Simple: NCCL "
        f"339.393 us, the model 339.393 us)")


PREFIX = "h:1:2 [0] NCCL INFO "


def test_a_symmetric_argmin_nests_the_general_one_and_pairs_like_brackets():
    lines = TuningLines([])
    symmetric = ("Input: { .comm = 0x1, .tuningMask = 1, .func = AllReduce, .redOp = 0, "
                 ".devRedop = 0, .dataType = 7, .nBytes = {n}, .numPipesOps = 0, .count = 1, "
                 ".countMax = 1, .nWorks = 1, .winRegType = 0, .regBuff = 0 }}")
    best = ("Best tuning {{ .id = {i}, .valid = 1, timeUs = {t},  .algo = {a}, .proto = {p}, "
            ".symKernelId = {k}, nChannels = {c}, maxChannels = {c}, nWarps = 16, forced = 0 }}")
    for text in (symmetric.replace("{n}", "65536").replace("}}", "}"),
                 symmetric.replace("{n}", "65536").replace("}}", "}"),
                 best.format(i=4, t="30.5", a="RING", p="LL", k="Unknown", c=2),
                 best.format(i=21, t="9.25", a="Unknown", p="Unknown", k="AllReduce_AGxLLMC_R",
                             c=8)):
        assert lines.take(PREFIX + text)
    assert lines.tuned == [Tuned("AllReduce", 65536, 30.5, R, LL, None, 2),
                           Tuned("AllReduce", 65536, 9.25, None, None, "AllReduce_AGxLLMC_R", 8)]
    assert lines.take(PREFIX + "Best tuning, algorithm, RING, protocol, LL")
    assert not lines.take(PREFIX + "AllReduce: 65536 Bytes -> Algo RING proto LL "
                                   "channel{Lo..Hi}={0..1}")


def test_a_malformed_tuning_line_is_an_error_naming_the_line(tmp_path):
    log = tmp_path / "bad.log"
    log.write_text(LOG.read_text().replace("timeUs = 61.163963,", "timeUs = fast,"))
    with pytest.raises(InputError) as error:
        read_log(log)
    assert [str(p) for p in error.value.problems] == [
        f"{log}: line 15: expected NCCL 2.31's 'Input: {{ ... .func = F, ... .nBytes = N, ... }}' "
        "or 'Best tuning { .id = I, .valid = V, timeUs = T,  .algo = A, .proto = P, "
        ".symKernelId = K, nChannels = C, maxChannels = M, nWarps = W, forced = F }' "
        "(src/tuning/tuning.cc:176-181, 286-291)"]
