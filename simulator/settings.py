"""How a scenario is run, apart from what it simulates: whether the data is verified, which
engine times the points, the input data's seed and the elements per rank actually moved.

A scenario file states ``verify``, ``engine`` and ``fast_forward`` (they land in
``Scenario.run``); the command
line's ``--seed`` and ``--proxy-elements`` (or the API's ``seed=`` and ``proxy_elements=``) give
the rest, which a Scenario built in code may also set. None of these changes a simulated time
(the engines agree, tests/test_vector.py), so a caller such as the trainer varies them with
``dataclasses.replace`` instead of forging a new scenario. A leaf: imports only ``limits`` and
``errors``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from simulator.errors import Problem, quoted
from simulator.limits import DEFAULT_PROXY_ELEMENTS


class Engine(Enum):
    """Which engine runs a scenario's points (``engine:``): both give the same times and
    buffers where both can run (tests/test_vector.py)."""

    AUTO = "auto"      # the vectorised engine where the algorithm has a hand-written builder
    #                    (or asks for its trace there: Algorithm.trace_vectorised) and the
    #                    engine does not decline the point, else SimPy
    SIMPY = "simpy"    # the per-rank reference engine (simulator/engine/run.py)
    VECTOR = "vector"  # the vectorised schedule engine (simulator/engine/vector.py)


@dataclass(frozen=True)
class RunSettings:
    """The settings of one run: ``verify`` moves real data and checks it against numpy (False:
    a timing-only payload), ``engine`` picks the engine, ``seed`` seeds the inputs (drawn per
    ``(seed, size)``, so reruns are identical), ``proxy_elements`` caps the elements per rank
    moved and verified, ``fast_forward`` lets the vectorised engine jump over a steady
    pipeline's repeating periods (:mod:`simulator.engine.steady`: the same times, buffers and
    link figures to the bit, so only a check of that turns it off)."""

    verify: bool = True
    engine: Engine = Engine.AUTO
    seed: int = 0
    proxy_elements: int = DEFAULT_PROXY_ELEMENTS
    fast_forward: bool = True

    def problems(self, source: str) -> list[Problem]:
        """What is wrong with the seed and the proxy's length, attributed to ``source``."""
        problems = []
        seed, proxy = self.seed, self.proxy_elements
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            problems.append(Problem(source, "seed", f"expected a whole number ≥ 0, got {quoted(seed)}"))
        if isinstance(proxy, bool) or not isinstance(proxy, int) or proxy < 1:
            problems.append(Problem(source, "proxy_elements",
                                    f"expected a whole number ≥ 1, got {quoted(proxy)}"))
        return problems
