"""RCCL's view of a machine and what its kernels charge under ``execution: nccl``: the same
:class:`~simulator.model.execution.NcclCharges` as NCCL's, from RCCL's record
(:mod:`simulator.model.rccl`) in place of NCCL's, so the engine, the closed forms and the
results see one execution model whichever library runs.

What differs from NCCL's execution on an all-xGMI node (MI300X, MI325X):

- each GPU pair has its own xGMI link, carried at RCCL's ``GFX94X_XGMI_WIDTH`` of 48 GB/s
  (src/graph/topo.h:33) times the protocol's share, never above the wire: a link's rate, not a
  GPU's (an NVSwitch port's) as on NVIDIA;
- RCCL's ring runs on 56 channels over the 28 rings of its rome model (14 distinct rings, each
  crossing every directed link twice: :data:`~simulator.model.rccl.GFX942` ``rings``, doubled
  by ``ncclTopoPostset``: ``nc = 2`` for 8 ranks, src/init.cc:1471, src/graph/connect.cc:
  640-643), so the ring's load spreads evenly over the 7 links of every GPU;
- latencies are RCCL's ``baseLat`` and its tuning model's ``hwLat`` on xGMI and PCIe; a network
  step is NCCL's (``hwLat`` NET of :data:`~simulator.model.execution.KERNELS`, plus the
  transport's), as RCCL's network transport and proxy are NCCL's (src/transport/net_ib.cc,
  src/proxy.cc), while model 5's NET row is a weight its tuner was fitted with (Ring/Simple
  320 µs a step, tuning.cc:231), not a latency the kernels pay: no multi-node RCCL measurement
  went into this; Ring Simple's pipeline
  fills as NCCL's (the same 2 MiB chunk: ``ALLREDUCE_CHUNKSTEPS`` = NCCL_STEPS/2 = 4 steps of
  4 MiB / 8, src/include/collectives.h:16, src/include/device.h:32, src/init.cc:839).
"""

from __future__ import annotations

from dataclasses import replace

from simulator.model.execution import (
    KERNELS,
    NET_SHARE,
    PROTOCOL_SHARE,
    NcclCharges,
    fill_s,
    network_latency_us,
    nic_Bps,
)
from simulator.model.machine import Machine
from simulator.model.nccl_terms import Hardware, NcclAlgorithm, Protocol
from simulator.model.rccl import GFX942, RcclSystem, RcclTuning
from simulator.model.topology import NET_LINK, NVLINK, PCIE

RING_DUPLICATES = 2
"""RCCL duplicates its graph's channels ``nc`` = 2 times for 8 ranks on gfx94x (src/init.cc:1471;
connect.cc:640-643: nc = min(maxNchannels / nChannels, nc))."""


def rccl_tuning(machine: Machine) -> RcclTuning:
    """The tuning model RCCL selects on ``machine``: model 5 (:data:`~simulator.model.rccl.
    GFX942`), the one every 8-GPU all-xGMI rome model names."""
    return GFX942


def rccl_system(machine: Machine) -> RcclSystem:
    """RCCL's view of ``machine``: its Ring and Tree graphs (28 channels × 12 GB/s on an 8-GPU
    node, :meth:`~simulator.model.rccl.RcclTuning.graph`; across nodes ASSUMED the same, no
    multi-node RCCL log having been read), each with the transport's ``latencyInter``."""
    tuning = rccl_tuning(machine)
    gpus = max(machine.layout.ranks_per_host)
    graph = replace(tuning.graph(gpus), latency_inter_us=network_latency_us(machine))
    return RcclSystem(machine.ranks, machine.layout.host_count,
                      {NcclAlgorithm.RING: graph, NcclAlgorithm.TREE: graph}, machine.nccl.cpu,
                      tuning)


def ring_channels(machine: Machine) -> int:
    """The channels RCCL's ring runs on one host: its graph's rings, duplicated (56 on an 8-GPU
    MI300X node)."""
    return len(rccl_tuning(machine).rings) * RING_DUPLICATES


def with_rings(machine: Machine) -> Machine:
    """``machine`` with RCCL's rings as its channels' orders, where its hosts hold 8 GPUs (the
    rome models' ``nGpus``): on one host the 28 rings of rome_model_79; across hosts the 8
    orders of rome_model_81, forward on even hosts and reversed on odd ones, chained host
    after host (an odd host count leaves its last hop off the rail: RCCL's ``ringTail``
    orders for that case, rome_models.cc:1876-1890, are not modelled). Unchanged elsewhere."""
    layout = machine.layout
    if layout.ranks_per_host != frozenset({8}):
        return machine
    tuning = rccl_tuning(machine)
    hosts = layout.host_count
    if hosts == 1:
        rings = tuning.rings
    else:
        rings = tuple(tuple(host * 8 + gpu for host in range(hosts)
                            for gpu in (order if host % 2 == 0 else order[::-1]))
                      for order in tuning.net_rings)
    return replace(machine, layout=replace(layout, rings=rings))


def rccl_charges(machine: Machine, family: NcclAlgorithm, protocol: Protocol,
                 size_bytes: int = 0, channels: int = 1) -> NcclCharges:
    """What RCCL's ``family`` with ``protocol`` charges on ``machine`` for an allreduce of
    ``size_bytes`` run on ``channels`` channels: RCCL's base latency and step latencies (the
    network's with the transport's latency, twice for Simple), each xGMI link at RCCL's rate ×
    the protocol's share, the network as NCCL's (``NET_BW``, RCCL's topo.h:30 too), the proxy's
    ``getNetOverhead`` on several hosts, and Ring Simple's fill. ValueError for a pair RCCL does
    not run on these GPUs (LL128 off on gfx942; NVLS, CollNet, PAT absent)."""
    tuning = rccl_tuning(machine)
    if (family, protocol) not in tuning.base_latency_us:
        raise ValueError(f"RCCL runs Ring and Tree only on AMD Instinct GPUs, not "
                         f"{family.value}")
    if protocol is Protocol.LL128 and not tuning.ll128:
        raise ValueError("RCCL runs LL128 by default only on MI200 (gfx90a; src/graph/"
                         "tuning.cc:510-516), not on these GPUs")
    nodes = machine.layout.host_count
    simple = protocol is Protocol.SIMPLE
    steps_us = {hw: tuning.hw_latency_us[hw, family, protocol] for hw in Hardware}
    exposed = nodes > 1 and max(machine.layout.ranks_per_host) == 1
    steps_us[Hardware.NET] = (KERNELS.hw_latency_us[Hardware.NET, NcclAlgorithm.TREE if exposed
                                                    else family, protocol]
                              + network_latency_us(machine) * (2 if simple else 1))
    link = tuning.xgmi_link_GBps * 1e9 * PROTOCOL_SHARE[protocol]
    rates: dict[str, float | None] = {NVLINK: link, PCIE: None, NET_LINK: None}
    gpus = max(machine.layout.ranks_per_host)
    rate = (gpus - 1) * link
    nic = nic_Bps(machine)
    if nodes > 1 and nic:  # one channel a rail across hosts, as NCCL's
        channels = gpus
        rate = gpus * nic * NET_SHARE * PROTOCOL_SHARE[protocol]
    proxy_s = (tuning.net_overhead_us[machine.nccl.cpu] * (3 if simple else 1) * 1e-6
               if nodes > 1 else 0.0)
    base = tuning.base_latency_us[family, protocol] * 1e-6 + machine.nccl.launch_s
    return NcclCharges(protocol, base, {hw: us * 1e-6 for hw, us in steps_us.items()}, rates,
                       fill_s(family, protocol, size_bytes, machine.ranks, channels, rate),
                       proxy_s, NET_SHARE)
