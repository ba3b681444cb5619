"""One thread launching a collective on several GPUs (nccl-tests' ``-g``; issue 38): the skew of
simulator/model/launch.py worked by hand, charged by the NCCL execution model, checked and
written back as ``nccl.gpus_per_thread``."""

import pytest

from simulator import run_point, scenario_from_dict
from simulator.errors import InputError
from simulator.model.execution import nccl_charges
from simulator.model.launch import PER_DEVICE_LAUNCH_US, thread_skew_s
from simulator.model.nccl import NcclAlgorithm, Protocol
from simulator.output.settings_json import settings
from simulator.plan import prepare

US = 1e-6


def a100(**nccl):
    """One DGX A100 running the ring at 8 B and 1 MiB, ``nccl`` as given."""
    return scenario_from_dict({"topology": {"preset": "dgx_a100"}, "sizes": [8, 1 << 20],
                               "algorithms": ["ring"], **({"nccl": nccl} if nccl else {})},
                              source="g.yaml")


def test_the_skew_is_a_launch_per_gpu_after_the_first():
    # common.cu:549-619 enqueues GPU by GPU, group.cc:354-369 launches them in turn: the last of
    # 8 GPUs starts 7 launches after the first; one GPU a thread has none.
    assert PER_DEVICE_LAUNCH_US == 2.86
    assert thread_skew_s(8) == pytest.approx(7 * 2.86 * US, rel=1e-15)
    assert thread_skew_s(2) == pytest.approx(2.86 * US, rel=1e-15)
    assert thread_skew_s(1) == 0.0
    with pytest.raises(ValueError, match="expected at least one GPU per thread, got 0"):
        thread_skew_s(0)


def test_a_ring_of_8_bytes_on_one_a100_by_hand():
    # NCCL's Ring/LL latency on one node (tuning.cc, 2.30.7): base 6.6 µs + 2·(8−1) NVLink steps
    # of 0.6 µs = 15.0 µs (and 8 B at LL's rate: 0.6 ns); with -g 8, 7 launches of 2.86 µs
    # more: 35.02 µs (measured 34.66).
    alone = run_point(a100(), "ring", 8)
    driven = run_point(a100(gpus_per_thread=8), "ring", 8)
    assert alone.sim_time_s == pytest.approx((6.6 + 14 * 0.6) * US, abs=1e-9)
    assert driven.sim_time_s == pytest.approx((6.6 + 14 * 0.6 + 7 * 2.86) * US, abs=1e-9)
    assert driven.sim_time_s - alone.sim_time_s == pytest.approx(7 * 2.86 * US, rel=1e-9)
    assert driven.model_time_s == pytest.approx(driven.sim_time_s, rel=1e-9)


def test_the_skew_adds_to_every_size_and_not_to_nccls_pick():
    one, eight = a100(), a100(gpus_per_thread=8)
    setup_one, setup_eight = prepare(one), prepare(eight)
    assert setup_eight.machine.nccl.gpus_per_thread == 8
    for protocol in Protocol:
        alone = nccl_charges(setup_one.machine, NcclAlgorithm.RING, protocol, 1 << 20)
        driven = nccl_charges(setup_eight.machine, NcclAlgorithm.RING, protocol, 1 << 20)
        assert driven.start_s - alone.start_s == pytest.approx(7 * 2.86 * US, rel=1e-12)
    a, b = run_point(one, "ring", 1 << 20), run_point(eight, "ring", 1 << 20)
    assert b.sim_time_s - a.sim_time_s == pytest.approx(7 * 2.86 * US, rel=1e-6)
    assert (a.protocol, a.nccl_time_s) == (b.protocol, b.nccl_time_s)  # NCCL's model: no -g


@pytest.mark.parametrize("value, message", [
    (0, "g.yaml: nccl.gpus_per_thread: expected how many GPUs one thread launches each "
        "collective on (nccl-tests' -g), a whole number from 1, got 0"),
    ("8", "g.yaml: nccl.gpus_per_thread: expected how many GPUs one thread launches each "
          "collective on (nccl-tests' -g), a whole number from 1, got '8'"),
    (True, "g.yaml: nccl.gpus_per_thread: expected how many GPUs one thread launches each "
           "collective on (nccl-tests' -g), a whole number from 1, got True"),
])
def test_gpus_per_thread_must_be_a_count(value, message):
    with pytest.raises(InputError) as error:
        a100(gpus_per_thread=value)
    assert [str(p) for p in error.value.problems] == [message]


def test_gpus_per_thread_must_divide_a_host():
    with pytest.raises(InputError) as error:
        prepare(a100(gpus_per_thread=3))
    assert [str(p) for p in error.value.problems] == [
        "g.yaml: nccl.gpus_per_thread: expected a divisor of the GPUs of a host (8): one thread "
        "drives GPUs of its own host, every thread as many, got 3"]


def test_the_settings_file_says_gpus_per_thread():
    read = a100(gpus_per_thread=4)
    written = settings(read, read.run)["scenario"]
    assert written["nccl"] == {"gpus_per_thread": 4}
    assert scenario_from_dict(written).nccl.gpus_per_thread == 4
    assert "nccl" not in settings(a100(), a100().run)["scenario"]


def test_the_settings_file_says_symmetric_and_library():
    # registered buffers and a named library change what runs, so the settings file, which
    # --resume and a rerun read back, states them (before, is_default overlooked both)
    h100 = scenario_from_dict({"topology": {"preset": "dgx_h100"}, "sizes": [1 << 20],
                               "algorithms": ["ring"],
                               "nccl": {"symmetric": True, "library": "nccl"}}, source="s.yaml")
    written = settings(h100, h100.run)["scenario"]
    assert written["nccl"] == {"symmetric": True, "library": "nccl"}
    read = scenario_from_dict(written)
    assert read.nccl.symmetric is True and read.nccl.library is h100.nccl.library
