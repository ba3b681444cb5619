"""What a vectorised run tells a :class:`~simulator.engine.record.Recorder` about the links: the
bytes each carried and the time it held at least one flow (the SimPy fabric's figures, as
arrays), in the link numbering of :class:`~simulator.engine.routes.Routes`.
"""

from __future__ import annotations

import numpy as np

from simulator.engine.routes import Routes


class LinkTally:
    """Busy time (at least one flow on it) of every link, in the numbering of :class:`Routes`:
    between two instants the flows on each link stay as they are (``Routes.users``, which the
    run keeps anyway), so each link with one gains the time between them. And bytes per
    (sender, receiver) pair, added up as blocks of the schedule load (every message of a
    finished run moves once) and spread over the links of each pair's route at the end."""

    def __init__(self, links: int) -> None:
        self.busy = np.zeros(links)
        self.pair_bytes = np.zeros(0)
        self.settled = np.zeros(links)
        """Bytes carried on routes that pairs left when links failed (:meth:`settle`)."""
        self._held = np.zeros(links, dtype=bool)
        self._gained = np.zeros(links)

    def loaded(self, pairs: np.ndarray, nbytes: np.ndarray, known: int) -> None:
        """Messages of ``pairs`` (``nbytes`` each) were loaded; ``known`` pairs are routed."""
        added = np.bincount(pairs, weights=nbytes, minlength=known).astype(np.float64)
        added[:len(self.pair_bytes)] += self.pair_bytes
        self.pair_bytes = added

    def elapse(self, users: np.ndarray, seconds: float) -> None:
        """``seconds`` passed with ``users`` flows on each link."""
        np.greater(users, 0, out=self._held)  # in place: this runs at every instant
        np.multiply(self._held, seconds, out=self._gained)
        self.busy += self._gained

    def settle(self, routes: Routes, pairs: np.ndarray, unmoved: np.ndarray) -> None:
        """``pairs`` are about to leave their routes with ``unmoved`` bytes still to move (each
        pair's messages loaded but not sent, and the rest of those on their way): the bytes
        they moved so far stay on the links of their old routes."""
        known = len(routes.count)
        if len(self.pair_bytes) < known:
            self.pair_bytes = np.concatenate([self.pair_bytes,
                                              np.zeros(known - len(self.pair_bytes))])
        moved = self.pair_bytes[pairs] - unmoved
        self.settled += np.bincount(routes.links_of(pairs), weights=np.repeat(
            moved, routes.count[pairs]), minlength=len(self.settled))
        self.pair_bytes[pairs] = unmoved

    def bytes(self, routes: Routes) -> np.ndarray:
        """Bytes each link carried: every pair's bytes on every link of its route."""
        carried = self.pair_bytes[:len(routes.count)]
        if len(carried) < len(routes.count):
            carried = np.concatenate([carried, np.zeros(len(routes.count) - len(carried))])
        totals: np.ndarray = np.bincount(routes.links, weights=np.repeat(carried, routes.count),
                                         minlength=len(routes.capacity))
        return totals + self.settled
