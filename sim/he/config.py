"""The HE (CKKS GCN) family's configuration: the defaults and bounds its tool and problem share, declared once.

``tools/he.py`` (``he.gcn``) and ``search/lingcn/problem.py`` (the ``lingcn`` problem) read their
defaults and bounds from :class:`HeConfig`. Fields with a ``search_`` prefix are the per-design
budgets of the problem, smaller than one tool call's because a search trains many students.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coevo.sim.he.recipe import Recipe


@dataclass(frozen=True)
class HeConfig:
    """Defaults and bounds of the HE family (each field's ``metadata``: ``help``, ``unit``, bounds)."""

    dataset: str = field(
        default=Recipe.dataset, metadata={"help": "digits as 8x8 (64-node), pooled 4x4 (16-node) or split 16x16 (256-node) grid graphs"}
    )
    hidden: int = field(default=4, metadata={"help": "channels of each block", "unit": "channels", "ge": 1, "le": 16})
    budget: float = field(
        default=Recipe.budget,
        metadata={
            "help": "linearization budget: share of the 2 x blocks non-linear positions per node kept as polynomials "
            "(the rest linear); 1 is the all-polynomial CryptoGCN-style baseline",
            "ge": 0.0,
            "le": 1.0,
        },
    )
    distill: float = field(
        default=Recipe.distill,
        metadata={"help": "weight of the logit distillation from the all-ReLU teacher (rest: cross-entropy)", "ge": 0.0, "le": 1.0},
    )
    feature_distill: float = field(
        default=Recipe.feature_distill,
        metadata={"help": "weight of the feature distillation (MSE of every block's output against the teacher's)", "ge": 0.0, "le": 100.0},
    )
    poly_init: str = field(
        default=Recipe.poly_init,
        metadata={"help": "initial polynomials: relu-fit (least squares over the teacher's range) or square (z^2)"},
    )
    epochs: int = field(
        default=Recipe.epochs,
        metadata={
            "help": "student epochs (2/3 indicator search, 1/3 fine-tuning with the hardened mask)",
            "unit": "epochs",
            "ge": 0,
            "le": 200,
        },
    )
    search_epochs: int = field(
        default=12,
        metadata={"help": "student epochs per design (the teacher trains once, cached)", "unit": "epochs", "ge": 1, "le": 100},
    )
    teacher_epochs: int = field(
        default=Recipe.teacher_epochs, metadata={"help": "epochs of the all-ReLU teacher", "unit": "epochs", "ge": 1, "le": 400}
    )
    scale_bits: int = field(
        default=28,
        metadata={
            "help": (
                "log2 of the smallest CKKS scale; the ring follows from the depth at this scale, "
                "then the scale grows to fill the ring's secure modulus (at most 40 bits)"
            ),
            "unit": "bits",
            "ge": 20,
            "le": 50,
        },
    )
    seed: int = field(default=0, metadata={"help": "seed of initialisation and batch order", "ge": 0})


__all__ = ["HeConfig"]
