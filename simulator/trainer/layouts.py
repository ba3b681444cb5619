"""The layout sweep (``sweep: {parallelism: auto}``): every (TP, PP, DP[, EP]) layout of the model
on the machine, those that fit the GPU's memory simulated and ranked by step time.

The candidates keep what the scenario's layout fixes: the global batch (its ``batch`` per replica
× its DP), the micro-batch size, ZeRO, sequence parallelism, recomputation and the schedule. TP
takes the divisors of a node's GPUs that divide the model's heads, key/value heads and MLP
(and, with ``tp_across_nodes``, multiples of a node beyond); PP the divisors of the layers that
leave a whole DP dividing the global batch; EP, for a mixture of experts, the divisors of DP
and of the experts. A layout whose busiest GPU holds more than the GPU's memory
(:func:`~simulator.training.memory.layout_memory`) is listed, marked, and not simulated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from simulator.plan import Setup
from simulator.scenario.spec import Scenario
from simulator.settings import RunSettings
from simulator.trainer.parallel import simulate_parallel_step
from simulator.training.layout import Parallelism, Schedule, layout_problems
from simulator.training.memory import layout_memory
from simulator.training.results import LayoutRow
from simulator.training.spec import TrainingSpec
from simulator.training.traffic import model_problems


def divisors(n: int) -> list[int]:
    """The divisors of ``n``, in increasing order.

    >>> divisors(12)
    [1, 2, 3, 4, 6, 12]
    """
    return [d for d in range(1, n + 1) if n % d == 0]


def candidates(spec: TrainingSpec, base: Parallelism, gpus: int, per_node: int
               ) -> list[tuple[Parallelism, int]]:
    """Every layout of ``gpus`` GPUs for ``spec``'s model that keeps ``base``'s global batch and
    micro-batch size (module docstring), with the batch per replica each runs, in (TP, PP, EP)
    order."""
    shape = spec.network.shape
    assert shape is not None
    global_batch = spec.batch * base.dp
    micro = spec.batch // base.microbatches
    found = []
    for tp in divisors(gpus):
        if tp > per_node and not (base.tp_across_nodes and tp % per_node == 0):
            continue
        for pp in divisors(gpus // tp):
            dp = gpus // (tp * pp)
            if global_batch % dp or (global_batch // dp) % micro:
                continue
            batch = global_batch // dp
            for ep in (divisors(dp) if shape.moe else [1]):
                layout = replace(base, tp=tp, pp=pp, dp=dp, ep=ep, microbatches=batch // micro,
                                 chunks=base.chunks if pp > 1 else 1,
                                 schedule=base.schedule if pp > 1 else Schedule.ONE_F_ONE_B)
                if (not layout_problems(layout, gpus, per_node)
                        and not model_problems(shape, layout, batch)):
                    found.append((layout, batch))
    return found


def sweep_layouts(scenario: Scenario, setup: Setup, settings: RunSettings, spec: TrainingSpec,
                  base: Parallelism, say: Callable[[str], None]) -> tuple[LayoutRow, ...]:
    """Every candidate layout on ``setup``'s machine, those that fit simulated (timed only),
    ranked: the fitting ones by step time, then those that do not fit by memory."""
    shape = spec.network.shape
    assert shape is not None
    per_node = max(len(ranks) for ranks in setup.machine.layout.host_groups)
    rows = []
    for layout, batch in candidates(spec, base, setup.machine.ranks, per_node):
        memory = layout_memory(shape, layout, microbatch=batch // layout.microbatches,
                               optimizer=spec.optimizer).total
        capacity = spec.compute.memory
        if capacity is not None and memory > capacity:
            rows.append(LayoutRow(layout, batch, memory, capacity, None))
            continue
        say(f"layout {layout.label()}")
        step = simulate_parallel_step(scenario, setup, settings, replace(spec, batch=batch),
                                      layout, ())
        rows.append(LayoutRow(layout, batch, memory, capacity, step))
    return tuple(sorted(rows, key=lambda row: (row.step is None, row.step.step_s
                                               if row.step is not None else row.memory_bytes)))
