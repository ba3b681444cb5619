"""Both engines on one network kernel: a link's capacity as a step function of time
(``Machine.capacity_events``), against static graphs and times worked by hand, and the two
engines' agreement under dense sharing, to the bit."""

from dataclasses import replace

import numpy as np
import pytest

from simulator.algorithms import REGISTRY, Collective
from simulator.algorithms.channels import schedule_on_channels
from simulator.algorithms.schedule import Group
from simulator.engine.kernel import max_min_rates
from simulator.engine.payload import Payload, make_inputs
from simulator.engine.run import RunSpec, run_collective
from simulator.engine.vector import run_schedule
from simulator.model.machine import CapacityEvent, Machine
from simulator.model.reduction import ReduceOp
from simulator.model.topology import ring, switch

FLOAT32 = np.dtype("float32")
SUM = ReduceOp.SUM


def both_engines(machine, collective, name, size_bytes):
    """(SimPy timing, vectorised timing) of one algorithm on ``machine``; their final buffers
    must be equal."""
    algorithm = REGISTRY[collective][name]
    payload = Payload.for_size(size_bytes, FLOAT32, machine.ranks, 4096, None, 1)
    inputs = make_inputs(np.random.default_rng(1), machine.ranks, payload, SUM)
    simpy_buffers, vector_buffers = inputs.copy(), inputs.copy()
    simpy = run_collective(algorithm, machine, RunSpec(payload, SUM), simpy_buffers)
    group = Group.whole(machine, payload.count, FLOAT32.itemsize, None)
    schedule = schedule_on_channels(algorithm, group, machine.layout, 1)
    vector = run_schedule(schedule, machine, payload, SUM, vector_buffers, name)
    np.testing.assert_array_equal(vector_buffers, simpy_buffers)
    return simpy, vector


def counts(machine, collective, name, size_bytes):
    """What both engines report of one run, wall times left out: SimPy's time, messages and
    events, the vectorised engine's time, messages and instants."""
    simpy, vector = both_engines(machine, collective, name, size_bytes)
    return (simpy.time_s, simpy.messages, simpy.events), (vector.time_s, vector.messages,
                                                           vector.instants)


def test_the_engines_agree_to_the_bit_under_dense_sharing():
    # Halving-doubling of 1 GiB on a 256-GPU physical ring: the partner at distance 2^k is up
    # to 2^k hops away, so many flows share each link, re-shared as each ends. Both engines
    # solve with the kernel's progressive filling (the SimPy engine per component, the
    # vectorised engine over every flow at once), whose arithmetic gives equal rates to the bit,
    # and keep the same flow arithmetic; before the kernel they differed by 5e-11 relative here
    # (7.43559100296317 s on SimPy against 7.435591003350728 s, docs/benchmark.md).
    machine = Machine.of(ring(256, 25e9, 500e-9))
    simpy, vector = both_engines(machine, Collective.ALLREDUCE, "halving_doubling", 1 << 30)
    assert vector.time_s == simpy.time_s == 7.435591003350728
    assert vector.messages == simpy.messages == 2 * 8 * 256


def scaled(graph, link, factor):
    """The graph with ``link``'s bandwidth multiplied by ``factor`` (a static change)."""
    graph = graph.copy()
    graph.edges[link]["bandwidth"] *= factor
    return graph


@pytest.mark.parametrize("factor", [0.5, 0.3, 2.0])
def test_a_capacity_event_at_0_equals_the_static_graph_with_that_bandwidth(factor):
    # Halving-doubling on an 8-GPU ring shares links, so the changed link moves the time.
    graph, link = ring(8, 25e9, 500e-9), ("gpu0", "gpu1")
    timeline = replace(Machine.of(graph), capacity_events=(CapacityEvent(link, 0.0, factor),))
    static = Machine.of(scaled(graph, link, factor))
    changed = counts(timeline, Collective.ALLREDUCE, "halving_doubling", 3 << 18)
    assert changed == counts(static, Collective.ALLREDUCE, "halving_doubling", 3 << 18)
    nominal = counts(Machine.of(graph), Collective.ALLREDUCE, "halving_doubling", 3 << 18)
    assert changed[0][0] == changed[1][0] != nominal[0][0]  # (max-min is not monotonic:
    # halving this link speeds the whole up, 183.1 us -> 177.0 us, the static graph too)


# One message of S bytes from rank 0 to rank 1 over a single cable of bandwidth B and latency L:
# a direct broadcast on a 2-GPU ring.
S, B, L = float(1 << 20), 25e9, 1e-6


def one_cable(*events):
    return replace(Machine.of(ring(2, B, L)), capacity_events=events)


def test_a_capacity_halved_mid_transfer_slows_the_rest_of_it():
    # The message waits L, then moves at B. At t_h = L + 20 us it has moved B·20us = 500,000 of
    # its 1,048,576 bytes; the rest, 548,576 B, moves at B/2 = 12.5 GB/s in 43.886 us, so it
    # arrives at t_h + 548,576 / 12.5e9 = 64.886 us (instead of L + S/B = 42.943 us).
    t_h = L + 20e-6
    machine = one_cable(CapacityEvent(("gpu0", "gpu1"), t_h, 0.5))
    expected = t_h + (S - B * (t_h - L)) / (B / 2)
    assert expected == pytest.approx(64.88608e-6, rel=1e-12)
    simpy, vector = both_engines(machine, Collective.BROADCAST, "direct", int(S))
    assert simpy.time_s == vector.time_s == expected
    assert simpy.messages == vector.messages == 1


def test_a_capacity_event_on_the_other_direction_changes_nothing_but_an_instant():
    plain = counts(one_cable(), Collective.BROADCAST, "direct", int(S))
    other = counts(one_cable(CapacityEvent(("gpu1", "gpu0"), L + 20e-6, 0.5)),
                   Collective.BROADCAST, "direct", int(S))
    assert plain[0][0] == plain[1][0] == L + S / B
    assert other[0] == plain[0]  # SimPy: the same time, messages and events
    assert other[1][:2] == plain[1][:2] and other[1][2] == plain[1][2] + 1


def test_a_capacity_event_after_the_last_byte_changes_nothing():
    # The message arrives at L + S/B = 42.943 us; a halving at 1 ms comes too late to matter,
    # and costs no event of the run (SimPy) and no instant (vectorised).
    plain = counts(one_cable(), Collective.BROADCAST, "direct", int(S))
    late = counts(one_cable(CapacityEvent(("gpu0", "gpu1"), 1e-3, 0.5)),
                  Collective.BROADCAST, "direct", int(S))
    assert late == plain
    machine = Machine.of(ring(8, 25e9, 500e-9))
    ring_plain = counts(machine, Collective.ALLREDUCE, "ring", 1 << 16)
    ring_late = counts(replace(machine, capacity_events=(CapacityEvent(("gpu3", "gpu4"), 1.0,
                                                                       0.1),)),
                       Collective.ALLREDUCE, "ring", 1 << 16)
    assert ring_late == ring_plain


def test_a_capacity_restored_mid_run_is_the_nominal_rate_again():
    # Halved from L + 10 us to L + 30 us: 250,000 B at B, 250,000 B at B/2, then the last
    # 548,576 B at B again: it arrives at L + 30 us + 548,576 / B = 52.94304 us.
    machine = one_cable(CapacityEvent(("gpu0", "gpu1"), L + 30e-6, 1.0),
                        CapacityEvent(("gpu0", "gpu1"), L + 10e-6, 0.5))
    simpy, vector = both_engines(machine, Collective.BROADCAST, "direct", int(S))
    assert simpy.time_s == vector.time_s == pytest.approx(52.94304e-6, rel=1e-12)


def test_a_link_stopped_mid_transfer_holds_its_flow_for_as_long():
    # Capacity 0 from L + 10 us to L + 15 us: the message has moved B·10us when it stops, waits
    # 5 us keeping its route and bytes, then moves the rest at B: it arrives 5 us late.
    machine = one_cable(CapacityEvent(("gpu0", "gpu1"), L + 10e-6, 0.0),
                        CapacityEvent(("gpu0", "gpu1"), L + 15e-6, 1.0))
    simpy, vector = both_engines(machine, Collective.BROADCAST, "direct", int(S))
    assert simpy.time_s == vector.time_s == pytest.approx(L + S / B + 5e-6, rel=1e-12)
    assert simpy.messages == vector.messages == 1


def test_a_flow_that_starts_on_a_stopped_link_waits_for_it():
    # Stopped from 0 to 3 us: the message's first byte could leave at L = 1 us, and leaves at
    # 3 us. Nothing else happens meanwhile, so the vectorised engine's next instant is the
    # capacity step's.
    machine = one_cable(CapacityEvent(("gpu0", "gpu1"), 0.0, 0.0),
                        CapacityEvent(("gpu0", "gpu1"), 3e-6, 1.0))
    simpy, vector = both_engines(machine, Collective.BROADCAST, "direct", int(S))
    assert simpy.time_s == vector.time_s == pytest.approx(3e-6 + S / B, rel=1e-12)


def test_a_stopped_link_gives_its_flows_nothing_and_the_others_the_rest():
    # Flow 0 crosses links 0 (stopped) and 1; flow 1 only link 1, which it then has alone.
    assert max_min_rates(np.array([0, 0, 1]), np.array([0, 1, 1]), 2,
                         np.array([0.0, 10.0])).tolist() == [0.0, 10.0]
    assert max_min_rates(np.array([0, 1, 1]), np.array([0, 0, 1]), 2,
                         np.array([10.0, 0.0])).tolist() == [10.0, 0.0]


def test_the_engines_agree_to_the_bit_around_a_stopped_link():
    # Halving-doubling on an 8-GPU ring, many flows a link: gpu0->gpu1 carries nothing from 20
    # to 35 us, its flows waiting while those sharing its other links take their share. (Not
    # slower: as halving a link does, the stop lets the rest contend less, 183.1 -> 178.6 us.)
    graph, link = ring(8, 25e9, 500e-9), ("gpu0", "gpu1")
    stopped = replace(Machine.of(graph), capacity_events=(
        CapacityEvent(link, 20e-6, 0.0), CapacityEvent(link, 35e-6, 1.0)))
    simpy, vector = both_engines(stopped, Collective.ALLREDUCE, "halving_doubling", 3 << 18)
    healthy = both_engines(Machine.of(graph), Collective.ALLREDUCE, "halving_doubling",
                           3 << 18)[0]
    assert simpy.time_s == vector.time_s != healthy.time_s


def test_a_link_left_stopped_is_refused():
    with pytest.raises(ValueError) as error:
        one_cable(CapacityEvent(("gpu0", "gpu1"), 1e-6, 1.0),
                  CapacityEvent(("gpu0", "gpu1"), 2e-6, 0.0))
    assert str(error.value) == (
        "capacity event on gpu0->gpu1: it carries nothing from 2e-06 s on; a later event must "
        "restore it (a link that fails for good is an Outage)")


def test_a_capacity_event_on_a_link_the_topology_lacks_is_refused():
    with pytest.raises(ValueError) as error:
        one_cable(CapacityEvent(("gpu0", "gpu7"), 0.0, 0.5))
    assert str(error.value) == ("capacity event on gpu0->gpu7: the topology has no such link")


def test_flows_that_end_together_end_together_on_both_engines():
    # Halving-doubling on 8 GPUs of a switch with gpu0's cable at 0.4 of its bandwidth from 3 to
    # 40 us: at 85.811712 us a flow ends exactly as another's last bytes arrive, which rounding
    # puts one ulp later. The vectorised engine re-shares once an instant; the SimPy engine,
    # event by event, gave the second flow the first one's share for a moment, left it a
    # residue of 1e-10 bytes and ended it before the next message joined (an ulp apart at the
    # end). It now ends a flow re-timed to this very instant after the instant's other events.
    events = tuple(CapacityEvent(link, at, factor) for link in (("gpu0", "switch"),
                                                                ("switch", "gpu0"))
                   for at, factor in ((3e-6, 0.4), (40e-6, 1.0)))
    machine = replace(Machine.of(switch(8, 25e9, 500e-9)), capacity_events=events)
    simpy, vector = both_engines(machine, Collective.ALLREDUCE, "halving_doubling", 1 << 20)
    assert simpy.time_s == vector.time_s == 0.00015530125866666664
