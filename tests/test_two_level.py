"""hierarchical and nvls: where they apply, exact closed forms, and the margins they win by."""

import numpy as np
import pytest

from simulator.algorithms import get_algorithm
from simulator.errors import InputError
from simulator.model.collective import Collective
from simulator.model.machine import GpuSpec
from simulator.model.reduction import ReduceOp
from simulator.runner import prepare, run_point, simulate
from simulator.scenario import Scenario, TopologySpec
from simulator.scenario.parse import load_preset
from tests.conftest import flat_scenario, inter_options

H100_GPU = GpuSpec(reduce_bandwidth_Bps=1.1e12)


def dgx_scenario(preset: str = "dgx_h100", nodes: int = 1, algorithms=("ring",), **fields) -> Scenario:
    base = load_preset(preset)
    topology = TopologySpec(base.kind, {**base.params, "nodes": nodes}, label=preset)
    return flat_scenario(topology=topology, algorithms=algorithms, gpu=H100_GPU, **fields)


def run(scenario: Scenario, size: int):
    setup = prepare(scenario)
    return {a.name: run_point(scenario, a, size, setup=setup) for a in setup.algorithms}


@pytest.mark.parametrize("nodes, inter", [(2, "ring"), (3, "ring"), (4, "ring"), (3, "direct"),
                                          (2, "halving_doubling"), (4, "halving_doubling"),
                                          (2, "tree")])
def test_hierarchical_is_exact_and_verified(nodes, inter):
    scenario = dgx_scenario(nodes=nodes, algorithms=("hierarchical",), algorithm_options=inter_options(inter),
                            dtype=np.dtype("int32"))
    for size in (4 * 8 * nodes * 3, 1 << 20, 1 << 28):
        result = run(scenario, size)["hierarchical"]
        assert result.verified is True
        assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9)


def test_hierarchical_beats_flat_ring_on_two_nodes_by_the_closed_forms_margin():
    # Flat ring on 16 ranks: 2 of its hops cross the 50 GB/s NICs, which then carry 30 chunks of
    # n/16 each: about 30/16·n/50e9. Hierarchical moves n/8 across them (2 x 1/2 for a 2-rank
    # ring) and the rest on 450 GB/s NVLink: about n/8/50e9 + 2·7/8·n/450e9 (+ reductions).
    n = 1 << 30
    results = run(dgx_scenario(nodes=2, algorithms=("ring", "hierarchical")), n)
    ring, hier = results["ring"], results["hierarchical"]
    speedup_sim = ring.sim_time_s / hier.sim_time_s
    speedup_model = ring.model_time_s / hier.model_time_s
    assert speedup_sim == pytest.approx(speedup_model, rel=1e-6)
    c = n / 8
    expected_hier = (2 * 7 * (600e-9 + c / 450e9) + 7 * c / 1.1e12     # intra RS + AG, chunks n/8
                     + 2 * (2.7e-6 + c / 2 / 50e9) + c / 2 / 1.1e12)  # 2-rank ring on n/8 across
    assert hier.sim_time_s == pytest.approx(expected_hier, rel=1e-9)
    assert speedup_sim > 5.0


@pytest.mark.parametrize("inter", ["ring", "tree", "halving_doubling", "direct"])
def test_hierarchical_inter_algorithm_is_the_scenarios_choice(inter):
    scenario = dgx_scenario(nodes=3, algorithms=("hierarchical",), algorithm_options=inter_options(inter))
    [algorithm] = prepare(scenario).algorithms
    assert algorithm.options.inter is get_algorithm(Collective.ALLREDUCE, inter)
    assert run(scenario, 3 * 4096)["hierarchical"].verified is True


def test_nvls_is_exact_on_one_h100_node_for_every_op():
    for op in ReduceOp:
        scenario = dgx_scenario(algorithms=("nvls",), reduce_op=op, dtype=np.dtype("int64"))
        result = run(scenario, 8 * 1000)["nvls"]
        assert result.verified is True
        assert result.sim_time_s == pytest.approx(result.model_time_s, rel=1e-9)


def test_nvls_beats_ring_at_1GiB_by_the_closed_forms_margin():
    # ring: 14 steps of (0.6 us + n/8/450e9) plus 7 GPU reductions of n/8 at 1.1 TB/s;
    # nvls: 2048 pieces of 512 KiB up and down a 450 GB/s link: 0.6 us + 25 us + 2049·c/450e9.
    n = 1 << 30
    results = run(dgx_scenario(algorithms=("ring", "nvls")), n)
    ring, nvls = results["ring"], results["nvls"]
    c = 512 * 1024
    assert nvls.sim_time_s == pytest.approx(0.6e-6 + 25e-6 + 2049 * c / 450e9, rel=1e-9)
    assert ring.sim_time_s == pytest.approx(14 * (0.6e-6 + n / 8 / 450e9) + 7 * n / 8 / 1.1e12,
                                            rel=1e-9)
    assert ring.sim_time_s / nvls.sim_time_s == pytest.approx(
        ring.model_time_s / nvls.model_time_s, rel=1e-9)
    assert ring.sim_time_s / nvls.sim_time_s > 2.0


def test_ring_wins_small_sizes_on_h100_as_nccl_tuner_does():
    results = run(dgx_scenario(algorithms=("ring", "nvls")), 1024)
    assert results["ring"].sim_time_s < results["nvls"].sim_time_s


@pytest.mark.parametrize("scenario, field, message", [
    (flat_scenario("switch", ranks=8, algorithms=("hierarchical",)), "algorithms[0]",
     "'hierarchical' cannot run on topology switch: it needs GPUs on two or more hosts "
     "(GPUs with a 'host', as in kind dgx with nodes ≥ 2)"),
    (dgx_scenario("dgx_a100", algorithms=("nvls",)), "algorithms[0]",
     "'nvls' cannot run on topology dgx_a100: it needs one switch with in-switch reduction "
     "(reduction: true) cabled to every GPU, such as the NVSwitch of a single dgx_h100 node"),
    (dgx_scenario("dgx_h100", nodes=2, algorithms=("ring", "nvls")), "algorithms[1]",
     "'nvls' cannot run on topology dgx_h100: across hosts NVLS runs with CollNet only: it needs "
     "network switches that reduce (sharp: true on the topology, InfiniBand SHARP) from the "
     "NICs of the h-th GPU of every host up to one that joins them; none does for ranks "
     "[0, 8]"),
])
def test_named_algorithm_that_cannot_run_is_an_input_error(scenario, field, message):
    with pytest.raises(InputError) as error:
        prepare(scenario)
    assert str(error.value) == f"test.yaml: {field}: {message}"


def test_all_runs_every_algorithm_that_applies():
    one = dgx_scenario(algorithms=None)
    two = dgx_scenario(nodes=2, algorithms=None)
    names_one = [a.name for a in prepare(one).algorithms]
    names_two = [a.name for a in prepare(two).algorithms]
    assert "nvls" in names_one and "hierarchical" not in names_one
    assert "hierarchical" in names_two and "nvls" not in names_two
    assert get_algorithm(Collective.ALLREDUCE, "ring").name in names_one


def test_hierarchical_streams_its_phases_under_nccl_by_hand():
    # 2 × DGX A100 under nccl, Simple: NVLink 12 × 20 GB/s, each NIC 25 GB/s × 0.96 (NET_BW);
    # step latencies 3.4 µs (NVLink) and 14 µs (NET), base 8.4 µs. In k pieces, a piece's chunk
    # is S/(8k) on each of the 8 GPUs of a host; tick t reduce-scatters piece t, runs the
    # 2-rank ring across hosts on piece t-1 and allgathers piece t-2.
    size = 1 << 30

    def by_hand(k):
        c = size / 8 / k
        one_phase = 7 * (3.4e-6 + c / 240e9)    # reduce-scatter or allgather of one piece
        both = 7 * (3.4e-6 + 2 * c / 240e9)     # the two side by side on the same links
        inter = 2 * (14e-6 + c / 2 / 24e9)      # 2-rank ring across hosts on the chunk
        if k == 1:
            return 2 * one_phase + inter
        middle = [max(both, inter)] * (k - 2)
        return (one_phase + max(one_phase, inter) + sum(middle) + max(one_phase, inter)
                + one_phase)

    frame = simulate({"topology": {"preset": "dgx_a100", "nodes": 2}, "execution": "nccl",
                      "protocol": "Simple", "algorithms": ["hierarchical"], "sizes": [size]})
    row = frame.iloc[0]
    times = {k: by_hand(k) for k in (1, 2, 4, 8, 16, 32, 64)}
    assert min(times, key=times.__getitem__) == 16  # the runner streams the fastest piece count
    fill = (2 << 20) * 8 / (8 * 24e9)  # Ring Simple's fill: one 2 MiB chunk at one NIC's rate
    assert row.sim_time_s == pytest.approx(8.4e-6 + fill + times[16], rel=1e-9)
    assert row.model_time_s == pytest.approx(row.sim_time_s, rel=1e-9)
    assert bool(row.verified)
    # one phase after another (k = 1) takes 59 % longer
    assert times[1] / times[16] == pytest.approx(1.59, abs=0.01)
