"""``python -m simulator``: see :mod:`simulator.cli`."""

import sys

from simulator.cli import main

sys.exit(main())
