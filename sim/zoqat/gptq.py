"""GPTQ-class post-training quantization of a :func:`sim.zoqat.fakequant.quantize`'d model's weights.

GPTQ (Frantar et al., ICLR 2023, "GPTQ: Accurate Post-Training Quantization for Generative Pre-trained
Transformers") quantizes one layer's weight matrix column by column and, after each column, moves the
not-yet-quantized columns to compensate the error it made, using the inverse Hessian ``H^-1`` of the layer's
reconstruction loss ``||X W^T - X Q^T||^2`` (``H = 2 X^T X`` over calibration inputs X). What is implemented, as in
the paper: the Hessian from calibration activations, dampening by ``percdamp`` times its mean diagonal, dead inputs
(zero diagonal) zeroed, the upper Cholesky factor of ``H^-1`` (the "Cholesky form", numerically stable) and the
update ``W[:, j:] -= (w_j - q_j) / U_jj * U_j,j:``; the layers are done in order, each calibrated on the outputs of
the layers already quantized. Not implemented: the lazy block updates (a speed trick with identical results) and
act-order (column reordering, an optional refinement in the paper).

The grid is the one RTN uses: the layer's per-row scale (``max|w_row| / qmax``, :class:`QuantLinear`'s starting
``w_log_s``), so GPTQ and RTN differ only in which grid point each weight goes to; the result is written back
into the :class:`QuantLinear`'s float weight, which then lies on its own grid (fake quantization is the identity on
it). When the layer's input is quantized (``a_bits``), the Hessian is built from the quantized input the layer sees.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from coevo.sim.errors import UserInputError
from coevo.sim.zoqat.fakequant import QuantLinear, fake_quant, qrange, quant_layers


@torch.no_grad()
def gptq_weight(weight: torch.Tensor, scale: torch.Tensor, bits: int, hessian: torch.Tensor, percdamp: float = 0.01) -> torch.Tensor:
    """GPTQ of one weight matrix: the quantized ``[out, in]`` weight (values on ``scale * {qmin..qmax}``).

    Args:
        weight: ``[out, in]`` float weight.
        scale: ``[out, 1]`` per-row step.
        bits: weight bits (>= 2; 1 bit has no error to move and is rejected).
        hessian: ``[in, in]`` ``X^T X`` (any positive multiple) of the layer's calibration inputs.
        percdamp: dampening added to the diagonal, as a share of its mean (the paper's 1 %).

    Raises:
        UserInputError: bits < 2, shapes that do not match, or ``percdamp`` outside (0, 1].
    """
    if bits < 2:
        raise UserInputError(f"GPTQ needs at least 2 weight bits (a grid with a zero), got {bits}")
    if not 0 < percdamp <= 1:
        raise UserInputError(f"percdamp must be in (0, 1], got {percdamp}")
    cols = weight.shape[1]
    if hessian.shape != (cols, cols) or scale.shape != (weight.shape[0], 1):
        raise UserInputError(f"GPTQ: weight {tuple(weight.shape)} needs a [{cols}, {cols}] Hessian and a [rows, 1] scale")
    w = weight.detach().clone().double()
    h = hessian.detach().clone().double()
    dead = torch.diag(h) == 0
    h[dead, dead] = 1.0  # an input that never fires: its column is free, quantize it to zero
    w[:, dead] = 0.0
    h += torch.eye(cols, dtype=h.dtype) * (percdamp * float(torch.diag(h).mean()))
    hinv = torch.cholesky_inverse(torch.linalg.cholesky(h))
    upper = torch.linalg.cholesky(hinv, upper=True)
    s = scale.detach().double()
    qmin, qmax = qrange(bits)
    q = torch.zeros_like(w)
    for j in range(cols):
        col = w[:, j : j + 1]
        qc = (col / s).round().clamp(qmin, qmax) * s
        q[:, j : j + 1] = qc
        err = (col - qc) / upper[j, j]
        w[:, j:] -= err @ upper[j : j + 1, j:]
    return q.to(weight.dtype)


def layer_hessians(model: nn.Module, layer: QuantLinear, calib: Sequence[torch.Tensor]) -> torch.Tensor:
    """``X^T X / n`` of the input ``layer`` sees (after its activation quantizer) over the calibration inputs."""
    acc: list[torch.Tensor] = []
    count = [0]

    def hook(m: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
        x = inputs[0].detach()
        if layer.a_bits is not None:
            x = fake_quant(x, layer.a_log_s.detach().exp(), layer.a_bits)
        x = x.reshape(-1, x.shape[-1]).double()
        if acc:
            acc[0].add_(x.T @ x)
        else:
            acc.append(x.T @ x)
        count[0] += x.shape[0]

    handle = layer.register_forward_pre_hook(hook)
    try:
        with torch.no_grad():
            for x in calib:
                model(x)
    finally:
        handle.remove()
    if not acc:
        raise UserInputError("GPTQ needs calibration inputs (a non-empty list of model inputs)")
    return acc[0] / max(count[0], 1)


@torch.no_grad()
def gptq(model: nn.Module, calib: Sequence[torch.Tensor], percdamp: float = 0.01) -> nn.Module:
    """GPTQ every :class:`QuantLinear` of ``model`` in place, in order, each on the already-quantized upstream.

    Args:
        model: a :func:`sim.zoqat.fakequant.quantize`'d model (its activation scales calibrated).
        calib: model inputs (the same calibration batches RTN's activation scales came from).
        percdamp: Hessian dampening, a share of its mean diagonal.

    Returns:
        ``model`` (changed in place): every weight replaced by its GPTQ values, the scales unchanged.

    Raises:
        UserInputError: no quantized layer, no calibration input, or bits < 2.
    """
    layers = quant_layers(model)
    if not layers:
        raise UserInputError("the model has no quantized Linear layer: call sim.zoqat.quantize first")
    was = model.training
    model.eval()
    try:
        for layer in layers:
            h = layer_hessians(model, layer, calib)
            layer.weight.data.copy_(gptq_weight(layer.weight, layer.w_log_s.detach().exp(), layer.w_bits, h, percdamp))
    finally:
        model.train(was)
    return model


__all__ = ["gptq", "gptq_weight", "layer_hessians"]
