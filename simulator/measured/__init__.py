"""Measurements: what real machines did, read in to be set beside the simulation (nccl-tests
output, the JSON it writes with ``-J``, or CSV files of the same numbers).

May import: :mod:`simulator.errors`, :mod:`simulator.inputs` (a log read safely). Nothing of the
simulation (nor SimPy, pandas, matplotlib or numpy): nccl-tests logs in, plain rows out.
"""
