"""``topology: {nccl_xml: FILE, nodes: N, fabric: {...}}``: NCCL's topology file as a scenario's
topology (docs/scenarios.md#nccls-topology-file). The file is one host; ``nodes`` hosts
(default 1) are joined by the fabric, whose values are parsed here by the kinds of the builder
parameters they become, and the host is mapped onto a builder by
:func:`simulator.model.ncclhost.host_builder`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from simulator.errors import InputError
from simulator.limits import MAX_RANKS
from simulator.model.ncclhost import CLOS_KEYS, host_builder
from simulator.model.ncclxml import read_topology
from simulator.model.topology import BUILDERS, ParamValue
from simulator.scenario.fields import FieldReader
from simulator.scenario.rules import topology_issues
from simulator.scenario.spec import TopologySpec
from simulator.units import parse_count

FABRICS = ("leaf", "clos")
"""``leaf``: every NIC on one non-blocking leaf switch (the ``dgx`` builder's network);
``clos``: the ``cluster`` builder's rail-optimised leaves, spines and cores."""
FABRIC_KEYS = {"latency": "nic_latency", "transport": "transport", "sharp": "sharp",
               "sharp_latency": "sharp_latency", **{key: key for key in CLOS_KEYS}}
"""A ``fabric:`` key and the builder parameter it sets (``latency``: every NIC-switch cable's)."""


def load_nccl_xml(file: str) -> TopologySpec:
    """One host of NCCL's topology ``file`` on a leaf switch, as ``topo FILE.xml`` shows it;
    InputError naming the file, the element and its line where it is wrong."""
    reader = FieldReader(file)
    spec = nccl_xml_topology(reader, {"nccl_xml": file}, file)
    reader.raise_if_any()
    assert spec is not None
    return spec


def nccl_xml_topology(reader: FieldReader, spec: Mapping[str, object],
                      file: str) -> TopologySpec | None:
    """The topology of the ``topology:`` mapping ``spec`` naming NCCL's topology ``file``
    (resolved beside the scenario), labelled by the file's name and what the mapping sets;
    None after recording the problems (those of the file itself name the file, the element
    and its line)."""
    reader.check_keys(spec, "topology", ("nccl_xml", "nodes", "fabric"))
    before = len(reader.problems)
    nodes = reader.parse("topology.nodes", spec.get("nodes", 1), parse_count)
    fabric, clos = _fabric(reader, spec.get("fabric", {}))
    if len(reader.problems) > before or nodes is None:
        return None
    try:
        gpus = len(read_topology(file).gpus)
        if gpus * nodes > MAX_RANKS:  # before the host's PCIe tree is walked, GPU by GPU
            reader.problem("topology.nodes", f"expected at most {MAX_RANKS} GPUs, got "
                                             f"{gpus * nodes} ({nodes} hosts of {gpus} GPUs)")
            return None
        mapped = host_builder(file, nodes, fabric, clos)
    except InputError as error:
        reader.problems.extend(error.problems)
        return None
    if clos and mapped.kind == "nccl_xml":
        reader.problem("topology.fabric.kind", (
            f"expected leaf for this host: the cluster builder draws hosts the dgx builder "
            f"draws, and {Path(file).name} is not one ({mapped.why})"))
        return None
    fields = {param: f"topology.fabric.{key}" for key, param in FABRIC_KEYS.items()}
    issues = topology_issues(mapped.kind, mapped.params, prefix="")
    for where, message in issues:  # the rank limit, the Clos network's wiring rules
        reader.problem(fields.get(where, "topology.nodes"), message)
    if issues:
        return None
    given = [f"nodes={nodes}"] if nodes != 1 else []
    fabric_given = spec.get("fabric", {})
    assert isinstance(fabric_given, Mapping)  # _fabric recorded a problem otherwise
    given += [f"fabric.{key}={value}" for key, value in fabric_given.items()]
    label = Path(file).name + (f"[{','.join(given)}]" if given else "")
    return TopologySpec(mapped.kind, mapped.params, label=label)


def _fabric(reader: FieldReader, value: object) -> tuple[dict[str, ParamValue], bool]:
    """The fabric's values as builder parameters, and whether it is a Clos network."""
    spec = reader.mapping("topology.fabric", value)
    if spec is None:
        return {}, False
    reader.check_keys(spec, "topology.fabric", ("kind", *FABRIC_KEYS))
    kind = reader.choice("topology.fabric.kind", spec.get("kind", "leaf"), FABRICS,
                         "a fabric") or "leaf"
    kinds = BUILDERS["cluster"].params
    params: dict[str, ParamValue] = {}
    for key, param in FABRIC_KEYS.items():
        if key not in spec:
            continue
        if kind != "clos" and key in CLOS_KEYS:
            reader.problem(f"topology.fabric.{key}", "expected only with kind: clos (a leaf "
                                                     "fabric is one switch)")
            continue
        parsed = reader.parse(f"topology.fabric.{key}", spec[key], kinds[param].parse)
        if parsed is not None:
            params[param] = parsed
    return params, kind == "clos"
