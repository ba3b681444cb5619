"""NCCL's topology file as a scenario's topology (issue 24, item 1): the three dumps written by
hand in tests/data/nccl/ (8 x H100, DGX A100, a PCIe-only 4-GPU server) give the Machine a
preset or the file's own tree gives; bad files get one line naming the file, the element and
its line, exit 2, nothing written."""

from __future__ import annotations

import re
from pathlib import Path

import networkx as nx
import pytest

from simulator.cli import main
from simulator.errors import InputError
from simulator.model.execution import Execution
from simulator.model.machine import Machine
from simulator.model.ncclhost import HostShape
from simulator.model.ncclxml import read_topology
from simulator.runner import simulate
from simulator.scenario.parse import load_preset, scenario_from_dict
from simulator.scenario.rules import default_execution
from tests.conftest import REPO

DATA = REPO / "tests" / "data" / "nccl"
H100, A100, PCIE = DATA / "dgx_h100.xml", DATA / "dgx_a100.xml", DATA / "pcie_4gpu.xml"


def topology(file: Path | str, **given: object):
    """The topology of a scenario naming ``file`` with ``given`` (nodes, fabric)."""
    return scenario_from_dict({"topology": {"nccl_xml": str(file), **given},
                               "sizes": ["1MiB"]}).topology


def same_graph(a: nx.DiGraph, b: nx.DiGraph) -> None:
    assert dict(a.nodes(data=True)) == dict(b.nodes(data=True))
    assert {(u, v): d for u, v, d in a.edges(data=True)} == \
        {(u, v): d for u, v, d in b.edges(data=True)}
    assert a.graph == b.graph


def test_the_h100_dump_is_the_dgx_h100_preset():
    # 18 NVLinks x 25 GB/s, PCIe Gen5 x16 63 GB/s, 400000 Mb/s = 50 GB/s, sm 90 with NVSwitches
    # (NVLS, 25 us), InfiniBand, Intel: every parameter of topologies/dgx_h100.yaml, so the graph
    # is the preset's, node for node and link for link
    spec, preset = topology(H100), load_preset("dgx_h100")
    assert (spec.kind, spec.label) == ("dgx", "dgx_h100.xml")
    assert dict(spec.params) == dict(preset.params)
    same_graph(spec.build(), preset.build())


def test_the_h100_dump_simulates_as_the_preset():
    runs = [simulate({"topology": topology_, "algorithms": ["ring", "nvls"], "sizes": ["1MiB"]})
            for topology_ in ({"nccl_xml": str(H100)}, {"preset": "dgx_h100"})]
    columns = ["algorithm", "size_bytes", "sim_time_s", "model_time_s", "verified"]
    assert runs[0][columns].to_dict("records") == runs[1][columns].to_dict("records")
    assert list(runs[0]["algorithm"]) == ["ring", "nvls"] and runs[0]["verified"].all()


def test_two_hosts_of_the_h100_dump_are_two_nodes_of_the_preset():
    spec = topology(H100, nodes=2)
    assert spec.label == "dgx_h100.xml[nodes=2]"
    assert dict(spec.params) == {**load_preset("dgx_h100").params, "nodes": 2}


def test_the_h100_dump_on_a_clos_fabric_is_the_superpod_preset():
    # the SuperPOD's unit of 32 nodes and 4 spines: the cluster builder with the file's hosts
    spec = topology(H100, nodes=32, fabric={"kind": "clos", "nodes_per_unit": 32, "spines": 4})
    assert spec.kind == "cluster"
    assert dict(spec.params) == dict(load_preset("dgx_h100_superpod").params)


def test_a_dump_of_another_host_of_a_job_keeps_its_ranks_in_order(tmp_path):
    # a dump of the second host of a 16-GPU job holds ranks 8-15: they are its GPUs 0-7
    text = H100.read_text()
    for rank in reversed(range(8)):
        text = text.replace(f'rank="{rank}"', f'rank="{rank + 8}"')
    (tmp_path / "node1.xml").write_text(text)
    assert dict(topology(tmp_path / "node1.xml").params) == dict(load_preset("dgx_h100").params)


def test_the_a100_dump_is_the_dgx_a100_preset():
    # 12 NVLinks x 25 GB/s, PCIe Gen4 31.5 GB/s through two levels of switches, HDR 25 GB/s,
    # sm 80 (no in-switch reduction), AMD: dgx_a100.yaml
    spec = topology(A100)
    assert spec.kind == "dgx"
    assert dict(spec.params) == dict(load_preset("dgx_a100").params)


def test_the_pcie_server_is_drawn_from_its_own_tree():
    spec = topology(PCIE, nodes=2)
    assert (spec.kind, spec.label) == ("nccl_xml", "pcie_4gpu.xml[nodes=2]")
    assert default_execution(spec) is Execution.IDEAL  # no NVLink: NCCL's model is not stated
    graph = spec.build()
    assert sorted(graph.nodes) == sorted(
        ["leaf"] + [f"n{h}.{node}" for h in (0, 1) for node in (
            "cpu0", "cpu1", "pcie0", "pcie1", "gpu0", "gpu1", "gpu2", "gpu3", "nic0", "nic1")])
    link = graph.edges
    assert link["n0.gpu0", "n0.pcie0"] == {"bandwidth": 31.5e9, "latency": 250e-9, "link": "pcie"}
    assert link["n0.pcie0", "n0.cpu0"] == {"bandwidth": 31.5e9, "latency": 250e-9, "link": "pcie"}
    # Ice Lake (family 6, model 106): NCCL's SKL_QPI_BW, 10 GB/s between the two sockets
    assert link["n0.cpu0", "n0.cpu1"] == {"bandwidth": 10e9, "latency": 250e-9, "link": "pcie"}
    assert link["n0.nic1", "leaf"] == {"bandwidth": 12.5e9, "latency": 850e-9, "link": "net"}
    assert graph.graph["transport"] == "roce" and graph.graph["nvlinks"] == 0
    assert [graph.nodes[f"n1.gpu{g}"]["rank"] for g in range(4)] == [4, 5, 6, 7]
    assert [graph.nodes[f"n0.gpu{g}"]["nic"] for g in range(4)] == [
        "n0.nic0", "n0.nic0", "n0.nic1", "n0.nic1"]
    machine = Machine.of(graph)
    assert machine.route(0, 1).nodes == ("n0.gpu0", "n0.pcie0", "n0.gpu1")
    assert machine.route(1, 2).nodes == ("n0.gpu1", "n0.pcie0", "n0.cpu0", "n0.cpu1",
                                         "n0.pcie1", "n0.gpu2")
    assert machine.route(3, 4).nodes == ("n0.gpu3", "n0.pcie1", "n0.nic1", "leaf", "n1.nic0",
                                         "n1.pcie0", "n1.gpu0")


def test_an_nvswitch_host_with_shared_nics_is_drawn_from_its_tree(tmp_path):
    # the H100 dump without the NICs of GPUs 1, 3, 5 and 7: no builder draws it, the file's tree
    # does, its NVSwitch links summed (5 + 4 + 4 + 5 links = 450 GB/s), NCCL's model stated
    text = H100.read_text()
    for dev in (1, 3, 5, 7):
        text = re.sub(rf'\n *<pci [^>]*0x020700[^>]*>\s*<nic>\s*<net name="mlx5_{dev}".*?</pci>',
                      "", text, flags=re.DOTALL)
    (tmp_path / "four.xml").write_text(text)
    spec = topology(tmp_path / "four.xml", nodes=2)
    assert spec.kind == "nccl_xml" and default_execution(spec) is Execution.NCCL
    graph = spec.build()
    assert graph.edges["n0.gpu1", "n0.nvswitch"]["bandwidth"] == 450e9
    assert graph.nodes["n0.nvswitch"] == {"kind": "switch", "tier": 0, "reduction": True,
                                          "reduction_latency": 25e-6}
    # GPU 1's switch has no NIC: the two NICs two switches away are equally near, and GPU 1
    # takes the one no GPU took yet (GPU 2's), GPU 3 then GPU 0's
    assert [graph.nodes[f"n0.gpu{g}"]["nic"] for g in range(4)] == [
        "n0.nic0", "n0.nic1", "n0.nic1", "n0.nic0"]
    machine = Machine.of(graph)
    assert machine.route(1, 2).nodes == ("n0.gpu1", "n0.nvswitch", "n0.gpu2")
    assert machine.route(1, 9).nodes == ("n0.gpu1", "n0.pcie1", "n0.cpu0", "n0.pcie2",
                                         "n0.nic1", "leaf", "n1.nic1", "n1.pcie2", "n1.cpu0",
                                         "n1.pcie1", "n1.gpu1")
    with pytest.raises(InputError) as error:
        topology(tmp_path / "four.xml", fabric={"kind": "clos"})
    assert str(error.value).endswith("four.xml is not one (it has 4 NIC ports for 8 GPUs, not "
                                     "one each)")


def test_gpus_cabled_to_each_other_take_their_nvlink(tmp_path):
    # two V100s (sm 70) with two NVLink 2 links between them, each GPU listing the other:
    # one cable each way at 2 x 25 GB/s, a whole NVLink step (0.6 us), the route direct
    (tmp_path / "pair.xml").write_text(pair_xml())
    graph = topology(tmp_path / "pair.xml").build()
    assert graph.edges["n0.gpu0", "n0.gpu1"] == {"bandwidth": 50e9, "latency": 600e-9,
                                                 "link": "nvlink"}
    assert Machine.of(graph).route(1, 0).nodes == ("n0.gpu1", "n0.gpu0")


def pair_xml(speed: str = "100000") -> str:
    """Two GPUs and their NIC under one PCIe Gen3 switch, NVLinked to each other."""
    gpus = "".join(
        f'<pci busid="0000:0{g}:00.0" class="0x030200" link_speed="8.0 GT/s PCIe" link_width="16">'
        f'<gpu dev="{g}" sm="70" rank="{g}" gdr="1">'
        f'<nvlink target="0000:0{1 - g}:00.0" count="2" tclass="0x030200"/></gpu></pci>'
        for g in (0, 1))
    return (f'<system version="1"><cpu numaid="0" arch="x86_64" vendor="GenuineIntel" '
            f'familyid="6" modelid="85"><pci busid="0000:10:00.0" class="0x060400" '
            f'link_speed="8.0 GT/s PCIe" link_width="16">{gpus}'
            f'<pci busid="0000:02:00.0" class="0x020700" link_speed="8.0 GT/s PCIe" '
            f'link_width="16"><nic><net name="mlx5_0" dev="0" speed="{speed}" port="1"/></nic>'
            f'</pci></pci></cpu></system>')


def test_gpus_spread_over_equally_near_nics(tmp_path):
    # two GPUs and two NICs under one switch: each GPU takes a NIC of its own
    text = pair_xml().replace(
        '</nic></pci>', '</nic></pci><pci busid="0000:03:00.0" class="0x020700" '
        'link_speed="8.0 GT/s PCIe" link_width="16"><nic><net name="mlx5_1" dev="1" '
        'speed="100000"/></nic></pci>')
    (tmp_path / "two.xml").write_text(text)
    assert HostShape.of(read_topology(str(tmp_path / "two.xml"))).nic_of == (0, 1)


def test_topo_summarises_a_dump(capsys, tmp_path):
    assert main(["topo", str(PCIE), "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == ["# topology pcie_4gpu.xml · builder nccl_xml(pcie_4gpu.xml x1)",
                       "GPUs               4", "hosts              1", "NICs               2"]
    assert "bisection          22.5GB/s (min cut by max-flow, ranks [0, 2) to [2, 4), per " \
           "direction)" in out


def test_topo_summarises_a_scenario_naming_a_dump(capsys, tmp_path):
    scenario = tmp_path / "a100.yaml"
    scenario.write_text(f"topology: {{nccl_xml: {A100}, nodes: 2}}\nsizes: [1MiB]\n")
    assert main(["topo", str(scenario), "--output", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[:3] == [
        "# topology dgx_a100.xml[nodes=2] · builder dgx(2x8)", "GPUs               16",
        "hosts              2"]


def test_a_scenario_names_its_dump_beside_it(tmp_path):
    (tmp_path / "host.xml").write_text(H100.read_text())
    (tmp_path / "s.yaml").write_text("topology: {nccl_xml: host.xml}\nsizes: [1MiB]\n")
    from simulator.scenario.parse import load_scenario

    assert load_scenario(tmp_path / "s.yaml").topology.params == load_preset("dgx_h100").params


BROKEN = [
    # (what is changed in the H100 dump, the line)
    (' sm="90"', "", 1, "<gpu> at line 17: expected a 'sm' attribute (the compute capability, "
                     "e.g. 90), missing"),
    ('class="0x060400"', 'class="0x010802"', 1,
     "<pci> at line 10: unknown class 0x010802: expected a PCIe switch (0x0604xx) holding <pci> "
     "elements, a GPU (0x03xxxx) holding a <gpu> or a NIC (0x02xxxx) holding a <nic>"),
    ('tclass="0x068000"', 'tclass="0x070000"', 1,
     "<nvlink> at line 18: unknown tclass 0x070000: expected 0x068000 (an NVSwitch), 0x03xxxx "
     "(a GPU) or 0x068001 (the CPU)"),
    ('speed="400000"', 'speed="-1"', 1,
     "<net> at line 13: expected speed to be a whole number from 1 to 2147483647, got '-1'"),
    (' sm="90"', ' sm="' + "9" * 30 + '"', 1,  # issue 40: taken as is before
     "<gpu> at line 17: expected sm to be a whole number from 1 to 2147483647, got '"
     + "9" * 30 + "'"),
    ('rank="1"', 'rank="0"', 1,
     "<gpu> at line 32: expected each rank once, got rank=\"0\" here and at line 17"),
    ('<nvlink target="0000:05:00.0" count="5" tclass="0x068000"/>', "<nvswitch/>", 1,
     "<nvswitch> at line 18: unknown element inside <gpu>; expected <nvlink> or <c2c>"),
    ('</system>', "", 1, "line 134: expected an NCCL topology file (NCCL_TOPO_DUMP_FILE's XML), "
                         "got text that does not parse as XML (no element found, column 1)"),
]


@pytest.mark.parametrize(("old", "new", "count", "line"), BROKEN, ids=lambda v: str(v)[:20])
def test_a_broken_dump_gets_one_line(tmp_path, capsys, old, new, count, line):
    bad = tmp_path / "bad.xml"
    bad.write_text(H100.read_text().replace(old, new, count))
    assert main(["topo", str(bad), "--output", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"{bad}: {line}\n"
    assert not (tmp_path / "out").exists()


def test_a_gpu_without_a_nic_gets_one_line(tmp_path, capsys):
    bad = tmp_path / "nonic.xml"  # every NIC's <pci> (five lines each) left out
    bad.write_text(re.sub(r'\n *<pci [^>]*class="0x020700".*?</pci>', "", H100.read_text(),
                          flags=re.DOTALL))
    assert main(["topo", str(bad), "--output", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"{bad}: <gpu> at line 12: expected a path from the GPU (rank 0, 0000:1b:00.0) to a NIC, "
        "found no <nic><net .../></nic> in the file\n")


@pytest.mark.parametrize(("name", "line"), [
    ("billion_laughs.xml", "line 5: expected no entity declarations, got 'lol': nested entities "
                           "can expand a few lines into gigabytes (the billion laughs)"),
    ("external_entity.xml", "line 5: expected no external entity, got 'secret' reading "
                            "'file:///etc/passwd': an XML input never reads another file or URL"),
])
def test_entities_are_refused_before_they_expand(tmp_path, capsys, name, line):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"topology: {{nccl_xml: {DATA / name}}}\nsizes: [1MiB]\n")
    assert main(["run", str(scenario), "--output", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"{DATA / name}: {line}\n"
    assert not (tmp_path / "out").exists()


def test_a_file_that_is_not_xml_gets_one_line(tmp_path, capsys):
    bad = tmp_path / "topo.xml"
    bad.write_text("kind: dgx\nnodes: 1\n")
    assert main(["topo", str(bad), "--output", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"{bad}: line 1: expected an NCCL topology file (NCCL_TOPO_DUMP_FILE's XML), got text "
        "that does not parse as XML (syntax error, column 1)\n")


@pytest.mark.parametrize(("topology_", "line"), [
    ({"nccl_xml": str(PCIE), "fabric": {"kind": "clos"}},
     "s.yaml: topology.fabric.kind: expected leaf for this host: the cluster builder draws hosts "
     "the dgx builder draws, and pcie_4gpu.xml is not one (its GPUs are not all joined by "
     "NVSwitches alone, with as many links each)"),
    ({"nccl_xml": str(H100), "fabric": {"spines": 2}},
     "s.yaml: topology.fabric.spines: expected only with kind: clos (a leaf fabric is one "
     "switch)"),
    ({"nccl_xml": str(H100), "fabric": {"kind": "torus"}},
     "s.yaml: topology.fabric.kind: expected a fabric (leaf, clos), got 'torus'"),
    ({"nccl_xml": str(H100), "nodes": 2, "fabric": {"kind": "clos", "cores": 4}},
     "s.yaml: topology.fabric.cores: expected no cores without units_per_pod (the third tier "
     "joins pods of units)"),
    ({"nccl_xml": str(H100), "preset": "dgx_h100"},
     "s.yaml: topology: expected one of 'preset: NAME', 'kind: BUILDER' or 'nccl_xml: FILE', got "
     "preset and nccl_xml"),
    ({"nccl_xml": str(H100), "nodes": 0}, "s.yaml: topology.nodes: expected a whole number ≥ 1, "
                                          "got 0"),
    ({"nccl_xml": str(DATA / "nothere.xml")}, f"{DATA / 'nothere.xml'}: no such file"),
])
def test_a_wrong_topology_gets_one_line(topology_, line):
    with pytest.raises(InputError) as error:
        scenario_from_dict({"topology": topology_, "sizes": ["1MiB"]}, source="s.yaml")
    assert str(error.value) == line


def test_the_fabric_latency_and_transport_override_the_file():
    spec = topology(PCIE, fabric={"latency": "1us", "transport": "ib"})
    assert (spec.params["nic_latency"], spec.params["transport"]) == (1e-6, "ib")
    assert spec.label == "pcie_4gpu.xml[fabric.latency=1us,fabric.transport=ib]"
