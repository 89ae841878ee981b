"""A UViT-like diffusion transformer with long skips (Bao et al., "All are Worth Words", 2023).

Latent patches become tokens; ``depth // 2`` transformer blocks form the "in" half, whose
outputs are long skips; a middle block; the "out" half's blocks each concatenate the
mirrored skip on the feature dimension and project it back (a linear layer) before the
transformer layer; a final norm and linear head turn tokens back into patches. Time and
class tokens are left out: one or two extra tokens do not change the skip structure.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from coevo.sim.pipeline.blocks import Block, PipelineModel


@dataclass(frozen=True)
class UViTConfig:
    """Shape of a UViT.

    Attributes:
        name: preset name.
        in_channels: latent channels.
        patch: patch size (tokens = (resolution / patch)^2).
        dim: token width.
        depth: transformer blocks in all (in half, mid, out half; odd).
        heads: attention heads.
        mlp_ratio: MLP hidden width over ``dim``.
    """

    name: str
    in_channels: int = 4
    patch: int = 2
    dim: int = 1152
    depth: int = 29
    heads: int = 16
    mlp_ratio: int = 4


PRESETS: dict[str, UViTConfig] = {
    "uvit-h": UViTConfig("uvit-h"),
    "uvit-small": UViTConfig("uvit-small", dim=512, depth=13, heads=8),
    "uvit-tiny": UViTConfig("uvit-tiny", dim=16, depth=5, heads=2, mlp_ratio=2),
}
"""``uvit-h``: UViT-H/2 (1152 wide, 29 blocks, ~500 M parameters); smaller ones for tests."""


class TransformerLayer(nn.Module):
    """Pre-norm self-attention and MLP, each with a residual."""

    def __init__(self, dim: int, heads: int, mlp_ratio: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim * mlp_ratio), nn.GELU(), nn.Linear(dim * mlp_ratio, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class PatchEmbed(nn.Module):
    """Non-overlapping patches of a latent as tokens: (B, C, H, W) -> (B, HW / p^2, dim)."""

    def __init__(self, channels: int, dim: int, patch: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(channels, dim, patch, stride=patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


def uvit(cfg: UViTConfig) -> PipelineModel:
    """The UViT as pipeline blocks (built on the current default device)."""
    if cfg.depth % 2 != 1 or cfg.depth < 3:
        raise ValueError(f"UViT depth must be odd and at least 3, got {cfg.depth}")
    half = cfg.depth // 2
    blocks = [Block("embed", "other", [PatchEmbed(cfg.in_channels, cfg.dim, cfg.patch)])]
    for k in range(half):
        blocks.append(Block(f"in{k}", "encoder", [TransformerLayer(cfg.dim, cfg.heads, cfg.mlp_ratio)]))
    blocks.append(Block("mid", "mid", [TransformerLayer(cfg.dim, cfg.heads, cfg.mlp_ratio)]))
    for k in range(half):
        src = half - k  # in-block index in the list (embed is 0): the deepest skip feeds the first out-block
        layers = [nn.Linear(2 * cfg.dim, cfg.dim), TransformerLayer(cfg.dim, cfg.heads, cfg.mlp_ratio)]
        blocks.append(Block(f"out{k}", "decoder", layers, skip_from=src, cat_dim=-1))
    blocks.append(Block("head", "other", [nn.LayerNorm(cfg.dim), nn.Linear(cfg.dim, cfg.patch**2 * cfg.in_channels)]))
    shape = lambda microbatch, resolution: (microbatch, cfg.in_channels, resolution, resolution)  # noqa: E731
    return PipelineModel(cfg.name, blocks, shape, resolution_multiple=cfg.patch)
