"""A zoo CNN cut into freezable blocks, and a counter of the multiply-accumulates training really executes.

The zoo's CNNs (:class:`sim.zoo.DigitsCNN`, :class:`sim.zoo.MnistCNN`) are conv1-conv2-conv3 then
fc1-fc2. Freezing goes block by block from the input: block ``k`` is conv(k+1) with its ReLU and
pooling, and the head (fc1, fc2) always trains. Running the blocks then the head is exactly the
model's ``forward`` (checked by the tests).

MACs are counted, not estimated from a formula of the schedule: forward hooks on every Conv2d and
Linear read the shapes of each call actually made. A call made while autograd records, and followed
by ``backward``, also costs the backward pass: the weight gradient (as many MACs as the forward) when
the weight trains, and the input gradient (as many again) when the input needs a gradient, i.e. some
layer before it trains. That is what PyTorch executes (it skips both otherwise); the tests check the
count against :class:`torch.utils.flop_counter.FlopCounterMode`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from coevo.sim.errors import UserInputError


class Block(nn.Module):
    """conv -> ReLU -> (2x2 max-pool when ``pool``): one freezable unit of a zoo CNN."""

    def __init__(self, conv: nn.Conv2d, pool: bool) -> None:
        super().__init__()
        self.conv = conv
        self.pool = pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv(x))
        return F.max_pool2d(y, 2) if self.pool else y


class Head(nn.Module):
    """flatten -> fc1 -> ReLU -> fc2: the part that never freezes."""

    def __init__(self, fc1: nn.Linear, fc2: nn.Linear) -> None:
        super().__init__()
        self.fc1 = fc1
        self.fc2 = fc2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def split(model: nn.Module) -> tuple[list[Block], Head]:
    """The freezable blocks (input first) and the head of a zoo CNN; they share the model's parameters.

    Raises:
        UserInputError: the model is not one of the zoo's CNNs (DigitsCNN, MnistCNN).
    """
    kind = type(model).__name__
    if kind not in ("DigitsCNN", "MnistCNN"):
        raise UserInputError(f"layer freezing knows the zoo CNNs (DigitsCNN, MnistCNN), not {kind}; use cnn-digits or cnn-mnist5k")
    m = model
    # DigitsCNN pools after conv2 and conv3 (8 -> 4 -> 2); MnistCNN after all three (28 -> 14 -> 7 -> 3)
    pools = (kind == "MnistCNN", True, True)
    blocks = [Block(conv, pool) for conv, pool in zip((m.conv1, m.conv2, m.conv3), pools, strict=True)]  # type: ignore[arg-type]
    return blocks, Head(m.fc1, m.fc2)  # type: ignore[arg-type]


def run_blocks(blocks: list[Block], x: torch.Tensor, start: int = 0, stop: int | None = None) -> torch.Tensor:
    """``x`` through ``blocks[start:stop]``."""
    for block in blocks[start:stop]:
        x = block(x)
    return x


@dataclass
class MacCounter:
    """Forward and backward multiply-accumulates of every Conv2d/Linear call seen while :meth:`counting`.

    ``forward`` counts every call; ``backward`` the gradient MACs of the calls made with autograd
    recording (weight gradient when the weight trains, input gradient when the input needs one).
    Backward MACs are booked when the forward runs, so a recorded forward must be followed by
    ``backward`` (the training loop always does; evaluation runs under ``torch.no_grad``).
    """

    forward: int = 0
    backward: int = 0
    by_layer: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Forward plus backward MACs."""
        return self.forward + self.backward

    @contextmanager
    def counting(self, model: nn.Module) -> Iterator[MacCounter]:
        """Count the calls of ``model``'s Conv2d/Linear layers inside the block."""
        handles = []
        for name, mod in model.named_modules():
            if isinstance(mod, nn.Conv2d | nn.Linear):
                handles.append(mod.register_forward_hook(self._hook(name)))
        try:
            yield self
        finally:
            for h in handles:
                h.remove()

    def _hook(self, name: str):  # type: ignore[no-untyped-def]
        def hook(mod: nn.Module, inputs: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
            macs = layer_macs(mod, out)
            self.forward += macs
            self.by_layer[name] = self.by_layer.get(name, 0) + macs
            if torch.is_grad_enabled() and out.requires_grad:
                weight = mod.weight
                assert isinstance(weight, torch.Tensor)
                self.backward += macs * (int(weight.requires_grad) + int(inputs[0].requires_grad))

        return hook


def layer_macs(mod: nn.Module, out: torch.Tensor) -> int:
    """MACs of one call of a Conv2d (per output element: in/groups x kernel area) or Linear (in features), from its output."""
    if isinstance(mod, nn.Conv2d):
        per_out = (mod.in_channels // mod.groups) * mod.kernel_size[0] * mod.kernel_size[1]
        return int(out.numel()) * per_out
    if isinstance(mod, nn.Linear):
        return int(out.numel()) * mod.in_features
    raise TypeError(f"no MAC count for {type(mod).__name__}")
