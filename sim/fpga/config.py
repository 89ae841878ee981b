"""The FPGA transformer family's configuration: the defaults and bounds its tool and problem share, declared once.

The accelerator's own defaults (16 MACs per PE, GEMM tiles 32x64x64) are
:class:`~coevo.sim.fpga.model.Accelerator`'s; :class:`FpgaConfig` names them with bounds and
help and adds the board, workload and attention settings. ``tools/fpga.py``
(``schedule.length_aware``) and ``search/fpga/problem.py`` (the ``fpga-transformer`` problem) read
their defaults and bounds from here. ``search_`` fields are the problem's: every design is
scheduled, so a search uses the small LM and fewer, smaller batches than one tool call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coevo.sim.fpga.model import Accelerator


@dataclass(frozen=True)
class FpgaConfig:
    """Defaults and bounds of the FPGA transformer family (each field's ``metadata``: ``help``, ``unit``, bounds)."""

    device: str = field(default="zcu102", metadata={"help": "FPGA board preset (DSP slices, on-chip memory, DDR)"})
    pes: int = field(
        default=64,
        metadata={"help": "processing elements, at most what the device's DSP slices allow", "unit": "PEs", "ge": 3},
    )
    split: str = field(default="4:3:1", metadata={"help": "PE shares matmul:attention:softmax"})
    lanes: int = field(default=Accelerator.lanes, metadata={"help": "int8 MACs per PE", "unit": "MACs"})
    tile_m: int = field(default=Accelerator.tile_m, metadata={"help": "GEMM tile: output rows (tokens)", "ge": 1, "le": 1024})
    tile_n: int = field(default=Accelerator.tile_n, metadata={"help": "GEMM tile: output columns", "ge": 1, "le": 1024})
    tile_k: int = field(default=Accelerator.tile_k, metadata={"help": "GEMM tile: reduction depth", "ge": 1, "le": 1024})
    reconfig_cycles: int = field(
        default=Accelerator.reconfig_cycles,
        metadata={
            "help": "cycles to change the PE split between batches (realloc); default: an assumed runtime switch, 0: free",
            "unit": "cycles",
            "ge": 0,
        },
    )
    change_rule: str = field(
        default=Accelerator.change_rule,
        metadata={
            "help": "when realloc changes the PE split: myopic (this batch repays the cost) or amortized (ski-rental "
            "break-even: a split's savings since the last change reach the cost)"
        },
    )
    model: str = field(default="lm-pydoc", metadata={"help": "transformer shape (zoo LMs or BERT-base)"})
    search_model: str = field(
        default="lm-pydoc-tiny",
        metadata={"help": "zoo LM: its shape sets the accelerator's tasks and its perplexity the accuracy side"},
    )
    batch: int = field(default=32, metadata={"help": "sequences per batch", "unit": "sequences", "ge": 1, "le": 4096})
    search_batch: int = field(default=16, metadata={"help": "sentences per batch", "unit": "sentences", "ge": 1, "le": 512})
    draws: int = field(
        default=5, metadata={"help": "random batches of pydoc sentences drawn (seeds seed..)", "unit": "batches", "ge": 1, "le": 200}
    )
    search_draws: int = field(
        default=2,
        metadata={"help": "random batches of pydoc sentences every design is scheduled on", "unit": "batches", "ge": 1, "le": 50},
    )
    buckets: int = field(default=4, metadata={"help": "groups of the bucketing scheduler", "unit": "groups", "ge": 1, "le": 256})
    seed: int = field(default=0, metadata={"help": "seed of the batch draws", "ge": 0})


__all__ = ["FpgaConfig"]
