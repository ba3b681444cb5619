"""The documentation is tested like the code: the worked example of docs/writing-an-algorithm.md
runs end to end, the README's Python and the docs' scenario snippets run or parse, the README
stays short, nothing points outside the repository, and every relative link resolves."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simulator import scenario_from_dict, simulate
from simulator.algorithms import REGISTRY, Algorithm
from simulator.model.reduction import ReduceOp
from tests.conftest import GUIDE, REPO, add_the_guide_example

README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").rglob("*.md"))]

_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*$", re.M)


def blocks(path: Path, language: str) -> list[str]:
    """The fenced code blocks of ``path`` in ``language`` (```python ... ```), in order."""
    return [body for lang, body in _FENCE.findall(path.read_text(encoding="utf-8")) if lang == language]


def prose(path: Path) -> str:
    """The text of a markdown file without its fenced code blocks."""
    return _FENCE.sub("", path.read_text(encoding="utf-8"))


def run_blocks(path: Path, module: str) -> dict[str, object]:
    """Execute every ```python block of ``path`` in one fresh namespace, as module ``module``."""
    namespace: dict[str, object] = {"__name__": module}
    for body in blocks(path, "python"):
        exec(compile(body, str(path), "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def example() -> type[Algorithm]:
    """The one algorithm class the guide's worked example defines."""
    namespace = run_blocks(GUIDE, "docs_example")
    [algorithm] = [value for value in namespace.values() if isinstance(value, type)
                   and issubclass(value, Algorithm) and value.__module__ == "docs_example"]
    return algorithm


@pytest.fixture
def registered(example, monkeypatch) -> Algorithm:
    """The example registered for the duration of one test, as one line in the registry would."""
    algorithm = example()
    assert algorithm.name not in REGISTRY[algorithm.collective], (
        f"{algorithm.name!r} is registered in the tree: the name is the guide's example's, which "
        "these tests register themselves; name yours otherwise (docs/writing-an-algorithm.md)")
    monkeypatch.setitem(REGISTRY[algorithm.collective], algorithm.name, algorithm)
    return algorithm


def switch(ranks: int, kind: str = "switch") -> dict[str, object]:
    return {"kind": kind, "ranks": ranks, "bandwidth": "25GB/s", "latency": "500ns"}


def test_worked_example_runs_registered_and_meets_its_hand_computed_time(registered):
    frame = simulate({"topology": switch(4), "collective": registered.collective.value,
                      "algorithms": [registered.name], "sizes": [4000, "1MiB"],
                      "gpu": {"reduce_bandwidth": "100GB/s", "launch_latency": "1us"}})
    assert list(frame.algorithm) == [registered.name] * 2
    assert frame.verified.tolist() == [True, True]
    assert frame.max_abs_error.tolist() == [0.0, 0.0]
    if any(claim.kind == "switch" and claim.ranks.admits(4) for claim in registered.exact_on):
        for row in frame.itertuples():
            assert row.sim_time_s == pytest.approx(row.model_time_s, rel=1e-9)
    # The guide's case: 4 ranks, 4000 B each. alpha = 2 x 500 ns = 1 us. Up: three buffers share
    # the root's downlink, 4000 B x 3 / 25 GB/s = 0.48 us. Three reductions of 1 us + 4000 B /
    # 100 GB/s = 1.04 us each: 3.12 us. Down: 1 us + 0.48 us. T = 1 + 0.48 + 3.12 + 1 + 0.48.
    assert frame.sim_time_s[0] == pytest.approx(6.08e-6, rel=1e-12)


def test_worked_example_is_exact_on_integer_data_for_every_op(registered):
    for ranks in range(1, 7):
        for op in ReduceOp:
            frame = simulate({"topology": switch(ranks), "algorithms": [registered.name],
                              "sizes": [8 * 37], "dtype": "int64", "op": op.value})
            assert frame.verified[0], (ranks, op)
            assert frame.max_abs_error[0] == 0.0


def test_worked_example_closed_form_is_exact_where_it_claims(registered):
    assert registered.exact_on, "the guide's example states where its closed form is exact"
    for claim in registered.exact_on:
        for ranks in (r for r in (2, 3, 5, 8) if claim.ranks.admits(r)):
            frame = simulate({"topology": switch(ranks, claim.kind), "algorithms": [registered.name],
                              "sizes": [4, 4000, "4MiB"]})
            assert frame.sim_time_s.to_numpy() == pytest.approx(frame.model_time_s.to_numpy(),
                                                                rel=1e-9), (claim, ranks)


SAVED_AND_REGISTERED = """
import sys
from pathlib import Path

import simulator
from simulator import simulate
from simulator.algorithms import REGISTRY, Collective
from simulator.algorithms.star import StarAllreduce

assert Path(simulator.__file__).parent == Path(sys.argv[1]), simulator.__file__
assert type(REGISTRY[Collective.ALLREDUCE]["star"]) is StarAllreduce
frame = simulate({"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s",
                               "latency": "500ns"}, "algorithms": ["star"], "sizes": [4000],
                  "gpu": {"reduce_bandwidth": "100GB/s", "launch_latency": "1us"}})
print(repr(float(frame.sim_time_s[0])), repr(float(frame.model_time_s[0])),
      bool(frame.verified[0]))
"""
"""Run in a fresh interpreter on the copied package: the guide's example as a registered
algorithm, on the guide's case."""


def test_worked_example_saved_in_the_package_and_registered_as_the_guide_says(tmp_path):
    # The guide's last step, done literally on a copy of the package: the example saved as
    # simulator/algorithms/star.py and StarAllreduce() added to _ALGORITHMS with its import. A
    # fresh interpreter then imports the package from scratch, so the registry imports star.py
    # while simulator.algorithms is still being initialised: star.py's own
    # `from simulator.algorithms import ...` must find every name there (it once raised a
    # circular ImportError). The copy keeps the tree itself untouched by the test.
    package = tmp_path / "simulator"
    shutil.copytree(REPO / "simulator", package, ignore=shutil.ignore_patterns("__pycache__"))
    add_the_guide_example(package)
    proc = subprocess.run([sys.executable, "-c", SAVED_AND_REGISTERED, str(package)],
                          cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    # the guide's hand computation (test above): T = 1 + 0.48 + 3.12 + 1 + 0.48 = 6.08 us
    simulated, closed_form, verified = proc.stdout.split()
    assert float(simulated) == pytest.approx(6.08e-6, rel=1e-12)
    assert float(closed_form) == pytest.approx(6.08e-6, rel=1e-12)
    assert verified == "True"


def test_readme_python_runs():
    namespace = run_blocks(README, "readme")
    frame = namespace["frame"]
    assert len(frame) > 0 and frame.verified.all()


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_scenario_snippets_are_valid_scenarios(path):
    for body in blocks(path, "yaml"):
        data = yaml.safe_load(body)
        if isinstance(data, dict) and "topology" in data and "sizes" in data:
            assert scenario_from_dict(data, source=str(path)).sizes
        elif isinstance(data, dict) and "topology" in data and "training" in data:
            assert scenario_from_dict(data, source=str(path)).training is not None


def test_readme_fits_in_8_kib():
    assert len(README.read_bytes()) <= 8192


def _text_files(*roots: Path) -> list[Path]:
    found = []
    for root in roots:
        paths = [root] if root.is_file() else sorted(root.rglob("*"))
        found += [p for p in paths if p.is_file() and "__pycache__" not in p.parts
                  and p.suffix not in {".pyc", ".png"}]
    return found


OUTSIDE = "../" + "shared"
"""The folder beside the repository that a clone does not have (spelt in two parts, so that this
file does not name it itself)."""


def test_nothing_points_outside_the_repository():
    here = Path(__file__).resolve()
    files = [p for p in _text_files(README, REPO / "docs", REPO / "simulator", REPO / "tests")
             if p.resolve() != here]
    offenders = [str(p.relative_to(REPO)) for p in files
                 if OUTSIDE in (text := p.read_text(encoding="utf-8", errors="replace"))
                 or "DESIGN.md" in text]
    assert offenders == []


def _targets(path: Path) -> list[str]:
    return [t for t in _LINK.findall(prose(path)) if not re.match(r"[a-z]+:|#", t)]


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(path):
    missing = []
    for target in _targets(path):
        resolved = (path.parent / target.split("#")[0]).resolve()
        if not resolved.exists() or REPO not in resolved.parents:
            missing.append(target)
    assert missing == []


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_link_anchors_name_a_heading(path):
    missing = []
    for target in [*_targets(path), *re.findall(r"\]\((#[^)\s]+)\)", prose(path))]:
        page, _, anchor = target.partition("#")
        if not anchor:
            continue
        linked = (path.parent / page).resolve() if page else path
        if linked.suffix == ".md" and linked.exists():
            anchors = {slug(title) for _, title in _HEADING.findall(prose(linked))}
            if anchor not in anchors:
                missing.append(target)
    assert missing == []
