"""Circuit graphs from real netlists (Yosys) and a heterogeneous GNN with dynamic ReLU and sparse, concurrent aggregation."""
