"""Pipeline blocks: the unit every partitioner, simulator and real run works on.

A model enters the pipeline planner as a :class:`PipelineModel`: an ordered list of
:class:`Block` modules (forward order) and the shape of its input. Block ``i`` takes the
output of block ``i - 1`` and, when ``skip_from`` is set, the output of an earlier block
(a long skip connection), concatenated along ``cat_dim`` before its layers. This is the
contract a user-supplied ``torch.nn.Module`` meets to be planned (see
:func:`sim.pipeline.profile.build_model`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

ROLES = ("encoder", "mid", "decoder", "other")


class Block(nn.Module):
    """One pipeline block: optional skip concatenation, then layers.

    Attributes:
        name: e.g. ``enc3``, ``mid``, ``dec5``.
        role: ``encoder`` (its output is a skip), ``mid``, ``decoder`` (consumes a skip) or ``other``.
        skip_from: index (in the block list) of the earlier block whose output it concatenates.
        cat_dim: dimension of the concatenation (1: channels of an image tensor; -1: token features).
    """

    def __init__(self, name: str, role: str, layers: Sequence[nn.Module], skip_from: int | None = None, cat_dim: int = 1) -> None:
        super().__init__()
        self.name = name
        self.role = role
        self.skip_from = skip_from
        self.cat_dim = cat_dim
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor, skip: torch.Tensor | None = None) -> torch.Tensor:
        if skip is not None:
            x = torch.cat([x, skip], dim=self.cat_dim)
        return self.layers(x)


@dataclass
class PipelineModel:
    """A model as pipeline blocks.

    Attributes:
        name: model name (preset or ``file.py:function``).
        blocks: the blocks in forward order.
        input_shape: ``(microbatch, resolution) -> shape`` of the first block's input.
        resolution_multiple: resolutions must be a multiple of this (downsampling, patches).
    """

    name: str
    blocks: list[Block]
    input_shape: Callable[[int, int], tuple[int, ...]]
    resolution_multiple: int = 1


class BlockNet(nn.Module):
    """The blocks of a :class:`PipelineModel` as one module (single-process reference runs)."""

    def __init__(self, model: PipelineModel) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(model.blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs: list[torch.Tensor] = []
        for block in self.blocks:
            assert isinstance(block, Block)
            x = block(x, outputs[block.skip_from] if block.skip_from is not None else None)
            outputs.append(x)
        return x
