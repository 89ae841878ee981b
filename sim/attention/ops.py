"""Causal attention operators: the dense reference and two sparse ones whose expensive part is linear in length.

Every operator takes ``q, k, v`` shaped ``[..., n, d_head]`` (leading dims are batch and heads),
is causal (query ``i`` sees keys ``j <= i`` only) and returns ``[..., n, d_head]``.

* :func:`dense_attention`: exact softmax attention over all visible keys (the reference).
* :func:`topk_quantized_attention`: each query and key row is quantized to ``key_bits`` bits
  (symmetric, one scale per token, so a key is quantized once, when it arrives, without looking
  at later tokens); the integer dot products of every (query, visible key) pair pre-score the
  keys; the ``top_k`` best keys per query are kept and an exact (full-precision) softmax runs
  over those only. The pre-scoring still touches every pair, so it is O(n^2) -- in cheap
  low-bit multiply-accumulates -- while the full-precision part (scores, softmax, weighted sum
  of values) is O(n * top_k). On this CPU the integer products run as a float32 (or int8) GEMM,
  so the low-bit saving shows in the op counts, not in the CPU time (see docs/attention.md).
* :func:`local_global_attention`: query ``i`` attends to the ``window`` most recent keys
  (itself included) and the first ``n_global`` tokens of the sequence: O(n * (window + n_global))
  in everything, with no pre-scoring.

Long sequences are processed in chunks of query rows so memory stays O(chunk * n) (top-k) or
O(n * (window + n_global)) (local+global), never O(n^2) at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from coevo.sim.attention.config import MAX_BITS, MIN_BITS
from coevo.sim.errors import UserInputError


@dataclass(frozen=True)
class Selection:
    """Which keys each query kept: ``index [..., n, m]`` (key positions) and ``valid [..., n, m]`` (False = padding slot)."""

    index: torch.Tensor
    valid: torch.Tensor


def check_bits(key_bits: int) -> None:
    """Raise :class:`UserInputError` unless ``MIN_BITS <= key_bits <= MAX_BITS``."""
    if isinstance(key_bits, bool) or not isinstance(key_bits, int) or not MIN_BITS <= key_bits <= MAX_BITS:
        raise UserInputError(f"key_bits={key_bits!r}: give an integer between {MIN_BITS} and {MAX_BITS} (4 is the usual pre-scoring width)")


def check_top_k(top_k: int) -> None:
    """Raise :class:`UserInputError` unless ``top_k`` is a positive integer."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
        raise UserInputError(f"top_k={top_k!r}: give a positive number of keys kept per query (e.g. 32)")


def check_window(window: int, n_global: int) -> None:
    """Raise :class:`UserInputError` unless ``window >= 1`` and ``n_global >= 0`` (integers)."""
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        raise UserInputError(f"window={window!r}: give a positive local window (keys before and including the query, e.g. 32)")
    if isinstance(n_global, bool) or not isinstance(n_global, int) or n_global < 0:
        raise UserInputError(f"n_global={n_global!r}: give a number of global tokens >= 0 (e.g. 4)")


def quantize_rows(x: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-row quantization of the last dimension: ``x ~ codes * scale``.

    ``bits >= 2``: integer codes in ``[-(2^(bits-1) - 1), 2^(bits-1) - 1]`` and ``scale = max|x| / (2^(bits-1) - 1)``.
    ``bits == 1``: codes ``sign(x)`` in ``{-1, +1}`` (0 counts as +1) and ``scale = mean|x|`` (the L1-optimal binary scale).

    Returns:
        ``(codes, scale)``: codes as float tensors holding integers (``x.shape``), scale ``x.shape[:-1]``.
    """
    check_bits(bits)
    if bits == 1:
        codes = torch.where(x >= 0, 1.0, -1.0).to(x.dtype)
        return codes, x.abs().mean(-1)
    levels = 2 ** (bits - 1) - 1
    amax = x.abs().amax(-1)
    scale = torch.where(amax > 0, amax / levels, torch.ones_like(amax))
    return torch.round(x / scale[..., None]).clamp(-levels, levels), scale


def dense_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Exact causal softmax attention (materialises the ``n x n`` scores; the reference the others are checked against)."""
    n = q.shape[-2]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    future = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(scores.masked_fill(future, -math.inf), dim=-1) @ v


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Softmax attention over an explicit boolean mask ``allowed [..., n, n]`` (True = query may see key); every row needs a True."""
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=-1) @ v


def _attend_selected(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, index: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Exact softmax of queries ``q [..., c, d]`` over selected keys: ``index/valid [..., c, m]`` (broadcast) into ``k, v [..., e, d]``.

    Gathers by flat row number with ``index_select`` (contiguous reads; ``torch.gather`` on
    broadcast indices is an order of magnitude slower on CPU) and masks with an additive bias.
    """
    lead, e, d = k.shape[:-2], k.shape[-2], k.shape[-1]
    c, m = index.shape[-2], index.shape[-1]
    groups = math.prod(lead)
    base = (torch.arange(groups, device=k.device) * e).reshape(*lead, 1, 1)
    rows = (index + base).reshape(-1)  # broadcasting over the leading dims makes it full size and contiguous
    k_sel = k.reshape(-1, d).index_select(0, rows).reshape(*lead, c, m, d)
    v_sel = v.reshape(-1, d).index_select(0, rows).reshape(*lead, c, m, d)
    bias = torch.zeros(valid.shape, dtype=q.dtype, device=q.device).masked_fill_(~valid, -math.inf)
    scores = (k_sel @ q.unsqueeze(-1)).squeeze(-1) / math.sqrt(d) + bias  # [..., c, m]
    weights = torch.softmax(scores, dim=-1)
    return (weights.unsqueeze(-2) @ v_sel).squeeze(-2)


def topk_quantized_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    top_k: int,
    key_bits: int,
    *,
    chunk: int = 512,
    int8_gemm: bool = False,
) -> tuple[torch.Tensor, Selection]:
    """Causal attention over the ``top_k`` keys per query that low-bit pre-scores rank highest.

    Pre-score of (query ``i``, key ``j``): ``dot(codes_q[i], codes_k[j]) * scale_k[j]`` (the query's
    own scale is one positive factor per row, so it cannot change the ranking and is left out).
    Keys after the query are never candidates. A query with fewer than ``top_k`` visible keys
    keeps them all, so ``top_k >= n`` is exactly dense attention.

    Args:
        q, k, v: ``[..., n, d_head]``.
        top_k: keys kept per query (>= 1).
        key_bits: bits of the quantized queries and keys (1..16).
        chunk: query rows pre-scored at once (memory ``chunk * n`` pre-scores).
        int8_gemm: compute the integer products with ``torch._int_mm`` (int8 x int8 -> int32; needs
            ``key_bits <= 8`` and a 2-D problem per head), the closest this CPU has to a low-bit unit.

    Returns:
        ``(out [..., n, d_head], Selection)`` with ``m = min(top_k, n)`` slots per query.
    """
    check_top_k(top_k)
    check_bits(key_bits)
    if int8_gemm and key_bits > 8:
        raise UserInputError(f"int8_gemm needs key_bits <= 8, got {key_bits}")
    n = q.shape[-2]
    m = min(top_k, n)
    q_codes, _ = quantize_rows(q, key_bits)
    k_codes, k_scale = quantize_rows(k, key_bits)
    out = torch.empty_like(q)
    index = torch.empty(*q.shape[:-1], m, dtype=torch.long, device=q.device)
    valid = torch.empty(*q.shape[:-1], m, dtype=torch.bool, device=q.device)
    for start in range(0, n, chunk):
        end = min(n, start + chunk)  # queries start..end-1 only ever see keys 0..end-1
        if int8_gemm:
            approx = _int8_scores(q_codes[..., start:end, :], k_codes[..., :end, :]) * k_scale[..., None, :end]
        else:
            approx = (q_codes[..., start:end, :] @ k_codes[..., :end, :].transpose(-1, -2)) * k_scale[..., None, :end]
        qpos = torch.arange(start, end, device=q.device)[:, None]
        future = torch.arange(end, device=q.device)[None, :] > qpos
        approx = approx.masked_fill(future, -math.inf)
        take = min(m, end)
        sel = approx.topk(take, dim=-1, sorted=False).indices
        ok = sel <= qpos  # a query with fewer than `take` visible keys drew some future (masked) ones: drop them
        if take < m:  # only when the first chunk is shorter than top_k: pad with invalid slots
            pad = (*sel.shape[:-1], m - take)
            sel = torch.cat([sel, torch.zeros(pad, dtype=sel.dtype, device=sel.device)], -1)
            ok = torch.cat([ok, torch.zeros(pad, dtype=torch.bool, device=ok.device)], -1)
        out[..., start:end, :] = _attend_selected(q[..., start:end, :], k, v, sel, ok)
        index[..., start:end, :] = sel
        valid[..., start:end, :] = ok
    return out, Selection(index, valid)


def _int8_scores(qc: torch.Tensor, kc: torch.Tensor) -> torch.Tensor:
    """Integer pre-scores ``qc @ kc^T`` through int8 x int8 -> int32 GEMMs, one per leading index, as float32."""
    lead = qc.shape[:-2]
    q2 = qc.to(torch.int8).reshape(-1, *qc.shape[-2:])
    k2 = kc.to(torch.int8).reshape(-1, *kc.shape[-2:])
    rows = []
    for a, b in zip(q2, k2, strict=True):
        # torch._int_mm wants more than 16 rows and multiples of 8: pad, multiply, cut back
        r, e = a.shape[0], b.shape[0]
        rp, ep = max(24, -(-r // 8) * 8), -(-e // 8) * 8
        a_p = torch.zeros(rp, a.shape[1], dtype=torch.int8)
        a_p[:r] = a
        b_p = torch.zeros(ep, b.shape[1], dtype=torch.int8)
        b_p[:e] = b
        rows.append(torch._int_mm(a_p, b_p.t().contiguous())[:r, :e])
    return torch.stack(rows).reshape(*lead, qc.shape[-2], kc.shape[-2]).float()


def local_global_indices(n: int, window: int, n_global: int, device: torch.device | None = None) -> Selection:
    """Key positions of the local+global pattern for ``n`` queries: ``window`` recent keys, then the first ``n_global`` tokens.

    Slot ``s < window`` of query ``i`` is key ``i - s`` (valid when ``>= 0``); slot ``window + g``
    is key ``g`` (valid when ``g <= i`` and it is not already in the window), so no key counts twice.
    """
    check_window(window, n_global)
    pos = torch.arange(n, device=device)[:, None]
    win = pos - torch.arange(window, device=device)[None, :]
    glob = torch.arange(n_global, device=device)[None, :].expand(n, n_global)
    valid = torch.cat([win >= 0, (glob <= pos) & (glob < pos - window + 1)], -1)
    index = torch.cat([win, glob], -1).masked_fill(~valid, 0)  # padding slots point at key 0, always in range
    return Selection(index, valid)


def local_global_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, n_global: int) -> tuple[torch.Tensor, Selection]:
    """Causal attention over a fixed pattern: the ``window`` most recent keys (the query included) and the first ``n_global`` tokens.

    Linear in ``n``. The kernel cuts the sequence into blocks of ``window`` queries; a block's
    queries score the keys of their own and the previous block plus the global tokens in one
    GEMM, and a mask keeps exactly the pattern. So it computes ``n * (2 window + n_global)``
    products where the pattern needs at most ``n * (window + n_global)`` (the op counts in
    :mod:`sim.attention.flops` count the pattern): on a CPU one GEMM beats gathering keys per query.

    Returns:
        ``(out [..., n, d_head], Selection)``: the pattern (``window + n_global`` slots per query, shared by all leading dims).
    """
    n, d = q.shape[-2], q.shape[-1]
    sel = local_global_indices(n, window, n_global, q.device)
    lead = q.shape[:-2]
    b = window
    nb = -(-n // b)
    pad = nb * b - n
    qb, kb, vb = (torch.nn.functional.pad(t, (0, 0, 0, pad)).reshape(*lead, nb, b, d) for t in (q, k, v))
    g = min(n_global, n)

    def keys(t: torch.Tensor, tb: torch.Tensor) -> torch.Tensor:
        prev = torch.cat([torch.zeros_like(tb[..., :1, :, :]), tb[..., :-1, :, :]], -3)
        glob = t[..., None, :g, :].expand(*lead, nb, g, d)
        return torch.cat([prev, tb, glob], -2)  # [..., nb, 2b + g, d]

    k_all, v_all = keys(k, kb), keys(v, vb)
    qpos = torch.arange(nb * b, device=q.device).reshape(nb, b, 1)
    block = torch.arange(nb, device=q.device).reshape(nb, 1, 1)
    wpos = (block - 1) * b + torch.arange(2 * b, device=q.device).reshape(1, 1, 2 * b)  # key positions of the two blocks
    in_window = (wpos >= 0) & (wpos <= qpos) & (qpos - wpos < window)
    gpos = torch.arange(g, device=q.device).reshape(1, 1, g)
    in_global = (gpos <= qpos) & (gpos < qpos - window + 1)  # a global token inside the window counts once, in the window
    allowed = torch.cat([in_window, in_global.expand(nb, b, g)], -1)
    bias = torch.zeros(allowed.shape, dtype=q.dtype, device=q.device).masked_fill_(~allowed, -math.inf)
    scores = qb @ k_all.transpose(-1, -2) / math.sqrt(d) + bias
    out = torch.softmax(scores, dim=-1) @ v_all
    return out.reshape(*lead, nb * b, d)[..., :n, :], sel
