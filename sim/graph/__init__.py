"""Graph kernels: CSR matrices, graph generators, SpMM (degree-sorted block and naive, numba) and a GCN layer on it."""
