"""Per-GPU memory of a parallel layout, against numbers worked by hand from ZeRO's byte counts and
Korthikanti et al. 2022's activation formulas (simulator/training/memory.py)."""

from __future__ import annotations

from fractions import Fraction
from functools import partial

from simulator.training.compute import ACCELERATORS, Optimizer
from simulator.training.layout import Parallelism, Schedule
from simulator.training.memory import (
    fits,
    in_flight,
    layer_activation_bytes,
    layout_memory,
    optimizer_state_bytes,
)
from simulator.training.transformer import Transformer
from simulator.training.zoo import llama_7b
from simulator.training.zoo_llm import gpt3_175b, llama2_70b, mixtral_8x7b

H100, A100 = ACCELERATORS["h100"].memory_capacity, ACCELERATORS["a100"].memory_capacity

Stored = partial(Parallelism, flash_attention=False)
"""A layout whose attention keeps its scores: Korthikanti et al.'s GPT formulas as printed."""


def test_capacities_are_the_data_sheets():
    assert {name: gpu.memory_capacity for name, gpu in ACCELERATORS.items()} == {
        "v100": 32e9, "a100": 80e9, "h100": 80e9, "b200": 180e9, "gb200": 186e9}


def test_optimizer_states_are_zeros_k():
    # ZeRO §3.1: mixed-precision Adam keeps K = 12 bytes (fp32 weight, momentum, variance).
    assert [optimizer_state_bytes(o) for o in (Optimizer.ADAM, Optimizer.MOMENTUM, Optimizer.SGD)] == [
        12, 8, 4]


def test_plain_ddp_of_llama_7b_with_adam_does_not_fit_an_h100():
    shape = llama_7b().shape
    memory = layout_memory(shape, Stored(), microbatch=1, optimizer=Optimizer.ADAM)
    # 6,738,415,616 parameters × (2 + 2 + 12) bytes = 107.8 GB; the "112 GB" is the
    # nominal 7e9 × 16.
    assert memory.parameters == memory.gradients == 2 * 6_738_415_616
    assert memory.optimizer_states == 12 * 6_738_415_616
    assert memory.parameters + memory.gradients + memory.optimizer_states == 107_814_649_856
    # Korthikanti Eq. 1: s·b·h·(34 + 5·a·s/h) = 2048·4096·(34 + 5·32·2048/4096 = 80) a layer, ×32.
    assert memory.activations == 2048 * 4096 * 114 * 32 == 30_601_641_984
    assert memory.total == 138_416_291_840
    assert not fits(memory, H100)
    # Recomputing everything keeps 2·s·b·h a layer, and still does not fit.
    recomputed = layout_memory(shape, Stored(recompute=True), microbatch=1, optimizer=Optimizer.ADAM)
    assert recomputed.activations == 2 * 2048 * 4096 * 32
    assert not fits(recomputed, H100)
    assert fits(memory, None)  # unknown capacity: not checked


def test_llama2_70b_on_tp8_pp8_dp4_zero1_fits_with_sequence_parallelism():
    shape = llama2_70b().shape
    layout = Stored(tp=8, pp=8, dp=4, zero=1, microbatches=32, sequence_parallel=True)
    memory = layout_memory(shape, layout, microbatch=1, optimizer=Optimizer.ADAM)
    # Stage 0: 10 layers of 855,654,400 and the 32000 × 8192 embedding, over tp 8.
    per_gpu = (10 * 855_654_400 + 32000 * 8192) // 8
    assert per_gpu == 1_102_336_000
    assert memory.parameters == memory.gradients == 2 * per_gpu
    assert memory.optimizer_states == 12 * per_gpu // 4  # ZeRO-1: the fp32 states over dp 4
    # s·b·h·(34 + 5·a·s/h)/t = 4096·8192·(34 + 160)/8 a layer; 10 layers, 8 micro-batches in flight.
    assert memory.activations == 4096 * 8192 * 194 // 8 * 10 * 8 == 65_095_598_080
    assert memory.total == 72_811_950_080
    assert fits(memory, H100)
    # Without sequence parallelism 4096·8192·(10 + 24/8 + 5·64·4096/(8192·8)) = 33 sbh a layer:
    # 96.3 GB, which does not fit.
    no_sp = layout_memory(shape, Stored(tp=8, pp=8, dp=4, zero=1, microbatches=32),
                          microbatch=1, optimizer=Optimizer.ADAM)
    assert no_sp.activations == 4096 * 8192 * 33 * 80
    assert no_sp.total == 96_300_052_480
    assert not fits(no_sp, H100)


def test_gpt3_175b_at_t8_p16_fits_an_a100():
    shape = gpt3_175b().shape
    layout = Stored(tp=8, pp=16, dp=8, microbatches=64)
    memory = layout_memory(shape, layout, microbatch=1, optimizer=Optimizer.ADAM)
    # 6 layers of 12h² + 13h, and the 51,200-row word and 2,048-row position tables, over tp 8.
    per_gpu = (6 * 1_812_099_072 + (51200 + 2048) * 12288) // 8
    assert per_gpu == 1_440_863_232
    assert memory.parameters + memory.gradients + memory.optimizer_states == 16 * per_gpu
    # s·b·h·(10 + 24/8 + 5·96·2048/(12288·8)) = 23 sbh a layer; 6 layers × 16 micro-batches.
    assert memory.activations == 2048 * 12288 * 23 * 6 * 16 == 55_566_139_392
    assert memory.total == 78_619_951_104
    assert fits(memory, A100)
    recomputed = layout_memory(shape, Stored(tp=8, pp=16, dp=8, microbatches=64, recompute=True),
                               microbatch=1, optimizer=Optimizer.ADAM)
    assert recomputed.activations == 2 * 2048 * 12288 * 96


def test_zero_stages_shard_states_then_gradients_then_weights():
    shape = Transformer(layers=2, hidden=64, heads=4, kv_heads=4, ffn=256, vocab=128, sequence=32)
    params = shape.params  # pp = tp = 1: the whole model
    by_stage = [layout_memory(shape, Stored(dp=4, zero=z), microbatch=1, optimizer=Optimizer.MOMENTUM)
                for z in range(4)]
    assert [(m.parameters, m.gradients, m.optimizer_states) for m in by_stage] == [
        (2 * params, 2 * params, 8 * params),
        (2 * params, 2 * params, 8 * params // 4),
        (2 * params, 2 * params // 4, 8 * params // 4),
        (2 * params // 4, 2 * params // 4, 8 * params // 4),
    ]


def test_experts_split_over_ep_and_shard_over_the_expert_data_parallel_group():
    shape = mixtral_8x7b().shape
    layout = Stored(tp=1, pp=4, dp=8, ep=8, zero=1, microbatches=8)
    memory = layout_memory(shape, layout, microbatch=1, optimizer=Optimizer.ADAM)
    dense = 8 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 4096 * 8 + 2 * 4096) + 32000 * 4096
    experts = 8 * 8 * 3 * 4096 * 14336 // 8  # 8 layers × 8 experts, one per EP rank
    assert memory.parameters == 2 * (dense + experts)
    # ZeRO-1: dense states over dp 8, expert states over dp / ep = 1.
    assert memory.optimizer_states == 12 * dense // 8 + 12 * experts


def test_micro_batches_in_flight_on_stage_0():
    assert in_flight(Stored(pp=4, dp=1, microbatches=16)) == 4
    assert in_flight(Stored(pp=4, microbatches=2)) == 2  # fewer micro-batches than stages
    assert in_flight(Stored(microbatches=8)) == 1  # no pipeline: one at a time
    # Interleaved, 2 chunks: 2·3 + 1·4 + 1 = 11 half-stages in flight = 4·(1 + 3/8), Korthikanti's
    # factor 1 + (p − 1)/(p·m).
    interleaved = Stored(pp=4, microbatches=8, schedule=Schedule.INTERLEAVED, chunks=2)
    assert in_flight(interleaved) == Fraction(11, 2) == 4 * (1 + Fraction(3, 8))


def test_activations_per_layer_are_korthikantis_table_2():
    shape = Transformer(layers=4, hidden=1024, heads=16, kv_heads=16, ffn=4096, vocab=1000,
                        sequence=2048)
    sbh, scores = 2048 * 2 * 1024, 5 * 16 * 2048 / 1024  # b = 2; 5as/h = 160
    assert layer_activation_bytes(shape, Stored(), 2) == sbh * (34 + scores)
    assert layer_activation_bytes(shape, Stored(tp=4), 2) == sbh * (10 + 24 / 4 + scores / 4)
    assert layer_activation_bytes(shape, Stored(tp=4, sequence_parallel=True), 2) == sbh * (
        34 + scores) / 4
    assert layer_activation_bytes(shape, Stored(tp=4, recompute=True), 2) == 2 * sbh
    assert layer_activation_bytes(shape, Stored(tp=4, recompute=True, sequence_parallel=True),
                                  2) == 2 * sbh / 4



def test_flash_attention_keeps_no_scores_so_a_layer_keeps_34_bytes_an_element_over_tp():
    # Dao et al. 2022 §3.1: no s x s scores kept; Korthikanti Table 2's selective row
    shape = llama2_70b().shape
    assert shape is not None
    sbh = shape.sequence * 2 * shape.hidden
    assert layer_activation_bytes(shape, Parallelism(tp=8, sequence_parallel=True), 2) == (
        sbh * 34 / 8)
