"""NVLSTree (simulator/algorithms/nvls_tree.py): where it runs, the heads' tree across hosts as
NCCL's connectNvls builds it, both engines alike, its closed form worked by hand, and the NVLink
rate the NCCL execution model gives it; NCCL's tuner rates and picks it."""

import numpy as np
import pytest

from simulator.algorithms import REGISTRY
from simulator.algorithms.host_tree import double_host_tree, host_depth
from simulator.algorithms.nvls_tree import window
from simulator.algorithms.schedule import NONE, Group, Op
from simulator.model.collective import Collective
from simulator.model.execution import (
    NVLINK_GBPS_PER_LINK,
    NVLS_SHARE,
    nvls_tree_chunk_bytes,
    nvls_tree_nvlink_Bps,
    nvls_tree_piece_bytes,
    system_of,
)
from simulator.model.machine import Machine
from simulator.model.nccl import Arch, NcclAlgorithm, Protocol, bandwidth_GBps, choose, latency_us
from simulator.plan import prepare
from simulator.runner import simulate
from simulator.scenario.parse import scenario_from_dict

NVLS_TREE = REGISTRY[Collective.ALLREDUCE]["nvls_tree"]
SMALL = {"kind": "dgx", "nodes": 2, "gpus_per_node": 2, "nvlink_bandwidth": "400GB/s",
         "nvlink_latency": "300ns", "pcie_bandwidth": "50GB/s", "pcie_latency": "500ns",
         "nic_bandwidth": "25GB/s", "nic_latency": "1us", "nvswitch_reduction": True}
"""Two hosts of two GPUs in round numbers: NVLink 400 GB/s, NICs 25 GB/s, no reduction latency."""


def machine_of(topology: dict) -> Machine:
    scenario = scenario_from_dict({"topology": topology, "algorithms": ["ring"], "sizes": [8]})
    return prepare(scenario, select=False).machine


def test_it_runs_across_hosts_that_reduce_in_their_switches():
    assert NVLS_TREE.unsupported(machine_of({"preset": "dgx_h100"})) == (
        "it needs GPUs on two or more hosts (NCCL runs NVLS on one host), such as dgx_h100 with "
        "nodes ≥ 2")
    assert NVLS_TREE.unsupported(machine_of({**SMALL, "nvswitch_reduction": False})) == (
        "it needs a switch with in-switch reduction (reduction: true) cabled to every GPU of "
        "each host, such as the NVSwitch of a dgx_h100 node")
    assert NVLS_TREE.unsupported(machine_of({"preset": "dgx_h100", "nodes": 2})) is None


@pytest.mark.parametrize("hosts", [2, 3, 5, 6, 16, 64, 128])
def test_the_heads_tree_is_ncclGetDtree_over_each_rank_of_the_hosts(hosts):
    # connectNvls: head h of a host (here its h-th GPU) sends up to head h of its parent host in
    # the tree of its channel and down to head h of its children, nothing else crosses hosts
    # (the network's messages are exactly the two trees' edges, on every rail)
    local = 2
    machine = machine_of({**SMALL, "nodes": hosts, "gpus_per_node": local})
    schedule = NVLS_TREE.scheduled(Group.whole(machine, 4096, 4))
    across = {(int(a), int(b)) for a, b, kind in zip(schedule.src, schedule.dst, schedule.kinds,
                                                       strict=True)
              if kind == Op.MESSAGE and a // local != b // local}
    edges = {(host * local + h, parent * local + h) for host in range(hosts)
             for node in double_host_tree(host, hosts) if (parent := node.parent) is not None
             for h in range(local)}
    assert across == edges | {(b, a) for a, b in edges}


@pytest.mark.parametrize("hosts", [16, 64, 128])
def test_the_heads_trees_at_scale_are_ncclGetBtree_and_its_mirror(hosts):
    # trees.cc, for a power of two: the root 0 has one child, hosts/2; any other host h, whose
    # lowest set bit is b, has the children h - b/2 and h + b/2 (none where b = 1) and the
    # parent h - b where h has bit 2b set or h + b is no host, else h + b; ncclGetDtree's second tree is the
    # first mirrored, h -> hosts - 1 - h (an even count). Every head (the h-th GPU of every
    # host) takes its host's place (connectNvls), which the test above checks on the schedule.
    def first(h: int) -> tuple[int | None, tuple[int, ...]]:
        if h == 0:
            return None, (hosts // 2,)
        b = h & -h
        up = h - b if h & (2 * b) or h + b >= hosts else h + b
        return up, ((h - b // 2, h + b // 2) if b > 1 else ())

    def mirror(h: int) -> int:
        return hosts - 1 - h

    for h in range(hosts):
        one, two = double_host_tree(h, hosts)
        parent, children = first(h)
        assert (one.parent, one.children) == (parent, children)
        parent, children = first(mirror(h))
        assert two.parent == (None if parent is None else mirror(parent))
        assert two.children == tuple(mirror(c) for c in children)
    depths = [max(host_depth(h, hosts, t) for h in range(hosts)) for t in range(2)]
    assert depths == [hosts.bit_length() - 1] * 2  # log2: 4, 6 and 7 edges deep


def test_a_scatter_runs_a_window_of_nccl_steps_a_connection_ahead_of_its_gather():
    # all_reduce.h: the scatter, reduce, broadcast and gather warps wait on one another only
    # through their connections' NCCL_STEPS = 8 slots; between a GPU's scatter and its gather
    # a piece crosses the scatter's, d up, d down and the multicast's: 8(2d + 2) pieces
    assert [window(d) for d in range(5)] == [16, 32, 48, 64, 80]
    # two hosts of two GPUs, 64 KiB pieces of 4 MiB halves: 32 a head's chunk, 64 a GPU's per
    # tree. The root host (depth 0) posts its first 17 rows of uploads at the start, the other
    # (depth 1) 33, each row a piece for each of the 2 heads; the mirror tree swaps them.
    machine = machine_of(SMALL)
    schedule = NVLS_TREE.scheduled(Group.whole(machine, 2 << 20, 4, piece_bytes=64 << 10))
    at_start = [int(((schedule.src == rank) & (schedule.dst < 0)
                     & (schedule.posted_after == NONE)).sum()) for rank in range(4)]
    assert at_start == [(17 + 32) * 2] * 4  # a chunk's 32 pieces cap the deeper host's 33


@pytest.mark.parametrize("topology, size, execution, channels", [
    (SMALL, 8 << 20, "ideal", 1), ({**SMALL, "nodes": 3}, 3 << 20 | 12, "ideal", 1),
    ({"preset": "dgx_h100", "nodes": 2}, 16 << 20, "nccl", 1),
    ({"preset": "dgx_h100", "nodes": 2}, 64 << 20, "nccl", 1),  # NCCL's pieces of 1 MiB
    ({"preset": "dgx_h100", "nodes": 3}, 1 << 20, "nccl", 1),
    ({"preset": "dgx_h100", "nodes": 3, "gpus_per_node": 4}, 6 << 20 | 12, "nccl", 3)])
def test_both_engines_time_it_alike_to_the_bit(topology, size, execution, channels):
    # the vectorised engine runs its builder's schedule (on 3 channels, three side by side)
    scenario = {"topology": topology, "algorithms": ["nvls_tree"], "sizes": [size],
                "execution": execution, "op": "max", "channels": channels}
    simpy, vector = (simulate({**scenario, "engine": engine}) for engine in ("simpy", "vector"))
    assert list(simpy.engine) == ["simpy"] and list(vector.engine) == ["vector"]
    np.testing.assert_array_equal(vector.sim_time_s, simpy.sim_time_s)
    assert vector.verified.all() and simpy.verified.all()
    assert list(vector.messages) == list(simpy.messages)


def test_the_closed_form_worked_by_hand():
    # 8 MiB on two hosts of two GPUs: halves of 4 MiB, each head's chunk 2 MiB in k = 4 pieces
    # of c = 512 KiB. Latencies: up and down the NVSwitch 0.3 µs each (twice: the host's sum and
    # the multicast), a network hop 0.5 + 1 + 1 + 0.5 = 3 µs up and one down (depth 1).
    # Chain: L + 3 = 5 pieces over NVLink (400 GB/s), 2 over the NIC (25 GB/s). Step: each NIC
    # serves one edge of each tree, 2c a piece (2(L+1)c = 6c over NVLink is less).
    c = 512 << 10
    delay = 2 * (0.3e-6 + 0.3e-6) + 2 * 3e-6
    chain = 5 * c / 400e9 + 2 * c / 25e9
    step = 2 * c / 25e9
    [row] = simulate({"topology": SMALL, "algorithms": ["nvls_tree"],
                      "sizes": [8 << 20]}).itertuples()
    assert row.model_time_s == pytest.approx(delay + chain + 3 * step, rel=1e-12)
    assert row.model_time_s == pytest.approx(181.52576e-6, rel=1e-9)
    assert row.sim_time_s == pytest.approx(183.76864e-6, rel=1e-9)  # 1.2 % above: sharing


def test_the_closed_form_follows_the_simulation_on_two_dgx_h100():
    # under NCCL's execution: 3.2 % above at 1 GiB, where the pipeline is long (64 pieces of
    # NCCL's 8 x 128 KiB a head and tree; 1.6 % with 128 of 512 KiB); at 16 MiB (two pieces of
    # 8 x 64 KiB) the shared links' start-up makes the simulation 24 % slower
    frame = simulate({"topology": {"preset": "dgx_h100", "nodes": 2},
                      "algorithms": ["nvls_tree"], "sizes": ["16MiB", "1GiB"], "verify": False,
                      "engine": "vector"})
    ratio = list(frame.sim_time_s / frame.model_time_s)
    assert ratio == pytest.approx([1.2378, 1.0321], abs=1e-4)


@pytest.mark.parametrize("nodes, part, chunk", [
    (2, 64 << 20, 128 << 10), (2, 4 << 20, 128 << 10), (2, (4 << 20) - 1, 64 << 10),
    (2, 512 << 10, 64 << 10), (2, (512 << 10) - 1, 32 << 10), (3, 64 << 20, 128 << 10),
    (4, 64 << 20, 64 << 10), (64, 512 << 10, 64 << 10), (64, 256 << 10, 32 << 10)])
def test_its_chunk_is_calccollchunkings(nodes, part, chunk):
    # one channel's part, 8 heads (src/enqueue.cc:725-737 calls it a channel at a time, 2276-2285
    # cuts): min(NVLS_CHUNKSIZE 128 KiB, 64 KiB from 4 nodes, nvls.cc:229), 64 KiB below
    # 4 x 8 x 128 KiB = 4 MiB, 32 KiB below 1 x 8 x 64 KiB = 512 KiB
    assert nvls_tree_chunk_bytes(part, nodes, 8) == chunk


def test_a_piece_is_one_trees_channels_chunks_on_hopper_only():
    # channel c runs tree c % 2: 8 of the 16 channels a tree, each a chunk of every head's part
    # (16 channels, a part S / 16 each)
    two, three, four = (machine_of({"preset": "dgx_h100", "nodes": n}) for n in (2, 3, 4))
    assert nvls_tree_piece_bytes(two, 1 << 30) == 8 * (128 << 10) == 1 << 20
    assert nvls_tree_piece_bytes(three, 64 << 20) == 1 << 20
    assert nvls_tree_piece_bytes(two, (64 << 20) - 64) == 8 * (64 << 10)
    assert nvls_tree_piece_bytes(four, 1 << 30) == 8 * (64 << 10) == 512 << 10
    assert nvls_tree_piece_bytes(two, 4 << 20) == nvls_tree_piece_bytes(four, 4 << 20) == 8 * (32 << 10)
    assert nvls_tree_piece_bytes(machine_of({"preset": "dgx_b200", "nodes": 2}), 1 << 30) is None


def test_under_nccls_execution_it_runs_nccls_pieces_unless_the_scenario_sets_them():
    # 64 MiB on two DGX H100: NCCL's 128 KiB chunks, pieces of 1 MiB a head and tree; the
    # scenario's piece_size wins where it is set; on the ideal wire the schedule's 512 KiB
    def run(**more):
        scenario = {"topology": {"preset": "dgx_h100", "nodes": 2}, "algorithms": ["nvls_tree"],
                    "sizes": ["64MiB"], "execution": "nccl", "engine": "vector"}
        return simulate({**scenario, **more})
    auto, mib, half = run(), run(piece_size="1MiB"), run(piece_size="512KiB")
    assert list(auto.sim_time_s) == list(mib.sim_time_s) != list(half.sim_time_s)
    assert list(auto.model_time_s) == list(mib.model_time_s)
    assert list(auto.messages) == list(mib.messages) == [half.messages.iloc[0] // 2]
    assert auto.verified.all()
    ideal, ideal_half = (run(execution="ideal", **more) for more in ({}, {"piece_size": "512KiB"}))
    assert list(ideal.sim_time_s) == list(ideal_half.sim_time_s)


def test_its_nvlink_rate_adds_the_heads_share_to_nvls():
    # each of the L heads also pulls its chunk's sum out of the switch and stores the total
    # back: (L + 1) / L of what the nvls program moves, at NVLS's rate
    machine = machine_of({"preset": "dgx_h100", "nodes": 2})
    nvls = NVLS_SHARE * 18 * NVLINK_GBPS_PER_LINK[Arch.HOPPER] * 1e9
    assert nvls_tree_nvlink_Bps(machine, nvls) == pytest.approx(nvls * 9 / 8)
    assert nvls_tree_nvlink_Bps(machine, nvls) / (18 * 20.6e9) == pytest.approx(0.833625)


def test_nccls_tuner_rates_it_on_the_multi_node_nvls_graph():
    # tuning.cc on the NVLS graph (8 heads, bwIntra 40, bwInter 48, assumed): per channel
    # min(40 · 0.85 · 7/8 · 2 = 59.5, 48 · 2 (two nodes) = 96, perChMaxNVLSTreeBw 57.7) = 57.7,
    # busBw 8 · 57.7 = 461.6, algbw × 16/30; latency intraLat 25 + 2 · log2(2) · interLat 20.9
    system = system_of(machine_of({"preset": "dgx_h100", "nodes": 2}))
    assert bandwidth_GBps(system, NcclAlgorithm.NVLS_TREE, Protocol.SIMPLE) == pytest.approx(
        461.6 * 16 / 30, rel=1e-12)
    assert latency_us(system, NcclAlgorithm.NVLS_TREE, Protocol.SIMPLE) == pytest.approx(66.8)
    # Tree/LL128 on 8 channels (one a NIC, across hosts): min(0.92 · 8 · 48, 8 · 41.4) · 120/128
    # capped at 8 · 36.7 = 293.6 busBw, × 0.5, × the tree correction; 48.5 µs of latency: it
    # loses to NVLSTree from 4 MiB (84.2 µs against 83.8)
    picks = [choose(system, size) for size in (2 << 20, 4 << 20, 1 << 30)]
    assert [(p.algorithm, p.protocol) for p in picks] == [
        (NcclAlgorithm.TREE, Protocol.LL128), (NcclAlgorithm.NVLS_TREE, Protocol.SIMPLE),
        (NcclAlgorithm.NVLS_TREE, Protocol.SIMPLE)]
    assert picks[2].time_us == pytest.approx(66.8 + (1 << 30) / (1000 * 461.6 * 16 / 30))
    # eight nodes: the three-node column, min(59.5, 48, 45.5) = 45.5; from 16 MiB (Tree/LL128's
    # 8 channels are capped at 8 · 29 GB/s there)
    eight = system_of(machine_of({"preset": "dgx_h100", "nodes": 8}))
    assert bandwidth_GBps(eight, NcclAlgorithm.NVLS_TREE, Protocol.SIMPLE) == pytest.approx(
        8 * 45.5 * 64 / 126, rel=1e-12)
    assert [choose(eight, size).algorithm for size in (8 << 20, 16 << 20)] == [
        NcclAlgorithm.TREE, NcclAlgorithm.NVLS_TREE]
    # one node: NVLS, never NVLSTree
    assert choose(system_of(machine_of({"preset": "dgx_h100"})), 1 << 30).algorithm is (
        NcclAlgorithm.NVLS)


def test_its_rate_is_capped_by_nccls_nvlstree_ceiling():
    # 8 channels × 57.7 GB/s of busbw is algbw 461.6 · 16/30, over NVLink (L+1)/L of it
    machine = machine_of({"preset": "dgx_h100", "nodes": 2})
    nvls = NVLS_SHARE * 18 * NVLINK_GBPS_PER_LINK[Arch.HOPPER] * 1e9
    assert nvls_tree_nvlink_Bps(machine, nvls, Arch.HOPPER) == pytest.approx(
        461.6e9 * 16 / 30 * 9 / 8, rel=1e-12)
    assert nvls_tree_nvlink_Bps(machine, nvls, Arch.AMPERE) == pytest.approx(nvls * 9 / 8)


def test_it_is_nccls_pick_on_two_dgx_h100_and_auto_runs_it_vectorised():
    [row] = simulate({"topology": {"preset": "dgx_h100", "nodes": 2}, "algorithms": ["nvls_tree"],
                      "sizes": ["64MiB"]}).itertuples()
    assert row.nccl_pick and row.engine == "vector" and row.verified
    assert row.nccl_time_s == pytest.approx((66.8 + (64 << 20) / (1000 * 461.6 * 16 / 30)) * 1e-6)
