"""Data-parallel training steps: models' gradients, DDP's buckets, and the step's timeline of
compute and allreduces on the simulated fabric (docs/training.md)."""
