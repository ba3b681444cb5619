"""How many channels NCCL runs a collective on, from the same :class:`~simulator.model.nccl.
System` its tuner rates: the communicator's channels as ``ncclTopoPostset`` leaves them, NVLS's
own count, then ``topoGetAlgoInfo``'s cut of channels on small buffers (src/enqueue.cc:
2070-2097), which ``info->nMaxChannels`` takes (enqueue.cc:2114) and keeps when no tuner plugin
sets it (enqueue.cc:2178). Every line cited here is of NVIDIA/nccl tag v2.30.7-1 (commit
73cf1122, NCCL 2.30.7), checked again against the mirror's HEAD (tag nccl4py-v0.3.1, commit
5067397c, whose src/ is the same: NCCL 2.30.7).

Not modelled (None): NVLS and NVLSTree across Blackwell nodes, whose count
``ncclNvlsTreeSm100Tuning`` sets from the NIC's rate and the GPUs a node (src/transport/
nvls.cc:164-200); and the NCCL_* variables that change these counts (NCCL_MIN_NCHANNELS,
NCCL_MAX_NCHANNELS, NCCL_NTHREADS, NCCL_THREAD_THRESHOLDS, NCCL_NVLS_NCHANNELS): NCCL's
defaults throughout. The rules are 2.30.7's for every tuner version the model holds.
"""

from __future__ import annotations

from simulator.model.nccl import Arch, NcclAlgorithm, Protocol, System

MAXCHANNELS = 64
"""NCCL's most channels (src/include/device.h:91)."""

PCI_BW_GBPS = 12.0
"""``PCI_BW`` (src/graph/topo.h:25): a ring slower than this gets 256 Simple threads."""

SPLIT_CHANNELS_BW_GBPS = 45.0
"""The ring's bwIntra above which SM90+ doubles a multi-node communicator's channels under 16
(src/graph/connect.cc:480-483: "4 compute channels per search channel ... on <8 PPN")."""

NVLS_CHANNELS = {Arch.HOPPER: 16, Arch.BLACKWELL: 24}
"""``nvlsChannels`` on one node (src/transport/nvls.cc:155-157, 209-214, set at 238):
NVLS_NCHANNELS_SM90 16, NVLS_NCHANNELS_SM100_NVL 24."""

THREAD_THRESHOLD = {Protocol.LL: 8, Protocol.LL128: 8, Protocol.SIMPLE: 64}
"""Bytes of work per thread before NCCL adds threads and channels (src/include/comm.h:49-51:
NCCL_LL_THREAD_THRESHOLD, NCCL_LL128_THREAD_THRESHOLD, NCCL_SIMPLE_THREAD_THRESHOLD); Ring's LL
× nRanks, CollNet's Simple 512 (src/graph/tuning.cc:588-595)."""

_MAX_NTHREADS, _SIMPLE_MAX_NTHREADS, _LL_MAX_NTHREADS, _LL128_MAX_NTHREADS = 640, 512, 512, 640
"""src/include/device.h:93-114: NCCL_MAX_NTHREADS, NCCL_SIMPLE_MAX_NTHREADS,
NCCL_LL_MAX_NTHREADS, NCCL_LL128_MAX_NTHREADS."""

_RING, _TREE = NcclAlgorithm.RING, NcclAlgorithm.TREE
_NVLS, _NVLS_TREE = NcclAlgorithm.NVLS, NcclAlgorithm.NVLS_TREE
_CD, _CC = NcclAlgorithm.COLLNET_DIRECT, NcclAlgorithm.COLLNET_CHAIN


def search_channels(system: System) -> int | None:
    """The ring's and the tree's graph channels after src/init.cc:1459 cut both to the fewer of
    the two (``ringGraph->nChannels``, which ``ncclTopoTuneModel`` reads later, init.cc:1644);
    None without a ring graph."""
    ring, tree = system.graphs.get(_RING), system.graphs.get(_TREE)
    if ring is None:
        return None
    return min(ring.channels, tree.channels) if tree is not None else ring.channels


def comm_channels(system: System) -> int | None:
    """``comm->nChannels``: the fewer of the ring's and the tree's graph channels
    (:func:`search_channels`), doubled by ``ncclTopoPostset`` (src/graph/connect.cc:460), half
    as many again with CollNet where its chain graph is faster inside the node than across and
    a node has several GPUs (connect.cc:464-469), and doubled on SM90+ across nodes where the
    ring's bwIntra is above 45 GB/s and fewer than 16 remain (connect.cc:480-483). None without
    a ring graph."""
    ring, searched = system.graphs.get(_RING), search_channels(system)
    if ring is None or searched is None:
        return None
    channels = min(MAXCHANNELS, 2 * searched)
    chain = system.graphs.get(_CC)
    if (system.collnet and chain is not None and chain.bw_intra_GBps > chain.bw_inter_GBps
            and system.ranks > system.nodes):
        channels = min(MAXCHANNELS, channels + channels // 2)
    if (system.arch.value >= Arch.HOPPER.value and system.nodes > 1
            and ring.bw_intra_GBps > SPLIT_CHANNELS_BW_GBPS and channels < 16):
        channels *= 2
    return channels


def max_threads(system: System, algorithm: NcclAlgorithm, protocol: Protocol) -> int:
    """``comm->maxThreads[algorithm][protocol]`` with NCCL's defaults (src/graph/tuning.cc:
    244-256): Ring Simple 256 where the ring's bwIntra × channels is at most PCI_BW, else 512,
    its channels those init.cc:1459 left (:func:`search_channels`: ``ncclTopoTuneModel`` runs
    after it, init.cc:1644);
    Tree Simple 512; CollNet, NVLS and NVLSTree 640; LL 512; LL128 640; PAT's is never set (0,
    so its channels are never cut)."""
    if algorithm is NcclAlgorithm.PAT:
        return 0
    if protocol is Protocol.LL:
        return _LL_MAX_NTHREADS
    if protocol is Protocol.LL128:
        return _LL128_MAX_NTHREADS
    if algorithm is _RING:
        ring, searched = system.graphs[_RING], search_channels(system) or 0
        return 256 if ring.bw_intra_GBps * searched <= PCI_BW_GBPS else _SIMPLE_MAX_NTHREADS
    return _SIMPLE_MAX_NTHREADS if algorithm is _TREE else _MAX_NTHREADS


def thread_threshold(system: System, algorithm: NcclAlgorithm, protocol: Protocol) -> int:
    """``comm->threadThresholds[algorithm][protocol]`` (:data:`THREAD_THRESHOLD`)."""
    if algorithm in (_CD, _CC) and protocol is Protocol.SIMPLE:
        return 512
    threshold = THREAD_THRESHOLD[protocol]
    return threshold * system.ranks if algorithm is _RING and protocol is Protocol.LL else threshold


def nvls_channels(system: System) -> int | None:
    """``comm->nvlsChannels`` (:data:`NVLS_CHANNELS`); None across Blackwell nodes (the
    module's docstring) and on GPUs without NVLink SHARP."""
    if system.arch.value >= Arch.BLACKWELL.value and system.nodes > 1:
        return None
    return NVLS_CHANNELS.get(system.arch)


def channels(system: System, algorithm: NcclAlgorithm, protocol: Protocol,
             size_bytes: int) -> int | None:
    """The channels NCCL runs ``algorithm`` with ``protocol`` on for ``size_bytes`` (nBytes:
    the whole buffer, ``ncclFuncMaxSendRecvCount``, as :func:`~simulator.model.nccl.
    predicted_time_us` takes it), ``topoGetAlgoInfo`` (src/enqueue.cc:2070-2097):

    - CollNetDirect: from the communicator's channels, one fewer while nBytes < nc × nt ×
      heads × threshold, down to 16, 8, 4, 2, 1 in turn, the threshold halved on reaching
      1.5 × each step;
    - NVLS: ``nvlsChannels``, across nodes no more than the communicator's; NVLSTree:
      ``nvlsChannels``;
    - the others: one fewer while nBytes < nc × nt × threshold, down to one.

    None where the count is not modelled (:func:`comm_channels`, :func:`nvls_channels`)."""
    nc = comm_channels(system)
    if nc is None:
        return None
    nt = max_threads(system, algorithm, protocol)
    threshold = thread_threshold(system, algorithm, protocol)
    if algorithm in (_NVLS, _NVLS_TREE):
        nvls = nvls_channels(system)
        if nvls is None:
            return None
        return min(nvls, nc) if system.nodes > 1 and algorithm is _NVLS else nvls
    if algorithm is _CD:
        heads = system.graphs[_CD].channels
        switch, more = 16, True
        while switch >= 1 and more:
            while (more := size_bytes < nc * nt * heads * threshold) and nc > switch:
                if nc == switch + switch // 2:
                    threshold //= 2
                nc -= 1
            switch //= 2
        return nc
    while size_bytes < nc * nt * threshold and nc >= 2:
        nc -= 1
    return nc
