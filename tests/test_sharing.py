"""Max-min fair sharing: hand-computed allocations, and the incremental solver against a full one."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.engine.kernel import max_min_of as max_min_rates
from simulator.engine.sharing import FairShare

REL = 1e-12


def _approx(rates: dict) -> object:
    return pytest.approx(rates, rel=REL)


def test_two_flows_on_one_link_get_half_each():
    rates = max_min_rates({"f": ["x"], "g": ["x"]}, {"x": 10.0})
    assert rates == _approx({"f": 5.0, "g": 5.0})


def test_one_flow_alone_gets_the_whole_link():
    assert max_min_rates({"f": ["x"]}, {"x": 7.5}) == _approx({"f": 7.5})


def test_textbook_three_links_unequal_bottlenecks():
    # Links A=10, B=30, C=12; flows f1:{A}, f2:{A,B}, f3:{B,C}, f4:{C}.
    # Progressive filling:
    #   fair shares A 10/2=5, B 30/2=15, C 12/2=6 -> A is tightest: f1 = f2 = 5.
    #   B: 30-5 = 25 left for f3 alone (25); C: 12/2 = 6 -> C tightest: f3 = f4 = 6.
    #   B carries 5 + 6 = 11 of 30 and is not anyone's bottleneck.
    rates = max_min_rates(
        {"f1": ["A"], "f2": ["A", "B"], "f3": ["B", "C"], "f4": ["C"]},
        {"A": 10.0, "B": 30.0, "C": 12.0},
    )
    assert rates == _approx({"f1": 5.0, "f2": 5.0, "f3": 6.0, "f4": 6.0})


def test_three_levels_of_progressive_filling():
    # Links A=10, B=30, C=24; flows f1:{A}, f2:{A,B}, f3:{B,C}, f4:{C}, f5:{B}.
    #   shares A 10/2=5, B 30/3=10, C 24/2=12 -> A: f1 = f2 = 5.
    #   B: (30-5)/2 = 12.5 (f3, f5); C: 24/2 = 12 -> C: f3 = f4 = 12.
    #   B: 30 - 5 - 12 = 13 for f5 alone -> f5 = 13.
    # Every link ends saturated: A 5+5=10, B 5+12+13=30, C 12+12=24.
    rates = max_min_rates(
        {"f1": ["A"], "f2": ["A", "B"], "f3": ["B", "C"], "f4": ["C"], "f5": ["B"]},
        {"A": 10.0, "B": 30.0, "C": 24.0},
    )
    assert rates == _approx({"f1": 5.0, "f2": 5.0, "f3": 12.0, "f4": 12.0, "f5": 13.0})


def test_long_flow_gets_its_bottleneck_share_and_the_leftover_goes_to_others():
    # "long" crosses x (10), y (100), z (100); "a" is on x, "b" on y, "c" on z.
    # Max-min: x is the bottleneck, long = a = 10/2 = 5; b and c get what long leaves: 100 - 5 = 95.
    # (Proportional fairness would give long less than a, and an equal split per link would give
    # b and c only 50: both are wrong here.)
    rates = max_min_rates(
        {"long": ["x", "y", "z"], "a": ["x"], "b": ["y"], "c": ["z"]},
        {"x": 10.0, "y": 100.0, "z": 100.0},
    )
    assert rates == _approx({"long": 5.0, "a": 5.0, "b": 95.0, "c": 95.0})


def test_bottleneck_is_the_tightest_share_not_the_smallest_capacity():
    # x = 10 with one flow (share 10); y = 12 with three flows (share 4): y is the bottleneck of
    # "both" although x is the smaller link. both = p = q = 4; solo on x gets 10 - 4 = 6.
    rates = max_min_rates(
        {"both": ["x", "y"], "solo": ["x"], "p": ["y"], "q": ["y"]},
        {"x": 10.0, "y": 12.0},
    )
    assert rates == _approx({"both": 4.0, "solo": 6.0, "p": 4.0, "q": 4.0})


def test_unused_links_are_ignored_and_result_follows_flow_order():
    rates = max_min_rates({"b": ["x"], "a": ["x"]}, {"x": 4.0, "unused": 1.0})
    assert list(rates) == ["b", "a"]
    assert rates == _approx({"a": 2.0, "b": 2.0})


def test_fairshare_add_and_remove_return_only_the_changed_component():
    share = FairShare({"x": 12.0, "y": 12.0, "z": 12.0, "w": 6.0})

    assert share.add("f1", ["x"]) == _approx({"f1": 12.0})
    assert share.add("f2", ["x"]) == _approx({"f1": 6.0, "f2": 6.0})

    # z is disconnected from x: adding g re-shares g alone.
    changed = share.add("g", ["z"])
    assert changed == _approx({"g": 12.0})
    assert "f1" not in changed and "f2" not in changed

    # h bridges x and y: its component is {f1, f2, h}, g untouched. x: 12/3 = 4 each.
    changed = share.add("h", ["x", "y"])
    assert changed == _approx({"f1": 4.0, "f2": 4.0, "h": 4.0})
    assert share.rates == _approx({"f1": 4.0, "f2": 4.0, "g": 12.0, "h": 4.0})
    assert share.rates == _approx(share.full_recompute())

    # k on y and w: w = 6 shared by k alone; y: h = 4 fixed by x, k = min(12 - 4, 6) = 6.
    changed = share.add("k", ["y", "w"])
    assert changed == _approx({"f1": 4.0, "f2": 4.0, "h": 4.0, "k": 6.0})

    # Removing f1: x shared by f2 and h -> 6 each; y: 12 - 6 = 6 left for k, and w caps k at 6.
    changed = share.remove("f1")
    assert changed == _approx({"f2": 6.0, "h": 6.0, "k": 6.0})
    assert "f1" not in share.rates and "g" not in changed
    assert share.rates == _approx({"f2": 6.0, "g": 12.0, "h": 6.0, "k": 6.0})
    assert share.rates == _approx(share.full_recompute())

    # Removing g empties z: its component is now empty.
    assert share.remove("g") == {}
    assert share.rates == _approx({"f2": 6.0, "h": 6.0, "k": 6.0})

    # Removing h splits the component: f2 alone on x, k alone on y/w. Both are re-shared.
    changed = share.remove("h")
    assert changed == _approx({"f2": 12.0, "k": 6.0})
    assert share.rates == _approx(share.full_recompute())


def test_fairshare_rejects_bad_flows():
    share = FairShare({"x": 1.0})
    with pytest.raises(ValueError):
        share.add("f", [])
    share.add("f", ["x"])
    with pytest.raises(ValueError):
        share.add("f", ["x"])
    assert share.rates == {"f": 1.0}


# --- property tests -------------------------------------------------------------------------------


def _loads(flow_links: dict, rates: dict) -> dict:
    load: dict = {}
    for flow, links in flow_links.items():
        for link in links:
            load[link] = load.get(link, 0.0) + rates[flow]
    return load


def _assert_max_min_optimal(flow_links: dict, capacity: dict, rates: dict) -> None:
    """Feasible, and every flow has a saturated link on which no flow gets more than it does."""
    assert set(rates) == set(flow_links)
    load = _loads(flow_links, rates)
    for link, total in load.items():
        assert total <= capacity[link] * (1 + 1e-9), (link, total, capacity[link])
    top: dict = {}
    for flow, links in flow_links.items():
        for link in links:
            top[link] = max(top.get(link, 0.0), rates[flow])
    for flow, links in flow_links.items():
        assert rates[flow] > 0, flow
        assert any(
            load[link] >= capacity[link] * (1 - 1e-9) and rates[flow] >= top[link] * (1 - 1e-9)
            for link in links
        ), (flow, rates[flow], [(link, load[link], capacity[link], top[link]) for link in links])


def _component(flow_links: dict, start_links) -> set:
    """Flows connected to ``start_links`` through shared links, computed independently."""
    on: dict = {}
    for flow, links in flow_links.items():
        for link in links:
            on.setdefault(link, set()).add(flow)
    seen_links, found = set(), set()
    stack = list(start_links)
    while stack:
        link = stack.pop()
        if link in seen_links:
            continue
        seen_links.add(link)
        for flow in on.get(link, ()):
            if flow not in found:
                found.add(flow)
                stack.extend(flow_links[flow])
    return found


capacities = st.lists(st.floats(min_value=1.0, max_value=1000.0), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(caps=capacities, data=st.data())
def test_max_min_rates_is_max_min_optimal(caps, data):
    capacity = dict(enumerate(caps))
    n_flows = data.draw(st.integers(1, 30))
    link_sets = st.lists(st.sampled_from(list(capacity)), min_size=1, max_size=len(capacity), unique=True)
    flow_links = {f"f{i}": data.draw(link_sets) for i in range(n_flows)}
    _assert_max_min_optimal(flow_links, capacity, max_min_rates(flow_links, capacity))


@settings(max_examples=150, deadline=None)
@given(caps=capacities, data=st.data())
def test_incremental_fairshare_matches_full_recompute_after_every_event(caps, data):
    capacity = dict(enumerate(caps))
    share = FairShare(capacity)
    link_sets = st.lists(st.sampled_from(list(capacity)), min_size=1, max_size=len(capacity), unique=True)
    active: dict = {}
    next_id = 0
    for _ in range(data.draw(st.integers(1, 60), label="events")):
        before = dict(share.rates)
        if active and (next_id >= 30 or data.draw(st.booleans(), label="remove")):
            flow = data.draw(st.sampled_from(sorted(active)), label="gone")
            links = active.pop(flow)
            changed = share.remove(flow)
        else:
            flow, next_id = next_id, next_id + 1
            links = data.draw(link_sets, label="links")
            active[flow] = links
            changed = share.add(flow, links)

        # Exactly the changed flow's component was re-shared; every other rate is untouched.
        assert set(changed) == _component(active, links)
        assert set(share.rates) == set(active)
        for other, rate in share.rates.items():
            if other in changed:
                assert rate == changed[other]
            else:
                assert rate == before[other]

        # The incremental rates equal a full recomputation to the bit, which is max-min optimal.
        reference = max_min_rates(active, capacity)
        assert share.rates == reference
        assert share.full_recompute() == reference
        _assert_max_min_optimal(active, capacity, share.rates)
