"""Graph analysis of a topology: what it is made of, computed from the graph alone. Hop distances
and the GPUs' diameter (:mod:`.hops`, bit-parallel BFS), the bisection bandwidth (:mod:`.bisection`,
max-flow on a graph shrunk exactly), and the summary of both with the tiers, injection and
oversubscription (:mod:`.fabric`), which ``python -m simulator topo`` prints and output formats.

Part of the model layer (docs/design.md §1). May import: :mod:`simulator.model`,
:mod:`simulator.units`, :mod:`simulator.limits`, :mod:`simulator.errors`,
:mod:`simulator.inputs`, :mod:`simulator.xmlsafe` (the model layer's row); networkx, numpy. Never
SimPy, pandas, matplotlib, the engine, algorithms, scenario files or output: numbers, not text or
figures.
"""
