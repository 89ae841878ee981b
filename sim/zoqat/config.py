"""The zeroth-order QAT family's configuration: every default and bound its trainer, job and tool share, declared once.

:class:`ZoQatConfig` holds the defaults of the ``quant.zo_qat`` tool (``tools/zoqat.py``), of
:class:`~coevo.sim.zoqat.job.Spec` and of :func:`~coevo.sim.zoqat.qat.zo_qat`;
:data:`DEFAULT_LR` is each method's learning rate when none is given (chosen on the validation
split: the best of python -m coevo.figures zoqat's grid on lm-pydoc-tiny, W4A8).

A :class:`~coevo.sim.zoqat.job.Spec` built without a learning rate keeps its own ``lr`` of 1e-4
(``spec_lr``); the tool and :func:`~coevo.sim.zoqat.qat.zo_qat` use
:data:`DEFAULT_LR` instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_LR: dict[str, float] = {"spsa": 1e-2, "pgap": 1e-2, "ste": 1e-2, "rtn": 0.0, "gptq": 0.0}
"""Learning rates used when none is given (spsa, ste: the best of the issue-17 validation grid on lm-pydoc-tiny, W4A8;
pgap: the SPSA rate, as its updates have the same expected size; rtn, gptq: no training)."""


@dataclass(frozen=True)
class ZoQatConfig:
    """Defaults and bounds of the zeroth-order QAT family (each field's ``metadata``: ``help``, ``unit``, bounds)."""

    model: str = field(default="lm-pydoc", metadata={"help": "zoo model: lm-pydoc, lm-pydoc-tiny (byte LMs) or cnn-digits"})
    w_bits: int = field(default=4, metadata={"help": "weight bits, per output channel, symmetric", "unit": "bits", "ge": 1, "le": 16})
    a_bits: int | None = field(
        default=8,
        metadata={"help": "bits of every Linear layer's input, per tensor; None: float activations", "unit": "bits", "ge": 1, "le": 16},
    )
    method: str = field(default="spsa", metadata={"help": "spsa, pgap, ste, rtn or gptq"})
    steps: int = field(default=300, metadata={"help": "training steps, one batch each", "unit": "steps", "ge": 0, "le": 100_000})
    eps: float = field(
        default=1e-3, metadata={"help": "ZO perturbation size in log-scale units (1e-3: a 0.1 % change of each scale)", "gt": 0, "le": 1}
    )
    seed: int = field(default=0, metadata={"help": "seed of the perturbations, the batch order and the calibration batches"})
    batch_size: int = field(
        default=16, metadata={"help": "sequences (or images) per training batch", "unit": "samples", "ge": 1, "le": 1024}
    )
    train_weights: bool = field(
        default=False,
        metadata={"help": "full ZeroQAT: also train the Linear weights (default: only the quantization scales, the light variant)"},
    )
    rank: int = field(default=2, metadata={"help": "pgap: rank of each weight matrix's estimated gradient space", "ge": 1, "le": 64})
    probes: int = field(
        default=5,
        metadata={"help": "pgap: full-space probe steps per window (no update; they count as steps), >= rank", "unit": "steps", "ge": 1},
    )
    refresh: int = field(
        default=50, metadata={"help": "pgap: steps per window; the gradient spaces are re-estimated at each window's start", "ge": 2}
    )
    smooth_alpha: float | None = field(
        default=None,
        metadata={
            "help": "ZeroQAT's smoothing factors (SmoothQuant's migration, trained with the scales) at this migration strength; "
            "None: no smoothing",
            "ge": 0,
            "le": 1,
        },
    )
    eval_batches: int | None = field(
        default=None, metadata={"help": "batches (of 64) of val and test to evaluate; None: the whole split", "unit": "batches", "ge": 1}
    )
    spec_lr: float = field(default=1e-4, metadata={"help": "learning rate of a Spec built without one", "gt": 0})


ZOQAT = ZoQatConfig()
"""The defaults (an instance, so a keyword default reads ``ZOQAT.field``)."""

__all__ = ["DEFAULT_LR", "ZOQAT", "ZoQatConfig"]
