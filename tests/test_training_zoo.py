"""Model presets against their reference implementations (parameter counts, names, shapes, order)
and published FLOP figures; torch modules turned into Networks, with FLOPs from FlopCounterMode."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

from simulator.training.network import Layer, Network
from simulator.training.torchnet import network_from_module
from simulator.training.transformer import Transformer
from simulator.training.zoo import (
    NETWORKS,
    bert_large,
    gpt2_xl,
    llama_7b,
    llama_ffn,
    network_names,
    resnet50,
)
from simulator.training.zoo_llm import gpt3_175b, llama2_70b, megatron_gpt, mixtral_8x7b


def pairs(net: Network) -> list[tuple[str, tuple[int, ...]]]:
    """The (name, shape) of each parameter, in order."""
    return [(tensor.name, tensor.shape) for tensor in net.tensors]


def layer(net: Network, name: str) -> Layer:
    return next(item for item in net.layers if item.name == name)


def layer_names(net: Network, prefix: str) -> list[str]:
    return [item.name.removeprefix(prefix) for item in net.layers if item.name.startswith(prefix)]


# --- totals -----------------------------------------------------------------------------------------

# ResNet-50: torchvision's ResNet50_Weights meta "num_params". The others: what transformers 5.24
# counts, sum(p.numel() for p in model.parameters()), for the published configs (built on the meta
# device; the same names, shapes and order as the presets').
TOTALS = {
    "resnet50": 25_557_032,
    "bert_large": 336_226_108,  # BertForPreTraining
    "gpt2_xl": 1_557_611_200,
    "llama_7b": 6_738_415_616,
    # Worked by hand from the cited shapes, see the tests below.
    "llama2_70b": 68_976_648_192,
    "gpt3_175b": 174_615_846_912,
    "mixtral_8x7b": 46_702_792_704,
}


def test_registry_lists_the_presets_in_order():
    assert network_names() == ("resnet50", "bert_large", "gpt2_xl", "llama_7b", "llama2_70b",
                               "gpt3_175b", "mixtral_8x7b")
    assert list(NETWORKS) == list(TOTALS)


@pytest.mark.parametrize("name", list(TOTALS))
def test_totals_equal_the_reference_implementations(name):
    net = NETWORKS[name]()
    assert net.numel == TOTALS[name]
    assert net.name == name
    assert len({tensor.name for tensor in net.tensors}) == len(net.tensors)  # each parameter once
    for item in net.layers:  # a layer holds its own module's parameters
        assert all(tensor.name.rsplit(".", 1)[0] == item.name for tensor in item.tensors)


def test_bert_model_is_the_pretraining_model_less_its_heads():
    # BertModel of the same config: 335,141,888 (transformers 5.24).
    body = [tensor for tensor in bert_large().tensors if tensor.name.startswith("bert.")]
    assert sum(tensor.numel for tensor in body) == 335_141_888


# --- ResNet-50 --------------------------------------------------------------------------------------


def test_resnet50_forward_flops_match_torchvision():
    # torchvision's ResNet50_Weights meta "_ops": 4.089 "GFLOPS", multiply-adds of the convolutions
    # and fc (pytorch/vision#6936's counter); given to 3 decimals, so within 0.0005 of 4.089.
    net = resnet50()
    assert net.flops / 2 == pytest.approx(4.089e9, abs=0.0005e9)
    # Exactly, 2 per multiply-add; FlopCounterMode gives the same on torchvision's module.
    assert net.flops == 8_178_368_512
    assert net.sample == "one 224×224 RGB image"


def test_resnet50_first_and_last_tensors_are_torchvisions():
    got = pairs(resnet50())
    assert len(got) == 161
    assert got[:9] == [
        ("conv1.weight", (64, 3, 7, 7)), ("bn1.weight", (64,)), ("bn1.bias", (64,)),
        ("layer1.0.conv1.weight", (64, 64, 1, 1)), ("layer1.0.bn1.weight", (64,)),
        ("layer1.0.bn1.bias", (64,)), ("layer1.0.conv2.weight", (64, 64, 3, 3)),
        ("layer1.0.bn2.weight", (64,)), ("layer1.0.bn2.bias", (64,)),
    ]
    assert got[-5:] == [
        ("layer4.2.conv3.weight", (2048, 512, 1, 1)), ("layer4.2.bn3.weight", (2048,)),
        ("layer4.2.bn3.bias", (2048,)), ("fc.weight", (1000, 2048)), ("fc.bias", (1000,)),
    ]


def test_resnet50_bottleneck_registration_order():
    net = resnet50()
    # bn after its conv, the shortcut after conv3/bn3.
    assert layer_names(net, "layer2.0.") == ["conv1", "bn1", "conv2", "bn2", "conv3", "bn3",
                                             "downsample.0", "downsample.1"]
    assert layer_names(net, "layer2.1.") == ["conv1", "bn1", "conv2", "bn2", "conv3", "bn3"]
    shortcuts = [item.name for item in net.layers if item.name.endswith("downsample.0")]
    assert shortcuts == [f"layer{stage}.0.downsample.0" for stage in (1, 2, 3, 4)]
    assert layer(net, "layer1.0.downsample.0").tensors[0].shape == (256, 64, 1, 1)
    assert layer(net, "layer2.0.downsample.0").tensors[0].shape == (512, 256, 1, 1)
    blocks = [len({item.name.split(".")[1] for item in net.layers if item.name.startswith(f"layer{s}.")})
              for s in (1, 2, 3, 4)]
    assert blocks == [3, 4, 6, 3]


def test_resnet50_strides_on_the_3x3_convolution():
    # v1.5: layer2.0.conv1 still at 56×56; conv2 (stride 2) and the rest of the block at 28×28.
    net = resnet50()
    assert layer(net, "conv1").flops == 2 * 7 * 7 * 3 * 64 * 112 * 112
    assert layer(net, "layer2.0.conv1").flops == 2 * 256 * 128 * 56 * 56
    assert layer(net, "layer2.0.conv2").flops == 2 * 3 * 3 * 128 * 128 * 28 * 28
    assert layer(net, "layer2.0.conv3").flops == 2 * 128 * 512 * 28 * 28
    assert layer(net, "layer2.0.downsample.0").flops == 2 * 256 * 512 * 28 * 28
    assert layer(net, "layer4.2.conv2").flops == 2 * 3 * 3 * 512 * 512 * 7 * 7
    assert layer(net, "fc").flops == 2 * 2048 * 1000
    assert layer(net, "bn1").flops == 0


# --- BERT-large -------------------------------------------------------------------------------------


def test_bert_large_first_and_last_tensors_are_transformers():
    got = pairs(bert_large())
    assert len(got) == 398
    assert got[:9] == [
        ("bert.embeddings.word_embeddings.weight", (30522, 1024)),
        ("bert.embeddings.position_embeddings.weight", (512, 1024)),
        ("bert.embeddings.token_type_embeddings.weight", (2, 1024)),
        ("bert.embeddings.LayerNorm.weight", (1024,)), ("bert.embeddings.LayerNorm.bias", (1024,)),
        ("bert.encoder.layer.0.attention.self.query.weight", (1024, 1024)),
        ("bert.encoder.layer.0.attention.self.query.bias", (1024,)),
        ("bert.encoder.layer.0.attention.self.key.weight", (1024, 1024)),
        ("bert.encoder.layer.0.attention.self.key.bias", (1024,)),
    ]
    assert got[-13:] == [
        ("bert.encoder.layer.23.output.dense.weight", (1024, 4096)),
        ("bert.encoder.layer.23.output.dense.bias", (1024,)),
        ("bert.encoder.layer.23.output.LayerNorm.weight", (1024,)),
        ("bert.encoder.layer.23.output.LayerNorm.bias", (1024,)),
        ("bert.pooler.dense.weight", (1024, 1024)), ("bert.pooler.dense.bias", (1024,)),
        ("cls.predictions.bias", (30522,)),
        ("cls.predictions.transform.dense.weight", (1024, 1024)),
        ("cls.predictions.transform.dense.bias", (1024,)),
        ("cls.predictions.transform.LayerNorm.weight", (1024,)),
        ("cls.predictions.transform.LayerNorm.bias", (1024,)),
        ("cls.seq_relationship.weight", (2, 1024)), ("cls.seq_relationship.bias", (2,)),
    ]


def test_bert_large_layer_order_and_flops():
    net = bert_large(sequence=128)
    assert layer_names(net, "bert.encoder.layer.5.") == [
        "attention.self.query", "attention.self.key", "attention.self.value",
        "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense", "output.dense",
        "output.LayerNorm"]
    d, s = 1024, 128
    # Attention's score and context products (2·2·s²·d) ride on the output projection.
    assert layer(net, "bert.encoder.layer.5.attention.output.dense").flops == 2 * d * d * s + 4 * s * s * d
    assert layer(net, "bert.encoder.layer.5.intermediate.dense").flops == 2 * d * 4096 * s
    # The tied MLM decoder: no parameters of its own, between the transform and the NSP head.
    assert [item.name for item in net.layers[-6:]] == [
        "bert.pooler.dense", "cls.predictions", "cls.predictions.transform.dense",
        "cls.predictions.transform.LayerNorm", "cls.predictions.decoder", "cls.seq_relationship"]
    assert layer(net, "cls.predictions.decoder").tensors == ()
    assert layer(net, "cls.predictions.decoder").flops == 2 * d * 30522 * s
    assert layer(net, "bert.pooler.dense").flops == 2 * d * d  # [CLS] only
    assert layer(net, "cls.seq_relationship").flops == 2 * d * 2
    assert layer(net, "bert.embeddings.word_embeddings").flops == 0
    assert net.sample == "one sequence of 128 tokens"


# --- GPT-2 XL ---------------------------------------------------------------------------------------


def test_gpt2_xl_first_and_last_tensors_are_transformers():
    got = pairs(gpt2_xl())
    assert len(got) == 580
    assert got[:14] == [
        ("transformer.wte.weight", (50257, 1600)), ("transformer.wpe.weight", (1024, 1600)),
        ("transformer.h.0.ln_1.weight", (1600,)), ("transformer.h.0.ln_1.bias", (1600,)),
        ("transformer.h.0.attn.c_attn.weight", (1600, 4800)), ("transformer.h.0.attn.c_attn.bias", (4800,)),
        ("transformer.h.0.attn.c_proj.weight", (1600, 1600)), ("transformer.h.0.attn.c_proj.bias", (1600,)),
        ("transformer.h.0.ln_2.weight", (1600,)), ("transformer.h.0.ln_2.bias", (1600,)),
        ("transformer.h.0.mlp.c_fc.weight", (1600, 6400)), ("transformer.h.0.mlp.c_fc.bias", (6400,)),
        ("transformer.h.0.mlp.c_proj.weight", (6400, 1600)), ("transformer.h.0.mlp.c_proj.bias", (1600,)),
    ]
    assert got[-4:] == [
        ("transformer.h.47.mlp.c_proj.weight", (6400, 1600)), ("transformer.h.47.mlp.c_proj.bias", (1600,)),
        ("transformer.ln_f.weight", (1600,)), ("transformer.ln_f.bias", (1600,)),
    ]


def test_gpt2_xl_tied_head_runs_last_and_flops_match_narayanan():
    net = gpt2_xl()
    head = net.layers[-1]
    assert (head.name, head.tensors) == ("lm_head", ())
    assert net.layers[-2].name == "transformer.ln_f"
    b, s, layers, h, v = 1, 1024, 48, 1600, 50257
    assert head.flops == 2 * b * s * h * v
    # Narayanan et al. 2021 (Efficient Large-Scale Language Model Training on GPU Clusters, §5.1):
    # a GPT of l layers, width h, vocabulary V costs 96·B·s·l·h²·(1 + s/6h + V/16lh) per iteration
    # with activation recomputation: 4 passes of the layers' 24·B·s·l·h²·(1 + s/6h) forward, 3 of
    # the logits' 2·B·s·h·V.
    assert net.flops == pytest.approx(24 * b * s * layers * h * h * (1 + s / (6 * h)) + 2 * b * s * h * v,
                                      rel=1e-12)


def test_sequence_scales_the_language_models():
    short, full = gpt2_xl(sequence=512), gpt2_xl()
    assert short.numel == full.numel
    assert layer(short, "transformer.h.0.mlp.c_fc").flops * 2 == layer(full, "transformer.h.0.mlp.c_fc").flops
    for build, limit in ((bert_large, 512), (gpt2_xl, 1024)):
        with pytest.raises(ValueError, match=rf"sequence {limit + 1} out of range \(1\.\.{limit} tokens\)"):
            build(sequence=limit + 1)
    with pytest.raises(ValueError, match="sequence 0 out of range"):
        llama_7b(sequence=0)
    assert llama_7b(sequence=4096).sample == "one sequence of 4096 tokens"  # rotary: no table


# --- LLaMA-7B ---------------------------------------------------------------------------------------


def test_llama_7b_first_and_last_tensors_are_transformers():
    got = pairs(llama_7b())
    assert len(got) == 291
    assert llama_ffn(4096) == 11008
    assert got[:10] == [
        ("model.embed_tokens.weight", (32000, 4096)),
        ("model.layers.0.self_attn.q_proj.weight", (4096, 4096)),
        ("model.layers.0.self_attn.k_proj.weight", (4096, 4096)),
        ("model.layers.0.self_attn.v_proj.weight", (4096, 4096)),
        ("model.layers.0.self_attn.o_proj.weight", (4096, 4096)),
        ("model.layers.0.mlp.gate_proj.weight", (11008, 4096)),
        ("model.layers.0.mlp.up_proj.weight", (11008, 4096)),
        ("model.layers.0.mlp.down_proj.weight", (4096, 11008)),
        ("model.layers.0.input_layernorm.weight", (4096,)),
        ("model.layers.0.post_attention_layernorm.weight", (4096,)),
    ]
    assert got[-4:] == [
        ("model.layers.31.input_layernorm.weight", (4096,)),
        ("model.layers.31.post_attention_layernorm.weight", (4096,)),
        ("model.norm.weight", (4096,)), ("lm_head.weight", (32000, 4096)),
    ]
    assert all(name.endswith(".weight") for name, _ in got)  # no biases


def test_llama_7b_flops_are_2n_per_token_plus_attention():
    # Kaplan et al. 2020, Table 1: 2 FLOPs per matmul parameter per token (every weight but the
    # embedding lookup and the RMSNorm scales), plus attention's products, here 2·2·s²·d per layer.
    net, s, d = llama_7b(), 2048, 4096
    matmul = net.numel - 32000 * d - (2 * 32 + 1) * d
    assert net.flops == 2 * matmul * s + 32 * 4 * s * s * d
    assert layer(net, "lm_head").flops == 2 * d * 32000 * s


# --- torch modules ----------------------------------------------------------------------------------


def test_torch_is_not_imported_with_the_modules():
    code = "import sys, simulator.training.torchnet, simulator.training.zoo; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_sequential_names_shapes_and_flops():
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    measured = network_from_module(model, name="mlp", sample_input=torch.randn(1, 4), source="hand")
    assert pairs(measured) == [("0.weight", (3, 4)), ("0.bias", (3,)), ("2.weight", (2, 3)), ("2.bias", (2,))]
    assert [(item.name, item.flops) for item in measured.layers] == [("0", 2 * 4 * 3), ("2", 2 * 3 * 2)]
    assert (measured.name, measured.source, measured.sample) == ("mlp", "hand", "one sample: input (1, 4)")
    estimated = network_from_module(model, name="mlp")
    assert [item.flops for item in estimated.layers] == [2 * (12 + 3), 2 * (6 + 2)]
    assert estimated.sample == "one sample (FLOPs estimated: 2 per parameter)"


class TiedLM(nn.Module):
    """Embedding, a linear body, and an output head sharing the embedding's weight."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.body = nn.Linear(4, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.embed(ids)))


def test_tied_parameter_appears_once_and_its_head_keeps_its_flops():
    model = TiedLM()
    net = network_from_module(model, name="tied", sample_input=torch.zeros(1, 5, dtype=torch.long))
    assert pairs(net) == [(name, tuple(p.shape)) for name, p in model.named_parameters()]
    assert pairs(net) == [("embed.weight", (10, 4)), ("body.weight", (4, 4)), ("body.bias", (4,))]
    assert [(item.name, len(item.tensors), item.flops) for item in net.layers] == [
        ("embed", 1, 0), ("body", 2, 2 * 4 * 4 * 5), ("head", 0, 2 * 4 * 10 * 5)]


class Scores(nn.Module):
    """Two projections and a parameterless product of their outputs in the parent's forward."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(4, 4)
        self.k = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.q(x) @ self.k(x).transpose(-1, -2)


def test_flops_outside_layers_go_to_the_layer_that_last_ran():
    net = network_from_module(Scores(), name="scores", sample_input=torch.randn(1, 5, 4))
    # q: 2·4·4·5; k the same plus the (5×4)·(4×5) product, 2·5·4·5, which ran after it.
    assert [(item.name, item.flops) for item in net.layers] == [("q", 160), ("k", 160 + 200)]


class TwoInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 2)
        self.b = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.a(x) + self.b(y)


def test_tuple_sample_is_the_positional_arguments():
    net = network_from_module(TwoInputs(), name="two", sample_input=(torch.randn(1, 3), torch.randn(1, 4)))
    assert [(item.name, item.flops) for item in net.layers] == [("a", 2 * 3 * 2), ("b", 2 * 4 * 2)]
    assert net.sample == "one sample: input (1, 3), (1, 4)"


def test_convolution_flops_and_batchnorm_left_as_it_was():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8))
    net = network_from_module(model, name="conv", sample_input=torch.randn(1, 3, 8, 8))
    assert pairs(net) == [("0.weight", (8, 3, 3, 3)), ("1.weight", (8,)), ("1.bias", (8,))]  # no buffers
    assert [item.flops for item in net.layers] == [2 * 3 * 3 * 3 * 8 * 6 * 6, 0]
    assert model.training and model[1].training
    assert int(model[1].num_batches_tracked) == 0


def test_module_without_parameters_is_refused():
    with pytest.raises(ValueError) as raised:
        network_from_module(nn.ReLU(), name="relu")
    assert str(raised.value) == ("relu: the module has no parameters, so data-parallel training has no "
                                 "gradients to synchronise")


def test_forward_that_fails_on_the_sample_is_a_value_error():
    model = nn.Sequential(nn.Linear(4, 3))
    with pytest.raises(ValueError, match=r"^mlp: the forward pass on an input \(1, 5\) failed: RuntimeError"):
        network_from_module(model, name="mlp", sample_input=torch.randn(1, 5))
    assert model.training


# --- the model-parallel presets and their shapes ----------------------------------------------------


@pytest.mark.parametrize("name", network_names())
def test_a_transformers_shape_counts_exactly_what_its_network_holds(name):
    net = NETWORKS[name]()
    if name in ("resnet50", "bert_large"):  # not decoders: data parallelism only
        assert net.shape is None
        return
    assert net.shape is not None
    assert net.numel == net.shape.params
    # The zoo counts FLOPs as Transformer does (every term a whole number below 2^53: exact).
    assert net.flops == net.shape.flops_per_token * net.shape.sequence


def test_shapes_leave_the_existing_presets_as_they_were():
    xl, llama = gpt2_xl(sequence=512), llama_7b()
    assert (xl.shape.sequence, xl.shape.positions, xl.shape.tied, xl.shape.bias, xl.shape.gated) == (
        512, 1024, True, True, False)
    assert xl.numel == 1_557_611_200  # the 1024-row position table whatever the sequence
    assert (llama.shape.ffn, llama.shape.kv_heads, llama.shape.positions) == (11008, 32, 0)


def test_llama2_70b_by_hand():
    net, d, kv, ffn = llama2_70b(), 8192, 8 * 128, 28672
    block = 2 * d * d + 2 * d * kv + 3 * d * ffn + 2 * d
    assert block == 855_654_400
    assert net.numel == 80 * block + 2 * 32000 * d + d == 68_976_648_192
    assert pairs(net)[1:8] == [
        ("model.layers.0.self_attn.q_proj.weight", (8192, 8192)),
        ("model.layers.0.self_attn.k_proj.weight", (1024, 8192)),  # 8 key/value heads of 128
        ("model.layers.0.self_attn.v_proj.weight", (1024, 8192)),
        ("model.layers.0.self_attn.o_proj.weight", (8192, 8192)),
        ("model.layers.0.mlp.gate_proj.weight", (28672, 8192)),
        ("model.layers.0.mlp.up_proj.weight", (28672, 8192)),
        ("model.layers.0.mlp.down_proj.weight", (8192, 28672)),
    ]
    assert pairs(net)[-1] == ("lm_head.weight", (32000, 8192))
    s = 4096
    assert layer(net, "model.layers.0.self_attn.k_proj").flops == 2 * d * kv * s
    # GQA: every query head still scores all s keys, 2·2·s²·d per layer.
    assert layer(net, "model.layers.0.self_attn.o_proj").flops == 2 * d * d * s + 4 * s * s * d


def test_mixtral_8x7b_by_hand_every_expert_held_two_run():
    net, d, kv, ffn, s = mixtral_8x7b(), 4096, 8 * 128, 14336, 4096
    block = 2 * d * d + 2 * d * kv + d * 8 + 8 * 3 * d * ffn + 2 * d
    assert block == 1_451_270_144
    assert net.numel == 32 * block + 2 * 32000 * d + d == 46_702_792_704
    names = layer_names(net, "model.layers.3.")
    assert names[:6] == ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                         "self_attn.o_proj", "block_sparse_moe.gate", "block_sparse_moe.experts.0.w1"]
    assert names[-5:] == ["block_sparse_moe.experts.7.w1", "block_sparse_moe.experts.7.w2",
                          "block_sparse_moe.experts.7.w3", "input_layernorm", "post_attention_layernorm"]
    assert len(names) == 4 + 1 + 8 * 3 + 2
    assert layer(net, "model.layers.3.block_sparse_moe.gate").tensors[0].shape == (8, 4096)
    assert layer(net, "model.layers.3.block_sparse_moe.experts.5.w2").tensors[0].shape == (4096, 14336)
    # Each expert sees 2/8 of the tokens; the layer's MLP costs the 2 experts a token runs.
    assert layer(net, "model.layers.3.block_sparse_moe.experts.5.w1").flops == 2 * d * ffn * s / 4
    experts = sum(item.flops for item in net.layers if ".experts." in item.name)
    assert experts == 32 * 2 * (3 * 2 * d * ffn * s)
    assert layer(net, "model.layers.3.block_sparse_moe.gate").flops == 2 * d * 8 * s


def test_gpt3_175b_against_brown_and_narayanan():
    net, layers, h, v, s = gpt3_175b(), 96, 12288, 51200, 2048
    # Narayanan et al. 2021, §5.1: P = 12·l·h²·(1 + 13/12h + (V + s)/12lh), plus the final
    # LayerNorm (2h) the formula leaves out.
    assert 12 * layers * h * h + 13 * layers * h + (v + s) * h + 2 * h == net.numel == 174_615_846_912
    # Narayanan's forward FLOPs, 24·s·l·h²·(1 + s/6h) + 2·s·h·V, multiplied out (exact).
    assert net.flops == 24 * s * layers * h * h + 4 * s * s * layers * h + 2 * s * h * v
    assert pairs(net)[:10] == [
        ("embedding.word_embeddings.weight", (51200, 12288)),
        ("embedding.position_embeddings.weight", (2048, 12288)),
        ("decoder.layers.0.input_layernorm.weight", (12288,)),
        ("decoder.layers.0.input_layernorm.bias", (12288,)),
        ("decoder.layers.0.self_attention.linear_proj.weight", (12288, 12288)),
        ("decoder.layers.0.self_attention.linear_proj.bias", (12288,)),
        ("decoder.layers.0.self_attention.linear_qkv.weight", (36864, 12288)),
        ("decoder.layers.0.self_attention.linear_qkv.bias", (36864,)),
        ("decoder.layers.0.pre_mlp_layernorm.weight", (12288,)),
        ("decoder.layers.0.pre_mlp_layernorm.bias", (12288,)),
    ]
    assert pairs(net)[-4:] == [
        ("decoder.layers.95.mlp.linear_fc2.weight", (12288, 49152)),
        ("decoder.layers.95.mlp.linear_fc2.bias", (12288,)),
        ("decoder.final_layernorm.weight", (12288,)), ("decoder.final_layernorm.bias", (12288,)),
    ]
    head = net.layers[-1]
    assert (head.name, head.tensors, head.flops) == ("output_layer", (), 2 * h * v * s)  # tied
    with pytest.raises(ValueError, match=r"sequence 2049 out of range \(1\.\.2048 tokens\)"):
        gpt3_175b(sequence=2049)


def test_megatron_naming_of_a_gated_gqa_mixture():
    shape = Transformer(layers=2, hidden=64, heads=4, kv_heads=2, ffn=96, vocab=100, sequence=16,
                        gated=True, bias=True, experts=4, top_k=2)
    net = megatron_gpt("small", shape, source="hand")
    assert net.numel == shape.params and net.flops == shape.flops_per_token * 16
    assert layer_names(net, "decoder.layers.1.")[:6] == [
        "input_layernorm", "self_attention.linear_proj", "self_attention.linear_qkv",
        "pre_mlp_layernorm", "mlp.router", "mlp.experts.local_experts.0.linear_fc1"]
    assert layer(net, "decoder.layers.1.self_attention.linear_qkv").tensors[0].shape == (64 + 2 * 32, 64)
    fc1 = layer(net, "decoder.layers.1.mlp.experts.local_experts.3.linear_fc1")
    assert [t.shape for t in fc1.tensors] == [(192, 64), (192,)]  # gate and up fused: 2·ffn rows
    assert fc1.flops == 2 * 64 * 192 * 16 * 2 / 4
    assert [t.shape for t in layer(net, "decoder.layers.1.mlp.router").tensors] == [(4, 64)]
    assert pairs(net)[-1] == ("output_layer.weight", (100, 64))  # untied
    assert "embedding.position_embeddings" not in [item.name for item in net.layers]  # rotary
