"""deploy-cnn: per-layer weight bits and pruning sparsity of a zoo CNN x a systolic-array accelerator (:mod:`search.deploy_cnn.problem`)."""
