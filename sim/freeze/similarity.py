"""Input augmentation, linear CKA, and per-channel sensitivity of features to augmentation.

* :func:`augment`: the training recipe's augmentation, a random shift of up to ``shift`` pixels
  (the border filled with the image's background value) plus Gaussian noise of std ``noise``
  (inputs are normalised, so the noise is in units of the pixel std).
* :func:`linear_cka`: linear centred kernel alignment (Kornblith et al., 2019) between two
  representations of the same samples; 1 for representations equal up to rotation and scale.
  The automatic freezing schedule freezes a block when its output's CKA between consecutive
  epochs stops moving (reaches a threshold).
* :func:`channel_sensitivity`: per channel, one minus the mean cosine similarity between the
  feature map of a clean input and of its augmented versions. Channels with high sensitivity
  are the ones whose cached augmented versions carry information; the rest are cached clean.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def augment(x: torch.Tensor, shift: int, noise: float, generator: torch.Generator) -> torch.Tensor:
    """``x [B, C, H, W]`` shifted by a random whole number of pixels in ``[-shift, shift]`` per axis and sample, plus noise."""
    b, _, h, w = x.shape
    out = x
    if shift > 0:
        fill = x.amin(dim=(1, 2, 3), keepdim=True)  # the background of a normalised digit image
        padded = F.pad(x - fill, (shift, shift, shift, shift)) + fill
        dy = torch.randint(0, 2 * shift + 1, (b,), generator=generator)
        dx = torch.randint(0, 2 * shift + 1, (b,), generator=generator)
        rows = (dy[:, None] + torch.arange(h))[:, :, None]  # [B, H, 1]
        cols = (dx[:, None] + torch.arange(w))[:, None, :]  # [B, 1, W]
        out = padded[torch.arange(b)[:, None, None], :, rows, cols].permute(0, 3, 1, 2)  # [B, H, W, C] -> [B, C, H, W]
    if noise > 0:
        out = out + noise * torch.randn(out.shape, generator=generator)
    return out.contiguous()


def linear_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """Linear CKA between ``x [n, ...]`` and ``y [n, ...]`` (flattened per sample): ``<Kc, Lc> / (|Kc| |Lc|)`` with Gram matrices."""
    a = x.reshape(x.shape[0], -1).double()
    b = y.reshape(y.shape[0], -1).double()
    a = a - a.mean(dim=0, keepdim=True)
    b = b - b.mean(dim=0, keepdim=True)
    k, l_ = a @ a.T, b @ b.T
    denom = float(torch.linalg.norm(k) * torch.linalg.norm(l_))
    return float((k * l_).sum()) / denom if denom > 0 else 1.0


def channel_sensitivity(clean: torch.Tensor, augmented: torch.Tensor) -> torch.Tensor:
    """Per channel: 1 - mean cosine similarity between ``clean [N, C, H, W]`` and ``augmented [A, N, C, H, W]`` maps.

    A map that is zero in both (a channel the ReLU switched off) counts as similar (1); zero in
    one only as dissimilar (0). Returns ``[C]`` values in [0, 2].
    """
    c = clean.flatten(2).unsqueeze(0)  # [1, N, C, HW]
    a = augmented.flatten(3)  # [A, N, C, HW]
    dot = (c * a).sum(-1)
    nc, na = c.norm(dim=-1), a.norm(dim=-1)
    both_zero = (nc == 0) & (na == 0)
    cos = torch.where(both_zero, torch.ones_like(dot), dot / (nc * na).clamp_min(1e-12))
    return 1.0 - cos.mean(dim=(0, 1))


def pick_channels(sensitivity: torch.Tensor, share: float) -> torch.Tensor:
    """The ``round(share * C)`` most sensitive channels (sorted indices; ties broken by lower index)."""
    n = round(share * sensitivity.numel())
    if n <= 0:
        return torch.zeros(0, dtype=torch.long)
    order = torch.argsort(-sensitivity, stable=True)
    return torch.sort(order[:n]).values
