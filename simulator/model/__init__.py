"""The model: what is simulated, as plain values. Collectives and reduction operators, spans of a
buffer, topology builders (networkx graphs), routes, and the :class:`~.machine.Machine` that
algorithms, closed forms and the engine all see; and what a run did on it besides taking its
time (:mod:`.activity`: link usage, the bottleneck, the timeline), which the engine records and
output formats; and graph analysis of a topology (:mod:`.analysis`: hops, bisection, the
numbers ``topo`` prints).

May import: :mod:`simulator.units`, :mod:`simulator.limits`, :mod:`simulator.errors`,
:mod:`simulator.inputs` (a graph file read safely), :mod:`simulator.xmlsafe` (NCCL's topology
file read safely); networkx, numpy, ml_dtypes (bfloat16). Never SimPy, pandas, matplotlib, nor
any layer above: the engine, algorithms, scenario files or output.
"""
