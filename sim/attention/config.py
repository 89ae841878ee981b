"""The sparse-attention family's configuration: every default and bound its operators and tool share, declared once.

:class:`AttentionFamilyConfig` holds the defaults of the ``attention.sparse`` tool
(``tools/attention.py``), of :class:`~coevo.sim.attention.model.SparseConfig` and of
:func:`~coevo.sim.attention.evaluate.evaluate_sparse`; the key-bit range is the one
:func:`~coevo.sim.attention.ops.check_bits` enforces.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MIN_BITS, MAX_BITS = 1, 16
"""Bits of the quantized queries and keys that pre-score (inclusive range)."""


@dataclass(frozen=True)
class AttentionFamilyConfig:
    """Defaults and bounds of the sparse-attention family (each field's ``metadata``: ``help``, ``unit``, bounds)."""

    model: str = field(default="lm-pydoc-tiny", metadata={"help": "zoo language model whose attention is replaced"})
    method: str = field(default="topk-quantized-keys", metadata={"help": "dense, topk-quantized-keys or local-global"})
    top_k: int = field(default=32, metadata={"help": "keys kept per query (topk-quantized-keys)", "unit": "keys", "ge": 1})
    key_bits: int = field(
        default=4,
        metadata={
            "help": "bits of the quantized queries/keys that pre-score (topk-quantized-keys)",
            "unit": "bits",
            "ge": MIN_BITS,
            "le": MAX_BITS,
        },
    )
    window: int = field(default=32, metadata={"help": "local window, the query included (local-global)", "unit": "tokens", "ge": 1})
    n_global: int = field(
        default=4, metadata={"help": "leading tokens every query also attends to (local-global)", "unit": "tokens", "ge": 0}
    )
    split: str = field(default="val", metadata={"help": "val to choose settings, test to report once"})
    max_batches: int | None = field(
        default=8, metadata={"help": "batches of 64 sequences scored; None for the whole split", "unit": "batches", "ge": 1}
    )


ATTENTION = AttentionFamilyConfig()
"""The defaults (an instance, so a keyword default reads ``ATTENTION.field``)."""

__all__ = ["ATTENTION", "MAX_BITS", "MIN_BITS", "AttentionFamilyConfig"]
