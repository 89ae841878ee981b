"""Simulators (pipeline-parallel training, NoC, systolic array), pure Python/numpy."""
