"""Topology presets: the YAML files of ``topologies/``, shipped inside the package.

In a checkout they are the top-level ``topologies/`` folder; an installed wheel carries them as
the package data ``simulator/topologies`` (pyproject.toml maps one onto the other), and both are
found through :mod:`importlib.resources`, so presets work wherever the package runs from.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable


def preset_dir() -> Traversable:
    """The folder holding the preset files."""
    return resources.files("simulator.topologies")


def preset_names() -> list[str]:
    """Every preset's name (its file name without ``.yaml``), sorted."""
    return sorted(entry.name[:-5] for entry in preset_dir().iterdir()
                  if entry.name.endswith(".yaml"))


def preset_text(name: str) -> str | None:
    """The YAML text of preset ``name``, or None if there is no such preset."""
    if name not in preset_names():  # a name, never a path: '../x' reads nothing outside
        return None
    entry = preset_dir() / f"{name}.yaml"
    return entry.read_text(encoding="utf-8") if entry.is_file() else None
