"""Training steps: models' gradients, DDP's buckets and the step's timeline of compute and
allreduces; parallel layouts (TP, PP, DP, EP, ZeRO) as a step's execution graph, and its
execution with the links shared (docs/training.md).

May import: :mod:`simulator.model` (collectives' kinds), :mod:`simulator.units`,
:mod:`simulator.errors`, numpy (torch only inside :mod:`.torchnet` and the child process of
:mod:`.factory`, when a module is given; protobuf only inside :mod:`.chakra_schema`, when a
Chakra trace is read or written). Never SimPy, pandas, matplotlib or the engine: models,
layouts, DDP's buckets, a step's execution graph and its execution as data, which the trainer
times and output formats."""
