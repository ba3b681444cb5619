"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path


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
