"""bucket: a ring reduce-scatter along each dimension of a torus or mesh, then ring allgathers
back; exact closed form on tori, a bound on meshes, both engines alike, and the grid it reads."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator import InputError, load_scenario, simulate
from simulator.algorithms import Collective, get_algorithm
from simulator.algorithms.schedule import Group
from simulator.model.machine import GpuSpec, Grid, Layout, Machine
from simulator.model.span import Span
from simulator.model.topology import switch, torus, torus_coords
from simulator.scenario import TopologySpec
from tests.conftest import REPO, flat_scenario, run_one

BUCKET = get_algorithm(Collective.ALLREDUCE, "bucket")
ALPHA, BANDWIDTH = 5e-7, 25e9  # flat_scenario's links: one hop along a dimension


def grid_scenario(kind, dims, **fields):
    topology = TopologySpec(kind, {"dims": dims, "bandwidth": BANDWIDTH, "latency": ALPHA})
    return flat_scenario(topology=topology, **{"algorithms": ("bucket",), **fields})


def grid_dict(kind, dims, **fields):
    return {"topology": {"kind": kind, "dims": list(dims), "bandwidth": "25GB/s",
                         "latency": "500ns"}, "algorithms": ["bucket"], **fields}


def test_hand_computed_time_on_a_4x4_torus():
    # 4 MiB per rank: the reduce-scatter along dimension 1 cuts it into c1 = 1 MiB chunks, the
    # one along dimension 2 cuts c1 into c2 = 256 KiB; each ring has 3 steps of one hop (alpha =
    # 500 ns) each way, and the reduce-scatters reduce 3 chunks each (100 GB/s after 1 us):
    # T = 2·3·(alpha + c1/25e9) + 2·3·(alpha + c2/25e9) + 3·(1us + c1/1e11) + 3·(1us + c2/1e11)
    c1, c2 = 1 << 20, 1 << 18
    expected = (6 * (ALPHA + c1 / BANDWIDTH) + 6 * (ALPHA + c2 / BANDWIDTH)
                + 3 * (1e-6 + c1 / 1e11) + 3 * (1e-6 + c2 / 1e11))
    result = run_one(grid_scenario("torus", (4, 4), gpu=GpuSpec(1e11, 1e-6)), 4 << 20)
    assert result.verified is True
    assert result.sim_time_s == pytest.approx(expected, rel=1e-12)
    assert result.model_time_s == pytest.approx(expected, rel=1e-12)


def test_it_takes_fewer_latencies_than_the_flat_ring():
    # 4x4x4 at 4 KiB per rank: 18 steps of one hop against the ring's 126 (of 1 to 3 hops)
    bucket, ring = (run_one(grid_scenario("torus", (4, 4, 4), algorithms=(name,)), 4096)
                    for name in ("bucket", "ring"))
    assert bucket.sim_time_s < ring.sim_time_s / 5


@pytest.mark.parametrize("dims", [(4, 4), (3, 5), (2, 3, 4), (4, 4, 4)])
@pytest.mark.parametrize("gpu", [GpuSpec(), GpuSpec(1e11, 1e-6)])
def test_simulated_time_equals_the_closed_form_on_a_torus(dims, gpu):
    scenario = grid_scenario("torus", dims, gpu=gpu, dtype=np.dtype("int32"))
    for size in (4, 4000, 4 * 1001, 4 << 20):  # 1001 elements: unequal chunks in every phase
        result = run_one(scenario, size)
        assert result.verified is True and result.max_abs_error == 0.0
        assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9), size


@settings(max_examples=30, deadline=None)
@given(dims=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=3),
       count=st.integers(min_value=1, max_value=1_000_000),
       bandwidth=st.floats(min_value=1e9, max_value=1e12),
       latency=st.floats(min_value=0.0, max_value=1e-5),
       reduce_bandwidth=st.one_of(st.none(), st.floats(min_value=1e10, max_value=5e12)))
def test_exact_on_any_torus_at_any_size(dims, count, bandwidth, latency, reduce_bandwidth):
    topology = TopologySpec("torus", {"dims": tuple(dims), "bandwidth": bandwidth,
                                      "latency": latency})
    scenario = flat_scenario(topology=topology, algorithms=("bucket",),
                             gpu=GpuSpec(reduce_bandwidth_Bps=reduce_bandwidth))
    result = run_one(scenario, 4 * count)
    assert result.verified
    assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9)


def test_on_a_mesh_the_closing_step_goes_back_along_the_line():
    # 4x4 mesh, 4 MiB: a line's ring closes from coordinate 3 to 0 over 3 cables the other way
    # (alpha 3·500 ns, no link shared). Each 3-step ring's slowest chunk crosses that hop and
    # two others: 5·alpha + 3·c·beta; four rings: T = 20·alpha + 6·(c1 + c2)·beta, 8·alpha more
    # than the torus.
    c1, c2 = 1 << 20, 1 << 18
    expected = 20 * ALPHA + 6 * (c1 + c2) / BANDWIDTH
    mesh, ring_torus = (run_one(grid_scenario(kind, (4, 4)), 4 << 20) for kind in ("mesh", "torus"))
    assert mesh.sim_time_s == pytest.approx(expected, rel=1e-12)
    assert mesh.model_time_s == pytest.approx(expected, rel=1e-12)
    assert mesh.sim_time_s - ring_torus.sim_time_s == pytest.approx(8 * ALPHA, rel=1e-9)


@settings(max_examples=30, deadline=None)
@given(dims=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=3),
       count=st.integers(min_value=1, max_value=300_000),
       latency=st.sampled_from([0.0, 5e-7, 3e-6]),
       piece_bytes=st.sampled_from([None, 4000, 4096]),
       reduce_bandwidth=st.one_of(st.none(), st.floats(min_value=1e10, max_value=5e12)))
def test_on_a_mesh_the_closed_form_is_an_upper_bound(dims, count, latency, piece_bytes,
                                                     reduce_bandwidth):
    # exact where every span divides evenly without pieces; uneven chunks may not cross the
    # long hop, and the pipelined form charges every hop the long hop's alpha
    topology = TopologySpec("mesh", {"dims": tuple(dims), "bandwidth": BANDWIDTH,
                                     "latency": latency})
    scenario = flat_scenario(topology=topology, algorithms=("bucket",), piece_bytes=piece_bytes,
                             gpu=GpuSpec(reduce_bandwidth_Bps=reduce_bandwidth))
    result = run_one(scenario, 4 * count)
    assert result.verified
    assert result.sim_time_s <= result.model_time_s * (1 + 1e-12)


def test_with_pieces_on_a_mesh_the_bound_is_loose():
    scenario = grid_scenario("mesh", (5,), piece_bytes=4096)
    result = run_one(scenario, 4 * 5 * 20_000)
    assert result.sim_time_s < 0.99 * result.model_time_s


@pytest.mark.parametrize("kind, dims, fields", [
    ("torus", (4, 4), {}),
    ("torus", (2, 3, 4), {"gpu": {"reduce_bandwidth": "40GB/s", "launch_latency": "1us"}}),
    ("torus", (3, 5), {"piece_size": 1000}),
    ("mesh", (3, 2, 3), {"piece_size": 4096, "gpu": {"reduce_bandwidth": "40GB/s"}}),
    ("torus", (4, 4), {"channels": 2}),      # each channel's group: every rank, rotated
    ("mesh", (2, 3, 4), {"channels": 3, "op": "max"}),
])
def test_both_engines_agree(kind, dims, fields):
    scenario = grid_dict(kind, dims, sizes=[4 * 3001, 4 << 16], **fields)
    simpy, vector = (simulate({**scenario, "engine": engine}) for engine in ("simpy", "vector"))
    assert list(vector.engine) == ["vector"] * 2 and list(simpy.engine) == ["simpy"] * 2
    np.testing.assert_array_equal(vector.sim_time_s, simpy.sim_time_s)
    assert list(vector.messages) == list(simpy.messages)
    assert vector.verified.all() and simpy.verified.all()
    if kind == "torus" and "piece_size" not in fields and "channels" not in fields:
        np.testing.assert_allclose(vector.sim_time_s, vector.model_time_s, rtol=1e-9)


def test_long_lines_run_a_window_of_blocks(monkeypatch):
    # two ring steps a block on lines of 6: each phase's rings come in blocks side by side
    monkeypatch.setattr("simulator.algorithms.phases.ring.BLOCK_MESSAGES", 12)
    machine = Machine.of(torus((6, 3), 25e9, 5e-7))
    blocks = BUCKET.in_blocks(Group.whole(machine, 3001, 4))
    assert blocks is not None and blocks.count > 4
    scenario = grid_dict("torus", (6, 3), sizes=[4 * 3001])
    simpy, vector = (simulate({**scenario, "engine": engine}) for engine in ("simpy", "vector"))
    assert vector.sim_time_s[0] == pytest.approx(simpy.sim_time_s[0], rel=1e-12, abs=0)
    assert vector.sim_time_s[0] == pytest.approx(vector.model_time_s[0], rel=1e-9)
    assert vector.verified[0] and simpy.verified[0]


def test_it_cannot_run_without_a_grid_and_says_so():
    with pytest.raises(InputError) as caught:
        simulate({"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s",
                               "latency": "500ns"}, "algorithms": ["bucket"], "sizes": [4096]})
    assert str(caught.value) == ("<dict>: algorithms[0]: 'bucket' cannot run on topology switch: "
                                 "it needs GPUs on a torus or mesh (kind torus or mesh)")


def test_all_runs_it_on_a_torus_and_skips_it_elsewhere():
    on_switch = simulate({"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s",
                                       "latency": "500ns"}, "sizes": [4096]})
    on_torus = simulate({**grid_dict("torus", (2, 2), sizes=[4096]), "algorithms": "all"})
    assert "bucket" not in set(on_switch.algorithm)
    assert "bucket" in set(on_torus.algorithm)


def test_the_tpu_torus_scenario_runs_and_bucket_wins_at_a_mebibyte():
    scenario = load_scenario(REPO / "scenarios" / "tpu_torus.yaml")
    assert scenario.topology.params["dims"] == (4, 4, 4)
    frame = simulate({"topology": {"kind": "torus", "dims": [4, 4, 4], "bandwidth": "100GB/s",
                                   "latency": "1us"}, "algorithms": ["ring", "bucket"],
                      "sizes": ["1MiB"]})
    ring, bucket = frame.itertuples()
    assert bucket.sim_time_s == pytest.approx(bucket.model_time_s, rel=1e-9)
    assert bucket.sim_time_s < ring.sim_time_s / 3


def test_the_machine_reads_the_grid_and_its_lines():
    layout = Machine.of(torus((2, 3, 4), 1e9, 0.0)).layout
    assert layout.dims == (2, 3, 4)
    for rank in range(24):
        for dim in range(3):
            line = layout.line(rank, dim)
            assert rank in line and len(line) == (2, 3, 4)[dim]
            coords = [torus_coords(r, (2, 3, 4)) for r in line]
            assert [c[dim] for c in coords] == list(range(len(line)))
            assert all(c[:dim] + c[dim + 1:] == coords[0][:dim] + coords[0][dim + 1:]
                       for c in coords)
    assert Machine.of(switch(4, 1e9, 0.0)).layout.dims == ()


def test_a_reordering_of_every_rank_keeps_the_grid_any_other_subgroup_drops_it():
    layout = Layout((0,) * 6, Grid.whole((2, 3)))
    assert layout.line(4, 1) == (3, 4, 5) and layout.line(4, 0) == (1, 4)
    rotated = layout.subgroup([1, 2, 3, 4, 5, 0])  # rank r here is rank r + 1 there
    assert rotated.dims == (2, 3)
    assert rotated.line(3, 1) == (2, 3, 4) and rotated.line(3, 0) == (0, 3)
    assert layout.subgroup([0, 1, 2]).grid is None
    group = Group(np.arange(6), Span(0, 60), 4, grid=Grid.whole((2, 3)))
    assert group.subgroup([5, 4, 3, 2, 1, 0], Span(0, 60)).grid == Grid((2, 3), (5, 4, 3, 2, 1, 0))
    assert group.subgroup([0, 1], Span(0, 60)).grid is None
    np.testing.assert_array_equal(Grid.whole((2, 3)).lines(0), [[0, 3], [1, 4], [2, 5]])


def test_a_grid_needs_one_rank_in_every_cell():
    with pytest.raises(ValueError, match="one rank in each of its 6 cells"):
        Grid((2, 3), (0, 1, 2, 3, 4, 4))
