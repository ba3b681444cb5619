"""Phases shared by several algorithms, each program beside its closed form.

A phase is a program fragment composed with ``yield from`` that runs along a logical ring or
chain given as a sequence of ranks, over a tree given to each rank as its
:class:`~simulator.algorithms.phases.tree.TreeNode`, or among recursive partners, so one algorithm
can run it inside a host, across hosts, or on a whole group with the same code. Each module holds
the programs of one family and their closed forms (``ring_pass`` and ``ring_pass_s``, ...), so
composing a new algorithm from phases finds both in one place.

- :mod:`.pieces`: a span as pipeline pieces over one connection (send, receive, swap);
- :mod:`.ring`: passes around a ring, chains along it;
- :mod:`.tree`: reduce up, broadcast down, both overlapped;
- :mod:`.recursive`: the fold, recursive halving and doubling;
- :mod:`.swing`, :mod:`.bine`: the butterflies (partners, block order) those phases run for Swing
  and Bine;
- :mod:`.direct`: every rank straight to every other;
- :mod:`.pat`: NCCL's PAT order, binomial trees to the ranks ±2^d in aggregated steps.

Part of :mod:`simulator.algorithms`, with its row of the layer table (docs/design.md §1).
May import: :mod:`simulator.model`, :mod:`simulator.units`, :mod:`simulator.errors`; numpy.
Never SimPy, pandas, matplotlib, the engine, scenario files or output.
"""
