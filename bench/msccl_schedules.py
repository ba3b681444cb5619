"""Write the MSCCL schedules shipped in scenarios/msccl/, in the XML msccl-tools writes
(``ir_to_xml``, old format: ``<algo>`` → ``<gpu>`` → ``<tb>`` → ``<step>``).

    python bench/msccl_schedules.py            # rewrites scenarios/msccl/*.xml

- ``allpairs_8.xml``: the all-pairs allreduce of msccl-tools' ``allreduce_a100_allpairs`` on 8
  GPUs, one chunk per rank: every rank sends chunk c to rank c, which receives the 7 shards of
  its chunk into scratch and reduces them into its chunk in a threadblock of their own (one
  after the other, in the order of peers r+1, r+2, ...), then sends the reduced chunk to every
  other rank.
- ``two_level_ring_16.xml``: a two-level ring allreduce on 2 hosts of 8 GPUs (rank = host × 8 +
  local index), 16 chunks: a ring reduce-scatter inside each host leaves local rank i with
  chunks 2i and 2i+1 summed over its host; a ring across the two hosts among the ranks of local
  index i allreduces them; a ring allgather inside each host spreads them. The schedule of the
  built-in ``hierarchical`` with ``inter: ring``, step for step.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "scenarios" / "msccl"


@dataclass
class Tb:
    """A threadblock being written: its peers, channel and step elements."""

    send: int
    recv: int
    chan: int = 0
    steps: list[str] = field(default_factory=list)

    def step(self, kind: str, src: tuple[str, int], dst: tuple[str, int], cnt: int,
             dep: tuple[int, int] = (-1, -1), hasdep: bool = False) -> int:
        """Append a step; returns its number."""
        s = len(self.steps)
        self.steps.append(
            f'<step s="{s}" type="{kind}" srcbuf="{src[0]}" srcoff="{src[1]}" dstbuf="{dst[0]}" '
            f'dstoff="{dst[1]}" cnt="{cnt}" depid="{dep[0]}" deps="{dep[1]}" '
            f'hasdep="{int(hasdep)}"/>')
        return s


def xml(name: str, ngpus: int, chunks: int, gpus: list[tuple[int, int, list[Tb]]]) -> str:
    """The ``<algo>`` of an in-place allreduce with these GPUs: (id, s_chunks, threadblocks)."""
    channels = 1 + max(tb.chan for _, _, tbs in gpus for tb in tbs)
    lines = [f'<algo name="{name}" proto="Simple" nchannels="{channels}" '
             f'nchunksperloop="{chunks}" ngpus="{ngpus}" coll="allreduce" inplace="1">']
    for gpu, scratch, tbs in gpus:
        lines.append(f'  <gpu id="{gpu}" i_chunks="{chunks}" o_chunks="0" s_chunks="{scratch}">')
        for i, tb in enumerate(tbs):
            lines.append(f'    <tb id="{i}" send="{tb.send}" recv="{tb.recv}" chan="{tb.chan}">')
            lines += [f"      {step}" for step in tb.steps]
            lines.append("    </tb>")
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"


def allpairs(p: int = 8) -> str:
    """All-pairs allreduce on ``p`` GPUs, ``p`` chunks (module docstring)."""
    gpus = []
    for r in range(p):
        peers = [Tb((r + k) % p, (r + k) % p) for k in range(1, p)]
        reducer = Tb(-1, -1)
        for j, tb in enumerate(peers):
            peer = tb.send
            tb.step("s", ("i", peer), ("s", (r - peer - 1) % p), 1)  # chunk peer to its owner
            tb.step("r", ("i", -1), ("s", j), 1, hasdep=True)         # my chunk's shard from peer
        for j in range(p - 1):                                        # reduce the shards in order
            reducer.step("re", ("s", j), ("i", r), 1, dep=(j, 1), hasdep=j == p - 2)
        for tb in peers:
            tb.step("s", ("i", r), ("i", r), 1, dep=(p - 1, p - 2))   # my reduced chunk to peer
            tb.step("r", ("i", -1), ("i", tb.recv), 1)                # peer's reduced chunk
        gpus.append((r, p - 1, [*peers, reducer]))
    return xml("allpairs", p, p, gpus)


def two_level_ring(hosts: int = 2, local: int = 8) -> str:
    """Two-level ring allreduce (module docstring); ``hosts`` must be 2 here (the ring across
    hosts is one reduce-and-forward, one copy)."""
    assert hosts == 2
    gpus = []
    for rank in range(hosts * local):
        host, i = divmod(rank, local)
        right, left = host * local + (i + 1) % local, host * local + (i - 1) % local
        peer = (1 - host) * local + i
        ring, across = Tb(right, left), Tb(peer, peer)

        def pair(c: int) -> tuple[str, int]:
            return "i", 2 * (c % local)                               # intra chunk c: 2 chunks

        # reduce-scatter inside the host: send chunk i-1, then reduce and pass on chunk i-t-2
        ring.step("s", pair(i - 1), pair(i - 1), 2)
        for t in range(local - 2):
            ring.step("rrcs", pair(i - t - 2), pair(i - t - 2), 2)
        done = ring.step("rrc", pair(i), pair(i), 2, hasdep=True)    # chunk i, summed on the host
        # across the hosts: my half of chunk i to the peer, its half back reduced, then mine
        across.step("s", ("i", 2 * i + host), ("i", 2 * i + host), 1, dep=(0, done))
        across.step("rrcs", ("i", 2 * i + 1 - host), ("i", 2 * i + 1 - host), 1)
        last = across.step("r", ("i", -1), ("i", 2 * i + host), 1, hasdep=True)
        # allgather inside the host: send chunk i, then take and pass on chunk i-t-1
        ring.step("s", pair(i), pair(i), 2, dep=(1, last))
        for t in range(local - 2):
            ring.step("rcs", ("i", -1), pair(i - t - 1), 2)
        ring.step("r", ("i", -1), pair(i - local + 1), 2)
        gpus.append((rank, 0, [ring, across]))
    return xml("two_level_ring", hosts * local, 2 * local, gpus)


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in (("allpairs_8.xml", allpairs()), ("two_level_ring_16.xml", two_level_ring())):
        (OUT / name).write_text(text, encoding="utf-8")
        print(OUT / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
