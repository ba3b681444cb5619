"""Every figure of a results frame, written together: by ``run`` (the ``png`` writer) from the
frame it computed, and by ``python -m simulator plot RESULTS`` from a results file, without
simulating.

For ``<name>.csv`` they are ``<name>.png`` (:func:`~simulator.output.plots.results_figure`),
``<name>-crossover.png`` (:func:`~simulator.output.crossover.crossover_figure`) and, given a
measured sweep, ``<name>-reference.png`` (:func:`~simulator.output.reference.reference_figure`).
The link rate and the fabric's ceiling drawn on the first come from the scenario's machine
(:func:`limits`): the run's own, or the one the JSON settings beside a results file describe
(:func:`limits_beside`); the results file itself holds neither.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd

from simulator.errors import InputError, Problem
from simulator.model.collective import Collective
from simulator.model.floor import floor
from simulator.model.machine import Machine
from simulator.output.crossover import crossover_figure
from simulator.output.plots import Ceiling, LinkRate, results_figure, save
from simulator.output.reference import Reference, check_reference, reference_figure
from simulator.scenario.parse import scenario_from_dict
from simulator.scenario.spec import Scenario
from simulator.scenario.training import Imports

NEEDED = ("scenario", "topology", "ranks", "collective", "algorithm", "size_bytes", "dtype", "op",
          "sim_time_s", "model_time_s", "busbw_GBps")
"""The columns the figures read (all among the results file's first 14, docs/results.md)."""

NUMERIC = ("ranks", "size_bytes", "sim_time_s", "model_time_s", "busbw_GBps")
REQUIRED = ("ranks", "size_bytes", "sim_time_s")
"""Numeric columns that may not be empty (busbw is empty at p = 1)."""

ROUTES_SAMPLED = 256
"""Rank 0's routes followed to find the link rate: to its host's ranks and to evenly spaced
others (the last rank among them); on symmetric fabrics these meet every kind of link."""


def figure_paths(stem: Path, reference: bool = False) -> list[Path]:
    """``<stem>.png``, ``<stem>-crossover.png`` (the ``png`` writer's files, as
    :meth:`~simulator.output.writers.Writer.files` names them) and with a reference
    ``<stem>-reference.png``."""
    names = [f"{stem.name}.png", f"{stem.name}-crossover.png"]
    return [stem.with_name(name) for name in names + ([f"{stem.name}-reference.png"]
                                                      if reference else [])]


def write_figures(results: pd.DataFrame, stem: Path, link_rate: LinkRate | None = None,
                  reference: Reference | None = None, ceiling: Ceiling | None = None) -> list[Path]:
    """Write every figure of ``results`` beside ``stem`` (see :func:`figure_paths`), each
    atomically; the paths written. A reference of another collective is an InputError, raised
    before anything is written."""
    if reference is not None:
        check_reference(results, reference)
    paths = figure_paths(stem, reference is not None)
    save(results_figure(results, link_rate, ceiling), paths[0])
    save(crossover_figure(results), paths[1])
    if reference is not None:
        save(reference_figure(results, reference), paths[2])
    return paths


def built(scenario: Scenario) -> tuple[nx.DiGraph, Machine] | None:
    """The scenario's topology and its machine, at the rates the graph gives the wire (not
    NCCL's charges: what the hardware allows); None when the topology cannot be built."""
    try:
        graph = scenario.topology.build()
        return graph, Machine.of(graph, scenario.gpu)
    except (InputError, ValueError, OSError):
        return None


def link_rate(scenario: Scenario) -> LinkRate | None:
    """The slowest link (per direction, as the graph describes the wire) on rank 0's routes to
    the other ranks: the rate a rank's bus bandwidth is bounded by on a point-to-point algorithm
    (``docs/results.md``). None with one rank, or when the topology cannot be built."""
    machine = built(scenario)
    return None if machine is None else slowest_link(*machine)


def slowest_link(graph: nx.DiGraph, machine: Machine) -> LinkRate | None:
    """:func:`link_rate` on a machine built from ``graph``."""
    p = machine.ranks
    if p < 2:
        return None
    spread = np.linspace(1, p - 1, num=min(p - 1, ROUTES_SAMPLED)).round().astype(int).tolist()
    targets = sorted({*machine.layout.host_ranks(0)[:ROUTES_SAMPLED], *spread} - {0})
    slowest: tuple[float, str] | None = None
    for rank in targets:
        route = machine.route(0, rank)
        for link in route.links:
            rate = machine.routing.capacity_Bps(link)
            if slowest is None or rate < slowest[0]:
                slowest = (rate, str(graph.edges[link].get("link", "")))
    return None if slowest is None else LinkRate(*slowest)


def fabric_ceiling(machine: Machine, collective: Collective,
                   sizes: Iterable[int]) -> Ceiling | None:
    """The fabric's ceiling of ``collective`` on ``machine`` at each of ``sizes``: its floor
    (:func:`simulator.model.floor.floor`, the tighter of the GPU and host cuts), which bounds
    every algorithm, in-switch reduction included. None where no cut moves anything (one rank).
    """
    taken = {int(size): floor(machine, collective, int(size)) for size in sorted(set(sizes))}
    if not taken or max(level.seconds for level in taken.values()) <= 0:
        return None
    largest = taken[max(taken)]
    host = largest.host_s > largest.gpu_s
    helped = (any(switch.network for switch in machine.reducing_switches) if host
              else bool(machine.reducing_switches))
    return Ceiling(tuple((size, level.seconds) for size, level in taken.items()),
                   "host" if host else "GPU", helped)


def limits(scenario: Scenario, sizes: Iterable[int]) -> tuple[LinkRate | None, Ceiling | None]:
    """What the run's figure draws from the scenario's machine, built once: the link rate
    (:func:`link_rate`) and the fabric's ceiling at ``sizes`` (:func:`fabric_ceiling`)."""
    machine = built(scenario)
    if machine is None:
        return None, None
    return (slowest_link(*machine),
            fabric_ceiling(machine[1], Collective(scenario.collective), sizes))


def read_results(path: Path) -> pd.DataFrame:
    """A results file written by ``run`` (or any CSV with the columns :data:`NEEDED`), as the
    frame :func:`~simulator.runner.simulate` returns; InputError, one line, when it is missing
    or is not one."""
    source = str(path)
    if path.is_dir():
        raise InputError([Problem(source, "", "expected a results file (<name>.csv), got a "
                                              "directory")])
    try:
        frame = pd.read_csv(path, keep_default_na=True)
    except FileNotFoundError:
        raise InputError([Problem(source, "", "no such file")]) from None
    except OSError as error:
        raise InputError([Problem(source, "", f"cannot read: {error.strerror}")]) from None
    except (UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        detail = " ".join(str(error).split()) if isinstance(error, pd.errors.ParserError) else ""
        raise InputError([Problem(source, "", "expected a results file of `python -m simulator "
                                              "run` (docs/results.md), a CSV" +
                                              (f"; {detail}" if detail else ""))]) from None
    missing = [column for column in NEEDED if column not in frame.columns]
    if missing:
        raise InputError([Problem(source, "", f"expected a results file of `python -m simulator "
                                              f"run` (docs/results.md); missing columns "
                                              f"{', '.join(missing)}")])
    if frame.empty:
        raise InputError([Problem(source, "", "a header but no rows")])
    for column in NUMERIC:
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = values.isna() if column in REQUIRED else values.isna() & frame[column].notna()
        if bad.any():
            raise InputError([Problem(source, f"line {int(np.flatnonzero(bad)[0]) + 2}",
                                      f"expected a number in column {column}, got "
                                      f"{frame[column][bad].iloc[0]!r}")])
        frame[column] = values
    frame = frame.astype({"ranks": int, "size_bytes": int})
    for column in ("scenario", "topology", "collective", "algorithm", "dtype", "op"):
        frame[column] = frame[column].astype(str)
    if "protocol" in frame:
        frame["protocol"] = frame.protocol.astype("string").fillna("").astype(str)
    if "nccl_pick" in frame:
        frame["nccl_pick"] = frame.nccl_pick.map({True: True, False: False, "True": True,
                                                  "False": False}).astype("boolean")
    return frame


def limits_beside(path: Path, sizes: Iterable[int]) -> tuple[LinkRate | None, Ceiling | None,
                                                            str]:
    """:func:`limits` of the scenario the JSON settings beside a results file describe
    (``<name>.json``), and, when there are none, why (empty when there are). A training model
    it names as ``{torch: MODULE:FACTORY}`` is never imported (:class:`Imports` ``SKIP``): the
    figures need only the topology."""
    settings = path.with_suffix(".json")
    try:
        described = json.loads(settings.read_text(encoding="utf-8"))["scenario"]
        scenario = scenario_from_dict(described, source=str(settings), imports=Imports.SKIP)
    except FileNotFoundError:
        return None, None, f"{settings} not found"
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, InputError) as error:
        detail = error.problems[0] if isinstance(error, InputError) else type(error).__name__
        return None, None, f"{settings} does not describe a scenario ({detail})"
    rate, ceiling = limits(scenario, sizes)
    return rate, ceiling, "" if rate is not None else "fewer than two ranks"
