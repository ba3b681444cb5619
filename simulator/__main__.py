"""``python -m simulator``: see :mod:`simulator.cli`.

A Ctrl-C that comes before the command line's own handling begins (while the package imports,
or its arguments are parsed) ends the run as one after it does, with one line and exit 130
(docs/design.md §3), rather than a traceback and death by SIGINT.
"""

import sys

EXIT_INTERRUPTED = 130
"""The command line's exit code on Ctrl-C (its ``EXIT_INTERRUPTED``), stated here since the
interrupt may come before the command line is imported."""

try:
    from simulator.cli import main

    code = main()
except KeyboardInterrupt:  # main handles its own; this one came before it could
    print("python -m simulator: interrupted; files already written are complete",
          file=sys.stderr)
    code = EXIT_INTERRUPTED
sys.exit(code)
