"""A directory of Chakra execution traces read into a step's execution graph
(:func:`simulator.training.chakra.graph_from_chakra`, which says what each node becomes).

Chakra names one rank's trace ``<prefix>.<rank>.et`` (ASTRA-sim's ``Workload`` opens
``et_filename + "." + id + ".et"``: astra-sim/workload/Workload.cc; Chakra's converter writes
one per rank). A directory holds one prefix and every rank from 0 up; other files are left
alone. Each file is read safely (:func:`simulator.inputs.read_bytes`: a regular file, at most
MAX_CHAKRA_BYTES), the directory at most MAX_CHAKRA_TOTAL_BYTES.
"""

from __future__ import annotations

import re
from pathlib import Path

from simulator.errors import InputError, Problem
from simulator.inputs import read_bytes
from simulator.limits import MAX_CHAKRA_BYTES, MAX_CHAKRA_TOTAL_BYTES, MAX_RANKS
from simulator.training.chakra import graph_from_chakra
from simulator.training.graph import StepGraph

TRACE_NAME = re.compile(r"(.+)\.(0|[1-9][0-9]*)\.et")
"""A trace file's name: its prefix, then its rank (no leading zeros)."""


def trace_files(directory: Path) -> list[Path]:
    """The trace files of ``directory``, rank 0 first; InputError naming it where it holds
    none, more than one prefix, or not every rank from 0 to the last."""
    where = str(directory)
    if not directory.is_dir():
        raise InputError([Problem(where, "", "expected a directory of Chakra traces "
                                             "(<prefix>.<rank>.et)")])
    found: dict[str, dict[int, Path]] = {}
    for path in sorted(directory.iterdir()):
        match = TRACE_NAME.fullmatch(path.name)
        if match:
            found.setdefault(match[1], {})[int(match[2])] = path
    if len(found) != 1:
        named = ", ".join(sorted(found)[:4]) or "none"
        raise InputError([Problem(where, "", f"expected the traces of one prefix "
                                             f"(<prefix>.<rank>.et), found {named}")])
    prefix, ranks = next(iter(found.items()))
    missing = [rank for rank in range(max(ranks) + 1) if rank not in ranks]
    if missing:
        raise InputError([Problem(where, "", f"{prefix}.{missing[0]}.et: expected every rank "
                                             f"of 0..{max(ranks)}, rank {missing[0]} is missing")])
    if len(ranks) > MAX_RANKS:
        raise InputError([Problem(where, "", f"{len(ranks)} ranks: expected at most "
                                             f"{MAX_RANKS:,}")])
    return [ranks[rank] for rank in range(len(ranks))]


def read_chakra(directory: Path) -> StepGraph:
    """The step the Chakra traces in ``directory`` hold, rank r from ``<prefix>.<r>.et``;
    InputError, one line naming the file and what was expected, where they are not one."""
    files: list[tuple[str, bytes]] = []
    total = 0
    for path in trace_files(directory):
        data = read_bytes(path, MAX_CHAKRA_BYTES)
        total += len(data)
        if total > MAX_CHAKRA_TOTAL_BYTES:
            raise InputError([Problem(str(directory), "", (
                f"expected at most {MAX_CHAKRA_TOTAL_BYTES >> 20} MiB of traces, {path.name} "
                "takes it beyond"))])
        files.append((str(path), data))
    return graph_from_chakra(files)
