"""NCCL's answer for one point, on plain values: what NCCL charges a schedule at one size, what
its model predicts for it, and whether NCCL itself would run it there.

An algorithm says how NCCL would run it by its :class:`NcclBinding` (a row of a table, as an
algorithm is in NCCL's device code): the family whose kernels' costs it is charged, whether it
is the schedule NCCL's own kernels run for that family, and the symmetric kernels it stands
for. From that binding, a machine, a size, a collective and the NCCL environment
(:class:`~simulator.model.nccl_env.NcclEnv`), :func:`nccl_point` gives the point's
:class:`NcclPoint`: the charges the execution model applies to the machine
(:class:`~simulator.model.execution.NcclCharges`), NCCL's predicted time, and whether it is
NCCL's pick (:func:`nccl_pick`: the symmetric kernel NCCL launches on registered buffers, else
its tuner's family and protocol). :func:`pick_problem` says why NCCL's model cannot pick on a
machine at all. Nothing here knows a scenario: callers name the fields of their problems.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simulator.errors import quoted
from simulator.model.collective import Collective
from simulator.model.execution import NcclCharges, nccl_charges, system_of
from simulator.model.machine import Machine
from simulator.model.nccl import (
    CANDIDATES,
    NcclAlgorithm,
    Protocol,
    best_protocol,
    choose,
    predicted_time_us,
    protocols_of,
)
from simulator.model.nccl_env import NVLS_FAMILIES, NcclEnv
from simulator.model.nccl_symmetric import (
    SymKernel,
    launched,
    protocol_of,
    symmetric_charges,
    symmetric_pick,
)
from simulator.model.nccl_terms import Library
from simulator.model.rccl import CANDIDATES as RCCL_CANDIDATES
from simulator.model.rccl import predicted_time_us as rccl_time_us
from simulator.model.rccl import rccl_pick
from simulator.model.rccl_execution import rccl_charges, rccl_system, ring_channels
from simulator.model.reduction import ReduceOp


@dataclass(frozen=True)
class NcclBinding:
    """How NCCL would run an algorithm: ``family``, the NCCL algorithm whose kernels' costs
    ``execution: nccl`` charges it (Tree for trees, NVLS for in-switch reduction, Ring, the
    default, for point-to-point steps); ``kernel``, whether it is the schedule NCCL's own
    kernels run for that family (ring, the double binary tree, NVLS, ...: the algorithm that
    stands for NCCL's pick); ``symmetric``, the NCCL symmetric-memory kernels its data movement
    is (``one_shot``: the one-shot with and without multicast stores), whose own cost model is
    charged in place of the family's, for the one NCCL would launch among them
    (:func:`~simulator.model.nccl_symmetric.launched`); empty for others."""

    family: NcclAlgorithm = NcclAlgorithm.RING
    kernel: bool = False
    symmetric: tuple[SymKernel, ...] = ()
    msccl: str = ""
    """The MSCCL schedule RCCL ships that this schedule is (``allreduce_pairs``: ``direct``),
    which RCCL runs ahead of its tuner (:mod:`simulator.model.rccl`); empty for others."""

    def unsupported(self, machine: Machine) -> str | None:
        """Why NCCL would not run a schedule bound so on ``machine`` although it can run there
        (checked under ``execution: nccl`` only), or None: PAT only with one GPU a node, and
        kernels that all multicast only among more than two GPUs."""
        hosts = machine.layout.host_count
        if machine.library is Library.RCCL and self.family not in (NcclAlgorithm.RING,
                                                                   NcclAlgorithm.TREE):
            return (f"RCCL runs Ring and Tree only (no {self.family.value}: no in-switch "
                    "reduction on AMD Instinct, src/graph/tuning.cc bwRatio 0)")
        if self.family is NcclAlgorithm.PAT and hosts != machine.ranks:
            return ("NCCL runs PAT only with one GPU per node (src/graph/tuning.cc: PAT's "
                    "bandwidth is 0 where nNodes != nRanks); here "
                    f"{machine.ranks} ranks sit on {hosts} host(s)")
        if self.symmetric and all(kernel.multicast for kernel in self.symmetric) \
                and machine.ranks <= 2:
            return (f"NCCL multicasts only among more than two GPUs (hasLsaMultimem), and the "
                    f"node has {machine.ranks}")
        return None

    def leaves_a_protocol(self, env: NcclEnv, collective: Collective) -> bool:
        """Whether NCCL runs a schedule bound so with a protocol ``env.proto`` leaves: the
        family's (a family the model has no protocols for is left alone), the one protocol of
        all its symmetric kernels (``one_shot`` LL, ``two_shot`` Simple), or any where
        ``env.symmetric`` registers the buffers (NCCL_PROTO does not govern the symmetric
        kernels NCCL then runs ahead of its tuner)."""
        if not env.proto or (self.symmetric and env.symmetric):
            return True
        enabled = env.enabled(collective)
        if self.symmetric:
            return protocol_of(self.symmetric[0]) in enabled.protocols
        return bool(protocols_of(self.family, enabled, collective)
                    or not protocols_of(self.family, collective=collective))


@dataclass(frozen=True)
class NcclPick:
    """What NCCL runs for one call: the ``family`` and ``protocol`` its tuner picks, or on
    registered buffers the ``symmetric`` kernel it launches ahead of its tuner (its protocol
    the kernel's)."""

    protocol: Protocol
    family: NcclAlgorithm | None = None
    symmetric: SymKernel | None = None
    msccl: str = ""
    """RCCL's MSCCL schedule, where RCCL runs one ahead of its tuner (empty: none)."""

    def runs_on(self, binding: NcclBinding) -> bool:
        """Whether a schedule bound by ``binding`` is what NCCL runs for this pick (any
        protocol): the symmetric kernel among its kernels, RCCL's MSCCL schedule, else NCCL's
        own kernel of the family."""
        if self.symmetric is not None:
            return self.symmetric in binding.symmetric
        if self.msccl:
            return binding.msccl == self.msccl
        return binding.kernel and binding.family is self.family

    @property
    def label(self) -> str:
        """``Ring/LL``, the symmetric kernel's name (``AllReduce_AGxLL_R``), or RCCL's MSCCL
        schedule's (``MSCCL allreduce_pairs/LL``)."""
        if self.symmetric is not None:
            return self.symmetric.value
        if self.msccl:
            return f"MSCCL {self.msccl}/{self.protocol.value}"
        assert self.family is not None
        return f"{self.family.value}/{self.protocol.value}"


@dataclass(frozen=True)
class NcclPoint:
    """NCCL's answer for one point: the ``charges`` the execution model times it with (on the
    healthy machine), the time NCCL's own model predicts for it (``predicted_s``: its family
    and protocol's, or the symmetric kernel's NCCL would launch; NaN where the model has none),
    whether it is NCCL's ``pick`` at its size (the results' ``nccl_pick``), and that pick
    (None where NCCL's model picks nothing)."""

    charges: NcclCharges
    predicted_s: float
    picked: bool
    pick: NcclPick | None = None

    @property
    def protocol(self) -> Protocol:
        """The protocol the point runs with."""
        return self.charges.protocol


class NcclRefusal(ValueError):
    """NCCL's model cannot time a point: ``field`` the setting at fault (``execution``,
    ``nccl.proto`` or ``protocol``), ``message`` why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def nccl_pick(machine: Machine, size_bytes: int, collective: Collective, env: NcclEnv, *,
              dtype: str, op: ReduceOp) -> NcclPick | None:
    """What NCCL runs for ``collective`` of ``size_bytes`` per rank on ``machine``, as
    nccl-tests does with NCCL's defaults: with ``env.symmetric`` an allreduce's symmetric kernel
    where NCCL launches one for ``dtype`` and ``op``
    (:func:`~simulator.model.nccl_symmetric.symmetric_pick`); else the family and protocol
    NCCL's tuner picks among those ``env`` leaves (:func:`~simulator.model.nccl.choose`), but
    for NCCL 2.31, which runs its best one-shot LL symmetric kernel on unregistered buffers
    where the tuner picks LL (dev src/tuning/tuning.cc:265-283;
    :attr:`~simulator.model.nccl_versions.Tuning.symmetric_ll_unregistered`) unless NCCL_ALGO
    is set (it disables every symmetric kernel: cost_model.cc:315-318). One process per GPU, as
    nccl-tests under MPI runs: tuning.cc:255 and 269 would keep a process driving several GPUs
    on the symmetric kernel too, which its comment (lines 260-261) says cannot run, a slip a
    release would not ship, so the model does not ask. None where NCCL's model picks nothing
    (one rank, whose buffer NCCL copies; GPUs it has no graphs for). RCCL's GPUs:
    :func:`rccl_pick_of`."""
    if machine.library is Library.RCCL:
        return rccl_pick_of(machine, size_bytes, collective, env, dtype=dtype, op=op)
    if env.symmetric and collective is Collective.ALLREDUCE:
        symmetric = symmetric_pick(machine, size_bytes, dtype, op)
        if symmetric is not None:
            return NcclPick(protocol_of(symmetric.kernel), symmetric=symmetric.kernel)
    system = system_of(machine)
    try:
        choice = choose(system, size_bytes, env.enabled(collective), collective)
    except ValueError:  # no NCCL algorithm is modelled here
        return None
    if (choice.protocol is Protocol.LL and collective is Collective.ALLREDUCE and not env.algo
            and system.tuning.symmetric_ll_unregistered):
        symmetric = symmetric_pick(machine, size_bytes, dtype, op, registered=False)
        if symmetric is not None:
            return NcclPick(Protocol.LL, symmetric=symmetric.kernel)
    return NcclPick(choice.protocol, family=choice.algorithm)


def nccl_point(machine: Machine, binding: NcclBinding, size_bytes: int, collective: Collective,
               env: NcclEnv, protocol: Protocol | None, *, dtype: str, op: ReduceOp) -> NcclPoint:
    """The point of a schedule bound by ``binding`` at ``size_bytes`` on ``machine`` under
    ``execution: nccl``: its charges (a symmetric kernel's own model, else the family's with
    ``protocol``, or with the protocol NCCL's model picks for the family among those ``env``
    leaves), NCCL's predicted time, and whether it is NCCL's pick (:func:`nccl_pick`, for
    ``dtype`` and ``op``). :class:`NcclRefusal` where it cannot be timed: no symmetric kernel at
    this size, a protocol left to none, or a pair NCCL does not run. RCCL's GPUs:
    :func:`rccl_point`."""
    if machine.library is Library.RCCL:
        return rccl_point(machine, binding, size_bytes, collective, env, protocol, dtype=dtype,
                          op=op)
    if binding.symmetric:
        try:
            charges = symmetric_charges(machine, binding.symmetric, size_bytes)
        except ValueError as error:
            raise NcclRefusal("execution", str(error)) from None
        kernel = launched(machine, binding.symmetric, size_bytes)
        assert kernel is not None  # its charges were refused otherwise
        predicted_s = kernel.time_us * 1e-6
    else:
        system = system_of(machine)
        if protocol is None:
            try:
                protocol = best_protocol(system, binding.family, size_bytes,
                                         env.enabled(collective), collective)
            except ValueError as error:
                raise NcclRefusal("nccl.proto",
                                  f"{error}, which {quoted(env.proto)} leaves out") from None
        try:
            charges = nccl_charges(machine, binding.family, protocol, size_bytes, binding.kernel)
        except ValueError as error:
            raise NcclRefusal("protocol", str(error)) from None
        predicted = predicted_time_us(system, binding.family, protocol, size_bytes, collective)
        predicted_s = math.nan if predicted is None else predicted * 1e-6
    pick = nccl_pick(machine, size_bytes, collective, env, dtype=dtype, op=op)
    picked = pick is not None and pick.runs_on(binding) and pick.protocol is charges.protocol
    return NcclPoint(charges, predicted_s, picked, pick)


def pick_problem(machine: Machine, size_bytes: int, collective: Collective, env: NcclEnv,
                 topology: str) -> tuple[str, str] | None:
    """(the field at fault, what was expected) unless NCCL's cost model can pick on ``machine``
    among what ``env`` leaves it (``topology`` names the machine in the message): ``algorithms:
    auto`` runs that pick, and a run without it would print an empty table (so would one on a
    single rank, whose buffer NCCL copies before it picks anything). ``size_bytes``: any size
    of the run (the model's graphs do not depend on it). With ``nccl.nvls: false`` NVLS and
    NVLSTree are not among what it can run."""
    if machine.ranks == 1:
        return "algorithms", (
            f"expected a list of algorithms (or all): auto runs NCCL's pick, and NCCL picks "
            f"none on one rank (it copies the buffer) on topology {topology}")
    if machine.library is Library.RCCL:
        return _rccl_problem(machine, size_bytes, collective, env, topology)
    system = system_of(machine)
    try:
        choose(system, size_bytes, collective=collective)
    except ValueError:
        return "algorithms", (
            f"expected a list of algorithms (or all): auto reports NCCL's pick, and NCCL's cost "
            f"model here has no graphs for {system.arch.name.title()} GPUs (compute capability "
            f"{machine.compute_capability}) on topology {topology}")
    enabled = env.enabled(collective)
    runs = [(a, p) for a, p in CANDIDATES[collective]
            if predicted_time_us(system, a, p, size_bytes, collective) is not None
            and (env.nvls or a not in NVLS_FAMILIES)]
    algorithms = [(a, p) for a, p in runs if a in enabled.algorithms]
    if not algorithms:
        names = ", ".join(dict.fromkeys(a.value for a, _ in runs))
        return "nccl.algo", (
            f"expected a list that leaves NCCL's tuner an algorithm it can run on topology "
            f"{topology}{'' if env.nvls else ' with nccl.nvls: false'} ({names}), got "
            f"{quoted(env.algo)}")
    if not any(enabled.allows(a, p) for a, p in algorithms):
        pairs = ", ".join(f"{a.value}/{p.value}" for a, p in algorithms)
        return "nccl.proto", (
            f"expected a list that leaves NCCL's tuner a protocol for the algorithms nccl.algo "
            f"leaves on topology {topology} ({pairs}), got {quoted(env.proto)}")
    return None


def _allowed(env: NcclEnv, collective: Collective) -> frozenset[tuple[NcclAlgorithm, Protocol]]:
    """The pairs of RCCL's tuner that NCCL_ALGO and NCCL_PROTO (``env``) leave it."""
    enabled = env.enabled(collective)
    return frozenset(pair for pair in RCCL_CANDIDATES if enabled.allows(*pair))


def rccl_pick_of(machine: Machine, size_bytes: int, collective: Collective, env: NcclEnv, *,
                 dtype: str, op: ReduceOp) -> NcclPick | None:
    """What RCCL runs for an allreduce of ``size_bytes`` on ``machine``
    (:func:`~simulator.model.rccl.rccl_pick`: its MSCCL all-pairs schedule where one takes the
    buffer, else its tuner's Ring or Tree); None for another collective (RCCL's model here
    covers allreduce) or where nothing is left."""
    if collective is not Collective.ALLREDUCE:
        return None
    try:
        choice = rccl_pick(rccl_system(machine), size_bytes, np.dtype(dtype).itemsize,
                           op is ReduceOp.AVG, _allowed(env, collective))
    except ValueError:
        return None
    return NcclPick(choice.protocol, family=choice.algorithm, msccl=choice.msccl)


def rccl_point(machine: Machine, binding: NcclBinding, size_bytes: int, collective: Collective,
               env: NcclEnv, protocol: Protocol | None, *, dtype: str,
               op: ReduceOp) -> NcclPoint:
    """:func:`nccl_point` on RCCL's GPUs: RCCL's charges (:func:`~simulator.model.
    rccl_execution.rccl_charges`; its ring on RCCL's channels), the time RCCL's tuner predicts
    (NaN for an MSCCL schedule, which it does not rate), and whether it is RCCL's pick. The
    protocol, unless given: an MSCCL schedule's where RCCL runs one for this schedule, else the
    one RCCL's tuner rates fastest for the family among those ``env`` leaves."""
    system = rccl_system(machine)
    pick = rccl_pick_of(machine, size_bytes, collective, env, dtype=dtype, op=op)
    if protocol is None:
        if pick is not None and pick.msccl and pick.runs_on(binding):
            protocol = pick.protocol
        else:
            times = {p: rccl_time_us(system, binding.family, p, size_bytes, collective)
                     for a, p in _allowed(env, collective) if a is binding.family}
            known = {p: t for p, t in times.items() if t is not None}
            if not known:
                raise NcclRefusal("nccl.proto", f"RCCL runs {binding.family.value} with no "
                                                f"protocol {env.proto or 'left'} here")
            protocol = min(known, key=lambda p: (known[p], list(Protocol).index(p)))
    channels = (ring_channels(machine) if binding.kernel and binding.family is NcclAlgorithm.RING
                and machine.layout.host_count == 1 else 1)
    try:
        charges = rccl_charges(machine, binding.family, protocol, size_bytes, channels)
    except ValueError as error:
        raise NcclRefusal("protocol", str(error)) from None
    predicted = None if binding.msccl else rccl_time_us(system, binding.family, protocol,
                                                        size_bytes, collective)
    predicted_s = math.nan if predicted is None else predicted * 1e-6
    picked = pick is not None and pick.runs_on(binding) and pick.protocol is charges.protocol
    return NcclPoint(charges, predicted_s, picked, pick)


def _rccl_problem(machine: Machine, size_bytes: int, collective: Collective, env: NcclEnv,
                  topology: str) -> tuple[str, str] | None:
    """:func:`pick_problem` on RCCL's GPUs: an allreduce only, and a pair of Ring or Tree
    left by ``nccl.algo`` and ``nccl.proto``."""
    if collective is not Collective.ALLREDUCE:
        return "algorithms", (
            f"expected a list of algorithms (or all): auto reports RCCL's pick, and the RCCL "
            f"model covers allreduce only, got {collective.value} on topology {topology}")
    if rccl_pick_of(machine, size_bytes, collective, env, dtype="float32",
                    op=ReduceOp.SUM) is None:
        return "nccl.algo", (
            f"expected a list that leaves RCCL's tuner Ring or Tree with LL or Simple on "
            f"topology {topology}, got algo {quoted(env.algo)} and proto {quoted(env.proto)}")
    return None
