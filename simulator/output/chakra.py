"""A step's execution graph written as Chakra execution traces, one file per rank, which
:func:`simulator.scenario.chakra.read_chakra` (and ASTRA-sim, given integer communicator
names) reads back (:func:`simulator.training.chakra_write.chakra_from_graph` says how).

Each file is written whole or not at all (:func:`.files.write_atomically`), never over a file
the run reads, and all of them under held interrupts, so Ctrl-C leaves the whole set or the
previous one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from simulator.errors import InputError, Problem
from simulator.inputs import identified
from simulator.output.files import interrupts_held, output_problem, write_atomically
from simulator.training.chakra_write import chakra_from_graph
from simulator.training.graph import StepGraph


def write_chakra(graph: StepGraph, directory: Path, prefix: str = "step",
                 inputs: Sequence[Path] = ()) -> list[Path]:
    """Write ``graph`` as ``directory/<prefix>.<rank>.et``, one file per rank, and return
    their paths; InputError (nothing written) where a path is one of ``inputs`` or not a
    regular file, where the directory holds a trace of this prefix for a rank beyond the
    graph's (it would be read with them), or where an operation has no Chakra form."""
    paths = [directory / f"{prefix}.{rank}.et" for rank in range(graph.ranks)]
    problems = [Problem(str(path), "", problem) for path in paths
                if (problem := output_problem(path, identified(inputs))) is not None]
    beyond = directory / f"{prefix}.{graph.ranks}.et"
    if beyond.exists():
        problems.append(Problem(str(beyond), "", (
            f"expected no trace beyond rank {graph.ranks - 1} with prefix {prefix!r}: it would "
            "be read with these; remove it or choose another prefix")))
    if problems:
        raise InputError(problems)
    contents = chakra_from_graph(graph, str(directory))
    with interrupts_held():
        for path, data in zip(paths, contents, strict=True):
            write_atomically(path, _writer(data))
    return paths


def _writer(data: bytes) -> Callable[[Path], None]:
    """What writes ``data`` into a (temporary) file."""

    def write(path: Path) -> None:
        """Write ``data`` into ``path``."""
        path.write_bytes(data)

    return write
