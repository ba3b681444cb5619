"""The simulator's version, a leaf module: any layer may state it (the results' JSON, a trace's
metadata, ``--version``) without importing the package's root, and ``pyproject.toml`` reads it
from here (``[tool.setuptools.dynamic]``).

May import: nothing of the package.
"""

__version__ = "0.2.0"
