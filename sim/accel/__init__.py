"""Accelerator models: systolic-array mapping, cycles and memory traffic; bit-level MAC energy."""
