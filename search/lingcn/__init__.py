"""The lingcn problem: HE-friendly GCN linearization (accuracy vs encrypted latency and depth)."""
