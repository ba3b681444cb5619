"""NCCL's inter-host trees (src/graph/trees.cc) against the construction worked by hand."""

from __future__ import annotations

import pytest

from simulator.algorithms.host_tree import HostNode, binary_host_tree, double_host_tree

# (parent, down0, down1, child_slot) of every host, worked by hand from ncclGetBtree/ncclGetDtree
BY_HAND: dict[int, tuple[list[tuple[int | None, int | None, int | None, int]], ...]] = {
    1: ([(None, None, None, 0)], [(None, None, None, 0)]),
    2: ([(None, None, 1, 0), (0, None, None, 1)],            # 0 → 1
        [(1, None, None, 1), (None, None, 0, 0)]),           # mirror: 1 → 0
    3: ([(None, None, 2, 0), (2, None, None, 0), (0, 1, None, 1)],   # 0 → 2 → 1
        [(1, 2, None, 1), (None, None, 0, 0), (0, None, None, 0)]),  # shift: 1 → 0 → 2
    4: ([(None, None, 2, 0), (2, None, None, 0), (0, 1, 3, 1), (2, None, None, 1)],
        [(1, None, None, 1), (3, 2, 0, 1), (1, None, None, 0), (None, None, 1, 0)]),
}


@pytest.mark.parametrize("hosts", sorted(BY_HAND))
def test_trees_match_the_construction_worked_by_hand(hosts: int) -> None:
    for tree, expected in enumerate(BY_HAND[hosts]):
        got = [double_host_tree(host, hosts)[tree] for host in range(hosts)]
        assert got == [HostNode(*node) for node in expected]


def test_the_first_tree_is_ncclgetbtree_of_trees_cc_drawing() -> None:
    # trees.cc's drawing of 14 ranks: 0 → 8; 8 → 4, 12; 4 → 2, 6; 12 → 10, 13; 10 → 9, 11
    children = {h: binary_host_tree(h, 14).children for h in range(14)}
    assert {h: c for h, c in children.items() if c} == {
        0: (8,), 8: (4, 12), 4: (2, 6), 2: (1, 3), 6: (5, 7), 12: (10, 13), 10: (9, 11)}


@pytest.mark.parametrize("hosts", range(1, 70))
def test_both_trees_span_every_host_and_no_host_is_interior_in_both(hosts: int) -> None:
    trees = list(zip(*(double_host_tree(host, hosts) for host in range(hosts)), strict=True))
    for nodes in trees:
        assert sum(node.parent is None for node in nodes) == 1
        for host, node in enumerate(nodes):
            if node.parent is not None:  # the slot a host fills is the one its parent names
                parent = nodes[node.parent]
                assert (parent.down0, parent.down1)[node.child_slot] == host
            assert all(nodes[child].parent == host for child in node.children)
    # the point of the second tree: a host interior in one is a leaf of the other (the mirror
    # swaps even and odd hosts); the shift of an odd count keeps host 0 interior in both
    interior = [{h for h, node in enumerate(nodes) if node.children} for nodes in trees]
    assert interior[0] & interior[1] <= ({0} if hosts % 2 else set())


def test_a_host_outside_the_tree_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"^host 4 is not one of 0\.\.3$"):
        binary_host_tree(4, 4)
