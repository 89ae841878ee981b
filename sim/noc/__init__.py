"""Network-on-chip simulators: a circuit-switched Benes optical NoC and an SDM mesh with guaranteed-bandwidth routing."""
