"""Weight quantization of any Conv2d/Linear model: per-unit fake quantization, straight-through fine-tuning, mixed precision.

:mod:`sim.quant.fake` quantizes (symmetric, per output filter/neuron) and fine-tunes;
:mod:`sim.quant.mixed` allocates widths: class-based importance (more bits for units
important to more classes), HAWQ-style Hessian trace, weight magnitude, uniform; and a
greedy search that lowers widths under an accuracy constraint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.sim._lazy import lazy_exports

if TYPE_CHECKING:  # the names load on first use (sim/_lazy.py): listing problems or tools imports no torch
    from coevo.sim.quant.config import CANDIDATES, METHODS, Method
    from coevo.sim.quant.fake import Layer, accuracy, average_bits, fake_quant, finetune, model_bits, quant_layers, quantized_copy
    from coevo.sim.quant.mixed import (
        Allocation,
        GreedyResult,
        Group,
        QuantResult,
        allocate,
        class_counts,
        class_groups,
        class_scores,
        greedy_search,
        group_bits,
        hessian_traces,
        quantize,
    )

__all__ = [
    "CANDIDATES",
    "METHODS",
    "Allocation",
    "GreedyResult",
    "Group",
    "Layer",
    "Method",
    "QuantResult",
    "accuracy",
    "allocate",
    "average_bits",
    "class_counts",
    "class_groups",
    "class_scores",
    "fake_quant",
    "finetune",
    "greedy_search",
    "group_bits",
    "hessian_traces",
    "model_bits",
    "quant_layers",
    "quantize",
    "quantized_copy",
]

__getattr__ = lazy_exports(__name__, __file__)
