"""Activation-aware pruning of nn.Linear layers (pure torch): magnitude, Wanda, output cosine, input variance, cos+var;
unstructured and N:M masks; sequential layer-by-layer calibration (see :mod:`sim.prune.core`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.sim._lazy import lazy_exports

if TYPE_CHECKING:  # the names load on first use (sim/_lazy.py): listing problems or tools imports no torch
    from coevo.sim.prune.config import SCORES, Score
    from coevo.sim.prune.core import PruneResult, calibration_inputs, prunable_layers, prune, score_matrix
    from coevo.sim.prune.masks import Pattern, keep_count, make_mask, nm_mask, parse_pattern, unstructured_mask

__all__ = [
    "SCORES",
    "Pattern",
    "PruneResult",
    "Score",
    "calibration_inputs",
    "keep_count",
    "make_mask",
    "nm_mask",
    "parse_pattern",
    "prunable_layers",
    "prune",
    "score_matrix",
    "unstructured_mask",
]

__getattr__ = lazy_exports(__name__, __file__)
