"""Operation counts of causal attention, dense vs sparse, for one sequence (batch 1), all heads, one layer.

Counted per (query, key) pair a head actually uses: ``d_head`` multiply-accumulates (MACs) for the
score and ``d_head`` for the value-weighted sum, so ``2 * d_head`` MACs per pair per head, i.e.
``2 * d_model`` per pair over all heads. Projections (q, k, v, o) are the same for every method and
left out. Causal: query ``i`` (0-based) sees ``i + 1`` keys, so dense uses ``n (n + 1) / 2`` pairs.

* dense: ``mac_dense = 2 d_model n (n + 1) / 2 = d_model n (n + 1)``.
* top-k with quantized pre-scoring: full precision only on ``sum_i min(top_k, i + 1)`` pairs; the
  pre-scoring costs ``d_head`` low-bit (``key_bits x key_bits``) MACs on EVERY visible pair, so
  ``lowbit_ops = d_model n (n + 1) / 2`` -- quadratic, in cheap operations.
* local+global: ``sum_i [min(window, i + 1) + max(0, min(n_global, i - window + 1))]`` pairs, no pre-scoring.
"""

from __future__ import annotations

from coevo.sim.attention.ops import check_bits, check_top_k, check_window
from coevo.sim.errors import UserInputError

METHODS = ("dense", "topk-quantized-keys", "local-global")
"""The attention methods, by name."""


def check_method(method: str) -> None:
    """Raise :class:`UserInputError` naming the methods unless ``method`` is one of :data:`METHODS`."""
    if method not in METHODS:
        raise UserInputError(f"unknown attention method {method!r}; use one of {', '.join(METHODS)}")


def causal_pairs(n: int) -> int:
    """Visible (query, key) pairs of a causal sequence of ``n`` tokens: ``n (n + 1) / 2``."""
    return n * (n + 1) // 2


def topk_pairs(n: int, top_k: int) -> int:
    """``sum_{i<n} min(top_k, i + 1)``: pairs kept by top-k (a query with fewer visible keys keeps them all)."""
    if top_k >= n:
        return causal_pairs(n)
    return causal_pairs(top_k) + (n - top_k) * top_k


def local_global_pairs(n: int, window: int, n_global: int) -> int:
    """``sum_{i<n} [min(window, i + 1) + max(0, min(n_global, i - window + 1))]``: pairs of the local+global pattern."""
    local = topk_pairs(n, window)  # the same min(w, i + 1) sum
    t_max = n - window  # global tokens left of the window exist for i >= window: t = i - window + 1 runs 1..n - window
    if t_max <= 0:
        return local
    if t_max <= n_global:
        return local + causal_pairs(t_max)
    return local + causal_pairs(n_global) + (t_max - n_global) * n_global


def attention_flops(
    method: str, length: int, d_model: int, n_heads: int, top_k: int, key_bits: int, window: int, n_global: int
) -> dict[str, float]:
    """Operation counts of one causal attention layer on one sequence of ``length`` tokens (see the module doc).

    Returns:
        ``mac_dense`` (full-precision MACs of exact attention), ``mac_sparse`` (full-precision
        MACs of ``method``), ``lowbit_ops`` (``key_bits``-bit MACs of the pre-scoring; 0 for
        methods without it), and also ``lowbit_bitops`` (``lowbit_ops * key_bits^2``, a
        bit-level cost), ``quantize_ops`` (values quantized), ``pairs_dense``/``pairs_sparse``
        (softmax exponentials per head, summed over heads), ``mac_ratio`` (dense / sparse).

    Raises:
        UserInputError: unknown method, ``length < 1``, ``d_model`` not divisible by ``n_heads``, or a bad top_k/bits/window.
    """
    check_method(method)
    for name, value in (("length", length), ("d_model", d_model), ("n_heads", n_heads)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserInputError(f"{name}={value!r}: give a positive integer")
    if d_model % n_heads:
        raise UserInputError(f"d_model={d_model} is not divisible by n_heads={n_heads}: each head gets d_model / n_heads channels")
    check_top_k(top_k)
    check_bits(key_bits)
    check_window(window, n_global)
    dense = causal_pairs(length)
    lowbit = 0
    quantize = 0
    if method == "dense":
        pairs = dense
    elif method == "topk-quantized-keys":
        pairs = topk_pairs(length, top_k)
        lowbit = d_model * dense  # d_head low-bit MACs per visible pair per head
        quantize = 2 * length * d_model  # every query and key value, once
    else:
        pairs = local_global_pairs(length, window, n_global)
    mac_dense, mac_sparse = 2 * d_model * dense, 2 * d_model * pairs
    return {
        "mac_dense": float(mac_dense),
        "mac_sparse": float(mac_sparse),
        "lowbit_ops": float(lowbit),
        "lowbit_bitops": float(lowbit * key_bits**2) if lowbit else 0.0,
        "quantize_ops": float(quantize),
        "pairs_dense": float(n_heads * dense),
        "pairs_sparse": float(n_heads * pairs),
        "mac_ratio": mac_dense / mac_sparse,
    }
