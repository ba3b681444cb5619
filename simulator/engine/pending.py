"""Messages due at a later instant of a vectorised run: the starts of posted messages (after
their latency, their sender's proxy and the message before them on their connection) and the
completions of receives (when their reduction ends, or when their late rank enters).
"""

from __future__ import annotations

import numpy as np

from simulator.engine.kernel import INF


class Pending:
    """Messages (window positions) each due at a time, in the order they were added, and the
    earliest of those times (kept as they change: the run asks for it at every instant, and
    most instants have nothing of one kind due)."""

    def __init__(self) -> None:
        self.ids = np.zeros(0, dtype=np.int64)
        self.at = np.zeros(0)
        self.earliest = INF
        """When the first of them is due (inf: none is)."""

    def add(self, messages: np.ndarray, at: np.ndarray) -> None:
        """``messages`` are due at ``at`` (one time each), after those already pending."""
        if len(messages) == 0:
            return
        self.ids = np.concatenate([self.ids, messages])
        self.at = np.concatenate([self.at, at])
        self.earliest = min(self.earliest, float(at.min()))

    def next(self) -> float:
        """The earliest time anything is due (inf: nothing is)."""
        return self.earliest

    def pop(self, now: float) -> np.ndarray:
        """The messages due at ``now``, no longer pending (none before ``now`` may be left:
        the run never passes a time something is due at)."""
        if now != self.earliest:  # nothing due now: the earliest is later
            return np.zeros(0, dtype=np.int64)
        due = self.at == now
        ids: np.ndarray = self.ids[due]
        self.ids, self.at = self.ids[~due], self.at[~due]
        self.earliest = float(self.at.min(initial=INF))
        return ids

    def renumber(self, dropped: int) -> None:
        """The window dropped ``dropped`` messages from its front."""
        self.ids = self.ids - dropped

    def shift(self, messages: int, seconds: float) -> None:
        """A steady period's jump: each due ``messages`` further on, ``seconds`` later."""
        self.ids, self.at = self.ids + messages, self.at + seconds
        self.earliest = float(self.at.min(initial=INF))
