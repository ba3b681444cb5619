"""Scenarios: what to run. YAML files and plain mappings in, a validated, typed
:class:`~simulator.scenario.spec.Scenario` out, with every problem of an input reported at once.

May import: :mod:`simulator.training` (the ``training:`` section), :mod:`simulator.algorithms`
(names, options and what can compose), :mod:`simulator.model`, :mod:`simulator.settings` (a
file's ``verify`` and ``engine``), :mod:`simulator.units`, :mod:`simulator.limits`,
:mod:`simulator.errors`, :mod:`simulator.inputs` (files read safely), :mod:`simulator.xmlsafe`
(MSCCL schedules' XML read safely, :mod:`.msccl`), PyYAML. Never SimPy, the engine or output.
"""

from simulator.scenario.parse import load_scenario, scenario_from_dict
from simulator.scenario.spec import Engine, Scenario, TopologySpec
from simulator.scenario.training import Imports

__all__ = ["Engine", "Imports", "Scenario", "TopologySpec", "load_scenario",
           "scenario_from_dict"]
