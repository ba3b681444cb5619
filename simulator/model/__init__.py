"""The model: what is simulated, as plain values. Collectives and reduction operators, spans of a
buffer, topology builders (networkx graphs), routes, and the :class:`~.machine.Machine` that
algorithms, closed forms and the engine all see; and what a run did on it besides taking its
time (:mod:`.activity`: link usage, the bottleneck, the timeline), which the engine records and
output formats.

May import: networkx, numpy, :mod:`simulator.units`, :mod:`simulator.limits`,
:mod:`simulator.errors`. Never SimPy, the engine, algorithms, scenario files or output.
"""
