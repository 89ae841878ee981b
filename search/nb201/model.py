"""The NAS-Bench-201 network in PyTorch (the standard "TinyNetwork" skeleton).

Stem 3x3 conv (C=16) + BN; three stages of N=5 cells at C, 2C, 4C channels joined by
residual reduction blocks (stride-2 ReLU-Conv-BN pair plus an avg-pool/1x1-conv shortcut);
BN + ReLU, global average pooling, linear classifier. Cell ops: none (zeros), skip_connect
(identity), nor_conv_1x1 / nor_conv_3x3 (ReLU-Conv-BN), avg_pool_3x3. ``bn=False`` builds
the same network without batch norm (synflow is defined on that variant).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from coevo.search.nb201.space import EDGES, OPS


class ReLUConvBN(nn.Sequential):
    """ReLU, then a ``kernel`` x ``kernel`` convolution, then batch norm (an identity when ``bn`` is False): NB201's conv ops."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, bn: bool) -> None:
        super().__init__(
            nn.ReLU(inplace=False),
            nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2, bias=not bn),
            nn.BatchNorm2d(c_out) if bn else nn.Identity(),
        )


class Zero(nn.Module):
    """NB201's ``none`` op: zeros shaped as the input (the edge carries nothing)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mul(0.0)


def make_op(name: str, channels: int, bn: bool) -> nn.Module:
    """One cell operation at stride 1."""
    if name == "none":
        return Zero()
    if name == "skip_connect":
        return nn.Identity()
    if name == "nor_conv_1x1":
        return ReLUConvBN(channels, channels, 1, 1, bn)
    if name == "nor_conv_3x3":
        return ReLUConvBN(channels, channels, 3, 1, bn)
    if name == "avg_pool_3x3":
        return nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
    raise ValueError(f"unknown op {name!r}")


class Cell(nn.Module):
    """Node i = sum over j < i of op(j -> i)(node j); the output is node 3."""

    def __init__(self, cell: Sequence[int], channels: int, bn: bool) -> None:
        super().__init__()
        self.edges = list(EDGES)
        self.ops = nn.ModuleList(make_op(OPS[c], channels, bn) for c in cell)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nodes = [x]
        for target in (1, 2, 3):
            nodes.append(sum(op(nodes[src]) for (src, dst), op in zip(self.edges, self.ops, strict=True) if dst == target))
        return nodes[3]


class Reduction(nn.Module):
    """ResNet basic block with stride 2, as in NAS-Bench-201."""

    def __init__(self, c_in: int, c_out: int, bn: bool) -> None:
        super().__init__()
        self.a = ReLUConvBN(c_in, c_out, 3, 2, bn)
        self.b = ReLUConvBN(c_out, c_out, 3, 1, bn)
        self.shortcut = nn.Sequential(nn.AvgPool2d(2, stride=2), nn.Conv2d(c_in, c_out, 1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x)) + self.shortcut(x)


class NB201Network(nn.Module):
    """The NB201 macro skeleton around one cell.

    Args:
        cell: 6 op codes.
        channels: C of the first stage (16 in the benchmark).
        cells_per_stage: N (5 in the benchmark).
        num_classes: classifier width.
        bn: include batch norm.
    """

    def __init__(
        self, cell: Sequence[int], *, channels: int = 16, cells_per_stage: int = 5, num_classes: int = 10, bn: bool = True
    ) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1, bias=not bn), nn.BatchNorm2d(channels) if bn else nn.Identity())
        layers: list[nn.Module] = []
        c = channels
        for stage in range(3):
            if stage > 0:
                layers.append(Reduction(c, 2 * c, bn))
                c *= 2
            layers += [Cell(cell, c, bn) for _ in range(cells_per_stage)]
        self.cells = nn.Sequential(*layers)
        self.lastact = nn.Sequential(nn.BatchNorm2d(c) if bn else nn.Identity(), nn.ReLU(inplace=False))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(c, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The feature map before global pooling (what the Zen-score compares)."""
        out: torch.Tensor = self.lastact(self.cells(self.stem(x)))
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))
