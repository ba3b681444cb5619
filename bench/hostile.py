"""Hostile checks too slow for the tests (issue 40): each section a function that runs its
cases and prints a table of figures (seconds, exit codes, first lines), selected by name on the
command line; with no name, every section.

    PYTHONPATH=. .venv/bin/python bench/hostile.py                  # every section
    PYTHONPATH=. .venv/bin/python bench/hostile.py determinism      # one

Exits 2 on a name that is not a section's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from bench.hostile_corpus import corpus_slow, determinism
from bench.hostile_resume import exits, resume
from bench.hostile_sweeps import sweeps

CHECKS: dict[str, Callable[[], None]] = {
    "corpus-slow": corpus_slow,
    "determinism": determinism,
    "sweeps": sweeps,
    "resume": resume,
    "exits": exits,
}
"""Every section by name, in the order they run."""


def main(argv: list[str] | None = None) -> int:
    """Run the sections named in ``argv`` (all with none)."""
    names = sys.argv[1:] if argv is None else argv
    unknown = [name for name in names if name not in CHECKS]
    if unknown:
        print(f"hostile.py: no section {', '.join(unknown)}; expected one of "
              f"{', '.join(CHECKS)}", file=sys.stderr)
        return 2
    for name in names or list(CHECKS):
        CHECKS[name]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
