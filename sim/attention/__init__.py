"""Sparse causal attention whose expensive part is linear in length, on the zoo's byte-level LM.

Two operators replace exact attention in a trained model, without retraining:

* ``topk-quantized-keys``: queries and keys quantized to ``key_bits`` bits pre-score every visible
  key (O(n^2), cheap low-bit MACs), the ``top_k`` best per query get an exact softmax (O(n k)).
* ``local-global``: a fixed pattern, the ``window`` most recent keys plus the first ``n_global``
  tokens (O(n (w + g)) in everything).

>>> from coevo.sim.attention import evaluate_sparse, attention_flops
>>> evaluate_sparse("lm-pydoc-tiny", "topk-quantized-keys", top_k=32, key_bits=4)   # doctest: +SKIP
{'perplexity': ..., 'dense_perplexity': ..., 'recall': ..., ...}
>>> attention_flops("local-global", 4, 8, 2, top_k=2, key_bits=4, window=2, n_global=1)["mac_sparse"]
144.0

The API (:func:`evaluate_sparse`, :func:`attention_flops`, the method names) is stable: the
length-aware scheduling problem calls it per search trial.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.sim._lazy import lazy_exports

if TYPE_CHECKING:  # the names load on first use (sim/_lazy.py): sim.fpga reads sim.attention.config without torch
    from coevo.sim.attention.evaluate import check_config, evaluate_sparse, evaluate_sparse_model, sequence_nll_pair
    from coevo.sim.attention.finetune import finetune_sparse
    from coevo.sim.attention.flops import METHODS, attention_flops, causal_pairs, local_global_pairs, topk_pairs
    from coevo.sim.attention.model import SelectionStats, SparseAttention, SparseConfig, sparsify
    from coevo.sim.attention.ops import (
        MAX_BITS,
        MIN_BITS,
        Selection,
        dense_attention,
        local_global_attention,
        local_global_indices,
        masked_attention,
        quantize_rows,
        topk_quantized_attention,
    )

__all__ = [
    "MAX_BITS",
    "METHODS",
    "MIN_BITS",
    "Selection",
    "SelectionStats",
    "SparseAttention",
    "SparseConfig",
    "attention_flops",
    "causal_pairs",
    "check_config",
    "dense_attention",
    "evaluate_sparse",
    "evaluate_sparse_model",
    "finetune_sparse",
    "local_global_attention",
    "local_global_indices",
    "local_global_pairs",
    "masked_attention",
    "quantize_rows",
    "sequence_nll_pair",
    "sparsify",
    "topk_pairs",
    "topk_quantized_attention",
]

__getattr__ = lazy_exports(__name__, __file__)
