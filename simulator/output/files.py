"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

import os
import secrets
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType


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


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) while the block runs and raise its KeyboardInterrupt once the block
    is done, so that files written together are all written or all left as they were, and no
    temporary file is left behind, whenever the key is pressed.

    Only in the main thread, while Python's own handler is in place; elsewhere the block runs
    as it is (a signal handler can be set only there, and another one is not ours to replace).
    """
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    pressed: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        pressed.append(signum)

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pressed:
        raise KeyboardInterrupt


def output_problem(path: Path, inputs: list[Path]) -> str | None:
    """What is wrong with writing ``path`` in a run that reads ``inputs``: it is one of them
    (writing it would destroy it), or it exists and is not a regular file (a device, a FIFO:
    renaming onto it would replace it); None where it may be written."""
    if not path.exists():
        return None
    for source in inputs:
        if source.exists() and os.path.samefile(path, source):
            return f"{path} is an input of this run ({source}); choose another path"
    if not path.is_file():
        return f"expected a regular file to write, but {path} is not one"
    return None
