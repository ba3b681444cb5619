"""``simulator.dist``, the package's name until issue 37, as an alias of
``simulator.distributed``: the old imports give the very same objects (not second copies of the
modules), a run through the old name is the run, and no package directory again takes a name
that GitHub's standard Python ``.gitignore`` ignores."""

import importlib
import subprocess
import sys

import numpy as np
import pytest

import simulator.distributed as distributed
from simulator import dist
from tests.conftest import REPO

PACKAGE = REPO / "simulator"

MODULES = sorted(path.stem for path in (PACKAGE / "distributed").glob("*.py")
                 if path.name != "__init__.py")
"""The package's modules, read off its directory (the alias must cover one added later too)."""

IGNORED = {"build", "develop-eggs", "dist", "downloads", "eggs", ".eggs", "lib", "lib64", "parts",
           "sdist", "var", "wheels", "env", "venv", "ENV", "htmlcov", "target"}
"""Directory names GitHub's Python.gitignore (github/gitignore) ignores at any depth."""


def test_every_public_name_is_the_package_s_own_object():
    assert dist.__all__ == distributed.__all__
    assert "spawn" in dist.__all__ and "Stalled" in dist.__all__
    assert [name for name in distributed.__all__
            if getattr(dist, name) is not getattr(distributed, name)] == []


@pytest.mark.parametrize("name", MODULES)
def test_each_module_under_the_old_name_is_the_package_s_module(name):
    module = importlib.import_module(f"simulator.distributed.{name}")
    assert importlib.import_module(f"simulator.dist.{name}") is module
    assert getattr(dist, name) is module


def test_the_old_imports_first_in_a_fresh_process_load_each_module_once():
    # the submodule imported before anything else of the package: no second copy of it (whose
    # classes would differ from the package's, so an except clause would miss its errors)
    probe = ("import sys\n"
             "from simulator.dist.rendezvous import World\n"
             "import simulator.dist, simulator.distributed.rendezvous as real\n"
             "from simulator import dist\n"
             "print(World is real.World, dist is simulator.dist,\n"
             "      dist.Stalled is sys.modules['simulator.distributed'].Stalled)\n"
             "print(sorted(name for name, module in sys.modules.items()\n"
             "             if 'distributed' in (getattr(module, '__file__', None) or '')))\n")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                          text=True, check=True)
    loaded = sorted(["simulator.distributed", *(f"simulator.distributed.{name}"
                                                for name in MODULES),
                     *(f"simulator.dist.{name}" for name in MODULES)])
    assert proc.stdout.splitlines() == ["True True True", repr(loaded)]


def test_a_run_and_its_errors_through_the_old_name():
    def step(rank: int) -> float:
        tensor = np.array([float(rank)])
        dist.all_reduce(tensor)
        return float(tensor[0])

    result = dist.spawn(step, 3)  # the default switch: 2(p-1) = 4 steps of two 1 us hops, 8 B
    assert result.returns == (3.0, 3.0, 3.0)
    assert result.time_s == pytest.approx(4 * (2e-6 + 8 / 25e9), rel=1e-12)

    def mismatched(rank: int) -> None:
        if rank == 0:
            distributed.barrier()
        else:
            distributed.all_reduce(np.zeros(1))

    with pytest.raises(dist.CollectiveMismatch) as raised:  # raised by the new name, caught so
        distributed.spawn(mismatched, 2)
    assert str(raised.value) == ("collective #0 mismatch: rank 0 called barrier(); rank 1 called "
                                 "all_reduce(float64[1])")


def test_no_package_directory_has_a_name_the_python_gitignore_ignores():
    # every directory holding the package's sources (a stale __pycache__ of an old one is not)
    directories = {part for path in PACKAGE.rglob("*.py")
                   for part in path.relative_to(PACKAGE).parts[:-1]}
    assert "distributed" in directories and directories & IGNORED == set()
    assert (PACKAGE / "dist.py").is_file()  # the alias is a module, which the pattern spares
