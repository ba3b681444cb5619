"""Calibration: fit the NCCL execution model's free parameters to a user's own nccl-tests log.

Three parameters are free on one node, the ones measurements pin down best (``dgx`` builder
parameters): ``nccl_nvlink_bandwidth``, the NVLink rate NCCL achieves per GPU (large ring
sizes); ``nccl_nvls_bandwidth``, the rate of NVLS (large sizes where NCCL picks NVLS); and
``nccl_launch_latency``, a launch cost beyond NCCL's base latency (small sizes). A log of
several nodes (``nodes`` > 1) fits the network's two terms instead: ``nccl_net_bandwidth``, the
rate NCCL achieves per NIC, at most the wire's (large sizes), and ``nccl_net_latency``, a
latency per network step beyond NCCL's ``hwLat`` and the transport's, at least 0 (small
sizes); the hosts' own terms are a one-node log's to fit. At every measured
size the model is the closed form of what NCCL's cost model picks there, under the ``nccl``
execution model: the simulation meets it exactly for the ring and NVLS on one node, so the fit
needs no simulation. The fit minimises Σ (log modelled time − log measured time)² by the
Nelder-Mead simplex (Nelder & Mead, The Computer Journal 7(4), 1965) over the logarithms of the
two rates and the launch latency in µs, from the model's own values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from simulator.algorithms.channels import on_channels_s
from simulator.algorithms.cost import CostInputs
from simulator.algorithms.registry import nccl_kernel
from simulator.errors import InputError, Problem, quoted
from simulator.measured.nccl_tests import MeasuredSeries
from simulator.model.collective import Collective
from simulator.model.execution import (
    NET_SHARE,
    NVLINK_GBPS_PER_LINK,
    apply,
    arch_of,
    nccl_charges,
    nic_Bps,
    nvls_share,
    system_of,
)
from simulator.model.machine import Machine, NcclFacts
from simulator.model.nccl import choose
from simulator.model.nccl_terms import Library
from simulator.scenario.parse import load_preset
from simulator.scenario.spec import TopologySpec

SMALLEST = 32 << 10
"""Sizes below 32 KiB are latency alone, and nccl-tests' own noise; the fit starts here."""

ITEMSIZE = 4
"""nccl-tests' default type is float (4 bytes); only the byte count matters to the model."""


@dataclass(frozen=True)
class Point:
    """One measured size: NCCL's pick there, the measured time, and the model's before and after."""

    size_bytes: int
    pick: str
    measured_us: float
    before_us: float
    after_us: float


@dataclass(frozen=True)
class Calibration:
    """The fitted parameters, the preset they calibrate (on ``nodes`` hosts), and the fit size
    by size."""

    preset: str
    source: str
    before: NcclFacts
    after: NcclFacts
    points: tuple[Point, ...]
    fixed: tuple[str, ...] = ()
    """Parameters this log cannot pin down (no measured size depends on them), left as derived."""
    nodes: int = 1

    @property
    def parameters(self) -> tuple[str, ...]:
        """The parameters this calibration sets: :data:`PARAMETERS` on one node,
        :data:`NET_PARAMETERS` on several."""
        return PARAMETERS if self.nodes == 1 else NET_PARAMETERS

    def geomean_error(self, which: str) -> float:
        """exp(mean |log(model / measured)|) − 1 of the model ``before`` or ``after`` the fit."""
        logs = [abs(math.log(getattr(p, f"{which}_us") / p.measured_us)) for p in self.points]
        return math.exp(sum(logs) / len(logs)) - 1


def calibrate(series: MeasuredSeries, preset: str, nodes: int = 1) -> Calibration:
    """Fit the free parameters of ``preset`` on ``nodes`` hosts to the measured AllReduce
    ``series``; InputError if the preset cannot run the NCCL execution model or no size is
    large enough."""
    if series.test is not None and series.test != "all_reduce_perf":
        raise InputError([Problem(series.source, "", f"measures {series.test}, but calibrate "
                                                     "fits allreduce: give an all_reduce_perf "
                                                     "log")])
    machine = _machine(preset, series.source, nodes)
    points = [m for m in series.rows if m.size_bytes >= SMALLEST]
    if not points:
        raise InputError([Problem(series.source, "", f"expected sizes of {SMALLEST} bytes or "
                                                     "more to fit, found none")])
    sizes = [m.size_bytes for m in points]
    measured = np.array([m.time_us for m in points])
    before = derived(machine)
    model = _model(machine, sizes)
    start = np.array([math.log(before.nvlink_Bps), math.log(before.nvls_Bps), 0.0,
                      math.log(before.net_Bps or 1.0), 0.0])
    names = PARAMETERS if nodes == 1 else NET_PARAMETERS
    free = [i for i, name in enumerate(ALL_PARAMETERS) if name in names
            and _matters(model, start, i)]

    def full(x: np.ndarray) -> np.ndarray:
        point = start.copy()
        point[free] = x
        return point

    def objective(x: np.ndarray) -> float:
        return float(np.sum((np.log(model(_facts(full(x)))) - np.log(measured)) ** 2))

    fitted = _facts(full(nelder_mead(objective, start[free]))) if free else before
    after = replace(before, **{name: getattr(fitted if i in free else before, name)
                               for i, name in enumerate(_ATTRIBUTES)})
    after = replace(after, net_Bps=min(after.net_Bps, nic_Bps(machine) or after.net_Bps))
    picks = [choose(system_of(machine), size) for size in sizes]
    return Calibration(preset, series.source, before, after, tuple(
        Point(size, f"{pick.algorithm.value}/{pick.protocol.value}", float(m), b, a)
        for size, pick, m, b, a in zip(sizes, picks, measured, model(before), model(after),
                                       strict=True)),
        tuple(name for i, name in enumerate(ALL_PARAMETERS) if name in names and i not in free),
        nodes)


ALL_PARAMETERS = ("nccl_nvlink_bandwidth", "nccl_nvls_bandwidth", "nccl_launch_latency",
                  "nccl_net_bandwidth", "nccl_net_latency")
"""Every parameter a calibration may fit, in the order of the fit's coordinates."""
_ATTRIBUTES = ("nvlink_Bps", "nvls_Bps", "launch_s", "net_Bps", "net_latency_s")
"""Their :class:`~simulator.model.machine.NcclFacts` fields, in the same order."""
PARAMETERS = ALL_PARAMETERS[:3]
"""The free parameters of a one-node log."""
NET_PARAMETERS = ALL_PARAMETERS[3:]
"""The free parameters of a log of several nodes: the network's (the hosts' NVLink rates and
the launch latency are one node's to fit)."""


def _matters(model: Callable[[NcclFacts], np.ndarray], start: np.ndarray, i: int) -> bool:
    """Whether some measured size's modelled time moves with parameter ``i`` (the LL cap can make
    the NVLink rate irrelevant, and a log without NVLS sizes the NVLS rate)."""
    moved = start.copy()
    moved[i] += 0.1
    return not np.allclose(model(_facts(start)), model(_facts(moved)), rtol=1e-12, atol=0.0)


def derived(machine: Machine) -> NcclFacts:
    """The parameters as the execution model derives them when the topology states none."""
    arch = arch_of(machine.compute_capability)
    nvlink = machine.nvlinks * NVLINK_GBPS_PER_LINK[arch] * 1e9
    return replace(machine.nccl, nvlink_Bps=nvlink, nvls_Bps=nvls_share(arch) * nvlink,
                   launch_s=0.0, net_Bps=nic_Bps(machine) * NET_SHARE, net_latency_s=0.0)


def modelled_us(machine: Machine, facts: NcclFacts, sizes: Sequence[int]) -> list[float]:
    """The closed-form time (µs) of NCCL's pick at each size, with ``facts`` in force."""
    return [float(t) for t in _model(machine, sizes)(facts)]


def nelder_mead(f: Callable[[np.ndarray], float], start: np.ndarray, *, step: float = 0.1,
                tolerance: float = 1e-12, iterations: int = 4000) -> np.ndarray:
    """A minimum of ``f`` near ``start`` by the Nelder-Mead simplex (reflection 1, expansion 2,
    contraction 1/2, shrink 1/2), stopping when the simplex's values agree within
    ``tolerance``."""
    n = len(start)
    simplex = [start] + [start + step * np.eye(n)[i] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if values[-1] - values[0] <= tolerance:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        reflected = centroid + (centroid - simplex[-1])
        fr = f(reflected)
        if fr < values[0]:
            expanded = centroid + 2 * (centroid - simplex[-1])
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (simplex[-1] - centroid)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex = [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex]
                values = [f(x) for x in simplex]
    best: np.ndarray = simplex[int(np.argmin(values))]
    return best


def preset_yaml(calibration: Calibration, preset_text: str) -> str:
    """The preset's YAML with the fitted parameters appended, and comments that record the log,
    the fit and its residuals, size by size."""
    after, before = calibration.after, calibration.before
    nodes = f" --nodes {calibration.nodes}" if calibration.nodes > 1 else ""
    lines = [preset_text.rstrip(), "",
             f"# Calibrated by `python -m simulator calibrate {calibration.source} --preset "
             f"{calibration.preset}{nodes}`: a least-squares fit on log time (Nelder-Mead) of the",
             "# closed form of NCCL's pick at each size under execution: nccl, from the derived "
             "values:",
             f"#   {values(calibration, before)}."]
    if calibration.nodes > 1:
        lines.append(f"# Fitted on {calibration.nodes} nodes: use it with nodes: "
                     f"{calibration.nodes} (the network's terms hold for other node counts).")
    lines += [f"# Geometric mean |error| before {100 * calibration.geomean_error('before'):.1f} "
              f"%, after {100 * calibration.geomean_error('after'):.1f} %. Residuals (model / "
              "measured - 1):",
              "#   size(B)     pick            measured(us)    before     after"]
    for p in calibration.points:
        lines.append(f"#   {p.size_bytes:<11} {p.pick:<15} {p.measured_us:>12.2f} "
                     f"{100 * (p.before_us / p.measured_us - 1):>+8.1f}% "
                     f"{100 * (p.after_us / p.measured_us - 1):>+8.1f}%")
    for name in calibration.parameters:
        note = ("# derived: this log does not depend on it" if name in calibration.fixed
                else "# fitted")
        lines.append(f"{name}: {value_of(name, after, '.4f')}    {note}")
    return "\n".join([*lines, ""])


def values(calibration: Calibration, facts: NcclFacts) -> str:
    """The parameters a calibration sets, as ``name value`` pairs (for the page and the YAML)."""
    return ", ".join(f"{name} {value_of(name, facts, '.2f', ' ')}"
                     for name in calibration.parameters)


def value_of(name: str, facts: NcclFacts, form: str, space: str = "") -> str:
    """One parameter of ``facts`` in its unit: GB/s for a rate, µs for a latency."""
    value = getattr(facts, _ATTRIBUTES[ALL_PARAMETERS.index(name)])
    if name.endswith("bandwidth"):
        return f"{value / 1e9:{form}}{space}GB/s"
    return f"{value * 1e6:{form}}{space}us"


def _machine(preset: str, source: str, nodes: int = 1) -> Machine:
    try:
        topology = load_preset(preset)
    except KeyError:
        raise InputError([Problem(source, "--preset", f"no preset {quoted(preset)}")]) from None
    if nodes != topology.params.get("nodes", nodes):
        topology = TopologySpec(topology.kind, {**topology.params, "nodes": nodes},
                                topology.label)
    machine = Machine.of(topology.build())
    if not (machine.compute_capability and machine.nvlinks):
        raise InputError([Problem(source, "--preset", f"{quoted(preset)} states no compute_capability "
                                                      "and nvlinks, which execution: nccl needs")])
    if machine.library is not Library.NCCL:
        raise InputError([Problem(source, "--preset", (
            f"expected a preset of NVIDIA GPUs: calibrate fits NCCL's execution model, and "
            f"{quoted(preset)} runs {machine.library.value.upper()}, whose fit is not modelled"))])
    return machine


def _model(machine: Machine, sizes: Sequence[int]) -> Callable[[NcclFacts], np.ndarray]:
    """The closed-form times (µs) of NCCL's picks at ``sizes`` as a function of the facts."""
    picks = [choose(system_of(machine), size) for size in sizes]
    # across hosts NCCL's kernels run a channel per GPU of a host (plan.channels_for's rule)
    hosts, ranks_per_host = machine.layout.host_count, machine.layout.ranks_per_host
    per_host = max(ranks_per_host) if hosts > 1 and len(ranks_per_host) == 1 else 1

    def times(facts: NcclFacts) -> np.ndarray:  # the machine's transport and CPU kept
        tuned = replace(machine, nccl=replace(facts, transport=machine.nccl.transport,
                                              cpu=machine.nccl.cpu))
        result = []
        for size, pick in zip(sizes, picks, strict=True):
            charges = nccl_charges(tuned, pick.algorithm, pick.protocol, size)
            cost = CostInputs(apply(charges, tuned), itemsize=ITEMSIZE,
                              piece_bytes=charges.piece_bytes)  # as plan_point takes it
            algorithm = nccl_kernel(Collective.ALLREDUCE, pick.algorithm)
            count = size // ITEMSIZE
            channels = 1 if algorithm.rail_aware else max(1, min(per_host, count // machine.ranks))
            result.append((on_channels_s(algorithm, cost, count, channels) + charges.start_s) * 1e6)
        return np.asarray(result, dtype=np.float64)

    return times


def _facts(x: np.ndarray) -> NcclFacts:
    """The facts at point ``x`` of the fit (a rate as its logarithm, a latency in µs, ≥ 0)."""
    return NcclFacts(math.exp(x[0]), math.exp(x[1]), abs(float(x[2])) * 1e-6,
                     net_Bps=math.exp(x[3]), net_latency_s=abs(float(x[4])) * 1e-6)
