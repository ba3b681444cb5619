"""The Megatron-LM check's data and arithmetic (bench/megatron.py): Table 1's rows, the paper's
FLOP count, the layouts derived from a row, and a refused run kept as its message."""

import math

import pytest

from bench.megatron import (
    TABLE_1,
    Outcome,
    PaperRow,
    achieved_tflops,
    check_transcription,
    megatron_scenario,
    paper_flops,
    simulate,
)
from simulator.training.layout import Schedule


def row(params_b: float) -> PaperRow:
    """Table 1's row of ``params_b`` billion parameters."""
    return next(r for r in TABLE_1 if r.params_b == params_b)


def test_table_agrees_with_its_aggregate_column() -> None:
    # 137 × 32 = 4.38 PFLOP/s (4.4 printed) ... 163 × 3072 = 500.7 (502.0 printed, rounded
    # per-GPU figure): every row within the rounding of both columns.
    assert check_transcription() == []
    assert len(TABLE_1) == 10


def test_paper_flops_of_the_first_row_by_hand() -> None:
    # 96·B·s·l·h² = 96 · 512 · 2048 · 24 · 2304² = 12,824,703,626,379,264;
    # s/(6h) = 2048/13824 = 4/27, V/(16·l·h) = 51200/884736 = 25/432;
    # × (1 + 4/27 + 25/432) = × 521/432 → 15,466,830,067,924,992 FLOPs an iteration.
    assert paper_flops(row(1.7)) == pytest.approx(15_466_830_067_924_992, rel=1e-15)


def test_achieved_tflops_inverts_the_step_time() -> None:
    # The step that achieves 137 TFLOP/s on 32 GPUs takes 1.5467e16 / (32 · 137e12) = 3.528 s.
    first = row(1.7)
    step = paper_flops(first) / (32 * 137e12)
    assert step == pytest.approx(3.5280178, rel=1e-7)
    assert achieved_tflops(first, Outcome(step_s=step)) == pytest.approx(137.0)
    assert math.isnan(achieved_tflops(first, Outcome(error="refused")))


def test_layout_of_a_row() -> None:
    # 145.6 B: 1,536 GPUs over t = 8, p = 8 leave d = 24; 2,304 / 24 = 96 sequences a
    # replica, 96 micro-batches of one; 80 layers / 8 stages = 10 a stage, so 2 chunks.
    big = row(145.6)
    assert (big.dp, big.per_replica, big.microbatches, big.chunks) == (24, 96, 96, 2)
    # 76.1 B: 60 / 4 = 15 layers a stage, which 2 does not split: 3 chunks; 529.6 B: 105 / 35.
    assert (row(76.1).chunks, row(529.6).chunks) == (3, 3)
    scenario = megatron_scenario(big, Schedule.INTERLEAVED)
    assert scenario["topology"] == {"preset": "dgx_a100_superpod", "nodes": 192}
    assert scenario["training"]["parallelism"] == {
        "tp": 8, "pp": 8, "dp": 24, "microbatches": 96, "recompute": True,
        "schedule": "interleaved", "chunks": 2}
    assert "schedule" not in megatron_scenario(big, Schedule.ONE_F_ONE_B)["training"][
        "parallelism"]


def test_pipelined_rows_meet_the_interleaved_condition() -> None:
    # Megatron runs the interleaved schedule only when p divides the micro-batches.
    for r in TABLE_1:
        assert r.microbatches % r.pp == 0, r.label


def test_a_refused_run_is_kept_as_its_message() -> None:
    # TP 16 on nodes of 8 GPUs without tp_across_nodes: refused at parse time, one line.
    scenario = {
        "name": "refused", "algorithms": "auto",
        "topology": {"preset": "dgx_h100_superpod", "nodes": 2},
        "training": {"model": {"name": "small", "transformer": {
            "layers": 2, "hidden": 256, "heads": 16, "vocab": 1024, "sequence": 128}},
            "batch": 1, "gpu": "h100", "parallelism": {"tp": 16, "pp": 1, "dp": 1}}}
    outcome = simulate(scenario)
    assert outcome.error == ("<dict>: training.parallelism.tp: TP groups inside one node of 8 "
                             "GPUs, got tp 16 placed across nodes (say tp_across_nodes: true "
                             "to mean it)")
    assert outcome.breakdown is None
    assert math.isnan(outcome.step_s)
