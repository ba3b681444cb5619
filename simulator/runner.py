"""Runs a scenario: every (algorithm, size) point simulated, verified and set beside its closed form.

This is the library's entry point: :func:`simulate` takes a :class:`~simulator.scenario.Scenario`
and returns a pandas DataFrame whose columns start with :data:`RESULT_COLUMNS` (DESIGN.md §3).
"""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass, fields

import networkx as nx
import numpy as np
import pandas as pd

from simulator.collective import Collective
from simulator.collectives import REGISTRY, Algorithm, Options, get_algorithm
from simulator.collectives.phases import PIPELINE_BYTES
from simulator.costmodel import CostInputs
from simulator.data import DEFAULT_PROXY_ELEMENTS, Expected, Payload, make_inputs
from simulator.engine import run_collective
from simulator.errors import InputError, Problem
from simulator.network import Routing
from simulator.program import Layout
from simulator.scenario import Scenario
from simulator.topology import hosts, placement


@dataclass(frozen=True)
class Result:
    """One row of the results file: an (algorithm, size) point of a scenario.

    ``algbw = size / time`` and ``busbw = algbw × factor`` with nccl-tests' factor
    (allreduce: 2(p-1)/p), in GB/s of 10^9 bytes; both are NaN when the time is zero (p = 1).
    ``verified`` is None when verification was off. ``verified_elements`` is how many elements
    per rank the numpy check covered: ``count`` itself, or a proxy with the same partitioning.
    """

    scenario: str
    topology: str
    ranks: int
    collective: str
    algorithm: str
    size_bytes: int
    dtype: str
    op: str
    sim_time_s: float
    model_time_s: float
    algbw_GBps: float
    busbw_GBps: float
    verified: bool | None
    max_abs_error: float
    count: int
    verified_elements: int
    messages: int
    events: int


RESULT_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Result))
"""Column order of the results file; the first 14 are the public contract of DESIGN.md §3."""


@dataclass(frozen=True)
class Setup:
    """What every point of a scenario shares: the built topology and its routes."""

    graph: nx.DiGraph
    placement: tuple[str, ...]
    routing: Routing
    cost: CostInputs


def prepare(scenario: Scenario) -> Setup:
    """Build the scenario's topology, place ranks on its GPUs, and set up routes and costs."""
    graph = scenario.topology.build()
    ranks = placement(graph)
    routing = Routing(graph)
    cost = CostInputs(len(ranks), ranks, routing, scenario.gpu, itemsize=scenario.dtype.itemsize,
                      chunk_bytes=scenario.chunk_bytes, layout=Layout(hosts(graph, ranks)))
    return Setup(graph, ranks, routing, cost)


def select_algorithms(scenario: Scenario, setup: Setup) -> list[Algorithm]:
    """The scenario's algorithms, or every applicable one for ``all``; InputError if one the
    scenario names cannot run on its topology."""
    registered = {name: algorithm.configure(_options(scenario))
                  for name, algorithm in REGISTRY[scenario.collective].items()}
    if scenario.algorithms is None:
        chosen = [a for a in registered.values()
                  if a.unsupported(setup.graph, setup.placement) is None]
        if not chosen:
            raise InputError([Problem(scenario.source, "algorithms",
                                      f"no {scenario.collective.value} algorithm applies to "
                                      f"topology {scenario.topology.label}")])
        return chosen
    problems, chosen = [], []
    for i, name in enumerate(scenario.algorithms):
        algorithm = registered[name]
        reason = algorithm.unsupported(setup.graph, setup.placement)
        if reason:
            problems.append(Problem(scenario.source, f"algorithms[{i}]",
                                    f"{name!r} cannot run on topology "
                                    f"{scenario.topology.label}: {reason}"))
        chosen.append(algorithm)
    if problems:
        raise InputError(problems)
    return chosen


PROXY_BUDGET_BYTES = 2 << 30
"""Most memory the ranks' proxy buffers may take together (the machine has 24 GiB; the inputs,
the expected result and per-message copies come on top)."""


def _check_memory(scenario: Scenario, ranks: int, proxy_elements: int) -> None:
    for size in scenario.sizes:
        payload = Payload.for_size(size, scenario.dtype, ranks, proxy_elements,
                                   scenario.chunk_bytes or PIPELINE_BYTES)
        need = ranks * payload.proxy_count * scenario.dtype.itemsize
        if need > PROXY_BUDGET_BYTES:
            raise InputError([Problem(scenario.source, "sizes",
                                      f"{size} bytes on {ranks} ranks needs {need >> 20} MiB of "
                                      f"data to verify, more than {PROXY_BUDGET_BYTES >> 20} MiB; "
                                      "use a larger chunk_size, fewer ranks or --proxy-elements")])


def _options(scenario: Scenario) -> Options:
    return Options(inter=get_algorithm(Collective.ALLREDUCE, scenario.inter_algorithm))


def run_point(scenario: Scenario, setup: Setup, algorithm: Algorithm, size_bytes: int,
              *, seed: int = 0, proxy_elements: int = DEFAULT_PROXY_ELEMENTS) -> Result:
    """Simulate one collective of ``size_bytes`` per rank and check it against numpy.

    Inputs are drawn from a generator seeded by ``(seed, size_bytes)``, so every algorithm of a
    scenario reduces the same data at the same size, and reruns are identical.
    """
    ranks = len(setup.placement)
    payload = Payload.for_size(size_bytes, scenario.dtype, ranks, proxy_elements,
                               scenario.chunk_bytes or PIPELINE_BYTES)
    buffers = make_inputs(np.random.default_rng([seed, size_bytes]), ranks, payload, scenario.op)
    collective = scenario.collective
    expected = (Expected.of(buffers, scenario.op, collective, payload) if scenario.verify
                else None)
    timing = run_collective(algorithm, setup.placement, setup.routing, scenario.gpu, payload,
                            buffers, scenario.op, scenario.chunk_bytes)
    if collective.reduces:
        scenario.op.finalize(buffers, ranks)
    verified, error = expected.check(buffers) if expected is not None else (None, math.nan)
    model = algorithm.model_time(setup.cost, payload.count)
    algbw = size_bytes / timing.time_s / 1e9 if timing.time_s > 0 else math.nan
    return Result(
        scenario=scenario.name, topology=scenario.topology.label, ranks=ranks,
        collective=collective.value, algorithm=algorithm.name, size_bytes=size_bytes,
        dtype=scenario.dtype.name, op=scenario.op.value, sim_time_s=timing.time_s,
        model_time_s=model, algbw_GBps=algbw,
        busbw_GBps=algbw * collective.busbw_factor(ranks), verified=verified,
        max_abs_error=error, count=payload.count, verified_elements=payload.proxy_count,
        messages=timing.messages, events=timing.events,
    )


def simulate(scenario: Scenario, *, seed: int = 0,
             proxy_elements: int = DEFAULT_PROXY_ELEMENTS) -> pd.DataFrame:
    """Every (algorithm, size) point of ``scenario``, one row each, columns :data:`RESULT_COLUMNS`.

    >>> from simulator import load_scenario  # doctest: +SKIP
    >>> simulate(load_scenario("scenarios/dgx.yaml"))[["size_bytes", "busbw_GBps"]]  # doctest: +SKIP
    """
    setup = prepare(scenario)
    algorithms = select_algorithms(scenario, setup)
    _check_memory(scenario, len(setup.placement), proxy_elements)
    rows = [astuple(run_point(scenario, setup, algorithm, size, seed=seed,
                              proxy_elements=proxy_elements))
            for algorithm in algorithms for size in scenario.sizes]
    frame = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    return frame.astype({"verified": "boolean"})
