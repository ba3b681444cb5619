"""The loops of :mod:`simulator.engine.replayed`, for numba: importing this module imports numba,
so :func:`~simulator.engine.replayed.replay_for` imports it only when a run replays its data.
:func:`replay` is compiled there (:func:`~simulator.engine.compiled.jitted`, with numba's
cache); the helpers it calls are compiled here, as numba needs them to be.

The data on their way live in one store (an array of the buffers' dtype): each posted message's
span from its ``at`` (a window column) while it is ``live``, and each in-switch round's sum so
far, found by the schedule number of the round's last upload so far in a table of rows (key,
where, length): open addressing with linear probing, deletion by backward shift (Knuth,
*TAOCP* vol. 3, §6.4, Algorithm R), so that a lookup costs a few probes however many rounds
are in progress. The first upload of a round makes its own data the sum; the others add to it
in place and pass it on to their own key.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

EMPTY = -1
"""A free row's key (schedule numbers are not negative)."""


def table(rows: int = 64) -> np.ndarray:
    """An empty table of in-switch sums: ``rows`` (a power of two) rows of (key, where,
    length)."""
    made = np.zeros((rows, 3), dtype=np.int64)
    made[:, 0] = EMPTY
    return made


@numba.njit(cache=True, nogil=True)
def combined(a: Any, b: Any, op: int) -> Any:
    """``a ⊕ b`` for the op code of :data:`~simulator.engine.replayed.OPS`, as numpy's ufunc
    gives it."""
    if op == 0:
        return a + b
    if op == 1:
        return a * b
    if op == 2:
        return a if (a > b or a != a) else b  # numpy's maximum: a NaN wins, b on a tie (±0)
    return a if (a < b or a != a) else b


@numba.njit(cache=True, nogil=True)
def home(key: int, mask: int) -> int:
    """A key's first row of ``mask + 1`` (a power of two): Fibonacci hashing (Knuth, §6.4),
    the top bits of the key times 2^64/φ, wrapped to 64 bits."""
    bits = 0
    while (1 << bits) <= mask:
        bits += 1
    return ((key * -7046029254386353131) >> (64 - bits)) & mask


@numba.njit(cache=True, nogil=True)
def found(rows: Any, key: int) -> int:
    """The row holding ``key``, or -1."""
    mask = rows.shape[0] - 1
    i = home(key, mask)
    while rows[i, 0] != EMPTY:
        if rows[i, 0] == key:
            return i
        i = (i + 1) & mask
    return -1


@numba.njit(cache=True, nogil=True)
def removed(rows: Any, i: int) -> None:
    """Free row ``i``, moving back the rows after it that would no longer be found."""
    mask = rows.shape[0] - 1
    j = i
    while True:
        j = (j + 1) & mask
        if rows[j, 0] == EMPTY:
            break
        h = home(rows[j, 0], mask)
        if (i <= j and (h <= i or h > j)) or (i > j and h <= i and h > j):
            rows[i, 0], rows[i, 1], rows[i, 2] = rows[j, 0], rows[j, 1], rows[j, 2]
            i = j
    rows[i, 0] = EMPTY


@numba.njit(cache=True, nogil=True)
def put(rows: Any, key: int, where: int, length: int) -> None:
    """Write (key, where, length) in the first free row from the key's home (``key`` not
    in ``rows``, a free row left)."""
    mask = rows.shape[0] - 1
    i = home(key, mask)
    while rows[i, 0] != EMPTY:
        i = (i + 1) & mask
    rows[i, 0], rows[i, 1], rows[i, 2] = key, where, length


@numba.njit(cache=True, nogil=True)
def added(rows: Any, state: Any, key: int, where: int, length: int) -> Any:
    """``rows`` with (key, where, length) added (a new table, twice the rows, once half
    full); ``state[1]`` counts the rows in use."""
    if 2 * (state[1] + 1) > rows.shape[0]:
        grown = np.zeros((2 * rows.shape[0], 3), np.int64)
        grown[:, 0] = EMPTY
        for r in range(rows.shape[0]):
            if rows[r, 0] != EMPTY:
                put(grown, rows[r, 0], rows[r, 1], rows[r, 2])
        rows = grown
    put(rows, key, where, length)
    state[1] += 1
    return rows


@numba.njit(cache=True, nogil=True)
def stored(store: Any, state: Any, live: Any, at: Any, count: Any, rows: Any,
           needed: int) -> Any:
    """The data on their way (``live`` messages' ``count`` elements from ``at``, and the
    sums of ``rows``) moved to the front of a new store with room for ``needed`` more (twice
    what they take, so that a store grows and compacts in amortised constant time an
    element); ``at``, the rows and the store's top (``state[0]``) follow."""
    total = needed
    for m in range(live.shape[0]):
        if live[m] >= 0:
            total += count[m]
    for r in range(rows.shape[0]):
        if rows[r, 0] != EMPTY:
            total += rows[r, 2]
    moved = np.empty(max(2 * total, store.shape[0]), store.dtype)
    top = 0
    for m in range(live.shape[0]):
        if live[m] >= 0:
            first = at[m]
            for e in range(count[m]):
                moved[top + e] = store[first + e]
            at[m] = top
            top += count[m]
    for r in range(rows.shape[0]):
        if rows[r, 0] != EMPTY:
            first = rows[r, 1]
            for e in range(rows[r, 2]):
                moved[top + e] = store[first + e]
            rows[r, 1] = top
            top += rows[r, 2]
    state[0] = top
    return moved


def sample(dtype: np.dtype[Any]) -> tuple[Any, ...]:
    """:func:`replay`'s arguments for one message posted and received on one rank, its buffers
    and store in ``dtype``."""
    one, flat = np.zeros(1, dtype=np.int64), np.zeros(2, dtype=dtype)
    kinds, bounds = np.array([False, True]), np.array([0, 1, 2], dtype=np.int64)
    none = np.full(1, -1, dtype=np.int64)
    return (kinds, bounds, np.zeros(2, dtype=np.int64), flat, 2, 0, np.zeros(4, dtype=dtype),
            np.zeros(2, dtype=np.int64), one, one, one, one + 1, one, one + 1,
            np.zeros(1, dtype=np.bool_), none.copy(), one.copy(), none, none, 0, table())


def replay(kinds: Any, bounds: Any, messages: Any, flat: Any, width: int, op: int, store: Any,
           state: Any, src: Any, dst: Any, send_first: Any, send_count: Any, recv_first: Any,
           recv_count: Any, reduce: Any, live: Any, at: Any, receive_previous: Any,
           posted_after: Any, start: int, rows: Any) -> Any:
    """Apply the logged groups (group g: a receive where ``kinds[g]``, else a post, of
    ``messages[bounds[g]:bounds[g + 1]]``, window positions) to ``flat``, the ranks' buffers
    (``width`` elements each); the schedule's columns are the window's (``start``: the
    window's first schedule number). A posted message's data go to ``store`` at its ``at``
    (``live`` ≥ 0 till it is received: the window's ``batch`` column); ``rows``: the table of
    in-switch sums; ``state``: the store's top and the table's rows in use. Returns the store
    and the table (new ones where they grew)."""
    for g in range(kinds.shape[0]):
        lo, hi = bounds[g], bounds[g + 1]
        if not kinds[g]:  # a post
            for i in range(lo, hi):
                m = messages[i]
                n = send_count[m]
                if state[0] + n > store.shape[0]:
                    store = stored(store, state, live, at, send_count, rows, n)
                top = state[0]
                if src[m] >= 0:
                    first = src[m] * width + send_first[m]
                else:  # a copy down: its round's sum
                    r = found(rows, posted_after[m])
                    if r < 0:
                        raise KeyError("a copy down whose round has no sum")
                    first = rows[r, 1]
                for e in range(n):
                    store[top + e] = flat[first + e] if src[m] >= 0 else store[first + e]
                live[m] = 0
                at[m] = top
                state[0] = top + n
            for i in range(lo, hi):  # a round's copies down are posted at once: its sum goes
                m = messages[i]
                if src[m] < 0:
                    r = found(rows, posted_after[m])
                    if r >= 0:
                        removed(rows, r)
                        state[1] -= 1
            continue
        for i in range(lo, hi):  # the reductions, in order
            m = messages[i]
            if dst[m] >= 0 and reduce[m]:
                first, data = dst[m] * width + recv_first[m], at[m]
                for e in range(recv_count[m]):
                    flat[first + e] = combined(flat[first + e], store[data + e], op)
        for i in range(lo, hi):  # then the copies, the last one winning
            m = messages[i]
            if dst[m] >= 0 and not reduce[m]:
                first, data = dst[m] * width + recv_first[m], at[m]
                for e in range(recv_count[m]):
                    flat[first + e] = store[data + e]
        for i in range(lo, hi):  # then the uploads, each onto its round's sum so far
            m = messages[i]
            if dst[m] < 0:
                before, data, n = receive_previous[m], at[m], recv_count[m]
                if before >= 0:  # the sum so far, added to in place, passes to this upload
                    r = found(rows, before)
                    if r < 0:
                        raise KeyError("an upload whose round has no sum so far")
                    data = rows[r, 1]
                    for e in range(n):
                        store[data + e] = combined(store[data + e], store[at[m] + e], op)
                    removed(rows, r)
                    state[1] -= 1
                rows = added(rows, state, m + start, data, n)  # a first upload: its data
        for i in range(lo, hi):
            live[messages[i]] = -1
    return store, rows
