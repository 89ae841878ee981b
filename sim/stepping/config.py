"""The SteppingNet family's configuration: the defaults and bounds its tools and problem share, declared once.

``tools/stepping.py`` (``stepping.build``, ``stepping.run``) and ``search/stepping/problem.py`` (the
``stepping`` problem) read their defaults and bounds from :class:`SteppingConfig`.
``search_epochs`` is the problem's per-design budget (one tool call trains for the recipe's epochs).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SteppingConfig:
    """Defaults and bounds of the SteppingNet family (each field's ``metadata``: ``help``, ``unit``, bounds)."""

    model: str = field(default="cnn-digits", metadata={"help": "zoo CNN classifier whose data and widths are used"})
    steps: tuple[float, ...] = field(
        default=(0.25, 0.5, 0.75, 1.0), metadata={"help": "MAC fraction of each step, strictly increasing within (0, 1]", "unit": "share"}
    )
    search_epochs: int = field(
        default=3,
        metadata={"help": "joint training epochs per design (short: every design trains)", "unit": "epochs", "ge": 1, "le": 100},
    )
    seed: int = field(default=0, metadata={"help": "seed of initialisation and batch order", "ge": 0})
    assign: str = field(
        default="importance",
        metadata={
            "help": "how units are put in step groups: importance (moved by importance while training, as SteppingNet) "
            "or index (a fixed index partition, the ablation)"
        },
    )
    distill: bool = field(default=False, metadata={"help": "steps below the largest also learn from its softmax (knowledge distillation)"})


__all__ = ["SteppingConfig"]
