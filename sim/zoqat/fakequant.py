"""Fake quantization with learnable scales (LSQ-style) around a copy of a model's ``nn.Linear`` layers.

Every ``nn.Linear`` of the copy becomes a :class:`QuantLinear`:

* weights: symmetric, per output channel, ``w_bits`` (levels ``-2^(b-1) .. 2^(b-1)-1``; at 1 bit the two levels
  ``-s, +s``), one learnable scale per row;
* activations: the layer's input, symmetric, per tensor, ``a_bits`` (None: not quantized), one learnable scale.

The scales are the learned step sizes of LSQ (Esser et al., ICLR 2020): ``q = clamp(round(x / s), qmin, qmax) * s``
with the rounding passed straight through, so autograd gives LSQ's gradient with respect to ``s``. They are stored
as ``log s`` (``w_log_s``, ``a_log_s``) so a step or a perturbation of size ``eps`` is the same *relative* change
for every layer whatever its magnitude; that matters for zeroth-order training, which uses one ``eps`` for all.
Round-to-nearest (RTN) is the starting point: weight scales ``max|w_row| / qmax``, activation scales
``max|x| / qmax`` over a few calibration batches.

Optional smoothing (``smooth_alpha``; ZeroQAT's learnable equivalent transformation, SmoothQuant's migration): each
layer divides its input by per-input-channel factors ``s`` and multiplies the matching weight columns by them,
``(X diag(s)^-1)(diag(s) W)``, which is the same function in float, and quantizes the two smoothed operands. ``s``
starts at SmoothQuant's ``s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)`` over the calibration batches and is stored as
``log s`` (``log_smooth``) so training can move it like the scales. Here the division is an explicit op in front of
each layer (a deployment would fold it into the producer of ``X``, e.g. a LayerNorm); every Linear gets its own
``s``, also where several read the same input.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable

import torch
from torch import nn
from torch.nn import functional as F

from coevo.sim.errors import UserInputError

_TINY = 1e-8


def check_bits(bits: int | None, what: str, allow_none: bool = False) -> None:
    """Raise :class:`UserInputError` unless ``bits`` is an integer >= 1 (or None where allowed)."""
    if bits is None and allow_none:
        return
    if isinstance(bits, bool) or not isinstance(bits, int) or bits < 1:
        raise UserInputError(f"{what} must be an integer >= 1 (bits per value), got {bits!r}")
    if bits > 16:
        raise UserInputError(f"{what} must be at most 16 (fake quantization of float32), got {bits}")


def qrange(bits: int) -> tuple[int, int]:
    """Integer levels of a signed symmetric ``bits``-bit quantizer; 1 bit is the binary ``{-1, +1}``."""
    if bits == 1:
        return -1, 1
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def rtn_log_scale(weight: torch.Tensor, bits: int) -> torch.Tensor:
    """``log`` of round-to-nearest's per-output-row weight scale (``[out, 1]``) for ``weight`` at ``bits``."""
    w = weight.detach().abs()
    # binary: the mean magnitude is the least-squares scale (XNOR-Net); else absmax maps onto qmax
    scale = w.mean(dim=1, keepdim=True) if bits == 1 else w.amax(dim=1, keepdim=True) / qrange(bits)[1]
    return scale.clamp_min(_TINY).log()


class QuantLinear(nn.Module):
    """An ``nn.Linear`` whose weights (per output channel) and input (per tensor) pass through :func:`fake_quant`."""

    def __init__(self, linear: nn.Linear, w_bits: int, a_bits: int | None) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self.w_bits, self.a_bits = w_bits, a_bits
        self.w_log_s = nn.Parameter(rtn_log_scale(linear.weight.detach(), w_bits))
        self.a_log_s = nn.Parameter(torch.zeros(()), requires_grad=a_bits is not None)
        self.log_smooth: nn.Parameter | None
        self.register_parameter("log_smooth", None)  # set by smooth(): per input channel, log of SmoothQuant's s

    def smoothed_weight(self) -> torch.Tensor:
        """``diag(s) W`` in the math's ``[in, out]`` layout: the weight's columns times ``s`` (the weight without smoothing)."""
        return self.weight if self.log_smooth is None else self.weight * self.log_smooth.exp()

    def smoothed_input(self, x: torch.Tensor) -> torch.Tensor:
        """``X diag(s)^-1`` (``x`` itself without smoothing)."""
        return x if self.log_smooth is None else x / self.log_smooth.exp()

    def quantized_weight(self) -> torch.Tensor:
        return fake_quant(self.smoothed_weight(), self.w_log_s.exp(), self.w_bits)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.smoothed_input(x)
        if self.a_bits is not None:
            x = fake_quant(x, self.a_log_s.exp(), self.a_bits)
        return F.linear(x, self.quantized_weight(), self.bias)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, w_bits={self.w_bits}, a_bits={self.a_bits}"


def fake_quant(x: torch.Tensor, scale: torch.Tensor, bits: int) -> torch.Tensor:
    """``x`` on the grid ``scale * {qmin..qmax}``; LSQ: the rounding is passed straight through, the clipping not.

    ``scale`` broadcasts against ``x`` (per tensor: a scalar; per channel: ``[out, 1]``). The straight-through
    path is built only when a gradient may flow (grad mode on and ``x`` or ``scale`` needing one).
    """
    v = x / scale
    if bits == 1:
        q = torch.where(v >= 0, torch.ones_like(v), -torch.ones_like(v))
    else:
        qmin, qmax = qrange(bits)
        v = v.clamp(qmin, qmax)
        q = v.round()
    if torch.is_grad_enabled() and v.requires_grad:
        q = (q - v).detach() + v
    return q * scale


def linear_names(model: nn.Module) -> list[str]:
    """Names of the ``nn.Linear`` modules of ``model`` (in registration order)."""
    return [name for name, m in model.named_modules() if isinstance(m, nn.Linear)]


def quantize(
    model: nn.Module,
    w_bits: int,
    a_bits: int | None,
    calib: Iterable[torch.Tensor] = (),
    *,
    inplace: bool = False,
    smooth_alpha: float | None = None,
) -> nn.Module:
    """A copy of ``model`` (``inplace``: the model itself) with every ``nn.Linear`` fake-quantized at RTN scales.

    Args:
        model: any module with at least one ``nn.Linear``.
        w_bits: weight bits (>= 1), per output channel.
        a_bits: input-activation bits (>= 1) per tensor, or None to leave activations in float.
        calib: model inputs whose Linear inputs set the activation scales (``max|x| / qmax``); needed when
            ``a_bits`` is set.
        inplace: change ``model`` itself instead of a deep copy.
        smooth_alpha: SmoothQuant's migration strength in [0, 1]: give every layer per-input-channel smoothing
            factors initialised from the calibration inputs (module docstring); None: no smoothing.

    Raises:
        UserInputError: no ``nn.Linear`` in the model, bits < 1, ``smooth_alpha`` outside [0, 1], or activation bits
            (or smoothing) without calibration inputs.
    """
    check_bits(w_bits, "w_bits")
    check_bits(a_bits, "a_bits", allow_none=True)
    check_alpha(smooth_alpha)
    names = linear_names(model)
    if not names:
        raise UserInputError(f"{type(model).__name__} has no nn.Linear layer: quantization-aware training here quantizes Linear layers")
    q = model if inplace else copy.deepcopy(model)
    for name in linear_names(q):
        parent, _, leaf = name.rpartition(".")
        owner = q.get_submodule(parent) if parent else q
        if not leaf:  # the model is itself one nn.Linear
            raise UserInputError("the model is a bare nn.Linear; wrap it in a module (e.g. nn.Sequential) to quantize it")
        setattr(owner, leaf, QuantLinear(getattr(owner, leaf), w_bits, a_bits))
    calib = list(calib)  # read twice when smoothing
    if smooth_alpha is not None:
        smooth(q, calib, smooth_alpha)
    if a_bits is not None:
        calibrate(q, calib)
    return q


def check_alpha(alpha: float | None) -> None:
    """Raise :class:`UserInputError` unless ``alpha`` is None or a number in [0, 1] (SmoothQuant's migration strength)."""
    if alpha is None:
        return
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0.0 <= alpha <= 1.0:
        raise UserInputError(f"smooth_alpha must lie in [0, 1] (SmoothQuant's migration strength), got {alpha!r}")


def check_smoothing(alpha: float | None, method: str) -> None:
    """:func:`check_alpha`, and refuse smoothing with ``gptq`` (GPTQ writes the unsmoothed weight)."""
    check_alpha(alpha)
    if alpha is not None and method == "gptq":
        raise UserInputError("smoothing is not combined with gptq here (GPTQ writes the unsmoothed weight)")


def quant_layers(model: nn.Module) -> list[QuantLinear]:
    """The :class:`QuantLinear` layers of a :func:`quantize`'d model."""
    return [m for m in model.modules() if isinstance(m, QuantLinear)]


@torch.no_grad()
def input_peaks(
    model: nn.Module, calib: Iterable[torch.Tensor], layers: list[QuantLinear], per_channel: bool = False
) -> dict[int, torch.Tensor]:
    """``max|x|`` of each layer's (smoothed) float input over the calibration inputs, per tensor or per input channel.

    Activations are not quantized while measuring (upstream layers pass float inputs on); keyed by ``id(layer)``.
    """
    peaks: dict[int, torch.Tensor] = {}
    everyone = quant_layers(model)
    saved = {id(m): m.a_bits for m in everyone}

    def hook(m: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
        assert isinstance(m, QuantLinear)
        x = m.smoothed_input(inputs[0].detach()).abs()
        peak = x.reshape(-1, x.shape[-1]).amax(dim=0) if per_channel else x.max()
        old = peaks.get(id(m))
        peaks[id(m)] = peak if old is None else torch.maximum(old, peak)

    handles = [m.register_forward_pre_hook(hook) for m in layers]
    for m in everyone:
        m.a_bits = None
    seen = 0
    try:
        for x in calib:
            model(x)
            seen += 1
    finally:
        for h in handles:
            h.remove()
        for m in everyone:
            m.a_bits = saved[id(m)]
    if not seen:
        raise UserInputError("activation quantization and smoothing need calibration inputs (a non-empty loader)")
    return peaks


@torch.no_grad()
def calibrate(model: nn.Module, calib: Iterable[torch.Tensor]) -> None:
    """Set every activation scale to ``max|x| / qmax`` of its layer's float (smoothed) input over the calibration inputs."""
    layers = [m for m in quant_layers(model) if m.a_bits is not None]
    peaks = input_peaks(model, calib, layers)
    for m in layers:
        assert m.a_bits is not None
        _, qmax = qrange(m.a_bits)
        m.a_log_s.fill_(math.log(max(float(peaks.get(id(m), torch.zeros(()))), _TINY) / qmax))


@torch.no_grad()
def smooth(model: nn.Module, calib: Iterable[torch.Tensor], alpha: float) -> None:
    """Give every layer SmoothQuant's factors ``s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)`` and RTN weight scales for ``diag(s) W``.

    A channel whose input or weight column is all zero keeps ``s_j = 1`` (no information to migrate).
    """
    check_alpha(alpha)
    layers = quant_layers(model)
    for m in layers:
        m.log_smooth = None  # the float inputs, not an earlier smoothing's, set the factors
    peaks = input_peaks(model, calib, layers, per_channel=True)
    for m in layers:
        x_max = peaks.get(id(m), torch.zeros(m.in_features))
        w_max = m.weight.detach().abs().amax(dim=0)
        ok = (x_max > 0) & (w_max > 0)
        s = torch.where(ok, x_max.clamp_min(_TINY) ** alpha / w_max.clamp_min(_TINY) ** (1 - alpha), torch.ones_like(x_max))
        m.log_smooth = nn.Parameter(s.log(), requires_grad=False)
        m.w_log_s.copy_(rtn_log_scale(m.smoothed_weight(), m.w_bits))
