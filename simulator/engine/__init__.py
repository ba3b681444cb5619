"""The engine: when things move. SimPy processes run every rank's program on a flow-level fabric
(max-min fair sharing), with GPUs' reducers, in-switch reduction and real numpy data.

The only package that imports SimPy. May import: :mod:`simulator.algorithms` (the programs and
their requests), :mod:`simulator.model`, :mod:`simulator.settings` (which engine),
:mod:`simulator.limits`, :mod:`simulator.errors`; SimPy, numpy. Never scenario files or output.
"""
