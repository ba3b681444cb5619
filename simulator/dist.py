"""``simulator.dist``: the name :mod:`simulator.distributed` had until issue 37, kept as an alias.

The package moved out of ``simulator/dist/`` because GitHub's standard Python ``.gitignore``
ignores ``dist/`` at any depth, so a fork using it would silently stop tracking the package.
Code written for the old name goes on working with the very same objects, not copies:
``from simulator import dist`` and ``import simulator.dist`` give every public name of
:mod:`simulator.distributed` (``dist.spawn``, ``dist.Stalled``, ...) and each of its modules
(``dist.rendezvous``), and ``import simulator.dist.<module>`` gives the package's module of that
name, so an exception, a ``World`` or a ``ReduceOp`` is one class under both names.

May import: :mod:`simulator.distributed`, nothing else: an alias, with no code of its own.
"""

from __future__ import annotations

import sys
from importlib import import_module
from pkgutil import iter_modules

import simulator.distributed as _distributed
from simulator.distributed import *  # noqa: F403  (the names in its __all__, as they are)
from simulator.distributed import __all__ as __all__

for _found in iter_modules(_distributed.__path__):
    _module = import_module(f"{_distributed.__name__}.{_found.name}")
    globals()[_found.name] = _module
    sys.modules[f"{__name__}.{_found.name}"] = _module  # so `import simulator.dist.p2p` finds it
