"""The NCCL execution model (simulator.model.execution): base latency, per-step latency by kind of
path, the protocol's share of each link, NVLS's fitted share and free reductions, by hand on one
DGX H100, with the simulation equal to the closed form as on the ideal wire."""

import pytest

from simulator import InputError, Scenario, simulate
from simulator.model.execution import NVLS_SHARE, Execution, NcclRouting, apply, nccl_charges
from simulator.model.machine import Machine
from simulator.model.nccl import Hardware, NcclAlgorithm, Protocol
from simulator.scenario import scenario_from_dict

H100 = {"topology": {"preset": "dgx_h100"}, "execution": "nccl",
        "gpu": {"reduce_bandwidth": "1.1TB/s"}}
NVLINK_Bps = 18 * 20.6e9  # 18 NVLink 4 links × NCCL's 20.6 GB/s each (topo.h, SM90)


def run(**fields):
    return simulate({**H100, **fields})


def test_ring_simple_at_1_gib_by_hand():
    # base 8.4 µs + 14 steps × (Simple's NVLink hwLat 3.4 µs + c / 370.8 GB/s), c = 1 GiB / 8;
    # the reduction happens inside the copy (no gamma term)
    [row] = run(algorithms=["ring"], sizes=["1GiB"], protocol="Simple").itertuples()
    # plus the pipeline's fill: one 2 MiB chunk on one of NCCL's 12 ring channels
    expected = 8.4e-6 + (2 << 20) * 12 / NVLINK_Bps + 14 * (3.4e-6 + (1 << 30) / 8 / NVLINK_Bps)
    assert row.sim_time_s == pytest.approx(expected, rel=1e-12)
    assert row.model_time_s == pytest.approx(expected, rel=1e-12)
    assert (row.execution, row.protocol, row.verified) == ("nccl", "Simple", True)
    assert row.busbw_GBps == pytest.approx(361.95, abs=0.01)  # measured: 363-367 (8 × H200, Ring)


def test_ring_ll_at_32_kib_by_hand_and_picked():
    # LL: base 6.6 µs + 14 × (0.6 µs + c / min(0.5 × 370.8, llMaxBw 141) GB/s), c = 4 KiB
    [row] = run(algorithms=["ring"], sizes=["32KiB"]).itertuples()
    expected = 6.6e-6 + 14 * (0.6e-6 + 4096 / 141e9)
    assert row.protocol == "LL"  # NCCL's model picks LL for ring at 32 KiB
    assert row.sim_time_s == pytest.approx(expected, rel=1e-12)
    assert row.model_time_s == pytest.approx(expected, rel=1e-12)


def test_ll128_share_and_latency():
    # LL128: base 14 µs + 14 × (1.9 µs + c / (0.92 × 370.8 GB/s)), c = 1 MiB / 8
    [row] = run(algorithms=["ring"], sizes=["1MiB"], protocol="LL128").itertuples()
    assert row.sim_time_s == pytest.approx(14e-6 + 14 * (1.9e-6 + (1 << 20) / 8 / (0.92 * NVLINK_Bps)),
                                           rel=1e-12)


def test_nvls_moves_at_its_fitted_share():
    # the switch's own 25 µs latency (= NCCL's NVLS hwLat) and a 300 ns hop each way; 2048
    # pieces of 512 KiB up and down at 0.741 × 370.8 GB/s: (k + 1) pieces' time
    [row] = run(algorithms=["nvls"], sizes=["1GiB"]).itertuples()
    piece = (512 << 10) / (NVLS_SHARE * NVLINK_Bps)
    # plus the fill: 8 slots of 128 KiB on each of 16 channels (16 MiB) cross before the reduce
    # and multicast halves overlap
    fill = (16 << 20) / (NVLS_SHARE * NVLINK_Bps)
    assert row.sim_time_s == pytest.approx(fill + 25e-6 + 2 * 300e-9 + 2049 * piece, rel=1e-9)
    assert row.model_time_s == pytest.approx(row.sim_time_s, rel=1e-9)
    assert row.protocol == "Simple"


def test_steps_across_the_network_pay_the_net_latency():
    machine = Machine.of(scenario_from_dict({"topology": {"preset": "dgx_h100", "nodes": 2},
                                             "sizes": [8]}).topology.build())
    plan = nccl_charges(machine, NcclAlgorithm.RING, Protocol.SIMPLE)
    routing = apply(plan, machine).routing
    assert isinstance(routing, NcclRouting)
    inside, across = routing.route("n0.gpu0", "n0.gpu1"), routing.route("n0.gpu7", "n1.gpu0")
    assert (inside.latency_s, across.latency_s) == (pytest.approx(3.4e-6), pytest.approx(14e-6))
    assert routing.hardware(across) is Hardware.NET
    # the NIC moves 12 GB/s per 100 Gb/s of wire (NET_BW): 400 Gb/s → 48 GB/s
    assert across.bottleneck_Bps == pytest.approx(48e9, rel=1e-12)
    assert plan.step_latency_s[Hardware.PCI] == pytest.approx(5.7e-6)


def test_ideal_is_unchanged_and_presets_of_real_machines_default_to_nccl():
    nccl = run(algorithms=["ring"], sizes=["1MiB"])
    ideal = simulate({**H100, "execution": "ideal", "algorithms": ["ring"], "sizes": ["1MiB"]})
    default = simulate({k: v for k, v in H100.items() if k != "execution"}
                       | {"algorithms": ["ring"], "sizes": ["1MiB"]})
    assert nccl.equals(default) and (default.execution == "nccl").all()
    assert (ideal.execution == "ideal").all()
    assert (ideal.protocol == "").all()
    # 1 MiB on the ideal wire: 14 × (600 ns + c / 450 GB/s) + 7 × c / 1.1 TB/s, c = 1 MiB / 8
    c = (1 << 20) / 8
    assert ideal.sim_time_s[0] == pytest.approx(14 * (600e-9 + c / 450e9) + 7 * c / 1.1e12, rel=1e-12)
    assert nccl.sim_time_s[0] > ideal.sim_time_s[0]


def test_abstract_builders_default_to_the_ideal_wire():
    fields = {"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s", "latency": "1us"},
              "sizes": [4096]}
    assert scenario_from_dict(fields).execution is Execution.IDEAL
    assert scenario_from_dict({**fields, "topology": {"preset": "dgx_a100"}}).execution \
        is Execution.NCCL
    # the library API resolves the default the same way
    spec = scenario_from_dict({**fields, "topology": {"preset": "dgx_a100"}}).topology
    assert Scenario(name="a100", topology=spec, sizes=(4096,)).execution is Execution.NCCL


@pytest.mark.parametrize("fields, message", [
    ({"topology": {"kind": "switch", "ranks": 4, "bandwidth": "25GB/s", "latency": "1us"},
      "execution": "nccl"},
     "execution: expected a topology that states compute_capability and nvlinks for execution: "
     "nccl (the dgx_h100 and dgx_a100 presets do), got kind switch"),
    ({"execution": "ideal", "protocol": "LL"},
     "protocol: expected no protocol with execution: ideal (protocols are NCCL's: set "
     "execution: nccl)"),
    ({"protocol": "LL256"}, "protocol: expected a protocol (auto, LL, LL128, Simple), got 'LL256'; "
                            "did you mean 'LL128'?"),
    ({"execution": "fast"}, "execution: expected an execution model (ideal, nccl), got 'fast'"),
])
def test_bad_execution_settings_are_input_errors(fields, message):
    with pytest.raises(InputError) as error:
        scenario_from_dict({**H100, "sizes": ["1MiB"], **fields}, source="x.yaml")
    assert [str(p) for p in error.value.problems] == [f"x.yaml: {message}"]


def test_nvls_with_another_protocol_is_refused_when_run():
    with pytest.raises(InputError, match=r"^x.yaml: protocol: 'nvls': NCCL runs NVLS with the "
                                         r"Simple protocol only$"):
        simulate(scenario_from_dict({**H100, "algorithms": ["nvls"], "sizes": ["1MiB"],
                                     "protocol": "LL"}, source="x.yaml"))


def test_per_channel_caps_bound_a_calibrated_nvlink_rate():
    # a calibrated 1 TB/s of NVLink: Ring LL128 moves min(0.92 × 1000, 12 channels × 36.7) GB/s
    # (perChMaxRingLL128Bw, Hopper) and Tree Simple min(1000, 12 × 38.7) (perChMaxTreeBw)
    machine = Machine.of(scenario_from_dict({
        "topology": {"preset": "dgx_h100", "nccl_nvlink_bandwidth": "1TB/s"},
        "sizes": [4096]}).topology.build())
    ring = nccl_charges(machine, NcclAlgorithm.RING, Protocol.LL128)
    tree = nccl_charges(machine, NcclAlgorithm.TREE, Protocol.SIMPLE)
    assert ring.link_rate_Bps["nvlink"] == pytest.approx(12 * 36.7e9)
    assert tree.link_rate_Bps["nvlink"] == pytest.approx(12 * 38.7e9)
    simple = nccl_charges(machine, NcclAlgorithm.RING, Protocol.SIMPLE)
    assert simple.link_rate_Bps["nvlink"] == pytest.approx(1e12)  # Ring Simple has no cap
