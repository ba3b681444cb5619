"""MSCCL schedules as algorithms: the XML that msccl-tools writes, run step by step.

An MSCCL schedule (Cowan et al., "MSCCLang: Microsoft Collective Communication Language",
ASPLOS 2023; Cai et al., "Synthesizing optimal collective algorithms", PPoPP 2021) says, for
every GPU, its threadblocks, and for every threadblock the steps it runs in order: sends,
receives, receives fused with a reduction, a copy or a send on, local copies and reductions,
each on a few of the buffer's equal chunks, and a step may wait for a step of another
threadblock of its GPU. The file format is msccl-tools' (``msccl/language/ir.py``,
``ir_to_xml``); its meaning is the MSCCL runtime's (``src/graph/topo.cc``, which reads it, and
``src/collectives/device/msccl_interpreter.h``, which runs it). Here:

- :mod:`.ir`: the schedule as typed values;
- :mod:`.checks`: what is wrong with its elements, as the runtime reads them;
- :mod:`.order`: the order its steps must run in (messages matched, dependencies), the sends
  and receives that do not match and the circles where steps wait for each other;
- :mod:`.layout`: where its buffers lie in the buffer a rank's program works on;
- :mod:`.replay`: what every chunk holds after it, as sets of contributions, which names what
  came out wrong;
- :mod:`.algorithm`: :class:`~.algorithm.Msccl`, the schedule as a per-rank program with its
  closed form.

Reading the file is the scenario layer's (:mod:`simulator.scenario.msccl`).

Part of :mod:`simulator.algorithms`, with its row of the layer table (docs/design.md §1).
May import: :mod:`simulator.model`, :mod:`simulator.units`, :mod:`simulator.errors`; numpy.
Never SimPy, pandas, matplotlib, the engine, scenario files or output.
"""

from simulator.algorithms.msccl.algorithm import Msccl
from simulator.algorithms.msccl.ir import (
    Buffer,
    Flaw,
    Gpu,
    Kind,
    MscclSchedule,
    Ref,
    Step,
    Threadblock,
)
from simulator.algorithms.msccl.order import flaws

__all__ = ["Buffer", "Flaw", "Gpu", "Kind", "Msccl", "MscclSchedule", "Ref", "Step",
           "Threadblock", "flaws"]
