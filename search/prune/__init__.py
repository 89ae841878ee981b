"""The ``prune`` search problem (sparsity per layer group of a zoo LM) and the zoo pruning runner the tool shares."""
