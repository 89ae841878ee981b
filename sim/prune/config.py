"""The pruning family's configuration: the defaults and bounds its tool, problem and figure script share, declared once.

``tools/prune.py`` (``prune.lm``), ``search/prune/`` (the ``prune`` problem and :func:`prune_zoo`)
read their defaults and bounds from :class:`PruneConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

Score = Literal["magnitude", "wanda", "var", "cos", "cos+var", "sparsegpt"]
"""The pruning scores (:mod:`sim.prune.core`), declared once: tools, problems and figures take their choices from here."""
SCORES: tuple[Score, ...] = get_args(Score)
"""The scores of :data:`Score`, in its order."""


@dataclass(frozen=True)
class PruneConfig:
    """Defaults and bounds of the pruning family (each field's ``metadata``: ``help``, ``unit``, bounds)."""

    model: str = field(default="lm-pydoc", metadata={"help": "the zoo LM to prune"})
    sparsity: float = field(
        default=0.5, metadata={"help": "share of each pruned layer's weights set to zero", "unit": "share", "gt": 0, "lt": 1}
    )
    pattern: str = field(default="unstructured", metadata={"help": "unstructured (per output row) or N:M"})
    score: Score = field(default="cos+var", metadata={"help": f"the pruning score (sim.prune): {', '.join(SCORES)}"})
    calib_tokens: int = field(
        default=256, metadata={"help": "calibration tokens from the training split", "unit": "tokens", "ge": 1, "le": 65_536}
    )
    seed: int = field(default=0, metadata={"help": "seed of the calibration sample", "ge": 0})
    eval_batches: int = field(
        default=0,
        metadata={
            "help": "val batches (of 64 sequences) to measure perplexity on; 0: the whole split",
            "unit": "batches",
            "ge": 0,
            "le": 10_000,
        },
    )


__all__ = ["SCORES", "PruneConfig", "Score"]
