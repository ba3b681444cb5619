"""The network's transports, and what a message costs on each beyond the step latency NCCL's
cost model gives every network step (``hwLat`` NET,
:attr:`~simulator.model.nccl_versions.Tuning.hw_latency_us`).

A transport is a property of the fabric (``transport:`` of the ``dgx`` and ``cluster``
builders): the network plugin NCCL sends through. Its cost per message enters NCCL's model
as the plugin's advertised latency: ``ncclNetProperties_t.latency``, which the topology search
copies into every graph (``graph->latencyInter = net->net.latency``, src/graph/search.cc:745)
and tuning.cc adds to every network step (``interLat += graphs[a]->latencyInter``,
src/graph/tuning.cc:389), once more for Simple, whose receiver flushes the data it got before
the GPU reads it (``if (p == NCCL_PROTO_SIMPLE) interLat += graphs[a]->latencyInter``, "the
flush extra latency", tuning.cc:391; the flush itself is ``ncclNet->iflush`` in
``recvProxyProgress``, src/transport/net.cc). The simulated execution charges the same terms
(:func:`~simulator.model.execution.nccl_charges`), so the tuner and the simulation agree on
them.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum


class Transport(Enum):
    """The network plugin a fabric's messages go through."""

    IB = "ib"
    """NCCL's InfiniBand verbs transport (src/transport/net_ib/), GPUDirect RDMA."""
    ROCE = "roce"
    """RDMA over Converged Ethernet: the same verbs transport (net_ib runs RoCE v2 ports too)."""
    TCP = "tcp"
    """NCCL's socket transport (src/transport/net_socket.cc): TCP through host memory."""
    TCPXO = "tcpxo"
    """GCP's GPUDirect-TCPXO plugin (A3 Mega): TCP with payloads straight to GPU memory."""
    EFA = "efa"
    """AWS's Elastic Fabric Adapter through the aws-ofi-nccl plugin (libfabric's ``efa``
    provider, SRD), as on p4d and p5 instances."""


LATENCY_US: Mapping[Transport, float] = {
    Transport.IB: 0.0, Transport.ROCE: 0.0, Transport.TCP: 0.0, Transport.TCPXO: 50.0,
    Transport.EFA: 75.0,
}
"""The plugin's advertised latency per network step (``latencyInter``, µs).

- IB and RoCE: 0, as ``ncclIbGetProperties`` sets it (``props->latency = 0; // Not set``,
  src/transport/net_ib/init.cc:558): their cost is the NET ``hwLat`` alone.
- TCP: 0, as ``ncclNetSocketGetProperties`` sets it (src/transport/net_socket.cc:174). NCCL's
  model gives sockets no cost of their own; no measurement here says what they cost, so none
  is added (ASSUMED equal to NCCL's model, unvalidated).
- TCPXO: FITTED to the only public TCPXO small-message figure, the 2 × 8 H100 A3 Mega floor
  (docs/reference/published-measurements.md §1.3a: 8 B in 123.5 µs in place, 135.8 out of
  place): a two-node tree or ring crosses the network twice, so (≈130 − 40) / 2 ≈ 45 µs a
  step; checked against the same sweep's 1 MiB point (docs/fidelity.md). TCPXO's plugin is
  closed source; its receive path (header split into GPU bounce buffers, then NCCL's device
  unpack, ``NCCL_NET_DEVICE_UNPACK``) is where such a cost would come from.
- EFA: 75, what aws-ofi-nccl advertises on p4d.24xlarge, p4de and p5 (``.latency = 75.0`` in
  ``platform_data_map``, src/platform-aws.cpp:87, copied into ``props->latency`` by
  ``ofi_nccl_net_latency``, src/platform-aws.cpp:771-786 and
  src/nccl_ofi_interface_nvidia.cpp:126; aws/aws-ofi-nccl at commit 2daf7d30). The plugin
  chose it by measurement ("Our experiments showed that a value below 75µs is slightly better
  for large deployments, but makes NCCL choose the wrong algorithm for the 2 nodes case",
  commit d87d61e0, 2023-05-31); before that commit it advertised 150 on every platform. Newer
  instances (p5en, p6) advertise 35 (platform-aws.cpp:154); this figure is p4d's and p5's.
"""


def latency_inter_us(transport: Transport, nodes: int) -> float:
    """``latencyInter`` of a communicator over ``nodes`` hosts: the transport's latency, 0 on
    one host (no network step)."""
    return LATENCY_US[transport] if nodes > 1 else 0.0
