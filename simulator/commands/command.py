"""What a command of ``python -m simulator`` is (:class:`Command`), and the exit codes every
command returns (docs/design.md §3), so that the parser and the dispatch in
:mod:`simulator.cli` know each command by one value."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143
EXIT_HANGUP = 129
"""SIGHUP (the terminal closed): 128 and the signal's number, as a shell gives a process a
signal ended, as 130 (SIGINT) and 143 (SIGTERM) are."""
EXIT_SIGNALLED = {1: EXIT_HANGUP, 2: EXIT_INTERRUPTED, 15: EXIT_TERMINATED}
"""The exit code of a command a signal stopped, by the signal's number (SIGHUP, SIGINT,
SIGTERM)."""


@dataclass(frozen=True)
class Command:
    """One verb: its name and one-line help, the arguments it adds to its own parser, what it
    does with them (returning the exit code), and which argument names the file it works on
    (``subject``), which the one line of a failed or stopped command starts with."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    subject: str

    def input(self, args: argparse.Namespace) -> Path:
        """The file the command works on (the first, given several), to name it in messages."""
        value = getattr(args, self.subject)
        return Path(value[0] if isinstance(value, list) else value)
