"""Output: what comes out of a run. The results' rows and columns, the nccl-tests-style table,
and the files (CSV, JSON settings, PNG figures) written through one registry of writers; and what
a topology is made of (``topo``: its numbers, :mod:`.fabric`, and its drawing, :mod:`.fabric_figure`).

May import: :mod:`simulator.scenario` (to describe the settings), :mod:`simulator.algorithms`
(their names), :mod:`simulator.model`, :mod:`simulator.units`, :mod:`simulator.limits`,
:mod:`simulator.errors`, the package's version, pandas and matplotlib. Never the engine: output
only formats what a run computed.
"""
