"""One exception tree for the whole package.

Library code raises these; only ``cli.py`` turns them into messages and exit codes.
"""

from __future__ import annotations

from dataclasses import dataclass


class SimulatorError(Exception):
    """Base class of every error this package raises on purpose."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file: where it is and what was expected."""

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.field}" if self.field else self.file
        return f"{where}: {self.message}"


class InputError(SimulatorError):
    """Bad input (scenario or topology file, or a value given through the API).

    Carries every problem found in the file at once, one line each.
    """

    def __init__(self, problems: list[Problem]) -> None:
        if not problems:
            raise ValueError("InputError needs at least one problem")
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class UnitError(SimulatorError, ValueError):
    """A quantity string (size, bandwidth, time) that does not parse; turned into a Problem."""


class AlgorithmError(SimulatorError):
    """An algorithm's program did something impossible (bad peer, size mismatch, lost message)."""
