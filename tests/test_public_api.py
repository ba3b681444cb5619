"""The public API: what ``from simulator import ...`` offers, and a scenario from plain data
end to end."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import simulator
from simulator import (
    GpuSpec,
    InputError,
    Scenario,
    TopologySpec,
    load_scenario,
    run_point,
    scenario_from_dict,
    simulate,
)
from simulator.settings import RunSettings
from tests.conftest import REPO

SWITCH = {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s", "latency": "500ns"}


def test_exported_names_are_pinned():
    assert simulator.__all__ == [
        "REGISTRY", "RESULT_COLUMNS", "Algorithm", "AlgorithmError", "Collective", "GpuSpec",
        "Imports", "InputError", "Problem", "ReduceOp", "Result", "Scenario", "SimulatorError",
        "TopologySpec", "Watch", "__version__", "algorithm_names", "best_per_size", "format_table",
        "get_algorithm", "load_scenario", "nccl_choice_per_size", "run_point",
        "scenario_from_dict", "simulate", "train"]
    for name in simulator.__all__:
        assert getattr(simulator, name) is not None
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        simulator.nope  # noqa: B018


def test_authoring_api_is_one_module():
    import simulator.algorithms as api

    for name in ("Algorithm", "Comm", "Span", "COPY", "REDUCE", "CostInputs", "ExactOn",
                 "PIPELINE_BYTES", "send_pieces", "recv_pieces", "swap", "REGISTRY"):
        assert name in api.__all__ and hasattr(api, name)


def test_a_dict_scenario_runs_end_to_end():
    frame = simulate({"topology": SWITCH, "algorithms": ["ring", "direct"], "sizes": [4096, "1MiB"]})
    assert list(frame.algorithm) == ["ring", "ring", "direct", "direct"]
    assert frame.verified.all()
    # ring on a switch, by hand: 2(p-1) steps of alpha + c·beta, c = 4096/4 bytes, alpha = 2 hops
    ring_4k = frame.iloc[0]
    assert ring_4k.sim_time_s == pytest.approx(6 * (1e-6 + 1024 / 25e9), rel=1e-12)
    assert ring_4k.model_time_s == pytest.approx(ring_4k.sim_time_s, rel=1e-12)


def test_path_mapping_and_scenario_give_the_same_frame(tmp_path):
    text = "topology: {kind: ring, ranks: 3, bandwidth: 1GB/s, latency: 1us}\nsizes: [3KB]\n"
    path = tmp_path / "s.yaml"
    path.write_text(text)
    mapping = {"topology": {"kind": "ring", "ranks": 3, "bandwidth": "1GB/s", "latency": "1us"},
               "sizes": ["3KB"], "name": "s"}
    by_path, by_mapping = simulate(path), simulate(mapping)
    by_scenario = simulate(load_scenario(path))
    assert by_path.equals(by_mapping) and by_path.equals(by_scenario)
    assert load_scenario(mapping) == scenario_from_dict(mapping)


def test_dict_errors_are_the_files_errors():
    with pytest.raises(InputError) as error:
        scenario_from_dict({"topology": {**SWITCH, "bandwidth": 25}, "sizes": ["1KiB"],
                            "algoritms": ["ring"]}, source="notebook")
    assert [str(p) for p in error.value.problems] == [
        "notebook: algoritms: unknown key; did you mean 'algorithms'?",
        "notebook: topology.bandwidth: expected a bandwidth like '25GB/s', got 25"]


def test_a_scenario_cannot_exist_unvalidated():
    good = scenario_from_dict({"topology": SWITCH, "sizes": ["4KiB"]})
    with pytest.raises(InputError, match=r"^<code>: topology.ranks: expected a whole number ≥ 1, "
                                         r"got 0$"):
        dataclasses.replace(good, topology=TopologySpec("switch", {**good.topology.params,
                                                                   "ranks": 0}))
    with pytest.raises(InputError, match=r"^<dict>: sizes\[0\]: expected a positive multiple of "
                                         r"the float32 element size \(4 bytes\), got 1001$"):
        dataclasses.replace(good, sizes=(1001,))
    with pytest.raises(InputError, match=r"^test: algorithms\[0\]: expected an algorithm for "
                                         r"allreduce \(.*\), got 'rign'; did you mean 'ring'\?$"):
        Scenario(name="x", topology=good.topology, sizes=(4096,), algorithms=("rign",),
                 source="test")
    with pytest.raises(InputError, match=r"^<code>: topology: expected at most 65536 GPUs for "
                                         r"kind switch, got 70000$"):
        TopologySpec("switch", {"ranks": 70000, "bandwidth": 1e9, "latency": 0.0})


def test_run_point_needs_nothing_but_the_scenario():
    scenario = Scenario(name="one", topology=TopologySpec("fully_connected", {
        "ranks": 3, "bandwidth": 1e9, "latency": 1e-6}), sizes=(3000,), dtype=np.dtype("int32"))
    result = run_point(scenario, "direct", 3000)
    assert result.verified is True
    # direct on fully_connected: 2·(alpha + c·beta), c = 1000 bytes, alpha = 1 us, beta = 1 ns/B
    assert result.sim_time_s == pytest.approx(2 * (1e-6 + 1000 / 1e9), rel=1e-12)


def test_presets_are_found_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scenario = scenario_from_dict({"topology": {"preset": "dgx_h100"}, "sizes": ["1MiB"]})
    assert scenario.topology.label == "dgx_h100" and scenario.topology.ranks == 8
    assert (REPO / "topologies" / "dgx_h100.yaml").is_file()


@pytest.mark.parametrize("change, message", [
    ({"collective": "allreduce"}, None),  # names are accepted for enums ...
    ({"reduce_op": "max", "dtype": "int32", "output": "out"}, None),  # ... dtype and output
    ({"collective": "gather"}, "collective: expected a Collective or one of allreduce, "
                               "reduce_scatter, allgather, broadcast, reduce, alltoall, sendrecv, got "
                               "'gather'"),
    ({"reduce_op": "mean"}, "reduce_op: expected a ReduceOp or one of sum, prod, max, min, avg, "
                            "got 'mean'"),
    ({"dtype": "float8"}, "dtype: expected a dtype (float16, bfloat16, float32, float64, int32, "
                          "int64), got 'float8'; did you mean 'float64'?"),
    ({"sizes": (4096.0,)}, "sizes: expected a sequence of whole numbers of bytes, got (4096.0,)"),
    ({"piece_bytes": 1.5}, "piece_size: expected a whole number of bytes, got 1.5"),
    ({"run": RunSettings(verify="no")}, "verify: expected a bool, got 'no'"),
    ({"run": RunSettings(engine="fast")}, "engine: expected an Engine or one of auto, simpy, vector, "
                                          "got 'fast'"),
    ({"run": RunSettings(engine="simpy")}, None),  # an engine by its name too
    ({"gpu": {"reduce_bandwidth": 1e12}},
     "gpu: expected a GpuSpec, got {'reduce_bandwidth': 1000000000000.0}"),
    ({"gpu": GpuSpec("1GB/s")}, "gpu.reduce_bandwidth: expected a positive bandwidth in bytes/s, "
                                "got '1GB/s'"),
    ({"topology": {"kind": "switch"}}, "topology: expected a TopologySpec, got {'kind': 'switch'}"),
    ({"output": 5}, "output: expected a Path or None, got 5"),
])
def test_every_field_is_checked_however_the_scenario_is_built(change, message):
    good = scenario_from_dict({"topology": SWITCH, "sizes": ["4KiB"]}, source="api")
    if message is None:
        changed = dataclasses.replace(good, **change)
        assert simulate(changed).verified.all()
    else:
        with pytest.raises(InputError) as error:
            dataclasses.replace(good, **change)
        assert [str(p) for p in error.value.problems] == [f"api: {message}"]


def test_one_algorithm_name_is_a_list_of_one_and_numpy_integers_are_sizes():
    good = scenario_from_dict({"topology": SWITCH, "sizes": ["4KiB"]})
    changed = dataclasses.replace(good, algorithms="ring", sizes=(np.int64(4096),))
    assert changed.algorithms == ("ring",) and type(changed.sizes[0]) is int


def test_an_inner_algorithm_must_be_the_registered_one():
    from simulator.algorithms.hierarchical import HierarchicalOptions
    from simulator.algorithms.ring import RingAllgather

    with pytest.raises(InputError) as error:
        scenario_from_dict({"topology": SWITCH, "sizes": ["4KiB"]}).__class__(
            name="x", topology=TopologySpec("switch", {"ranks": 2, "bandwidth": 1e9, "latency": 0}),
            sizes=(8,), algorithm_options={"hierarchical": HierarchicalOptions(RingAllgather())})
    assert [str(p) for p in error.value.problems] == [
        "<code>: algorithm_options.hierarchical.inter: expected an inter-host allreduce (ring, "
        "direct, halving_doubling, swing, bine, tree), got the allgather 'ring'"]


def test_the_default_output_follows_the_name():
    good = scenario_from_dict({"topology": SWITCH, "sizes": ["4KiB"], "name": "a"})
    assert dataclasses.replace(good, name="b").output_dir == Path("results/b")


def test_run_point_refuses_an_algorithm_the_topology_cannot_run():
    scenario = scenario_from_dict({"topology": SWITCH, "sizes": ["4KiB"]}, source="api")
    with pytest.raises(InputError, match=r"^api: algorithm: 'hierarchical' cannot run on topology "
                                         r"switch: it needs GPUs on two or more hosts"):
        run_point(scenario, "hierarchical", 4096)


def test_bad_seed_and_proxy_from_python_are_input_errors():
    with pytest.raises(InputError) as error:
        simulate({"topology": SWITCH, "sizes": ["4KiB"]}, seed=-1, proxy_elements=0)
    assert [str(p) for p in error.value.problems] == [
        "<dict>: seed: expected a whole number ≥ 0, got -1",
        "<dict>: proxy_elements: expected a whole number ≥ 1, got 0"]
