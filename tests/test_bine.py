"""bine: the negabinary mapping and partners by hand, the butterfly's blocks contiguous on many
sizes, a switch by hand, both engines alike, and the global-link bytes it saves on a dragonfly."""

import numpy as np
import pytest

from simulator import InputError, simulate
from simulator.algorithms import Collective, get_algorithm
from simulator.algorithms.bine import BineOptions
from simulator.algorithms.phases.bine import (
    bine_butterfly,
    from_negabinary,
    negabinary,
    nu,
    rho,
)
from simulator.model.activity import Watch
from simulator.model.machine import GpuSpec
from simulator.output.links import links_frame
from tests.conftest import flat_scenario, run_one

BINE = get_algorithm(Collective.ALLREDUCE, "bine")
LINK = {"bandwidth": "25GB/s", "latency": "500ns"}


def dragonfly(groups, routers, gpus_per_router):
    return {"kind": "dragonfly", "groups": groups, "routers": routers,
            "gpus_per_router": gpus_per_router, **LINK, "global_bandwidth": "25GB/s",
            "global_latency": "1us"}


def test_negabinary_of_the_ranks_of_eight_and_sixteen():
    # base −2: 3 = 4 − 2 + 1 → 111, 6 = 16 − 8 − 2 → …11010, of which 3 digits are 010
    assert [negabinary(r, 3) for r in range(8)] == [0b000, 0b001, 0b110, 0b111, 0b100, 0b101,
                                                    0b010, 0b011]
    assert [from_negabinary(negabinary(r, 4), 4) for r in range(16)] == list(range(16))
    # ρ(s) is the negabinary number of s+1 ones (the authors' nb2rank((mask << 1) - 1))
    assert [from_negabinary((1 << (s + 1)) - 1, 8) for s in range(5)] == [1, 255, 3, 251, 11]
    assert [rho(s) for s in range(6)] == [1, -1, 3, -5, 11, -21]


def test_partners_and_positions_of_eight_ranks():
    fly = bine_butterfly(8)
    assert fly.partners == ((1, 0, 3, 2, 5, 4, 7, 6),    # s = 0: even +1, odd −1
                            (7, 2, 1, 4, 3, 6, 5, 0),    # s = 1: even −1, odd +1
                            (3, 6, 5, 0, 7, 2, 1, 4))    # s = 2: even +3, odd −3
    # ν(r): negabinary of r (odd) or −r (even) mod 8, Gray-coded, bits reversed. Rank 3: 111 →
    # gray 100 → 001 = 1; rank 4: −4 = 100 (−8 + 4: 1100, 3 digits 100) → gray 110 → 011 = 3
    assert fly.positions == (0, 4, 6, 1, 3, 7, 5, 2)
    assert [nu(r, 8) for r in range(8)] == list(fly.positions)


def test_partners_and_positions_of_sixteen_ranks():
    fly = bine_butterfly(16)
    assert fly.partners[3] == (11, 6, 13, 8, 15, 10, 1, 12, 3, 14, 5, 0, 7, 2, 9, 4)  # ρ = −5
    # rank 3: 0111 → gray 0100 → 0010 = 2; rank 4: −4 = 1100 (−8 + 4) → gray 1010 → 0101 = 5
    assert fly.positions == (0, 8, 12, 2, 5, 14, 9, 7, 3, 11, 15, 1, 6, 13, 10, 4)


@pytest.mark.parametrize("size", [2, 4, 8, 16, 32, 64, 256, 1024])
def test_every_step_pairs_ranks_and_keeps_their_blocks_contiguous(size):
    fly = bine_butterfly(size)
    steps = len(fly.partners)
    assert steps == size.bit_length() - 1
    reach = [{r} for r in range(size)]          # what r's data reach through steps s..L-1
    for s in reversed(range(steps)):
        partner = fly.partners[s]
        assert all(partner[partner[r]] == r != partner[r] for r in range(size))
        # the modulo distance is |ρ(s)|, under 2^s·2/3 + 1 (a binomial butterfly's is 2^s)
        assert {min((partner[r] - r) % size, (r - partner[r]) % size)
                for r in range(size)} == {min(abs(rho(s)), size - abs(rho(s)))}
        reach = [reach[r] | reach[partner[r]] for r in range(size)]
        group = size >> s
        for r in range(size):
            assert len(reach[r]) == group       # disjoint halves: every rank's data once
            first = fly.positions[r] - fly.positions[r] % group
            assert {fly.positions[j] for j in reach[r]} == set(range(first, first + group))


def test_hand_computed_time_on_a_switch_of_eight():
    # 8000 B per rank on a switch (a route is 2 hops: alpha = 1 us, 25 GB/s): reduce-scatter
    # steps send 4000, 2000, 1000 B, then the allgather the same back; each reduction
    # 1 us + bytes / 100 GB/s:
    #   2 · (3 · 1 us + 7000 B / 25 GB/s) + 3 · 1 us + 7000 B / 100 GB/s = 6.56 + 3.07 us
    expected = 2 * (3e-6 + 7000 / 25e9) + 3e-6 + 7000 / 1e11
    result = run_one(flat_scenario(ranks=8, algorithms=("bine",), gpu=GpuSpec(1e11, 1e-6)), 8000)
    assert result.verified
    assert result.sim_time_s == pytest.approx(expected, rel=1e-12)
    assert result.model_time_s == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(9.63e-6, rel=1e-12)


def test_latency_optimal_option_swaps_the_whole_vector():
    # the same switch, 8000 B: 3 whole-vector steps of 1 us + 8000 B / 25 GB/s = 3.96 us
    frame = simulate({"topology": {"kind": "switch", "ranks": 8, **LINK}, "algorithms": ["bine"],
                      "sizes": [8000], "algorithm_options": {"bine": {"latency_optimal": True}}})
    assert frame.verified.all()
    assert frame.sim_time_s[0] == pytest.approx(3 * (1e-6 + 8000 / 25e9), rel=1e-12)
    assert BINE.configured(BineOptions(latency_optimal=True)).options.latency_optimal


def test_a_bad_option_is_one_line():
    with pytest.raises(InputError) as caught:
        simulate({"topology": {"kind": "switch", "ranks": 8, **LINK}, "algorithms": ["bine"],
                  "sizes": [8000], "algorithm_options": {"bine": {"ports": 2}}})
    assert "\n" not in str(caught.value) and "ports" in str(caught.value)


@pytest.mark.parametrize("topology", [
    {"kind": "switch", "ranks": 6, **LINK},            # the fold, then Bine on 4
    {"kind": "ring", "ranks": 12, **LINK},             # the fold, then Bine on 8
    {"kind": "torus", "dims": [4, 8], **LINK},         # per dimension
    dragonfly(4, 2, 2),
    dragonfly(3, 2, 2),                                # 12 ranks
])
@pytest.mark.parametrize("latency_optimal", [False, True])
def test_both_engines_agree_and_verify(topology, latency_optimal):
    scenario = {"topology": topology, "algorithms": ["bine"], "sizes": [4 * 3001, 4 << 16],
                "piece_size": 40000, "algorithm_options": {"bine": {"latency_optimal": latency_optimal}}}
    simpy, vector = (simulate({**scenario, "engine": engine}) for engine in ("simpy", "vector"))
    assert list(vector.engine) == ["vector"] * 2 and list(simpy.engine) == ["simpy"] * 2
    np.testing.assert_array_equal(vector.sim_time_s, simpy.sim_time_s)
    assert vector.verified.all() and simpy.verified.all()


def global_bytes(topology, algorithms, size):
    """Bytes every algorithm put on the dragonfly's global links (router to router between
    groups, ``g<i>.r<j>`` to ``g<k>.r<l>`` with i ≠ k), from the run's link recorder."""
    watch = Watch()
    frame = simulate({"topology": topology, "algorithms": algorithms, "sizes": [size],
                      "engine": "vector"}, watch=watch)
    assert frame.verified.all()
    links = links_frame(watch.activities)
    group = [links[end].str.split(".").str[0] for end in ("from", "to")]
    crossing = links[(links.from_kind == "switch") & (links.to_kind == "switch")
                     & (group[0] != group[1])]
    return crossing.groupby("algorithm").bytes.sum().to_dict(), dict(
        zip(frame.algorithm, frame.sim_time_s, strict=True))


def test_global_link_bytes_by_hand_on_a_small_dragonfly():
    # 4 groups of 2 ranks (0-1, 2-3, …), n bytes each. Bine: step 0 pairs r ± 1 inside the
    # groups; steps 1 (ρ = −1: 0-7, 2-1, 4-3, 6-5) and 2 (ρ = 3: 0-3, 2-5, 4-7, 6-1) cross, 8
    # messages of n/4 then n/8: 3n each way, 6n in all. halving_doubling's reduce-scatter
    # sends n/2 to r XOR 4 and n/4 to r XOR 2 (all crossing), n/8 to r XOR 1 (inside): 6n each
    # way, 12n. recursive_doubling sends n to r XOR 2 and r XOR 4: 16n
    n = 8000
    carried, _ = global_bytes(dragonfly(4, 1, 2), ["bine", "halving_doubling",
                                                   "recursive_doubling"], n)
    assert carried == {"bine": 6 * n, "halving_doubling": 12 * n, "recursive_doubling": 16 * n}


def test_global_link_bytes_and_time_on_a_dragonfly_of_sixty_four():
    # 4 groups x 4 routers x 4 GPUs, 1 MiB per rank: Bine's big early steps stay in a group
    n = 1 << 20
    carried, time_s = global_bytes(dragonfly(4, 4, 4),
                                   ["bine", "halving_doubling", "recursive_doubling", "ring"], n)
    assert {name: value / n for name, value in carried.items()} == {
        "bine": 13.5, "halving_doubling": 96.0, "recursive_doubling": 128.0, "ring": 7.875}
    assert time_s["halving_doubling"] / time_s["bine"] == pytest.approx(7.2738, abs=1e-4)
