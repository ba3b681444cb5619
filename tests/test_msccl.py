"""MSCCL schedules as algorithms (``algorithms: [msccl:PATH]``): the shipped all-pairs and
two-level schedules equal the built-in algorithms whose traffic they spell out, to the bit; every
step type, buffer and collective runs and verifies on both engines; a wrong schedule is named
by rank and chunk; bad XML is one line naming the file, the line and the element, exit 2."""

from pathlib import Path

import pandas as pd
import pytest

from simulator import simulate
from simulator.cli import main
from simulator.model.collective import Collective
from simulator.model.reduction import ReduceOp
from simulator.scenario.msccl import load_msccl
from simulator.scenario.parse import scenario_from_dict
from tests.conftest import REPO

SHIPPED = REPO / "scenarios" / "msccl"
DATA = REPO / "tests" / "data" / "msccl"
ALLPAIRS = SHIPPED / "allpairs_8.xml"
SWITCH8 = {"kind": "switch", "ranks": 8, "bandwidth": "25GB/s", "latency": "1us"}
GPU = {"reduce_bandwidth": "100GB/s", "launch_latency": "1us"}


def run(topology, algorithms, sizes, **more):
    return simulate(scenario_from_dict({"topology": topology, "algorithms": algorithms,
                                        "sizes": sizes, "gpu": GPU, **more}))


# -- the shipped schedules ----------------------------------------------------------------------

def test_allpairs_moves_what_direct_moves_to_the_bit():
    # Both: every rank posts its 7 shards at once, 7 flows on each switch up- and downlink at
    # 25/7 GB/s; the owner reduces the shards in the order of peers r+1, r+2, ... (direct in one
    # program, MSCCL in a threadblock whose reductions depend one on the next, each on the
    # receive of its shard into scratch); then the reduced chunks go out at once. At 4096 B:
    # c = 512 B, 2 × (2 us + 512 B × 7 / 25 GB/s) + 7 × (1 us + 512 B / 100 GB/s)
    # = 2 × 2.14336 + 7 × 1.00512 = 11.32256 us.
    frame = run(SWITCH8, ["direct", f"msccl:{ALLPAIRS}"], [4096, 1 << 20])
    direct, msccl = frame[frame.algorithm == "direct"], frame[frame.algorithm != "direct"]
    assert msccl.sim_time_s.tolist() == direct.sim_time_s.tolist()  # to the bit
    assert msccl.sim_time_s.iloc[0] == pytest.approx(11.32256e-6, rel=1e-12)
    assert msccl.verified.all() and (msccl.max_abs_error == 0).all()
    assert msccl.messages.tolist() == direct.messages.tolist() == [112, 112]  # 8 × 7 × 2
    assert msccl.engine.tolist() == ["simpy", "simpy"]  # a trace: auto leaves it to SimPy
    # the closed form: each link charged its 7 connections, the chain ordering the reductions
    assert msccl.model_time_s.tolist() == pytest.approx(msccl.sim_time_s.tolist(), rel=1e-12)


def test_allpairs_runs_alike_on_the_vectorised_engine_and_on_fully_connected():
    # engine: vector runs the program's trace (flags are join markers, the scratch a workspace
    # past the buffer): the same times to the bit. On fully_connected no link is shared:
    # 2 × (1 us + 20.48 ns) + 7 × 1.00512 us = 9.07680 us, as direct's closed form says.
    vector = run(SWITCH8, [f"msccl:{ALLPAIRS}"], [4096, 1 << 20], engine="vector")
    simpy = run(SWITCH8, [f"msccl:{ALLPAIRS}"], [4096, 1 << 20], engine="simpy")
    assert vector.engine.tolist() == ["vector", "vector"]
    assert vector.sim_time_s.tolist() == simpy.sim_time_s.tolist()
    flat = {**SWITCH8, "kind": "fully_connected"}
    frame = run(flat, ["direct", f"msccl:{ALLPAIRS}"], [4096])
    assert frame.sim_time_s[0] == frame.sim_time_s[1] == pytest.approx(9.0768e-6, rel=1e-12)
    assert frame.model_time_s[1] == pytest.approx(frame.model_time_s[0], rel=1e-12)


def test_the_two_level_ring_is_hierarchical_with_a_ring_across_hosts_to_the_bit():
    # 2 hosts × 8 GPUs: local rank i's ring threadblock reduce-scatters the host's 8 pairs of
    # chunks (send, 6 × rrcs, rrc), which is ring_pass's order with start -1; its other
    # threadblock, once that rrc is done, allreduces chunks 2i, 2i+1 with rank i of the other
    # host (send, rrcs, r: the registered ring on two ranks); the ring threadblock, once that
    # r is done, allgathers (send, 6 × rcs, r). hierarchical's program posts the same messages
    # on the same connections (channel 0) at the same instants, so the times are equal, and so
    # are the closed forms: one flow per link, the reductions of a rank in one chain.
    topology = {"preset": "dgx_h100", "nodes": 2}
    frame = run(topology, ["hierarchical", f"msccl:{SHIPPED / 'two_level_ring_16.xml'}"],
                [4096, 1 << 20], execution="ideal",
                algorithm_options={"hierarchical": {"inter": "ring"}})
    builtin, msccl = frame.iloc[:2], frame.iloc[2:]
    assert msccl.sim_time_s.tolist() == builtin.sim_time_s.tolist()
    assert msccl.messages.tolist() == builtin.messages.tolist() == [256, 256]
    assert msccl.verified.all()
    assert msccl.model_time_s.tolist() == pytest.approx(msccl.sim_time_s.tolist(), rel=1e-12)
    assert builtin.model_time_s.tolist() == pytest.approx(msccl.model_time_s.tolist(), rel=1e-12)


@pytest.mark.parametrize("name", ["allpairs_8", "two_level_ring_16"])
def test_the_shipped_scenarios_run_from_anywhere(name, tmp_path, monkeypatch, capsys):
    # msccl:PATH is relative to the scenario file's directory, not to where the run starts
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(SHIPPED / f"{name}.yaml"), "--output", "out", "--no-plot",
                 "--quiet"]) == 0
    frame = pd.read_csv(next((tmp_path / "out").glob("*.csv")))
    builtin, msccl = frame.iloc[:3], frame.iloc[3:]
    assert msccl.algorithm.tolist() == [f"msccl:{name}.xml"] * 3
    assert msccl.sim_time_s.tolist() == builtin.sim_time_s.tolist()
    assert frame.verified.all()


# -- every step type, buffer and collective ------------------------------------------------------

def steps(*rows):
    """``<step>`` elements from (type, srcbuf, srcoff, dstbuf, dstoff, cnt[, depid, deps,
    hasdep]) rows, numbered in order."""
    out = []
    for s, row in enumerate(rows):
        kind, sb, so, db, do, cnt, *dep = row
        depid, deps, hasdep = dep or (-1, -1, 0)
        out.append(f'<step s="{s}" type="{kind}" srcbuf="{sb}" srcoff="{so}" dstbuf="{db}" '
                   f'dstoff="{do}" cnt="{cnt}" depid="{depid}" deps="{deps}" hasdep="{hasdep}"/>')
    return "".join(out)


def algo(coll, inplace, chunks, gpus):
    """An ``<algo>`` of (i_chunks, o_chunks, s_chunks, [(send, recv, steps)]) per GPU."""
    body = "".join(
        f'<gpu id="{g}" i_chunks="{i}" o_chunks="{o}" s_chunks="{s}">'
        + "".join(f'<tb id="{t}" send="{send}" recv="{recv}" chan="0">{inner}</tb>'
                  for t, (send, recv, inner) in enumerate(tbs)) + "</gpu>"
        for g, (i, o, s, tbs) in enumerate(gpus))
    return (f'<algo name="t" proto="Simple" nchannels="1" nchunksperloop="{chunks}" '
            f'ngpus="{len(gpus)}" coll="{coll}" inplace="{int(inplace)}">{body}</algo>')


def ring_allreduce_out_of_place(scratch_read=0):
    """4 ranks, out of place: a ring reduce-scatter forwarding partial sums it keeps nowhere
    (rrs), the total into scratch (rrc), copied to the output (cpy, from scratch chunk
    ``scratch_read``), and a ring allgather (s, rcs, r)."""
    gpus = []
    for r in range(4):
        right, left = (r + 1) % 4, (r - 1) % 4
        gpus.append((4, 4, 2, [(right, left, steps(
            ("s", "i", (r - 1) % 4, "i", 0, 1), ("rrs", "i", (r - 2) % 4, "i", 0, 1),
            ("rrs", "i", (r - 3) % 4, "i", 0, 1), ("rrc", "i", r, "s", 0, 1),
            ("cpy", "s", scratch_read, "o", r, 1), ("s", "o", r, "o", 0, 1),
            ("rcs", "i", -1, "o", (r - 1) % 4, 1), ("rcs", "i", -1, "o", (r - 2) % 4, 1),
            ("r", "i", -1, "o", (r - 3) % 4, 1)))]))
    return algo("allreduce", False, 4, gpus)


def ring_allgather_in_place():
    """4 ranks, in place: the input is the rank's own chunk of the output."""
    return algo("allgather", True, 4, [
        (1, 4, 0, [((r + 1) % 4, (r - 1) % 4, steps(
            ("s", "i", 0, "o", 0, 1), ("rcs", "i", -1, "o", (r - 1) % 4, 1),
            ("rcs", "i", -1, "o", (r - 2) % 4, 1), ("r", "i", -1, "o", (r - 3) % 4, 1)))])
        for r in range(4)])


def ring_reduce_scatter_out_of_place():
    """4 ranks, out of place: the output is the rank's chunk."""
    return algo("reduce_scatter", False, 4, [
        (4, 1, 0, [((r + 1) % 4, (r - 1) % 4, steps(
            ("s", "i", (r - 1) % 4, "i", 0, 1), ("rrs", "i", (r - 2) % 4, "i", 0, 1),
            ("rrs", "i", (r - 3) % 4, "i", 0, 1), ("rrc", "i", r, "o", 0, 1)))])
        for r in range(4)])


def chain(coll):
    """4 ranks, one chunk, in place: a broadcast down 0 → 1 → 2 → 3 or a reduce up to 0; the
    root's threadblock with a nop that waits for nothing else."""
    if coll == "broadcast":
        tbs = [(1, -1, steps(("nop", "i", -1, "o", -1, 0), ("s", "i", 0, "o", 0, 1))),
               (2, 0, steps(("rcs", "i", -1, "o", 0, 1))), (3, 1, steps(("rcs", "i", -1, "o", 0, 1))),
               (-1, 2, steps(("r", "i", -1, "o", 0, 1)))]
    else:
        tbs = [(-1, 1, steps(("rrc", "i", 0, "o", 0, 1))), (0, 2, steps(("rrs", "i", 0, "o", 0, 1))),
               (1, 3, steps(("rrs", "i", 0, "o", 0, 1))), (2, -1, steps(("s", "i", 0, "o", 0, 1)))]
    return algo(coll, True, 1, [(1, 1, 0, [tb]) for tb in tbs])


@pytest.mark.parametrize(("collective", "xml"), [
    ("allreduce", ring_allreduce_out_of_place()),
    ("allgather", ring_allgather_in_place()),
    ("reduce_scatter", ring_reduce_scatter_out_of_place()),
    ("broadcast", chain("broadcast")),
    ("reduce", chain("reduce")),
])
def test_every_step_type_and_collective_verifies_on_both_engines(collective, xml, tmp_path):
    (tmp_path / "algo.xml").write_text(xml, encoding="utf-8")
    times = []
    for engine in ("simpy", "vector"):
        frame = simulate(scenario_from_dict({
            "topology": {**SWITCH8, "ranks": 4}, "collective": collective,
            "algorithms": [f"msccl:{tmp_path / 'algo.xml'}"], "sizes": [4096, 40000],
            "gpu": GPU, "engine": engine, "dtype": "int64"}))
        assert frame.verified.all() and frame.engine.eq(engine).all(), frame.mismatch.tolist()
        times.append(frame.sim_time_s.tolist())
    assert times[0] == times[1]


# -- a wrong schedule, named by rank and chunk ---------------------------------------------------

def test_a_schedule_missing_a_reduction_is_caught_with_its_rank_and_chunk(tmp_path, capsys):
    # gpu 3 never adds rank 2's shard of chunk 3 (tests/data/msccl/allpairs_8_missing_reduce.xml):
    # numpy's check finds every rank's chunk 3 wrong, rank 0's first, and the replay of the
    # schedule says what it holds
    scenario = tmp_path / "broken.yaml"
    scenario.write_text(f"topology: {{kind: switch, ranks: 8, bandwidth: 25GB/s, latency: 1us}}\n"
                        f"algorithms: [\"msccl:{DATA / 'allpairs_8_missing_reduce.xml'}\"]\n"
                        f"sizes: [4096]\noutput: {tmp_path / 'out'}\n", encoding="utf-8")
    assert main(["run", str(scenario), "--no-plot", "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{scenario}: verification failed for 1 run(s), first "
                          f"msccl:{DATA / 'allpairs_8_missing_reduce.xml'} at 4096 bytes (max abs "
                          "error ")
    assert err.endswith("): rank 0 chunk 3 holds the sum of ranks 0-1, 3-7 (missing 2)")
    frame = pd.read_csv(tmp_path / "out" / "broken.csv")
    assert frame.mismatch.tolist() == ["rank 0 chunk 3 holds the sum of ranks 0-1, 3-7 (missing 2)"]


@pytest.mark.parametrize(("rank", "old", "new", "said"), [
    # rank 2 adds its scratch total to its output chunk instead of copying it there: its own
    # input chunk 2 is still in it (out of place, the output starts as the buffer's data)
    (2, 'type="cpy"', 'type="re"', "rank 0 chunk 2 holds the sum of ranks 0-3 (rank 2 twice)"),
    # rank 1 copies scratch chunk 1, which nothing wrote
    (1, 'type="cpy" srcbuf="s" srcoff="0"', 'type="cpy" srcbuf="s" srcoff="1"',
     "rank 0 chunk 1 holds data from a workspace chunk nothing wrote (uninitialised scratch)"),
])
def test_a_wrong_schedule_says_what_the_chunk_holds(rank, old, new, said, tmp_path):
    gpus = ring_allreduce_out_of_place().split("<gpu ")
    assert old in gpus[rank + 1]
    gpus[rank + 1] = gpus[rank + 1].replace(old, new, 1)
    (tmp_path / "algo.xml").write_text("<gpu ".join(gpus), encoding="utf-8")
    frame = simulate(scenario_from_dict({
        "topology": {**SWITCH8, "ranks": 4}, "algorithms": [f"msccl:{tmp_path / 'algo.xml'}"],
        "sizes": [4096], "dtype": "int64"}))
    assert frame.mismatch.tolist() == [said]


def test_wrong_chunks_and_a_right_replay_are_said_so(tmp_path):
    # rank 0 of the allgather sends its chunk 1 (its own data, not yet overwritten) as chunk 0
    xml = ring_allgather_in_place().replace(
        'type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0"',
        'type="s" srcbuf="o" srcoff="1" dstbuf="o" dstoff="0"', 1)
    (tmp_path / "ag.xml").write_text(xml, encoding="utf-8")
    wrong = load_msccl(f"msccl:{tmp_path / 'ag.xml'}", "<code>", Collective.ALLGATHER)
    assert wrong.explain(1, 0, ReduceOp.SUM) == "holds rank 0's chunk 1 (expected chunk 0)"
    # a chunk the replay gets right, which the run got wrong, is a race the schedule allows
    right = load_msccl(f"msccl:{ALLPAIRS}", "<code>", Collective.ALLREDUCE)
    assert right.explain(5, 2, ReduceOp.SUM) == (
        "is wrong, though the schedule's dependencies give it the right data: threadblocks "
        "that no dependency orders write it or what it is made of (a race)")


# -- bad XML, one line each ----------------------------------------------------------------------

TB2 = '<tb id="2" send="3" recv="3" chan="0">'
STEP = '<step s="{s}" type="{t}" srcbuf="{sb}" srcoff="{so}" dstbuf="{db}" dstoff="{do}" cnt="1" ' \
       'depid="{di}" deps="{ds}" hasdep="{h}"/>'
RE0 = STEP.format(s=0, t="re", sb="s", so=0, db="i", do=0, di=0, ds=1, h=0)
SEND0 = STEP.format(s=0, t="s", sb="i", so=1, db="s", do=6, di=-1, ds=-1, h=0)
LAST_R = STEP.format(s=3, t="r", sb="i", so=-1, db="i", do=1, di=-1, ds=-1, h=0)


@pytest.mark.parametrize(("old", "new", "said"), [
    (TB2, '<tb id="2" send="3" chan="0">',
     'line 15: <tb id="2">: expected attribute recv, missing'),
    (RE0, RE0.replace('"re"', '"rre"'),
     'line 46: <step s="0" type="rre">: expected type one of s, r, rcs, rrs, rrc, rrcs, cpy, re, '
     "nop, got 'rre'"),
    (RE0, RE0.replace('deps="1"', 'deps="4"'),
     'line 46: <step s="0" type="re">: gpu 0 tb 7: depends on step 4 of threadblock 0, which '
     'has steps 0 to 3'),
    (RE0, RE0.replace('depid="0"', 'depid="9"'),
     'line 46: <step s="0" type="re">: gpu 0 tb 7: depends on threadblock 9, which gpu 0 does '
     'not have'),
    (RE0, RE0.replace('depid="0" deps="1"', 'depid="0" deps="0"'),
     'line 46: <step s="0" type="re">: gpu 0 tb 7: depends on step 0 of threadblock 0, which '
     'has hasdep="0" (the runtime raises a threadblock\'s flag only after steps with '
     'hasdep="1")'),
    (LAST_R + "\n", "",
     'line 94: <step s="2" type="s">: gpu 1 tb 6: sends message 2 to gpu 0 on channel 0, which '
     "no step receives: gpu 0 tb 0 receives 1 from gpu 1 on channel 0"),
    (SEND0, SEND0.replace('depid="-1" deps="-1"', 'depid="7" deps="6"'),
     'line 4: <step s="0" type="s">: gpu 0 tb 0: waits in a circle and never runs: it waits for '
     "gpu 0 tb 7 step 6 (line 52), which waits for gpu 0 tb 7 step 5 (line 51), which waits "
     "for gpu 0 tb 7 step 4 (line 50), which waits for gpu 0 tb 7 step 3 (line 49), which "
     "waits for gpu 0 tb 7 step 2 (line 48), ..., which waits for it"),
    (TB2, '<tb id="2" send="1" recv="3" chan="0">',
     'line 15: <tb id="2" send="1" recv="3" chan="0">: threadblock 0 already sends to gpu 1 on '
     "channel 0 (one connection, one threadblock)"),
    (TB2, TB2 + "<op/>",
     "line 15: <op>: unknown element inside <tb>: expected <step> (msccl-tools' old_format, "
     "which the MSCCL runtime reads)"),
    ('s_chunks="7">', 's_chunks="7">\n<tb', "line 4: expected an MSCCL schedule (msccl-tools' "
                                          "XML), got text that does not parse as XML (not "
                                          "well-formed (invalid token), column 5)"),
])
def test_bad_xml_is_one_line_naming_the_file_line_and_element(old, new, said, tmp_path, capsys):
    text = ALLPAIRS.read_text(encoding="utf-8")
    assert old in text
    (tmp_path / "bad.xml").write_text(text.replace(old, new, 1), encoding="utf-8")
    scenario = tmp_path / "bad.yaml"
    scenario.write_text('topology: {kind: switch, ranks: 8, bandwidth: 25GB/s, latency: 1us}\n'
                        'algorithms: ["msccl:bad.xml"]\nsizes: [4096]\n', encoding="utf-8")
    assert main(["run", str(scenario), "--output", str(tmp_path / "out"), "--no-plot"]) == 2
    assert capsys.readouterr().err == f"{scenario}: algorithms[0]: {tmp_path / 'bad.xml'}: {said}\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("lines", "said"), [
    ("topology: {kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}\nsizes: [4096]\n",
     "algorithms[0]: 'msccl:{xml}' cannot run on topology switch: {xml}: line 1: "
     "<algo ngpus=\"8\">: expected ngpus to be the topology's 4 ranks"),
    ("topology: {kind: switch, ranks: 8, bandwidth: 25GB/s, latency: 1us}\nsizes: [4096]\n"
     "collective: allgather\n",
     "algorithms[0]: {xml}: line 1: <algo coll=\"allreduce\">: expected coll=\"allgather\", the "
     "scenario's collective"),
    ("topology: {kind: switch, ranks: 8, bandwidth: 25GB/s, latency: 1us}\nsizes: [4100]\n",
     "sizes: 'msccl:{xml}' cuts each rank's buffer into 8 equal chunks: expected sizes that are "
     "multiples of 32 bytes (8 float32 elements), got 4100"),
    ("topology: {kind: switch, ranks: 8, bandwidth: 25GB/s, latency: 1us}\nsizes: [4096]\n"
     "channels: 2\n",
     "channels: 'msccl:{xml}' places its traffic on channels itself: expected channels: auto or "
     "1, got 2"),
    ("topology: {kind: switch, ranks: 8, bandwidth: 25GB/s, latency: 1us}\nsizes: [4096]\n",
     "algorithms[0]: {laughs}: line 5: expected no entity declarations, got 'lol': nested "
     "entities can expand a few lines into gigabytes (the billion laughs)"),
])
def test_a_schedule_that_does_not_fit_the_scenario_is_one_line(lines, said, tmp_path, capsys):
    xml = DATA / "billion_laughs.xml" if "laughs" in said else ALLPAIRS
    scenario = tmp_path / "x.yaml"
    scenario.write_text(f'algorithms: ["msccl:{xml}"]\n{lines}', encoding="utf-8")
    assert main(["run", str(scenario), "--output", str(tmp_path / "out"), "--no-plot"]) == 2
    expected = said.format(xml=xml, laughs=xml)
    assert capsys.readouterr().err == f"{scenario}: {expected}\n"
    assert not (tmp_path / "out").exists()


def test_a_schedule_is_read_once_while_its_file_is_unchanged(tmp_path):
    path = tmp_path / "a.xml"
    path.write_text(ALLPAIRS.read_text(encoding="utf-8"), encoding="utf-8")
    first = load_msccl(f"msccl:{path}", "<code>", Collective.ALLREDUCE)
    assert load_msccl(f"msccl:{path}", "<code>", Collective.ALLREDUCE) is first
    path.write_text(ALLPAIRS.read_text(encoding="utf-8").replace('name="allpairs"',
                                                                 'name="renamed"'),
                    encoding="utf-8")
    again = load_msccl(f"msccl:{path}", "<code>", Collective.ALLREDUCE)
    assert again is not first and again.msccl.name == "renamed"


def test_shipped_xml_is_what_the_generator_writes():
    from bench.msccl_schedules import allpairs, two_level_ring

    assert ALLPAIRS.read_text(encoding="utf-8") == allpairs()
    assert (SHIPPED / "two_level_ring_16.xml").read_text(encoding="utf-8") == two_level_ring()
    assert Path(DATA / "allpairs_8_missing_reduce.xml").is_file()


def test_every_problem_of_a_schedule_is_a_line_of_its_own_up_to_16(tmp_path, capsys):
    # every re step of gpu 0 and gpu 1 misspelt: 14 problems, each its line; gpus 0 to 2: 21,
    # of which 16 are said and the rest counted
    text = ALLPAIRS.read_text(encoding="utf-8")
    scenario = tmp_path / "bad.yaml"
    scenario.write_text('topology: {kind: switch, ranks: 8, bandwidth: 25GB/s, latency: 1us}\n'
                        'algorithms: ["msccl:bad.xml"]\nsizes: [4096]\n', encoding="utf-8")
    for gpus, said in ((2, 14), (3, 16)):
        parts = text.split("<gpu ")
        for g in range(1, gpus + 1):
            parts[g] = parts[g].replace('type="re"', 'type="add"')
        (tmp_path / "bad.xml").write_text("<gpu ".join(parts), encoding="utf-8")
        assert main(["run", str(scenario), "--no-plot"]) == 2
        lines = capsys.readouterr().err.splitlines()
        prefix = f"{scenario}: algorithms[0]: {tmp_path / 'bad.xml'}: "
        assert all(line.startswith(prefix) for line in lines)
        assert lines[0] == prefix + (
            'line 46: <step s="0" type="add">: expected type one of s, r, rcs, rrs, rrc, rrcs, '
            "cpy, re, nop, got 'add'")
        assert len(lines) == said + (gpus == 3)
    assert lines[-1] == prefix + "and 5 more problems"
