"""An SD-like diffusion UNet as a flat list of pipeline blocks.

The network follows Stable Diffusion's UNet layout (conv-in; per resolution level
``res_blocks`` residual blocks, with self-attention on the chosen levels, and a downsample
except at the last level; a middle block; the mirrored decoder whose residual blocks each
concatenate one skip activation, with upsamples; norm + conv-out). Text cross-attention
and the timestep embedding are left out: they do not change the skip structure, and the
attention FLOPs they add are a constant factor per block.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from coevo.sim.pipeline.blocks import Block, PipelineModel


@dataclass(frozen=True)
class UNetConfig:
    """Shape of an SD-like UNet.

    Attributes:
        name: preset name.
        in_channels: latent channels.
        base: channels of the first level.
        mults: channel multiplier per resolution level.
        res_blocks: residual blocks per level in the encoder (the decoder has one more).
        attn_levels: levels with self-attention after each residual block.
        heads: attention heads.
    """

    name: str
    in_channels: int = 4
    base: int = 320
    mults: tuple[int, ...] = (1, 2, 4, 4)
    res_blocks: int = 2
    attn_levels: tuple[int, ...] = (0, 1, 2)
    heads: int = 8


PRESETS: dict[str, UNetConfig] = {
    "unet-sd": UNetConfig("unet-sd"),
    "unet-small": UNetConfig("unet-small", base=64, mults=(1, 2, 2), res_blocks=1, attn_levels=(1,), heads=4),
    "unet-tiny": UNetConfig("unet-tiny", base=8, mults=(1, 2), res_blocks=1, attn_levels=(), heads=1),
}
"""Named models: ``unet-sd`` (SD 1.x/2.x layout, ~0.86 B parameters without cross-attention), smaller ones for tests."""


class ResBlock(nn.Module):
    """GroupNorm-SiLU-conv twice with a residual (1x1 conv when channels change)."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        groups = 32 if c_in % 32 == 0 and c_out % 32 == 0 else 1
        self.body = nn.Sequential(
            nn.GroupNorm(groups, c_in),
            nn.SiLU(),
            nn.Conv2d(c_in, c_out, 3, padding=1),
            nn.GroupNorm(groups, c_out),
            nn.SiLU(),
            nn.Conv2d(c_out, c_out, 3, padding=1),
        )
        self.skip = nn.Conv2d(c_in, c_out, 1) if c_in != c_out else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) + self.skip(x)


class SelfAttention(nn.Module):
    """Multi-head self-attention over the spatial positions."""

    def __init__(self, channels: int, heads: int) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(32 if channels % 32 == 0 else 1, channels)
        self.attn = nn.MultiheadAttention(channels, heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        t = self.norm(x).flatten(2).transpose(1, 2)
        out, _ = self.attn(t, t, t, need_weights=False)
        return x + out.transpose(1, 2).reshape(b, c, h, w)


def build_blocks(cfg: UNetConfig) -> list[Block]:
    """The UNet as an ordered list of blocks (forward order)."""
    blocks: list[Block] = []
    skips: list[tuple[int, int]] = []  # (block index, channels) of encoder outputs, a stack
    ch = cfg.base
    blocks.append(Block("enc0", "encoder", [nn.Conv2d(cfg.in_channels, ch, 3, padding=1)]))
    skips.append((0, ch))
    for level, mult in enumerate(cfg.mults):
        out = cfg.base * mult
        for _ in range(cfg.res_blocks):
            layers: list[nn.Module] = [ResBlock(ch, out)]
            if level in cfg.attn_levels:
                layers.append(SelfAttention(out, cfg.heads))
            ch = out
            blocks.append(Block(f"enc{len(blocks)}", "encoder", layers))
            skips.append((len(blocks) - 1, ch))
        if level < len(cfg.mults) - 1:
            blocks.append(Block(f"enc{len(blocks)}", "encoder", [nn.Conv2d(ch, ch, 3, stride=2, padding=1)]))
            skips.append((len(blocks) - 1, ch))
    blocks.append(Block("mid", "mid", [ResBlock(ch, ch), SelfAttention(ch, cfg.heads), ResBlock(ch, ch)]))
    decoder = 0
    for level in reversed(range(len(cfg.mults))):
        out = cfg.base * cfg.mults[level]
        for k in range(cfg.res_blocks + 1):
            src, skip_ch = skips.pop()
            layers = [ResBlock(ch + skip_ch, out)]
            if level in cfg.attn_levels:
                layers.append(SelfAttention(out, cfg.heads))
            if level > 0 and k == cfg.res_blocks:
                layers += [nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(out, out, 3, padding=1)]
            ch = out
            blocks.append(Block(f"dec{decoder}", "decoder", layers, skip_from=src))
            decoder += 1
    blocks.append(
        Block("out", "other", [nn.GroupNorm(32 if ch % 32 == 0 else 1, ch), nn.SiLU(), nn.Conv2d(ch, cfg.in_channels, 3, padding=1)])
    )
    return blocks


def unet(cfg: UNetConfig) -> PipelineModel:
    """The UNet as pipeline blocks (built on the current default device)."""
    levels = len(cfg.mults) - 1
    return PipelineModel(
        cfg.name,
        build_blocks(cfg),
        lambda microbatch, resolution: (microbatch, cfg.in_channels, resolution, resolution),
        resolution_multiple=2**levels,
    )
