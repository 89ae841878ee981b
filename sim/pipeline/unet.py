"""An SD-like diffusion UNet as a flat list of pipeline blocks, and its profile from the meta device.

The network follows Stable Diffusion's UNet layout (conv-in; per resolution level
``res_blocks`` residual blocks, with self-attention on the chosen levels, and a downsample
except at the last level; a middle block; the mirrored decoder whose residual blocks each
concatenate one skip activation, with upsamples; norm + conv-out). Text cross-attention
and the timestep embedding are left out: they do not change the skip structure, and the
attention FLOPs they add are a constant factor per block.

:func:`profile` builds the model on PyTorch's ``meta`` device (shapes only, no weights
allocated, so the 2.6 B-parameter SD size fits anywhere) and runs one forward pass block
by block under ``FlopCounterMode``: per block it records FLOPs, parameter bytes, the bytes
of its output activation, and which encoder output it consumes as a skip.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from search.errors import UserInputError


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


class Block(nn.Module):
    """One pipeline block: optional skip concat, then layers.

    Attributes:
        name: e.g. ``enc3``, ``mid``, ``dec5``.
        role: ``encoder`` (its output is a skip), ``mid``, ``decoder`` (consumes a skip) or ``other``.
        skip_from: index (in the block list) of the encoder block whose output it concatenates.
    """

    def __init__(self, name: str, role: str, layers: list[nn.Module], skip_from: int | None = None) -> None:
        super().__init__()
        self.name = name
        self.role = role
        self.skip_from = skip_from
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor, skip: torch.Tensor | None = None) -> torch.Tensor:
        if skip is not None:
            x = torch.cat([x, skip], dim=1)
        return self.layers(x)


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


class UNet(nn.Module):
    """The blocks as one module (for real runs of small presets)."""

    def __init__(self, cfg: UNetConfig) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(build_blocks(cfg))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs: list[torch.Tensor] = []
        for block in self.blocks:
            assert isinstance(block, Block)
            x = block(x, outputs[block.skip_from] if block.skip_from is not None else None)
            outputs.append(x)
        return x


@dataclass(frozen=True)
class BlockProfile:
    """Measured shape of one block for one microbatch (forward pass)."""

    name: str
    role: str
    flops: int
    param_bytes: int
    out_bytes: int
    out_shape: tuple[int, ...]
    skip_from: int | None


@dataclass(frozen=True)
class ModelProfile:
    """A model's blocks, in forward order, for one microbatch."""

    model: str
    microbatch: int
    resolution: int
    dtype_bytes: int
    blocks: tuple[BlockProfile, ...]
    graph: nx.DiGraph = field(compare=False)

    @property
    def skip_edges(self) -> list[tuple[int, int]]:
        """(producer, consumer) block indices of the long skips."""
        return [(b.skip_from, i) for i, b in enumerate(self.blocks) if b.skip_from is not None]

    def total(self, what: str) -> int:
        """Sum of ``flops``, ``param_bytes`` or ``out_bytes`` over the blocks."""
        return sum(int(getattr(b, what)) for b in self.blocks)


def get_config(model: str) -> UNetConfig:
    """A preset by name."""
    try:
        return PRESETS[model]
    except KeyError:
        raise UserInputError(f"unknown model {model!r}; presets: {', '.join(PRESETS)}") from None


def profile(model: str | UNetConfig, *, resolution: int = 64, microbatch: int = 1, dtype_bytes: int = 2) -> ModelProfile:
    """Profile a UNet on the meta device (see module doc).

    Args:
        model: preset name or config.
        resolution: latent height and width (64 for SD at 512 px).
        microbatch: samples per microbatch.
        dtype_bytes: bytes per activation/parameter element in training (2 for fp16/bf16).

    Raises:
        UserInputError: unknown preset, or a resolution the downsampling cannot divide.
    """
    cfg = get_config(model) if isinstance(model, str) else model
    levels = len(cfg.mults) - 1
    if resolution < 2**levels or resolution % (2**levels):
        raise UserInputError(f"resolution {resolution} must be a multiple of {2**levels} (the model downsamples {levels} times)")
    if microbatch < 1:
        raise UserInputError(f"microbatch must be at least 1, got {microbatch}")
    with torch.device("meta"):
        blocks = build_blocks(cfg)
        x = torch.empty(microbatch, cfg.in_channels, resolution, resolution)
    outputs: list[torch.Tensor] = []
    profiles = []
    graph = nx.DiGraph()
    for i, block in enumerate(blocks):
        skip = outputs[block.skip_from] if block.skip_from is not None else None
        with FlopCounterMode(display=False) as counter:
            x = block(x, skip)
        outputs.append(x)
        params = sum(p.numel() for p in block.parameters()) * dtype_bytes
        out_bytes = x.numel() * dtype_bytes
        profiles.append(
            BlockProfile(block.name, block.role, int(counter.get_total_flops()), params, out_bytes, tuple(x.shape), block.skip_from)
        )
        graph.add_node(i, name=block.name, role=block.role, flops=profiles[-1].flops, param_bytes=params, out_bytes=out_bytes)
        if i > 0:
            graph.add_edge(i - 1, i, kind="sequential", bytes=profiles[i - 1].out_bytes)
        if block.skip_from is not None:
            graph.add_edge(block.skip_from, i, kind="skip", bytes=profiles[block.skip_from].out_bytes)
    return ModelProfile(cfg.name, microbatch, resolution, dtype_bytes, tuple(profiles), graph)


def summary(p: ModelProfile) -> dict[str, Any]:
    """JSON-friendly totals of a profile."""
    return {
        "model": p.model,
        "blocks": len(p.blocks),
        "skips": len(p.skip_edges),
        "gflops_forward": round(p.total("flops") / 1e9, 3),
        "params_millions": round(p.total("param_bytes") / p.dtype_bytes / 1e6, 2),
        "activation_mb": round(p.total("out_bytes") / 1e6, 3),
        "microbatch": p.microbatch,
        "resolution": p.resolution,
    }
