"""Zeroth-order quantization-aware training (pure torch): fake-quantized weights and activations with learnable
LSQ-style scales, trained (the scales alone, or the weights too: full ZeroQAT) by two-point SPSA (MeZO-style, seeds
only), by P-GAP (projected gradient-aligned perturbations in a per-matrix low-rank gradient space), or by
first-order straight-through QAT; round-to-nearest and GPTQ post-training quantization as untrained baselines.

See :mod:`sim.zoqat.train` for the methods and their citations, :mod:`sim.zoqat.memory` for how peak memory is
measured, :mod:`sim.zoqat.job` for one measured run of a zoo model in a fresh process.
"""

from __future__ import annotations

from coevo.sim.zoqat.config import DEFAULT_LR
from coevo.sim.zoqat.fakequant import QuantLinear, fake_quant, qrange, quant_layers, quantize
from coevo.sim.zoqat.gptq import gptq, gptq_weight
from coevo.sim.zoqat.memory import PeakMemory
from coevo.sim.zoqat.qat import QATRun, zo_qat
from coevo.sim.zoqat.train import (
    METHODS,
    Perturbation,
    Subspace,
    TrainLog,
    default_loss,
    estimate_subspaces,
    evaluate,
    train,
    trainable,
    zo_step,
)

__all__ = [
    "DEFAULT_LR",
    "METHODS",
    "PeakMemory",
    "Perturbation",
    "QATRun",
    "QuantLinear",
    "Subspace",
    "TrainLog",
    "default_loss",
    "estimate_subspaces",
    "evaluate",
    "fake_quant",
    "gptq",
    "gptq_weight",
    "qrange",
    "quant_layers",
    "quantize",
    "train",
    "trainable",
    "zo_qat",
    "zo_step",
]
