"""What each communication of a parallel step costs alone, and what it asks of the links: the
:class:`~simulator.training.execute.Demand` the step's execution shares the fabric by.

**A collective** runs on the machine of its communicator's members (the scenario's machine with
only those ranks placed: :func:`group_setup`), simulated with its own data and checked like any
point (:func:`~simulator.trainer.collective_run.collective_run`: NCCL's pick under
``algorithms: auto``). Collectives of one kind and size over communicators laid out alike
(as many ranks on each host, at the same local index or not) are simulated once, the first
one's: on the symmetric fabrics of the presets (a node's NVSwitch, a rail of NICs) they take
the same time. Its demand on the links is its traffic as a ring over the members in their order
(an allreduce sends 2(n−1)/n of the buffer to its successor, a reduce-scatter or all-gather
(n−1)/n, a broadcast or reduce the buffer, an all-to-all 1/n of it to every other member),
routed as the fabric routes, and scaled so that alone it just keeps its simulated pace; the
part of its time no link explains (its busiest link's transfer time subtracted) is its latency.

**A message** (a pipeline's activations) is timed alone on the machine's fabric
(:func:`simulator.engine.messages.time_messages`): route latency, then its bytes at the route's
bottleneck.

**The SMs a kernel holds.** NCCL launches one thread block per channel
(``src/enqueue.cc``, the kernel's grid is ``plan->channelCount``), so a collective's kernel
holds its run's ``channels`` of the GPU's SMs (:data:`SMS`), a message's one channel's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from simulator.engine.messages import Message, time_messages
from simulator.model.collective import Collective
from simulator.model.faults import Fault
from simulator.model.machine import Layout, Machine
from simulator.output.results import Result
from simulator.plan import Setup, select_algorithms
from simulator.scenario.spec import Scenario
from simulator.settings import RunSettings
from simulator.trainer.collective_run import collective_run
from simulator.training.execute import Demand
from simulator.training.graph import Op, OpKind

SMS = {"v100": 80, "a100": 108, "h100": 132, "b200": 148, "gb200": 148}
"""Streaming multiprocessors per GPU, from the data sheets and architecture whitepapers:
V100 SXM2 80 (Volta whitepaper), A100 SXM4 108 (Ampere whitepaper), H100 SXM5 132 (Hopper
whitepaper), B200 148 and GB200's B200 148 (NVIDIA Blackwell architecture technical brief: two
dies of 74). A GPU given by its rates (``gpu: {flops: ...}``) is taken as an H100's 132."""

DEFAULT_SMS = SMS["h100"]

ALLTOALL = "direct"
"""The algorithm an all-to-all runs: NCCL has no tuner choice for it, and runs it as one send
and one receive to every peer inside a group (nccl-tests ``src/alltoall.cu``), all at once."""


@dataclass(frozen=True)
class CollectiveRun:
    """One distinct collective of the step as simulated: its kind, size, the communicator it
    stood for (the first of its shape) and the run."""

    collective: Collective
    nbytes: int
    group: str
    result: Result


def ring_pairs(collective: Collective, members: Sequence[int], nbytes: int
               ) -> list[tuple[int, int, float]]:
    """(sender, receiver, bytes) of ``collective`` on ``nbytes`` as a ring over ``members``
    (module docstring): what its traffic asks of the links.

    >>> ring_pairs(Collective.ALLREDUCE, (0, 1), 8)
    [(0, 1, 8.0), (1, 0, 8.0)]
    >>> ring_pairs(Collective.ALLTOALL, (0, 1, 2), 9)[:2]
    [(0, 1, 3.0), (0, 2, 3.0)]
    """
    n = len(members)
    if n < 2:
        return []
    if collective is Collective.ALLTOALL:
        return [(a, b, nbytes / n) for a in members for b in members if a != b]
    share = {Collective.ALLREDUCE: 2.0 * (n - 1) / n, Collective.REDUCE_SCATTER: (n - 1) / n,
             Collective.ALLGATHER: (n - 1) / n}.get(collective, 1.0)
    return [(members[i], members[(i + 1) % n], share * nbytes) for i in range(n)]


def group_setup(scenario: Scenario, setup: Setup, members: Sequence[int]) -> Setup:
    """The setup of a communicator of ``members`` (global ranks, in their order within it): the
    machine with only them placed (rank i of it on member i's GPU), its hosts as theirs, the
    reducing switches keeping the members cabled to them (an NVSwitch only where two or more
    are: NCCL creates no NVLS multicast for a communicator with one GPU on the node,
    ``ncclNvlsInit`` in ``src/transport/nvls.cc`` returns with ``gpuCount < 2``, v2.30.7), and
    the algorithms that apply to the scenario's collective there."""
    machine = setup.machine
    placement = tuple(machine.placement[rank] for rank in members)
    kept = frozenset(placement)
    switches = tuple(replace(switch, gpus=switch.gpus & kept)
                     for switch in machine.reducing_switches
                     if len(switch.gpus & kept) >= (1 if switch.network else 2))
    sub = replace(machine, placement=placement,
                  layout=Layout(tuple(machine.layout.hosts[rank] for rank in members)),
                  reducing_switches=switches,
                  entry_s=tuple(machine.entry_s[r] for r in members) if machine.entry_s else (),
                  gpus=tuple(machine.gpus[r] for r in members) if machine.gpus else ())
    return replace(setup, machine=sub, cost=replace(setup.cost, machine=sub),
                   algorithms=select_algorithms(scenario, sub))


def _local(fault: Fault, members: Sequence[int]) -> Fault | None:
    """``fault`` as the machine of ``members`` sees it: a fault of a rank renumbered to its
    place among them (None if it is not one of them), any other as it is."""
    rank = getattr(fault, "rank", None)
    if rank is None:
        return fault
    return replace(fault, rank=list(members).index(rank)) if rank in members else None  # type: ignore[type-var]


def _shape(machine: Machine, members: Sequence[int]) -> tuple[object, ...]:
    """What a communicator's time depends on, on a symmetric fabric: how many members each of
    its hosts holds, and whether they all sit at the same local index (one rail)."""
    hosts = Counter(machine.layout.hosts[rank] for rank in members)
    local = {machine.layout.host_ranks(rank).index(rank) for rank in members}
    return (tuple(sorted(hosts.values())), len(local) == 1)


class StepCosts:
    """The demand of every communication of a step on ``setup``'s machine, each distinct one
    simulated once (module docstring); ``sm_share`` False leaves compute unslowed by the
    kernels. ``runs`` lists what was simulated, in order."""

    def __init__(self, scenario: Scenario, setup: Setup, settings: RunSettings, *, gpu: str,
                 sm_share: bool) -> None:
        self.scenario, self.setup, self.settings = scenario, setup, settings
        self.sms = SMS.get(gpu, DEFAULT_SMS)
        self.sm_share = sm_share
        capacities = setup.machine.routing.capacities()
        self.links = {link: index for index, link in enumerate(sorted(capacities))}
        self.capacity = np.array([capacities[link] for link in sorted(capacities)])
        self.runs: list[CollectiveRun] = []
        self._simulated: dict[tuple[object, ...], Result] = {}
        self._timed: dict[tuple[object, ...], float] = {}
        self._demands: dict[tuple[object, ...], Demand] = {}

    def demand(self, op: Op, ranks: tuple[int, ...], copies: Sequence[tuple[int, ...]],
               faults: tuple[Fault, ...] = ()) -> Demand:
        """The demand of ``op``'s communication over global ``ranks`` (a collective's members,
        a message's sender and receiver), alongside its ``copies`` (``ranks`` among them),
        suffering ``faults`` (timed from its start); cached per operation shape."""
        key = (op.kind, op.collective, op.group, op.nbytes, op.count, ranks, faults)
        if key not in self._demands:
            if op.nbytes == 0 or len(ranks) < 2:
                self._demands[key] = Demand(0.0, 0.0)
            elif op.kind is OpKind.COLLECTIVE:
                assert op.collective is not None
                run = self.result(op.collective, ranks, op.nbytes, op.group, faults)
                share = min(1.0, run.channels / self.sms) if self.sm_share else 0.0
                pairs = [pair for copy in copies
                         for pair in ring_pairs(op.collective, copy, op.nbytes)]
                self._demands[key] = self._spread(pairs, float(run.sim_time_s), op.count, share)
            else:
                share = min(1.0, 1 / self.sms) if self.sm_share else 0.0
                pairs = [(src, dst, float(op.nbytes)) for src, dst in copies]
                self._demands[key] = self._spread(pairs, self._message(ranks, op.nbytes),
                                                  op.count, share)
        return self._demands[key]

    def result(self, collective: Collective, members: Sequence[int], nbytes: int,
               group: str, faults: tuple[Fault, ...] = ()) -> Result:
        """The simulated run of ``collective`` on ``nbytes`` over ``members`` (once per shape),
        with ``faults`` (ranks named globally)."""
        machine = self.setup.machine
        seen = tuple(fault for fault in (_local(f, members) for f in faults) if fault)
        # alike communicators share a run, but a fault may strike one and not another
        key = (collective, nbytes, _shape(machine, members) if not seen else tuple(members),
               seen)
        if key not in self._simulated:
            alltoall = collective is Collective.ALLTOALL  # NCCL's tuner picks nothing for it
            scenario = self.scenario if collective is self.scenario.collective else replace(
                self.scenario, collective=collective, training=None, sizes=(nbytes,),
                algorithms=(ALLTOALL,) if alltoall else None,
                nccl_choice=self.scenario.nccl_choice and not alltoall)  # a run of sizes
            whole = tuple(members) == tuple(range(machine.ranks))
            setup = (self.setup if whole and scenario is self.scenario
                     else group_setup(scenario, self.setup, members))
            self._simulated[key] = collective_run(scenario, setup, self.settings, nbytes,
                                                  faults=seen)
            self.runs.append(CollectiveRun(collective, nbytes, group, self._simulated[key]))
        return self._simulated[key]

    def _message(self, ranks: tuple[int, ...], nbytes: int) -> float:
        """A message's time alone from ``ranks[0]`` to ``ranks[1]`` (cached per route)."""
        src, dst = ranks
        machine = self.setup.machine
        route = machine.routing.route(machine.placement[src], machine.placement[dst])
        key = (route.latency_s, route.bottleneck_Bps, route.proxy_s, nbytes)
        if key not in self._timed:
            self._timed[key] = time_messages(machine, [Message(src, dst, nbytes, 0.0)])[0]
        return self._timed[key]

    def _spread(self, pairs: list[tuple[int, int, float]], time_s: float, count: int,
                share: float) -> Demand:
        """The demand of ``count`` back-to-back runs of ``time_s`` each moving ``pairs``."""
        machine, load = self.setup.machine, np.zeros(len(self.capacity))
        for src, dst, nbytes in pairs:
            route = machine.routing.route(machine.placement[src], machine.placement[dst])
            for link in route.links:
                load[self.links[link]] += nbytes
        used = np.flatnonzero(load)
        transfer = float((load[used] / self.capacity[used]).max(initial=0.0))
        latency = max(0.0, time_s - transfer)
        work = time_s - latency
        if work <= 0 or not len(used):
            return Demand(count * time_s, count * time_s, sm_share=share)
        rates = load[used] / work
        rates /= max(1.0, float((rates / self.capacity[used]).max()))
        return Demand(count * time_s, count * latency, used.astype(np.int64), rates, share)
