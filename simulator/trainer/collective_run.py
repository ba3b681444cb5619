"""How a training step's collective is run: NCCL's pick where it can run, else the fastest of the
algorithms the scenario allows, simulated with its own data (:func:`collective_run`). Shared by the
data-parallel step (:mod:`simulator.trainer`) and the parallel layouts
(:mod:`simulator.trainer.costs`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from simulator.engine.plan import PointPlan
from simulator.errors import InputError
from simulator.model.faults import Fault
from simulator.output.results import Result
from simulator.plan import Setup, nccl_runs, plan_point
from simulator.runner import run_plan
from simulator.scenario.spec import Scenario
from simulator.settings import RunSettings


def collective_run(scenario: Scenario, setup: Setup, settings: RunSettings, nbytes: int,
                   inputs: Callable[[PointPlan], np.ndarray] | None = None, *,
                   faults: tuple[Fault, ...] = ()) -> Result:
    """The run of the scenario's collective on ``nbytes`` per rank on ``setup``'s machine (a DDP
    bucket's allreduce; under model parallelism, any communicator's collective on the machine of
    its members), suffering ``faults``: with ``algorithms: auto``, the point NCCL runs
    (:func:`~simulator.plan.nccl_runs`, as a run of sizes has it: its symmetric kernel on
    registered buffers, else its tuner's family at the protocol it picks); else, or where that
    point cannot be simulated, the scenario's one algorithm, or the fastest simulated of its
    algorithms (as a tuned library would choose, knowing the faults), passing over one that
    cannot run at this size under ``all`` or ``auto``."""
    pick = (nccl_runs(scenario, setup.machine, nbytes)
            if scenario.nccl_choice and setup.machine.ranks > 1 else None)
    if pick is not None:
        try:
            plan = plan_point(scenario, setup, pick.algorithm, nbytes, settings, faults=faults)
        except InputError:
            plan = None  # NCCL's pick cannot run here: the fastest simulated instead
        if plan is not None and plan.nccl is not None and plan.nccl.picked:
            return run_plan(plan, inputs=inputs(plan) if inputs is not None else None)
    candidates = setup.algorithms[:1] if setup.machine.ranks == 1 else setup.algorithms
    best: Result | None = None
    refused: list[InputError] = []
    for algorithm in candidates:
        try:
            plan = plan_point(scenario, setup, algorithm, nbytes, settings, faults=faults)
        except InputError as error:
            if scenario.algorithms is not None:
                raise
            refused.append(error)
            continue
        data = inputs(plan) if inputs is not None else None
        result = run_plan(plan, inputs=data)
        if best is None or result.sim_time_s < best.sim_time_s:
            best = result
    if best is None:
        raise refused[0]  # not one algorithm of all or auto runs a bucket of this size
    return best
