"""The recipe of a LinGCN model (what determines a trained model and its cache key), without torch.

Here rather than in :mod:`sim.he.model` so that the ``lingcn`` problem's options read its
defaults without importing torch; :mod:`sim.he.model` re-exports both names.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from coevo.sim.errors import UserInputError

ARCHITECTURE = "lingcn-blocks-v2"
"""Part of every cache key: models cached by the earlier one-activation-per-layer architecture are never loaded."""


@dataclass(frozen=True)
class Recipe:
    """Everything that determines a trained model (its hash is the cache key).

    Attributes:
        dataset: dataset name (:data:`sim.he.data.DATASETS`).
        neighbours: 4 or 8 grid neighbours.
        hidden: channels of each block (its length is the number of blocks).
        readout: ``flatten`` (a linear head over every node's channels) or ``mean`` (global mean pooling, then linear).
        budget: share of the ``2 x blocks`` non-linear positions per node that stay non-linear (1: all polynomial).
        poly_init: ``relu-fit`` (least squares of ReLU over the teacher's range) or ``square`` (``z^2``, CryptoNets).
        distill: weight ``w`` of the logit distillation term (0: cross-entropy only).
        feature_distill: weight ``beta`` of the block-output (feature) distillation term.
        temperature: distillation temperature ``T``.
        teacher_epochs: epochs of the all-ReLU teacher.
        epochs: epochs of the student (indicator search + fine-tuning).
        seed: seed of initialisation and batch order.
        lr: learning rate of the teacher (the student uses a third of it).
    """

    dataset: str = "digits-grid"
    neighbours: int = 4
    hidden: tuple[int, ...] = (4, 4)
    readout: str = "flatten"
    budget: float = 0.5
    poly_init: str = "relu-fit"
    distill: float = 0.5
    feature_distill: float = 1.0
    temperature: float = 4.0
    teacher_epochs: int = 60
    epochs: int = 30
    seed: int = 0
    lr: float = field(default=1e-2)

    def check(self) -> None:
        """Raise :class:`UserInputError` naming the first field out of its domain, its value and its bound."""
        if not self.hidden or any(h < 1 for h in self.hidden):
            raise UserInputError(f"hidden needs one positive channel count per block, got {list(self.hidden)}")
        if not 0.0 <= self.budget <= 1.0:
            raise UserInputError(f"budget (share of non-linear positions kept) must lie in [0, 1], got {self.budget}")
        if self.readout not in ("flatten", "mean"):
            raise UserInputError(f"readout must be 'flatten' or 'mean', got {self.readout!r}")
        if self.poly_init not in ("relu-fit", "square"):
            raise UserInputError(f"poly_init must be 'relu-fit' or 'square', got {self.poly_init!r}")
        if not 0.0 <= self.distill <= 1.0:
            raise UserInputError(f"distill must lie in [0, 1], got {self.distill}")
        if self.feature_distill < 0.0:
            raise UserInputError(f"feature_distill must be >= 0, got {self.feature_distill}")
        if self.teacher_epochs < 1 or self.epochs < 0:
            raise UserInputError(f"teacher_epochs must be >= 1 and epochs >= 0, got {self.teacher_epochs}, {self.epochs}")

    @property
    def kept_rows(self) -> int:
        """(block, rank) rows hardening keeps: ``round(budget * 2 * blocks)``."""
        return round(self.budget * 2 * len(self.hidden))

    def teacher(self) -> dict[str, Any]:
        """The part of the recipe the teacher depends on (with the architecture version)."""
        keys = ("dataset", "neighbours", "hidden", "readout", "teacher_epochs", "seed", "lr")
        return {"architecture": ARCHITECTURE, **{k: v for k, v in asdict(self).items() if k in keys}}

    def key(self) -> str:
        """First 16 hex digits of SHA-256 over the canonical JSON of the recipe and the architecture version."""
        return hashlib.sha256(json.dumps({"architecture": ARCHITECTURE, **asdict(self)}, sort_keys=True).encode()).hexdigest()[:16]
