"""Max-min sharing's two loops compiled with numba (the ``fast`` extra), for large fabrics and
long runs; and :func:`jitted`, which compiles them and the data's replay
(:mod:`simulator.engine.replayed`).

- :func:`_filling`, progressive filling: :func:`~simulator.engine.kernel.max_min_rates` takes
  it for an instance of :data:`~simulator.engine.kernel.FILLING_ENTRIES` entries or more, and
  for any instance where :func:`wanted` says (a large fabric, a long run). The
  rounds of a dense all-to-all (361 distinct shares over 92,928 entries for ``direct`` on the
  k = 8 fat-tree) then cost loops over the links a round touches rather than a dozen numpy
  calls each.
- :func:`_component`, the layers of :meth:`~simulator.engine.flows.Reach.component` where
  :func:`wanted` says.

The arithmetic is the kernel's, operation for operation, so the rates are the numpy
statements' to the bit (``tests/test_kernel.py``, ``tests/test_vector.py`` hold them equal):

- a link's share is ``max(left, 0) / unfrozen`` (inf with no unfrozen flow), recomputed only
  where a round froze a flow crossing it (the others' inputs did not move, nor so their share);
- a round's level is the least share; every unfrozen flow crossing a link at that level is
  frozen at it at once;
- a link's count of newly frozen flows is a sum of whole numbers (flows, or their copies),
  exact in any order, then ``left -= count · level`` and ``unfrozen -= count``.

(A NaN capacity, which no machine has, would be read as 0 here where numpy keeps the NaN.)

Without numba (the default install), or where it cannot compile (a read-only cache, a broken
llvmlite: one warning), the functions are None and the engine shares with numpy. Loading numba
and the two functions from numba's cache costs 0.26 s a process (farm-bench, 5 runs: 0.33 s
against 0.06 s for importing this module alone; compiling them afresh, about 3 s once), so
only a run that gains more does (:func:`wanted`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

Filling = Callable[[np.ndarray, np.ndarray, int, np.ndarray, np.ndarray, np.ndarray], np.ndarray]
Component = Callable[..., tuple[np.ndarray, bool]]

LARGE_FABRIC_PAIRS = 4096
"""From how many routed pairs a vectorised run's fabric counts as large: from the first
re-share after that many pairs are routed, its re-shares walk their components and fill their
rates compiled, however small each."""

LONG_RUN_RESHARES = 4096
"""From which re-share a vectorised run takes the compiled loops on a fabric that is not large.
A re-share costs 19-56 µs less compiled: with the loops taken from the first re-share, loading
them included (0.26 s), the GB200 ring's 143,052 re-shares take 17.83 → 15.39 s and
``h100x8-auto``'s 47,582 take 15.71 → 13.29 s (farm-bench medians of 3 pairs), so r = (saved +
0.26 s) / re-shares. The first 4,096 re-shares in numpy then cost 0.08-0.23 s more, about the
load: the ski-rental rule (rent until the rent paid nears the price), whose worst case is a run
that ends soon after the threshold and pays the 0.26 s load for little. A shorter run, so a
test's or a small scenario's point, does not load numba by this rule (an instance of
:data:`~simulator.engine.kernel.FILLING_ENTRIES` entries still does)."""


def wanted(pairs: int, reshares: int) -> bool:
    """Whether a run's re-share takes the compiled loops (where numba is installed): on a fabric
    of :data:`LARGE_FABRIC_PAIRS` routed pairs or more, and from the run's
    :data:`LONG_RUN_RESHARES`-th re-share on any other. The rates are the same bits either way
    (the module docstring), so this decides the wall time alone."""
    return pairs >= LARGE_FABRIC_PAIRS or reshares >= LONG_RUN_RESHARES


_loaded: dict[str, Any] = {}


def jitted(name: str, function: Callable[..., Any], sample: Callable[[], tuple[Any, ...]]) -> Any:
    """``function`` compiled by numba and run once on the arguments ``sample`` makes (so that
    it compiles, or loads from numba's cache, now; made only then, as this is asked at every
    re-share that wants the loops); None where numba is not installed. Where the cache cannot
    be written or read it compiles without one; where it cannot compile at all, one warning
    and None: the numpy statements give the same rates (the same data, for the replay)."""
    if name not in _loaded:
        _loaded[name] = None
        try:
            import numba
        except ImportError:
            return None
        except Exception as error:  # a broken install: numba or llvmlite fails to load
            warnings.warn(f"numba fails to load ({error}); numpy instead", RuntimeWarning,
                          stacklevel=3)
            return None
        failure: Exception | None = None
        for cache in (True, False):
            try:
                compiled = numba.njit(cache=cache, nogil=True)(function)
                compiled(*sample())
            except Exception as error:  # no cache locator, a truncated cache file, ...
                failure = error
                continue
            _loaded[name] = compiled
            break
        else:
            warnings.warn(f"numba cannot compile {name} ({failure}); numpy instead",
                          RuntimeWarning, stacklevel=3)
    return _loaded[name]


def compiled_filling() -> Filling | None:
    """The compiled :func:`_filling`, or None where numba is not installed or cannot compile."""
    filling: Filling | None = jitted("filling", _filling, _filling_sample)
    return filling


def compiled_component() -> Component | None:
    """The compiled :func:`_component`, or None where numba is not installed or cannot
    compile."""
    component: Component | None = jitted("component", _component, _component_sample)
    return component


def _filling_sample() -> tuple[Any, ...]:
    """:func:`_filling`'s arguments for one flow on one link."""
    one = np.zeros(1, dtype=np.int64)
    return one, one, 1, np.ones(1), np.ones(1), np.ones(1)


def _component_sample() -> tuple[Any, ...]:
    """:func:`_component`'s arguments for one pair on no link."""
    none, one = np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
    return none, 1, np.zeros(2, dtype=np.int64), none, one, one, none, one, one.copy(), 1, 0


def _component(dirty: Any, links: int, cross_start: Any, cross_pairs: Any, first: Any,
               count: Any, route_links: Any, copies: Any, stamp: Any, call: int,
               busy: int) -> Any:
    """:meth:`~simulator.engine.flows.Reach.component`'s layers in loops: the pairs with
    flows (``copies`` > 0) crossing a link the last layer reached (``dirty`` first), stamped
    ``call`` as they join; (the pairs joined, sorted, False), or (none, True) once more than
    half the ``busy`` pairs (with flows) have joined. ``cross_start``/``cross_pairs``: the
    pairs crossing each link (:meth:`Routes.crossers`); ``first``/``count``/``route_links``:
    each pair's links."""
    reached = np.zeros(links, np.bool_)
    frontier = np.empty(links, np.int64)
    ahead = 0
    for link in dirty:
        reached[link] = True
        frontier[ahead] = link
        ahead += 1
    found = np.empty(copies.shape[0], np.int64)
    taken = 0
    while True:
        before = taken
        for i in range(ahead):
            link = frontier[i]
            for at in range(cross_start[link], cross_start[link + 1]):
                pair = cross_pairs[at]
                if copies[pair] > 0 and stamp[pair] != call:
                    stamp[pair] = call
                    found[taken] = pair
                    taken += 1
        if taken == before:
            return np.sort(found[:taken]), False
        if 2 * taken > busy:
            return found[:0], True
        ahead = 0
        for i in range(before, taken):
            pair = found[i]
            for at in range(first[pair], first[pair] + count[pair]):
                link = route_links[at]
                if not reached[link]:
                    reached[link] = True
                    frontier[ahead] = link
                    ahead += 1


def _filling(flow_of: Any, link_of: Any, flows: int, capacity: Any, weight: Any,
             users: Any) -> Any:
    """Max-min rates of ``flows`` flows, entry k saying flow ``flow_of[k]`` crosses link
    ``link_of[k]`` with ``weight[k]`` identical flows (floats of whole numbers), ``users[l]``
    the weights on link l summed (the kernel has them already); NaN for a flow that crosses
    no link. Written for numba: loops over arrays, no Python objects."""
    links = capacity.shape[0]
    entries = flow_of.shape[0]
    local = np.full(links, -1, np.int64)  # the links in use, numbered 0 .. used - 1
    used = 0
    for link in range(links):
        if users[link] > 0:
            local[link] = used
            used += 1
    left = np.empty(used)
    unfrozen = np.empty(used)
    for link in range(links):
        if local[link] >= 0:
            left[local[link]] = capacity[link]
            unfrozen[local[link]] = users[link]
    # the entries flow by flow (to find a frozen flow's links) and link by link (a tight
    # link's flows)
    flow_start = np.zeros(flows + 1, np.int64)
    link_start = np.zeros(used + 1, np.int64)
    for k in range(entries):
        flow_start[flow_of[k] + 1] += 1
        link_start[local[link_of[k]] + 1] += 1
    for f in range(flows):
        flow_start[f + 1] += flow_start[f]
    for j in range(used):
        link_start[j + 1] += link_start[j]
    flow_links = np.empty(entries, np.int64)
    flow_weight = np.empty(entries)
    link_flows = np.empty(entries, np.int64)
    flow_at = flow_start[:-1].copy()
    link_at = link_start[:-1].copy()
    for k in range(entries):
        f, j = flow_of[k], local[link_of[k]]
        flow_links[flow_at[f]] = j
        flow_weight[flow_at[f]] = weight[k]
        flow_at[f] += 1
        link_flows[link_at[j]] = f
        link_at[j] += 1
    share = np.empty(used)
    for j in range(used):
        share[j] = (left[j] if left[j] > 0.0 else 0.0) / unfrozen[j] if unfrozen[j] > 0 \
            else np.inf
    rates = np.full(flows, np.nan)
    frozen = np.zeros(flows, np.bool_)
    counts = np.zeros(used)
    touched = np.empty(used, np.int64)
    touching = np.zeros(used, np.bool_)  # whether a link is in this round's ``touched``
    newly = np.empty(flows, np.int64)
    left_entries = entries
    while left_entries > 0:
        level = np.inf
        for j in range(used):
            if share[j] < level:
                level = share[j]
        found = 0
        for j in range(used):
            if share[j] == level:
                for at in range(link_start[j], link_start[j + 1]):
                    f = link_flows[at]
                    if not frozen[f]:
                        frozen[f] = True
                        rates[f] = level
                        newly[found] = f
                        found += 1
        reached = 0
        for i in range(found):
            f = newly[i]
            for at in range(flow_start[f], flow_start[f + 1]):
                j = flow_links[at]
                if not touching[j]:
                    touching[j] = True
                    touched[reached] = j
                    reached += 1
                counts[j] += flow_weight[at]
            left_entries -= flow_start[f + 1] - flow_start[f]
        for i in range(reached):
            j = touched[i]
            left[j] -= counts[j] * level
            unfrozen[j] -= counts[j]
            share[j] = (left[j] if left[j] > 0.0 else 0.0) / unfrozen[j] if unfrozen[j] > 0 \
                else np.inf
            counts[j] = 0.0
            touching[j] = False
    return rates
