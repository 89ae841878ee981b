"""Symmetric per-channel fake quantization of weights, with straight-through fine-tuning.

A **unit** is one output filter of a ``Conv2d`` or one output neuron of a ``Linear``: row
``i`` of the layer's weight. Every unit gets its own bit width ``b`` and its own scale:

* ``b >= 2``: ``q = clamp(round(w / s), -(2^(b-1) - 1), 2^(b-1) - 1) * s`` with
  ``s = max|w| / (2^(b-1) - 1)`` (symmetric, zero exact, the most negative code unused).
* ``b == 1``: ``q = sign(w) * mean|w|`` (binary weights with the L2-optimal scale).

Biases, normalisation layers and embeddings stay float32 and are not counted in the
average bits (which are weighted by each unit's weight count). Quantization always acts on
a copy of the caller's model (:func:`quantized_copy`); fine-tuning uses the straight-through
estimator (the forward pass sees the quantized weights, the gradient flows to the float
ones) and keeps the bit assignment fixed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrize

from coevo.sim.errors import UserInputError

MAX_BITS = 32
"""Widest bit width accepted (32 bits is float-like precision for any weight this code meets)."""

Batches = Iterable[tuple[torch.Tensor, torch.Tensor]]
"""A classification loader: ``(x, y)`` batches, ``y`` int64 class labels, ``model(x)`` logits ``[B, C]``."""

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class Layer:
    """A quantizable layer: its qualified name, its number of units and weights per unit."""

    name: str
    units: int
    weights_per_unit: int

    @property
    def weights(self) -> int:
        return self.units * self.weights_per_unit


def quant_layers(model: nn.Module) -> list[Layer]:
    """The model's ``Conv2d`` and ``Linear`` layers in module order.

    Raises:
        UserInputError: the model has none (nothing to quantize).
    """
    layers = []
    for name, mod in model.named_modules():
        if isinstance(mod, nn.Conv2d | nn.Linear):
            w = mod.weight
            layers.append(Layer(name, int(w.shape[0]), int(w[0].numel())))
    if not layers:
        raise UserInputError(f"{type(model).__name__} has no Conv2d or Linear layer: nothing to quantize per filter/neuron")
    return layers


def weight_of(module: nn.Module) -> torch.Tensor:
    """The weight tensor of a Conv2d/Linear (typed)."""
    w = module.weight
    assert isinstance(w, torch.Tensor)
    return w


def check_bits(bits: Mapping[str, Sequence[int]], layers: Sequence[Layer]) -> dict[str, list[int]]:
    """``bits`` (layer name -> one width per unit) checked against ``layers``.

    Raises:
        UserInputError: a layer missing or unknown, a wrong number of widths, a width < 1 or > 32.
    """
    names = [layer.name for layer in layers]
    unknown = sorted(set(bits) - set(names))
    missing = [n for n in names if n not in bits]
    if unknown or missing:
        raise UserInputError(
            f"bits must name every Conv2d/Linear layer ({', '.join(names)}); "
            + "; ".join(p for p in (f"unknown {unknown}" if unknown else "", f"missing {missing}" if missing else "") if p)
        )
    out = {}
    for layer in layers:
        widths = [int(b) for b in bits[layer.name]]
        if len(widths) != layer.units:
            raise UserInputError(f"layer {layer.name} has {layer.units} units, got {len(widths)} bit widths")
        bad = [b for b in widths if not 1 <= b <= MAX_BITS]
        if bad:
            raise UserInputError(f"bits must be integers from 1 to {MAX_BITS}; layer {layer.name} has {bad[0]}")
        out[layer.name] = widths
    return out


def fake_quant(w: torch.Tensor, bits: torch.Tensor) -> torch.Tensor:
    """``w`` (units along dim 0) quantized symmetrically per unit to ``bits`` (an int tensor, one per unit); no gradient trick."""
    flat = w.reshape(w.shape[0], -1)
    b = bits.to(flat.device).reshape(-1, 1)
    levels = (2.0 ** (b.float() - 1) - 1).clamp(min=1.0)
    scale = flat.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / levels
    q = torch.clamp(torch.round(flat / scale), -levels, levels) * scale
    binary = torch.sign(flat) * flat.abs().mean(dim=1, keepdim=True)
    return torch.where(b == 1, binary, q).reshape(w.shape)


class _FakeQuant(nn.Module):
    """A weight parametrization: quantized in the forward pass, identity gradient (straight-through)."""

    bits: torch.Tensor

    def __init__(self, bits: Sequence[int]) -> None:
        super().__init__()
        self.register_buffer("bits", torch.tensor(list(bits), dtype=torch.int64))

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return w + (fake_quant(w, self.bits) - w).detach()


def quantized_copy(model: nn.Module, bits: Mapping[str, Sequence[int]], *, trainable: bool = False) -> nn.Module:
    """A copy of ``model`` whose Conv2d/Linear weights are fake-quantized to ``bits`` (the caller's model is untouched).

    Args:
        model: any module with Conv2d/Linear layers.
        bits: layer name -> one width per unit (see :func:`check_bits`).
        trainable: keep the quantizer as a straight-through parametrization (for fine-tuning;
            :func:`freeze` bakes it in); otherwise the copy holds the quantized weights as plain tensors.
    """
    checked = check_bits(bits, quant_layers(model))
    twin = copy.deepcopy(model)
    modules = dict(twin.named_modules())
    for name, widths in checked.items():
        mod = modules[name]
        if trainable:
            parametrize.register_parametrization(mod, "weight", _FakeQuant(widths))
        else:
            with torch.no_grad():
                mod.weight.copy_(fake_quant(mod.weight, torch.tensor(widths)))
    return twin


def freeze(model: nn.Module) -> nn.Module:
    """Bake the straight-through quantizers of a :func:`quantized_copy` ``trainable`` model into plain weights (in place)."""
    for mod in model.modules():
        if parametrize.is_parametrized(mod, "weight"):
            parametrize.remove_parametrizations(mod, "weight", leave_parametrized=True)
    return model


def logits_of(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``model(x)``, checked to be classification logits ``[B, classes]`` for labels ``y`` ``[B]``."""
    out = model(x)
    if not isinstance(out, torch.Tensor) or out.dim() != 2 or y.dim() != 1 or out.shape[0] != y.shape[0]:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise UserInputError(
            f"class-based quantization needs a classifier: model(x) must give logits [batch, classes] for labels [batch]; got {shape} "
            f"for labels {tuple(y.shape)}"
        )
    return out


def accuracy(model: nn.Module, loader: Batches, max_batches: int | None = None) -> float:
    """Top-1 accuracy in % of ``model`` on ``loader`` (eval mode, no gradient; the mode is restored)."""
    was = model.training
    model.eval()
    right = total = 0
    with torch.no_grad():
        for i, (x, y) in enumerate(loader):
            if max_batches is not None and i >= max_batches:
                break
            right += int((logits_of(model, x, y).argmax(dim=-1) == y).sum())
            total += int(y.numel())
    model.train(was)
    if total == 0:
        raise UserInputError("the evaluation loader yielded no samples")
    return 100.0 * right / total


@dataclass(frozen=True)
class FineTune:
    """What :func:`finetune` did: val accuracy after each epoch (index 0: before any), the epoch kept."""

    val_accuracy: list[float]
    best_epoch: int


def finetune(
    model: nn.Module,
    bits: Mapping[str, Sequence[int]],
    train: Batches,
    val: Batches,
    *,
    epochs: int,
    lr: float = 1e-3,
    seed: int = 0,
    progress: Progress | None = None,
) -> tuple[nn.Module, FineTune]:
    """Quantize a copy of ``model`` to ``bits`` and fine-tune it with the straight-through estimator.

    Adam on the cross-entropy of ``train`` for up to ``epochs`` epochs; after each epoch the
    validation accuracy is measured and the best epoch's weights are kept (epoch 0, plain
    round-to-nearest, included): the number of epochs is chosen on the validation split.

    Returns:
        the quantized model (plain tensors, eval mode) and the per-epoch record.
    """
    if epochs < 0:
        raise UserInputError(f"finetune epochs must be >= 0, got {epochs}")
    torch.manual_seed(seed)
    twin = quantized_copy(model, bits, trainable=True)
    history = [accuracy(twin, val)]
    best_state = copy.deepcopy(twin.state_dict())
    best = 0
    params = [p for p in twin.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr) if epochs else None
    for epoch in range(1, epochs + 1):
        twin.train()
        for x, y in train:
            assert opt is not None
            opt.zero_grad()
            F.cross_entropy(logits_of(twin, x, y), y).backward()
            opt.step()
        history.append(accuracy(twin, val))
        if history[-1] > history[best]:
            best, best_state = epoch, copy.deepcopy(twin.state_dict())
        if progress is not None:
            progress(f"fine-tuning epoch {epoch}/{epochs}: val {history[-1]:.1f} %", epoch / epochs)
    twin.load_state_dict(best_state)
    twin = freeze(twin).eval()
    return twin, FineTune(history, best)


def average_bits(bits: Mapping[str, Sequence[int]], layers: Sequence[Layer]) -> float:
    """Average weight bits, weighted by each unit's weight count."""
    total = sum(layer.weights for layer in layers)
    return sum(b * layer.weights_per_unit for layer in layers for b in bits[layer.name]) / total


def model_bits(model: nn.Module, bits: Mapping[str, Sequence[int]]) -> int:
    """Storage of ``model`` in bits: quantized weights at their widths (plus 32 bits per unit scale), everything else float32."""
    layers = quant_layers(model)
    quantized = sum(b * layer.weights_per_unit + 32 for layer in layers for b in bits[layer.name])
    other = sum(p.numel() for p in model.parameters()) - sum(layer.weights for layer in layers)
    return int(quantized + 32 * other)
