"""Sparsity masks from a score matrix: unstructured (per output row or per layer) and N:M along the input dimension.

A mask is a bool tensor of the weight's shape, True where the weight is KEPT. The lowest
scores are pruned; ties are broken by position (a stable sort), so masks are deterministic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import torch

from coevo.sim.errors import UserInputError

Group = Literal["row", "layer"]


@dataclass(frozen=True)
class Pattern:
    """A sparsity pattern: ``unstructured`` or ``N:M`` (at most N nonzeros in every M consecutive input weights)."""

    n: int | None = None
    m: int | None = None

    @property
    def structured(self) -> bool:
        return self.m is not None

    @property
    def sparsity(self) -> float | None:
        """The sparsity an N:M pattern implies (1 - N/M); None for unstructured."""
        return None if self.n is None or self.m is None else 1 - self.n / self.m

    def __str__(self) -> str:
        return "unstructured" if self.m is None else f"{self.n}:{self.m}"


def parse_pattern(text: str) -> Pattern:
    """``unstructured`` or ``N:M`` with 0 < N < M (e.g. ``2:4``, ``4:8``).

    Raises:
        UserInputError: anything else.
    """
    if text == "unstructured":
        return Pattern()
    found = re.fullmatch(r"(\d+):(\d+)", text.strip())
    if not found or not 0 < int(found[1]) < int(found[2]):
        raise UserInputError(f"pattern {text!r}: use 'unstructured' or N:M with 0 < N < M, e.g. '2:4' or '4:8'")
    return Pattern(int(found[1]), int(found[2]))


def check_pattern_sparsity(pattern: Pattern, sparsity: float | None) -> None:
    """An N:M pattern fixes the sparsity at ``1 - N/M``: a different one is refused (before any model is built).

    Raises:
        UserInputError: ``sparsity`` is given and is not the pattern's.
    """
    implied = pattern.sparsity
    if implied is not None and sparsity is not None and abs(sparsity - implied) > 1e-9:
        raise UserInputError(
            f"sparsity {sparsity!r} does not match pattern {pattern}, which prunes exactly {implied:g} of the weights: "
            f"pass sparsity {implied:g} with it, or pattern 'unstructured'"
        )


def keep_count(width: int, sparsity: float) -> int:
    """Weights kept out of ``width`` at ``sparsity`` (the pruned count is rounded to the nearest integer)."""
    return width - round(sparsity * width)


def unstructured_mask(score: torch.Tensor, sparsity: float, group: Group = "row") -> torch.Tensor:
    """Keep the highest scores: ``round(sparsity * in)`` pruned in each output row (``row``, as Wanda compares), or
    ``round(sparsity * numel)`` in the whole layer (``layer``)."""
    if not 0 <= sparsity < 1:
        raise UserInputError(f"sparsity {sparsity!r} must be in [0, 1) for a layer (0 leaves it dense)")
    flat = score.reshape(1, -1) if group == "layer" else score.reshape(score.shape[0], -1)
    pruned = round(sparsity * flat.shape[1])
    keep = torch.ones_like(flat, dtype=torch.bool)
    if pruned:
        order = torch.sort(flat, dim=1, stable=True).indices[:, :pruned]
        keep.scatter_(1, order, False)
    return keep.reshape(score.shape)


def nm_mask(score: torch.Tensor, n: int, m: int, where: str = "layer") -> torch.Tensor:
    """Keep the N highest scores in every group of M consecutive input weights of each row (the other M - N pruned).

    Raises:
        UserInputError: the input dimension is not a multiple of M.
    """
    rows, width = score.shape[0], score.reshape(score.shape[0], -1).shape[1]
    if width % m:
        raise UserInputError(f"{where}: N:M pattern {n}:{m} does not divide the layer's input dimension {width} (not a multiple of {m})")
    groups = score.reshape(rows, width // m, m)
    order = torch.sort(groups, dim=2, stable=True).indices[:, :, : m - n]
    keep = torch.ones_like(groups, dtype=torch.bool)
    keep.scatter_(2, order, False)
    return keep.reshape(score.shape)


def make_mask(score: torch.Tensor, sparsity: float, pattern: Pattern, group: Group = "row", where: str = "layer") -> torch.Tensor:
    """The mask of one layer for ``pattern`` (N:M ignores ``sparsity`` and ``group``)."""
    if pattern.n is not None and pattern.m is not None:
        return nm_mask(score, pattern.n, pattern.m, where)
    return unstructured_mask(score, sparsity, group)
