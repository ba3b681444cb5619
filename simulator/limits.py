"""Input limits, each with what it protects: a run must fit the machine it runs on.

The figures assume the machine CI and developers share (2 cores, 24 GiB); a scenario beyond a
limit is refused with an exit-2 error naming the field, before anything is simulated.
"""

MAX_RANKS = 8192
"""GPUs per topology. A ring allreduce of p ranks is 2p(p-1) messages: the vectorised engine
holds every message of a schedule at once, ~170 bytes each (a 4096-rank ring, 33.5 million
messages, peaked at 5.8 GB resident and took 51 s; docs/benchmark.md), so 8192 ranks (134
million) is about what fits in 24 GiB; the SimPy engine would take days."""

MAX_MESSAGES = 120_000_000
"""Messages of one schedule on the vectorised engine, which holds them all at once at ~170 bytes
each (5.8 GB for a 4096-rank ring's 33.5 million): 120 million is ~20 GB of the 24 GiB. Pipeline
pieces multiply a schedule's messages, so this is checked on the built schedule, before the run."""

MAX_FULLY_CONNECTED = 1024
"""GPUs of ``fully_connected``, which has p(p-1) directed links: 1024 GPUs are a million."""

MAX_PIECES = 1 << 20
"""Pipeline pieces per buffer (each is a message on every hop it crosses)."""

MAX_SIZE_BYTES = 1 << 40
"""Bytes per rank: 1 TiB, beyond any GPU's memory."""

DEFAULT_PROXY_ELEMENTS = 1 << 14
"""Elements per rank actually moved and verified (``--proxy-elements``): enough to give every
chunk of a 1024-rank ring 16 elements, while a buffer of any size stays a few MiB per rank."""

PROXY_BUDGET_BYTES = 2 << 30
"""Memory the ranks' proxy buffers may take together (the inputs, the expected result and
per-message copies come on top of it)."""
