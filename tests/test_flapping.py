"""``link_flapping`` (issue 37): a link down for a while every period, until a time. Read with
one-line errors, applied by both engines with equal times, against times worked by hand on a
2-rank transfer, and in a training step (tests/test_steady.py runs it in a steady pipeline with
the fast-forward on and off); and a fault kind added as one class and one registry line."""

import json
from dataclasses import dataclass, replace
from typing import ClassVar

import pytest

from simulator.cli import main
from simulator.errors import InputError
from simulator.model.faults import KINDS, Fault, LinkFlapping, seen_by_bucket
from simulator.model.faults.entry import link_ends
from simulator.model.machine import CapacityEvent
from simulator.output.settings_json import settings
from simulator.plan import prepare
from simulator.runner import run_point
from simulator.scenario import scenario_from_dict

ENGINES = ("simpy", "vector")
TWO = {"kind": "switch", "ranks": 2, "bandwidth": "25GB/s", "latency": "500ns"}
EIGHT = {**TWO, "ranks": 8}
FLAP = {"kind": "link_flapping", "link": ["gpu0", "switch"], "at": "5us", "period": "10us",
        "down": "2us", "until": "40us"}


def scenario(faults, topology=TWO, collective="sendrecv", algorithms=("direct",), **more):
    """A scenario of 1 MiB with ``faults`` (by default sendrecv on 2 ranks of a switch)."""
    return {"name": "flap", "topology": topology, "collective": collective,
            "algorithms": list(algorithms), "sizes": ["1MiB"], "faults": faults, **more}


def run(data, engine, algorithm="direct"):
    """``algorithm``'s point at 1 MiB of scenario ``data`` on ``engine``."""
    return run_point({**data, "engine": engine}, algorithm, 1 << 20)


def problems(fault):
    """The one-line messages of a scenario with ``fault``, read and prepared."""
    with pytest.raises(InputError) as error:
        prepare(scenario_from_dict(scenario([fault]), source="f.yaml"))
    return [str(p) for p in error.value.problems]


def test_a_flapping_link_is_read_from_a_scenario():
    read = scenario_from_dict(scenario([{**FLAP, "both": True}])).faults
    assert read == (LinkFlapping(("gpu0", "switch"), 5e-6, 40e-6, 10e-6, 2e-6, True),)
    assert read[0].label() == "link_flapping gpu0<->switch down 2us every 10us at 5us until 40us"


def test_the_settings_file_gives_a_flapping_link_back():
    read = scenario_from_dict(scenario([FLAP]))
    written = settings(read, read.run)["scenario"]
    assert written["faults"] == [{**FLAP, "both": False}]
    assert scenario_from_dict(written).faults == read.faults


@pytest.mark.parametrize(("change", "message"), [
    ({"down": "10us"}, "f.yaml: faults[0].down: expected a time below the period (10us), got "
                       "'10us'"),
    ({"period": "0us"}, "f.yaml: faults[0].period: expected a time above 0, got '0us'"),
    ({"down": 2}, "f.yaml: faults[0].down: expected a time like '500ns', '1us', '2ms' or '1s', "
                  "got 2"),
    ({"until": "5us"}, "f.yaml: faults[0].until: expected a time after 'at', got '5us'"),
    ({"until": "1s", "period": "1us", "down": "100ns"},
     "f.yaml: faults[0].period: expected at most 10,000 periods from 'at' to 'until' "
     "(simulator/limits.py), got 999,995; use a longer period or an earlier until"),
    ({"factor": 0.5}, "f.yaml: faults[0].factor: unknown key; expected one of kind, link, "
                      "period, down, until, at, both"),
    ({"link": ["gpu0", "swich"]}, "f.yaml: faults[0].link: no node 'swich' in the topology "
                                  "(the names `topo --names` prints); did you mean 'switch'?"),
    ({"link": ["gpu0", "gpu1"]}, "f.yaml: faults[0].link: no link from 'gpu0' to 'gpu1' in the "
                                 "topology"),
])
def test_a_bad_flapping_link_gets_one_line(change, message):
    assert problems({**FLAP, **change}) == [message]


def test_a_flapping_link_without_until_is_refused_with_exit_2(tmp_path, capsys):
    source = tmp_path / "flap.json"
    source.write_text(json.dumps(scenario([{k: v for k, v in FLAP.items() if k != "until"}])))
    assert main(["run", str(source), "--output", str(tmp_path / "out"), "--quiet"]) == 2
    assert capsys.readouterr().err == f"{source}: faults[0].until: required but missing\n"
    assert not (tmp_path / "out").exists()


# One message of S = 1 MiB each way between 2 ranks on a switch (sendrecv): rank 0's crosses
# gpu0->switch->gpu1, rank 1's gpu1->switch->gpu0, each alone on its links at B = 25 GB/s after
# the route's latency, 2 x 500 ns: healthy, both arrive at 1 us + S/B = 42.94304 us. gpu0->switch
# down 2 us every 10 us from 5 us holds rank 0's message 2 us a phase it meets (phases at 5, 15,
# 25, 35 us until 40 us; cut at until where it falls inside one), rank 1's not at all.
HEALTHY_S = 1e-6 + (1 << 20) / 25e9


@pytest.mark.parametrize(("change", "held_s"), [
    ({}, 8e-6),                                   # 4 phases of 2 us, the last ending at 37 us
    ({"until": "36us"}, 7e-6),                    # the fourth cut to 1 us
    ({"until": "20us"}, 4e-6),                    # 2 phases, then up for good
    ({"at": "0us", "down": "3us"}, 11e-6),        # starts waiting at 1 us: 2 + 3 + 3 + 3 us
    ({"at": "50us", "until": "1ms"}, 0.0),        # after the last byte: did not act
])
@pytest.mark.parametrize("engine", ENGINES)
def test_a_transfer_over_a_flapping_link_waits_out_each_phase(engine, change, held_s):
    result = run(scenario([{**FLAP, **change}]), engine)
    assert result.verified and result.engine == engine
    assert result.healthy_time_s == pytest.approx(HEALTHY_S, rel=1e-12)
    assert result.sim_time_s == pytest.approx(HEALTHY_S + held_s, rel=1e-12)
    assert result.faults.endswith("(did not act)") == (held_s == 0)


@pytest.mark.parametrize("algorithm", ["ring", "double_binary_tree", "halving_doubling",
                                       "direct"])
def test_a_flapping_cable_gives_equal_times_on_both_engines(algorithm):
    # gpu0's cable, both directions, down 5 us every 20 us from 3 us until 150 us: every
    # algorithm needs rank 0's data, so each phase that catches one of its flows holds it
    flap = {**FLAP, "at": "3us", "period": "20us", "down": "5us", "until": "150us",
            "both": True}
    data = scenario([flap], topology=EIGHT, collective="allreduce", algorithms=[algorithm])
    simpy, vector = (run(data, engine, algorithm) for engine in ENGINES)
    assert simpy.verified and vector.verified
    assert (simpy.engine, vector.engine) == ENGINES
    assert simpy.sim_time_s == vector.sim_time_s > simpy.healthy_time_s
    assert simpy.healthy_time_s == vector.healthy_time_s


def test_a_training_bucket_sees_the_flapping_from_its_own_start():
    # phases at 1, 2 and 3 ms from the backward pass's start; a bucket from 2.5 ms sees the
    # flapping begin 1.5 ms before it and meets the last phase 0.5 ms in
    flap = LinkFlapping(("gpu0", "switch"), 1e-3, 4e-3, 1e-3, 2e-4)
    (seen,) = seen_by_bucket([flap], 2.5e-3, 2.5e-3)
    assert (seen.at_s, seen.until_s) == pytest.approx((-1.5e-3, 1.5e-3), rel=1e-12)
    assert [(round(a * 1e6, 6), round(b * 1e6, 6)) for a, b in seen.phases()] == [
        (500.0, 700.0)]
    assert seen.label() == ("link_flapping gpu0->switch down 200us every 1ms at -1.5ms until "
                            "1.5ms")
    assert seen_by_bucket([flap], 4e-3, 4.5e-3) == ()  # it had stopped


def test_a_phase_under_way_when_a_bucket_starts_holds_the_link_from_0():
    # phases at 0 and 0.5 ms; a bucket from 0.6 ms starts 100 us into the second
    flap = LinkFlapping(("gpu0", "switch"), 0.0, 1e-3, 5e-4, 2e-4)
    (seen,) = seen_by_bucket([flap], 6e-4, 6e-4)
    assert [(round(a * 1e6, 6), round(b * 1e6, 6)) for a, b in seen.phases()] == [(0.0, 100.0)]
    assert [(e.at_s, e.factor) for e in seen.events()] == [(0.0, 0.0), (seen.phases()[0][1], 1.0)]
    assert seen.acted(1e-6)


@dataclass(frozen=True)
class LinkHalved(Fault):
    """A kind written for this test alone: a link at half its bandwidth from the start."""

    link: tuple[str, str]

    kind: ClassVar[str] = "link_halved"
    required: ClassVar[tuple[str, ...]] = ("link",)

    @classmethod
    def read(cls, fields):
        """The entry's link."""
        link = fields.get("link", link_ends)
        return None if link is None else cls(link)

    def problem(self, machine, execution):
        """A link the topology lacks."""
        return None if self.link in machine.routing.capacities() else ("link", "no such link")

    def seen_by(self, start_s, ready_s):
        """Halved in every bucket."""
        return self

    def applied(self, machine):
        """A capacity event of factor 0.5 at 0."""
        return replace(machine, capacity_events=(*machine.capacity_events,
                                                 CapacityEvent(self.link, 0.0, 0.5)))

    def label(self):
        """``link_halved gpu0->switch``."""
        return f"link_halved {self.link[0]}->{self.link[1]}"

    def acted(self, run_s):
        """Always, from the start."""
        return True

    def settings(self):
        """As a scenario's entry."""
        return {"kind": self.kind, "link": list(self.link)}


def test_a_new_kind_is_one_class_and_one_registry_line(monkeypatch):
    # registered, the kind is read, checked, applied on both engines and labelled, as the
    # link_degraded it amounts to is
    monkeypatch.setitem(KINDS, LinkHalved.kind, LinkHalved)
    halved = scenario([{"kind": "link_halved", "link": ["gpu0", "switch"]}], topology=EIGHT,
                      collective="allreduce", algorithms=["ring"])
    degraded = {**halved, "faults": [{"kind": "link_degraded", "link": ["gpu0", "switch"],
                                      "factor": 0.5}]}
    for engine in ENGINES:
        new, old = run(halved, engine, "ring"), run(degraded, engine, "ring")
        assert new.verified and new.sim_time_s == old.sim_time_s > new.healthy_time_s
        assert new.faults == "link_halved gpu0->switch"
    with pytest.raises(InputError) as error:
        prepare(scenario_from_dict({**halved, "faults": [{"kind": "link_halved",
                                                          "link": ["gpu0", "gpu1"]}]},
                                   source="f.yaml"))
    assert str(error.value) == "f.yaml: faults[0].link: no such link"
