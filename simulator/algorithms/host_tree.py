"""The trees NCCL builds across hosts: a binary tree over the hosts and its mirror (or shift), the
"double binary tree" of NCCL ≥ 2.4, which its Tree, NVLSTree and CollNet algorithms span hosts with.

Worked from NVIDIA/nccl ``src/graph/trees.cc`` (``ncclGetBtree``, ``ncclGetDtree``; read at
v2.30.7-1, commit 5067397c): host 0 is the root of the first tree, with one child, the largest
power of two below the host count; a host h ≠ 0 whose lowest set bit is b has parent
(h xor b) | 2b, or h xor b where that is out of range, and children h - b/2 (``down0``) and the
largest h + b/2^i in range (``down1``). The second tree mirrors the first (host h plays the part
of host n-1-h) when the host count n is even, and shifts it by one host (h plays h-1's part) when
n is odd, so that no host is interior in both trees. NCCL's ASCII drawings in trees.cc are this
module's doctests.

Which GPU of a host joins the inter-host tree, and through which of its ranks the children
attach, is the business of the algorithms (``connectTrees`` in src/graph/connect.cc); this module
holds only the shape over host indices.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HostNode:
    """A host's place in one inter-host tree: its parent host (None at the root), its children in
    NCCL's two slots (``down0``, ``down1``; None where empty), and which slot of its parent it
    fills (``child_slot`` 0 or 1, NCCL's ``parentChildType``; 0 at the root)."""

    parent: int | None
    down0: int | None
    down1: int | None
    child_slot: int = 0

    @property
    def children(self) -> tuple[int, ...]:
        """The children that exist, ``down0`` first."""
        return tuple(child for child in (self.down0, self.down1) if child is not None)


def binary_host_tree(host: int, hosts: int) -> HostNode:
    """``host``'s node in NCCL's binary tree over hosts 0..hosts-1 (``ncclGetBtree``).

    >>> [binary_host_tree(h, 14).children for h in (0, 8, 4, 12, 10, 13)]
    [(8,), (4, 12), (2, 6), (10, 13), (9, 11), ()]
    >>> binary_host_tree(13, 14)  # 13 → 12 (its would-be parent 14 is out of range)
    HostNode(parent=12, down0=None, down1=None, child_slot=1)
    """
    if not 0 <= host < hosts:
        raise ValueError(f"host {host} is not one of 0..{hosts - 1}")
    bit = 1
    while bit < hosts and not bit & host:
        bit <<= 1
    if host == 0:
        return HostNode(None, None, bit >> 1 if hosts > 1 else None)
    parent = (host ^ bit) | (bit << 1)
    if parent >= hosts:
        parent = host ^ bit
    low = bit >> 1
    if low == 0:
        return HostNode(parent, None, None, 0 if host < parent else 1)
    down1 = host + low
    while down1 >= hosts:
        low >>= 1
        down1 = host + low
    return HostNode(parent, host - (bit >> 1), down1 if low else None, 0 if host < parent else 1)


def double_host_tree(host: int, hosts: int) -> tuple[HostNode, HostNode]:
    """``host``'s nodes in NCCL's two inter-host trees (``ncclGetDtree``): the binary tree, and
    its mirror for an even host count or its shift by one host for an odd one.

    >>> first, second = zip(*(double_host_tree(h, 12) for h in range(12)))
    >>> [h for h in range(12) if second[h].parent is None], second[11].children, second[3].children
    ([11], (3,), (7, 1))
    >>> first, second = zip(*(double_host_tree(h, 13) for h in range(13)))
    >>> [h for h in range(13) if second[h].parent is None], second[1].children, second[9].children
    ([1], (9,), (5, 0))
    """
    first = binary_host_tree(host, hosts)
    if hosts % 2:
        def back(h: int | None) -> int | None:
            return None if h is None else (h + 1) % hosts
        base = binary_host_tree((host - 1) % hosts, hosts)
    else:
        def back(h: int | None) -> int | None:
            return None if h is None else hosts - 1 - h
        base = binary_host_tree(hosts - 1 - host, hosts)
    return first, HostNode(back(base.parent), back(base.down0), back(base.down1), base.child_slot)


def host_depth(host: int, hosts: int, tree: int) -> int:
    """How many edges lie between ``host`` and the root of NCCL's inter-host tree ``tree`` (0 or
    1, :func:`double_host_tree`'s), walked up parent by parent.

    >>> [host_depth(h, 16, 0) for h in (0, 8, 4, 2, 1)]
    [0, 1, 2, 3, 4]
    """
    depth, parent = 0, double_host_tree(host, hosts)[tree].parent
    while parent is not None:
        depth, parent = depth + 1, double_host_tree(parent, hosts)[tree].parent
    return depth
