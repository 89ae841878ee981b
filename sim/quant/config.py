"""The quantization family's configuration: the defaults and bounds its tool and problem share, declared once.

``tools/quant.py`` (``quant.class_based``) and ``search/quant/problem.py`` (the ``quant`` problem)
read their defaults and bounds from :class:`QuantConfig`; the bit widths a group may take are
:data:`coevo.sim.quant.CANDIDATES`. ``search_finetune_epochs`` is the problem's per-design
budget, smaller than one tool call's because a search fine-tunes every design;
``accuracy_drop_max`` is the greedy search's tolerance (the tool's argument); ``compare_model`` the
figure's task (``python -m coevo.figures quant``), small and cross-validated so the methods can differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

CANDIDATES: tuple[int, ...] = (2, 3, 4, 6, 8)
"""Bit widths a unit may get by default (here, not in :mod:`sim.quant.mixed`, so that reading it imports no torch)."""

Method = Literal["class-based", "class-count", "taylor", "uniform", "hawq", "magnitude"]
"""The bit-allocation methods of :func:`sim.quant.mixed.quantize`, declared once (the tool adds ``greedy``, a search)."""
METHODS: tuple[Method, ...] = get_args(Method)
"""The methods of :data:`Method`, in its order."""


@dataclass(frozen=True)
class QuantConfig:
    """Defaults and bounds of the quantization family (each field's ``metadata``: ``help``, ``unit``, bounds)."""

    model: str = field(default="cnn-digits", metadata={"help": "zoo classifier to quantize (see `coevo models list`)"})
    compare_model: str = field(
        default="cnn-digits-cv",
        metadata={"help": "zoo classifier of the method comparison (cross-validated: every fold, all 1,797 digits tested once)"},
    )
    finetune_epochs: int = field(
        default=3,
        metadata={"help": "most straight-through fine-tuning epochs; the best val epoch is kept", "unit": "epochs", "ge": 0, "le": 50},
    )
    search_finetune_epochs: int = field(
        default=1,
        metadata={
            "help": "most straight-through fine-tuning epochs per design (0: round-to-nearest)",
            "unit": "epochs",
            "ge": 0,
            "le": 20,
        },
    )
    seed: int = field(default=0, metadata={"help": "seed of fine-tuning (the order of the training batches)", "ge": 0})
    method: Method = field(default="class-based", metadata={"help": f"how widths are allocated: {', '.join(METHODS)}"})
    avg_bits: float = field(
        default=4.0,
        metadata={
            "help": "average weight bits (weighted by weight count), between the narrowest and widest candidate widths",
            "unit": "bits",
            "ge": min(CANDIDATES),
            "le": max(CANDIDATES),
        },
    )
    accuracy_drop_max: float = field(
        default=1.0,
        metadata={"help": "greedy only: largest val accuracy drop vs float32, percentage points", "unit": "pp", "ge": 0, "le": 100},
    )


__all__ = ["CANDIDATES", "METHODS", "Method", "QuantConfig"]
