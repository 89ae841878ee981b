"""The circuit-GNN family's configuration: every default and bound its model, benchmark and tool share, declared once.

:class:`GnnFamilyConfig` holds the defaults of the ``gnn.circuit`` tool (``tools/gnn.py``) and of
the simulator pieces that repeat them (:class:`~coevo.sim.gnn.model.Config`,
:func:`~coevo.sim.gnn.bench.train_eval`).

One knob keeps two values: a model's ``concurrency`` is 1 (sequential) when
:class:`~coevo.sim.gnn.model.Config` is built without one, and 2 threads in the tool
(``tool_concurrency``), the setting the docs' circuit-GNN timings were measured with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

Parallel = Literal["blocks", "relations"]
"""What a model's threads run: row blocks of every kernel, or the independent subgraphs of a layer."""
PARALLEL: tuple[str, ...] = get_args(Parallel)


@dataclass(frozen=True)
class GnnFamilyConfig:
    """Defaults and bounds of the circuit-GNN family (each field's ``metadata``: ``help``, ``unit``, bounds)."""

    design: str = field(default="alu32", metadata={"help": "a shipped design or a Verilog file path ending in .v"})
    label: str = field(default="depth", metadata={"help": "per-cell target: depth, arrival or fanout_cone"})
    hidden: int = field(default=64, metadata={"help": "hidden feature width H", "unit": "features", "ge": 4, "le": 512})
    layers: int = field(default=3, metadata={"help": "message-passing layers", "ge": 1, "le": 8})
    dynamic_relu_k: int = field(
        default=8,
        metadata={"help": "dynamic ReLU: keep the k largest activations per row (1..hidden); 0 = plain ReLU", "unit": "features", "ge": 0},
    )
    concurrency: int = field(default=1, metadata={"help": "threads of a model built without a setting (1 = sequential)", "unit": "threads"})
    tool_concurrency: int = field(
        default=2,
        metadata={
            "help": "threads running the row blocks of every kernel, forward and backward (1 = sequential)",
            "unit": "threads",
            "ge": 1,
            "le": 16,
        },
    )
    parallel: Parallel = field(
        default="blocks",
        metadata={
            "help": "what the threads run: blocks (row blocks of every kernel) or relations (DR-CircuitGNN's independent "
            "subgraphs: each node type's product and each relation's aggregation one task)",
            "choices": PARALLEL,
        },
    )
    epochs: int = field(
        default=60,
        metadata={"help": "full-batch Adam epochs on the training cells (0: timing only)", "unit": "epochs", "ge": 0, "le": 2000},
    )
    lr: float = field(default=5e-3, metadata={"help": "Adam learning rate", "gt": 0})
    test_share: float = field(
        default=0.3, metadata={"help": "share of cells held out for the label error (drawn with seed)", "unit": "share", "gt": 0, "lt": 1}
    )
    compare_dense: bool = field(default=True, metadata={"help": "also train the dense model (plain ReLU, dense products, sequential)"})
    timing_repeats: int = field(
        default=5, metadata={"help": "forward+backward runs timed per variant, interleaved (0: no timing)", "ge": 0, "le": 100}
    )
    seed: int = field(default=0, metadata={"help": "seed of the weights and of the held-out cells", "ge": 0})


GNN = GnnFamilyConfig()
"""The defaults (an instance, so a keyword default reads ``GNN.field``)."""

__all__ = ["GNN", "PARALLEL", "GnnFamilyConfig", "Parallel"]
