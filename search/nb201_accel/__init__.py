"""nb201-accel: an NAS-Bench-201 cell x a systolic-array accelerator, co-designed (:mod:`search.nb201_accel.problem`)."""
