"""Input limits, each with what it protects: a run must fit the machine it runs on.

The figures assume the machine CI and developers share (2 cores, 24 GiB); a scenario beyond a
limit is refused with an exit-2 error naming the field, before anything is simulated.
"""

MAX_RANKS = 65_536
"""GPUs per topology: 8,192 DGX H100 nodes of 8, the largest fabric measured on this machine
(docs/benchmark.md): the `dgx` graph of 139,265 nodes and 393,216 links takes ~2 s and ~1.7 GB,
and `hierarchical` runs there a window of blocks at a time. Beyond the graph, memory follows the
run: a point's schedule and routes are bounded by MEMORY_BUDGET_BYTES, a windowed schedule
holds a few blocks, and verified data by PROXY_BUDGET_BYTES (`verify: false` times a run
without data)."""

MEMORY_BUDGET_BYTES = 16 << 30
"""Memory one point may take to simulate: its schedule (building it included), its routes and
the engine's state. 16 GiB of this machine's 24 GiB, leaving 8 GiB for the graph (~1.7 GB at
MAX_RANKS), verified data (PROXY_BUDGET_BYTES and its copies), the interpreter and whatever
else runs beside it. A point is refused before anything is built where the counts below
predict more (:func:`simulator.plan.plan_point`, from :meth:`Algorithm.footprint
<simulator.algorithms.algorithm.Algorithm.footprint>`), and stopped where only running it
tells (the SimPy engine's messages in flight and flow timers, a traced schedule). The
figures below are measured by ``bench/memory.py`` on this machine (2 cores, 24 GiB; commit
a532ff4 with this check): the peak resident set of a fresh process per point at two sizes,
above the machine it built, the difference divided by the difference in what is counted;
each the worst case, rounded up to 10 bytes."""

VECTOR_ENTRY_BYTES = 300
"""Peak bytes per schedule entry the vectorised engine holds whole, building the schedule and
running it included (the routes of its rank pairs apart, PAIR_BYTES). Measured: a ring of 2
pieces a chunk 170, a ring on 4 channels 213, a tree of 2048 pieces 214, pipelined
halving-doubling 246, a double binary tree 257, hierarchical streamed under NCCL 291
(bench/memory.py); since, nvls_tree's builder 270 (its case alone). A ring pass that comes a
block at a time holds a window of a few blocks (~40 MB at 65,536 ranks), not counted."""

PAIR_BYTES = 760
"""Peak bytes per pair of ranks a point's messages go between: its route (cached for the
closed form and the engine) and the engine's state of a flow on it, which ``direct`` holds for
every pair at once. Measured on ``direct`` as what its peak holds beyond VECTOR_ENTRY_BYTES a
message: 665 for the allreduce (two messages a pair), 750 for the reduce-scatter (one)
(bench/memory.py). So ``direct`` allreduce takes ~1.4 kB per rank pair and stops at ~3,550
ranks."""

TRACE_ENTRY_BYTES = 600
"""Peak bytes per entry of a schedule traced from its program (an algorithm without a builder,
on the vectorised engine): the trace's Python record of each op, then the run. Measured:
``nvls_tree`` 318 (before it had a builder), ``pat`` 597 (bench/memory.py). A trace stops
once it would record more than MEMORY_BUDGET_BYTES of them (~28.6 million entries)."""

SIMPY_HELD_BYTES = 670
"""Peak bytes per message in flight or flow timer pending on the SimPy engine
(:class:`~simulator.engine.fabric.Holding`). Measured on ``direct`` on a switch (every message
posted at once, each new flow re-timing those sharing its links: 15 held a message at 60
ranks): 662 (bench/memory.py); again for issue 40, from 40 to 50 ranks (31,558 then 61,786
held, peaks 25.4 then 45.4 MB above the machine): 661. A SimPy run stops once it holds more
than MEMORY_BUDGET_BYTES of them (~25.6 million), and a point is refused before it runs where
:func:`simulator.plan.simpy_held` counts more (``direct`` beyond ~370 ranks)."""

SLOW_RUN_S = 60.0
"""Seconds a run may be expected to take before it says so, on stderr before its first point
(``--quiet`` too: it is a warning, not the outlook): the points' messages, counted before
they run, times the most a message took to simulate here (below)."""

VECTOR_MESSAGE_S = 20e-6
"""Seconds to simulate one message on the vectorised engine, the most measured on this machine
(2 cores; ``bench/walltime.py``: a ring of 1 MiB on 256 GPUs of a switch, 130,560 messages,
its steady pipeline fast-forwarded in 1,020 instants): 4.6 us with the cores to itself, 18 us
while five other sessions shared them, rounded up."""

VECTOR_FAULTED_MESSAGE_S = 150e-6
"""The same under faults, which break the steady pipeline into many instants: the ring above
with one straggler (18,456 instants), 47 us a message alone, 142 us shared."""

SIMPY_MESSAGE_S = 300e-6
"""Seconds to simulate one message on the SimPy engine: the ring above on SimPy (914,432
events), 111 us a message alone, 272 us shared. ``direct`` costs more a message as its flows
re-time each other (more than 1 ms at 150 ranks), so the estimate is low there."""

MAX_DIST_RANKS = 16_384
"""Ranks of ``simulator.distributed.spawn``, one thread each. Measured on this machine by starting
threads that wait on an event until one fails: the 22,417th fails ("can't start new thread")
when the process reaches the kernel's ``vm.max_map_count`` of 65,530 memory maps, each thread
taking ~2.9 (47,829 maps at 16,384 threads); a 256 KiB stack instead of the default 8 MiB takes
as many (24,617 at 8,192), so a smaller stack does not help. The machine's ``kernel.pid_max`` of
32,768 threads comes next. 16,384 leaves a quarter of the maps to the libraries and threads of
the rest of the process (numpy, torch, Dask), unknown when spawn is called. Measured there:
16,384 threads start in ~12 s and take ~270 MB, and a spawn of as many ranks that return at
once takes ~28 s."""

MAX_FULLY_CONNECTED = 1024
"""GPUs of ``fully_connected``, which has p(p-1) directed links: 1024 GPUs are a million."""

MAX_ALL_TO_ALL_CABLES = MAX_FULLY_CONNECTED * (MAX_FULLY_CONNECTED - 1) // 2
"""Cables a ``dragonfly`` may draw all-to-all (each group's routers among themselves, and one
between every two groups): as many as ``fully_connected`` has at MAX_FULLY_CONNECTED GPUs
(523,776). The rank limit does not bound them: 60,000 groups of one router and one GPU are
60,000 ranks but 1.8 billion global cables, and building them ran out of 2.7 GB in 60 s on this
machine, where this many build in seconds."""

MAX_LOG_CHANNELS = 128
"""Channels an NCCL log's ``Channel NN/MM`` line may count (MM) or name (NN): NCCL runs at most
``MAXCHANNELS`` (src/include/device.h: 32 up to NCCL 2.11, 64 since; ``channels`` takes at most
as many), doubled as a margin for a version that raises it. ``Channel 00/999999999`` made a
list of 10^9 channels (MemoryError)."""

MAX_SIZES = 4096
"""Sizes one scenario may list: a sweep from 1 byte to MAX_SIZE_BYTES by doubling is 41 sizes,
and every step of 4 KiB up to 16 MiB is 4,096. Each size is at least one point, simulated in
~0.1 s to minutes, so 4,096 of them are already hours; a million (an expanded list pasted
whole) ran past 300 s before its first point with no word said."""

MAX_BATCH = 1 << 24
"""Samples a GPU may take per training step (``training.batch``): 16,777,216. The largest batch
of a published run is GPT-3's 3.2 million tokens for all of its GPUs (Brown et al. 2020, Table
2.1: 1,563 sequences of 2,048), so no real step comes near it; a batch of 10^23 was accepted and
gave a step time of thousands of years."""

MAX_PIECES = 1 << 20
"""Pipeline pieces per buffer (each is a message on every hop it crosses)."""

MAX_FLAPS = 10_000
"""Periods of one ``link_flapping`` fault, from its ``at`` to its ``until``: each is two steps
of the capacity timeline (down, up), which both engines stop at (a SimPy timer each, set at the
start; an instant each on the vectorised engine, whose fast-forward never jumps over one).
Measured: a ring of 1 MiB on 8 GPUs of a switch (87 us healthy, 0.03 s to simulate) under
10,000 periods of gpu0's cable, all while it runs (a period of 10 ns or 100 ns), takes 0.8 to
2.4 s a point on either engine."""

MIN_FAULT_FACTOR = 1e-6
"""Least share of its bandwidth a ``link_degraded`` link (or of its reduction bandwidth a
``slow_gpu``) keeps: a millionth leaves a 400 Gb/s NIC 50 kB/s, as good as down (``link_down``
models that). Below it the degraded rate leaves float's range: at 5e-324 a 25 GB/s link's rate
is a denormal 1.2e-313 B/s, a MiB's time overflows to infinity, and the run would end as a
deadlock instead of a slow link; at 1e-6 the largest buffer (MAX_SIZE_BYTES) on a 1 GB/s link
takes ~1.1e9 s, finite."""

MAX_SIZE_BYTES = 1 << 40
"""Bytes per rank: 1 TiB, beyond any GPU's memory."""

DEFAULT_PROXY_ELEMENTS = 1 << 14
"""Elements per rank actually moved and verified (``--proxy-elements``): enough to give every
chunk of a 1024-rank ring 16 elements, while a buffer of any size stays a few MiB per rank."""

PROXY_BUDGET_BYTES = 2 << 30
"""Memory the ranks' proxy buffers may take together (the inputs, the expected result and
per-message copies come on top of it)."""

MAX_TRACE_SLICES = 200_000
"""Slices a trace keeps, per point and per file (``--trace``): ~40 MB of JSON, which
ui.perfetto.dev and chrome://tracing still open smoothly. Those left out are the last to end,
and the file's metadata says how many and from when."""

MAX_TRACE_SAMPLES = 500_000
"""Changes of link rates a traced point records (~50 MB), from which the counter tracks of its
busiest links are drawn; beyond it the counters stop, and the metadata says so."""

TRACE_RATE_LINKS = 16
"""Links a trace draws utilisation counters for, per point: the busiest."""

MAX_TRACE_COUNTERS = 200_000
"""Counter events (a link's utilisation changing) a trace keeps, per file, shared among points
as slices are; each point's counters stop where its share runs out."""

MAX_INPUT_BYTES = 16 << 20
"""Bytes of any input file read (a scenario, preset, graph or nccl-tests log): a scenario is a
few hundred bytes and the largest log measured here ~50 kB, so 16 MiB refuses only mistakes
(``/dev/zero``, a results file given as a scenario) before they fill the memory."""

MAX_YAML_NESTING = 64
"""Mappings and lists nested in a YAML input: a scenario nests four deep; deeper is refused
before the parser recurses (100,000 nested lists would end in a RecursionError)."""

MAX_YAML_ALIASES = 64
"""Aliases (``*name``) in a YAML input: one alias may stand for a whole nested list, so a few
dozen of them can describe billions of elements (the "billion laughs"); no scenario needs any."""

MAX_XML_NESTING = 64
"""Elements nested in an XML input: NCCL's topology dump nests eight deep (system, cpu, three
levels of PCIe switches, the GPU's pci, gpu, nvlink), an MSCCL schedule four (algo, gpu, tb,
step); deeper is refused as it is read, before any reader walks the tree recursively."""

MAX_XML_ELEMENTS = 1_000_000
"""Elements of an XML input. Legitimate inputs are far below it (a DGX topology dump has ~100;
an MSCCL schedule one per step, ~100 bytes each, so a 16 MiB one ~160,000), while 16 MiB of
`<a/>` would be 4 million elements. A million empty elements, read as :mod:`simulator.xmlsafe`
reads them, took 5.1 s and 0.24 GB at the peak (tracemalloc; 0.29 GB resident for the whole
process) on this machine (2 cores): the most a file may hold costs seconds and a fraction of
a GB before it is read or refused."""

MAX_CHAKRA_BYTES = 64 << 20
"""Bytes of one Chakra execution trace file (one rank's step, ``training: {chakra: DIR}``):
half of MAX_CHAKRA_TOTAL_BYTES, so that one rank's file alone cannot take a directory's
whole share."""

MAX_CHAKRA_TOTAL_BYTES = 128 << 20
"""Bytes of a whole directory of Chakra traces, every rank's file. Measured on this machine
(2 cores, 24 GiB; 2 ranks of 100,000 nodes, alternating computes and allreduces as
simulator/training/chakra_write.py writes them): 93 bytes a node on disk, 820 bytes of peak
resident memory a node read, 18 µs a node. So 128 MiB of such nodes read in ~1.2 GB and ~25 s;
the smallest nodes (~20 bytes: an id, a type and a duration) in ~5 GB, within
MEMORY_BUDGET_BYTES."""
