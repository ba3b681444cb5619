"""NCCL 2.31's tuning lines in an ``NCCL_DEBUG=INFO`` log (``NCCL_DEBUG_SUBSYS`` including
TUNING): each call's ``Input: { ... }`` line and the ``Best tuning { ... }`` line its argmin
ends with, read into what NCCL's own cost model said for the call (:class:`Tuned`), beside the
``Bytes -> Algo`` lines :mod:`simulator.model.nccl_view` reads for what ran.

The formats are those of NVIDIA/nccl's ``dev`` branch at 2.31.0a7 (commit 86fa684d):
src/tuning/tuning.cc:176-181 (``Input``) and 286-291 (``Best tuning {``), and src/enqueue.cc:2021
(``Best tuning, algorithm, A, protocol, P``, a shorter line after the general kernels' argmin,
which adds nothing and is accepted as it is). The 2.31.2 release is not on this machine. A
symmetric kernel's argmin may ask the general one inside it (tuning.cc:275-283), so its
``Input`` and ``Best tuning`` lines nest; they pair as brackets do.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from simulator.errors import quoted
from simulator.model.nccl_terms import NcclAlgorithm, Protocol
from simulator.units import finite_in

TUNING_ALGORITHMS = {"TREE": NcclAlgorithm.TREE, "RING": NcclAlgorithm.RING,
                     "COLLNET_DIRECT": NcclAlgorithm.COLLNET_DIRECT,
                     "COLLNET_CHAIN": NcclAlgorithm.COLLNET_CHAIN, "NVLS": NcclAlgorithm.NVLS,
                     "NVLS_TREE": NcclAlgorithm.NVLS_TREE, "PAT": NcclAlgorithm.PAT}
"""The names a ``TUNING`` line gives NCCL's algorithms (src/collectives.cc ``ncclAlgoToString``,
the same on dev and v2.30.7)."""

TUNING_PROTOCOLS = {"LL": Protocol.LL, "LL128": Protocol.LL128, "SIMPLE": Protocol.SIMPLE}
"""... and its protocols (``ncclProtoToString``)."""

UNKNOWN = "Unknown"
"""What those functions, and ``ncclSymkKernelIdToString``, print for none: a symmetric kernel's
algorithm and protocol, a general pick's kernel id (src/collectives.cc, src/sym_kernels.cc:306)."""


@dataclass(frozen=True)
class Tuned:
    """What NCCL's cost model said for one call: the collective (NCCL's name), its bytes (the
    ``nBytes`` the tuner rates), the time NCCL predicts (µs), and its pick: an algorithm and
    protocol (None for a symmetric kernel) or a symmetric kernel's name (None for a general
    pick), and its channels."""

    collective: str
    size_bytes: int
    time_us: float
    algorithm: NcclAlgorithm | None
    protocol: Protocol | None
    kernel: str | None
    channels: int


_PREFIX = r"^(?P<who>\S+ \[\d+\]) NCCL INFO "
_INPUT = re.compile(_PREFIX + r"Input: \{ .*\.func = (?P<func>\w+), .*\.nBytes = (?P<bytes>\d+), "
                    r".*\}\s*$")
_BEST = re.compile(_PREFIX + r"Best tuning \{ \.id = -?\d+, \.valid = -?\d+, timeUs = "
                   r"(?P<time>-?[\d.]+(?:e[+-]?\d+)?),\s+\.algo = (?P<algo>\w+), \.proto = "
                   r"(?P<proto>\w+), \.symKernelId = (?P<kernel>\w+), nChannels = (?P<n>-?\d+), "
                   r"maxChannels = -?\d+, nWarps = -?\d+, forced = -?\d+ \}\s*$")
_SHORT = re.compile(_PREFIX + r"Best tuning, algorithm, \w+, protocol, \w+\s*$")


class TuningLineError(ValueError):
    """A 2.31 tuning line that is not in NCCL's format, or names what NCCL does not."""


@dataclass
class TuningLines:
    """Reads a log's tuning lines one at a time (:meth:`take`), the first process's only (the
    first to print an ``Input`` line: every rank prints its own), into :attr:`tuned`."""

    tuned: list[Tuned]
    first: str | None = None
    opened: list[tuple[str, int]] | None = None

    def take(self, text: str) -> bool:
        """Whether ``text`` (a stripped INFO line) is a 2.31 tuning line, read if it is the
        first process's. TuningLineError where it is one in a shape NCCL does not print."""
        if (found := _INPUT.match(text)) is not None:
            if self._ours(found["who"]):
                self._stack().append((found["func"], int(found["bytes"])))
            return True
        if (found := _BEST.match(text)) is not None:
            if self._ours(found["who"]):
                self._close(found)
            return True
        if _SHORT.match(text) is not None:
            return True
        if " Best tuning" in text or " Input: {" in text:
            raise TuningLineError(
                "expected NCCL 2.31's 'Input: { ... .func = F, ... .nBytes = N, ... }' or "
                "'Best tuning { .id = I, .valid = V, timeUs = T,  .algo = A, .proto = P, "
                ".symKernelId = K, nChannels = C, maxChannels = M, nWarps = W, forced = F }' "
                "(src/tuning/tuning.cc:176-181, 286-291)")
        return False

    def _ours(self, who: str) -> bool:
        self.first = self.first or who
        return who == self.first

    def _stack(self) -> list[tuple[str, int]]:
        if self.opened is None:
            self.opened = []
        return self.opened

    def _close(self, found: re.Match[str]) -> None:
        stack = self._stack()
        if not stack:
            raise TuningLineError("expected an 'Input: { ... }' line before 'Best tuning {': "
                                  "NCCL prints the call's input first (tuning.cc:176)")
        func, size = stack.pop()
        algo, proto, kernel = found["algo"], found["proto"], found["kernel"]
        general = kernel == UNKNOWN
        algorithm = TUNING_ALGORITHMS.get(algo) if general else None
        protocol = TUNING_PROTOCOLS.get(proto) if general else None
        if general and (algorithm is None or protocol is None):
            raise TuningLineError(f"expected an algorithm of {', '.join(TUNING_ALGORITHMS)} and "
                                  f"a protocol of {', '.join(TUNING_PROTOCOLS)}, got "
                                  f"{quoted(algo)} {quoted(proto)}")
        time_us = finite_in(found["time"], -math.inf, math.inf)
        if time_us is None:
            raise TuningLineError(f"expected a finite time in us, got {quoted(found['time'])}")
        self.tuned.append(Tuned(func, size, time_us, algorithm, protocol,
                                None if general else kernel, int(found["n"])))
