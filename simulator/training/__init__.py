"""Data-parallel training steps: models' gradients, DDP's buckets, and the step's timeline of
compute and allreduces on the simulated fabric (docs/training.md).

May import: :mod:`simulator.units`, :mod:`simulator.errors`, numpy (torch only inside
:mod:`.torchnet` and the child process of :mod:`.factory`, when a module is given). Never SimPy,
pandas, matplotlib or the engine: models, DDP's buckets and the step's arithmetic as data, which
the trainer times and output formats."""
