"""A run's files kept up to date point by point, so that a stopped run keeps what it finished.

The first point writes the results files whole, each atomically
(:func:`~simulator.output.files.write_atomically`); every later point appends its line to the
CSV (:func:`~simulator.output.writers.append_csv`: a run of n points writes O(n) bytes) and
rewrites the Parquet file, when asked, whole and atomically. At any moment the files on disk
hold the points done so far, in the run's order, and Ctrl-C between or during points loses only
the point under way. The settings (JSON) are written
with the first point, before its results, so partial results say how they were made (`run
--resume` reads them back, :mod:`simulator.output.resume`); the figure (PNG) is drawn once,
from every point, when the run ends.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from simulator.output.files import DirectoryLock, interrupts_held, remove_stale_lock
from simulator.output.results import Result, results_frame
from simulator.output.writers import (
    RESULTS_FORMATS,
    WRITERS,
    append_csv,
    write_results,
)
from simulator.scenario.spec import Scenario
from simulator.settings import RunSettings

if TYPE_CHECKING:
    import pandas as pd

    from simulator.output.observed import Observed


class ResultsStream:
    """The files of one run in ``directory``, of ``formats`` (names of
    :data:`~simulator.output.writers.WRITERS`), fed one finished point at a time; the lock
    file a killed run of the scenario left there removed at once, where no run holds it."""

    def __init__(self, scenario: Scenario, run: RunSettings, directory: Path,
                 formats: tuple[str, ...]) -> None:
        self.scenario, self.run, self.directory, self.formats = scenario, run, directory, formats
        self.rows: list[Result] = []
        self._written: set[str] = set()
        self._lock: DirectoryLock | None = None
        remove_stale_lock(directory, scenario.name)  # a killed run's, which holds nothing

    def path(self, name: str) -> Path:
        """Where the results file of format ``name`` goes (its writer's first file)."""
        return self.directory / WRITERS[name].files(self.scenario.name)[0]

    @property
    def frame(self) -> pd.DataFrame:
        """The points done so far, as the results file holds them."""
        return results_frame(self.rows)

    @property
    def results_paths(self) -> list[Path]:
        """The results files on disk so far (none before the first point)."""
        return [self.path(name) for name in self.formats
                if name in RESULTS_FORMATS and name in self._written]

    def add(self, result: Result) -> None:
        """Keep a finished point: every results file rewritten with it, atomically, and Ctrl-C
        held until they all are (:func:`~simulator.output.files.interrupts_held`), so they
        always hold the same points, :attr:`rows`."""
        rows = [*self.rows, result]
        settings = ("json",) if "json" in self.formats and not self.rows else ()
        # the settings before the first results, so a results file never lacks them (--resume)
        names = settings + tuple(name for name in self.formats if name in RESULTS_FORMATS)
        with interrupts_held():  # the lock taken and kept whole: close() then removes it
            if self._lock is None:  # before the first file: one run at a time writes them
                self._lock = DirectoryLock(self.directory, self.scenario.name,
                                           self.scenario.source)
            if not self.rows:
                self._forget_the_last_run()
            if self.rows and "csv" in names and self.path("csv").is_file():  # a line appended
                append_csv(results_frame([result]), self.path("csv"))
                names = tuple(name for name in names if name != "csv")
            if names:  # the first point's files, or a Parquet file rewritten whole
                write_results(results_frame(rows), self.scenario, self.run, self.directory,
                              names)
            self.rows = rows
            self._written.update({*names, "csv"} & set(self.formats))

    def _forget_the_last_run(self) -> None:
        """Delete what an earlier run of this scenario left here that this one will not write
        before it ends (its figures, drawn at the end, and ``plot --reference``'s; a Parquet
        file not asked for now), so that a stopped run never leaves them beside results they
        do not describe."""
        name = self.scenario.name
        # the figures and the report, drawn at the end, and a Parquet file not asked for
        unwritten = ("png", "html", *(() if "parquet" in self.formats else ("parquet",)))
        for stale in (*(file for kind in unwritten for file in WRITERS[kind].files(name)),
                      f"{name}-reference.png"):  # plot --reference's, no writer's
            (self.directory / stale).unlink(missing_ok=True)

    def close(self) -> None:
        """Let other runs write these files again (the run ended, however it ended)."""
        if self._lock is not None:
            self._lock.release()

    def finish(self, observed: Observed | None = None) -> list[Path]:
        """Write what waits for the whole run (the figures, the report with what the run
        ``observed``; anything not yet written when no point came); every file of the run, in
        ``formats`` order (each writer's :meth:`~simulator.output.writers.Writer.files`)."""
        rest = tuple(name for name in self.formats if name not in self._written)
        write_results(self.frame, self.scenario, self.run, self.directory, rest, observed)
        self._written.update(rest)
        return [self.directory / file for name in self.formats
                for file in WRITERS[name].files(self.scenario.name)]
