"""Pipeline-parallel training planner for UNet-style models (PULSE): profiles, partitioners."""
