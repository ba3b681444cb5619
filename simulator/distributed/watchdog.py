"""The watchdog: a rank stuck on something outside the simulator's calls (a lock, a barrier of
its own, a queue, a sleep, input) would hang a run that acts only when every rank waits in a
call. So between its acts the thread of :func:`~simulator.distributed.spawn` looks at the ranks
outside a call, every :attr:`Watchdog.period`, and stops the run with
:class:`~simulator.distributed.stops.Stalled` once every one of them has sat still (no CPU time
used, not a Python instruction run, not waiting for a CPU) for the timeout, naming where each
sits in its own code. A rank that computes or runs Python, however slowly, is never still."""

from __future__ import annotations

import contextlib
import os
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

from simulator.distributed.stops import (
    Stalled,
    collective_waits,
    groups,
    in_calls,
    p2p_waits,
    who_returned,
)

if TYPE_CHECKING:
    from simulator.distributed.rendezvous import World

DEFAULT_TIMEOUT_S = 60.0
"""How long every rank not in a call must sit still before the watchdog stops a run. A rank
that computes (its thread uses CPU time) or runs Python code is never still, however slow, so
this bounds only waiting on something outside the simulator (a lock, a barrier, a queue, a
sleep, input): a minute ends a stuck run promptly yet spares any wait meant to end. PyTorch's
NCCL default is 10 minutes, but it times whole collectives, slow or not."""

WATCH_PERIOD_S = 1.0
"""The longest time between two looks of the watchdog at the ranks (a quarter of the timeout
when that is shorter): a look reads every running rank's CPU clock and Python frame, measured
here at a median of 14 ms for 4,096 ranks and 60 ms for 16,384, so a look a second costs at
most 6 % of the thread that waits."""

def watch_clock() -> float:
    """The watchdog's clock (s): :func:`time.monotonic`, read before each look. Named apart so
    that a test can put a clock of its own in its place and say when time passes, rather than
    race the machine's (tests/test_dist.py)."""
    return time.monotonic()


MIN_WATCH_PERIOD_S = 0.01
"""The shortest time between two looks, so that a tiny timeout does not make the watchdog spin."""

BUSY_SHARE = 0.1
"""The share of a core that the process's other threads (all but the watching one) must use
between two looks for every rank to count as moving: a rank may wait on threads that compute
for it (OpenBLAS's workers while its thread waits for them: here a 2000 × 2000 matmul uses 0.17
s of its calling thread's CPU in 0.51 s; torch's pool; a pool of its own). A thread that
computes uses a whole core, one that only polls (tqdm's monitor, a heartbeat) well under 1 %."""


@dataclass
class Watchdog:
    """What the watching thread remembers between two looks: for each rank outside a call,
    what it was doing and since when (``still``), and the process's CPU time (``mark``).
    ``timeout`` None: no watchdog, the thread only waits for the ranks' calls."""

    timeout: float | None
    still: dict[int, tuple[tuple[Any, ...], float]] = field(default_factory=dict)
    """Each rank outside a call, as the watchdog last saw it: what it was doing (CPU time, frame,
    instruction) and since when it has been doing exactly that."""
    mark: tuple[int, int, float] | None = None
    """The process's CPU time, the watching thread's, and the clock, at the watchdog's last look."""

    @property
    def period(self) -> float | None:
        """How long the watching thread waits between two looks (s); None without a timeout."""
        if self.timeout is None:
            return None
        return max(min(self.timeout / 4, WATCH_PERIOD_S), MIN_WATCH_PERIOD_S)

    def moved(self, rank: int) -> None:
        """A rank was released from a call: it starts afresh when it is next outside one."""
        self.still.pop(rank, None)

    def all_moved(self) -> None:
        """Every rank was released from a collective: they all start afresh."""
        self.still.clear()

    def look(self, world: World, now: float) -> Stalled | None:
        """Look at the ranks outside a call: Stalled if every one of them has sat still (no CPU
        time used, not a Python instruction run) for the timeout, else None. Called under the
        world's lock."""
        assert self.timeout is not None
        frames = sys._current_frames()
        outside = [rank for rank in range(world.size) if rank not in world.pending
                   and rank not in world.blocked and rank not in world.polls
                   and rank not in world.returned]
        busy = self._busy(now)
        for rank in outside:
            doing = _doing(world.threads[rank], frames)
            seen = self.still.get(rank)
            if busy or seen is None or seen[0] != doing:
                self.still[rank] = (doing, now)
        if not outside or any(now - self.still[rank][1] < self.timeout for rank in outside):
            return None
        runnable = [rank for rank in outside if _runnable(world.threads[rank])]
        if runnable:  # starved of a CPU on a busy machine, not waiting: moving
            for rank in runnable:
                self.still[rank] = (self.still[rank][0], now)
            return None
        places: dict[str, list[int]] = {}
        for rank in outside:
            ident = world.threads[rank].ident
            frame = None if ident is None else frames.get(ident)
            places.setdefault(_place(frame), []).append(rank)
        parts = groups([(f"{'has' if len(ranks) == 1 else 'have'} not returned and "
                         f"{'is' if len(ranks) == 1 else 'are'} not in a collective ({place})",
                         ranks) for place, ranks in places.items()], "elsewhere")
        parts += p2p_waits(world)
        parts += collective_waits(world, [*outside, *world.blocked, *world.polls])
        parts += who_returned(world)
        return Stalled(f"spawn stalled for timeout={self.timeout:g} s: " + "; ".join(parts),
                       tuple(outside), in_calls(world))

    def _busy(self, now: float) -> bool:
        """Whether the process's threads but this one used BUSY_SHARE of a core since the last
        look: then every rank counts as moving, since any may be waiting on them."""
        process, own = time.process_time_ns(), time.thread_time_ns()
        last, self.mark = self.mark, (process, own, now)
        if last is None:
            return False
        others = (process - last[0]) - (own - last[1])
        return others >= BUSY_SHARE * (now - last[2]) * 1e9


_CPU_CLOCK = hasattr(time, "pthread_getcpuclockid")
"""Whether a thread's CPU time can be read (Linux, most Unixes; not macOS): without it, a rank
in one long call into C (numpy, torch) looks still, as its Python frame does not move."""

_PATHS = sysconfig.get_paths()
_OURS, _STDLIB = os.path.dirname(__file__), _PATHS["stdlib"]
_SITE = tuple({_PATHS["purelib"], _PATHS["platlib"]})


def _library(filename: str) -> bool:
    """Whether a stall's message looks past this code to name the user's line: this package and
    the standard library (a rank stuck in ``threading.Barrier.wait`` is named where it called
    it), but not the packages installed beside it, which may sit inside the standard library's
    directory."""
    if filename.startswith(_OURS):
        return True
    if filename.startswith(_SITE):
        return False
    return filename.startswith((_STDLIB, "<frozen "))


def _doing(thread: threading.Thread, frames: dict[int, FrameType]) -> tuple[Any, ...]:
    """What a rank's thread is doing, to compare between two looks: its CPU time and its Python
    frame and instruction. Called under the world's lock, while the thread is alive (it takes
    the lock to record its end), as pthread_getcpuclockid requires."""
    ident = thread.ident
    assert ident is not None
    cpu = None
    if _CPU_CLOCK:
        with contextlib.suppress(OSError):
            cpu = time.clock_gettime_ns(time.pthread_getcpuclockid(ident))
    frame = frames.get(ident)
    return cpu, id(frame), -1 if frame is None else frame.f_lasti


def _runnable(thread: threading.Thread) -> bool:
    """Whether the kernel holds the thread runnable (state R in /proc: running or waiting only
    for a CPU), so that a rank starved of a CPU on a loaded machine is never called still; False
    where /proc cannot say (another system, a thread gone)."""
    try:
        with open(f"/proc/self/task/{thread.native_id}/stat", encoding="ascii",
                  errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "R"
    except (OSError, IndexError):
        return False


def _place(frame: FrameType | None) -> str:
    """Where a still rank sits, in its own code: ``still in Barrier.wait, called at
    train.py:12 in step``, or ``still at train.py:12 in step`` when it sits in C (a sleep, a
    lock's acquire, a long computation without Python)."""
    stack = []
    while frame is not None:
        stack.append(frame)
        frame = frame.f_back
    for depth, each in enumerate(stack):
        name = each.f_code.co_filename
        if not _library(name):
            where = f"at {os.path.basename(name)}:{each.f_lineno} in {each.f_code.co_qualname}"
            if depth == 0:
                return f"still {where}"
            return f"still in {stack[depth - 1].f_code.co_qualname}, called {where}"
    return f"still in {stack[0].f_code.co_qualname}" if stack else "not started"
