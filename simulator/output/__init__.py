"""Output: what comes out of a run. The results' rows and columns, the nccl-tests-style table,
and the files (CSV, JSON settings, PNG figures, Parquet) written through one registry of writers,
kept up to date point by point while a run runs (:mod:`.stream`; :mod:`.outlook` says what is
coming before it starts); what a run did on its links and when (``--links``: :mod:`.links`,
:mod:`.link_figure`; ``--trace``: :mod:`.trace`; both asked through :mod:`.observed`); and what
a topology is made of (``topo``: its numbers, :mod:`.fabric`, and its drawing,
:mod:`.fabric_figure`).

May import: :mod:`simulator.scenario` (to describe the settings), :mod:`simulator.algorithms`
(their names), :mod:`simulator.model`, :mod:`simulator.units`, :mod:`simulator.limits`,
:mod:`simulator.errors`, the package's version, pandas and matplotlib. Never the engine: output
only formats what a run computed.
"""
