"""What a vectorised run's messages wait for besides the links they share: their route's latency
(and before a copy down of an in-switch sum, the switch's reduction latency), their sender's
network proxy (:func:`~simulator.engine.kernel.serve_spans`; the run hands it a time's
messages once that time is over, :meth:`simulator.engine.vector._Run._hand`), their receiver's
GPU reducer (:func:`~simulator.engine.kernel.serve_in_order`) and, for a late rank, its entry. The same
floating-point operations as the SimPy engine's timeouts and queues, so the two engines agree
to the bit.
"""

from __future__ import annotations

import numpy as np

from simulator.engine.kernel import serve_in_order, serve_spans
from simulator.engine.pending import Pending
from simulator.engine.routes import Routes
from simulator.engine.window import Held
from simulator.model.machine import Machine


class Devices:
    """Each rank's GPU reducer and network proxy (when each is next free: at the rank's entry at
    the earliest), its reduction cost, its entry, and the switches' reduction latencies of the
    messages ``held`` holds (window positions)."""

    def __init__(self, machine: Machine, held: Held, routes: Routes) -> None:
        self.held, self.routes = held, routes
        self.gpu = machine.gpu
        gpus = [machine.gpu_of(rank) for rank in range(machine.ranks)] if machine.gpus else []
        self.launch = np.array([gpu.launch_latency_s for gpu in gpus]) if gpus else None
        self.gamma = np.array([0.0 if gpu.reduce_bandwidth_Bps is None
                               else 1.0 / gpu.reduce_bandwidth_Bps for gpu in gpus]) \
            if gpus else None  # GpuSpec.reduce_s's terms, rank by rank (a slow GPU)
        self.entry = np.array(machine.entry_s) if machine.entry_s else None  # a straggler
        self.gpu_free = np.zeros(machine.ranks) if self.entry is None else self.entry.copy()
        self.proxy_free = np.zeros(machine.ranks) if self.entry is None else self.entry.copy()

    @property
    def reductions_take_time(self) -> bool:
        """Whether a reducing receive holds its GPU for any time (else it is timed as a copy)."""
        if self.launch is not None and self.gamma is not None:
            return bool((self.launch > 0).any() or (self.gamma > 0).any())
        return bool(self.gpu.reduce_s(1.0) > 0)

    def latency(self, messages: np.ndarray) -> np.ndarray:
        """Each message's route latency."""
        latency: np.ndarray = self.routes.latency[self.held.pair[messages]]
        return latency

    def ready(self, messages: np.ndarray, at: float | np.ndarray) -> np.ndarray:
        """When ``messages`` posted ``at`` may start: after their route's latency, and a copy
        down of an in-switch sum after the switch's reduction latency first (the same
        floating-point operations as the SimPy engine's timeouts)."""
        switch_delay = self.held.switch_delay
        if switch_delay is None:
            ready: np.ndarray = at + self.latency(messages)
            return ready
        src = self.held.s.src[messages]
        delay = np.where(src < 0, switch_delay[np.maximum(-1 - src, 0)], 0.0)
        ready = (at + delay) + self.latency(messages)
        return ready

    def proxied(self, messages: np.ndarray) -> np.ndarray:
        """Which of ``messages`` are network messages: their route has a ``proxy_s``, their
        sender's proxy posts them."""
        proxied: np.ndarray = self.routes.proxy[self.held.pair[messages]] > 0
        return proxied

    def handed(self, messages: np.ndarray, now: float) -> np.ndarray:
        """When ``messages`` (not network messages), posted ``now``, are handed on: now, a late
        rank's when it enters."""
        at = np.full(len(messages), now)
        if self.entry is not None:  # a late rank posts when it enters (ranks, not switches)
            src = self.held.s.src[messages]
            at = np.where(src >= 0, np.maximum(at, self.entry[np.maximum(src, 0)]), at)
        return at

    def posts(self, messages: np.ndarray, now: float) -> np.ndarray:
        """When network messages (:meth:`proxied`), handed to their senders' proxies at
        ``now``, are posted: when each proxy gets to them, one proxy's in the order given (the
        same floating-point operations as the SimPy fabric's wait; a late rank's proxy is free
        from its entry)."""
        held = self.held
        proxy = self.routes.proxy[held.pair[messages]]
        start, _ = serve_spans(self.proxy_free, held.s.src[messages], now, proxy)
        posted: np.ndarray = now + (start - now)
        return posted

    def reduce_s(self, messages: np.ndarray) -> np.ndarray:
        """GpuSpec.reduce_s of each reducing receive, with the same operations (0 for copies)."""
        held = self.held
        if self.gamma is None or self.launch is None:
            time = self.gpu.reduce_s(held.nbytes(messages))
        else:
            gpu = np.maximum(held.s.dst[messages], 0)  # reducing receives are at ranks
            time = self.launch[gpu] + held.nbytes(messages) * self.gamma[gpu]
        duration: np.ndarray = np.where(held.s.reduce[messages], time, 0.0)
        return duration

    def receive(self, messages: np.ndarray, now: float, later: Pending) -> np.ndarray:
        """Receives that may start now: reduce on the GPU or complete at once; those that
        complete now are returned, those that complete later go to ``later``."""
        if len(messages) == 0:
            return messages
        duration = self.reduce_s(messages)
        busy = duration > 0
        now_done = messages
        if busy.any():
            reducing, duration = messages[busy], duration[busy]
            gpus = self.held.s.dst[reducing]
            later.add(reducing, serve_in_order(self.gpu_free, gpus, now, duration))
            now_done = messages[~busy]
        if self.entry is not None and len(now_done):  # a late rank takes nothing before it enters
            dst = self.held.s.dst[now_done]
            entry = np.where(dst >= 0, self.entry[np.maximum(dst, 0)], now)
            early = entry > now
            if early.any():
                later.add(now_done[early], entry[early])
                now_done = now_done[~early]
        return now_done

    def shift(self, seconds: float, now: float) -> None:
        """A steady period's jump from ``now``: what is busy after it is free ``seconds``
        later."""
        for free in (self.gpu_free, self.proxy_free):
            free[free > now] += seconds
