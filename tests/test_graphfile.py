"""Custom fabrics from a file (``kind: graph``): YAML edge lists and GraphML, each validation
problem with its exact message, and runs that match a builder's."""

import textwrap

import pytest

from simulator.cli import main
from simulator.errors import InputError
from simulator.runner import simulate
from simulator.scenario.parse import load_scenario
from tests.conftest import switch_graphml

FABRIC = """\
nodes:
  - {name: gpu0, kind: gpu, rank: 0}
  - {name: gpu1, kind: gpu, rank: 1}
  - {name: gpu2, kind: gpu, rank: 2}
  - {name: gpu3, kind: gpu, rank: 3}
  - {name: sw, kind: switch}
edges:
  - {from: gpu0, to: sw, bandwidth: 25GB/s, latency: 1us}
  - {from: gpu1, to: sw, bandwidth: 25GB/s, latency: 1us}
  - {from: gpu2, to: sw, bandwidth: 25GB/s, latency: 1us}
  - {from: gpu3, to: sw, bandwidth: 25GB/s, latency: 1us}
"""


def scenario(tmp_path, fabric_text, name="fabric.yaml"):
    (tmp_path / name).write_text(fabric_text)
    path = tmp_path / "scenario.yaml"
    path.write_text(f"topology: {{kind: graph, file: {name}}}\nalgorithms: [ring, direct]\n"
                    f"sizes: [1MiB]\noutput: {tmp_path / 'out'}\n")
    return path


def times(frame):
    return frame.set_index("algorithm")["sim_time_s"].to_dict()


def test_a_yaml_edge_list_runs_as_the_switch_it_describes(tmp_path):
    custom = simulate(load_scenario(scenario(tmp_path, FABRIC)))
    switch = simulate({"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s",
                                    "latency": "1us"}, "algorithms": ["ring", "direct"],
                       "sizes": ["1MiB"]})
    assert times(custom) == times(switch)
    assert custom["verified"].all()


def test_a_graphml_file_runs_too(tmp_path):
    switch_graphml(tmp_path / "fabric.graphml")  # undirected: every edge a full-duplex cable
    path = tmp_path / "scenario.yaml"
    path.write_text("topology: {kind: graph, file: fabric.graphml}\nalgorithms: [ring]\n"
                    "sizes: [1MiB]\n")
    frame = simulate(load_scenario(path))
    switch = simulate({"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s",
                                    "latency": "1us"}, "algorithms": ["ring"], "sizes": ["1MiB"]})
    assert times(frame) == times(switch)


def test_a_one_way_edge_is_one_direction(tmp_path):
    text = textwrap.dedent("""\
        nodes: [{name: a, kind: gpu, rank: 0}, {name: b, kind: gpu, rank: 1}]
        edges:
          - {from: a, to: b, bandwidth: 10GB/s, latency: 1us, duplex: false}
          - {from: b, to: a, bandwidth: 5GB/s, latency: 2us, duplex: false}
        """)
    spec = load_scenario(scenario(tmp_path, text)).topology
    g = spec.build()
    assert g.edges["a", "b"]["bandwidth"] == 10e9 and g.edges["b", "a"]["latency"] == 2e-6


BAD = [
    (FABRIC.replace("bandwidth: 25GB/s, latency: 1us}\n  - {from: gpu1",
                    "latency: 1us}\n  - {from: gpu1"),
     "fabric.yaml: edges[0].bandwidth: required but missing"),
    (FABRIC.replace("{from: gpu2, to: sw, bandwidth: 25GB/s", "{from: gpu2, to: sw, bandwidth: 0"),
     "fabric.yaml: edges[2].bandwidth: expected a positive bandwidth, got 0"),
    (FABRIC.replace("{name: gpu3, kind: gpu, rank: 3}", "{name: gpu3, kind: gpu, rank: 2}"),
     "fabric.yaml: nodes: expected each rank once, got rank 2 on gpu2 and gpu3"),
    (FABRIC.replace("{name: sw, kind: switch}", "{name: sw, kind: switch, rank: 4}"),
     "fabric.yaml: nodes[4].rank: expected no rank on a switch (only GPUs have ranks)"),
    (FABRIC.replace("  - {from: gpu3, to: sw, bandwidth: 25GB/s, latency: 1us}\n", ""),
     "fabric.yaml: edges: expected every GPU to reach every other; rank 3 (gpu3) cannot be "
     "reached from rank 0 (gpu0)"),
    (FABRIC.replace("{from: gpu1, to: sw,", "{from: gpu1, to: switch9,"),
     "fabric.yaml: edges[1].to: expected a node named in nodes, got 'switch9'"),
    (FABRIC.replace("{name: gpu1, kind: gpu, rank: 1}", "{name: gpu1, kind: gpu, rank: 5}"),
     "fabric.yaml: nodes: expected GPU ranks 0..3, got [0, 2, 3, 5]"),
    (FABRIC.replace("{name: sw, kind: switch}", "{name: sw, kind: router}"),
     "fabric.yaml: nodes[4].kind: expected one of gpu, nic, switch, got 'router'"),
    (FABRIC.replace("latency: 1us}\n  - {from: gpu1", "latency: 1us, speed: 3}\n  - {from: gpu1"),
     "fabric.yaml: edges[0].speed: unknown key; expected bandwidth, latency, link"),
]


@pytest.mark.parametrize("text, message", BAD, ids=range(len(BAD)))
def test_a_bad_fabric_is_one_line_naming_the_file_and_field(tmp_path, capsys, text, message):
    path = scenario(tmp_path, text)
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"{path}: topology.file: {tmp_path / message}"
    with pytest.raises(InputError):
        load_scenario(path)
    assert not (tmp_path / "out").exists()


def test_a_missing_fabric_file_is_named(tmp_path, capsys):
    path = tmp_path / "scenario.yaml"
    path.write_text("topology: {kind: graph, file: nowhere.yaml}\nsizes: [1MiB]\n")
    assert main(["run", str(path)]) == 2
    assert capsys.readouterr().err.strip() == (f"{path}: topology.file: {tmp_path / 'nowhere.yaml'}: "
                                               "no such file")


def test_custom_graph_routes_are_searched_lazily_and_cached(tmp_path):
    from simulator.model.machine import Machine

    machine = Machine.of(load_scenario(scenario(tmp_path, FABRIC)).topology.build())
    assert machine.routing._cache == {}
    assert machine.route(0, 3).nodes == ("gpu0", "sw", "gpu3")
    assert list(machine.routing._cache) == [("gpu0", "gpu3")]
