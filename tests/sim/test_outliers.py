"""Activation-outlier measures: one channel scaled far above the rest is found, an even input is not."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from coevo.sim.prune.outliers import MAGNITUDE, LayerOutliers, OutlierReport, activation_outliers


class _Blocks(nn.Module):
    """Two blocks of two Linear layers each; ``scale`` multiplies the input's channels (an outlier where it is large)."""

    def __init__(self, scale: torch.Tensor) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.scale = scale
        self.blocks = nn.ModuleList([nn.ModuleDict({"a": nn.Linear(16, 16), "b": nn.Linear(16, 16)}) for _ in range(2)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            h = x * self.scale
            x = block["b"](torch.relu(block["a"](h)))
            x = x / x.std(-1, keepdim=True).clamp_min(1e-6)  # renormalise, as a LayerNorm would
        return x


def _batches(n: int = 8) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    return [torch.randn(64, 16, generator=gen) for _ in range(n)]


def test_a_channel_scaled_twenty_fold_is_an_outlier_channel_and_raises_every_measure() -> None:
    even = activation_outliers(_Blocks(torch.ones(16)), _batches(), tokens=512)
    scale = torch.ones(16)
    scale[5] = 20.0
    skewed = activation_outliers(_Blocks(scale), _batches(), tokens=512)
    first_even, first_skewed = even.layers[0], skewed.layers[0]  # blocks.0.a reads the scaled input
    assert first_even.outlier_channels == () and 5 in first_skewed.outlier_channels
    assert first_skewed.absmax_ratio > 5 * first_even.absmax_ratio
    assert first_skewed.norm_ratio > 5 * first_even.norm_ratio
    assert first_even.kurtosis == pytest.approx(3.0, abs=0.5)  # a Gaussian's
    assert first_skewed.kurtosis > 10
    assert first_skewed.absmax >= MAGNITUDE
    assert 5 in skewed.systematic  # outlier in both blocks' first layer: half the layers of width 16
    assert even.systematic == () and even.summary()["layers_with_outliers"] == 0


def test_counted_tokens_and_layers_read_twice_are_one_input() -> None:
    class Shared(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.blocks[0](x) + self.blocks[1](x)  # both read the same tensor, like q and k

    gen = torch.Generator().manual_seed(0)
    report = activation_outliers(Shared(), [torch.randn(100, 8, generator=gen) for _ in range(3)], tokens=250)
    assert [layer.layer for layer in report.layers] == ["blocks.0"]
    assert report.layers[0].tokens == 250


def test_top_share_is_the_largest_channels_share_of_the_input_energy() -> None:
    layer = nn.Sequential(nn.Linear(4, 2))
    # channel energies over the 3 tokens: 3^2 = 9, 1, 1 + 1 = 2, 0; total 12, the largest 9
    x = torch.tensor([[3.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    assert activation_outliers(layer, [x], tokens=3).layers[0].top_share == pytest.approx(9 / 12)
    even = torch.tensor([[1.0, -1.0, 1.0, -1.0], [-2.0, 2.0, 2.0, -2.0]])  # every channel 1 + 4 = 5
    assert activation_outliers(layer, [even], tokens=2).layers[0].top_share == pytest.approx(1 / 4)


def _layer(name: str, width: int, channels: tuple[int, ...]) -> LayerOutliers:
    return LayerOutliers(name, width, 100, 8.0, 4.0, 2.0, 5.0, channels, 0.1)


def test_the_systematic_rule_counts_hidden_state_inputs_only_as_llm_int8_does() -> None:
    # a block's attention and FFN-expansion inputs are of the hidden width (16); the FFN contraction reads a 64-wide input
    report = OutlierReport(
        (
            _layer("b0.attn.q", 16, (5,)),
            _layer("b0.fc2", 64, (1, 2)),
            _layer("b1.attn.q", 16, ()),
            _layer("b1.fc1", 16, ()),
            _layer("b1.fc2", 64, (1, 2)),
            _layer("b2.attn.q", 16, ()),
        )
    )
    assert report.hidden_width == 16 and len(report.hidden_layers) == 4
    # channel 5: 1 of 4 hidden inputs (>= 25 %); channels 1 and 2 are outliers in every contraction input but not in a hidden state
    assert report.systematic == (5,)
    summary = report.summary()
    assert summary["hidden_outlier_channels"] == 1 and summary["other_outlier_channels"] == 4
    assert summary["layers_with_outliers"] == 3 and summary["systematic_channels"] == 1
