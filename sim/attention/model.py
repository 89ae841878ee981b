"""Swap the exact attention of a trained causal LM for a sparse operator, without retraining.

:func:`sparsify` deep-copies the model and replaces every attention module that has ``q``, ``k``,
``v``, ``o`` linear projections and ``n_heads`` (the zoo's :class:`sim.zoo.models.Attention`)
by a :class:`SparseAttention` that reuses those very projections and runs the chosen operator
between them. The weights are untouched: whatever the model loses is the operator's doing.

With ``stats`` given, every call also measures, against the exact scores of the same queries and
keys (an O(n^2) check, for measurement only): the recall of the true top-k keys and the share of
the exact softmax mass that falls on the kept keys.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import torch
from torch import nn

from coevo.sim.attention.config import ATTENTION
from coevo.sim.attention.ops import Selection, dense_attention, local_global_attention, topk_quantized_attention


@dataclass(frozen=True)
class SparseConfig:
    """Which operator and its settings (see :mod:`sim.attention.ops`)."""

    method: str = ATTENTION.method
    top_k: int = ATTENTION.top_k
    key_bits: int = ATTENTION.key_bits
    window: int = ATTENTION.window
    n_global: int = ATTENTION.n_global


@dataclass
class SelectionStats:
    """Running sums over the queries that had a choice (more visible keys than were kept).

    ``recall``: |kept ∩ exact top-k| / k per query (top-k method only; k = ``top_k``).
    ``mass``: exact-softmax probability on the kept keys per query (any method).
    Queries that see no more keys than a method keeps are left out of both: they keep every key.
    """

    recall_sum: float = 0.0
    mass_sum: float = 0.0
    queries: int = 0
    kept_sum: float = 0.0
    all_queries: int = 0
    per_layer: dict[int, list[float]] = field(default_factory=dict)

    @property
    def recall(self) -> float:
        """Mean recall of the exact top-k (1.0 when no query had a choice)."""
        return self.recall_sum / self.queries if self.queries else 1.0

    @property
    def mass(self) -> float:
        """Mean exact softmax mass on the kept keys (1.0 when no query had a choice)."""
        return self.mass_sum / self.queries if self.queries else 1.0

    @property
    def keys_per_query(self) -> float:
        """Mean number of keys a query attended to, over all queries."""
        return self.kept_sum / self.all_queries if self.all_queries else math.nan


class SparseAttention(nn.Module):
    """A drop-in for the zoo's causal attention: the same projections, a sparse operator between them."""

    def __init__(self, base: nn.Module, config: SparseConfig, stats: SelectionStats | None = None, layer: int = 0) -> None:
        super().__init__()
        self.n_heads: int = int(base.n_heads)  # type: ignore[arg-type]
        self.q: nn.Module = base.q  # type: ignore[assignment]
        self.k: nn.Module = base.k  # type: ignore[assignment]
        self.v: nn.Module = base.v  # type: ignore[assignment]
        self.o: nn.Module = base.o  # type: ignore[assignment]
        self.config = config
        self.stats = stats
        self.layer = layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (proj(x).view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2) for proj in (self.q, self.k, self.v))
        y, sel = self._attend(q, k, v)
        if self.stats is not None:
            _measure(self.stats, q, k, sel, self.config, self.layer)
        return self.o(y.transpose(1, 2).reshape(b, t, d))

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, Selection | None]:
        c = self.config
        if c.method == "dense":
            return dense_attention(q, k, v), None
        if c.method == "topk-quantized-keys":
            return topk_quantized_attention(q, k, v, c.top_k, c.key_bits)
        return local_global_attention(q, k, v, c.window, c.n_global)


def sparsify(model: nn.Module, config: SparseConfig, stats: SelectionStats | None = None) -> nn.Module:
    """A copy of ``model`` whose attention modules run ``config``'s operator (the original is not changed).

    Raises:
        ValueError: the model has no attention module with ``q, k, v, o`` projections and ``n_heads``.
    """
    out = copy.deepcopy(model)
    swapped = 0
    for parent in list(out.modules()):
        for name, child in list(parent.named_children()):
            if all(hasattr(child, a) for a in ("q", "k", "v", "o", "n_heads")) and not isinstance(child, SparseAttention):
                setattr(parent, name, SparseAttention(child, config, stats, layer=swapped))
                swapped += 1
    if not swapped:
        raise ValueError("no attention module with q, k, v, o projections and n_heads found to replace")
    return out


@torch.no_grad()
def _measure(stats: SelectionStats, q: torch.Tensor, k: torch.Tensor, sel: Selection | None, c: SparseConfig, layer: int) -> None:
    n = q.shape[-2]
    visible = torch.arange(1, n + 1, device=q.device)  # keys query i sees
    if sel is None:  # dense: every visible key kept
        stats.kept_sum += float(visible.sum()) * q.shape[0] * q.shape[1]
        stats.all_queries += n * q.shape[0] * q.shape[1]
        return
    index, valid = sel.index.expand(*q.shape[:-1], sel.index.shape[-1]), sel.valid.expand(*q.shape[:-1], sel.valid.shape[-1])
    kept = valid.sum(-1)  # [b, h, n]
    stats.kept_sum += float(kept.sum())
    stats.all_queries += kept.numel()
    choice = visible > kept[0, 0]  # queries that dropped keys (the pattern is the same for every sequence and head)
    if not bool(choice.any()):
        return
    rows = choice.nonzero().squeeze(-1)
    exact = (q[..., rows, :] @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])  # [b, h, r, n]
    exact = exact.masked_fill(torch.arange(n, device=q.device)[None, :] > rows[:, None], -math.inf)
    prob = torch.softmax(exact, dim=-1)
    # padding slots add 0 (they point at key 0, which a valid slot may also hold)
    hits = torch.zeros_like(prob).scatter_add_(-1, index[..., rows, :], valid[..., rows, :].to(prob.dtype))
    kept_mask = hits > 0
    mass = (prob * kept_mask).sum(-1)
    stats.mass_sum += float(mass.sum())
    stats.queries += mass.numel()
    if c.method == "topk-quantized-keys":
        true_top = exact.topk(c.top_k, dim=-1).indices
        hit = torch.gather(kept_mask, -1, true_top).sum(-1).float() / c.top_k
        stats.recall_sum += float(hit.sum())
        stats.per_layer.setdefault(layer, [0.0, 0.0])
        stats.per_layer[layer][0] += float(hit.sum())
        stats.per_layer[layer][1] += hit.numel()
