"""The layers the imports really follow (docs/design.md §1), checked by walking the package's
``import`` statements with :mod:`ast`, and what importing a light module loads."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from tests.conftest import REPO

PACKAGE = REPO / "simulator"

ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "version": set(),  # a leaf: every layer may state the version without importing the root
    "units": {"errors"},
    "limits": set(),
    "inputs": {"errors", "limits"},  # reading input files safely, a leaf as limits is
    "xmlsafe": {"errors", "limits", "inputs"},  # XML read safely (defusedxml), on inputs
    "settings": {"limits", "errors"},
    "model": {"model", "units", "limits", "errors", "inputs", "xmlsafe"},
    "algorithms": {"algorithms", "model", "units", "errors"},
    "training": {"training", "model", "units", "errors"},
    "scenario": {"scenario", "training", "algorithms", "model", "units", "limits", "errors",
                 "settings", "inputs", "xmlsafe"},
    "engine": {"engine", "algorithms", "model", "limits", "errors", "settings"},
    "output": {"output", "scenario", "training", "algorithms", "model", "units", "limits",
               "errors", "version", "settings", "inputs"},  # inputs: what no output may replace
    "plan": {"scenario", "algorithms", "model", "engine", "units", "limits", "errors",
             "settings"},
    "runner": {"plan", "scenario", "algorithms", "model", "engine", "output", "units", "limits",
               "errors", "measured", "settings"},
    "sweep": {"errors", "limits", "output", "plan", "runner", "scenario", "settings"},
    "trainer": {"plan", "runner", "training", "scenario", "algorithms", "model", "engine",
                "output", "units", "limits", "errors", "settings"},
    "distributed": {"plan", "runner", "scenario", "algorithms", "model", "engine", "output",
                    "limits", "errors", "settings"},
    "dist": {"distributed"},  # the package's name until issue 37, an alias of it
    "commands": {"commands", "errors", "limits", "model", "output", "runner", "scenario",
                 "calibration", "measured", "sweep", "trainer", "tune", "inputs", "nccl"},
    "cli": {"commands", "output", "errors", "version"},  # the parser, the exit codes
    "calibration": {"algorithms", "errors", "measured", "model", "scenario"},
    "tune": {"runner", "plan", "output", "scenario", "algorithms", "model", "settings", "version",
             "errors"},
    "nccl": {"runner", "plan", "scenario", "model", "units", "errors"},  # NCCL's model asked
    "__main__": {"cli"},
    "__init__": {"version"},  # re-exports lazily, by name (PEP 562); only the leaf eagerly
    "topologies": set(),
    "measured": {"measured", "errors", "inputs"},
}
"""For each layer (a subpackage or a top-level module), the layers it may import."""

THIRD_PARTY_BANNED = {"model": {"simpy", "pandas", "matplotlib"},
                      "training": {"simpy", "pandas", "matplotlib"},
                      "measured": {"simpy", "pandas", "matplotlib", "numpy"},
                      "algorithms": {"simpy", "pandas", "matplotlib"},
                      "scenario": {"simpy", "pandas", "matplotlib"},
                      "output": {"simpy"}}


def layer_of(path: Path) -> str:
    part = path.relative_to(PACKAGE).parts[0]
    return part.removesuffix(".py")


def imports(path: Path, *, names: bool = False) -> list[str]:
    """Every module ``path`` imports at run time (``if TYPE_CHECKING:`` blocks excluded); with
    ``names``, also ``a.b.c`` for each ``from a.b import c`` (``c`` may be a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
               and "TYPE_CHECKING" in ast.unparse(block.test) for node in ast.walk(block)}
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            if names:
                found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def internal_layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "simulator":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(REPO)))
def test_imports_follow_the_layers(path):
    layer = layer_of(path)
    wrong = [module for module in imports(path)
             if (target := internal_layer(module)) is not None and target != layer
             and target not in ALLOWED[layer]]
    banned = [module for module in imports(path)
              if module.split(".")[0] in THIRD_PARTY_BANNED.get(layer, set())]
    assert wrong == [], f"{layer} may import only {sorted(ALLOWED[layer])}"
    assert banned == []


def test_every_layer_is_known_and_nothing_but_main_imports_the_cli():
    assert {layer_of(path) for path in SOURCES} <= set(ALLOWED)
    importers = {str(path.relative_to(REPO)) for path in SOURCES
                 if any(module == "simulator.cli" for module in imports(path))}
    assert importers == {"simulator/__main__.py"}


def test_only_the_cli_imports_the_commands():
    # a command is a verb of the command line: no library layer reaches one
    importers = {str(path.relative_to(REPO)) for path in SOURCES
                 if layer_of(path) != "commands"
                 and any(internal_layer(module) == "commands" for module in imports(path))}
    assert importers == {"simulator/cli.py"}


def test_the_version_is_a_leaf_that_the_root_and_the_metadata_read():
    # simulator/version.py imports nothing, no module imports the package root (the version was
    # once read from it, upward), and the installed metadata (pyproject's dynamic version) agrees
    import importlib.metadata

    import simulator
    from simulator.version import __version__

    assert imports(PACKAGE / "version.py") == []
    assert [str(path.relative_to(REPO)) for path in SOURCES
            if "simulator" in imports(path)] == []
    assert simulator.__version__ == __version__ == importlib.metadata.version("allreduce-sim")


def table_rows() -> dict[str, tuple[str, set[str]]]:
    """docs/design.md §1's layer table: for each package it names (``model/``, and the
    subpackages beside it), the parent package and the layers its "may import" cell names."""
    rows = {}
    for line in (REPO / "docs" / "design.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 3 and (packages := re.findall(r"`([\w/]+)/`", cells[0])):
            for package in packages:
                named = re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", cells[1]))  # asides out
                rows[package] = (packages[0], set(named) & set(ALLOWED))
    return rows


PACKAGES = sorted(path.parent for path in PACKAGE.rglob("__init__.py") if path.parent != PACKAGE)


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_package_docstring_states_its_row_of_the_layer_table(package):
    # docs/design.md §1: each package's row in the table, and its __init__ docstring says the
    # same: a "May import" sentence naming every layer of the row
    name = str(package.relative_to(PACKAGE))
    rows = table_rows()
    assert name in rows, f"docs/design.md's layer table has no row for {name}/"
    parent, layers = rows[name]
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert docstring is not None and "May import:" in docstring
    words = " ".join(docstring.split())
    assert [layer for layer in sorted(layers) if f"simulator.{layer}`" not in words] == []
    if parent != name:  # a subpackage says whose layer it belongs to
        assert f"simulator.{parent}`" in words


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts)


def test_no_module_imports_one_that_imports_it_back():
    # Every run-time import counted, those inside functions too (a lazy import hides a circle, it
    # does not remove it), between the package's modules; type-only imports are not run, and a
    # package's __init__ is left out, as the facade its own modules may import from
    # (docs/writing-an-algorithm.md's star.py does)
    modules = {module_of(path): path for path in SOURCES if path.name != "__init__.py"}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        graph.add_edges_from((name, target) for target in imports(path, names=True)
                             if target in modules and target != name)
    assert list(nx.simple_cycles(graph)) == []


def test_the_walk_sees_a_violation():
    # the checker itself: a module of the model importing the engine is caught
    assert internal_layer("simulator.engine.run") == "engine"
    assert "engine" not in ALLOWED["model"] and "engine" not in ALLOWED["algorithms"]
    assert "engine" not in ALLOWED["output"]


@pytest.mark.parametrize("module, absent", [
    ("simulator.units", {"pandas", "simpy", "numpy", "networkx", "matplotlib"}),
    ("simulator", {"pandas", "simpy", "numpy", "matplotlib"}),
    ("simulator.algorithms", {"simpy", "pandas", "matplotlib"}),
    ("simulator.scenario", {"simpy", "pandas", "matplotlib"}),
    ("simulator.output.table", {"simpy"}),
])
def test_importing_a_layer_loads_only_what_it_needs(module, absent):
    probe = (f"import sys, {module}\n"
             f"print(sorted(m for m in {sorted(absent)!r} if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, check=True)
    assert proc.stdout.strip() == "[]"
