"""deploy-lm: pruning sparsity and weight bits of a zoo byte LM x an FPGA transformer accelerator (:mod:`search.deploy_lm.problem`)."""
