"""Algorithms: what moves where. Per-rank programs, their closed forms, and the registry.

This package is also the public API for writing an algorithm (``docs/writing-an-algorithm.md``):
everything an algorithm file needs is importable from here.

May import: :mod:`simulator.model`, :mod:`simulator.units`, :mod:`simulator.errors`; numpy. Never
SimPy, pandas, matplotlib, the engine, scenario files or output: a program only yields requests
to a communicator, so the same program can be timed by the SimPy engine, checked by a plain
interpreter or traced.
"""

from simulator.algorithms.algorithm import (
    Algorithm,
    ExactOn,
    Inner,
    ModelKind,
    NoOptions,
    RankCounts,
)
from simulator.algorithms.comm import COPY, REDUCE, Combine, Comm, Program
from simulator.algorithms.cost import CostInputs, pipeline_s, proportionate_pipeline_s
from simulator.algorithms.phases.pieces import PIPELINE_BYTES, recv_pieces, send_pieces, swap
from simulator.model.collective import ROOT, Collective
from simulator.model.span import Span

# isort: split
# The registry last: it imports every algorithm module, and an algorithm module may import the
# names above from this package (the guide's star.py does), so they must all exist by then.
from simulator.algorithms.registry import (
    REGISTRY,
    algorithm_names,
    composable_names,
    get_algorithm,
)

__all__ = [
    "COPY",
    "PIPELINE_BYTES",
    "REDUCE",
    "REGISTRY",
    "ROOT",
    "Algorithm",
    "Collective",
    "Combine",
    "Comm",
    "CostInputs",
    "ExactOn",
    "Inner",
    "ModelKind",
    "NoOptions",
    "Program",
    "RankCounts",
    "Span",
    "algorithm_names",
    "composable_names",
    "get_algorithm",
    "pipeline_s",
    "proportionate_pipeline_s",
    "recv_pieces",
    "send_pieces",
    "swap",
]
