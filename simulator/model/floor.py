"""The fabric's floor: the least time any data-oblivious algorithm needs to move a collective's
bytes over a machine's links, whatever its schedule (issue 38). Closed forms that claim to be
bounds are held at or above it (tests/test_bounds.py).

The argument is a count of transfers across a cut, at two levels of the machine:

- **per GPU**: every rank's GPU is a domain, its capacity the links leaving (entering) it;
- **per host**: the domains are the parts of the machine joined without a network link (a
  host's GPUs, NVSwitches, PCIe switches and NICs; an NVL72 rack), their capacity the network
  links leaving (entering) them. A machine of one such part has no host cut.

For each element of the buffer, N domains each holding an input, an allreduce needs at least
N − 1 transfers between domains to combine the N inputs anywhere and N − 1 more to give every
domain the result: 2(N − 1) one-way transfers, the minimum of one-way gossip (Harary &
Schwenk, "The communication problem on graphs and digraphs", J. Franklin Inst. 297, 1974;
surveyed by Hedetniemi, Hedetniemi & Liestman, Networks 18, 1988). A transfer's value (an
input, a partial sum, the result) is an element's size whatever it holds, and the algorithms
here are data-oblivious (they move the same bytes for any values and operator). Over S bytes
the domains together send 2(N − 1)·S bytes, so the time is at least that over the sum of
their capacities: with N equal domains of capacity B, 2(N − 1)/N · S / B, Patarasuk & Yuan's
lower bound ("Bandwidth optimal all-reduce algorithms for clusters of workstations",
J. Parallel Distrib. Comput. 69(2), 2009, §3), which is why nccl-tests' busbw factor is
2(p − 1)/p (doc/PERFORMANCE.md). On 8 DGX H100 (8 × 50 GB/s NICs a host) the host cut holds
busbw to 400 · (2·63/64) / (2·7/8) = 450 GB/s.

Where a switch outside the domains reduces (an NVSwitch's NVLink SHARP for the GPU level,
InfiniBand SHARP for the host level) or multicasts, the count falls to what each domain must
send and receive at the least: its input leaves it once and its result enters it once (an
allreduce: S out and S in per domain). Each collective's counts are in :func:`_transfers`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import networkx as nx

from simulator.model.collective import Collective
from simulator.model.machine import Machine
from simulator.model.routing import LinkId


@dataclass(frozen=True)
class Domains:
    """A partition of the ranks into domains for a cut: the domain of every rank, and the
    capacity (bytes/s) of the links leaving and entering each domain, summed."""

    of_rank: tuple[int, ...]
    out_Bps: tuple[float, ...]
    in_Bps: tuple[float, ...]

    @property
    def count(self) -> int:
        """How many domains."""
        return len(self.out_Bps)


@dataclass(frozen=True)
class Floor:
    """The fabric's floor of one collective on one machine, per level (seconds)."""

    gpu_s: float
    host_s: float

    @property
    def seconds(self) -> float:
        """The floor: the tighter of the two levels."""
        return max(self.gpu_s, self.host_s)


def floor(machine: Machine, collective: Collective, size_bytes: float) -> Floor:
    """The fabric's floor of ``collective`` on ``size_bytes`` (the buffer as nccl-tests counts
    it) over ``machine``'s links as its routing rates them (NCCL's charged rates under
    ``execution: nccl``), at the GPU and host levels.

    >>> from simulator.model.topology import switch
    >>> floor(Machine.of(switch(4, 1e9, 0.0)), Collective.ALLREDUCE, 4e9).seconds  # 2·3/4·4
    6.0
    """
    links = machine.routing.capacities()
    network = any(switch.network for switch in machine.reducing_switches)
    return Floor(_cut_s(gpu_domains(machine, links), collective, size_bytes,
                        bool(machine.reducing_switches)),
                 _cut_s(host_domains(machine, links), collective, size_bytes, network))


def floor_s(machine: Machine, collective: Collective, size_bytes: float) -> float:
    """:func:`floor` in seconds: the tighter level's."""
    return floor(machine, collective, size_bytes).seconds


def gpu_domains(machine: Machine, links: Mapping[LinkId, float]) -> Domains:
    """Every rank's GPU a domain, with the capacity of its own links out and in (``links``:
    every link's, as ``machine.routing.capacities()``)."""
    return _domains(links, [frozenset([gpu]) for gpu in machine.placement],
                    tuple(range(machine.ranks)))


def host_domains(machine: Machine, links: Mapping[LinkId, float]) -> Domains:
    """The parts of the machine joined without a network link that hold ranks, with the
    capacity of the network links out of and into each (``links`` as :func:`gpu_domains`')."""
    routing = machine.routing
    inside = nx.Graph()
    inside.add_nodes_from(machine.placement)
    inside.add_edges_from(link for link in links if routing.link_kind(link) != "net")
    part = {node: number for number, nodes in enumerate(nx.connected_components(inside))
            for node in nodes}
    numbers: dict[int, int] = {}
    of_rank = tuple(numbers.setdefault(part[gpu], len(numbers)) for gpu in machine.placement)
    members: list[set[str]] = [set() for _ in numbers]
    for node, number in part.items():
        if number in numbers:
            members[numbers[number]].add(node)
    return _domains(links, [frozenset(nodes) for nodes in members], of_rank)


def _domains(links: Mapping[LinkId, float], members: Sequence[frozenset[str]],
             of_rank: tuple[int, ...]) -> Domains:
    """:class:`Domains` of node sets ``members`` (rank r in ``of_rank[r]``): each one's capacity
    over the links that cross its boundary, out and in."""
    where = {node: number for number, nodes in enumerate(members) for node in nodes}
    out, into = [0.0] * len(members), [0.0] * len(members)
    for link, capacity in links.items():
        source, target = where.get(link[0]), where.get(link[1])
        if source == target:
            continue
        if source is not None:
            out[source] += capacity
        if target is not None:
            into[target] += capacity
    return Domains(of_rank, tuple(out), tuple(into))


def _transfers(collective: Collective, domains: Domains, helped: bool) -> tuple[float, float]:
    """The least bytes, in buffers, all domains together must send and receive across their
    boundaries for ``collective``; ``helped``: a switch outside the domains reduces and
    multicasts.

    Without help a transfer leaves one domain and enters another, so out = in: per element
    2(N − 1) for an allreduce (gossip), N − 1 for the others (a reduce-scatter's element
    combined at its owner's domain, an allgather's reaching every other domain, a broadcast's
    and a reduce's every non-root domain); an all-to-all's blocks and a sendrecv's buffers cross
    exactly where their ranks' domains differ. With help each domain still sends what its input
    bears on elsewhere and receives what it ends with from elsewhere.
    """
    n, ranks = domains.count, len(domains.of_rank)
    if n < 2:
        return 0.0, 0.0
    if collective is Collective.ALLTOALL:
        sizes = [domains.of_rank.count(d) for d in range(n)]
        moved = sum(g * (ranks - g) for g in sizes) / ranks
        return moved, moved
    if collective is Collective.SENDRECV:
        of = domains.of_rank
        moved = float(sum(of[r] != of[(r + 1) % ranks] for r in range(ranks)))
        return moved, moved
    if collective is Collective.ALLREDUCE:
        return (n, n) if helped else (2.0 * (n - 1), 2.0 * (n - 1))
    if not helped:
        return n - 1.0, n - 1.0
    if collective in (Collective.REDUCE_SCATTER, Collective.REDUCE):
        return n - 1.0, 1.0
    return 1.0, n - 1.0  # allgather, broadcast: the owner's or root's bytes leave once


def _cut_s(domains: Domains, collective: Collective, size_bytes: float, helped: bool) -> float:
    """The floor over one level's cut: the bytes out over the capacity out, and in over in."""
    out, into = _transfers(collective, domains, helped)
    if out == 0 and into == 0:
        return 0.0
    return max(out * size_bytes / sum(domains.out_Bps), into * size_bytes / sum(domains.in_Bps))
