"""One thread launching a collective on several GPUs: the start skew it adds (issue 38).

nccl-tests can drive several GPUs from one thread (``-g N``, ``--ngpus``: "GPUs per thread").
Each timed iteration then opens one NCCL group and, for each of its GPUs in turn, enqueues the
collective on that GPU's communicator (``startColl``, src/common.cu:548-619 at nccl-tests
2.19.6, commit a0b82b2: ``ncclGroupStart``; ``for (int i = 0; i < args->nGpus; i++)`` ...
``runColl(..., args->comms[i], args->streams[i], ...)``; ``ncclGroupEnd``). At ``ncclGroupEnd``
NCCL launches the group's kernels from that same thread, one communicator after another:
``doLaunches`` (src/group.cc:309-383, NCCL 2.30.7, branch ``master``) first prepares every
communicator's plan (``cudaSetDevice``, ``ncclLaunchPrepare``, lines 320-326), then, per
communicator in turn, switches device and launches its kernel (``cudaSetDevice``,
``ncclLaunchKernelBefore_NoUncapturedCuda``, ``ncclLaunchKernel``, lines 354-369). The kernel of
the group's last GPU therefore starts N − 1 per-device launches after the first's, and a
collective, which every rank must join before any can finish, ends that much later than when
one process drives each GPU (``-g 1``, where every rank launches its own kernel at once).

The cost of one device's launch is not published; :data:`PER_DEVICE_LAUNCH_US` is FITTED to
the sizes of docs/reference/nccl-tests-a100.log below 32 KiB (one thread driving 8 A100s),
which the fidelity table (from 32 KiB) does not report: there the collective costs its latency
alone, so the measured floor over NCCL's latency is the skew of 7 launches.
"""

from __future__ import annotations

PER_DEVICE_LAUNCH_US = 2.86
"""The time one thread spends launching one GPU's kernel of a group, µs. FITTED to
docs/reference/nccl-tests-a100.log (``nThread 1 nGpus 8``): at its 13 sizes from 4 B to 16 KiB
the out-of-place time exceeds the simulated Ring/LL time on ``dgx_a100`` (NCCL's base latency
6.6 µs + 14 NVLink steps of 0.6 µs: 15.0-15.3 µs) by 19.5-21.1 µs, median 20.0 µs; over the
7 launches between the first GPU's and the last's, 2.86 µs each (a ``cudaSetDevice`` and a
``cudaLaunchKernel`` with NCCL's work around it)."""


def thread_skew_s(gpus_per_thread: int) -> float:
    """How much later a collective ends when one thread launches it on ``gpus_per_thread`` GPUs
    (nccl-tests' ``-g``) than when each GPU has its own: ``gpus_per_thread − 1`` per-device
    launches, s.

    >>> round(thread_skew_s(8) * 1e6, 2), thread_skew_s(1)
    (20.02, 0.0)
    """
    if gpus_per_thread < 1:
        raise ValueError(f"expected at least one GPU per thread, got {gpus_per_thread}")
    return (gpus_per_thread - 1) * PER_DEVICE_LAUNCH_US * 1e-6
