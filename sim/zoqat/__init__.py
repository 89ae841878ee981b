"""Zeroth-order quantization-aware training (pure torch): fake-quantized weights and activations with learnable
LSQ-style scales, trained by two-point SPSA (MeZO-style, seeds only), by SPSA inside a projected gradient
subspace, or by first-order straight-through QAT; round-to-nearest PTQ as the untrained baseline.

See :mod:`sim.zoqat.train` for the methods and their citations, :mod:`sim.zoqat.memory` for how peak memory is
measured, :mod:`sim.zoqat.job` for one measured run of a zoo model in a fresh process.
"""

from __future__ import annotations

from coevo.sim.zoqat.config import DEFAULT_LR
from coevo.sim.zoqat.fakequant import QuantLinear, fake_quant, qrange, quant_layers, quantize
from coevo.sim.zoqat.memory import PeakMemory
from coevo.sim.zoqat.qat import QATRun, zo_qat
from coevo.sim.zoqat.train import METHODS, Perturbation, TrainLog, default_loss, evaluate, train, trainable, zo_step

__all__ = [
    "DEFAULT_LR",
    "METHODS",
    "PeakMemory",
    "Perturbation",
    "QATRun",
    "QuantLinear",
    "TrainLog",
    "default_loss",
    "evaluate",
    "fake_quant",
    "qrange",
    "quant_layers",
    "quantize",
    "train",
    "trainable",
    "zo_qat",
    "zo_step",
]
