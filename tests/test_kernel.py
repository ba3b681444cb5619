"""The network kernel (simulator.engine.kernel): max-min rates on hand-solved flow sets, the
order- and component-independence that makes the two engines agree to the bit, the lone-flow
rule, the GPU's first-come-first-served rule and the capacity timeline."""

import numpy as np
import pytest

from simulator.engine.compiled import compiled_filling
from simulator.engine.kernel import (
    FILLING_ENTRIES,
    CapacityTimeline,
    _Filling,
    _plain_filling,
    lone_rate,
    lone_rates,
    max_min_of,
    max_min_rates,
    renumbered_links,
    serve_in_order,
    serve_next,
)
from simulator.model.machine import CapacityEvent


def test_max_min_rates_on_a_hand_solved_chain_of_three_links():
    # Links x (10), y (30), z (12); flows a:x, b:x+y, c:y, d:y+z, e:z. Round 1: shares x 10/2 = 5,
    # y 30/3 = 10, z 12/2 = 6; x is tightest, so a = b = 5 and y keeps 30 - 5 = 25 for c, d.
    # Round 2: y 25/2 = 12.5, z 6: z is tightest, d = e = 6, and y keeps 25 - 6 = 19 for c alone.
    rates = max_min_of({"a": ["x"], "b": ["x", "y"], "c": ["y"], "d": ["y", "z"], "e": ["z"]},
                       {"x": 10.0, "y": 30.0, "z": 12.0})
    assert rates == {"a": 5.0, "b": 5.0, "c": 19.0, "d": 6.0, "e": 6.0}


def test_max_min_rates_freezes_every_tightest_link_of_a_round_at_once():
    # x (8) and y (8) each carry two flows and tie at 4; z (20) carries one flow of each and a
    # third, which gets what the two frozen at 4 leave: 20 - 4 - 4 = 12.
    flow_of = np.array([0, 0, 1, 2, 2, 3, 4])
    link_of = np.array([0, 2, 0, 1, 2, 1, 2])
    rates = max_min_rates(flow_of, link_of, 5, np.array([8.0, 8.0, 20.0]))
    assert rates.tolist() == [4.0, 4.0, 4.0, 4.0, 12.0]


def test_without_shared_links_every_flow_gets_its_bottleneck():
    flow_of, link_of = np.array([0, 0, 1]), np.array([0, 1, 2])
    capacity = np.array([10.0, 4.0, 7.0])
    assert max_min_rates(flow_of, link_of, 2, capacity).tolist() == [4.0, 7.0]
    assert lone_rates(flow_of, link_of, 2, capacity).tolist() == [4.0, 7.0]
    assert lone_rate([10.0, 4.0]) == 4.0


def both_fillings(flow_of, link_of, flows, capacity, copies=None):
    """The rates by the plain statement and by the rounds that touch only frozen flows' links;
    the compiled rounds (the ``fast`` extra, which the test extra installs) checked equal to
    the latter on the way."""
    users = np.bincount(link_of, minlength=len(capacity)) if copies is None else np.bincount(
        link_of, weights=copies, minlength=len(capacity))
    touched = _Filling(flow_of, link_of, flows, capacity, users, copies).rates()
    compiled = compiled_filling()
    assert compiled is not None, "numba is missing: install the test extra (pip install -e .[test])"
    weight = np.ones(len(flow_of)) if copies is None else copies.astype(np.float64)
    assert compiled(flow_of, link_of, flows, capacity, weight,
                    users.astype(np.float64)).tobytes() == touched.tobytes()
    return _plain_filling(flow_of, link_of, flows, capacity, users, copies), touched


def test_the_filling_by_touched_links_solves_the_hand_solved_chain():
    # The chain above, numbered a..e = 0..4 and x, y, z = 0, 1, 2.
    flow_of, link_of = np.array([0, 1, 1, 2, 3, 3, 4]), np.array([0, 0, 1, 1, 1, 2, 2])
    plain, touched = both_fillings(flow_of, link_of, 5, np.array([10.0, 30.0, 12.0]))
    assert touched.tolist() == plain.tolist() == [5.0, 5.0, 19.0, 6.0, 6.0]

def test_a_small_instance_takes_the_compiled_rounds_when_asked(monkeypatch):
    # Routes.shares asks for them where compiled.wanted says (a large fabric, a long run): the
    # hand-solved chain, compiled
    flow_of, link_of = np.array([0, 1, 1, 2, 3, 3, 4]), np.array([0, 0, 1, 1, 1, 2, 2])
    called: list[int] = []
    loops = compiled_filling()
    assert loops is not None, "numba is missing: install the test extra (pip install -e .[test])"
    monkeypatch.setattr("simulator.engine.kernel.compiled_filling",
                        lambda: lambda *args: called.append(1) or loops(*args))
    rates = max_min_rates(flow_of, link_of, 5, np.array([10.0, 30.0, 12.0]), compiled=True)
    assert rates.tolist() == [5.0, 5.0, 19.0, 6.0, 6.0] and called == [1]
    assert max_min_rates(flow_of, link_of, 5, np.array([10.0, 30.0, 12.0])).tolist() == [
        5.0, 5.0, 19.0, 6.0, 6.0] and called == [1]  # not asked, small: numpy


def test_where_numba_cannot_compile_one_warning_and_numpy(monkeypatch):
    # a read-only cache or a broken llvmlite: compiled_filling gives None, the kernel numpy
    import numba

    from simulator.engine import compiled

    def refuse(**options):
        raise RuntimeError("cannot cache function: no locator available")

    monkeypatch.setattr(compiled, "_loaded", {})
    monkeypatch.setattr(numba, "njit", refuse)
    with pytest.warns(RuntimeWarning, match="numba cannot compile filling"):
        assert compiled.compiled_filling() is None
    assert compiled.compiled_filling() is None  # once: no second warning, no retry


@pytest.mark.parametrize("seed", range(40))
def test_both_fillings_give_the_same_rates_to_the_bit(seed):
    # Entries in any order, repeated flows as copies, tied capacities (several tight links a
    # round), a flow that crosses no link (NaN both ways): max_min_rates takes either by size.
    rng = np.random.default_rng(seed)
    flows, links = int(rng.integers(1, 80)), int(rng.integers(1, 30))
    per = rng.integers(1, min(links, 6) + 1, flows)
    flow_of = np.repeat(np.arange(flows), per)
    link_of = np.concatenate([rng.choice(links, k, replace=False) for k in per])
    order = rng.permutation(len(flow_of))
    capacity = rng.choice([1e9, 2e9, 10e9 / 3, 50e9, 7.1e9], links)
    copies = rng.integers(1, 5, flows)[flow_of].astype(float) if seed % 2 else None
    plain, touched = both_fillings(flow_of[order], link_of[order], flows + seed % 3, capacity,
                                   None if copies is None else copies[order])
    assert plain.tobytes() == touched.tobytes()


def test_a_dense_all_to_all_takes_the_filling_by_touched_links_with_the_same_rates():
    # 140 endpoints all to all over a two-level tree of 14 leaves (a link up and down each
    # endpoint and each leaf): over FILLING_ENTRIES entries, uneven capacities, many rounds.
    rng = np.random.default_rng(7)
    hosts, leaves = 140, 14
    capacity = rng.choice([400e9, 200e9, 100e9 / 3], 2 * hosts + 2 * leaves)
    pairs = [(a, b) for a in range(hosts) for b in range(hosts) if a != b]
    routes = []
    for a, b in pairs:
        route = [a, hosts + b]
        if a // 10 != b // 10:  # across leaves: the source leaf's uplink, the target's downlink
            route += [2 * hosts + a // 10, 2 * hosts + leaves + b // 10]
        routes.append(route)
    flow_of = np.repeat(np.arange(len(routes)), [len(r) for r in routes])
    link_of = np.array([link for r in routes for link in r])
    assert len(flow_of) >= FILLING_ENTRIES
    plain, touched = both_fillings(flow_of, link_of, len(routes), capacity)
    assert len(np.unique(plain)) > 20
    assert plain.tobytes() == touched.tobytes()
    assert max_min_rates(flow_of, link_of, len(routes), capacity).tobytes() == plain.tobytes()


def test_without_numba_the_kernel_fills_large_instances_with_numpy(monkeypatch):
    # the default install has no numba: max_min_rates then takes _Filling, the same rates
    flow_of, link_of = np.repeat(np.arange(5000), 4), np.arange(20000) % 997
    capacity = np.linspace(1e9, 9e9, 997)
    default = max_min_rates(flow_of, link_of, 5000, capacity)  # compiled where numba is
    monkeypatch.setattr("simulator.engine.kernel.compiled_filling", lambda: None)
    filled: list[bool] = []
    original = _Filling.rates
    monkeypatch.setattr(_Filling, "rates", lambda self: filled.append(True) or original(self))
    assert max_min_rates(flow_of, link_of, 5000, capacity).tobytes() == default.tobytes()
    assert filled == [True]


def random_flows(rng, flows=40, links=12):
    """A random flow set with capacities that do not divide evenly (so rounding shows)."""
    capacity = rng.uniform(1.0, 100.0, size=links) * 1e9 / 3
    routes = [sorted(set(rng.choice(links, size=int(rng.integers(1, 5))).tolist()))
              for _ in range(flows)]
    return capacity, routes


def solve(routes, capacity):
    flow_of = np.repeat(np.arange(len(routes)), [len(route) for route in routes])
    link_of = np.array([link for route in routes for link in route], dtype=np.int64)
    return max_min_rates(flow_of, link_of, len(routes), capacity)


@pytest.mark.parametrize("seed", range(20))
def test_the_rates_do_not_depend_on_the_order_flows_are_listed_in_to_the_bit(seed):
    rng = np.random.default_rng(seed)
    capacity, routes = random_flows(rng)
    order = rng.permutation(len(routes))
    rates = solve(routes, capacity)
    shuffled = solve([routes[k] for k in order], capacity)
    np.testing.assert_array_equal(shuffled, rates[order])


@pytest.mark.parametrize("seed", range(20))
def test_a_component_solved_alone_gets_its_rates_in_the_whole_to_the_bit(seed):
    # The SimPy engine solves the component of a change, the vectorised engine every active
    # flow: a union of two flow sets on disjoint links must give each set its own rates.
    rng = np.random.default_rng(seed)
    capacity_a, routes_a = random_flows(rng, flows=25, links=8)
    capacity_b, routes_b = random_flows(rng, flows=15, links=6)
    shifted = [[link + 8 for link in route] for route in routes_b]
    whole = solve(routes_a + shifted, np.concatenate([capacity_a, capacity_b]))
    np.testing.assert_array_equal(whole[:25], solve(routes_a, capacity_a))
    np.testing.assert_array_equal(whole[25:], solve(routes_b, capacity_b))


def test_a_gpu_serves_reductions_first_come_first_served():
    # Free at 5, asked at 2 for 1 s: waits until 5, ends at 6; free already: starts at once.
    assert serve_next(5.0, 2.0, 1.0) == (5.0, 6.0)
    assert serve_next(1.0, 2.0, 1.0) == (2.0, 3.0)
    free_at = np.array([0.0, 5.0])
    # GPU 1 is busy until 5: its two jobs run 5..6 and 6..8; GPU 0's runs 2..3.
    finish = serve_in_order(free_at, np.array([1, 0, 1]), 2.0, np.array([1.0, 1.0, 2.0]))
    assert finish.tolist() == [6.0, 3.0, 8.0]
    assert free_at.tolist() == [3.0, 8.0]


def test_a_capacity_timeline_steps_from_the_nominal_capacities():
    nominal = {("a", "b"): 10.0, ("b", "a"): 20.0}
    events = (CapacityEvent(("b", "a"), 2.0, 0.5), CapacityEvent(("a", "b"), 0.0, 0.25),
              CapacityEvent(("b", "a"), 2.0, 0.75), CapacityEvent(("b", "a"), 3.0, 1.0))
    timeline = CapacityTimeline(nominal, events)
    assert timeline.at_start().tolist() == [2.5, 20.0]
    later = timeline.later()
    assert [step.at_s for step in later] == [2.0, 3.0]
    # two events on one link at one time: the last listed wins; a factor scales the nominal
    assert later[0].links.tolist() == [1] and later[0].capacities.tolist() == [15.0]
    assert later[1].capacities.tolist() == [20.0]
    assert not CapacityTimeline(nominal) and CapacityTimeline(nominal).at_start().tolist() == [
        10.0, 20.0]


@pytest.mark.parametrize(("at_s", "factor", "message"), [
    (-1.0, 0.5, "a capacity event's time must be finite and at least 0, got -1.0"),
    (0.0, -0.5, "a capacity event's factor must be finite and at least 0, got -0.5"),
    (0.0, float("nan"), "a capacity event's factor must be finite and at least 0, got nan"),
    (float("inf"), 0.5, "a capacity event's time must be finite and at least 0, got inf"),
])
def test_a_capacity_event_outside_its_range_is_refused(at_s, factor, message):
    with pytest.raises(ValueError) as error:
        CapacityEvent(("a", "b"), at_s, factor)
    assert str(error.value) == message


@pytest.mark.parametrize("seed", range(20))
def test_flows_of_one_route_shared_once_with_their_count_get_their_rates_to_the_bit(seed):
    # The vectorised engine shares each route once with the number of flows on it: the same
    # rates as every flow listed, to the bit (the counts summed are whole numbers either way)
    rng = np.random.default_rng(seed)
    capacity, routes = random_flows(rng, flows=12)
    copies = rng.integers(1, 6, size=len(routes))
    listed = solve([route for route, n in zip(routes, copies, strict=True)
                    for _ in range(n)], capacity)
    flow_of = np.repeat(np.arange(len(routes)), [len(route) for route in routes])
    link_of = np.array([link for route in routes for link in route], dtype=np.int64)
    shared = max_min_rates(flow_of, link_of, len(routes), capacity, copies[flow_of])
    np.testing.assert_array_equal(np.repeat(shared, copies), listed)


def test_links_arerenumbered_links_alike_by_table_and_by_search():
    # a table where the fabric's links are few beside the flows' entries, else a search
    link_of = np.array([7, 2, 7, 5, 2, 2])
    links = np.array([2, 5, 7])
    for total in (8, 1000):  # 8 ≤ 4 × 6 entries: the table; 1000: the search
        assert renumbered_links(links, link_of, total).tolist() == [2, 0, 2, 1, 0, 0]
