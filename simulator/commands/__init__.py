"""The commands of ``python -m simulator``, one module each: :mod:`.run`, :mod:`.sweep`,
:mod:`.calibrate`, :mod:`.tune`, :mod:`.nccl`, :mod:`.topo` and :mod:`.plot`. Each holds a
:class:`~.command.Command`: its arguments, what it does with them, and the file its messages
name; :mod:`simulator.cli` builds the parser from them and turns what they raise into exit
codes. Beside them, what several commands share: what a command says (:mod:`.console`), the
options ``run`` and ``sweep`` share (:mod:`.options`) and the paths a command writes, checked
before anything runs (:mod:`.paths`). Only these modules and :mod:`simulator.cli` print or
exit. Each module imports the heavy layers only once its command runs, so ``--help`` answers at
once.

May import: :mod:`simulator.runner`, :mod:`simulator.sweep`, :mod:`simulator.trainer`,
:mod:`simulator.tune`, :mod:`simulator.nccl`, :mod:`simulator.calibration`,
:mod:`simulator.measured`, :mod:`simulator.output`, :mod:`simulator.scenario`,
:mod:`simulator.model` (a topology's numbers, for ``topo``), :mod:`simulator.inputs` (the
files read, which no output may be),
:mod:`simulator.limits`, :mod:`simulator.errors`. Never
:mod:`simulator.cli`, which imports them.
"""
