"""Sweeps: every point of one or more scenarios, run in parallel on a Dask cluster.

A point is one (scenario, algorithm, size): what :func:`simulator.runner.run_point` simulates
(planned by :func:`simulator.plan.plan_point`, run by :func:`simulator.runner.run_plan`).
Points are independent and seeded by ``(seed, size)``, so running them on any number of worker
processes, in any order, gives the very rows a serial :func:`~simulator.runner.simulate` gives;
the frames are put back in serial order. By default a local cluster of one single-threaded
worker process per core runs them (``LocalCluster``); ``scheduler`` names an existing Dask
cluster instead (``tcp://host:8786``), whose workers need this package installed. A point that
fails is reported with its parameters and the others are kept.

Dask (``dask[distributed]``) and tqdm are the ``sweep`` extra, imported only here, only when a
sweep runs (``pip install 'allreduce-sim[sweep]'``).
"""

from __future__ import annotations

import logging
import os
import re
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simulator.errors import InputError, Problem, SimulatorError
from simulator.output.results import Result, results_frame
from simulator.plan import Setup, plan_point, prepare
from simulator.runner import checked_setup, run_plan, settings_of
from simulator.scenario.spec import Scenario
from simulator.settings import RunSettings

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Failure:
    """A point that failed: its parameters, the one-line reason, and whether its input was at
    fault (a point only its own run finds it cannot run: exit 2, as ``run`` gives) rather than
    an algorithm or the machine (exit 1)."""

    scenario: str
    algorithm: str
    size_bytes: int
    error: str
    bad_input: bool = False

    def __str__(self) -> str:
        return (f"{self.scenario}: {self.algorithm} at {self.size_bytes} bytes failed: "
                f"{self.error}")


@dataclass(frozen=True)
class Sweep:
    """What a sweep gives back: one results frame per scenario, in the order given (rows in
    :func:`~simulator.runner.simulate`'s order, failed points left out), and the failures."""

    frames: tuple[pd.DataFrame, ...]
    failures: tuple[Failure, ...]
    interrupted_of: int = 0
    """Where Ctrl-C stopped the sweep, how many points it had (the frames hold those that
    finished, in their order); 0 where it ran to its end."""


_SETUPS: dict[str, Setup] = {}
"""On a worker: the machine of each scenario of the current sweep, built once (routes are
cached in it), as :func:`simulate` builds it once for all its points."""


def run_one(token: str, scenario: Scenario, algorithm: str, size_bytes: int,
            settings: RunSettings) -> Result | Failure:
    """One point, on a worker: its result, or what went wrong (never an exception, so one
    failed point cannot stop the others). ``token`` names the scenario within its sweep."""
    try:
        if token not in _SETUPS:
            sweep_id = token.split("/")[0]
            for stale in [key for key in _SETUPS if not key.startswith(f"{sweep_id}/")]:
                del _SETUPS[stale]
            _SETUPS[token] = prepare(scenario, select=False)
        setup = _SETUPS[token]
        plan = plan_point(scenario, setup, scenario.algorithm(algorithm), size_bytes, settings)
        return run_plan(scenario, setup, plan)
    except InputError as error:
        return Failure(scenario.name, algorithm, size_bytes,
                       "; ".join(problem.message for problem in error.problems), bad_input=True)
    except SimulatorError as error:
        message = str(error)
    except Exception as error:  # a worker reports, never dies: the point says what broke
        message = f"{type(error).__name__}: {error}"
    return Failure(scenario.name, algorithm, size_bytes, message)


def sweep(scenarios: Sequence[Scenario], *, scheduler: str | None = None,
          workers: int | None = None, seed: int | None = None,
          proxy_elements: int | None = None, progress: bool = True,
          kept: Sequence[Sequence[Result]] | None = None) -> Sweep:
    """Run every point of ``scenarios`` on a Dask cluster (a local one of ``workers`` processes,
    default one per core, unless ``scheduler`` gives an address); a progress bar on stderr
    while it runs unless ``progress`` is False. ``kept`` gives, per scenario, points already
    simulated (``sweep --resume``): they are not run again, and take their place in the rows."""
    client_type, cluster_type, as_completed, tqdm = _dask(scenarios)
    if workers is not None and workers < 1:
        raise InputError([Problem("sweep", "workers", f"expected a whole number ≥ 1, got "
                                                      f"{workers}")])
    work = []
    settings = []
    plans: list[list[tuple[str, int]]] = []
    done = [{(row.algorithm, row.size_bytes): row for row in rows}
            for rows in (kept if kept is not None else [[] for _ in scenarios])]
    for index, scenario in enumerate(scenarios):
        settings.append(settings_of(scenario, seed, proxy_elements))
        setup = checked_setup(scenario, settings[index])
        plans.append([(algorithm.name, size) for algorithm in setup.algorithms
                      for size in scenario.sizes])
        work += [(index, *point) for point in plans[index] if point not in done[index]]
    if scheduler is None:
        cluster = cluster_type(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1,
                               processes=True, dashboard_address=None,
                               silence_logs=logging.ERROR)  # a Ctrl-C's cancellations are ours
        client = client_type(cluster)
    else:
        cluster = None
        client = _connect(client_type, scheduler)
    try:
        sweep_id = uuid.uuid4().hex
        futures = [client.submit(run_one, f"{sweep_id}/{index}", scenarios[index], algorithm, size,
                                 settings[index], pure=False)
                   for index, algorithm, size in work]
        bar = tqdm(total=len(futures), unit="point", disable=not progress, file=sys.stderr)
        interrupted = False
        try:
            for _ in as_completed(futures):
                bar.update(1)
        except KeyboardInterrupt:  # keep what finished: the caller writes it and says so
            interrupted = True
        bar.close()
        outcomes = ([future.result() if future.status == "finished" else None
                     for future in futures] if interrupted else client.gather(futures))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    failures = []
    for (index, algorithm, size), outcome in zip(work, outcomes, strict=True):
        if isinstance(outcome, Failure):
            failures.append(outcome)
        elif outcome is not None:
            done[index][(algorithm, size)] = outcome
    rows = [[done[index][point] for point in plan if point in done[index]]
            for index, plan in enumerate(plans)]  # kept and new alike, in the plan's order
    return Sweep(tuple(results_frame(r) for r in rows), tuple(failures),
                 sum(map(len, plans)) if interrupted else 0)


def _dask(scenarios: Sequence[Scenario]) -> tuple[Any, Any, Any, Any]:
    """Dask's Client, LocalCluster and as_completed, and tqdm; an input error naming the extra
    when they are not installed."""
    try:
        from dask.distributed import Client, LocalCluster, as_completed
        from tqdm import tqdm
    except ImportError as error:
        where = scenarios[0].source if scenarios else "sweep"
        raise InputError([Problem(where, "sweep", f"needs the 'sweep' extra ({error.name} is not "
                                                  "installed): pip install 'allreduce-sim[sweep]'")]
                         ) from None
    return Client, LocalCluster, as_completed, tqdm


_ADDRESS = re.compile(r"(?:(?:tcp|tls)://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-]+):(\d{1,5})")
"""A Dask scheduler's address: ``tcp://`` (the default) or ``tls://``, a host name, IPv4 or
[IPv6], and a port."""


def _connect(client_type: Any, scheduler: str) -> Any:
    """A client of the Dask scheduler at ``scheduler``; an input error when the address is not
    one or none answers."""
    found = _ADDRESS.fullmatch(scheduler) if isinstance(scheduler, str) else None
    if found is None or not 0 < int(found[2]) < 65536:
        raise InputError([Problem("sweep", "scheduler", f"expected an address like "
                                                        f"tcp://host:8786, got {scheduler!r}")])
    try:
        return client_type(scheduler, timeout="5s")
    except (OSError, TimeoutError, ValueError) as error:
        raise InputError([Problem("sweep", "scheduler", f"no Dask scheduler answers at "
                                                        f"{scheduler!r}: {error}")]) from None
