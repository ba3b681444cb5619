"""Topology presets (package data): each YAML file names a builder and its parameters, every
number cited to a spec sheet. Installed as ``simulator.topologies``."""
