"""Output: formats only, what comes out of a run. The results' rows and columns, the
nccl-tests-style table, and the files (CSV, JSON settings, PNG figures, Parquet) of a run of
sizes and of a training run (:mod:`.training`, :mod:`.training_figure`; a parallel step as it ran:
:mod:`.parallel_figure`, :mod:`.perfetto`), all written through one
registry of writers (:data:`.writers.WRITERS`), kept up to date point by point while a run runs
(:mod:`.stream`; :mod:`.outlook` says what is coming before it starts); what a run did on its
links and when (``--links``: :mod:`.links`, :mod:`.link_figure`; ``--trace``: :mod:`.trace`;
both asked through :mod:`.observed`); and a topology's numbers as text and its drawing
(``topo``: :mod:`.fabric`, :mod:`.fabric_figure`; the numbers themselves are
:mod:`simulator.model.analysis`'s).

May import: :mod:`simulator.scenario` (to describe the settings), :mod:`simulator.training` (its
results), :mod:`simulator.algorithms` (their names), :mod:`simulator.model`,
:mod:`simulator.units`, :mod:`simulator.limits`, :mod:`simulator.errors`,
:mod:`simulator.settings` (how a run went), :mod:`simulator.version`, :mod:`simulator.inputs`
(no output over a file read); pandas and matplotlib.
Never the engine: output only formats what a run computed.
"""
