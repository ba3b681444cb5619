"""Parallel layouts (issue 39): the layout's communicators, the step's graph, communicators
sharing the fabric in one execution, today's DDP step to the bit, the pipeline's schedule worked
by hand with a straggler, and the section's one-line refusals."""

import math
from dataclasses import replace

import pytest

from simulator.engine.messages import Message, time_messages
from simulator.errors import InputError
from simulator.model.collective import Collective
from simulator.model.faults import Straggler
from simulator.output.chakra import write_chakra
from simulator.plan import prepare
from simulator.runner import settings_of
from simulator.scenario.parse import scenario_from_dict
from simulator.trainer import chakra_graph, train
from simulator.trainer.costs import StepCosts
from simulator.training.execute import execute
from simulator.training.graph import Group, Op, OpKind, Program, StepGraph
from simulator.training.layout import Parallelism, coordinates, groups
from simulator.training.transformer import Transformer
from tests.test_chakra import four_ranks, write

BANDWIDTH = 10e9  # the switch's links, bytes/s
MiB = 1 << 20


def _fabric(ranks: int):
    """A switch of ``ranks`` GPUs, 10 GB/s links of 1 us, and the costs of a step on it."""
    scenario = scenario_from_dict({
        "name": "fabric", "topology": {"kind": "switch", "ranks": ranks, "bandwidth": "10GB/s",
                                       "latency": "1us"},
        "sizes": ["1MiB"], "algorithms": ["ring"]})
    setup = prepare(scenario)
    costs = StepCosts(scenario, setup, settings_of(scenario), gpu="h100", sm_share=False)
    return setup, costs


def _run(graph: StepGraph, costs: StepCosts):
    """Execute ``graph`` with units as ranks (nothing folded)."""
    def demand(op, units, start):
        ranks = graph.group(op.group).ranks if op.kind is OpKind.COLLECTIVE else units
        return costs.demand(op, ranks, [ranks])
    return execute(graph, costs.capacity, demand)


def _messages(pairs: list[tuple[int, int]], ranks: int, nbytes: int) -> StepGraph:
    """Every (src, dst) message of ``pairs`` posted at 0, each receiver's receives in order."""
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    for src, dst in pairs:
        ops[src].append(Op(len(ops[src]), f"send {dst}", OpKind.SEND, nbytes=nbytes, peer=dst))
        ops[dst].append(Op(len(ops[dst]), f"recv {src}", OpKind.RECV, nbytes=nbytes, peer=src))
    return StepGraph(tuple(Program(r, tuple(o)) for r, o in enumerate(ops)), ())


def test_messages_on_disjoint_links_take_their_isolated_times():
    setup, costs = _fabric(3)
    execution = _run(_messages([(0, 1), (1, 2)], 3, 8 * MiB), costs)
    alone = time_messages(setup.machine, [Message(0, 1, 8 * MiB, 0.0)])[0]
    assert [s.end_s for s in execution.spans if s.kind is OpKind.SEND] == [alone, alone]


def test_messages_on_one_link_take_the_time_the_network_kernel_shares_it_in():
    # both cross switch -> gpu2: the engine's fabric, running both at once, says when they end
    setup, costs = _fabric(3)
    execution = _run(_messages([(0, 2), (1, 2)], 3, 8 * MiB), costs)
    both = time_messages(setup.machine, [Message(0, 2, 8 * MiB, 0.0),
                                         Message(1, 2, 8 * MiB, 0.0)])
    ends = [s.end_s for s in execution.spans if s.kind is OpKind.SEND]
    assert ends == pytest.approx(list(both), rel=1e-12)
    assert ends[0] == pytest.approx(2e-6 + 2 * 8 * MiB / BANDWIDTH, rel=1e-12)  # 2 hops of 1 us


def _collectives(groups_: tuple[tuple[int, ...], ...], ranks: int, nbytes: int) -> StepGraph:
    """One allreduce of ``nbytes`` on each communicator of ``groups_``, all issued at 0."""
    named = tuple(Group(f"g{i}", members) for i, members in enumerate(groups_))
    ops: list[list[Op]] = [[] for _ in range(ranks)]
    for group in named:
        for rank in group.ranks:
            ops[rank].append(Op(len(ops[rank]), group.name, OpKind.COLLECTIVE,
                                collective=Collective.ALLREDUCE, group=group.name,
                                nbytes=nbytes))
    return StepGraph(tuple(Program(r, tuple(o)) for r, o in enumerate(ops)), named)


def test_collectives_on_disjoint_links_take_their_simulated_times():
    _, costs = _fabric(4)
    execution = _run(_collectives(((0, 1), (2, 3)), 4, 8 * MiB), costs)
    alone = float(costs.result(Collective.ALLREDUCE, (0, 1), 8 * MiB, "g0").sim_time_s)
    assert {s.end_s for s in execution.spans} == {alone}


def test_collectives_on_one_link_share_its_transfer_time():
    # two 2-rank allreduces over gpu0 and gpu1 (two communicators, members in either order):
    # each ring moves 8 MiB over gpu0->switch->gpu1 and back, so alone its transfer part is
    # 8 MiB / 10 GB/s; sharing the links doubles that part and leaves the rest (its latency)
    _, costs = _fabric(2)
    execution = _run(_collectives(((0, 1), (1, 0)), 2, 8 * MiB), costs)
    alone = float(costs.result(Collective.ALLREDUCE, (0, 1), 8 * MiB, "g0").sim_time_s)
    transfer = 8 * MiB / BANDWIDTH
    assert {round(s.end_s, 15) for s in execution.spans} == {round(alone + transfer, 15)}


def test_the_layout_places_tp_innermost_then_ep_dp_and_pp_outermost():
    layout = Parallelism(tp=2, pp=2, dp=4, ep=2)
    named = {group.name: group.ranks for group in groups(layout)}
    assert named["tp:0:0"] == (0, 1) and named["tp:1:3"] == (14, 15)
    assert named["dp:0:1"] == (1, 3, 5, 7)  # the dense DP group: every EP rank and outer index
    assert named["ep:0:0:1"] == (4, 6) and named["edp:0:0:1"] == (2, 6)
    assert named["pp:1:2"] == (5, 13)
    assert coordinates(layout, 13) == coordinates(layout, 13)
    assert (coordinates(layout, 13).tp, coordinates(layout, 13).pp,
            coordinates(layout, 13).dp) == (1, 1, 2)


SMALL = {"transformer": {"layers": 4, "hidden": 256, "heads": 16, "ffn": 1024, "vocab": 512,
                         "sequence": 64}, "name": "small"}


def _scenario(parallelism, **training):
    return scenario_from_dict({
        "name": "p", "topology": {"preset": "dgx_h100", "nodes": 2}, "algorithms": "auto",
        "training": {"model": SMALL, "batch": 4, "gpu": "h100", "optimizer": "adam",
                     "parallelism": parallelism, **training}})


@pytest.mark.parametrize(("parallelism", "message"), [
    ({"tp": 4, "pp": 2, "dp": 4}, "training.parallelism: tp 4 × pp 2 × dp 4 = 32 GPUs, but the "
                                  "topology has 16"),
    ({"tp": 16}, "training.parallelism.tp: TP groups inside one node of 8 GPUs, got tp 16 placed "
                 "across nodes (say tp_across_nodes: true to mean it)"),
    ({"tp": 8, "pp": 2, "microbatches": 3}, "training.parallelism.microbatches: a divisor of the "
                                            "batch of 4 samples per replica, got 3"),
    ({"pp": 8}, "training.parallelism.pp: a split of the model's 4 layers: pp × chunks = 8 does "
                "not divide them"),
    ({"tp": 8, "pp": 2, "ep": 2}, "training.parallelism.ep: a divisor of dp 1 (expert parallelism "
                                  "is carved out of data parallelism, as in Megatron-Core), got 2"),
])
def test_a_layout_that_does_not_fit_the_machine_or_model_is_refused_in_one_line(parallelism,
                                                                                 message):
    with pytest.raises(InputError) as error:
        train(_scenario(parallelism))
    assert f"<dict>: {message}" in str(error.value).splitlines()


@pytest.mark.parametrize(("parallelism", "message"), [
    ({"zero": 4}, "training.parallelism.zero: expected a ZeRO stage 0, 1, 2 or 3, got 4"),
    ({"tp": 2, "pipeline": 2}, "training.parallelism.pipeline: unknown key; expected one of tp, "
                               "pp, dp, ep, zero, microbatches, schedule, chunks, "
                               "sequence_parallel, recompute, placement, tp_across_nodes, "
                               "imbalance, sm_contention, flash_attention"),
    ({"schedule": "gpipe"}, "training.parallelism.schedule: expected a pipeline schedule (1f1b, "
                            "interleaved), got 'gpipe'"),
    ({"imbalance": 0.5}, "training.parallelism.imbalance: expected a factor ≥ 1 (the busiest "
                         "rank's tokens over the mean), got 0.5"),
])
def test_a_bad_parallelism_field_is_one_line(parallelism, message):
    with pytest.raises(InputError) as error:
        _scenario(parallelism)
    assert str(error.value) == f"<dict>: {message}"


def test_plain_data_parallelism_is_todays_ddp_step_to_the_bit():
    base = {"name": "ddp", "topology": {"preset": "dgx_a100"}, "algorithms": "auto",
            "training": {"model": "resnet50", "batch": 32, "gpu": "a100",
                         "optimizer": "momentum"}}
    today = train(scenario_from_dict(base)).step
    spec = scenario_from_dict(base)
    assert spec.training is not None
    laid = train(replace(spec, training=replace(spec.training, parallelism=Parallelism(
        dp=8, sm_contention=False)))).step
    assert laid.step_s == today.step_s and laid.exposed_s == today.exposed_s
    assert [(i.start_s, i.end_s) for i in laid.timeline.compute] == [
        (i.start_s, i.end_s) for i in today.timeline.compute]
    assert laid.breakdown is not None and laid.breakdown.exposed_dp_s == today.exposed_s
    kernels = train(replace(spec, training=replace(spec.training, parallelism=Parallelism(
        dp=8)))).step
    assert kernels.step_s > today.step_s  # NCCL's kernels take SMs from the backward pass


def _pipeline(faults=()):
    """Two stages on two GPUs of a switch so fast that messages take no time; free
    optimizer; two micro-batches of one sequence."""
    return scenario_from_dict({
        "name": "pipe", "topology": {"kind": "switch", "ranks": 2, "bandwidth": "1000000GB/s",
                                     "latency": "0us"},
        "algorithms": ["ring"], "faults": list(faults),
        "training": {"model": SMALL, "batch": 2, "gpu": {"flops": "1TFLOP/s",
                                                          "memory_bandwidth": "1TB/s"},
                     "optimizer": "0ms", "parallelism": {"pp": 2, "microbatches": 2}}})


def _pipeline_of(ranks: int, parallelism: dict) -> object:
    """A pipeline of ``ranks`` stages on a switch whose messages take no time to speak of."""
    return scenario_from_dict({
        "name": "pipe", "topology": {"kind": "switch", "ranks": ranks,
                                     "bandwidth": "1000000GB/s", "latency": "0us"},
        "algorithms": ["ring"],
        "training": {"model": {**SMALL, "transformer": {**SMALL["transformer"], "layers": 8}},
                     "batch": 4, "gpu": {"flops": "1TFLOP/s", "memory_bandwidth": "1TB/s"},
                     "optimizer": "0ms", "parallelism": parallelism}})


def test_a_straggler_in_a_pipeline_stage_stalls_it_by_the_schedule_worked_by_hand():
    shape = Transformer(layers=4, hidden=256, heads=16, kv_heads=16, ffn=1024, vocab=512,
                        sequence=64, gated=False, bias=True, tied=True, positions=0)
    tokens = 64
    f = 2 * shape.layer_flops * tokens / 1e12  # a stage's forward: two layers
    h = shape.head_flops * tokens / 1e12       # the last stage's output projection
    # 1F1B, stage 0: F0 F1 B0 B1, stage 1: F0 B0 F1 B1 (backward = 2 × forward):
    #   stage 1 F0 [f, 2f+h], B0 [2f+h, 4f+3h], F1 [.., 5f+4h], B1 [.., 7f+6h];
    #   stage 0 B0 [4f+3h, 6f+3h], B1 [7f+6h, 9f+6h]: the step ends at 9f + 6h
    #   plus c for each message on the way: F0's and F1's activations, B1's gradient
    c = 64 * 256 * 2 / 1e15  # a micro-batch's activation (bf16) at the switch's 10^15 B/s
    healthy = train(_pipeline()).step
    assert healthy.step_s == pytest.approx(9 * f + 6 * h + 3 * c, rel=1e-12)
    # stage 1 entering 3f late starts F0 at 3f instead of f: every later pass of both stages
    # moves by 2f, the first f of the delay being hidden behind stage 0's first forward
    late = train(_pipeline([{"kind": "straggler", "rank": 1, "delay": f"{3 * f * 1e6}us"}])).step
    # (as many messages on the way: the activation's transfer starts when stage 1 posts its
    # receive at 3f, NCCL's point-to-point being a rendezvous)
    assert late.step_s == pytest.approx(9 * f + 6 * h + 2 * f + 3 * c, rel=1e-12)


def test_a_folded_step_equals_the_step_run_rank_by_rank():
    # a straggler of no delay makes the step run every rank; nothing else changes
    layout = {"tp": 2, "pp": 2, "microbatches": 2, "zero": 1}
    folded = train(_scenario(layout)).step
    unfolded = train(replace(_scenario(layout), faults=(Straggler(3, 0.0),))).step
    assert unfolded.step_s == pytest.approx(folded.step_s, rel=1e-12)
    assert folded.parallel is not None and len(folded.parallel.unit_ranks) == 2
    assert unfolded.parallel is not None and len(unfolded.parallel.unit_ranks) == 16


def test_tp_moves_two_allreduces_of_the_activation_per_layer_each_way():
    step = train(_scenario({"tp": 8, "pp": 2, "microbatches": 2})).step
    assert step.parallel is not None
    ops = step.parallel.graph.programs[0].ops
    tp = [op for op in ops if op.stream == "tp"]
    activation = 2 * 64 * 256 * 2  # a micro-batch of 2 sequences of 64 tokens, hidden 256, bf16
    assert {op.nbytes for op in tp} == {activation}
    # stage 0 of 2 (two layers): forward 2 × 2 + the embedding's; backward 2 × 2, by layer
    assert sorted(op.count for op in tp if op.name.startswith("forward")) == [5, 5]
    assert math.isclose(sum(op.count for op in tp), 2 * (5 + 4))


def test_a_step_written_as_chakra_traces_runs_back_to_the_same_step(tmp_path):
    layout = {"tp": 2, "pp": 2, "microbatches": 2, "zero": 1, "sequence_parallel": True}
    step = train(_scenario(layout)).step
    paths = write_chakra(chakra_graph(_scenario(layout)), tmp_path, prefix="small")
    assert len(paths) == 16
    traced = train(scenario_from_dict({
        "name": "traced", "topology": {"preset": "dgx_h100", "nodes": 2}, "algorithms": "auto",
        "training": {"chakra": str(tmp_path), "gpu": "h100"}})).step
    assert traced.step_s == pytest.approx(step.step_s, rel=1e-9)
    assert traced.breakdown is not None and step.breakdown is not None
    assert traced.breakdown.exposed_tp_s == pytest.approx(step.breakdown.exposed_tp_s, rel=1e-6)
    assert traced.breakdown.bubble_s == pytest.approx(step.breakdown.bubble_s, rel=1e-6)


def test_a_hand_written_four_rank_trace_runs_its_dependency_chain(tmp_path):
    # tests/test_chakra.py's trace: every rank computes 1.5 ms, allreduces 1 MiB over all four,
    # then rank 0 sends 4,096 bytes to rank 1, which then computes 2 ms, while ranks 2 and 3
    # all-gather 2,048 bytes each on their own communicator
    write(tmp_path, four_ranks())
    scenario = scenario_from_dict({
        "name": "four", "topology": {"kind": "switch", "ranks": 4, "bandwidth": "10GB/s",
                                     "latency": "1us"},
        "algorithms": ["ring"], "training": {"chakra": str(tmp_path)}})
    step = train(scenario).step
    setup, costs = _fabric(4)
    allreduce = float(costs.result(Collective.ALLREDUCE, (0, 1, 2, 3), 1 << 20, "0").sim_time_s)
    message = time_messages(setup.machine, [Message(0, 1, 4096, 0.0)])[0]
    assert step.step_s == pytest.approx(1.5e-3 + allreduce + message + 2e-3, rel=1e-12)
    assert step.breakdown is not None
    assert step.breakdown.compute_s == pytest.approx(3.5e-3, rel=1e-12)


def test_a_trace_of_other_ranks_than_the_machine_is_refused(tmp_path):
    write(tmp_path, four_ranks())
    with pytest.raises(InputError) as error:
        train(scenario_from_dict({"name": "x", "topology": {"preset": "dgx_h100"},
                                  "algorithms": "auto", "training": {"chakra": str(tmp_path)}}))
    assert str(error.value) == ("<dict>: training.chakra: traces of 4 ranks for topology "
                                "dgx_h100 of 8 GPUs: expected one trace per GPU")


def test_interleaving_the_pipeline_shrinks_its_bubble_by_its_chunks():
    # Narayanan et al. 2021 §2.2.2: the bubble is (p - 1)/(v·m) of the ideal time; with free
    # messages and collectives, on a 4-stage pipeline of 4 micro-batches, v = 2 halves it
    plain = train(_pipeline_of(4, {"pp": 4, "microbatches": 4})).step
    interleaved = train(_pipeline_of(4, {"pp": 4, "microbatches": 4, "schedule": "interleaved",
                                         "chunks": 2})).step
    assert plain.breakdown is not None and interleaved.breakdown is not None
    # the busiest stage (the last: it has the output projection) computes as long in both, and
    # under 1F1B idles (p - 1) × (F + B) of the other stages: 3 × 3 forwards of 2 layers
    assert interleaved.breakdown.compute_s == pytest.approx(plain.breakdown.compute_s, rel=1e-12)
    shape = Transformer(layers=8, hidden=256, heads=16, kv_heads=16, ffn=1024, vocab=512,
                        sequence=64, gated=False, bias=True, tied=True)
    forward = 2 * shape.layer_flops * 64 / 1e12
    assert plain.breakdown.bubble_s == pytest.approx(9 * forward, rel=1e-6)
    assert interleaved.breakdown.bubble_s == pytest.approx(plain.breakdown.bubble_s / 2, rel=1e-6)


def test_experts_exchange_tokens_all_to_all_per_moe_layer():
    moe = {"transformer": {"layers": 2, "hidden": 256, "heads": 16, "ffn": 512, "vocab": 512,
                           "sequence": 64, "experts": 4, "top_k": 2, "gated": True},
           "name": "moe"}
    scenario = scenario_from_dict({
        "name": "moe", "topology": {"preset": "dgx_h100"}, "algorithms": "auto",
        "training": {"model": moe, "batch": 2, "gpu": "h100",
                     "parallelism": {"ep": 4, "imbalance": 1.5}}})
    step = train(scenario).step
    assert step.parallel is not None
    exchanges = [op for op in step.parallel.graph.programs[0].ops if op.stream == "ep"]
    # a micro-batch of 2 × 64 tokens, top-2, hidden 256, bf16, × 1.5, in 256-byte blocks a peer
    assert {op.nbytes for op in exchanges} == {2 * 64 * 2 * 256 * 2 * 3 // 2}
    assert sum(op.count for op in exchanges) == 2 * 2 + 2 * 2  # dispatch + combine, each way
    assert {op.group for op in exchanges} == {"ep:0:0:0"}
    assert step.breakdown is not None and step.breakdown.exposed_ep_s > 0


def test_a_layout_sweep_ranks_the_layouts_that_fit_by_step_time():
    scenario = _scenario({"tp": 2, "microbatches": 2})
    assert scenario.training is not None
    swept = train(replace(scenario, training=replace(scenario.training,
                                                     sweep_layouts=True)))
    labels = [row.layout.label() for row in swept.layouts]
    assert len(labels) == len(set(labels)) > 4
    times = [row.step.step_s for row in swept.layouts if row.step is not None]
    assert times == sorted(times)
    # every layout keeps the global batch (4 samples × dp 8) and the micro-batch of 2 samples
    assert {row.batch * row.layout.dp for row in swept.layouts} == {32}
    assert {row.batch // row.layout.microbatches for row in swept.layouts} == {2}


def test_a_link_fault_strikes_the_communicator_whose_route_it_is_on():
    # one direction of rank 0's NIC cable at a quarter: only stage 0's DP group (ranks 0 and 8
    # of two DGX H100) crosses it; the step is run rank by rank and timed healthy beside
    scenario = _scenario({"tp": 8, "microbatches": 2, "zero": 1})
    faulted = replace(scenario, faults=scenario_from_dict({
        "name": "f", "topology": {"preset": "dgx_h100", "nodes": 2}, "sizes": ["1MiB"],
        "faults": [{"kind": "link_degraded", "link": ["n0.nic0", "leaf"], "factor": 0.25,
                    "both": True}]}).faults)
    training = train(faulted)
    step = training.step
    assert step.parallel is not None and len(step.parallel.unit_ranks) == 16
    times = {(kind, group): time for kind, _, group, _, _, time, _ in step.parallel.collectives}
    assert times[("reduce_scatter", "dp:0:0")] > times[("reduce_scatter", "dp:0:1")]
    assert step.step_s > step.healthy_step_s == train(scenario).step.step_s
