"""Routes over the topology graph, and transfer times on the SimPy fabric (hand-computed)."""

from __future__ import annotations

import dataclasses
import math

import networkx as nx
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine.fabric import Fabric
from simulator.model.routing import Route, Routing
from simulator.model.topology import HostParams, dgx, fully_connected, ring, switch

REL = 1e-12
MB = 1e6
GBps = 1e9


# --- routing --------------------------------------------------------------------------------------


def test_switch_route_is_two_hops_through_the_switch():
    route = Routing(switch(4, 25e9, 5e-7)).route("gpu0", "gpu3")
    assert route.nodes == ("gpu0", "switch", "gpu3")
    assert route.links == (("gpu0", "switch"), ("switch", "gpu3"))
    assert route.latency_s == pytest.approx(2 * 5e-7, rel=REL)
    assert route.bottleneck_Bps == 25e9


def test_fully_connected_route_is_the_direct_cable():
    route = Routing(fully_connected(5, 10e9, 1e-6)).route("gpu1", "gpu4")
    assert route == Route(nodes=("gpu1", "gpu4"), links=(("gpu1", "gpu4"),), latency_s=1e-6,
                          bottleneck_Bps=10e9)


@pytest.mark.parametrize("latency", [1e-6, 0.0])
def test_ring_routes_go_the_short_way_round(latency):
    # With zero latency the hop count alone must still pick the short way.
    routing = Routing(ring(8, 25e9, latency))
    clockwise = routing.route("gpu0", "gpu3")
    assert clockwise.nodes == ("gpu0", "gpu1", "gpu2", "gpu3")
    assert clockwise.latency_s == pytest.approx(3 * latency, rel=REL)
    counter = routing.route("gpu0", "gpu5")
    assert counter.nodes == ("gpu0", "gpu7", "gpu6", "gpu5")
    assert counter.links == (("gpu0", "gpu7"), ("gpu7", "gpu6"), ("gpu6", "gpu5"))
    assert counter.latency_s == pytest.approx(3 * latency, rel=REL)


def test_ring_tie_break_is_fewest_hops_then_node_names():
    # ring(4): gpu0 -> gpu2 has two 2-hop paths of equal latency; ('gpu0','gpu1','gpu2') sorts first.
    routing = Routing(ring(4, 25e9, 1e-6))
    assert routing.route("gpu0", "gpu2").nodes == ("gpu0", "gpu1", "gpu2")
    # gpu1 -> gpu3: via gpu0 or via gpu2; 'gpu0' < 'gpu2'.
    assert routing.route("gpu1", "gpu3").nodes == ("gpu1", "gpu0", "gpu3")
    # gpu3 -> gpu1: via gpu0 or gpu2 again.
    assert routing.route("gpu3", "gpu1").nodes == ("gpu3", "gpu0", "gpu1")


def test_tie_break_does_not_depend_on_graph_construction_order():
    # The same 4-ring built with edges (and nodes) inserted in reverse order, both searched.
    reference = ring(4, 25e9, 1e-6)
    del reference.graph["paths"]
    reversed_graph = nx.DiGraph()
    for node in reversed(list(reference.nodes)):
        reversed_graph.add_node(node, **reference.nodes[node])
    for u, v, data in reversed(list(reference.edges(data=True))):
        reversed_graph.add_edge(u, v, **data)
    for src, dst in [("gpu0", "gpu2"), ("gpu2", "gpu0"), ("gpu1", "gpu3"), ("gpu3", "gpu1")]:
        assert Routing(reversed_graph).route(src, dst) == Routing(reference).route(src, dst)
    assert Routing(reversed_graph).route("gpu2", "gpu0").nodes == ("gpu2", "gpu1", "gpu0")


def _searched(graph: nx.DiGraph) -> Routing:
    """Routing of the same graph without the builder's structured paths: the graph search."""
    plain = graph.copy()
    del plain.graph["paths"]
    return Routing(plain)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1e-7, 3e-7, 5e-7, 2e-6, 1e-5]), min_size=4, max_size=4),
       st.integers(1, 3), st.integers(1, 4), st.integers(2, 9))
def test_structured_routes_equal_the_searched_ones(latencies, nodes, gpus, ranks):
    # A builder's candidate paths must give exactly the route the search gives (nodes, links,
    # the same float latency, bottleneck), whatever the latencies: on a dgx with a slow NVLink
    # the NIC path wins inside a host, and with all latencies 0 the hop count decides.
    nvlink, pcie, nic, message = latencies
    graphs = [dgx(nodes, gpus, 450e9, nvlink, 63e9, pcie, 50e9, nic,
                  HostParams(nic_message_latency=message)),
              ring(ranks, 25e9, nvlink), switch(ranks, 25e9, pcie)]
    for graph in graphs:
        structured, searched = Routing(graph), _searched(graph)
        gpu_nodes = [node for node, kind in graph.nodes(data="kind") if kind == "gpu"]
        for src in gpu_nodes:
            for dst in gpu_nodes:
                if src != dst:
                    assert structured.route(src, dst) == searched.route(src, dst)


def test_dgx_route_across_hosts_leaves_by_the_sources_nic_and_enters_by_the_destinations():
    routing = Routing(dgx(3, 4, 450e9, 3e-7, 63e9, 5e-7, 50e9, 8.5e-7))
    assert routing.route("n0.gpu1", "n2.gpu3").nodes == (
        "n0.gpu1", "n0.nic1", "leaf", "n2.nic3", "n2.gpu3")
    assert routing.route("n1.gpu0", "n1.gpu2").nodes == ("n1.gpu0", "n1.nvswitch", "n1.gpu2")
    # Switches are not a structured pair: the search finds the route to the NVSwitch.
    assert routing.route("n1.gpu0", "n1.nvswitch").nodes == ("n1.gpu0", "n1.nvswitch")


def _graph(edges, node_latency=None) -> nx.DiGraph:
    graph = nx.DiGraph()
    for u, v, bandwidth, latency in edges:
        graph.add_edge(u, v, bandwidth=bandwidth, latency=latency)
    for node in graph.nodes:
        graph.nodes[node]["kind"] = "gpu"
    for node, latency in (node_latency or {}).items():
        graph.nodes[node]["latency"] = latency
    return graph


def test_lower_latency_beats_fewer_hops():
    # Direct a->b costs 10 us; a->c->d->b costs 3 us in three hops: latency wins.
    graph = _graph([("a", "b", 1e9, 10e-6), ("a", "c", 2e9, 1e-6), ("c", "d", 3e9, 1e-6),
                    ("d", "b", 4e9, 1e-6)])
    route = Routing(graph).route("a", "b")
    assert route.nodes == ("a", "c", "d", "b")
    assert route.latency_s == pytest.approx(3e-6, rel=REL)
    assert route.bottleneck_Bps == 2e9


def test_equal_latency_prefers_fewer_hops():
    # Direct a->b costs 2 us, a->c->b costs 1 us + 1 us (exactly 2 us in floating point too).
    graph = _graph([("a", "c", 1e9, 1e-6), ("c", "b", 1e9, 1e-6), ("a", "b", 5e8, 2e-6)])
    route = Routing(graph).route("a", "b")
    assert route.nodes == ("a", "b")
    assert route.bottleneck_Bps == 5e8


def test_node_latency_is_added_once_per_node_crossed_endpoints_included():
    # Links 1 us + 2 us; m costs 5 us per message, the source a 0.5 us, the destination b 0.25 us.
    graph = _graph([("a", "m", 1e9, 1e-6), ("m", "b", 1e9, 2e-6)],
                   node_latency={"m": 5e-6, "a": 0.5e-6, "b": 0.25e-6})
    route = Routing(graph).route("a", "b")
    assert route.latency_s == pytest.approx(1e-6 + 2e-6 + 5e-6 + 0.5e-6 + 0.25e-6, rel=REL)


def test_node_latency_can_steer_the_route():
    # a->m->b and a->n->b have equal link latency, but m charges 5 us per message: go via n
    # although 'm' < 'n' by name.
    graph = _graph([("a", "m", 1e9, 1e-6), ("m", "b", 1e9, 1e-6), ("a", "n", 1e9, 1e-6),
                    ("n", "b", 1e9, 1e-6)], node_latency={"m": 5e-6})
    route = Routing(graph).route("a", "b")
    assert route.nodes == ("a", "n", "b")
    assert route.latency_s == pytest.approx(2e-6, rel=REL)
    graph.nodes["m"]["latency"] = 0.0
    assert Routing(graph).route("a", "b").nodes == ("a", "m", "b")


DGX = dict(nodes=2, gpus_per_node=8, nvlink_bandwidth=450e9, nvlink_latency=3e-7,
           pcie_bandwidth=64e9, pcie_latency=3.5e-7, nic_bandwidth=50e9, nic_latency=1e-6)


def test_dgx_intra_node_route_uses_the_nvswitch():
    route = Routing(dgx(**DGX)).route("n0.gpu1", "n0.gpu6")
    assert route.nodes == ("n0.gpu1", "n0.nvswitch", "n0.gpu6")
    assert route.latency_s == pytest.approx(2 * 3e-7, rel=REL)
    assert route.bottleneck_Bps == 450e9


def test_dgx_inter_node_route_uses_the_nics_and_the_leaf():
    # gpu -pcie-> nic -cable-> leaf -cable-> nic -pcie-> gpu: 2 x 0.35 us + 2 x 1 us = 2.7 us.
    route = Routing(dgx(**DGX)).route("n0.gpu3", "n1.gpu5")
    assert route.nodes == ("n0.gpu3", "n0.nic3", "leaf", "n1.nic5", "n1.gpu5")
    assert route.latency_s == pytest.approx(2 * 3.5e-7 + 2 * 1e-6, rel=REL)
    assert route.bottleneck_Bps == 50e9


def test_dgx_nic_message_latency_is_paid_at_each_nic():
    # Two NICs crossed at 2 us each: 2.7 us + 4 us = 6.7 us. Intra-node routes cross no NIC.
    routing = Routing(dgx(**DGX, hosts=HostParams(nic_message_latency=2e-6)))
    inter = routing.route("n0.gpu3", "n1.gpu5")
    assert inter.nodes == ("n0.gpu3", "n0.nic3", "leaf", "n1.nic5", "n1.gpu5")
    assert inter.latency_s == pytest.approx(2 * 3.5e-7 + 2 * 1e-6 + 2 * 2e-6, rel=REL)
    intra = routing.route("n1.gpu0", "n1.gpu7")
    assert intra.latency_s == pytest.approx(2 * 3e-7, rel=REL)


def test_route_is_cached_and_missing_paths_raise():
    graph = _graph([("a", "b", 1e9, 1e-6)])
    routing = Routing(graph)
    assert routing.route("a", "b") is routing.route("a", "b")
    with pytest.raises(nx.NetworkXNoPath):
        routing.route("b", "a")


# --- fabric timing --------------------------------------------------------------------------------


def _run(graph: nx.DiGraph, transfers) -> list[float]:
    """Run ``(start_s, src, dst, nbytes)`` transfers on a fresh fabric; return their finish times."""
    env = simpy.Environment()
    fabric = Fabric(env, Routing(graph))
    finished: list[float | None] = [None] * len(transfers)

    def one(i, start, src, dst, nbytes):
        if start:
            yield env.timeout(start)
        yield fabric.transfer(src, dst, nbytes)
        finished[i] = env.now

    for i, spec in enumerate(transfers):
        env.process(one(i, *spec))
    env.run()
    assert None not in finished
    return finished


def _one_link(bandwidth=GBps, latency=10e-6, duplex=False) -> nx.DiGraph:
    edges = [("a", "b", bandwidth, latency)]
    if duplex:
        edges.append(("b", "a", bandwidth, latency))
    return _graph(edges)


def test_a_flow_alone_takes_latency_plus_bytes_over_bandwidth():
    # 3 MB over 1 GB/s after 10 us: 10 us + 3 ms.
    assert _run(_one_link(), [(0, "a", "b", 3 * MB)]) == [pytest.approx(10e-6 + 3e-3, rel=REL)]


def test_a_flow_alone_on_a_multi_hop_route_moves_at_its_bottleneck():
    # switch(4) at 25 GB/s, 0.5 us per link: 1 us + 4 MiB / 25e9.
    done = _run(switch(4, 25e9, 5e-7), [(0, "gpu0", "gpu2", 4 << 20)])
    assert done == [pytest.approx(1e-6 + (4 << 20) / 25e9, rel=REL)]


def test_a_flow_alone_started_late_is_shifted():
    assert _run(_one_link(), [(0.5, "a", "b", 1 * MB)]) == [pytest.approx(0.5 + 10e-6 + 1e-3, rel=REL)]


def test_two_flows_started_together_share_the_link():
    # Each 1 MB at 0.5 GB/s: 10 us + 2 ms each.
    done = _run(_one_link(), [(0, "a", "b", 1 * MB), (0, "a", "b", 1 * MB)])
    assert done == [pytest.approx(10e-6 + 2e-3, rel=REL)] * 2


def test_opposite_directions_of_a_cable_do_not_share():
    # Full duplex: a->b and b->a are two links, each flow alone on its own: 10 us + 1 ms.
    done = _run(_one_link(duplex=True), [(0, "a", "b", 1 * MB), (0, "b", "a", 1 * MB)])
    assert done == [pytest.approx(10e-6 + 1e-3, rel=REL)] * 2


def test_switch_flows_share_only_the_common_downlink():
    # switch(4) at 1 GB/s, 0.5 us per link (route latency 1 us), 1 MB each.
    # gpu0->gpu1 and gpu2->gpu1 share switch->gpu1: 0.5 GB/s each, 1 us + 2 ms.
    # gpu3->gpu0 shares nothing with them (gpu3->switch, switch->gpu0): 1 us + 1 ms.
    done = _run(switch(4, GBps, 5e-7), [(0, "gpu0", "gpu1", MB), (0, "gpu2", "gpu1", MB),
                                        (0, "gpu3", "gpu0", MB)])
    assert done == [pytest.approx(1e-6 + 2e-3, rel=REL), pytest.approx(1e-6 + 2e-3, rel=REL),
                    pytest.approx(1e-6 + 1e-3, rel=REL)]


def test_a_finishing_flow_frees_bandwidth_for_the_other_at_that_instant():
    # 1 MB and 3 MB on one 1 GB/s link, both start moving at L = 10 us, 0.5 GB/s each.
    # The 1 MB flow ends at L + 1 MB / 0.5 GB/s = L + 2 ms; the 3 MB flow has moved 1 MB by then,
    # and moves its last 2 MB alone at 1 GB/s: L + 2 ms + 2 ms = L + 4 ms.
    done = _run(_one_link(), [(0, "a", "b", 1 * MB), (0, "a", "b", 3 * MB)])
    assert done == [pytest.approx(10e-6 + 2e-3, rel=REL), pytest.approx(10e-6 + 4e-3, rel=REL)]


def test_staggered_start_gives_piecewise_finish_times():
    # X: 4 MB from t = 0, moving from L = 10 us; Y: 1 MB from t = 1 ms, moving from 1 ms + L.
    # [L, 1 ms + L): X alone at 1 GB/s moves 1 MB (3 MB left).
    # [1 ms + L, 3 ms + L): both at 0.5 GB/s; Y moves its 1 MB and ends at 3 ms + L; X moves 1 MB.
    # [3 ms + L, 5 ms + L): X alone moves its last 2 MB and ends at 5 ms + L.
    done = _run(_one_link(), [(0, "a", "b", 4 * MB), (1e-3, "a", "b", 1 * MB)])
    assert done == [pytest.approx(5e-3 + 10e-6, rel=REL), pytest.approx(3e-3 + 10e-6, rel=REL)]


def test_three_flows_join_and_leave_one_link():
    # One 1 GB/s link, zero latency. P: 6 MB at t=0; Q: 2 MB at t=1 ms; R: 1 MB at t=2 ms.
    # [0, 1):  P alone, 1 MB/ms -> P has 5 MB left.                       (times in ms)
    # [1, 2):  P, Q at 0.5 -> P 4.5 left, Q 1.5 left.
    # [2, 5):  P, Q, R at 1/3 each -> R's 1 MB takes 3 ms, ends at 5; P 3.5, Q 0.5 left.
    # [5, 6):  P, Q at 0.5 -> Q's 0.5 MB ends at 6; P 3 left.
    # [6, 9):  P alone -> ends at 9.
    done = _run(_one_link(latency=0.0), [(0, "a", "b", 6 * MB), (1e-3, "a", "b", 2 * MB),
                                         (2e-3, "a", "b", 1 * MB)])
    assert done == [pytest.approx(9e-3, rel=REL), pytest.approx(6e-3, rel=REL),
                    pytest.approx(5e-3, rel=REL)]


def test_three_links_with_unequal_bottlenecks():
    # Line n0 -A-> n1 -B-> n2 -C-> n3, A = 10, B = 30, C = 12 GB/s, zero latency.
    # f1: n0->n1 {A}, 5 GB; f2: n0->n2 {A,B}, 15 GB; f3: n1->n3 {B,C}, 12 GB; f4: n2->n3 {C}, 3 GB.
    # (rates in GB/s, times in s)
    # [0, 0.5):    A: f1 = f2 = 5; C: f3 = f4 = 6 (B carries 11 of 30). f4 ends at 3/6 = 0.5.
    #              left: f1 2.5, f2 12.5, f3 9.
    # [0.5, 1.0):  A: f1 = f2 = 5; f3 alone on C: min(12, 30 - 5) = 12. f1 ends at 0.5 + 2.5/5 = 1.
    #              left: f2 10, f3 9 - 6 = 3.
    # [1.0, 1.25): f2 alone on A: 10; f3 = min(12, 30 - 10) = 12. f3 ends at 1 + 3/12 = 1.25.
    #              left: f2 10 - 2.5 = 7.5.
    # [1.25, 2.0): f2 alone: min(10, 30) = 10, ends at 1.25 + 0.75 = 2.
    graph = _graph([("n0", "n1", 10 * GBps, 0.0), ("n1", "n2", 30 * GBps, 0.0),
                    ("n2", "n3", 12 * GBps, 0.0)])
    done = _run(graph, [(0, "n0", "n1", 5e9), (0, "n0", "n2", 15e9), (0, "n1", "n3", 12e9),
                        (0, "n2", "n3", 3e9)])
    assert done == [pytest.approx(1.0, rel=REL), pytest.approx(2.0, rel=REL),
                    pytest.approx(1.25, rel=REL), pytest.approx(0.5, rel=REL)]


def test_unrelated_flow_does_not_disturb_a_running_one():
    # a->b and c->d share nothing: each takes its own latency + size / bandwidth whatever the other does.
    graph = _graph([("a", "b", GBps, 10e-6), ("c", "d", 2 * GBps, 20e-6)])
    done = _run(graph, [(0, "a", "b", 4 * MB), (1e-3, "c", "d", 2 * MB)])
    assert done == [pytest.approx(10e-6 + 4e-3, rel=REL), pytest.approx(1e-3 + 20e-6 + 1e-3, rel=REL)]


def test_zero_byte_transfer_costs_only_latency():
    assert _run(_one_link(), [(0, "a", "b", 0)]) == [pytest.approx(10e-6, rel=REL)]
    # ... also on a multi-hop route, and while another flow is using the link.
    done = _run(switch(4, GBps, 5e-7), [(0, "gpu0", "gpu1", MB), (1e-4, "gpu0", "gpu1", 0)])
    assert done == [pytest.approx(1e-6 + 1e-3, rel=REL), pytest.approx(1e-4 + 1e-6, rel=REL)]


def test_zero_byte_transfer_with_zero_latency_is_instant():
    assert _run(_one_link(latency=0.0), [(0, "a", "b", 0)]) == [0.0]


def test_fabric_counts_transfers_and_bytes_and_ends_with_no_active_flow():
    env = simpy.Environment()
    fabric = Fabric(env, Routing(_one_link()))
    fabric.transfer("a", "b", 1 * MB)
    fabric.transfer("a", "b", 3 * MB)
    fabric.transfer("a", "b", 0)
    env.run()
    assert fabric.stats.transfers == 3
    assert fabric.stats.bytes_moved == 4 * MB
    assert fabric.sharing.rates == {}


class _Proxied(Routing):
    """Every route's sender posts through its network proxy, ``proxy_s`` a message."""

    def __init__(self, graph: nx.DiGraph, proxy_s: float) -> None:
        super().__init__(graph)
        self.proxy_s = proxy_s

    def route(self, src: str, dst: str) -> Route:
        return dataclasses.replace(super().route(src, dst), proxy_s=self.proxy_s)


def test_a_proxy_takes_what_it_is_handed_at_one_time_in_channel_order():
    # switch(4), route latency 1 us, a proxy of 1 us a message. At 0 gpu0 hands its proxy a
    # message on channel (2,), then one on channel (1,): the proxy posts channel 1's first (NCCL's
    # proxy sweeps its operations in channel order), from 0, then channel 2's from 1 us; a
    # message on channel (0,) handed at 0.5 us comes after both (first come, first served), from
    # 2 us; gpu1's own proxy is free (from 0). First bytes leave a route latency after the post.
    env = simpy.Environment()
    fabric = Fabric(env, _Proxied(switch(4, GBps, 5e-7), 1e-6))
    started: dict[str, float] = {}

    def send(name, at, src, dst, turn):
        if at:
            yield env.timeout(at)
        yield fabric.transfer(src, dst, 1000, moved=lambda start, _: started.update({name: start}),
                              turn=turn)

    for spec in [("ch2", 0, "gpu0", "gpu1", (2,)), ("ch1", 0, "gpu0", "gpu2", (1,)),
                 ("later", 5e-7, "gpu0", "gpu3", (0,)), ("other", 0, "gpu1", "gpu3", (3,))]:
        env.process(send(*spec))
    env.run()
    assert started == {"ch1": 1e-6, "ch2": 1e-6 + 1e-6, "later": 2e-6 + 1e-6, "other": 1e-6}
    assert fabric.stats.proxy_rounds == 2  # at 0 and at 0.5 us


# --- fabric against an independent fluid simulation -----------------------------------------------


def _progressive_filling(flow_links: dict, capacity: dict) -> dict:
    """Textbook progressive filling, one tightest link per round (no heap, no laziness)."""
    rates: dict = {}
    while len(rates) < len(flow_links):
        best = None
        links = sorted({link for f, ls in flow_links.items() if f not in rates for link in ls})
        for link in links:
            on = [f for f, ls in flow_links.items() if link in ls]
            unfrozen = [f for f in on if f not in rates]
            if unfrozen:
                share = (capacity[link] - sum(rates[f] for f in on if f in rates)) / len(unfrozen)
                if best is None or share < best[0]:
                    best = (share, unfrozen)
        for f in best[1]:
            rates[f] = best[0]
    return rates


def _fluid(flows: list, capacity: dict) -> list:
    """Finish times of ``(moving_from_s, links, nbytes)`` flows under max-min fair sharing."""
    finish = [math.inf] * len(flows)
    pending = sorted((arrive, i) for i, (arrive, _, _) in enumerate(flows))
    active: dict = {}
    now = 0.0
    while pending or active:
        rates = _progressive_filling({i: flows[i][1] for i in active}, capacity)
        ends = {i: now + left / rates[i] for i, left in active.items()}
        step_to = min([*ends.values(), pending[0][0] if pending else math.inf])
        for i in list(active):
            active[i] -= rates[i] * (step_to - now)
            if ends[i] <= step_to or active[i] <= flows[i][2] * 1e-12:
                finish[i] = step_to
                del active[i]
        now = step_to
        while pending and pending[0][0] <= now:
            _, i = pending.pop(0)
            if flows[i][2] > 0:
                active[i] = float(flows[i][2])
            else:
                finish[i] = now
    return finish


def _dumbbell() -> nx.DiGraph:
    # h0, h1, h2 -- s0 == s1 -- h3, h4, full duplex, unequal bandwidths (GB/s) and latencies.
    graph = nx.DiGraph()
    for a, b, bandwidth, latency in [("h0", "s0", 1.0, 1e-6), ("h1", "s0", 2.0, 2e-6),
                                     ("h2", "s0", 3.0, 5e-7), ("s0", "s1", 2.5, 3e-6),
                                     ("h3", "s1", 1.5, 1e-6), ("h4", "s1", 4.0, 2e-6)]:
        for u, v in ((a, b), (b, a)):
            graph.add_edge(u, v, bandwidth=bandwidth * GBps, latency=latency)
    return graph


HOSTS = ["h0", "h1", "h2", "h3", "h4"]
transfers = st.lists(
    st.tuples(st.sampled_from([0.0, 1e-3, 2.5e-3]) | st.floats(0.0, 5e-3),
              st.sampled_from(HOSTS), st.sampled_from(HOSTS),
              st.sampled_from([0, MB, 2 * MB]) | st.integers(0, 5_000_000)),
    min_size=1, max_size=12,
).map(lambda ts: [t for t in ts if t[1] != t[2]]).filter(bool)


@settings(max_examples=100, deadline=None)
@given(transfers)
def test_fabric_finish_times_match_a_fluid_max_min_simulation(specs):
    graph = _dumbbell()
    routing = Routing(graph)
    capacity = {(u, v): bw for u, v, bw in graph.edges(data="bandwidth")}
    flows = []
    for start, src, dst, nbytes in specs:
        route = routing.route(src, dst)
        flows.append((start + route.latency_s, route.links, nbytes))
    expected = _fluid(flows, capacity)
    assert _run(graph, specs) == pytest.approx(expected, rel=1e-9)
