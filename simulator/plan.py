"""Planning: a scenario's machine and algorithms (:class:`Setup`), and each of its points planned
once (:func:`plan_point`), before anything is simulated.

A pure layer between the scenario and the engine: it builds the topology and places the ranks,
picks the algorithms, decides a point's channels, payload and NCCL's answer for it (its charges,
NCCL's predicted time, whether it is NCCL's pick: :mod:`simulator.model.nccl_point`), and
computes its closed form, all without running an engine. :func:`simulator.runner.run_plan` runs
a plan, :func:`simulator.runner.outlook` reads the plans before a run, and the trainer and
:mod:`simulator.distributed` plan their own points. May import the scenario, the algorithms, the model,
the engine's value types and the settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from simulator.algorithms.algorithm import Algorithm
from simulator.algorithms.channels import (
    channels_bound_s,
    footprint_on_channels,
    on_channels_s,
)
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.phases.pieces import PIPELINE_BYTES
from simulator.algorithms.registry import algorithm_names, runs_pick
from simulator.algorithms.schedule import Group
from simulator.engine.payload import Payload
from simulator.engine.plan import Labels, PointPlan
from simulator.engine.run import RunSpec
from simulator.errors import InputError, Problem, quoted
from simulator.limits import (
    MEMORY_BUDGET_BYTES,
    PAIR_BYTES,
    PROXY_BUDGET_BYTES,
    SIMPY_HELD_BYTES,
    SIMPY_MESSAGE_S,
    TRACE_ENTRY_BYTES,
    VECTOR_ENTRY_BYTES,
    VECTOR_FAULTED_MESSAGE_S,
    VECTOR_MESSAGE_S,
)
from simulator.model.collective import Collective
from simulator.model.execution import Execution, apply, stream_choices
from simulator.model.faults import Fault, fault_problem, with_faults
from simulator.model.machine import Machine
from simulator.model.nccl import Protocol
from simulator.model.nccl_env import NVLS_FAMILIES
from simulator.model.nccl_point import NcclRefusal, nccl_pick, nccl_point
from simulator.model.nccl_terms import Library, NcclAlgorithm
from simulator.model.nccl_view import with_view
from simulator.model.rccl_execution import ring_channels, with_rings
from simulator.scenario.parse import load_scenario, scenario_from_dict
from simulator.scenario.spec import Scenario, TopologySpec
from simulator.scenario.training import Imports
from simulator.settings import Engine, RunSettings
from simulator.units import format_size


@dataclass(frozen=True)
class Setup:
    """What every point of a scenario shares: the topology and the machine built from it, the
    closed forms' inputs, and the algorithms to run (configured with the scenario's options)."""

    topology: TopologySpec
    machine: Machine
    cost: CostInputs
    algorithms: tuple[Algorithm, ...]


@dataclass(frozen=True)
class Point:
    """A point a run simulates, before it is planned: ``algorithm`` at ``size_bytes``, and under
    ``algorithms: auto`` the protocol NCCL runs it with (its pick's), which the point's plan
    must get for the point to be NCCL's pick."""

    algorithm: Algorithm
    size_bytes: int
    protocol: Protocol | None = None

    @property
    def label(self) -> str:
        """How a note names the point: ``one_shot at 2GiB``, or under ``auto`` ``NCCL's pick at
        2GiB (ring/Simple)``."""
        size = format_size(self.size_bytes)
        if self.protocol is None:
            return f"{self.algorithm.name} at {size}"
        return f"NCCL's pick at {size} ({self.algorithm.name}/{self.protocol.value})"

    def left_out(self, reason: str) -> LeftOut:
        """This point left out of ``all`` or ``auto``, and why."""
        return LeftOut(self.size_bytes, reason, self.label, self.algorithm.name)


@dataclass(frozen=True)
class LeftOut:
    """A point ``all`` or ``auto`` leaves out, or a size at which NCCL's model picks nothing
    (``algorithm`` None), and why: said on stderr before the run (:attr:`note`) and on its own
    row of the table (issue 41: a size that cannot be answered says why, on its row)."""

    size_bytes: int
    reason: str
    """Why, as the row gives it: ``execution: NCCL runs no ...``."""
    label: str
    """How the note names the point: :attr:`Point.label`, or ``no point at 4GiB``."""
    algorithm: str | None = None

    @property
    def note(self) -> str:
        """The line said on stderr: ``one_shot at 2GiB left out: execution: ...``."""
        if self.algorithm is None:
            return f"{self.label}: {self.reason}"
        return f"{self.label} left out: {self.reason}"


def as_scenario(scenario: str | Path | Mapping[str, Any] | Scenario, *,
                imports: Imports = Imports.REFUSE) -> Scenario:
    """A scenario from a path to a YAML file, a mapping (as :func:`scenario_from_dict`) or itself;
    a ``{torch: ...}`` training model in a file or mapping is imported only as ``imports`` says."""
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, Mapping):
        return scenario_from_dict(scenario, imports=imports)
    return load_scenario(scenario, imports=imports)


def prepare(scenario: Scenario, *, select: bool = True, topology: TopologySpec | None = None,
            faults: Sequence[Fault] | None = None) -> Setup:
    """Build the scenario's topology (or ``topology``, such as a training sweep's), place ranks
    on its GPUs, and (unless ``select`` is False) pick its algorithms; InputError if one the
    scenario names cannot run on it, or if one of ``faults`` (None: the scenario's; ``()`` for
    a topology the scenario's faults do not name) names what the machine does not have."""
    topology = topology or scenario.topology
    machine = Machine.of(topology.build(), scenario.gpu)
    if scenario.nccl.version is not machine.nccl.version:  # the NCCL whose tuner picks
        machine = replace(machine, nccl=replace(machine.nccl, version=scenario.nccl.version))
    if scenario.nccl.view is not None:  # NCCL's own graphs and rings, from its dump or log
        machine = with_view(machine, scenario.nccl.view, scenario.source,
                            f"nccl.{scenario.nccl.view_key}")
    library = scenario.nccl.library
    if library is not None and library is not machine.library:
        raise InputError([Problem(scenario.source, "nccl.library", _library_mismatch(
            library, machine, topology.label))])
    if machine.library is Library.RCCL and scenario.execution is Execution.NCCL:
        machine = with_rings(machine)  # RCCL's rings as its channels' orders
    problems = []
    per_thread = scenario.nccl.gpus_per_thread
    if per_thread != 1:  # one thread launching on several GPUs (nccl-tests' -g)
        problem = _thread_problem(per_thread, machine)
        if problem:
            problems.append(Problem(scenario.source, "nccl.gpus_per_thread", problem))
        machine = replace(machine, nccl=replace(machine.nccl, gpus_per_thread=per_thread))
    for i, fault in enumerate(scenario.faults if faults is None else faults):
        found = fault_problem(fault, machine, Execution(scenario.execution))
        if found is not None:
            problems.append(Problem(scenario.source, f"faults[{i}].{found[0]}", found[1]))
    if problems:
        raise InputError(problems)
    cost = CostInputs(machine, itemsize=scenario.dtype.itemsize, piece_bytes=scenario.piece_bytes)
    return Setup(topology, machine, cost, _select(scenario, machine) if select else ())


def _thread_problem(gpus_per_thread: int, machine: Machine) -> str:
    """What is wrong with one thread launching on ``gpus_per_thread`` GPUs of ``machine``
    (empty: nothing): a thread drives GPUs of its own host, and every thread as many (nccl-tests
    runs nProcs × nThreads × nGpus ranks, src/common.cu), so the count divides each host's."""
    hosts = sorted(set(machine.layout.ranks_per_host))
    if all(count % gpus_per_thread == 0 for count in hosts):
        return ""
    return (f"expected a divisor of the GPUs of a host ({', '.join(map(str, hosts))}): one "
            f"thread drives GPUs of its own host, every thread as many, got {gpus_per_thread}")


def _library_mismatch(library: Library, machine: Machine, topology: str) -> str:
    """What ``nccl.library`` should have said on ``machine`` (issue 38)."""
    gpus = ("AMD Instinct GPUs (compute capability 942, gfx942)"
            if machine.library is Library.RCCL else
            f"NVIDIA GPUs (compute capability {machine.compute_capability or 'not stated'})")
    return (f"expected {machine.library.value} on topology {topology}, whose {gpus} run "
            f"{machine.library.value.upper()}, got {library.value}")


def select_algorithms(scenario: Scenario, machine: Machine) -> tuple[Algorithm, ...]:
    """The algorithms the scenario runs on ``machine``: those it names (InputError if one
    cannot run there), else every registered one of its collective that applies."""
    return _select(scenario, machine)


def _select(scenario: Scenario, machine: Machine) -> tuple[Algorithm, ...]:
    if scenario.algorithms is None:
        registered = [scenario.algorithm(name) for name in algorithm_names(scenario.collective)]
        chosen = [algorithm for algorithm in registered
                  if unsupported(scenario, algorithm, machine) is None
                  and _runs_a_protocol_left(scenario, algorithm)]
        if not chosen:
            raise InputError([Problem(scenario.source, "algorithms",
                                      f"no {scenario.collective.value} algorithm applies to "
                                      f"topology {scenario.topology.label}")])
        return tuple(chosen)
    problems = []
    for i, name in enumerate(scenario.algorithms):
        reason = unsupported(scenario, scenario.algorithm(name), machine)
        if reason:
            problems.append(cannot_run(scenario, f"algorithms[{i}]", name, reason))
    if problems:
        raise InputError(problems)
    return tuple(scenario.algorithm(name) for name in scenario.algorithms)


def nccl_runs(scenario: Scenario, machine: Machine, size_bytes: int) -> Point | None:
    """The point NCCL runs for the scenario's collective of ``size_bytes`` per rank on
    ``machine``, as nccl-tests does with NCCL's defaults (:func:`nccl_pick`: with
    ``nccl.symmetric`` an allreduce's symmetric kernel where NCCL launches one, else its
    tuner's family and protocol among those ``nccl`` leaves), run by the registered algorithm
    NCCL's pick runs on (:func:`runs_pick`: the one whose binding holds the symmetric kernel,
    or NCCL's own kernel of the family), with the scenario's options. None where NCCL's model
    picks nothing (one rank, whose buffer NCCL copies; GPUs it has no graphs for). The one rule
    for ``algorithms: auto``, a training step's ``auto`` and :mod:`simulator.distributed`'s calls; a
    point's own ``nccl_pick`` (:func:`~simulator.model.nccl_point.nccl_point`) follows it."""
    pick = nccl_pick(machine, size_bytes, scenario.collective, scenario.nccl,
                     dtype=scenario.dtype.name, op=scenario.reduce_op)
    if pick is None:
        return None
    algorithm = runs_pick(scenario.collective, pick)  # every pick NCCL makes is registered
    return Point(scenario.algorithm(algorithm.name), size_bytes, pick.protocol)


def points_of(scenario: Scenario,
              setup: Setup) -> tuple[tuple[Point, ...], tuple[LeftOut, ...]]:
    """The points a run of ``scenario`` on ``setup`` simulates, in its order, before they are
    planned, and a note for each size that has none. With ``algorithms: auto`` NCCL's pick at
    each size (:func:`nccl_runs`), ordered as when every algorithm ran (by algorithm, in the
    registry's order, then by size) so that its rows are those runs' pick rows; otherwise every
    algorithm of ``setup`` at every size."""
    if not scenario.nccl_choice:
        return tuple(Point(algorithm, size) for algorithm in setup.algorithms
                     for size in scenario.sizes), ()
    picked, notes = [], []
    for size in scenario.sizes:
        point = nccl_runs(scenario, setup.machine, size)
        if point is None:
            notes.append(LeftOut(size, f"NCCL's model picks no algorithm on topology "
                                       f"{setup.topology.label}", f"no point at {format_size(size)}"))
        else:
            picked.append(point)
    order = algorithm_names(scenario.collective)
    return tuple(sorted(picked, key=lambda point: order.index(point.algorithm.name))), tuple(notes)


def _runs_a_protocol_left(scenario: Scenario, algorithm: Algorithm) -> bool:
    """Whether NCCL runs the algorithm with a protocol ``nccl.proto`` leaves (always under
    ``execution: ideal``, which has no protocols; :meth:`NcclBinding.leaves_a_protocol
    <simulator.model.nccl_point.NcclBinding.leaves_a_protocol>`): ``all`` (and ``auto``'s
    algorithms, those a training step falls back on) leave out the others, such as ``nvls``
    when only LL128 is left, or ``one_shot`` (LL) when only Simple is."""
    return (scenario.execution is Execution.IDEAL
            or algorithm.nccl.leaves_a_protocol(scenario.nccl, scenario.collective))


def unsupported(scenario: Scenario, algorithm: Algorithm, machine: Machine) -> str | None:
    """Why ``algorithm`` cannot run on ``machine`` in ``scenario``: where it cannot run at all,
    or, under ``execution: nccl``, where NCCL would not run it, NVLS and NVLSTree included with
    ``nccl.nvls: false`` (None when it can)."""
    reason = algorithm.unsupported(machine)
    if reason is None and scenario.execution is Execution.NCCL:
        reason = algorithm.nccl.unsupported(machine)
        if reason is None and not scenario.nccl.nvls and algorithm.nccl.family in NVLS_FAMILIES:
            reason = ("NCCL runs no NVLS or NVLSTree with nccl.nvls: false (NCCL_NVLS_ENABLE=0 "
                      "creates no multicast objects)")
    return reason


def cannot_run(scenario: Scenario, field: str, name: str, reason: str) -> Problem:
    """The problem of an algorithm the scenario's topology cannot run, and why."""
    return Problem(scenario.source, field, f"{quoted(name)} cannot run on topology "
                                           f"{scenario.topology.label}: {reason}")


def channels_for(scenario: Scenario, machine: Machine, algorithm: Algorithm,
                 size_bytes: int) -> int:
    """The channels an allreduce of ``size_bytes`` runs on: the scenario's ``channels``, or with
    ``auto`` one per GPU of a host where the ranks span several hosts under ``execution: nccl``
    (each GPU's NIC then carries one channel's crossing, as NCCL's rings use every rail) and one
    otherwise (on one host, on the ideal wire, or for a schedule that spreads over the rails
    itself); RCCL's ring on one host runs on RCCL's channels, each on its own ring order
    (:func:`~simulator.model.rccl_execution.ring_channels`: 56 on an MI300X node). NCCL's ring
    reduce-scatter and allgather run across hosts on as many, each channel on a part of every
    rank's chunk (:func:`~simulator.algorithms.channels.channel_shares`; NCCL's rings run them
    on every channel: src/device/reduce_scatter.h, all_gather.h ``ncclCollCbdPart``); every
    other collective on one. Never more than leave each channel an element per rank: NCCL too
    runs fewer channels on small buffers."""
    ring = algorithm.nccl.kernel and algorithm.nccl.family is NcclAlgorithm.RING
    by_chunks = scenario.collective.by_rank_chunks and ring
    if scenario.collective is not Collective.ALLREDUCE and not by_chunks:
        return 1
    wanted = scenario.channels
    if wanted is None and algorithm.rail_aware:
        wanted = 1
    if wanted is None:
        per_host = machine.layout.ranks_per_host
        several = machine.layout.host_count > 1 and len(per_host) == 1
        nccl = scenario.execution is Execution.NCCL
        wanted = next(iter(per_host)) if several and nccl else 1
        if (nccl and not several and not by_chunks and machine.library is Library.RCCL
                and machine.layout.rings and ring):
            wanted = ring_channels(machine)  # RCCL's ring: 56 channels on its 28 rings
    count = size_bytes // scenario.dtype.itemsize
    return max(1, min(wanted, count // machine.ranks))


def payload_of(scenario: Scenario, settings: RunSettings, size_bytes: int, ranks: int,
               channels: int, whole_chunks: int = 1) -> Payload:
    """A point's payload; with ``verify`` off a timing-only one that moves no data, so the
    memory of a run grows with its messages and not with ranks × chunks. ``whole_chunks``: the
    algorithm's (``Algorithm.whole_chunks``), which the proxy keeps equal."""
    if not settings.verify:
        return Payload.timing_only(size_bytes, scenario.dtype)
    return Payload.for_size(size_bytes, scenario.dtype, ranks, settings.proxy_elements,
                            scenario.piece_bytes or PIPELINE_BYTES, channels, whole_chunks)


def chunking_problem(scenario: Scenario, algorithm: Algorithm, size_bytes: int,
                     channels: int, ranks: int) -> Problem | None:
    """Why ``algorithm`` cannot run a buffer of ``size_bytes`` on ``channels`` channels where it
    cuts the buffer into equal chunks (``Algorithm.whole_chunks``) or keeps a workspace: a
    count that is not a multiple of the chunks (MSCCL runs a schedule only on such counts), or
    several channels (the algorithm places its traffic on channels itself); None otherwise."""
    chunks, itemsize = algorithm.whole_chunks(ranks), scenario.dtype.itemsize
    if (size_bytes // itemsize) % chunks:
        return Problem(scenario.source, "sizes", (
            f"{quoted(algorithm.name)} cuts each rank's buffer into {chunks} equal chunks: expected "
            f"sizes that are multiples of {chunks * itemsize} bytes ({chunks} "
            f"{scenario.dtype.name} elements), got {size_bytes}"))
    if channels > 1 and (chunks > 1 or algorithm.workspace_chunks()):
        return Problem(scenario.source, "channels", (
            f"{quoted(algorithm.name)} places its traffic on channels itself: expected channels: "
            f"auto or 1, got {channels}"))
    return None


def plan_point(scenario: Scenario, setup: Setup, algorithm: Algorithm, size_bytes: int,
               settings: RunSettings, *, protocol: Protocol | None = None,
               faults: Sequence[Fault] | None = None) -> PointPlan:
    """The point of ``algorithm`` at ``size_bytes`` on ``setup``'s machine, planned once: its
    channels, payload, NCCL's answer under ``execution: nccl`` (:func:`~simulator.model.
    nccl_point.nccl_point`: its charges with ``protocol``, or where that is None the scenario's,
    or where that is None too the one NCCL's model picks for the algorithm's family at this
    size; NCCL's predicted time; whether it is NCCL's pick), the machine and closed-form inputs
    as the execution model times them, the start paid before the first byte, and the closed
    form. ``settings`` say whether data moves, which engine runs and the inputs' seed;
    ``faults`` those the point suffers (None: the scenario's). What to plan is said here, so
    that no caller makes a scenario of its own to say it. Where the scenario sets no
    ``piece_size`` and NCCL's charges name the pieces its kernel moves (NVLSTree on Hopper), the
    payload, closed form and run take those; the footprint check before NCCL's answer counts
    the schedule's default 512 KiB pieces, as many as NCCL's or more but below 8 MiB (half as
    many, at sizes too small to matter). InputError if the algorithm cannot run on the machine
    or NCCL's model cannot time it."""
    reason = unsupported(scenario, algorithm, setup.machine)
    if reason:
        raise InputError([cannot_run(scenario, "algorithm", algorithm.name, reason)])
    ranks = setup.machine.ranks
    channels = channels_for(scenario, setup.machine, algorithm, size_bytes)
    problem = chunking_problem(scenario, algorithm, size_bytes, channels, ranks)
    if problem is not None:
        raise InputError([problem])
    _check_footprint(scenario, setup.machine, algorithm, size_bytes, settings, channels)
    chunks = algorithm.whole_chunks(ranks)
    machine, cost, nccl = setup.machine, setup.cost, None
    count = size_bytes // scenario.dtype.itemsize
    workspace = count // chunks * algorithm.workspace_chunks()
    if scenario.execution is not Execution.IDEAL:
        protocol = scenario.protocol if protocol is None else protocol
        try:
            nccl = nccl_point(machine, algorithm.nccl, size_bytes, scenario.collective,
                              scenario.nccl, protocol, dtype=scenario.dtype.name,
                              op=scenario.reduce_op)
        except NcclRefusal as refusal:
            raise InputError([Problem(scenario.source, refusal.field,
                                      f"{quoted(algorithm.name)}: {refusal.message}")]) from None
        if scenario.piece_bytes is None and nccl.charges.piece_bytes is not None:
            # the pieces NCCL's kernel moves at this size: the payload, closed form and run's
            scenario = replace(scenario, piece_bytes=nccl.charges.piece_bytes)
            cost = replace(cost, piece_bytes=scenario.piece_bytes)
        machine = apply(nccl.charges, machine)
        timed = replace(cost, machine=machine)
        streamed = [replace(timed, stream_bytes=piece) for piece in stream_choices(size_bytes)]
        closed, cost = min(((on_channels_s(algorithm, c, count, channels), c) for c in streamed),
                           key=lambda timed_cost: timed_cost[0])  # the first of equals, as min's
        if cost.stream_bytes is not None:  # the phases streamed in pieces: counted again
            _check_footprint(scenario, setup.machine, algorithm, size_bytes, settings, channels,
                             cost.stream_bytes)
    else:
        closed = on_channels_s(algorithm, cost, count, channels)
    closed = channels_bound_s(algorithm, cost, count, channels, closed)  # stream chosen alone
    payload = payload_of(scenario, settings, size_bytes, ranks, channels, chunks)
    start = nccl.charges.start_s if nccl is not None and ranks > 1 else 0.0
    spec = RunSpec(payload, scenario.reduce_op, scenario.piece_bytes, channels, cost.stream_bytes,
                   workspace)
    faults = tuple(scenario.faults if faults is None else faults)
    healthy = machine if faults else None
    labels = Labels(scenario.name, setup.topology.label, scenario.collective, scenario.dtype,
                    scenario.reduce_op, Execution(scenario.execution))
    return PointPlan(scenario.source, labels, algorithm, size_bytes, with_faults(machine, faults),
                     cost, spec, nccl, start, closed + start, settings, healthy, faults)


def vectorised(algorithm: Algorithm, engine: Engine) -> bool:
    """Whether ``engine`` builds the algorithm's schedule for the vectorised engine (``auto``
    does where there is a builder, or the algorithm asks for its trace there, and builds it
    even where the engine then declines it: :func:`simulator.engine.executor.run`)."""
    if engine is Engine.AUTO:
        return algorithm.has_builder() or algorithm.trace_vectorised
    return engine is Engine.VECTOR


def wall_estimate_s(plan: PointPlan) -> tuple[int | None, float]:
    """The messages of ``plan``'s schedule, counted without building it (None where its
    algorithm does not count them), and at most how long they may take to simulate: each at
    the most a message took on this machine on the engine it runs on (simulator/limits.py;
    0.0 where not counted)."""
    spec = plan.spec
    group = Group.whole(plan.machine, spec.payload.count, spec.payload.dtype.itemsize,
                        spec.piece_bytes, spec.stream_bytes)
    counted = footprint_on_channels(plan.algorithm, group, plan.machine.layout, spec.channels)
    if counted is None:
        return None, 0.0
    if not vectorised(plan.algorithm, plan.settings.engine):
        each = SIMPY_MESSAGE_S
    else:
        each = VECTOR_FAULTED_MESSAGE_S if plan.faults else VECTOR_MESSAGE_S
    return counted.entries, counted.entries * each


def traced_problem(plan: PointPlan) -> str | None:
    """Why ``plan``'s point, whose schedule is traced as it runs rather than counted
    (:func:`wall_estimate_s`'s None), would hold more entries than the engine lets a trace
    hold (``MEMORY_BUDGET_BYTES // TRACE_ENTRY_BYTES``, simulator/engine/executor.py:82), which
    it would only find out after allocating them: at least two entries a rank for each
    pipeline piece of the buffer (NVLS's program, simulator/algorithms/nvls.py:62-66, a piece
    up and its sum down; the one NCCL pick whose schedule is traced). None where it would not,
    or where its schedule is counted (:func:`footprint_problem` then)."""
    if wall_estimate_s(plan)[0] is not None:
        return None
    piece = plan.spec.piece_bytes or PIPELINE_BYTES
    entries = 2 * plan.machine.ranks * -(-plan.size_bytes // piece)
    limit = MEMORY_BUDGET_BYTES // TRACE_ENTRY_BYTES
    if entries <= limit:
        return None
    return (f"expected a size whose schedule fits a point: {plan.algorithm.name} at "
            f"{plan.size_bytes} bytes on {plan.machine.ranks} ranks traces at least "
            f"{entries:,} schedule entries (two a rank for each {piece}-byte pipeline piece), "
            f"more than the {limit:,} a point may hold ({TRACE_ENTRY_BYTES} bytes each, "
            f"simulator/limits.py); use smaller sizes")


def footprint_problem(scenario: Scenario, machine: Machine, algorithm: Algorithm,
                      size_bytes: int, settings: RunSettings, channels: int,
                      stream_bytes: int | None = None) -> Problem | None:
    """Why the point of ``algorithm`` at ``size_bytes`` on ``channels`` channels (its phases
    streamed in pieces of ``stream_bytes``) would take more memory than a point may (None
    where it would not, or where its algorithm does not count its schedule: the engine then
    watches it), counted without building anything (:meth:`Algorithm.footprint
    <simulator.algorithms.algorithm.Algorithm.footprint>`): its rank pairs' routes, and on
    the vectorised engine the schedule entries it holds at once, at the bytes each costs as
    measured (simulator/limits.py)."""
    itemsize = scenario.dtype.itemsize
    group = Group.whole(machine, size_bytes // itemsize, itemsize, scenario.piece_bytes,
                        stream_bytes)
    counted = footprint_on_channels(algorithm, group, machine.layout, channels)
    if counted is None:
        return None
    on_vector = vectorised(algorithm, settings.engine)
    if on_vector:
        held, each = counted.held, VECTOR_ENTRY_BYTES
        entries = f"{held:,} schedule entries held at once at {each} bytes, "
    else:
        held, each = simpy_held(counted.pairs, machine.ranks), SIMPY_HELD_BYTES
        entries = f"~{held:,} messages in flight and flow timers at {each} bytes, "
    need = held * each + counted.pairs * PAIR_BYTES
    if need <= MEMORY_BUDGET_BYTES:
        return None
    return Problem(scenario.source, "algorithms", (
        f"{quoted(algorithm.name)} at {size_bytes} bytes on {machine.ranks} ranks needs "
        f"~{need / 2**30:.1f} GiB to simulate on the {'vectorised' if on_vector else 'SimPy'} "
        f"engine ({entries}{counted.pairs:,} rank pairs at {PAIR_BYTES} bytes), more than the "
        f"{MEMORY_BUDGET_BYTES >> 30} GiB a point may take (simulator/limits.py); use fewer "
        "ranks, a larger piece_size or another algorithm"
        + ("" if on_vector else ", or engine: vector")))


def simpy_held(pairs: int, ranks: int) -> int:
    """The most messages in flight and flow timers the SimPy engine may hold at once for a
    point whose messages go between ``pairs`` pairs of ``ranks`` ranks: pairs² / (2 ranks).
    Every pair's flow may be under way at once, and each new flow re-times those sharing its
    links, as many as pairs per rank. Fitted to ``direct`` on a switch (SIMPY_HELD_BYTES),
    whose every pair sends at once (``Timing.held``, bench/memory.py ``--one``): at 40 ranks
    it held 31,558 (30,420 by this count), at 50 ranks 61,786 (60,025), at 60 ranks ~106,000
    (104,430). A ring's p pairs give p / 2: nothing to refuse."""
    return pairs * pairs // (2 * max(ranks, 1))


def _check_footprint(scenario: Scenario, machine: Machine, algorithm: Algorithm,
                     size_bytes: int, settings: RunSettings, channels: int,
                     stream_bytes: int | None = None) -> None:
    """InputError where :func:`footprint_problem` finds one."""
    problem = footprint_problem(scenario, machine, algorithm, size_bytes, settings, channels,
                                stream_bytes)
    if problem is not None:
        raise InputError([problem])


def check_memory(scenario: Scenario, setup: Setup, settings: RunSettings,
                 sizes: tuple[int, ...] | None = None, *,
                 points: Sequence[Point] | None = None, footprints: bool = True) -> None:
    """InputError, naming what would help, if a size's proxy buffers (of ``sizes``, default the
    scenario's) exceed the budget, or a point's schedule and routes would
    (:func:`footprint_problem`, every such point one line). The points are ``points`` (those a
    run simulates, :func:`points_of`) or every algorithm of ``setup`` at every size; without
    ``footprints`` their schedules are left to their plans, which refuse them one by one (where
    ``all`` and ``auto`` leave such a point out)."""
    ranks = setup.machine.ranks
    proxy_elements = settings.proxy_elements
    checked = scenario.sizes if sizes is None else sizes

    def algorithms_at(size: int) -> tuple[Algorithm, ...]:
        if points is None:
            return setup.algorithms
        return tuple(point.algorithm for point in points if point.size_bytes == size)

    for size in checked:
        algorithms = algorithms_at(size)
        if points is not None and not algorithms:
            continue
        channels = max((channels_for(scenario, setup.machine, algorithm, size)
                        for algorithm in algorithms), default=1)
        payload = payload_of(scenario, settings, size, ranks, channels)
        # an algorithm's own chunks and workspace (its proxy a multiple of the chunks, widened)
        proxy = max([payload.proxy_count, *(_proxy_with_workspace(
            scenario, settings, size, ranks, algorithm) for algorithm in algorithms)])
        need = ranks * proxy * scenario.dtype.itemsize
        if need > PROXY_BUDGET_BYTES:
            if payload.proxy_count > max(proxy_elements, 8 * ranks * channels):
                advice = "a larger piece_size (the proxy keeps two elements per pipeline piece)"
            elif payload.proxy_count > proxy_elements:
                advice = "fewer ranks (the proxy keeps eight elements per chunk)"
            else:
                advice = "a smaller --proxy-elements"
            advice += ", or verify: false to run for the time only"
            raise InputError([Problem(scenario.source, "sizes",
                                      f"{size} bytes on {ranks} ranks needs {need >> 20} MiB of "
                                      f"data to verify, more than {PROXY_BUDGET_BYTES >> 20} MiB; "
                                      f"use {advice}")])
    if not footprints:
        return
    problems = [problem for algorithm, size in (
                    ((point.algorithm, point.size_bytes) for point in points) if points is not None
                    else ((algorithm, size) for algorithm in setup.algorithms for size in checked))
                if (problem := footprint_problem(
                    scenario, setup.machine, algorithm, size, settings,
                    channels_for(scenario, setup.machine, algorithm, size))) is not None]
    if problems:
        raise InputError(problems)


def _proxy_with_workspace(scenario: Scenario, settings: RunSettings, size_bytes: int, ranks: int,
                          algorithm: Algorithm) -> int:
    """Proxy elements per rank a run of ``algorithm`` holds where it has chunks of its own or a
    workspace (else 0): its payload's (a multiple of its chunks) and its workspace's (left out
    where its chunks do not divide the count: that point is refused when planned)."""
    chunks, count = algorithm.whole_chunks(ranks), size_bytes // scenario.dtype.itemsize
    if chunks == 1 and not algorithm.workspace_chunks():
        return 0
    payload = payload_of(scenario, settings, size_bytes, ranks, 1, chunks)
    if count % chunks:
        return payload.proxy_count
    return payload.widened(count // chunks * algorithm.workspace_chunks()).proxy_count
