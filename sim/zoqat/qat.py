"""One call: quantize a copy of the caller's model, train it with one method, measure steps and peak memory."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from coevo.sim.errors import UserInputError
from coevo.sim.zoqat.config import DEFAULT_LR, ZOQAT
from coevo.sim.zoqat.fakequant import check_bits, check_smoothing, linear_names, quantize
from coevo.sim.zoqat.gptq import gptq
from coevo.sim.zoqat.memory import PeakMemory
from coevo.sim.zoqat.train import METHODS, LossFn, TrainLog, default_loss, train


@dataclass
class QATRun:
    """A trained quantized copy and what its training cost.

    Attributes:
        model: the quantized copy (the caller's model is untouched).
        log: steps, losses, seconds (:class:`sim.zoqat.train.TrainLog`).
        memory: peak resident memory of the training (:class:`sim.zoqat.memory.PeakMemory`).
    """

    model: nn.Module
    log: TrainLog
    memory: PeakMemory

    def summary(self) -> dict[str, Any]:
        return {
            "method": self.log.method,
            "steps": self.log.steps,
            "s_per_step": round(self.log.s_per_step, 4),
            "train_s": round(self.log.seconds, 2),
            "trainable_values": self.log.trainable_values,
            "peak_rss_mb": round(self.memory.peak_mb, 1),
            "train_peak_added_mb": round(self.memory.added_mb, 1),
            "peak_reset": self.memory.resettable,
            "first_loss": round(self.log.losses[0], 4) if self.log.losses else None,
            "last_loss": round(self.log.losses[-1], 4) if self.log.losses else None,
        }


def zo_qat(
    model: nn.Module,
    loader: Iterable[Any],
    *,
    w_bits: int = ZOQAT.w_bits,
    a_bits: int | None = ZOQAT.a_bits,
    method: str = ZOQAT.method,
    steps: int = ZOQAT.steps,
    lr: float | None = None,
    eps: float = ZOQAT.eps,
    seed: int = ZOQAT.seed,
    train_weights: bool = ZOQAT.train_weights,
    calib_batches: int = 4,
    smooth_alpha: float | None = ZOQAT.smooth_alpha,
    loss_fn: LossFn = default_loss,
    **options: Any,
) -> QATRun:
    """Quantize a copy of ``model`` (W ``w_bits`` per channel, A ``a_bits`` per tensor, RTN scales) and train it.

    Args:
        model: any module with ``nn.Linear`` layers (left unchanged).
        loader: yields ``(x, y)``; its first ``calib_batches`` inputs set the activation scales, and training
            cycles through it.
        method: ``spsa``, ``pgap``, ``ste``, ``rtn`` or ``gptq`` (see :mod:`sim.zoqat.train`, :mod:`sim.zoqat.gptq`).
        lr: learning rate; None: :data:`DEFAULT_LR` of the method.
        smooth_alpha: SmoothQuant-style smoothing factors (ZeroQAT's equivalent transformation) at this migration
            strength, trained with the scales (:func:`sim.zoqat.fakequant.smooth`); None: none (not with ``gptq``).
        options: ``clip``, ``rank``, ``refresh``, ``probes``, ``delta`` of :func:`sim.zoqat.train.train`.

    Raises:
        UserInputError: no Linear layer, bits < 1, unknown method, bad lr / eps / steps / smoothing / P-GAP
            settings, empty loader.
    """
    check_bits(w_bits, "w_bits")
    check_bits(a_bits, "a_bits", allow_none=True)
    if method not in METHODS:
        raise UserInputError(f"unknown method {method!r}; valid methods: {', '.join(METHODS)}")
    if not linear_names(model):
        raise UserInputError(f"{type(model).__name__} has no nn.Linear layer: quantization-aware training here quantizes Linear layers")
    check_smoothing(smooth_alpha, method)
    if calib_batches < 1:
        raise UserInputError(f"calib_batches must be >= 1, got {calib_batches}")
    calib = [batch[0] for batch in itertools.islice(iter(loader), calib_batches)]
    if not calib:
        raise UserInputError("the loader yields no batch")
    torch.manual_seed(seed)
    qmodel = quantize(model, w_bits, a_bits, calib, smooth_alpha=smooth_alpha)
    qmodel.eval()
    if method == "gptq":
        gptq(qmodel, calib)
    rate = DEFAULT_LR[method] if lr is None else lr
    with PeakMemory() as memory:
        log = train(qmodel, loader, method, steps, lr=rate, eps=eps, seed=seed, train_weights=train_weights, loss_fn=loss_fn, **options)
    return QATRun(qmodel, log, memory)
