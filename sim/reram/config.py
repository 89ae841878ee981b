"""The ReRAM family's configuration: every default and bound its tool, problem and figure script share, declared once.

The crossbar geometry's defaults are :class:`~coevo.sim.reram.crossbar.CrossbarConfig`'s own
(64x64 cells, 8-bit weight magnitudes, 2 bits per cell); :class:`ReramConfig` names them and
adds the fault model and the budgets. ``tools/reram.py`` (``reram.faults``) and
``search/reram/problem.py`` (the ``reram`` problem) read their defaults and bounds from here.

The default fault rate is 0.03, the ``reram`` problem's: studies made with the problem's default
options keep their identity (and resume), and every documented ``reram.faults`` call names its
rate (0.02 in docs/reram.md and the README), so none of its quoted outputs moves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coevo.sim.reram.crossbar import CrossbarConfig


@dataclass(frozen=True)
class ReramConfig:
    """Defaults and bounds of the ReRAM family (each field's ``metadata``: ``help``, ``unit``, bounds).

    Fields with a ``search_`` prefix are the per-design budgets of the ``reram`` problem, smaller
    than a single tool call's because a search evaluates many designs.
    """

    model: str = field(default="mlp-digits", metadata={"help": "zoo classifier mapped onto the crossbars"})
    compare_model: str = field(
        default="cnn-digits-cv",
        metadata={
            "help": "zoo classifier of the figure's scheme comparison (cross-validated: one model per fold and seed, all 1,797 "
            "digits tested once per seed)"
        },
    )
    rows: int = field(default=CrossbarConfig.rows, metadata={"help": "wordlines per crossbar", "unit": "cells", "ge": 1, "le": 4096})
    cols: int = field(default=CrossbarConfig.cols, metadata={"help": "bitlines per crossbar", "unit": "cells", "ge": 1, "le": 4096})
    weight_bits: int = field(
        default=CrossbarConfig.weight_bits,
        metadata={"help": "magnitude bits per weight (sign via the differential pair)", "unit": "bits", "ge": 1, "le": 16},
    )
    bits_per_cell: int = field(
        default=CrossbarConfig.bits_per_cell,
        metadata={"help": "bits per ReRAM cell (2**bits conductance levels)", "unit": "bits", "ge": 1, "le": 4},
    )
    fault_rate: float = field(
        default=0.03, metadata={"help": "share of stuck cells in every fault map", "unit": "share of cells", "ge": 0.0, "le": 1.0}
    )
    sa0_sa1: str = field(default="9:1", metadata={"help": "ratio of stuck-at-0 to stuck-at-1 faults, e.g. '9:1'"})
    knowledge: str = field(
        default="unknown",
        metadata={"help": "unknown: no test, duplicated copies are combined by a vote (the headline); known: a post-fabrication test"},
    )
    search_knowledge: str = field(
        default="known", metadata={"help": "the reram problem's fault-map knowledge (it searches spare lines, which need a test)"}
    )
    prune_method: str = field(
        default="learned",
        metadata={"help": "learned: row/column scores trained with the model (the paper's kind); l2: one-shot magnitude baseline"},
    )
    finetune_epochs: int = field(
        default=5,
        metadata={
            "help": "training epochs every scheme gets, unprotected included (learned pruning learns its masks in them)",
            "unit": "epochs",
            "ge": 0,
            "le": 20,
        },
    )
    fault_maps: int = field(
        default=10,
        metadata={"help": "fault maps sampled (seeds 0..fault_maps-1); mean and 95 % interval over them", "ge": 1, "le": 200},
    )
    search_fault_maps: int = field(
        default=8, metadata={"help": "fault maps (seeds 0..n-1) the accuracy is averaged over", "ge": 1, "le": 100}
    )
    protection: str = field(default="none", metadata={"help": "protection parts joined by '+' (none, prune, dup, msb, spare)"})
    # what a part named in ``protection`` gets unless its setting is given (Protection.parse)
    prune_rows: float = field(
        default=0.1, metadata={"help": "prune: fraction of each layer's input rows removed", "unit": "share", "ge": 0.0, "lt": 1.0}
    )
    prune_cols: float = field(
        default=0.1,
        metadata={
            "help": "prune: fraction of each layer's output columns removed (not the last layer's)",
            "unit": "share",
            "ge": 0.0,
            "lt": 1.0,
        },
    )
    msb: int = field(default=1, metadata={"help": "msb: most significant slices duplicated per weight", "unit": "slices", "ge": 0})
    spare_rows: int = field(default=2, metadata={"help": "spare: spare rows per crossbar", "unit": "rows", "ge": 0})
    spare_cols: int = field(default=2, metadata={"help": "spare: spare columns per crossbar", "unit": "columns", "ge": 0})

    def crossbar(self) -> CrossbarConfig:
        """The crossbar these settings describe."""
        return CrossbarConfig(rows=self.rows, cols=self.cols, weight_bits=self.weight_bits, bits_per_cell=self.bits_per_cell)


__all__ = ["ReramConfig"]
