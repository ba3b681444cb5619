"""The fidelity benchmark's arithmetic, and that the NCCL graphs it assumes make NCCL's cost
model pick what NCCL is reported to pick on those machines (bench/fidelity.py)."""

import math

import pytest

from bench.fidelity import DATASETS, Row, geomean_error
from simulator.model.nccl import NcclAlgorithm, Protocol, choose

RING, NVLS = NcclAlgorithm.RING, NcclAlgorithm.NVLS


def test_geomean_error_is_the_typical_factor_either_way():
    rows = [Row(1, "Ring/LL", 10.0, 20.0, 1.0, 0.5), Row(2, "Ring/LL", 10.0, 5.0, 1.0, 2.0)]
    # |log 2| and |log 1/2| average to log 2: the two differ by a factor of 2, error 100 %
    assert geomean_error(rows) == pytest.approx(1.0, rel=1e-12)
    assert geomean_error([Row(1, "NVLS/Simple", 400.0, 420.0, 1.0, 1.0)]) == pytest.approx(
        0.05, rel=1e-12)
    assert rows[0].ratio == 2.0 and math.isclose(rows[1].ratio, 0.5)


def test_the_h200_picks_are_the_reported_ones():
    # nccl-tests-h200.csv: "Ring/LL up to 1 MiB and NVLS/Simple from 2 MiB"
    h200 = DATASETS[0].system
    picks = [(size, choose(h200, size)) for size in (2**k for k in range(15, 35))]
    assert all((pick.algorithm, pick.protocol) == (RING, Protocol.LL) for size, pick in picks
               if size <= 1 << 20)
    assert all(pick.algorithm is NVLS for size, pick in picks if size >= 2 << 20)


def test_the_a100_picks_are_ring_as_nccl_runs_there():
    # NCCL runs ring on one DGX A100 at every size (the fidelity issue); its protocol goes from
    # LL through LL128 to Simple as the size grows
    a100 = DATASETS[1].system
    picks = [choose(a100, 2**k) for k in range(15, 34)]
    assert {pick.algorithm for pick in picks} == {RING}
    protocols = [pick.protocol for pick in picks]
    assert protocols == sorted(protocols, key=[Protocol.LL, Protocol.LL128, Protocol.SIMPLE].index)
    assert protocols[0] is Protocol.LL and protocols[-1] is Protocol.SIMPLE
