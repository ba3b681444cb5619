"""The results of a run: one :class:`Result` row per (algorithm, size), and the column order of
the results file (the first 14 columns are the public contract, docs/results.md)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class Result:
    """One row of the results file: an (algorithm, size) point of a scenario.

    ``algbw = size / time`` and ``busbw = algbw × factor`` with nccl-tests' factor
    (allreduce: 2(p-1)/p), in GB/s of 10^9 bytes; both are NaN when the time is zero (p = 1).
    ``verified`` is None when verification was off. ``verified_elements`` is how many elements
    per rank the numpy check covered: ``count`` itself, or a proxy with the same partitioning.
    ``execution`` is the model that timed the run and ``protocol`` NCCL's protocol under the
    ``nccl`` model (empty under ``ideal``). Under ``nccl``, ``nccl_time_s`` is the time NCCL's
    own cost model predicts for the row's NCCL algorithm and protocol, and ``nccl_pick`` whether
    the row is what NCCL would run at this size (both empty under ``ideal``). ``channels`` is
    how many channels the buffer was split over, and ``engine`` which engine ran the point
    (``simpy``, or ``vector`` where ``events`` counts the instants it processed).
    ``bottleneck_link`` is the link busy longest (``from->to``; empty where no link carried
    anything) and ``bottleneck_share`` its busy time over ``sim_time_s``
    (:func:`~simulator.model.activity.bottleneck`). Where the scenario has ``faults``,
    ``faults`` says which (``"; "``-separated, a fault that struck after the run ended marked
    "did not act"), ``healthy_time_s`` is the same point simulated without them and
    ``fault_slowdown`` ``sim_time_s / healthy_time_s``; empty otherwise. ``max_ulp_error`` and
    ``mean_ulp_error`` are the error against the float64 reference in units in the last place
    of the dtype, the largest and the mean over the checked elements, and ``ranks_identical``
    whether every rank holds the same bits (docs/numerics.md); all three empty when not verified.
    Where verification failed, ``mismatch`` says where first: the rank and chunk, and what the
    chunk holds where the algorithm can tell (``Algorithm.explain``); empty otherwise.
    ``model_kind`` says what ``model_time_s`` is (issue 38): ``bound``, a closed form never
    below the fabric's floor, or ``estimate``, one that may be
    (:class:`~simulator.algorithms.algorithm.ModelKind`).
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
    execution: str = "ideal"
    protocol: str = ""
    nccl_time_s: float = math.nan
    nccl_pick: bool | None = None
    channels: int = 1
    engine: str = "simpy"
    bottleneck_link: str = ""
    bottleneck_share: float = math.nan
    faults: str = ""
    healthy_time_s: float = math.nan
    fault_slowdown: float = math.nan
    max_ulp_error: float = math.nan
    mean_ulp_error: float = math.nan
    ranks_identical: bool | None = None
    mismatch: str = ""
    model_kind: str = "bound"


RESULT_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Result))
"""Column order of the results file; the first 14 are the public contract (docs/results.md)."""


def results_frame(results: Iterable[Result]) -> pd.DataFrame:
    """Result rows as the results file's frame (columns RESULT_COLUMNS), the one
    :func:`~simulator.runner.simulate` returns."""
    import pandas as pd  # here, so that the rows and columns stay light to import

    frame = pd.DataFrame([tuple(getattr(result, name) for name in RESULT_COLUMNS)
                          for result in results], columns=list(RESULT_COLUMNS))  # scalars: no copy
    return frame.astype({"verified": "boolean", "ranks_identical": "boolean"})

