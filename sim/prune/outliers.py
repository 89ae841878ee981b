"""Activation outliers: how unevenly a model's Linear layers' input channels are scaled.

Activation-aware pruning (a weight's score is ``|w| x ||X_j||``, its input channel's norm over
calibration tokens) departs from magnitude pruning only where input channels differ a lot in
scale, the regime large language models are in (Dettmers et al., "LLM.int8()", NeurIPS 2022:
features of magnitude >= 6 in most layers; Sun et al., "A Simple and Effective Pruning Approach
for Large Language Models", ICLR 2024, motivate the activation term by them). This module
measures that regime on a model, per Linear layer input, over calibration tokens:

* ``absmax_ratio``: the largest channel's max ``|x|`` over the median channel's (1 = even);
* ``norm_ratio``: the same for the channels' L2 norms over the tokens (what the pruning score weighs);
* ``kurtosis``: Pearson kurtosis of all the layer's input values (3 for a Gaussian; Bondarenko
  et al., "Quantizable Transformers", NeurIPS 2023, track it as the outlier measure);
* ``outlier_channels``: channels with ``|x| >= 6`` on at least 6 % of the tokens (LLM.int8's
  magnitude and sequence-share thresholds; its third, "in 25 % of layers", is
  :attr:`OutlierReport.systematic`, over the hidden-width inputs only, as LLM.int8 leaves the FFN
  contraction's input out).
* ``top_share``: the share of the layer's input energy (the sum of ``x**2`` over tokens and
  channels) that its largest channel carries: ``1 / channels`` when every channel has the same
  norm, towards 1 when one channel dominates (an outlier feature of LLM.int8's kind holds most of
  it). Unlike the ratios to the median it is not moved by the bulk of small channels.

Layers that read the same tensor (an attention block's q, k and v) are one input: the report
keeps the first of them, so no input is counted twice in the medians or the 25 % rule.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from coevo.sim.prune.core import calibration_inputs, prunable_layers

MAGNITUDE = 6.0
"""LLM.int8's outlier magnitude."""
TOKEN_SHARE = 0.06
"""LLM.int8's share of sequence positions a feature must reach."""
LAYER_SHARE = 0.25
"""LLM.int8's share of layers a systematic outlier feature appears in."""


@dataclass
class _Sums:
    """Running per-channel and whole-tensor sums of one layer's inputs."""

    n: int = 0
    absmax: torch.Tensor | None = None
    sq: torch.Tensor | None = None
    big: torch.Tensor | None = None
    moments: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])

    def add(self, x: torch.Tensor) -> None:
        x = x.detach().reshape(-1, x.shape[-1]).double()
        a = x.abs()
        self.n += x.shape[0]
        self.absmax = a.amax(0) if self.absmax is None else torch.maximum(self.absmax, a.amax(0))
        sq = (x * x).sum(0)
        self.sq = sq if self.sq is None else self.sq + sq
        big = (a >= MAGNITUDE).sum(0)
        self.big = big if self.big is None else self.big + big
        for k in range(4):
            self.moments[k] += float((x ** (k + 1)).sum())


@dataclass(frozen=True)
class LayerOutliers:
    """The outlier measures of one Linear layer's input (module doc)."""

    layer: str
    channels: int
    tokens: int
    absmax: float
    absmax_ratio: float
    norm_ratio: float
    kurtosis: float
    outlier_channels: tuple[int, ...]
    top_share: float = float("nan")
    """Largest channel's share of the input energy (module doc); NaN when read from data saved before it was measured."""


@dataclass(frozen=True)
class OutlierReport:
    """The measures of every Linear layer's input of a model, in execution order."""

    layers: tuple[LayerOutliers, ...]

    @property
    def hidden_width(self) -> int:
        """The model's hidden width: the first measured input's (a transformer's first Linear layer reads the hidden state)."""
        return self.layers[0].channels

    @property
    def hidden_layers(self) -> tuple[LayerOutliers, ...]:
        """The inputs of the hidden width: what LLM.int8's outlier analysis covers.

        LLM.int8 (section 4.1) counts features of the hidden states, the inputs of the attention
        projections and of the FFN expansion, and leaves out the FFN contraction layer, whose input
        (4x wider here) is the GELU output and not a hidden state.
        """
        return tuple(layer for layer in self.layers if layer.channels == self.hidden_width)

    @property
    def systematic(self) -> tuple[int, ...]:
        """Hidden-state channels that are outlier channels in at least 25 % of the hidden-width inputs (LLM.int8's third rule)."""
        hidden = self.hidden_layers
        counts: dict[int, int] = {}
        for layer in hidden:
            for c in layer.outlier_channels:
                counts[c] = counts.get(c, 0) + 1
        return tuple(sorted(c for c, k in counts.items() if k >= LAYER_SHARE * len(hidden)))

    def summary(self) -> dict[str, float]:
        """Model-level figures: medians over layers of the ratios and kurtosis, the largest value, outlier counts."""
        med = statistics.median
        hidden = sum(len(layer.outlier_channels) for layer in self.hidden_layers)
        return {
            "layers": float(len(self.layers)),
            "absmax": max(layer.absmax for layer in self.layers),
            "absmax_ratio_median": med([layer.absmax_ratio for layer in self.layers]),
            "norm_ratio_median": med([layer.norm_ratio for layer in self.layers]),
            "kurtosis_median": med([layer.kurtosis for layer in self.layers]),
            "kurtosis_max": max(layer.kurtosis for layer in self.layers),
            "layers_with_outliers": float(sum(1 for layer in self.layers if layer.outlier_channels)),
            "hidden_outlier_channels": float(hidden),
            "other_outlier_channels": float(sum(len(layer.outlier_channels) for layer in self.layers) - hidden),
            "systematic_channels": float(len(self.systematic)),
        }

    def as_rows(self) -> list[dict[str, Any]]:
        """One flat dict per layer (outlier channels joined by spaces), for CSV."""
        rows = []
        for layer in self.layers:
            row = asdict(layer)
            row["outlier_channels"] = " ".join(map(str, layer.outlier_channels))
            rows.append(row)
        return rows


def activation_outliers(
    model: nn.Module, batches: Iterable[Any], tokens: int = 16384, layers: Sequence[str] | None = None
) -> OutlierReport:
    """The outlier measures (module doc) of ``layers``' inputs (default: the prunable Linear layers) over ``tokens`` calibration tokens.

    Raises:
        UserInputError: the model has no Linear layer, or ``tokens`` < 1 (from :mod:`sim.prune.core`).
    """
    names = list(layers) if layers is not None else prunable_layers(model)
    inputs, _ = calibration_inputs(batches, tokens)
    mods = dict(model.named_modules())
    sums = {n: _Sums() for n in names}
    order: list[str] = []
    # each layer's first input, held (so no later tensor reuses its memory) and compared by identity: q, k and v read one tensor
    first_input: dict[str, torch.Tensor] = {}

    def hook(name: str) -> Callable[..., None]:
        def seen(_module: nn.Module, args: tuple[Any, ...]) -> None:
            if name not in order:
                order.append(name)
                first_input[name] = args[0]
            sums[name].add(args[0])

        return seen

    handles = [mods[n].register_forward_pre_hook(hook(n)) for n in names]
    was = model.training
    try:
        model.eval()
        with torch.no_grad():
            for x in inputs:
                model(x)
    finally:
        model.train(was)
        for h in handles:
            h.remove()
    distinct = [n for i, n in enumerate(order) if not any(first_input[n] is first_input[m] for m in order[:i])]
    return OutlierReport(tuple(_layer(n, sums[n]) for n in distinct))


def _layer(name: str, s: _Sums) -> LayerOutliers:
    assert s.absmax is not None and s.sq is not None and s.big is not None
    count = s.n * s.absmax.numel()
    mean = s.moments[0] / count
    m2, m3, m4 = (s.moments[k] / count for k in (1, 2, 3))
    var = m2 - mean * mean
    # the fourth central moment from the raw ones: E[(x-m)^4] = E x^4 - 4 m E x^3 + 6 m^2 E x^2 - 3 m^4
    central4 = m4 - 4 * mean * m3 + 6 * mean * mean * m2 - 3 * mean**4
    norms = s.sq.sqrt()
    return LayerOutliers(
        layer=name,
        channels=int(s.absmax.numel()),
        tokens=s.n,
        absmax=float(s.absmax.max()),
        absmax_ratio=float(s.absmax.max() / s.absmax.median().clamp_min(1e-12)),
        norm_ratio=float(norms.max() / norms.median().clamp_min(1e-12)),
        kurtosis=central4 / var**2 if var > 0 else float("nan"),
        outlier_channels=tuple(int(c) for c in torch.nonzero(s.big >= TOKEN_SHARE * s.n).flatten()),
        top_share=float(s.sq.max() / s.sq.sum()) if float(s.sq.sum()) > 0 else float("nan"),
    )
