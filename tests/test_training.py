"""Data-parallel training steps (issue 11): DDP's buckets, the step's two streams, the gradients'
averages checked with numpy, the sweeps, the files and figures, and the training section's
errors."""

import json
import math
import random

import numpy as np
import pandas as pd
import pytest
import torch
import torch.distributed as dist
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.cli import main
from simulator.errors import InputError
from simulator.output.training import STEP_COLUMNS, buckets_frame, format_training, steps_frame
from simulator.output.training_figure import sweeps_figure, timeline_figure
from simulator.runner import simulate
from simulator.scenario import Imports
from simulator.trainer import train
from simulator.training.buckets import Bucket, MiB, assign_buckets
from simulator.training.timeline import step_timeline
from simulator.version import __version__

SWITCH = {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s", "latency": "1us"}
MLP = {"name": "mlp", "layers": [
    {"name": "fc1", "params": {"fc1.weight": [1024, 512], "fc1.bias": [1024]}, "backward": "2ms"},
    {"name": "fc2", "params": {"fc2.weight": [512, 1024], "fc2.bias": [512]}, "backward": "2ms"},
    {"name": "fc3", "params": {"fc3.weight": [10, 512], "fc3.bias": [10]}, "backward": "1ms"},
]}


def scenario(**training):
    base = {"topology": SWITCH, "algorithms": ["ring"],
            "training": {"model": MLP, "batch": 8, "optimizer": "1ms", **training}}
    return base


def test_buckets_on_a_hand_example_are_ddps():
    # Registration order a, b, c, d of 0.4, 0.8, 0.6 and 2 MB; backward makes d ready first.
    # The first bucket closes at 1 MiB or more: d alone (2 MB). The rest, c b a = 1.8 MB, stay
    # under the 2 MiB cap and end in one bucket.
    buckets = assign_buckets([400_000, 800_000, 600_000, 2_000_000], cap=2 * MiB)
    assert buckets == (Bucket(0, (3,), 2_000_000, MiB), Bucket(1, (2, 1, 0), 1_800_000, 2 * MiB))
    # A small gradient last in registration fills the first bucket until it reaches 1 MiB.
    buckets = assign_buckets([4 * MiB, 3 * MiB, 300_000, 1000], cap=5 * MiB)
    assert [b.tensors for b in buckets] == [(3, 2, 1), (0,)]
    assert [b.nbytes for b in buckets] == [3 * MiB + 301_000, 4 * MiB]
    # bucket_cap_mb set by a user: no small first bucket (first=None)
    assert [b.tensors for b in assign_buckets([MiB, MiB, MiB], cap=2 * MiB, first=None)] == [
        (2, 1), (0,)]


def test_buckets_equal_pytorchs_own_assignment():
    # torch.distributed's own function, called as DDP's rebuild_buckets does after the first
    # iteration: parameters in the order their gradients became ready (reverse registration),
    # limits [_DEFAULT_FIRST_BUCKET_BYTES, bucket_cap].
    assert MiB == dist._DEFAULT_FIRST_BUCKET_BYTES
    rng = random.Random(5)
    for _ in range(200):
        count = rng.randint(1, 30)
        elements = [rng.choice([1, 100, 60_000, 300_000, 2_000_000]) for _ in range(count)]
        cap = rng.choice([MiB, 5 * MiB, 25 * MiB])
        order = list(reversed(range(count)))
        theirs, limits = dist._compute_bucket_assignment_by_size(
            [torch.empty(elements[i]) for i in order], [MiB, cap], [False] * count, order)
        ours = assign_buckets([4 * n for n in elements], cap=cap)
        assert [list(b.tensors) for b in ours] == theirs
        assert [b.limit for b in ours] == limits


def test_timeline_with_a_free_network_is_the_compute():
    layers = ["a", "b", "c"]
    timeline = step_timeline(layers, [1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0, 1, 2],
                             [Bucket(0, (2,), 8, 8), Bucket(1, (1, 0), 8, 8)], [0.0, 0.0], 0.5)
    assert timeline.step_s == timeline.compute_s == 18.5
    assert timeline.exposed_s == 0.0


def test_timeline_with_free_compute_is_the_optimizer_after_the_allreduces():
    timeline = step_timeline(["a", "b"], [0.0, 0.0], [0.0, 0.0], [0, 1],
                             [Bucket(0, (1,), 8, 8), Bucket(1, (0,), 8, 8)], [3.0, 1.5], 0.25)
    assert timeline.step_s == 3.0 + 1.5 + 0.25
    assert [(i.start_s, i.end_s) for i in timeline.communication] == [(0.0, 3.0), (3.0, 4.5)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 5), min_size=1, max_size=8), st.data())
def test_overlap_never_makes_a_step_slower(backward, data):
    layers = len(backward)
    forward = [b / 2 for b in backward]
    sizes = [data.draw(st.integers(1, 3 * MiB)) for _ in range(layers)]
    buckets = assign_buckets(sizes, cap=data.draw(st.sampled_from([MiB, 2 * MiB, 4 * MiB])))
    comm = [data.draw(st.floats(0, 5)) for _ in buckets]
    steps = [step_timeline([str(i) for i in range(layers)], forward, backward, list(range(layers)),
                           buckets, comm, 0.1, overlap=overlap).step_s for overlap in (True, False)]
    assert steps[0] <= steps[1] + 1e-12
    # and with overlap the step is never shorter than its compute, nor than its communication
    with_overlap = step_timeline([str(i) for i in range(layers)], forward, backward,
                                 list(range(layers)), buckets, comm, 0.1)
    assert with_overlap.step_s >= max(with_overlap.compute_s, sum(comm) + 0.1) - 1e-12


def test_a_step_with_free_compute_is_the_optimizer_plus_the_allreduces_in_sequence():
    training = train(scenario(gpu="free"))
    step = training.step
    assert (step.forward_s, step.backward_s, step.optimizer_s) == (0.0, 0.0, 1e-3)
    # each bucket's allreduce is the ring's time at that size on this switch (a plain run)
    sizes = [b.nbytes for b in step.buckets]
    plain = simulate({"topology": SWITCH, "algorithms": ["ring"], "sizes": sorted(set(sizes))})
    time_of = dict(zip(plain.size_bytes, plain.sim_time_s, strict=True))
    assert [b.time_s for b in step.buckets] == [time_of[size] for size in sizes]
    assert step.step_s == pytest.approx(1e-3 + sum(time_of[size] for size in sizes), rel=1e-12)
    # ... and the ring's closed form, exact on a switch
    assert [b.time_s for b in step.buckets] == pytest.approx([b.model_time_s for b in step.buckets],
                                                             rel=1e-12)


def test_one_gpu_steps_in_its_compute_time():
    one = dict(scenario(), topology={**SWITCH, "ranks": 1})
    step = train(one).step
    assert step.communication_s == 0.0
    assert step.step_s == step.compute_s == pytest.approx(2.5e-3 + 5e-3 + 1e-3, rel=1e-12)
    assert step.efficiency == 1.0


def test_the_step_from_given_layer_times():
    # backward 2 + 2 + 1 ms, forward half of each (given backward only), optimizer 1 ms; the
    # allreduces (MLP gradients of ~4 MB in 2 buckets on 25 GB/s) overlap the backward pass
    step = train(scenario()).step
    assert step.backward_s == pytest.approx(5e-3, rel=1e-12)
    assert step.forward_s == pytest.approx(2.5e-3, rel=1e-12)
    assert step.compute_s == pytest.approx(8.5e-3, rel=1e-12)
    assert step.exposed_s == pytest.approx(step.step_s - step.compute_s, rel=1e-12)
    assert step.efficiency == pytest.approx(step.compute_s / step.step_s, rel=1e-12)
    # fc3 (10×512 + 10 = 5,130 × 4 B) is ready first, after 1 ms of backward, then fc2 ...
    assert [b.tensors for b in step.buckets] == [4, 2]
    assert step.buckets[0].ready_s == pytest.approx(2.5e-3 + 1e-3 + 2e-3, rel=1e-12)


@pytest.mark.parametrize("ranks", [8, 3, 6])
def test_gradients_end_averaged_and_identical_on_every_rank(ranks):
    # a proxy big enough for every element of the MLP's 1,055,242 gradients
    training = train(dict(scenario(), topology={**SWITCH, "ranks": ranks}),
                     proxy_elements=1 << 20)
    step = training.step
    assert step.verified is True and step.identical is True and step.whole is True
    assert step.checked_tensors == 6
    # gradients drawn as p × small multiples of 2^-6: DDP's division and every sum are exact
    assert step.max_abs_error == 0.0


def test_a_proxy_checks_the_gradients_it_holds():
    # the default proxy keeps 65,536 of the first bucket's 529,930 elements: fc3.bias's 10
    # gradients fall between two of them, the other five tensors are checked; the table marks
    # the step ok* as a run marks its proxied points
    training = train(scenario())
    step = training.step
    assert (step.verified, step.identical, step.checked_tensors, step.whole) == (True, True, 5,
                                                                                  False)
    assert "      ok*  ring ×2" in format_training(training)


def test_buckets_of_one_size_share_one_verified_run(monkeypatch):
    # Four identical layers of 2 MiB gradients with a 2 MiB cap (no small first bucket): four
    # buckets of 2,097,152 bytes. The first is simulated with its own gradients and checked;
    # the other three share that run (issue 36), so the fabric runs once, and the check covers
    # the first bucket's two tensors.
    import simulator.trainer as trainer

    layers = [{"name": f"l{i}", "params": {f"l{i}.weight": [512, 1023], f"l{i}.bias": [512]},
               "backward": "1ms"} for i in range(4)]
    calls = []
    real = trainer.collective_run

    def counted(*args, **kwargs):
        calls.append(args[3])
        return real(*args, **kwargs)

    monkeypatch.setattr(trainer, "collective_run", counted)
    training = train(scenario(model={"name": "same", "layers": layers}, bucket_cap="2MiB",
                              first_bucket="cap"), proxy_elements=1 << 20)
    step = training.step
    assert [b.nbytes for b in step.buckets] == [2 * MiB] * 4
    assert calls == [2 * MiB]
    assert len({(b.time_s, b.algorithm, b.verified) for b in step.buckets}) == 1
    assert (step.verified, step.identical, step.checked_tensors, step.whole) == (True, True, 2,
                                                                                  True)


def test_averaged_gradients_against_numpy_by_hand():
    # The bucket's data path as DDP takes it, spelled out once with numpy: g / p on each rank,
    # the simulated allreduce sums them; every rank then holds mean(g) exactly (p = 4).
    from simulator.engine.payload import make_inputs
    from simulator.model.reduction import ReduceOp
    from simulator.plan import as_scenario, plan_point, prepare
    from simulator.runner import run_point

    plain = as_scenario({"topology": SWITCH, "algorithms": ["ring"], "sizes": [4096]})
    setup = prepare(plain)
    payload = plan_point(plain, setup, plain.algorithm("ring"), 4096, plain.run).payload
    gradients = make_inputs(np.random.default_rng(7), 4, payload, ReduceOp.SUM)
    buffers = gradients / np.float32(4)
    run_point(plain, "ring", 4096, setup=setup, inputs=buffers)
    assert np.array_equal(buffers, np.broadcast_to(gradients.mean(axis=0, dtype=np.float64)
                                                   .astype(np.float32), buffers.shape))


def test_sweeps_rerun_the_step_per_bucket_cap_and_gpu_count():
    # the MLP's gradients: fc3 and fc2 (2.1 MB) then fc1 (2.1 MB); without the small first
    # bucket, 1 MiB caps make two buckets and 100 MiB one
    training = train(scenario(first_bucket="cap", sweep={"bucket_cap": ["1MiB", "100MiB"],
                                                         "topology": {"ranks": [2, 4, 8]}}))
    assert [s.bucket_cap for s in training.cap_sweep] == [MiB, 100 * MiB]
    assert [len(s.buckets) for s in training.cap_sweep] == [2, 1]
    assert [s.ranks for s in training.scale_sweep] == [2, 4, 8]
    assert all(s.verified is None for s in training.cap_sweep + training.scale_sweep)
    # the sweep's 4-rank step at the scenario's cap is the scenario's own step
    assert training.scale_sweep[1].step_s == training.step.step_s
    # one bucket at the end cannot overlap: its whole allreduce is exposed
    last = training.cap_sweep[1]
    assert last.exposed_s == pytest.approx(last.buckets[0].time_s, rel=1e-12)


def test_nccl_choice_gives_each_bucket_nccls_pick():
    training = train({"topology": {"preset": "dgx_h100"}, "algorithms": "auto",
                      "training": {"model": MLP, "batch": 8, "bucket_cap": "1MiB"}})
    # NCCL's tuner on one DGX H100: ring/LL for small buffers (docs/fidelity.md)
    assert {(b.algorithm, b.protocol) for b in training.step.buckets} <= {
        ("ring", "LL"), ("ring", "LL128"), ("ring", "Simple"), ("nvls", "Simple")}
    assert training.policy.startswith("NCCL's choice")


def test_nccl_choice_on_registered_buffers_gives_each_bucket_nccls_symmetric_kernel():
    # issue 36: a step's auto runs what a run of sizes runs (simulator.plan.nccl_runs); on
    # symmetric windows NCCL launches its multicast two-shot for both ~2 MiB buckets ahead of its
    # tuner (which picks NVLS: the test above), and each bucket takes the time that point takes
    fields = {"topology": {"preset": "dgx_h100"}, "algorithms": "auto",
              "nccl": {"symmetric": True}}
    training = train({**fields, "training": {"model": MLP, "batch": 8, "bucket_cap": "1MiB"}})
    buckets = training.step.buckets
    assert [(b.nbytes, b.algorithm, b.protocol) for b in buckets] == [
        (2119720, "two_shot_multicast", "Simple"), (2101248, "two_shot_multicast", "Simple")]
    assert training.step.verified is True
    run = simulate({**fields, "sizes": [b.nbytes for b in buckets]})
    picks = run[run.nccl_pick.astype(bool)].set_index("size_bytes")
    assert [b.time_s for b in buckets] == [picks.sim_time_s[b.nbytes] for b in buckets]
    assert set(picks.algorithm) == {"two_shot_multicast"}


def test_files_and_figures_hold_the_steps_values(tmp_path):
    path = tmp_path / "mlp.yaml"
    path.write_text("topology: {kind: switch, ranks: 4, bandwidth: 25GB/s, latency: 1us}\n"
                    "algorithms: [ring]\n"
                    "training:\n"
                    "  model: {name: mlp, layers: [{name: fc, params: {w: [1024, 1024]}, "
                    "backward: 3ms}, {name: out, params: {v: [10, 1024]}, flops: 1e6}]}\n"
                    "  batch: 4\n  gpu: {flops: 1TFLOP/s}\n  optimizer: sgd\n"
                    "  sweep: {bucket_cap: [1MiB, 4MiB]}\n")
    assert main(["run", str(path), "--output", str(tmp_path / "out"), "--quiet"]) == 0
    steps = pd.read_csv(tmp_path / "out" / "mlp-steps.csv")
    assert tuple(steps.columns) == STEP_COLUMNS
    assert list(steps.sweep.fillna("")) == ["", "bucket_cap", "bucket_cap"]
    training = train(path)
    assert steps.step_s.tolist() == pytest.approx(steps_frame(training).step_s.tolist(), rel=1e-15)
    # out: 2·1e6 FLOPs·4 samples at 1 TFLOP/s forward; sgd: 12 B per parameter at 2 TB/s
    assert steps.forward_s[0] == pytest.approx(1.5e-3 + 4e6 / 1e12, rel=1e-12)
    assert steps.optimizer_s[0] == pytest.approx((1024 * 1024 + 10240) * 12 / 2e12, rel=1e-12)
    buckets = pd.read_csv(tmp_path / "out" / "mlp-buckets.csv")
    assert len(buckets) == len(buckets_frame(training))
    figure = timeline_figure(training)
    bars = [p for p in figure.axes[0].collections if p.get_label() in ("allreduce", "")]
    extents = sorted((round(path.vertices[:, 0].min(), 9), round(path.vertices[:, 0].max(), 9))
                     for bar in figure.axes[0].collections for path in bar.get_paths()
                     if abs(path.vertices[:, 1].min() - (-0.35)) < 1e-9)
    own = buckets[buckets.sweep.isna()]
    assert extents == sorted((round(a * 1e3, 9), round(b * 1e3, 9))
                             for a, b in zip(own.start_s, own.end_s, strict=True))
    assert bars
    sweep_bars = sweeps_figure(training).axes[0].patches
    assert [round(p.get_height(), 9) for p in sweep_bars[:2]] == [
        round(v * 1e3, 9) for v in steps.compute_s[1:]]
    assert (tmp_path / "out" / "mlp-timeline.png").stat().st_size > 10_000
    assert (tmp_path / "out" / "mlp-sweeps.png").stat().st_size > 10_000
    text = format_training(training)
    assert "# bucket-cap sweep on 4 GPUs" in text and "ring ×" in text


@pytest.mark.parametrize(("training", "message"), [
    ({"model": "resnet", "batch": 1},
     "x.yaml: training.model: expected a model preset (resnet50, bert_large, gpt2_xl, "
     "llama_7b, llama2_70b, gpt3_175b, mixtral_8x7b), got 'resnet'; did you mean 'resnet50'?"),
    ({"model": "resnet50", "batch": 0}, "x.yaml: training.batch: expected a whole number ≥ 1, got 0"),
    ({"model": "resnet50"}, "x.yaml: training.batch: required but missing"),
    ({"model": "resnet50", "batch": 1, "gpu": "k80"},
     "x.yaml: training.gpu: expected a GPU (v100, a100, h100, b200, gb200, free), got 'k80'"),
    ({"model": "resnet50", "batch": 1, "optimizer": "lamb"},
     "x.yaml: training.optimizer: expected one of sgd, momentum, adam or a time like '2ms', "
     "got 'lamb'"),
    ({"model": {"preset": "bert_large", "sequence": 4096}, "batch": 1},
     "x.yaml: training.model.sequence: sequence 4096 out of range (1..512 tokens)"),
    ({"model": "resnet50", "batch": 1, "sweep": {"topology": {"nodes": [1, 2], "ranks": [4]}}},
     "x.yaml: training.sweep.topology: expected one topology parameter and its values, like "
     "{nodes: [1, 2, 4]}, got {'nodes': [1, 2], 'ranks': [4]}"),
    ({"model": {"name": "m", "layers": [{"name": "a", "params": {"w": [0, 3]}}]}, "batch": 1},
     "x.yaml: training.model.layers[0].params.w: expected a shape, a list of whole numbers ≥ 1 "
     "like [1024, 4096], got [0, 3]"),
])
def test_training_section_errors(training, message):
    from simulator.scenario.parse import scenario_from_dict

    with pytest.raises(InputError) as caught:
        scenario_from_dict({"topology": SWITCH, "training": training}, source="x.yaml")
    assert str(caught.value).splitlines()[0].startswith(message)


def test_sizes_and_training_do_not_mix_and_sweeps_name_real_parameters():
    from simulator.scenario.parse import scenario_from_dict

    with pytest.raises(InputError, match=r"x.yaml: sizes: expected no sizes with training"):
        scenario_from_dict({"topology": SWITCH, "sizes": [4096],
                            "training": {"model": MLP, "batch": 1}}, source="x.yaml")
    with pytest.raises(InputError) as caught:
        train(scenario_from_dict({"topology": SWITCH, "training": {
            "model": MLP, "batch": 1, "sweep": {"topology": {"nodes": [2]}}}}, source="x.yaml"))
    assert str(caught.value) == ("x.yaml: training.sweep.topology.nodes: expected a count of "
                                 "topology switch to scale the GPUs, one of ranks")


def test_a_step_is_deterministic():
    first, second = train(scenario()), train(scenario())
    assert first.step == second.step
    assert not math.isnan(first.step.step_s)


def test_a_torch_module_from_the_scenario(tmp_path, monkeypatch):
    # a factory in the user's own package: its parameters, their order and the FLOPs measured
    # on one sample of the given input shape (2 · in · out per Linear)
    (tmp_path / "mynet.py").write_text(
        "import torch\n"
        "def build():\n"
        "    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),\n"
        "                               torch.nn.Linear(256, 10))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    training = train({"topology": SWITCH, "algorithms": ["ring"], "training": {
        "model": {"torch": "mynet:build", "input": [64]}, "batch": 16,
        "gpu": {"flops": "1TFLOP/s"}, "optimizer": "0s"}}, imports=Imports.ALLOW)
    step = training.step
    assert training.spec.network.numel == 64 * 256 + 256 + 256 * 10 + 10
    assert [t.name for t in training.spec.network.tensors] == ["0.weight", "0.bias", "2.weight",
                                                               "2.bias"]
    assert step.forward_s == pytest.approx(16 * 2 * (64 * 256 + 256 * 10) / 1e12, rel=1e-12)
    assert step.verified is True and len(step.buckets) == 1


def test_a_torch_factory_that_cannot_load_is_one_line(tmp_path):
    from simulator.scenario.parse import scenario_from_dict

    with pytest.raises(InputError) as caught:
        scenario_from_dict({"topology": SWITCH, "training": {
            "model": {"torch": "no_such_module_here:build"}, "batch": 1}}, source="x.yaml",
            imports=Imports.ALLOW)
    assert str(caught.value) == ("x.yaml: training.model.torch: cannot load "
                                 "'no_such_module_here:build': No module named "
                                 "'no_such_module_here'; the module is looked for on Python's "
                                 "path (the current directory under python -m, then "
                                 "PYTHONPATH), not beside the scenario")


def test_parquet_tables_equal_the_csv(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("topology: {kind: switch, ranks: 2, bandwidth: 25GB/s, latency: 1us}\n"
                    "algorithms: [ring]\n"
                    "training: {model: {name: m, layers: [{name: a, params: {w: [256, 256]}, "
                    "backward: 1ms}]}, batch: 1}\n")
    assert main(["run", str(path), "--output", str(tmp_path), "--quiet",
                 "--format", "csv,parquet"]) == 0
    for table in ("steps", "buckets"):
        csv = pd.read_csv(tmp_path / f"t-{table}.csv")
        parquet = pd.read_parquet(tmp_path / f"t-{table}.parquet")
        column = "step_s" if table == "steps" else "time_s"
        assert list(csv.columns) == list(parquet.columns)
        assert csv[column].tolist() == pytest.approx(parquet[column].tolist(), rel=1e-15)
    assert not (tmp_path / "t-timeline.png").exists()


def test_a_training_run_writes_every_format_it_is_asked_for(tmp_path, capsys):
    # one registry of writers serves training runs too: --format json,parquet writes the tables
    # as CSV (always) and Parquet, and the settings as JSON, with the step's own settings in it
    path = tmp_path / "t.yaml"
    path.write_text("topology: {kind: switch, ranks: 2, bandwidth: 25GB/s, latency: 1us}\n"
                    "algorithms: [ring]\n"
                    "training: {model: {name: m, layers: [{name: a, params: {w: [256, 256]}, "
                    "backward: 1ms}]}, batch: 1, sweep: {bucket_cap: [1MiB]}}\n")
    out = tmp_path / "out"
    assert main(["run", str(path), "--output", str(out), "--quiet", "--format", "json,parquet"]) == 0
    names = ["t-steps.csv", "t-buckets.csv", "t.json", "t-steps.parquet", "t-buckets.parquet"]
    assert sorted(p.name for p in out.iterdir()) == sorted(names)
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"# results: {', '.join(str(out / name) for name in names)}")
    described = json.loads((out / "t.json").read_text())
    assert described["simulator"] == {"name": "allreduce-sim", "version": __version__}
    assert "sizes" not in described["scenario"]
    # the defaults made explicit: 256 x 256 = 65,536 parameters; an h100 sustains 52 % of its
    # 989 TFLOP/s (514.28) and streams the optimizer at 3.35 TB/s; adam; DDP's 25 MiB buckets
    # with a 1 MiB first one (the cap is not set; only the swept steps set it)
    assert described["scenario"]["training"] == {
        "model": {"name": "m", "parameters": 65536, "source": "given"}, "batch": 1,
        "gpu": {"name": "h100", "flops": "514.28TFLOP/s", "memory_bandwidth": "3.35TB/s"},
        "precision": "mixed", "optimizer": "adam", "bucket_cap": "25MiB", "first_bucket": "1MiB",
        "overlap": True, "sweep": {"bucket_cap": ["1MiB"]}}
    assert pd.read_parquet(out / "t-steps.parquet").step_s.tolist() == pd.read_csv(
        out / "t-steps.csv").step_s.tolist()


def test_a_training_scenario_is_not_a_sweep_of_sizes(tmp_path):
    message = ("<dict>: training: expected a scenario of sizes here: a training step runs with "
               "simulator.train() or python -m simulator run")
    with pytest.raises(InputError) as caught:
        simulate(scenario())
    assert str(caught.value) == message
    path = tmp_path / "t.yaml"
    path.write_text("topology: {kind: switch, ranks: 2, bandwidth: 25GB/s, latency: 1us}\n"
                    "training: {model: resnet50, batch: 1}\n")
    assert main(["sweep", str(path), "--workers", "1"]) == 2


def test_the_first_bucket_follows_ddp():
    # DDP: 1 MiB first bucket only with the default cap; bucket_cap_mb set: the first is the cap
    # (torch 2.13, _BucketCapacityConfig.create); a swept cap counts as set
    default = train(scenario()).step
    assert (default.bucket_cap, default.first_bucket) == (25 * MiB, MiB)
    given = train(scenario(bucket_cap="25MiB", sweep={"bucket_cap": ["2MiB"]}))
    assert (given.step.bucket_cap, given.step.first_bucket) == (25 * MiB, 25 * MiB)
    assert given.cap_sweep[0].first_bucket == 2 * MiB
    pinned = train(scenario(bucket_cap="2MiB", first_bucket="512KiB")).step
    assert pinned.first_bucket == 512 << 10


@pytest.mark.parametrize(("extra", "message"), [
    ({"op": "max"}, "x.yaml: op: expected sum with training (DDP divides the gradients by the "
                    "world size and sums them), got max"),
    ({"dtype": "int32"}, "x.yaml: dtype: expected a floating-point type with training "
                         "(gradients), got int32"),
    ({"collective": "broadcast"}, "x.yaml: collective: expected allreduce with training (DDP "
                                  "allreduces gradients), got broadcast"),
])
def test_training_needs_a_float_sum_allreduce(extra, message):
    from simulator.scenario.parse import scenario_from_dict

    with pytest.raises(InputError) as caught:
        scenario_from_dict({"topology": SWITCH, "training": {"model": MLP, "batch": 1}, **extra},
                           source="x.yaml")
    assert str(caught.value) == message


def test_a_bad_gpu_count_sweep_is_reported_before_any_step_runs():
    heard = []
    with pytest.raises(InputError) as caught:
        train(scenario(sweep={"topology": {"bandwidth": [1, 2]}}), progress=heard.append)
    assert str(caught.value) == ("<dict>: training.sweep.topology.bandwidth: expected a count "
                                 "of topology switch to scale the GPUs, one of ranks")
    assert heard == []


def test_factories_and_layer_lists_that_fail_are_one_line(tmp_path, monkeypatch):
    from simulator.scenario.parse import scenario_from_dict

    (tmp_path / "badnet.py").write_text("def build():\n    raise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cases = [({"torch": "badnet:build"},
              "x.yaml: training.model.torch: 'badnet:build' failed: RuntimeError: boom"),
             ({"torch": "torch.nn:Linear"},
              "x.yaml: training.model.torch: 'torch.nn:Linear' failed: TypeError: "),
             ({"layers": [{"name": "a", "params": {"w": [3]}}]},
              "x.yaml: training.model.name: required but missing"),
             ({"name": "m", "layers": [{"params": {"w": [3]}}]},
              "x.yaml: training.model.layers[0].name: required but missing")]
    for model, message in cases:
        with pytest.raises(InputError) as caught:
            scenario_from_dict({"topology": SWITCH, "training": {"model": model, "batch": 1}},
                               source="x.yaml", imports=Imports.ALLOW)
        assert str(caught.value).startswith(message), str(caught.value)


def test_frozen_parameters_have_no_gradients_to_allreduce():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    model[0].weight.requires_grad_(False)
    from simulator.training.torchnet import network_from_module

    network = network_from_module(model, name="frozen")
    assert [t.name for t in network.tensors] == ["0.bias", "1.weight", "1.bias"]


def test_a_link_lost_mid_step_says_nccl_would_abort(tmp_path, capsys):
    import json

    from simulator.model.faults.kind import in_flight_caveat

    path = tmp_path / "t.json"
    fault = {"kind": "link_down", "link": ["gpu1", "gpu2"], "at": "10us", "both": True}
    ring = {"kind": "ring", "ranks": 4, "bandwidth": "25GB/s", "latency": "1us"}  # a way round
    path.write_text(json.dumps({**scenario(), "topology": ring, "faults": [fault]}))
    assert main(["run", str(path), "--output", str(tmp_path / "out"), "--quiet",
                 "--no-plot"]) == 0
    assert capsys.readouterr().err == (
        f"{path}: {in_flight_caveat('link_down gpu1<->gpu2 at 10us')}\n")
