"""The fidelity benchmark's arithmetic, and that the NCCL graphs assumed for each preset make
NCCL's cost model pick what NCCL is reported to pick there (bench/fidelity.py)."""

import math

import pytest

from bench.fidelity import Row, geomean_error
from simulator.model.nccl import DEFAULT_GRAPHS, Arch, NcclAlgorithm, Protocol, System, choose

RING, NVLS = NcclAlgorithm.RING, NcclAlgorithm.NVLS


def test_geomean_error_is_the_typical_factor_either_way():
    rows = [Row(1, "Ring/LL", 10.0, {"ideal": 20.0}), Row(2, "Ring/LL", 10.0, {"ideal": 5.0})]
    # |log 2| and |log 1/2| average to log 2: the two differ by a factor of 2, error 100 %
    assert geomean_error(rows, "ideal") == pytest.approx(1.0, rel=1e-12)
    assert geomean_error([Row(1, "NVLS/Simple", 400.0, {"nccl": 420.0})], "nccl") == pytest.approx(
        0.05, rel=1e-12)
    assert rows[0].ratio("ideal") == 2.0 and math.isclose(rows[1].ratio("ideal"), 0.5)


def test_the_h100_picks_are_the_reported_ones():
    # nccl-tests-h200.csv: "Ring/LL up to 1 MiB and NVLS/Simple from 2 MiB"
    h100 = System(ranks=8, nodes=1, arch=Arch.HOPPER, graphs=DEFAULT_GRAPHS[Arch.HOPPER])
    picks = [(size, choose(h100, size)) for size in (2**k for k in range(15, 35))]
    assert all((pick.algorithm, pick.protocol) == (RING, Protocol.LL) for size, pick in picks
               if size <= 1 << 20)
    assert all(pick.algorithm is NVLS for size, pick in picks if size >= 2 << 20)


def test_the_a100_picks_are_ring_as_nccl_runs_there():
    # NCCL runs ring on one DGX A100 at every size (the fidelity issue); its protocol goes from
    # LL through LL128 to Simple as the size grows
    a100 = System(ranks=8, nodes=1, arch=Arch.AMPERE, graphs=DEFAULT_GRAPHS[Arch.AMPERE])
    picks = [choose(a100, 2**k) for k in range(15, 34)]
    assert {pick.algorithm for pick in picks} == {RING}
    protocols = [pick.protocol for pick in picks]
    assert protocols == sorted(protocols, key=[Protocol.LL, Protocol.LL128, Protocol.SIMPLE].index)
    assert protocols[0] is Protocol.LL and protocols[-1] is Protocol.SIMPLE
