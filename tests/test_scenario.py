"""Scenario files: what loads, and the one-line message for each kind of bad input."""

from pathlib import Path

import numpy as np
import pytest

from simulator.algorithms import Collective, algorithm_names
from simulator.cli import main
from simulator.errors import InputError
from simulator.model.reduction import ReduceOp
from simulator.scenario import load_scenario

GOOD = """\
topology: {kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 500ns}
algorithms: [ring]
sizes: [1KiB, 4KB]
"""


def write(tmp_path: Path, text: str, name: str = "bad.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_defaults_and_units_resolved(tmp_path):
    scenario = load_scenario(write(tmp_path, GOOD, "good.yaml"))
    assert scenario.name == "good"
    assert scenario.topology.params == {"ranks": 4, "bandwidth": 25e9, "latency": 5e-7}
    assert scenario.sizes == (1024, 4000)
    assert (scenario.collective, scenario.dtype, scenario.reduce_op) == (
        Collective.ALLREDUCE, np.dtype("float32"), ReduceOp.SUM)
    assert scenario.run.verify is True
    assert scenario.output is None and scenario.output_dir == Path("results/good")
    assert scenario.gpu.reduce_bandwidth_Bps is None


def test_size_range_and_preset_overrides(tmp_path):
    text = ("topology: {preset: dgx_h100, nodes: 2}\nsizes: {from: 1KiB, to: 1MiB, factor: 4}\n"
            "algorithms: all\ngpu: {reduce_bandwidth: 1TB/s, launch_latency: 2us}\n")
    scenario = load_scenario(write(tmp_path, text, "x.yaml"))
    assert scenario.sizes == (1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20)
    params = dict(scenario.topology.params)
    assert params["nodes"] == 2 and params["nvlink_bandwidth"] == 450e9
    assert scenario.topology.label == "dgx_h100[nodes=2]"  # the preset, and what was changed
    assert scenario.algorithms is None
    assert (scenario.gpu.reduce_bandwidth_Bps, scenario.gpu.launch_latency_s) == (1e12, 2e-6)


TOPO = "topology: {kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 500ns}\n"

BAD = [
    (TOPO + "algoritms: [ring]\nsizes: [1KiB]\n",
     "algoritms: unknown key; did you mean 'algorithms'?"),
    ("topology: {kind: switch, ranks: 4, bandwidth: 25, latency: 500ns}\nsizes: [1KiB]\n",
     "topology.bandwidth: expected a bandwidth like '25GB/s', got 25"),
    (TOPO + "algorithms: [rign]\nsizes: [1KiB]\n",
     "algorithms[0]: expected an algorithm for allreduce ({allreduce}), got 'rign'; "
     "did you mean 'ring'?"),
    (TOPO, "sizes: required but missing"),
    (TOPO + "sizes: [1KiB]\ndtype: float8\n",
     "dtype: expected a dtype (float16, bfloat16, float32, float64, int32, int64), got 'float8'; "
     "did you mean 'float64'?"),
    (TOPO + "sizes: [1KiB]\nop: mean\n",
     "op: expected an op (sum, prod, max, min, avg), got 'mean'"),
    (TOPO + "sizes: [1001]\n",
     "sizes[0]: expected a positive multiple of the float32 element size (4 bytes), got 1001"),
    ("topology: {preset: dgx_z100}\nsizes: [1KiB]\n",
     "topology.preset: no preset 'dgx_z100'; expected one of dgx1_v100, dgx_a100, dgx_a100_superpod, "
     "dgx_b200, dgx_b200_superpod, dgx_h100, dgx_h100_superpod, gb200_nvl72, gb300_nvl72, "
     "mi300x, mi300x_cluster, mi325x, p4d or a .yaml file"),
    ("topology: {preset: nothere.yaml}\nsizes: [1KiB]\n",
     "topology.preset: no such preset file 'nothere.yaml'"),
    ("topology: {kind: switch, ranks: 0, bandwidth: 25GB/s, latency: 500ns}\nsizes: [1KiB]\n",
     "topology.ranks: expected a whole number ≥ 1, got 0"),
    (TOPO + "sizes: [1KiB\n", "line 3: not valid YAML: expected ',' or ']', but got '<stream end>'"),
    (TOPO + "sizes: [1KiB]\nsizes: [2KiB]\n", "line 3: not valid YAML: duplicate key 'sizes'"),
    ("- just\n- a list\n", "expected a mapping of keys to values, got a list"),
    ("topology: {kind: switch, preset: dgx_h100}\nsizes: [1KiB]\n",
     "topology: expected one of 'preset: NAME', 'kind: BUILDER' or 'nccl_xml: FILE', got preset "
     "and kind"),
    (TOPO + "sizes: {from: 1MiB, to: 1KiB}\n",
     "sizes: expected 0 < from ≤ to, got from=1048576 to=1024 bytes"),
    (TOPO + "sizes: [1KiB]\ngpu: {reduce_bw: 1TB/s}\n",
     "gpu.reduce_bw: unknown key; did you mean 'reduce_bandwidth'?"),
    (TOPO + "sizes: [1KiB]\nverify: yes please\n", "verify: expected true or false, got 'yes please'"),
    ("topology: {kind: ring, ranks: 4, bandwidth: 25GB/s, latency: 5}\nsizes: [1KiB]\n",
     "topology.latency: expected a time like '500ns', '1us', '2ms' or '1s', got 5"),
    (TOPO + "sizes: [1KiB]\ncollective: gather\n",
     "collective: expected a collective (allreduce, reduce_scatter, allgather, broadcast, reduce, "
     "alltoall, sendrecv), got 'gather'; did you mean 'allgather'?"),
    ("topology: {kind: moebius, ranks: 4}\nsizes: [1KiB]\n",
     "topology.kind: expected a topology kind (switch, ring, fully_connected, dgx, dgx1, torus, "
     "mesh, leaf_spine, fat_tree, dragonfly, cluster, xgmi, graph, nccl_xml), got 'moebius'"),
    ("topology: {kind: switch, ranks: 4, bandwidth: 25GB/s}\nsizes: [1KiB]\n",
     "topology.latency: required but missing"),
    ("topology: {preset: dgx_h100, nvlink_bandwith: 1GB/s}\nsizes: [1KiB]\n",
     "topology.nvlink_bandwith: unknown key; did you mean 'nvlink_bandwidth'?"),
    (TOPO + "sizes: [1KiB]\ndtype: bfloat\n",
     "dtype: expected a dtype (float16, bfloat16, float32, float64, int32, int64), got 'bfloat'; "
     "did you mean 'bfloat16'?"),
    (TOPO + "sizes: {from: 1KiB, to: 1MiB, factor: 1}\n",
     "sizes.factor: expected a whole number ≥ 2, got 1"),
    ("", "expected a mapping of keys to values, got empty"),
]


@pytest.mark.parametrize("text, message", BAD, ids=[m.split(":")[0] + str(i)
                                                   for i, (_, m) in enumerate(BAD)])
def test_bad_scenario_exits_2_with_one_line(tmp_path, capsys, monkeypatch, text, message):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, text)
    assert main(["run", str(path)]) == 2
    out, err = capsys.readouterr()
    names = ", ".join(algorithm_names(Collective.ALLREDUCE))
    assert err == f"{path}: {message.format(allreduce=names)}\n"
    assert out == ""
    assert not (tmp_path / "results").exists()  # nothing written on bad input


def test_every_problem_is_reported_at_once(tmp_path):
    path = write(tmp_path, TOPO + "sizes: [1KiB, 3]\nop: mean\ndtype: float8\n")
    with pytest.raises(InputError) as error:
        load_scenario(path)
    assert [p.field for p in error.value.problems] == ["dtype", "op", "sizes[1]"]


def test_missing_file(tmp_path, capsys):
    assert main(["run", str(tmp_path / "nope.yaml")]) == 2
    assert capsys.readouterr().err == f"{tmp_path / 'nope.yaml'}: no such file\n"


def test_output_that_is_a_file_is_refused_before_running(tmp_path, capsys):
    (tmp_path / "taken").write_text("keep me")
    path = write(tmp_path, GOOD + f"output: {tmp_path / 'taken'}\n")
    assert main(["run", str(path)]) == 2
    assert capsys.readouterr().err == (f"{path}: output: expected a directory, but "
                                       f"{tmp_path / 'taken'} is a file\n")
    assert (tmp_path / "taken").read_text() == "keep me"


def test_algorithm_that_cannot_run_on_the_topology_exits_2(tmp_path, capsys):
    path = write(tmp_path, "topology: {preset: dgx_a100}\nalgorithms: [ring, nvls]\n"
                           f"sizes: [1KiB]\noutput: {tmp_path / 'out'}\n")
    assert main(["run", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"{path}: algorithms[1]: 'nvls' cannot run on topology dgx_a100: it needs one switch "
        "with in-switch reduction (reduction: true) cabled to every GPU, such as the NVSwitch of "
        "a single dgx_h100 node\n")
    assert not (tmp_path / "out").exists()


def test_algorithm_options_and_piece_size_are_validated(tmp_path):
    path = write(tmp_path, TOPO + "sizes: [1KiB]\nalgorithm_options: {hierarchical: {inter: "
                                  "binomial_tree}, ring: {x: 1}}\nchunk_size: 2\n")
    with pytest.raises(InputError) as error:
        load_scenario(path)
    assert [str(p) for p in error.value.problems] == [
        f"{path}: chunk_size: expected at least one float32 element (4 bytes), got 2",
        f"{path}: algorithm_options.hierarchical.inter: expected an inter-host allreduce (ring, "
        "direct, halving_doubling, swing, bine, tree), got 'binomial_tree'",
        f"{path}: algorithm_options.ring: ring has no options",
    ]


def test_removed_and_aliased_keys_say_what_to_write(tmp_path):
    path = write(tmp_path, TOPO + "sizes: [1KiB]\ninter_algorithm: tree\npiece_size: 4KiB\n"
                                  "chunk_size: 4KiB\n")
    with pytest.raises(InputError) as error:
        load_scenario(path)
    assert [str(p) for p in error.value.problems] == [
        f"{path}: inter_algorithm: unknown key; it moved to algorithm_options: "
        "{hierarchical: {inter: NAME}}",
        f"{path}: chunk_size: expected piece_size or its alias chunk_size, not both",
    ]


def test_duplicate_sizes_and_algorithms_are_refused(tmp_path):
    path = write(tmp_path, TOPO + "sizes: [1KiB, 4KiB, 1024]\nalgorithms: [ring, tree, ring]\n")
    with pytest.raises(InputError) as error:
        load_scenario(path)
    assert [str(p) for p in error.value.problems] == [
        f"{path}: algorithms: expected each algorithm once, got 'ring' twice",
        f"{path}: sizes: expected each size once, got 1024 twice",
    ]


@pytest.mark.parametrize("text, message", [
    ("? [a, b]\n: 1\n", "line 1: not valid YAML: keys must be plain names, got ['a', 'b']"),
    (TOPO + "sizes: [1TiB, 2TiB]\n", "sizes[1]: expected at most 1TiB per rank, got 2199023255552 bytes"),
    ("topology: {kind: switch, ranks: 70000, bandwidth: 25GB/s, latency: 1us}\nsizes: [1KiB]\n",
     "topology: expected at most 65536 GPUs for kind switch, got 70000"),
    ("topology: {kind: switch, ranks: 4, bandwidth: 1e400GB/s, latency: 1us}\nsizes: [1KiB]\n",
     "topology.bandwidth: expected a bandwidth like '25GB/s', got '1e400GB/s' (too large)"),
    (TOPO + "sizes: [1GiB]\nchunk_size: 4\n",
     "chunk_size: expected at most 1048576 pieces per buffer, got 268435456 (1073741824 / 4 bytes); "
     "use a larger chunk_size"),
])
def test_absurd_input_is_refused_before_running(tmp_path, capsys, text, message):
    path = write(tmp_path, text)
    assert main(["run", str(path)]) == 2
    assert capsys.readouterr().err == f"{path}: {message}\n"


def test_non_utf8_file_is_refused(tmp_path, capsys):
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert main(["run", str(path)]) == 2
    assert capsys.readouterr().err == f"{path}: expected UTF-8 text (is this a YAML file?)\n"


def test_output_under_a_file_is_refused_before_running(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    path = write(tmp_path, GOOD + f"output: {tmp_path / 'afile' / 'sub'}\n")
    assert main(["run", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # nothing simulated, nothing printed
    assert err == f"{path}: output: expected a directory path, but {tmp_path / 'afile'} is a file\n"


@pytest.mark.parametrize("text, args, message", [
    ("topology: {kind: switch, ranks: 1024, bandwidth: 25GB/s, latency: 1us}\nsizes: [4MiB]\n"
     "piece_size: 4\nalgorithms: [ring]\n", [],
     "sizes: 4194304 bytes on 1024 ranks needs 4096 MiB of data to verify, more than 2048 MiB; "
     "use a larger piece_size (the proxy keeps two elements per pipeline piece), or verify: false "
     "to run for the time only"),
    ("topology: {kind: switch, ranks: 8192, bandwidth: 25GB/s, latency: 1us}\nsizes: [1GiB]\n"
     "dtype: float64\nalgorithms: [ring]\n", [],
     "sizes: 1073741824 bytes on 8192 ranks needs 4096 MiB of data to verify, more than 2048 MiB; "
     "use fewer ranks (the proxy keeps eight elements per chunk), or verify: false to run for the "
     "time only"),
    (TOPO + "sizes: [1GiB]\nalgorithms: [ring]\n", ["--proxy-elements", "200000000"],
     "sizes: 1073741824 bytes on 4 ranks needs 3051 MiB of data to verify, more than 2048 MiB; "
     "use a smaller --proxy-elements, or verify: false to run for the time only"),
])
def test_data_beyond_the_memory_budget_says_what_would_help(tmp_path, capsys, text, args, message):
    path = write(tmp_path, text + f"output: {tmp_path / 'out'}\n")
    assert main(["run", str(path), *args]) == 2
    assert capsys.readouterr().err == f"{path}: {message}\n"
    assert not (tmp_path / "out").exists()
