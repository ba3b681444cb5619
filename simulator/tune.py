"""Tuning NCCL from a simulation: every kernel NCCL could run on a scenario's machine, with every
protocol NCCL runs it with, simulated at the scenario's sizes, and set beside NCCL's own pick, to
write the tuner configuration of NCCL's example tuner plugin
(:mod:`simulator.output.tuner_conf`).

The candidates are the registered schedules of NCCL's own kernels (``NcclBinding.kernel``:
``ring``, ``double_binary_tree``, ``nvls``, ...), the only ones a tuner file can ask NCCL for,
that run on the machine and that the scenario's ``algorithms`` list names (all of them under
``all`` or ``auto``); each runs with the scenario's ``protocol``, or with each protocol NCCL runs
its family with that ``nccl.proto`` leaves. NCCL's pick at every size must be among them (it is
the point of comparison), so a list that leaves it out is refused before anything runs. Every
candidate is planned with each of its protocols at every size (``plan_point(...,
protocol=)``), protocol by protocol, then run point by point as ``run`` runs them.
May import: the runner, plan, output, scenario, algorithms, model, settings, version and errors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.algorithms.algorithm import Algorithm
from simulator.algorithms.registry import REGISTRY
from simulator.errors import InputError, Problem, quoted
from simulator.model.execution import Execution, system_of
from simulator.model.nccl import CANDIDATES, Protocol, choose, protocols_of
from simulator.model.nccl_terms import Library
from simulator.output.results import Result, results_frame
from simulator.output.tuner_conf import SizeChoice, TunerRow, choices, tuner_rows
from simulator.plan import Setup, as_scenario, check_memory, plan_point, prepare, unsupported
from simulator.runner import run_plan, settings_of
from simulator.scenario.spec import Scenario
from simulator.version import __version__


@dataclass(frozen=True)
class Tuning:
    """What :func:`tune` found: the scenario, every point simulated (the results frame), per size
    NCCL's pick beside the fastest kernel, the rows for the tuner file, NCCL's view of the
    communicator (``nodes``, ``ranks``), and the candidates with their protocols."""

    scenario: Scenario
    results: pd.DataFrame
    chosen: tuple[SizeChoice, ...]
    rows: tuple[TunerRow, ...]
    nodes: int
    ranks: int
    candidates: Mapping[str, tuple[Protocol, ...]]

    def about(self, command: str) -> list[str]:
        """The tuner file's opening paragraphs: what it is, how to load it, what it was
        simulated from (``command``, the scenario, the machine as NCCL counts it, the
        candidates) and what its rows say; nothing that changes between reruns (no date, no
        output path), so a rerun writes the same bytes."""
        scenario = self.scenario
        sizes = [choice.size_bytes for choice in self.chosen]
        kernels = "; ".join(f"{name} ({scenario.algorithm(name).nccl.family.value}) with "
                            f"{', '.join(p.value for p in protocols)}"
                            for name, protocols in self.candidates.items())
        env = ", ".join(f"{name} {quoted(value)}" for name, value in
                        (("nccl.algo", scenario.nccl.algo), ("nccl.proto", scenario.nccl.proto))
                        if value)
        return [
            "NCCL tuner configuration: the CSV of NCCL's example tuner plugin "
            "(plugins/tuner/example of NVIDIA/nccl). Load it with "
            "NCCL_TUNER_PLUGIN=libnccl-tuner-example.so NCCL_TUNER_CONFIG_FILE=<this file>. As "
            "shipped, that plugin runs every collective on one channel: build it with "
            "'*nChannels = 0;' in pluginGetCollInfo (docs/tune.md).",
            f"Written by allreduce-sim {__version__}: {command}",
            f"Simulated: scenario {scenario.name}, topology {scenario.topology.label} "
            f"({self.ranks} ranks on {self.nodes} node{'s' if self.nodes != 1 else ''} as NCCL "
            f"counts them), {scenario.collective.value} of {scenario.dtype.name} "
            f"{scenario.reduce_op.value}, execution: nccl, NCCL {scenario.nccl.version.value}'s "
            "tuner" + (f" under {env}" if env else "") + f"; sizes {sizes[0]} to {sizes[-1]} "
            f"bytes ({len(sizes)}).",
            f"Candidates: NCCL's kernels {kernels}.",
            "A row where the fastest simulated candidate beats NCCL's pick. Each size decides "
            "the bytes between the geometric midpoints with its neighbours; outside the sizes "
            "simulated, and where no row matches, NCCL keeps its pick. channels -1: NCCL's own "
            "count (the simulation does not vary NCCL's channels); numPipeOps 1: a lone "
            "collective, as simulated; regBuff -1: registered buffers or not. A model's times, "
            "not measurements: check each row with nccl-tests before trusting it "
            "(docs/tune.md).",
        ]


def tune(scenario: str | Path | Mapping[str, Any] | Scenario, *, seed: int | None = None,
         proxy_elements: int | None = None,
         progress: Callable[[int, int], None] | None = None) -> Tuning:
    """Simulate every candidate (the module's docstring) at the scenario's sizes and derive the
    tuner file's rows. ``progress(done, total)`` is called as points finish. InputError (before
    anything runs) where the scenario cannot be tuned: not under ``execution: nccl``, a
    collective NCCL's model does not pick for, one rank, faults, a training step, registered
    symmetric buffers, or a list of algorithms that leaves out a kernel NCCL picks.
    ``progress(0, total)`` comes first, once every point is planned."""
    scenario = as_scenario(scenario)
    _check(scenario)
    settings = settings_of(scenario, seed, proxy_elements)
    setup = prepare(scenario, select=False)
    if setup.machine.library is not Library.NCCL:
        raise InputError([Problem(scenario.source, "nccl.library", (
            f"expected a machine that runs NCCL: tune writes NCCL's tuner plugin file, and "
            f"topology {scenario.topology.label} runs {setup.machine.library.value.upper()}, "
            f"whose tuning is not modelled here"))])
    if setup.machine.ranks < 2:
        raise InputError([Problem(scenario.source, "topology", "expected 2 ranks or more: one "
                                                               "rank moves nothing")])
    system = system_of(setup.machine)
    kernels = _kernels(scenario, setup)
    candidates = _candidates(scenario, kernels)
    _check_picks(scenario, setup, kernels, candidates)
    runs = [(protocol, names) for protocol in Protocol
            if (names := tuple(name for name, protocols in candidates.items()
                               if protocol in protocols))]
    for _, names in runs:  # the machine is built once
        check_memory(scenario, replace(setup, algorithms=tuple(kernels[n] for n in names)),
                     settings)
    plans = [plan_point(scenario, setup, kernels[name], size, settings, protocol=protocol)
             for protocol, names in runs for name in names for size in scenario.sizes]
    if progress is not None:
        progress(0, len(plans))
    results: list[Result] = []
    for plan in plans:
        results.append(run_plan(plan))
        if progress is not None:
            progress(len(results), len(plans))
    frame = results_frame(results)
    chosen = choices(frame)
    rows = tuner_rows(chosen, scenario.collective, system.nodes, system.ranks)
    return Tuning(scenario, frame, chosen, rows, system.nodes, system.ranks, candidates)


def _check(scenario: Scenario) -> None:
    """InputError where a tuner file could not come of the scenario."""
    problem = None
    if scenario.training is not None:
        problem = ("training", "expected a scenario of sizes: tune compares NCCL's pick per size")
    elif scenario.execution is not Execution.NCCL:
        problem = ("execution", "expected execution: nccl: a tuner file chooses among NCCL's "
                                "kernels and protocols, which only the nccl model times")
    elif scenario.collective not in CANDIDATES:
        problem = ("collective", f"expected {', '.join(c.value for c in CANDIDATES)}: NCCL's "
                                 f"model picks for no other, got {scenario.collective.value}")
    elif scenario.faults:
        problem = ("faults", "expected none: a tuner file holds for the healthy machine NCCL's "
                             "tuner sees")
    elif scenario.nccl.symmetric:
        problem = ("nccl.symmetric", "expected false: on registered buffers NCCL runs its "
                                     "symmetric kernels ahead of any tuner plugin "
                                     "(src/scheduler/symmetric_sched.cc), which a tuner file "
                                     "cannot choose")
    if problem is not None:
        raise InputError([Problem(scenario.source, *problem)])


def _kernels(scenario: Scenario, setup: Setup) -> dict[str, Algorithm]:
    """NCCL's kernels the scenario names (all under ``all`` or ``auto``) that run on its
    machine and that ``nccl.algo`` leaves NCCL, in the registry's order."""
    named = set(scenario.algorithms) if scenario.algorithms is not None else None
    found = {}
    for name, registered in REGISTRY[scenario.collective].items():
        if not registered.nccl.kernel or (named is not None and name not in named):
            continue
        algorithm = scenario.algorithm(name)
        if (unsupported(scenario, algorithm, setup.machine) is None
                and algorithm.nccl.family in scenario.nccl_enabled.algorithms):
            found[name] = algorithm
    return found


def _candidates(scenario: Scenario, kernels: Mapping[str, Algorithm]
                ) -> dict[str, tuple[Protocol, ...]]:
    """The kernels to simulate and the protocols of each: the scenario's ``protocol``, or every
    protocol NCCL runs the kernel's family with that ``nccl.proto`` leaves."""
    found = {}
    for name, algorithm in kernels.items():
        protocols = protocols_of(algorithm.nccl.family, scenario.nccl_enabled,
                                 scenario.collective)
        if scenario.protocol is not None:
            protocols = tuple(p for p in protocols if p is scenario.protocol)
        if protocols:
            found[name] = protocols
    return found


def _check_picks(scenario: Scenario, setup: Setup, kernels: Mapping[str, Algorithm],
                 candidates: Mapping[str, Sequence[Protocol]]) -> None:
    """InputError unless NCCL's pick at every size is among the candidates, naming what left
    it out: the ``protocol`` or the ``algorithms`` list."""
    system = system_of(setup.machine)
    families = {algorithm.nccl.family for algorithm in kernels.values()}
    runs = {(kernels[name].nccl.family, protocol) for name, protocols in candidates.items()
            for protocol in protocols}
    for size in scenario.sizes:
        try:
            pick = choose(system, size, scenario.nccl_enabled, scenario.collective)
        except ValueError:
            raise InputError([Problem(scenario.source, "topology", (
                f"expected a machine NCCL's model picks on: it has no graphs for "
                f"{system.arch.name.title()} GPUs on {scenario.topology.label}"))]) from None
        if (pick.algorithm, pick.protocol) in runs:
            continue
        field, why = (("protocol", f"protocol {scenario.protocol.value} leaves it out")
                      if pick.algorithm in families and scenario.protocol is not None else
                      ("algorithms", "the list leaves out its kernel"))
        raise InputError([Problem(scenario.source, field, (
            f"NCCL picks {pick.algorithm.value}/{pick.protocol.value} at {size} bytes, and "
            f"{why}: tune compares every size's fastest kernel with NCCL's pick, so it must run "
            "(use algorithms: auto, and protocol: auto)"))])
