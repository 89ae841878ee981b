"""The ``compress`` search problem: per-layer energy-aware weight restrictions of a small CNN."""
