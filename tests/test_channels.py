"""Channels (simulator.algorithms.channels): an allreduce split over C slices of the buffer,
each run on its own connections with each host's ranks rotated, so flat schedules cross between
hosts on C NICs at once; by hand on two small hosts and on two DGX A100s. The ring
reduce-scatter and allgather across hosts under NCCL, each channel on a part of every rank's
chunk: by hand, verified, and a wrong split caught."""

import pytest

from simulator import InputError, simulate
from simulator.algorithms import channels as channels_module
from simulator.algorithms.channels import ChannelShare, channel_shares
from simulator.algorithms.ring import RingAllreduce, RingReduceScatter
from simulator.model.machine import Layout
from simulator.model.span import Span
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


# The same two hosts as NCCL's execution model times them (it needs the GPU's generation)
NCCL_HOSTS = {**TWO_HOSTS, "compute_capability": 90, "nvlinks": 18}


def by_chunks(collective, execution="nccl", engine="auto", topology=None, sizes=(SIZE,)):
    """The ring ``collective`` on the two hosts (or ``topology``) at ``sizes``."""
    fields = {"topology": topology or NCCL_HOSTS, "collective": collective,
              "algorithms": ["ring"], "sizes": list(sizes), "execution": execution,
              "engine": engine}
    if execution == "nccl":
        fields["protocol"] = "Simple"
    return simulate(fields)


def test_each_channel_owns_a_part_of_every_ranks_chunk_in_its_order():
    # 32 elements, 8 ranks: chunk r is [4r, 4r + 4); channel c owns element 4r + c of each,
    # listed in channel c's order (each host's ranks rotated by c), so member i owns its own
    shares = channel_shares(RingReduceScatter(), Span(0, 32), Layout((0,) * 4 + (1,) * 4), 4)
    assert shares[1].order == (1, 2, 3, 0, 5, 6, 7, 4)
    assert shares[1].buffer == Span(0, 32)
    assert shares[1].owned == tuple(Span(4 * r + 1, 4 * r + 2) for r in (1, 2, 3, 0, 5, 6, 7, 4))
    assert [share.owned[share.order.index(0)] for share in shares] == Span(0, 4).split(4)
    # an allreduce's channel c takes the c-th contiguous slice, its program cuts it itself
    whole = channel_shares(RingAllreduce(), Span(0, 32), Layout((0,) * 4 + (1,) * 4), 4)
    assert [(share.buffer, share.owned) for share in whole] == [(Span(8 * c, 8 * c + 8), None)
                                                               for c in range(4)]


@pytest.mark.parametrize("collective", ["reduce_scatter", "allgather"])
@pytest.mark.parametrize("engine", ["vector", "simpy"])
def test_ring_reduce_scatter_and_allgather_run_on_every_rail_by_hand(collective, engine):
    # 4 channels, each 7 steps of its part S/32 of every chunk; channel c crosses between the
    # hosts on its own NICs, at NCCL's 0.96 share of 10 GB/s (Ring/Simple on the net,
    # nccl_point's charges): base 11.76 us, one NET step 19.6 us, the chunk's fill (one step
    # late) and 7 steps: 11.76 + 19.6 + 8 × 262144 B / 9.6 GB/s = 249.8133 us; one channel
    # would carry 4 × as much over one NIC pair
    row = by_chunks(collective, engine=engine).iloc[0]
    step = (SIZE / 32) / (0.96 * 10e9)
    assert row.channels == 4
    assert row.sim_time_s == pytest.approx(11.76e-6 + 19.6e-6 + 8 * step, rel=1e-9)
    assert row.model_time_s == pytest.approx(row.sim_time_s, rel=1e-9)
    assert bool(row.verified)


@pytest.mark.parametrize("collective", ["reduce_scatter", "allgather"])
def test_reduce_scatter_and_allgather_verify_on_channels_at_uneven_counts(collective):
    # 2 × 4 GPUs of DGX H100 (its NCCL and fabric); 4 channels; counts that divide by neither
    # the ranks nor the channels, so chunks and their parts differ by an element (1001
    # elements checked one by one, 262,147 through the proxy)
    frame = by_chunks(collective, topology={"preset": "dgx_h100", "nodes": 2, "gpus_per_node": 4},
                      sizes=[4 * 1001, (1 << 20) + 12])
    assert list(frame.channels) == [4, 4]
    assert frame.verified.all() and frame.verified_elements[0] == 1001


def test_ideal_one_host_and_other_algorithms_keep_one_channel():
    ideal = by_chunks("reduce_scatter", execution="ideal").iloc[0]
    assert (ideal.channels, ideal.sim_time_s) == (1, pytest.approx(7 * (SIZE / 8) / 10e9,
                                                                   rel=1e-9))
    one_host = simulate({"topology": {"preset": "dgx_h100", "nodes": 1}, "collective": "allgather",
                         "algorithms": ["ring"], "sizes": [SIZE], "execution": "nccl"})
    assert one_host.channels.tolist() == [1]
    others = simulate({"topology": NCCL_HOSTS, "collective": "reduce_scatter", "sizes": [SIZE],
                       "algorithms": ["direct", "halving_doubling"], "execution": "nccl"})
    assert others.channels.tolist() == [1, 1]


def contiguous(algorithm, buffer, layout, channels):
    """The wrong split for a reduce-scatter: the allreduce's contiguous slices."""
    return [ChannelShare(layout.channel_order(c), part, None)
            for c, part in enumerate(buffer.split(channels))]


def unrotated(algorithm, buffer, layout, channels):
    """The wrong split: every channel's parts listed by rank, not in the channel's order."""
    parts = buffer.split_chunks(len(layout.hosts), channels)
    return [ChannelShare(layout.channel_order(c), buffer, parts[c]) for c in range(channels)]


@pytest.mark.parametrize("wrong", [contiguous, unrotated])
@pytest.mark.parametrize("engine", ["vector", "simpy"])
def test_a_wrong_channel_split_fails_verification(monkeypatch, wrong, engine):
    monkeypatch.setattr(channels_module, "channel_shares", wrong)
    row = by_chunks("reduce_scatter", engine=engine, sizes=[4096]).iloc[0]
    assert (row.channels, bool(row.verified)) == (4, False)
