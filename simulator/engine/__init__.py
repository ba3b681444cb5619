"""The engine: when things move. Two engines time a planned point on one network kernel: SimPy
processes run every rank's program on a flow-level fabric (max-min fair sharing), and the
vectorised engine runs the program's schedule as arrays, instant by instant; both with GPUs'
reducers, in-switch reduction and real numpy data, agreeing to the bit.

The modules, by what they hold:

- the seam and its values: :mod:`.executor` (which engine runs a plan), :mod:`.plan` (a point's
  plan), :mod:`.payload` (the proxy payload and inputs), :mod:`.record` (what a run did on its
  links, and its timeline);
- both engines: :mod:`.kernel` (max-min progressive filling, a reducer's queue, the capacity
  timeline);
- the SimPy engine: :mod:`.run` (the ranks' programs), :mod:`.fabric` (flows on links),
  :mod:`.sharing` (max-min per component), :mod:`.inswitch` (in-switch reduction),
  :mod:`.messages` (point-to-point messages on one fabric, for ``simulator.dist``);
- the vectorised engine: :mod:`.vector` (the instant loop), :mod:`.window` (the messages held,
  a window of blocks), :mod:`.routes` (the pairs' routes and the shares of sets of flows),
  :mod:`.flows` (the flows and their re-sharing), :mod:`.devices` (latencies, proxies,
  reducers, late ranks), :mod:`.pending` (starts and completions due later), :mod:`.buffers`
  (the data), :mod:`.tally` (the links' bytes and busy time), :mod:`.steady` (the steady-state
  fast-forward).

The only package that imports SimPy. May import: :mod:`simulator.algorithms` (the programs and
their requests), :mod:`simulator.model`, :mod:`simulator.settings` (which engine),
:mod:`simulator.limits`, :mod:`simulator.errors`; SimPy, numpy. Never scenario files or output.
"""
