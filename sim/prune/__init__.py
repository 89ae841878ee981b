"""Activation-aware pruning of nn.Linear layers (pure torch): magnitude, Wanda, output cosine, input variance, cos+var;
unstructured and N:M masks; sequential layer-by-layer calibration (see :mod:`sim.prune.core`)."""

from coevo.sim.prune.core import SCORES, PruneResult, calibration_inputs, prunable_layers, prune, score_matrix
from coevo.sim.prune.masks import Pattern, keep_count, make_mask, nm_mask, parse_pattern, unstructured_mask

__all__ = [
    "SCORES",
    "Pattern",
    "PruneResult",
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
