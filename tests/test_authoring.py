"""Adding an algorithm as docs/writing-an-algorithm.md says: on a copy of the tree with the
guide's worked example saved and registered, the suite's tests that follow the registry pick it
up and pass (those parametrised with its name, and the ``registry`` ones whose counts and sets
derive from the registry), and the only tests it breaks are the ``golden`` ones the guide says
to regenerate. The tree itself stays untouched."""

import json
import os
import shutil
import subprocess
import sys

from tests.conftest import GUIDE_EXAMPLE, MARKS, REPO, add_the_guide_example, runs_all

GOLDEN = "tests/data/dgx_small.yaml"
"""The golden run's scenario (tests/test_cli.py)."""

PICK = '''
"""A pytest plugin: keep the tests parametrised with the added algorithm's name and those
marked registry or golden, and write down how each one went."""

import json
import os

NAME, OUTCOMES = os.environ["ADDED_ALGORITHM"], os.environ["ADDED_OUTCOMES"]
MARKS = json.loads(os.environ["ADDED_MARKS"])
seen = {}


def why(item):
    params = getattr(getattr(item, "callspec", None), "params", {})
    if any(isinstance(value, str) and value == NAME for value in params.values()):
        return "named"
    return next((mark for mark in MARKS if item.get_closest_marker(mark)), None)


def pytest_collection_modifyitems(config, items):
    kept = [item for item in items if why(item)]
    config.hook.pytest_deselected(items=[item for item in items if not why(item)])
    items[:] = kept


def pytest_collection_finish(session):
    seen.update({item.nodeid: {"why": why(item), "outcome": "not run", "said": ""}
                 for item in session.items})


def pytest_runtest_logreport(report):
    state = seen[report.nodeid]
    if not report.passed:
        state.update(outcome=report.outcome, said=report.longreprtext)
    elif report.when == "call" and state["outcome"] == "not run":
        state["outcome"] = "passed"


def pytest_sessionfinish(session):
    with open(OUTCOMES, "w") as out:
        json.dump(seen, out)
'''
"""Written beside the copied tree and loaded with ``-p``."""

LEFT_BEHIND = (".git", ".venv", "results", "__pycache__", "*.egg-info", ".*_cache", ".hypothesis")
"""What the copy of the checkout leaves out: version control, environments, outputs, caches."""

CONTRACT = ("test_exact_on_integer_data", "test_float_results_within_rounding",
            "test_time_never_falls_as_size_grows",
            "test_time_never_falls_across_pipeline_piece_boundaries",
            "test_closed_form_exact_where_claimed")
"""What the guide says the contract tests check "the moment it is registered"."""

PINNED_ONCE = ("tests/test_trace.py", "tests/test_choice.py", "tests/test_partial.py",
               "tests/test_cli.py")
"""The files whose lists and counts of algorithms an added algorithm once broke (issue 37):
their registry tests now follow it."""


def test_an_algorithm_added_as_the_guide_says_passes_every_test_that_follows_the_registry(
        tmp_path):
    name, _ = GUIDE_EXAMPLE
    tree = tmp_path / "tree"
    shutil.copytree(REPO, tree, ignore=shutil.ignore_patterns(*LEFT_BEHIND))
    shutil.copytree(REPO / "topologies", tree / "simulator" / "topologies",
                    ignore=shutil.ignore_patterns(*LEFT_BEHIND))  # as the wheel ships them
    add_the_guide_example(tree / "simulator")
    (tree / "pick_added.py").write_text(PICK, encoding="utf-8")
    outcomes = tmp_path / "outcomes.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "pick_added",
         "tests"], cwd=tree, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(tree), "ADDED_ALGORITHM": name,
             "ADDED_OUTCOMES": str(outcomes), "ADDED_MARKS": json.dumps(list(MARKS))})
    assert outcomes.exists(), proc.stdout[-4000:] + proc.stderr[-4000:]
    seen = json.loads(outcomes.read_text())
    by_why = {why: {node: state["outcome"] for node, state in seen.items() if state["why"] == why}
              for why in ("named", *MARKS)}
    # the contract, for the new name: every check the guide promises, passed
    contract = {node.split("[")[0] for node in by_why["named"]
                if node.startswith("tests/test_contract.py::")}
    assert contract == {f"tests/test_contract.py::{check}" for check in CONTRACT}, (
        proc.stdout[-4000:])
    assert set(by_why["named"].values()) == {"passed"}, by_why["named"]
    # what derives from the registry follows it: passed, in each file that once pinned it
    assert set(by_why["registry"].values()) == {"passed"}, proc.stdout[-4000:]
    assert {node.split("::")[0] for node in by_why["registry"]} >= set(PINNED_ONCE)
    # the golden run's line changes by one more algorithm's points (and their closed forms):
    # the guide says so, and how to regenerate it
    assert by_why["golden"] and set(by_why["golden"].values()) == {"failed"}, by_why["golden"]
    algorithms = len(runs_all(GOLDEN)) + 1
    for node in by_why["golden"]:
        assert (f"{GOLDEN}: {3 * algorithms} points to simulate ({algorithms} algorithms × 3 "
                "sizes)") in seen[node]["said"], seen[node]["said"]
