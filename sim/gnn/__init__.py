"""Circuit graphs from real netlists and a heterogeneous GNN with dynamic ReLU, a sparse-feature SpMM and concurrency.

* :mod:`sim.gnn.designs`: parametric Verilog designs shipped as package data;
* :mod:`sim.gnn.yosys`: synthesis with Yosys to simple gates, cached;
* :mod:`sim.gnn.netlist`: netlists and their labels (depth, arrival time, fan-out cone);
* :mod:`sim.gnn.graph`: heterogeneous graphs (cell/net nodes, typed pin edges);
* :mod:`sim.gnn.sparse`: the numba kernels (top-k ReLU, sparse-feature SpMM, CSR aggregation) with autograd;
* :mod:`sim.gnn.model`: the model and its ablation switches; :mod:`sim.gnn.bench`: timing and training.
"""

from coevo.sim.gnn.bench import Fit, Timing, load_batch, load_graph, load_netlist, model_variant, time_variants, train_eval
from coevo.sim.gnn.designs import DESIGNS, Design, get_design
from coevo.sim.gnn.graph import RELATIONS, HeteroGraph, batch, to_hetero
from coevo.sim.gnn.model import DENSE, Config, HeteroCircuitGNN, Prepared, ablations, build, build_pyg, prepare, pyg_available
from coevo.sim.gnn.netlist import CELL_TYPES, GATE_DELAY, LABELS, Cell, Netlist, from_yosys, hand_netlist, labels
from coevo.sim.gnn.yosys import INSTALL_HINT, SynthesisError, YosysNotFoundError, synthesize_text, yosys_path

__all__ = [
    "CELL_TYPES",
    "DENSE",
    "DESIGNS",
    "GATE_DELAY",
    "INSTALL_HINT",
    "LABELS",
    "RELATIONS",
    "Cell",
    "Config",
    "Design",
    "Fit",
    "HeteroCircuitGNN",
    "HeteroGraph",
    "Netlist",
    "Prepared",
    "SynthesisError",
    "Timing",
    "YosysNotFoundError",
    "ablations",
    "batch",
    "build",
    "build_pyg",
    "from_yosys",
    "get_design",
    "hand_netlist",
    "labels",
    "load_batch",
    "load_graph",
    "load_netlist",
    "model_variant",
    "prepare",
    "pyg_available",
    "synthesize_text",
    "time_variants",
    "to_hetero",
    "train_eval",
    "yosys_path",
]
