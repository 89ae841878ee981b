"""SparseGPT-style pruning with reconstruction (Frantar and Alistarh 2023), the extra baseline of :mod:`sim.prune`.

With ``H = X^T X`` (the layer's input Gram matrix over the calibration tokens, damped by 1 %
of its mean diagonal), the columns of ``W`` are visited left to right in blocks of 128. In
each block the weights to prune are chosen by the OBS saliency ``w^2 / [H^-1]_jj^2`` on the
weights as already updated (per output row, so each row loses exactly its share; N:M picks
the lowest M - N of every M columns), and each pruned or kept column's error is spread over
the columns not yet visited through the Cholesky factor of ``H^-1``, so the remaining
weights compensate for the removed ones.
"""

from __future__ import annotations

import torch

from coevo.sim.prune.masks import Pattern


def sparsegpt_layer(
    weight: torch.Tensor, gram: torch.Tensor, sparsity: float, pattern: Pattern, block: int = 128, damp: float = 0.01
) -> tuple[torch.Tensor, torch.Tensor]:
    """(kept mask, reconstructed weight) of one layer ``weight [out, in]`` given ``gram = X^T X [in, in]``."""
    w = weight.detach().double().clone()
    cols = w.shape[1]
    h = gram.double().clone()
    dead = torch.diag(h) == 0
    h[dead, dead] = 1
    w[:, dead] = 0
    h += damp * torch.diag(h).mean() * torch.eye(cols, dtype=h.dtype, device=h.device)
    hinv = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(h)), upper=True)
    pruned = torch.zeros_like(w, dtype=torch.bool)
    n, m = pattern.n, pattern.m
    for i1 in range(0, cols, block):
        i2 = min(i1 + block, cols)
        w1 = w[:, i1:i2].clone()
        q1 = torch.zeros_like(w1)
        err1 = torch.zeros_like(w1)
        h1 = hinv[i1:i2, i1:i2]
        p1 = torch.zeros_like(w1, dtype=torch.bool)
        if m is None:  # this block's share of each row, by cumulative rounding: every row loses round(sparsity * in) in all
            k = round(sparsity * i2) - round(sparsity * i1)
            if k:
                saliency = w1**2 / torch.diag(h1)[None, :] ** 2
                p1.scatter_(1, torch.sort(saliency, dim=1, stable=True).indices[:, :k], True)
        for i in range(i2 - i1):
            if m is not None and n is not None and i % m == 0:
                saliency = w1[:, i : i + m] ** 2 / torch.diag(h1)[i : i + m][None, :] ** 2
                p1[:, i : i + m].scatter_(1, torch.sort(saliency, dim=1, stable=True).indices[:, : m - n], True)
            col = w1[:, i]
            d = h1[i, i]
            q = col.clone()
            q[p1[:, i]] = 0
            q1[:, i] = q
            e = (col - q) / d
            w1[:, i:] -= e[:, None] @ h1[i, i:][None, :]
            err1[:, i] = e
        w[:, i1:i2] = q1
        pruned[:, i1:i2] = p1
        w[:, i2:] -= err1 @ hinv[i1:i2, i2:]
    keep = ~pruned
    return keep, (w * keep).to(weight.dtype)
