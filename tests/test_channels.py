"""Channels (simulator.algorithms.channels): an allreduce split over C slices of the buffer,
each run on its own connections with each host's ranks rotated, so flat schedules cross between
hosts on C NICs at once; by hand on two small hosts and on two DGX A100s."""

import pytest

from simulator import InputError, simulate
from simulator.model.machine import Layout
from simulator.scenario import scenario_from_dict

# two hosts of 4 GPUs; NVLink 1000 × the NIC, so the NICs alone set the ring's pace
TWO_HOSTS = {"kind": "dgx", "nodes": 2, "gpus_per_node": 4, "nvlink_bandwidth": "10TB/s",
             "nvlink_latency": "0s", "pcie_bandwidth": "10TB/s", "pcie_latency": "0s",
             "nic_bandwidth": "10GB/s", "nic_latency": "0s"}
SIZE = 8 << 20


def ring(channels):
    frame = simulate({"topology": TWO_HOSTS, "algorithms": ["ring"], "sizes": [SIZE],
                      "channels": channels})
    return frame.iloc[0]


def test_channel_order_rotates_each_host():
    layout = Layout((0, 0, 0, 1, 1, 1))
    assert layout.channel_order(0) == (0, 1, 2, 3, 4, 5)
    assert layout.channel_order(1) == (1, 2, 0, 4, 5, 3)
    assert layout.channel_order(4) == (1, 2, 0, 4, 5, 3)  # modulo the host's size


def test_one_channel_crosses_on_one_nic_four_on_four():
    # 2(p-1) = 14 steps of c = S/8 bytes; every step crosses a NIC at 10 GB/s: with one channel
    # the same NIC pair carries all 14; with 4, channel c crosses on NIC c, each S/32 a step
    one, four = ring(1), ring(4)
    assert one.sim_time_s == pytest.approx(14 * (SIZE / 8) / 10e9, rel=1e-3)
    assert four.sim_time_s == pytest.approx(14 * (SIZE / 32) / 10e9, rel=1e-3)
    assert four.model_time_s == pytest.approx(14 * (SIZE / 32) / 10e9, rel=1e-3)
    assert (one.channels, four.channels, bool(four.verified)) == (1, 4, True)


def test_auto_is_one_channel_on_the_ideal_wire():
    assert ring("auto").channels == 1


def test_auto_uses_every_rail_under_nccl_and_matches_two_dgx_a100():
    # 2 × DGX A100, 8 × 200 Gb/s HDR NICs: NCCL achieves 24 GB/s per NIC (NET_BW 12 per 100 Gb),
    # 8 channels use all 8, and NVIDIA reports "8x200Gbit/s IB cards ... 192GB/s AllReduce
    # BusBW" (nccl#812, docs/reference/published-measurements.md §1.3 b)
    frame = simulate({"topology": {"preset": "dgx_a100", "nodes": 2}, "execution": "nccl",
                      "algorithms": ["ring", "hierarchical"], "sizes": ["4GiB"]})
    ring_row, hierarchical = frame.itertuples()
    assert (ring_row.channels, hierarchical.channels) == (8, 1)  # hierarchical uses every rail
    assert ring_row.busbw_GBps == pytest.approx(192.0, rel=0.005)
    assert ring_row.sim_time_s == pytest.approx(ring_row.model_time_s, rel=1e-9)


def test_small_buffers_run_fewer_channels():
    # 64 bytes are 16 float32 elements: 2 a rank, so 2 channels of one; 256 bytes allow all 8
    frame = simulate({"topology": TWO_HOSTS, "algorithms": ["ring"], "sizes": [64, 256],
                      "channels": 8})
    assert list(frame.channels) == [2, 8]
    assert frame.verified.all()


@pytest.mark.parametrize(("fields", "message"), [
    ({"channels": 0}, "channels: expected 'auto' or a whole number from 1 to 64, got 0"),
    ({"channels": "two"}, "channels: expected 'auto' or a whole number from 1 to 64, got 'two'"),
    ({"channels": 2, "collective": "allgather"},
     "channels: expected 'auto' or 1 for allgather: channels split an allreduce's buffer only, "
     "got 2"),
])
def test_bad_channels(fields, message):
    with pytest.raises(InputError) as error:
        scenario_from_dict({"topology": TWO_HOSTS, "sizes": [4096], **fields}, source="s.yaml")
    assert str(error.value) == f"s.yaml: {message}"
