"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

import fcntl
import os
import secrets
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TextIO

from simulator.errors import InputError, Problem
from simulator.inputs import InputFile


def write_atomically(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` on a new file beside ``path``, then rename it into place, so a
    failure never leaves a half-written ``path`` nor loses the previous one.

    The temporary file is created with mode 0o666 filtered by the process umask, as any new
    file would be, without reading or changing the umask.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised as an interrupt (:func:`raise_terminated`), so that a run told
    to stop stops as on Ctrl-C: the files it wrote whole, no temporary file left, one line
    said. Its one argument is the signal's number (SIGTERM where none is given)."""

    @property
    def signum(self) -> int:
        """The signal that stopped the run."""
        return int(self.args[0]) if self.args else int(signal.SIGTERM)


STOPPING = (signal.SIGTERM, signal.SIGHUP)
"""The signals the command line stops on as on Ctrl-C (:func:`raise_terminated`): a kill's
default, and the terminal closing (issue 40: every signal ends a sweep with what finished
written)."""


def raise_terminated(signum: int, frame: FrameType | None) -> None:
    """The command line's handler of :data:`STOPPING`."""
    raise Terminated(signum)


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT), SIGTERM and SIGHUP while the block runs and raise the interrupt
    once the block is done, so that files written together are all written or all left as they
    were, and no temporary file is left behind, whenever one comes.

    Only in the main thread, while Python's own SIGINT handler (and, for the others, the
    command line's) is in place; elsewhere the block runs as it is (a signal handler can be set
    only there, and another one is not ours to replace).
    """
    held = [number for number, ours in ((signal.SIGINT, signal.default_int_handler),
                                        *((number, raise_terminated) for number in STOPPING))
            if signal.getsignal(number) is ours]
    if threading.current_thread() is not threading.main_thread() or not held:
        yield
        return
    pressed: list[int] = []
    before = {number: signal.getsignal(number) for number in held}

    def hold(signum: int, frame: FrameType | None) -> None:
        pressed.append(signum)

    for number in held:
        signal.signal(number, hold)
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
    for signum in pressed:  # a signal that terminates before Ctrl-C
        if signum in STOPPING:
            raise Terminated(signum)
    if pressed:
        raise KeyboardInterrupt


def remove_leftovers(directory: Path, names: list[str]) -> None:
    """Delete the temporary files a killed run left beside ``names`` in ``directory`` (those
    :func:`write_atomically` names ``.NAME.<hex>.tmp``: a SIGKILL leaves one mid-write)."""
    if not directory.is_dir():
        return
    for name in names:
        for leftover in directory.glob(f".{name}.*.tmp"):
            leftover.unlink(missing_ok=True)


def output_problem(path: Path, inputs: Sequence[InputFile]) -> str | None:
    """What is wrong with writing ``path`` in a run that reads ``inputs``: it is one of them,
    by identity, whatever name it goes by (writing it would destroy it), or it exists and is
    not a regular file (a device, a FIFO: renaming onto it would replace it); None where it
    may be written."""
    try:
        status = path.stat()
    except OSError:
        return None
    for source in inputs:
        if source.is_(status):
            return f"{path} is an input of this run ({source.path}); choose another path"
    if path.is_dir():
        return f"expected a file to write, but {path} is a directory"
    if not path.is_file():
        return f"expected a regular file to write, but {path} is not one"
    return None


class DirectoryLock:
    """A run's hold on its scenario's files in a directory: an exclusive ``flock`` on
    ``.NAME.lock`` there, so that two runs of one scenario into one directory never interleave
    their rows (the second is refused); the kernel drops it when the process ends, however it
    ends, so a lock file a killed run left does not hold anything (the next run removes it:
    :func:`remove_stale_lock`)."""

    def __init__(self, directory: Path, name: str, source: str,
                 elsewhere: str = "give another --output") -> None:
        """Take the lock, or refuse in one line naming ``source``, which ends with
        ``elsewhere``: how to write somewhere else (``sweep`` has no ``--output``)."""
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f".{name}.lock"
        try:
            self._file = _hold(self.path)
        except BlockingIOError:
            raise InputError([Problem(source, "output", (
                f"another run is writing {name}'s results in {directory}; wait for it to end, "
                f"or {elsewhere}"))]) from None

    def release(self) -> None:
        """Let go, and remove the lock file; a Ctrl-C or SIGTERM that comes meanwhile waits
        until it is removed."""
        with interrupts_held():
            if not self._file.closed:
                self.path.unlink(missing_ok=True)
                self._file.close()


def remove_stale_lock(directory: Path, name: str) -> None:
    """Delete the lock file of the scenario ``name`` in ``directory`` where no run holds it (one
    a SIGKILL left: the kernel dropped its hold, the file stayed); one a running run holds stays."""
    path = directory / f".{name}.lock"
    if not path.is_file():
        return
    try:
        held = _hold(path)
    except BlockingIOError:  # a run holds it: its own
        return
    with held:
        path.unlink(missing_ok=True)  # while held: no run takes it in between


def _hold(path: Path) -> TextIO:
    """``path`` opened (created if missing) with an exclusive ``flock`` on it; BlockingIOError
    where another process holds it. Retried where the file was removed or replaced between the
    opening and the lock (a run that let go removes its lock file): a hold on a removed file
    would hold nothing that the next run sees."""
    while True:
        file = path.open("a")
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.close()
            raise
        try:
            same = os.path.samestat(os.fstat(file.fileno()), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return file
        file.close()
