"""What a command says: text on stdout that a reader may stop reading early, the progress bar
on stderr, and the one line of a failed verification or a stopped run, with their exit codes."""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING, Never

from simulator.commands.command import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_SIGNALLED

if TYPE_CHECKING:
    import pandas as pd
    from tqdm import tqdm


def say(text: str) -> None:
    """Write to stdout; a reader that stopped early (``| head``) only stops the printing, so the
    results are still written and the exit code still says how the run went."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # Python docs, "Note on SIGPIPE": point stdout at devnull
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def progress_bar(total: int, quiet: bool) -> tqdm[Never]:
    """A bar over a run's points on stderr, drawn only on a terminal and without ``--quiet``,
    and wiped when done, so the table follows on a clean screen."""
    from tqdm import tqdm

    return tqdm(total=total, unit="point", file=sys.stderr, leave=False, dynamic_ncols=True,
                disable=quiet or not sys.stderr.isatty())


def verification(source: str, results: pd.DataFrame) -> int:
    """EXIT_OK when every row of ``results`` verified (or was not checked); else the first
    failure said on stderr, and EXIT_FAILED."""
    failed = results[results.verified.eq(False).fillna(False)]
    if failed.empty:
        return EXIT_OK
    first = failed.iloc[0]
    where = f": {first.mismatch}" if first.mismatch else ""
    print(f"{source}: verification failed for {len(failed)} run(s), first {first.algorithm} at "
          f"{first.size_bytes} bytes (max abs error {first.max_abs_error:.3g}){where}",
          file=sys.stderr)
    return EXIT_FAILED


def stop_code(stop: KeyboardInterrupt) -> int:
    """The exit code of a run stopped by Ctrl-C (130), SIGTERM (143) or SIGHUP (129)."""
    from simulator.output.files import Terminated

    return EXIT_SIGNALLED[stop.signum] if isinstance(stop, Terminated) else EXIT_INTERRUPTED


def stopped(stop: KeyboardInterrupt) -> str:
    """How a run was stopped, as its last line says it."""
    from simulator.output.files import Terminated

    if isinstance(stop, Terminated):
        return f"terminated ({signal.Signals(stop.signum).name})"
    return "interrupted"
