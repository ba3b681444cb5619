"""A training model given by its transformer shape, and a GPU's memory capacity, read from a
scenario's ``training:`` section (simulator/scenario/training.py), with their exact errors."""

from __future__ import annotations

import pytest

from simulator.errors import InputError
from simulator.scenario.parse import scenario_from_dict
from simulator.training.transformer import Transformer

SWITCH = {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s", "latency": "1us"}
# Narayanan et al. 2021, Table 1, first row: 1.7B, 24 heads, hidden 2304, 24 layers; GPT with
# Megatron's padded vocabulary 51,200 and sequences of 2,048 (§5.1).
GPT_1_7B = {"layers": 24, "hidden": 2304, "heads": 24, "vocab": 51200, "sequence": 2048,
            "bias": True, "tied": True, "positions": 2048}


def training(model, gpu="h100"):
    """The training spec read from a scenario with ``model`` and ``gpu``."""
    scenario = scenario_from_dict({"topology": SWITCH, "training": {"model": model, "batch": 1,
                                                                    "gpu": gpu}}, source="x.yaml")
    assert scenario.training is not None
    return scenario.training


def test_a_megatron_table_1_gpt_by_its_shape():
    net = training({"transformer": GPT_1_7B, "name": "gpt_1.7b"}).network
    h, layers, v, s = 2304, 24, 51200, 2048
    assert net.shape == Transformer(layers=24, hidden=h, heads=24, kv_heads=24, ffn=4 * h, vocab=v,
                                    sequence=s, gated=False, bias=True, tied=True, positions=s)
    # Narayanan §5.1: P = 12·l·h²·(1 + 13/12h + (V + s)/12lh) (1.7B), plus the final LayerNorm.
    assert net.numel == 12 * layers * h * h + 13 * layers * h + (v + s) * h + 2 * h == 1_652_230_656
    assert net.flops == 24 * s * layers * h * h + 4 * s * s * layers * h + 2 * s * h * v
    assert (net.name, net.sample) == ("gpt_1.7b", "one sequence of 2048 tokens")
    assert net.tensors[0].name == "embedding.word_embeddings.weight"
    assert net.layers[-1].name == "output_layer" and net.layers[-1].tensors == ()


def test_defaults_make_a_plain_untied_gpt_shape():
    net = training({"transformer": {"layers": 2, "hidden": 64, "heads": 4, "vocab": 100,
                                    "sequence": 8}}).network
    assert net.shape == Transformer(layers=2, hidden=64, heads=4, kv_heads=4, ffn=256, vocab=100,
                                    sequence=8, gated=False, bias=False, tied=False)
    assert net.name == "transformer" and net.numel == net.shape.params


def test_a_gated_gqa_mixture_by_its_shape():
    shape = {"layers": 2, "hidden": 64, "heads": 8, "kv_heads": 2, "ffn": 96, "vocab": 100,
             "sequence": 16, "gated": True, "experts": 4, "top_k": 2}
    net = training({"transformer": shape, "name": "moe"}).network
    assert (net.shape.kv_heads, net.shape.experts, net.shape.top_k, net.shape.gated) == (2, 4, 2, True)
    assert net.numel == net.shape.params
    assert net.flops == net.shape.flops_per_token * 16


def test_gpu_memory_capacity_from_a_preset_or_given():
    model = {"transformer": GPT_1_7B}
    assert training(model).compute.memory == 80 * 10**9
    assert training(model, "b200").compute.memory == 180 * 10**9
    assert training(model, {"flops": "100TFLOP/s", "memory": "40GB"}).compute.memory == 40 * 10**9
    assert training(model, {"flops": "100TFLOP/s"}).compute.memory is None  # unknown: not checked
    assert training(model, "free").compute.memory is None


BAD = [
    ({"heads": 25}, "x.yaml: training.model.transformer.heads: expected a divisor of hidden 2304, got 25"),
    ({"kv_heads": 5}, "x.yaml: training.model.transformer.kv_heads: expected a divisor of heads 24 "
                      "(query heads share each key/value head evenly), got 5"),
    ({"experts": 2, "top_k": 3}, "x.yaml: training.model.transformer.top_k: expected at most "
                                 "experts 2, got 3"),
    ({"sequence": 4096}, "x.yaml: training.model.transformer.sequence: expected at most positions "
                         "2048 (the rows of the learned position table), got 4096"),
    ({"layers": 0}, "x.yaml: training.model.transformer.layers: expected a whole number ≥ 1, got 0"),
    ({"ffn": "big"}, "x.yaml: training.model.transformer.ffn: expected a whole number ≥ 1, got 'big'"),
    ({"gated": "yes"}, "x.yaml: training.model.transformer.gated: expected true or false, got 'yes'"),
    ({"positions": -1}, "x.yaml: training.model.transformer.positions: expected a whole number ≥ 0, "
                        "got -1"),
    ({"hiden": 4}, "x.yaml: training.model.transformer.hiden: unknown key; did you mean 'hidden'?"),
    ({"vocab": None}, "x.yaml: training.model.transformer.vocab: expected a whole number ≥ 1, got None"),
]


@pytest.mark.parametrize(("change", "message"), BAD)
def test_a_bad_shape_is_one_line_naming_its_field(change, message):
    with pytest.raises(InputError) as caught:
        training({"transformer": {**GPT_1_7B, **change}})
    assert str(caught.value) == message


def test_missing_fields_and_bad_sections_are_named():
    with pytest.raises(InputError) as caught:
        training({"transformer": {"layers": 2, "heads": 4, "vocab": 10}})
    assert str(caught.value).splitlines() == [
        "x.yaml: training.model.transformer.hidden: required but missing",
        "x.yaml: training.model.transformer.sequence: required but missing"]
    with pytest.raises(InputError) as caught:
        training({"transformer": [24, 2304]})
    assert str(caught.value) == ("x.yaml: training.model.transformer: expected a mapping of keys to "
                                 "values, got [24, 2304]")
    with pytest.raises(InputError) as caught:
        training({"transformer": GPT_1_7B, "input": [3]})
    assert str(caught.value) == ("x.yaml: training.model.input: unknown key; expected one of "
                                 "transformer, name, source")
    with pytest.raises(InputError) as caught:
        training({"transformer": GPT_1_7B}, {"flops": "1TFLOP/s", "memory": "0B"})
    assert str(caught.value) == "x.yaml: training.gpu.memory: expected a size ≥ 1 byte, got '0B'"
