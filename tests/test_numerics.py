"""Low-precision numerics (docs/numerics.md): every algorithm reduces in the dtype in its own
order, the results report the error in ULP and whether the ranks agree bit for bit, and a
float16 or bfloat16 sum is verified against the rounding bound of its algorithm's order."""

import re
from dataclasses import replace

import numpy as np
import pytest

from simulator.algorithms import REGISTRY
from simulator.engine.payload import Payload, exactly_summable, make_inputs
from simulator.engine.run import RunSpec, run_collective
from simulator.model.collective import Collective, sum_bound
from simulator.model.reduction import BFLOAT16, ReduceOp, ulp
from simulator.output.results import RESULT_COLUMNS
from simulator.runner import prepare, run_point
from simulator.settings import Engine
from tests.conftest import REPO, applicable_scenario, flat_scenario

HALF_ULP_OF_ONE = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
"""Half the spacing of the dtype's numbers at 1: 1 + this is a tie, rounded to even (to 1)."""


def _dtype(name: str) -> np.dtype:
    return BFLOAT16 if name == "bfloat16" else np.dtype(name)


def _ones_then_halves(dtype: np.dtype) -> np.ndarray:
    """3 ranks × 3 elements: rank 0 holds 1, ranks 1 and 2 half an ULP of 1, so that 1 + s + s
    is 1 when 1 comes first (two ties, each to even) and exact (1 + 2s) when it comes last."""
    inputs = np.full((3, 3), HALF_ULP_OF_ONE[dtype.name], dtype=dtype)
    inputs[0] = 1
    return inputs


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("algorithm", ["ring", "direct", "halving_doubling"])
def test_each_order_rounds_as_numpy_rounds_it_by_hand(dtype, algorithm):
    dtype = _dtype(dtype)
    x = _ones_then_halves(dtype)
    s = HALF_ULP_OF_ONE[dtype.name]
    if algorithm == "halving_doubling":  # rank 0 folds into rank 1, which swaps with rank 2
        by_hand = [(x[0, e] + x[1, e]) + x[2, e] for e in range(3)]
    else:  # chunk (element) c reduced from rank c on around the ring: ring and direct alike
        by_hand = [(x[c, c] + x[(c + 1) % 3, c]) + x[(c + 2) % 3, c] for c in range(3)]
    assert [float(v) for v in by_hand] == ([1.0, 1.0, 1.0] if algorithm == "halving_doubling"
                                           else [1.0, 1.0 + 2 * s, 1.0])
    scenario = flat_scenario(ranks=3, algorithms=(algorithm,), sizes=(6,), dtype=dtype)
    result = run_point(scenario, algorithm, 6, inputs=x)
    assert x.tobytes() == np.array([by_hand] * 3, dtype=dtype).tobytes()  # every rank, bit for bit
    # exact sum 1 + 2s, Σ|x| the same: its ULP is 2s, so rounding to 1 is 1 ULP off
    wrong = 3 if algorithm == "halving_doubling" else 2
    assert (result.verified, result.max_abs_error, result.max_ulp_error, result.mean_ulp_error,
            result.ranks_identical) == (True, 2 * s, 1.0, wrong / 3, True)


def test_ranks_reducing_in_their_own_orders_are_not_identical():
    x = _ones_then_halves(np.dtype("float16"))
    scenario = flat_scenario(ranks=3, sizes=(6,), dtype=np.dtype("float16"))
    # the registered one_shot: every rank adds its peers' buffers into its own, from the next
    # rank on (rank r computes (x_r + x_{r+1}) + x_{r+2})
    result = run_point(scenario, REGISTRY[Collective.ALLREDUCE]["one_shot"], 6, inputs=x)
    s = HALF_ULP_OF_ONE["float16"]
    assert x[:, 0].tolist() == [1.0, 1.0 + 2 * s, 1.0]  # rank 1 adds the halves first
    assert (result.verified, result.max_ulp_error, result.mean_ulp_error,
            result.ranks_identical) == (True, 1.0, 2 / 3, False)


def test_the_bound_is_the_order_s_depth_and_a_wrong_result_fails_it():
    """1 + three halves of an ULP: in sequence the result is 1 (3 halves off), pairwise
    (1 + s) + (s + s) = 1 + 2s (one half off). γ_3·Σ|x| admits the first, γ_2·Σ|x| only the
    second, and neither admits a result 5 halves off."""
    u = 2.0 ** -11
    inputs = np.array([[1.0], [u], [u], [u]], dtype=np.float16)
    total = 1 + 3 * u
    assert sum_bound(np.array([total]), np.dtype("float16"), 3).tolist() == [
        3 * u / (1 - 3 * u) * total]
    sequence, pairwise, wrong = 1.0, 1.0 + 2 * u, 1.0 + 8 * u
    for depth, admitted in ((3, {sequence, pairwise}), (2, {pairwise})):
        expected = Collective.ALLREDUCE.expected(inputs, ReduceOp.SUM, [slice(0, 1)] * 4,
                                                 summable=False, depth=depth)
        for value in (sequence, pairwise, wrong):
            buffers = np.full((4, 1), value, dtype=np.float16)
            assert expected.check(buffers).verified is (value in admitted)
    check = expected.check(np.full((4, 1), wrong, dtype=np.float16))
    # 5u off the exact sum, whose ULP (that of Σ|x| = 1 + 3u) is 2u
    assert (check.max_abs_error, check.max_ulp_error, check.ranks_identical) == (5 * u, 2.5, True)


def test_a_bound_past_one_admits_anything_finite():
    """γ_k needs k·u < 1: bfloat16 (u = 2^-8) summed over 257 ranks in sequence has no bound."""
    assert sum_bound(np.array([1.0]), BFLOAT16, 256).tolist() == [np.inf]
    assert sum_bound(np.array([1.0]), BFLOAT16, 255).tolist() == [255 / 256 / (1 - 255 / 256)]


def test_an_average_is_bounded_by_its_sum_s_bound_and_the_division():
    inputs = np.array([[1.0], [2.0 ** -11], [2.0 ** -11]], dtype=np.float16)
    expected = Collective.ALLREDUCE.expected(inputs, ReduceOp.AVG, [slice(0, 1)] * 3,
                                             summable=False, depth=2)
    u, mean = 2.0 ** -11, (1 + 2 * 2.0 ** -11) / 3
    bound = 2 * u / (1 - 2 * u) * mean  # B/p: the magnitudes are Σ|x_i|/p already
    assert expected.tolerance.tolist() == [bound + 2 * u / (1 - 2 * u) * (mean + bound)]


def test_ulp_is_the_spacing_of_the_dtype_in_each_binade():
    half = np.dtype("float16")
    values = np.array([0.0, 1.0, 1.5, -3.0, 2.0 ** -20, 65504.0])
    # subnormals (and 0) spaced 2^-24; 65504, the largest, in the binade of 2^15
    assert ulp(values, half).tolist() == [2.0 ** -24, 2.0 ** -10, 2.0 ** -10, 2.0 ** -9,
                                          2.0 ** -24, 32.0]
    assert ulp(np.array([0.0, 1.0, 3.0]), BFLOAT16).tolist() == [2.0 ** -133, 2.0 ** -7, 2.0 ** -6]


def test_low_precision_sums_draw_normal_gradients_and_the_rest_as_before():
    assert [exactly_summable(_dtype(d), op) for d, op in [
        ("float16", ReduceOp.SUM), ("bfloat16", ReduceOp.AVG), ("float16", ReduceOp.MAX),
        ("float32", ReduceOp.SUM), ("int32", ReduceOp.SUM)]] == [False, False, True, True, True]
    payload = Payload(64, 64, BFLOAT16)
    drawn = make_inputs(np.random.default_rng(5), 4, payload, ReduceOp.SUM)
    normal = np.random.default_rng(5).standard_normal((4, 64), dtype=np.float32).astype(BFLOAT16)
    assert drawn.dtype == BFLOAT16 and drawn.tobytes() == normal.tobytes()
    summable = make_inputs(np.random.default_rng(5), 4, payload, ReduceOp.SUM, summable=True)
    assert not np.any(summable.astype(np.float64) * 64 % 1)  # multiples of 2^-6


def test_bfloat16_is_a_scenario_dtype_run_and_verified():
    scenario = flat_scenario(ranks=4, algorithms=("ring",), sizes=(1024,), dtype="bfloat16")
    result = run_point(scenario, "ring", 1024)
    assert (result.dtype, result.count, result.verified, result.ranks_identical) == (
        "bfloat16", 512, True, True)
    assert 0 < result.max_ulp_error <= 3  # below γ_3·Σ|x_i|, about 3 ULP of Σ|x_i|


def test_exact_dtypes_report_no_error_in_ulp():
    scenario = flat_scenario(ranks=4, algorithms=("ring",), sizes=(4096,))
    result = run_point(scenario, "ring", 4096)
    assert (result.max_abs_error, result.max_ulp_error, result.mean_ulp_error,
            result.ranks_identical) == (0.0, 0.0, 0.0, True)
    quiet = run_point(replace(scenario, run=replace(scenario.run, verify=False)), "ring", 4096)
    assert np.isnan(quiet.max_ulp_error) and quiet.ranks_identical is None


REDUCING = [(collective, name) for collective in (Collective.ALLREDUCE, Collective.REDUCE,
                                                  Collective.REDUCE_SCATTER)
            for name in REGISTRY[collective]]

TIGHT = {"ring", "direct", "nvls", "halving_doubling", "recursive_doubling", "swing", "bine",
         "binomial_tree", "tree", "double_binary_tree"}
"""Algorithms whose reduction_depth is the very height of their order, not only a bound."""


class Height:
    """A stand-in operator for the SimPy engine: combining two partial results gives one more
    than the taller, so that from zeros every element ends with the height of its reduction
    tree (the most reductions any contribution went through)."""

    def combine(self, into: np.ndarray, other: np.ndarray) -> None:
        np.maximum(into, other, out=into)
        into += 1


@pytest.mark.parametrize("collective, name", REDUCING, ids=[f"{c.value}-{n}" for c, n in REDUCING])
def test_every_algorithm_s_order_is_as_deep_as_it_claims(collective, name):
    measured = []
    for ranks in (2, 3, 6, 8, 12):
        scenario = applicable_scenario(ranks, algorithms=(name,), collective=collective)
        if scenario is None:
            continue
        measured.append(ranks)
        setup = prepare(scenario)
        algorithm, machine = setup.algorithms[0], setup.machine
        count = 16 * ranks
        heights = np.zeros((ranks, count), dtype=np.int64)
        run_collective(algorithm, machine, RunSpec(Payload(count, count, heights.dtype), Height()),
                       heights)
        if collective is Collective.REDUCE:
            heights = heights[:1]
        elif collective is Collective.REDUCE_SCATTER:
            heights = np.concatenate([heights[r, chunk] for r, chunk in
                                      enumerate(Payload(count, count, heights.dtype).owned(ranks))])
        claimed = algorithm.reduction_depth(machine.layout)
        assert heights.min() == heights.max() <= ranks - 1
        assert heights.max() == claimed if name in TIGHT else heights.max() <= claimed, ranks
    assert len(measured) >= 3


ENGINES = [(collective, name, dtype) for collective, name in REDUCING
           for dtype in ("float16", "bfloat16")]


@pytest.mark.parametrize("collective, name, dtype", ENGINES,
                         ids=[f"{c.value}-{n}-{d}" for c, n, d in ENGINES])
def test_both_engines_round_to_the_same_bits(collective, name, dtype):
    compared = 0
    for ranks in (6, 8):
        scenario = applicable_scenario(ranks, algorithms=(name,), collective=collective,
                                       dtype=_dtype(dtype), sizes=(ranks * 256,))
        if scenario is None:
            continue
        compared += 1
        payload = Payload(ranks * 128, ranks * 128, _dtype(dtype))
        drawn = make_inputs(np.random.default_rng(ranks), ranks, payload, ReduceOp.SUM)
        ends = {}
        for engine in (Engine.SIMPY, Engine.VECTOR):
            buffers = drawn.copy()
            result = run_point(replace(scenario, run=replace(scenario.run, engine=engine)), name,
                               ranks * 256, inputs=buffers)
            assert (result.engine, result.verified) == (engine.value, True)
            ends[engine] = buffers
        assert ends[Engine.SIMPY].tobytes() == ends[Engine.VECTOR].tobytes()
    assert compared


def test_dist_reduces_torch_bfloat16_tensors_in_place_in_the_ring_s_order():
    import torch  # the test extra's (its import is slow: only here)

    import simulator.distributed as dist

    tensors = {}

    def step(rank: int) -> None:
        tensors[rank] = torch.full((3,), 1.0 if rank == 0 else 2.0 ** -8, dtype=torch.bfloat16)
        before = tensors[rank].data_ptr()
        dist.all_reduce(tensors[rank])
        assert tensors[rank].data_ptr() == before

    dist.spawn(step, 3)
    # element c: (x_c + x_{c+1}) + x_{c+2}, as in the hand-worked ring above
    assert [tensors[rank].tolist() for rank in range(3)] == [[1.0, 1.0 + 2.0 ** -7, 1.0]] * 3


def test_the_docs_table_is_what_the_benchmark_prints():
    """docs/numerics.md's 8-rank float16 table, run again (the 64-rank ones take longer)."""
    from bench.numerics import ALGORITHMS, run, table

    frame, depths = run(8, "float16", list(ALGORITHMS), ["1KiB", "64KiB", "1MiB", "16MiB"], 0)
    assert frame.verified.all()
    page = (REPO / "docs" / "numerics.md").read_text(encoding="utf-8")
    assert f"### 8 ranks, float16\n\n{table(frame, depths)}\n" in page


def test_the_results_columns_are_documented_in_order():
    page = (REPO / "docs" / "results.md").read_text(encoding="utf-8")
    documented = re.findall(r"^\| (\d+) \| `(\w+)` \|", page, flags=re.MULTILINE)
    assert documented == [(str(i), name) for i, name in enumerate(RESULT_COLUMNS, start=1)]
    assert RESULT_COLUMNS[29:32] == ("max_ulp_error", "mean_ulp_error", "ranks_identical")
