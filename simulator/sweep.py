"""Sweeps: every point of one or more scenarios, run in parallel on a Dask cluster.

A point is one (scenario, algorithm, size): what :func:`simulator.runner.run_point` simulates
(planned by :func:`simulator.plan.plan_point`, run by :func:`simulator.runner.run_plan`). A
scenario's points are those ``run`` simulates (:func:`simulator.runner.plan_points`: with
``algorithms: auto`` NCCL's pick at each size; ``all`` and ``auto`` leave out, with a note, a
point that cannot run at its size).
Points are independent and seeded by ``(seed, size)``, so running them on any number of worker
processes, in any order, gives the very rows a serial :func:`~simulator.runner.simulate` gives;
the frames are put back in serial order. By default a local cluster of one single-threaded
worker process per core runs them (``LocalCluster``); ``scheduler`` names an existing Dask
cluster instead (``tcp://host:8786``), whose workers need this package installed. A point that
fails is reported with its parameters and the others are kept.

Workers die: a point that takes more memory than its worker has is killed with it (the nanny's
memory limit, or the kernel's), and the nanny starts another. Each point's outcome is taken
as soon as it finishes, so a later death loses nothing; a point that killed
:data:`ALLOWED_FAILURES` + 1 workers is reported failed (Dask's ``KilledWorker``) and the
others go on; and where no worker has been up for :data:`NO_WORKERS_S` (none restarted, each
killed again as soon as it starts, a remote cluster's last one gone) the sweep stops waiting
and reports the points it could not run. A local cluster that does not start, or a scheduler
that does not answer, is a :class:`ClusterError`, one line. A signal (Ctrl-C, SIGTERM, SIGHUP)
stops the wait: the points that finished are kept, and the cluster is closed within
:data:`CLOSE_S`.

Dask (``dask[distributed]``) and tqdm are the ``sweep`` extra, imported only here, only when a
sweep runs (``pip install 'allreduce-sim[sweep]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simulator.errors import InputError, Problem, SimulatorError, quoted
from simulator.output.files import interrupts_held
from simulator.output.results import Result, results_frame
from simulator.plan import LeftOut, Setup, plan_point, prepare
from simulator.runner import checked_setup, plan_points, run_plan, settings_of
from simulator.scenario.spec import Scenario
from simulator.settings import RunSettings

if TYPE_CHECKING:
    import pandas as pd

ALLOWED_FAILURES = 1
"""Worker deaths a point may cause before it is reported failed (Dask's
``distributed.scheduler.allowed-failures``, set on the local cluster's scheduler; a remote
scheduler keeps its own, 3 by default). A worker runs one point at a time, so a worker that
dies twice running the same point was killed by that point (for its memory, most often): a
third try would only kill a third worker."""

NO_WORKERS_S = 20.0
"""How long a sweep waits with no worker up before it stops and reports the points not run: a
worker the nanny restarts is back within seconds (1.3 to 1.5 s measured here, a worker SIGKILLed
five times at a load of 6 on 2 cores), so 20 s is over ten restarts; one it failed to restart,
one killed again as soon as it starts, or a remote cluster's last worker gone, never comes
back. With the cluster's start and close this ends a sweep whose workers all die well within
the minute a person waits (issue 40; it was 60 s, and such a sweep ended after 75 s)."""

POLL_S = 1.0
"""How often a waiting sweep asks the scheduler which workers it has; a worker counts as up
once it is there at two polls running, so workers killed as soon as they start (every one,
repeatedly) do not keep the sweep waiting."""

CONNECT_S = 5.0
"""How long the sweep tries to reach a ``--scheduler`` (Dask's connect timeout, whose default,
``distributed.comm.timeouts.connect``, is 30 s, shortened: a scheduler on a network a sweep can
use answers a connection in milliseconds, and one that is not there is said at once)."""

HANDSHAKE_S = 10.0
"""How long a ``--scheduler`` that accepted the connection has to answer Dask's handshake (Dask
waits for that answer without a bound, and a port that accepts connections but never answers
hung the sweep for ever: issue 40). A scheduler answers in milliseconds, one under load within
a second or two; 10 s is ample, and keeps the failure well short of what a person waits."""

CLOSE_S = 5.0
"""How long closing the client and the local cluster may take (their workers busy, dying or
gone), so that a stopped sweep ends within the 10 s issue 40 gives it: the nannies stop their
workers in under a second here, and whatever is left when this runs out dies with the
process."""

QUIET: dict[str, Any] = {"dashboard_address": ":0", "scheduler_kwargs": {"dashboard": False},
                         "silence_logs": logging.CRITICAL}
"""A local cluster that says nothing on stderr, as the sweep says what happened itself: no
dashboard, and its HTTP server on a free port (``dashboard_address=None`` still takes 8787,
warning on stderr where another cluster holds it), Dask's logs only when critical."""


class ClusterError(SimulatorError):
    """The local Dask cluster did not start (a worker that dies as it starts, a broken Dask
    configuration), or the ``--scheduler`` took the connection but did not answer: no point
    ran."""


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
    """Where a signal stopped the sweep (Ctrl-C, SIGTERM, SIGHUP), how many points it had (the
    frames hold those that finished, in their order); 0 where it ran to its end."""
    stop: KeyboardInterrupt | None = None
    """Where a signal stopped the sweep, the interrupt it raised (which signal it was)."""
    stranded: tuple[Failure, ...] = ()
    """Where no worker was left for :data:`NO_WORKERS_S`, the points it could not run (the
    frames hold those that finished)."""
    notes: tuple[str, ...] = ()
    """The points ``all`` and ``auto`` left out, one line each naming its scenario's file, as
    ``run`` says them (:func:`simulator.runner.plan_points`)."""
    left_out: tuple[tuple[LeftOut, ...], ...] = ()
    """The same points, per scenario in the order given: the rows of its table that say why."""


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
        return run_plan(plan)
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
    dask = _dask(scenarios)
    if workers is not None and workers < 1:
        raise InputError([Problem("sweep", "workers", f"expected a whole number ≥ 1, got "
                                                      f"{workers}")])
    work = []
    settings = []
    plans: list[list[tuple[str, int]]] = []
    done = [{(row.algorithm, row.size_bytes): row for row in rows}
            for rows in (kept if kept is not None else [[] for _ in scenarios])]
    notes: list[str] = []
    left_out: list[tuple[LeftOut, ...]] = []
    for index, scenario in enumerate(scenarios):
        settings.append(settings_of(scenario, seed, proxy_elements))
        setup = checked_setup(scenario, settings[index])
        planned = plan_points(scenario, setup, settings[index])  # the run's points, as run's
        plans.append([(plan.algorithm.name, plan.size_bytes) for plan in planned.plans])
        notes += [f"{scenario.source}: {left.note}" for left in planned.left_out]
        left_out.append(planned.left_out)
        work += [(index, *point) for point in plans[index] if point not in done[index]]
    if scheduler is None:
        cluster, client = _local(dask, workers or os.cpu_count() or 1)
    else:
        cluster = None
        client = _connect(dask, scheduler)
    try:
        sweep_id = uuid.uuid4().hex
        # handed out in the plans' order (Dask runs those submitted together in an order of its
        # own): a scenario's small sizes first, so a sweep stopped early has them
        futures = [client.submit(run_one, f"{sweep_id}/{index}", scenarios[index], algorithm, size,
                                 settings[index], pure=False, priority=len(work) - at)
                   for at, (index, algorithm, size) in enumerate(work)]
        bar = dask.tqdm(total=len(futures), unit="point", disable=not progress, file=sys.stderr)
        points = [(scenarios[index].name, algorithm, size) for index, algorithm, size in work]
        taken = _taken(client, dask, futures, points, bar)
        bar.close()
    finally:
        _close(client, cluster)
    failures, stranded = [], []
    for (index, algorithm, size), outcome in zip(work, taken.outcomes, strict=True):
        if isinstance(outcome, Failure):
            failures.append(outcome)
        elif outcome is not None:
            done[index][(algorithm, size)] = outcome
        elif taken.stranded:
            stranded.append(Failure(scenarios[index].name, algorithm, size,
                                    "no Dask worker left to run it"))
    rows = [[done[index][point] for point in plan if point in done[index]]
            for index, plan in enumerate(plans)]  # kept and new alike, in the plan's order
    return Sweep(tuple(results_frame(r) for r in rows), tuple(failures),
                 sum(map(len, plans)) if taken.stop is not None else 0, taken.stop, tuple(stranded),
                 tuple(notes), tuple(left_out))


@dataclass(frozen=True)
class _Dask:
    """What a sweep uses of Dask and tqdm, imported when a sweep runs."""

    Client: Any
    LocalCluster: Any
    wait: Any
    KilledWorker: type[Exception]
    config: Any
    tqdm: Any
    connect: Any


@dataclass(frozen=True)
class _Taken:
    """Each point's outcome (None: not finished), and why the wait ended early: the interrupt
    a signal raised (Ctrl-C, SIGTERM, SIGHUP), or no worker left."""

    outcomes: list[Result | Failure | None]
    stop: KeyboardInterrupt | None
    stranded: bool


def _local(dask: _Dask, workers: int) -> tuple[Any, Any]:
    """A local cluster of ``workers`` single-threaded worker processes and its client, its
    scheduler giving a point up after :data:`ALLOWED_FAILURES` + 1 worker deaths; ClusterError,
    one line, where it does not start.

    A Ctrl-C while it starts (seconds) is held until it is up, then the cluster is closed and
    the interrupt raised: one interrupted part way is left to Dask's own close at exit, which
    fails on its workers still starting and prints a traceback after the sweep's one line."""
    cluster = client = None
    try:
        with interrupts_held():
            cluster, client = _started(dask, workers)
    except KeyboardInterrupt:
        _close(client, cluster)
        raise
    return cluster, client


def _started(dask: _Dask, workers: int) -> tuple[Any, Any]:
    """:func:`_local`'s cluster and client, started."""
    with dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES}):
        try:
            cluster = dask.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                        **QUIET)
        except Exception as error:  # whatever Dask raises: a worker dead as it starts, mostly
            raise ClusterError(f"the local Dask cluster did not start: "
                               f"{_one_line(error)}") from None
    try:
        return cluster, dask.Client(cluster)
    except Exception as error:
        _close(None, cluster)
        raise ClusterError(f"no client of the local Dask cluster: {_one_line(error)}") from None


def _taken(client: Any, dask: _Dask, futures: list[Any], points: list[tuple[str, str, int]],
           bar: Any) -> _Taken:
    """Wait for ``futures`` (of ``points``: scenario, algorithm, size), taking each one's
    outcome as soon as it is done (and letting the cluster forget it, so that no later worker
    death loses or reruns it), until all are done, a signal stops it, or no worker has been up
    for :data:`NO_WORKERS_S`."""
    index = {future.key: i for i, future in enumerate(futures)}
    outcomes: list[Result | Failure | None] = [None] * len(futures)
    pending = set(futures)
    alone_since: float | None = None
    seen: set[str] = set()
    try:
        while pending:
            try:
                finished, pending = dask.wait(pending, timeout=POLL_S, return_when="FIRST_COMPLETED")
            except TimeoutError:
                finished = set()
            for future in finished:
                at = index[future.key]
                try:
                    outcomes[at] = _outcome(future, points[at], dask.KilledWorker)
                except TimeoutError:  # its result died with its worker before it came: rerun
                    pending.add(future)
                    continue
                future.release()
                bar.update(1)
            workers = _workers(client)
            if not pending or finished or workers & seen:  # a worker up at two polls running
                alone_since = None
            elif alone_since is None:
                alone_since = time.monotonic()
            elif time.monotonic() - alone_since >= NO_WORKERS_S:
                with contextlib.suppress(Exception):  # a scheduler gone cannot cancel them
                    client.cancel(list(pending))
                return _Taken(outcomes, None, True)
            seen = workers
    except KeyboardInterrupt as stop:  # keep what finished: the caller writes it and says so
        return _Taken(outcomes, stop, False)
    return _Taken(outcomes, None, False)


def _workers(client: Any) -> set[str]:
    """The addresses of the scheduler's workers (none where it does not answer)."""
    try:
        return set(client.nthreads())
    except Exception:  # a scheduler gone has no workers to give
        return set()


def _outcome(future: Any, point: tuple[str, str, int],
             killed_worker: type[Exception]) -> Result | Failure:
    """A done future's outcome: :func:`run_one`'s, or the failure of ``point`` where Dask
    could not run it (its workers died running it; the cluster cancelled it); TimeoutError
    where its result, lost with its worker, does not come within :data:`NO_WORKERS_S`."""
    scenario, algorithm, size = point
    if future.status == "cancelled":
        return Failure(scenario, algorithm, size, "cancelled by the Dask scheduler")
    try:
        outcome: Result | Failure = future.result(timeout=NO_WORKERS_S)
        return outcome
    except killed_worker as error:
        deaths = getattr(error, "allowed_failures", ALLOWED_FAILURES) + 1
        return Failure(scenario, algorithm, size, (
            f"{deaths} Dask worker{'s' if deaths > 1 else ''} died running it (killed for the "
            "memory it took, or crashed)"))
    except TimeoutError:
        raise
    except Exception as error:
        return Failure(scenario, algorithm, size, _one_line(error))


def _close(client: Any, cluster: Any) -> None:
    """Close the client and the local cluster; one whose workers died may fail to close
    cleanly, which changes nothing for the points already taken."""
    for closing in (client, cluster):
        if closing is not None:
            with contextlib.suppress(Exception):  # nothing left to save: the outcomes are taken
                closing.close(timeout=CLOSE_S)


def _one_line(error: BaseException) -> str:
    """An exception as one line: its type where its message says nothing, newlines folded."""
    text = " ".join(str(error).split()).rstrip(".")
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _dask(scenarios: Sequence[Scenario]) -> _Dask:
    """What a sweep uses of Dask and tqdm; an input error naming the extra when they are not
    installed."""
    try:
        import dask.config
        from dask.distributed import Client, KilledWorker, LocalCluster, wait
        from distributed.comm.core import connect
        from tqdm import tqdm
    except ImportError as error:
        where = scenarios[0].source if scenarios else "sweep"
        raise InputError([Problem(where, "sweep", f"needs the 'sweep' extra ({error.name} is not "
                                                  "installed): pip install 'allreduce-sim[sweep]'")]
                         ) from None
    return _Dask(Client, LocalCluster, wait, KilledWorker, dask.config, tqdm, connect)


_ADDRESS = re.compile(r"(?:(?:tcp|tls)://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-]+):(\d{1,5})")
"""A Dask scheduler's address: ``tcp://`` (the default) or ``tls://``, a host name, IPv4 or
[IPv6], and a port."""


def _connect(dask: _Dask, scheduler: str) -> Any:
    """A client of the Dask scheduler at ``scheduler``: an input error where the address is not
    one or nothing takes the connection (within :data:`CONNECT_S`), ClusterError where what
    took it does not answer as a scheduler (within :data:`HANDSHAKE_S`)."""
    found = _ADDRESS.fullmatch(scheduler) if isinstance(scheduler, str) else None
    if found is None or not 0 < int(found[2]) < 65536:
        raise InputError([Problem("sweep", "scheduler", f"expected an address like "
                                                        f"tcp://host:8786, got {quoted(scheduler)}")])
    try:  # Dask's own handshake waits without a bound: this one is bounded, then the client
        asyncio.run(_answers(dask.connect, scheduler))
        return dask.Client(scheduler, timeout=f"{CONNECT_S:g}s")
    except TimeoutError:  # Python's, and asyncio's: it took the connection but said nothing
        raise ClusterError(f"the Dask scheduler at {quoted(scheduler)} took the connection but "
                           f"did not answer within {HANDSHAKE_S:g} s") from None
    except (OSError, ValueError) as error:
        raise InputError([Problem("sweep", "scheduler", f"no Dask scheduler answers at "
                                                        f"{quoted(scheduler)}: {error}")]) from None


async def _answers(connect: Any, scheduler: str) -> None:
    """Connect to ``scheduler`` and take its handshake, all within :data:`HANDSHAKE_S`;
    TimeoutError where the handshake does not come (an OSError, sooner, where no connection
    is taken within :data:`CONNECT_S`)."""
    comm = await asyncio.wait_for(connect(scheduler, timeout=CONNECT_S), HANDSHAKE_S)
    await comm.close()
