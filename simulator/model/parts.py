"""What topology builders are made of: the kinds of their parameters (how a scenario value is
parsed and checked), the host and NCCL parameters the DGX-like builders share
(:class:`HostParams`), and the graph's vocabulary: node kinds, link kinds and full-duplex
cables.

Kept apart from the builders so that every builder module (:mod:`.topology`, :mod:`.clos`,
:mod:`.dragonfly`, :mod:`.graphfile`) shares one definition without importing another.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Annotated

import networkx as nx

from simulator.errors import UnitError, quoted
from simulator.model.nccl import CpuVendor
from simulator.model.transport import Transport
from simulator.units import (
    parse_bandwidth,
    parse_count,
    parse_counts,
    parse_file,
    parse_flag,
    parse_ratio,
    parse_seed,
    parse_time,
)

GPU, NIC, SWITCH = "gpu", "nic", "switch"


class Param(Enum):
    """The kind of a builder parameter: how a scenario value is parsed from text and checked."""

    COUNT = "a whole number ≥ 1"
    COUNTS = "a list of whole numbers ≥ 1"
    BANDWIDTH = "a bandwidth like '25GB/s'"
    TIME = "a time like '500ns'"
    FLAG = "true or false"
    RATIO = "a ratio ≥ 1 like 3 or '3:1'"
    SEED = "a whole number ≥ 0"
    FILE = "a file path"
    TRANSPORT = "a transport: ib, roce, tcp, tcpxo or efa"
    CPU = "a host CPU: intel, amd or arm"

    def parse(self, value: object) -> ParamValue:
        """The value of a scenario field (``'25GB/s'`` -> 25e9); ValueError saying what was
        expected."""
        return _PARSE[self](value)

    def check(self, value: object) -> None:
        """ValueError unless ``value`` is already a valid value of this kind in SI units
        (for topologies built in code rather than read from a file)."""
        if self is Param.COUNT:
            parse_count(value)
        elif self is Param.COUNTS:
            if not isinstance(value, tuple):
                raise ValueError(f"expected a tuple of whole numbers ≥ 1, got {quoted(value)}")
            parse_counts(list(value))
        elif self is Param.FLAG:
            parse_flag(value)
        elif self in (Param.RATIO, Param.SEED, Param.FILE, Param.TRANSPORT, Param.CPU):
            self.parse(value)
        elif (isinstance(value, bool) or not isinstance(value, (int, float))
              or not math.isfinite(value) or value < 0 or (self is Param.BANDWIDTH and value == 0)):
            unit = "bytes/s" if self is Param.BANDWIDTH else "seconds"
            sign = "positive" if self is Param.BANDWIDTH else "non-negative"
            raise ValueError(f"expected a {sign} number of {unit}, got {quoted(value)}")


ParamValue = int | float | bool | tuple[int, ...] | str
Count = Annotated[int, Param.COUNT]
Counts = Annotated[tuple[int, ...], Param.COUNTS]
Bandwidth = Annotated[float, Param.BANDWIDTH]
Time = Annotated[float, Param.TIME]
Flag = Annotated[bool, Param.FLAG]
Ratio = Annotated[float, Param.RATIO]
Seed = Annotated[int, Param.SEED]
File = Annotated[str, Param.FILE]
TransportName = Annotated[str, Param.TRANSPORT]
CpuName = Annotated[str, Param.CPU]


def _choice(values: tuple[str, ...], what: str) -> Callable[[object], ParamValue]:
    """A parser of one of ``values``; UnitError naming them otherwise."""
    def parse(value: object) -> ParamValue:
        if not isinstance(value, str) or value not in values:
            raise UnitError(f"expected {what}, got {quoted(value)}")
        return value
    return parse


_PARSE: dict[Param, Callable[[object], ParamValue]] = {
    Param.COUNT: parse_count, Param.COUNTS: parse_counts, Param.BANDWIDTH: parse_bandwidth,
    Param.TIME: parse_time, Param.FLAG: parse_flag, Param.RATIO: parse_ratio,
    Param.SEED: parse_seed, Param.FILE: parse_file,
    Param.TRANSPORT: _choice(tuple(t.value for t in Transport), Param.TRANSPORT.value),
    Param.CPU: _choice(tuple(c.value for c in CpuVendor), Param.CPU.value),
}


NVLINK, PCIE, NET_LINK = "nvlink", "pcie", "net"
"""What a link is (edge attribute ``link``): GPU interconnect, PCIe, or the network. The ideal
model ignores it; the NCCL execution model times each path by the slowest kind it crosses."""


def gpu_place(name: str) -> tuple[int, int] | None:
    """(host, GPU index) of a GPU node named ``n{host}.gpu{i}`` as the host builders name them,
    None for any other node.

    >>> gpu_place("n3.gpu5"), gpu_place("n3.nic5")
    ((3, 5), None)
    """
    host, _, gpu = name.partition(".gpu")
    if not (host.startswith("n") and host[1:].isdigit() and gpu.isdigit()):
        return None
    return int(host[1:]), int(gpu)


def cable(graph: nx.DiGraph, a: str, b: str, bandwidth: float, latency: float,
           link: str = NVLINK) -> None:
    """Add a full-duplex cable: two directed edges with the same bandwidth, latency and kind."""
    graph.add_edge(a, b, bandwidth=float(bandwidth), latency=float(latency), link=link)
    graph.add_edge(b, a, bandwidth=float(bandwidth), latency=float(latency), link=link)


@dataclass(frozen=True)
class HostParams:
    """The host and NCCL parameters the builders of DGX-like hosts share (``dgx``, ``cluster``;
    ``nccl_xml`` fills part of them from its file): one block, passed once as the builder's
    ``hosts`` and read field by field as the builder's own parameters
    (:class:`~simulator.model.topology.Builder`), so a scenario file names them flat as before
    (``compute_capability: 90``). 0 or the default: not stated, or let the NCCL execution model
    derive it. A new NCCL knob is one field here, for every such builder.

    >>> HostParams(compute_capability=90, nvlinks=18).graph_attributes()["nvlinks"]
    18
    """

    nic_message_latency: Time = 0.0
    """A per-message cost paid by every transfer crossing a NIC."""
    nvswitch_reduction: Flag = False
    """Whether the hosts' NVSwitches reduce in the switch (NVLink SHARP), as ``nvls`` needs."""
    nvswitch_reduction_latency: Time = 0.0
    """How long an in-NVSwitch reduction waits before its result is multicast."""
    compute_capability: Count = 0
    """The GPUs' compute capability (90 for H100)."""
    nvlinks: Count = 0
    """NVLink links per GPU."""
    nccl_nvlink_bandwidth: Bandwidth = 0.0
    """The NVLink rate NCCL achieves per GPU (0: derived)."""
    nccl_nvls_bandwidth: Bandwidth = 0.0
    """The rate of NVLS (0: derived)."""
    nccl_launch_latency: Time = 0.0
    """A launch latency added to NCCL's base latency."""
    transport: TransportName = "ib"
    """The network's transport (:mod:`~simulator.model.transport`)."""
    cpu: CpuName = "intel"
    """The hosts' CPU vendor (its network overhead, its LL cap)."""
    nccl_net_bandwidth: Bandwidth = 0.0
    """The rate NCCL achieves per NIC (0: derived)."""
    nccl_net_latency: Time = 0.0
    """A latency per network step beyond NCCL's and the transport's."""
    sharp: Flag = False
    """Whether the network's switches reduce in the switch (InfiniBand SHARP, for CollNet)."""
    sharp_latency: Time = 0.0
    """How long an in-network reduction waits."""

    def graph_attributes(self) -> dict[str, int | float | str]:
        """The graph attributes that state the hosts' GPUs, their CPU and the network's
        transport for the NCCL execution model (read by
        :meth:`~simulator.model.machine.Machine.of`)."""
        return {"compute_capability": int(self.compute_capability), "nvlinks": int(self.nvlinks),
                "nccl_nvlink_bandwidth": float(self.nccl_nvlink_bandwidth),
                "nccl_nvls_bandwidth": float(self.nccl_nvls_bandwidth),
                "nccl_launch_latency": float(self.nccl_launch_latency),
                "transport": Transport(self.transport).value, "cpu": CpuVendor(self.cpu).value,
                "nccl_net_bandwidth": float(self.nccl_net_bandwidth),
                "nccl_net_latency": float(self.nccl_net_latency)}

    def add_network_switch(self, graph: nx.DiGraph, name: str, tier: int) -> None:
        """A switch of the network (tier 1 and up); with ``sharp`` it reduces in the switch as
        InfiniBand SHARP does for NCCL's CollNet (node attributes ``reduction`` and
        ``reduction_latency``, as an NVSwitch's for NVLS)."""
        graph.add_node(name, kind=SWITCH, tier=tier)
        if self.sharp:
            graph.nodes[name].update(reduction=True, reduction_latency=float(self.sharp_latency))

    def add_nvswitch(self, graph: nx.DiGraph, host: int) -> str:
        """Host ``host``'s NVSwitch (tier 0), reducing in the switch or not; its node name."""
        name = f"n{host}.nvswitch"
        graph.add_node(name, kind=SWITCH, tier=0, reduction=bool(self.nvswitch_reduction),
                       reduction_latency=float(self.nvswitch_reduction_latency))
        return name

    def add_nic(self, graph: nx.DiGraph, name: str) -> None:
        """A NIC, whose crossing costs each transfer ``nic_message_latency``."""
        graph.add_node(name, kind=NIC, latency=float(self.nic_message_latency))


HOST_DEFAULTS = HostParams()
"""Every host parameter at its default: the ``hosts`` a builder takes when none is given."""
