"""One Linear/Conv2d layer on crossbars: its layout (:class:`LayerPlan`), a faulty instance (:class:`FaultyLayer`), inference through it.

Layout. The kept inputs (rows left after row pruning, compacted) run down the wordlines; the
crossbar budget of a layer is what its unpruned, unprotected mapping needs:
``ceil(in / rows) * ceil(out * slices / cols)`` crossbars per array (times two arrays). After
row pruning a column copy is ``ceil(in_kept / rows)`` crossbars tall, so the same budget holds
``budget // ceil(in_kept / rows)`` crossbar columns side by side. Column copies are laid out
one after the other, ``slices`` bitlines each: the kept output columns first (the originals),
then, with duplication, copies of chosen columns in the remaining bitlines (including those
freed by column pruning and the padding of the last crossbar). Without duplication only the
crossbars that hold originals are used, so pruning alone can save crossbars.

MSB duplication (``msb = m`` slices). A weight keeps ``slices - m`` value slices (so
``weight_bits - m * bits_per_cell`` bits of precision) and its ``m`` spare cells hold copies
of its ``m`` most significant slices: no extra bitlines.

Reading. Every bitline is read on its own (ideal ADC, no IR drop, no read noise); the digital
periphery combines the partial sums: for each output column, array and value slice there are
one or more candidate bitlines (the slice in every copy of the column, and its MSB copies).

* Fault maps known (post-fabrication test): each candidate's error is known (its stuck cells
  against the levels written), and the periphery reads the candidate with the smallest
  squared level error (the original on ties). This choice is static, so the layer equals a
  dense layer with effective weights (:meth:`FaultyLayer.effective_weight`).
* Fault maps unknown: the lower median of the candidates' partial sums (per input): a majority
  vote among 3 copies, the smaller of 2 (an MSB and its copy; SA1, the damaging fault on
  mostly-zero MSB cells, only raises a sum when inputs are non-negative).

Faults never touch biases (kept digital in float) or the activations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from coevo.sim.reram.crossbar import CrossbarConfig, harmful, quantize_magnitudes, sample_faults, slice_levels, stuck

Knowledge = Literal["known", "unknown"]


@dataclass
class LayerPlan:
    """A layer's weights, quantized and laid out on crossbars (everything a fault map does not change).

    Build with :func:`plan_layer`.
    """

    name: str
    weight: np.ndarray
    """Float weights ``[out, in]`` after pruning (im2col order for a conv)."""
    bias: np.ndarray | None
    rows_kept: np.ndarray
    cols_kept: np.ndarray
    cfg: CrossbarConfig
    msb: int
    scale: float
    levels: np.ndarray
    """Written levels ``[2 (pos, neg), in_kept, out_kept, value_slices]``."""
    tall: int
    """Crossbars a column copy spans vertically."""
    budget: int
    """Crossbars per array of the unpruned, unprotected mapping."""
    dup: bool
    conv: dict[str, tuple[int, ...]] | None = None
    out_features: int = 0
    in_features: int = 0

    @property
    def value_slices(self) -> int:
        """Slices that hold the value (the others hold MSB copies)."""
        return self.cfg.slices - self.msb

    @property
    def width(self) -> int:
        """Bitlines per array of the layout."""
        n = self.cfg.slices
        if self.dup:
            return (self.budget // self.tall) * self.cfg.cols
        return max(1, math.ceil(len(self.cols_kept) * n / self.cfg.cols)) * self.cfg.cols

    @property
    def height(self) -> int:
        """Wordlines per array of the layout."""
        return self.tall * self.cfg.rows

    @property
    def capacity(self) -> int:
        """Column copies the layout holds."""
        return self.width // self.cfg.slices

    @property
    def quantized_weight(self) -> np.ndarray:
        """The weights the cells hold when nothing is stuck, ``[out, in]`` (pruned entries 0)."""
        base = self.cfg.levels ** np.arange(self.value_slices)
        q = (self.levels[0] @ base) - (self.levels[1] @ base)  # [in_kept, out_kept]
        w = np.zeros((self.out_features, self.in_features))
        w[np.ix_(self.cols_kept, self.rows_kept)] = self.scale * q.T
        return w

    def bitline(self, copy: int, position: int) -> int:
        """Bitline index of slice position ``position`` of column copy ``copy``."""
        return copy * self.cfg.slices + position

    def candidates(self, slice_: int) -> list[int]:
        """Slice positions (within a column copy) that hold value slice ``slice_``: itself, then its MSB copy if any."""
        first_dup = self.value_slices - self.msb
        out = [slice_]
        if slice_ >= first_dup:
            out.append(self.value_slices + slice_ - first_dup)
        return out

    def written(self, copies: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Levels written ``[2, height, width]`` and the used-cell mask, for column copies ``copies`` (kept-column index or -1)."""
        n, vs = self.cfg.slices, self.value_slices
        grid = np.zeros((2, self.height, self.width), dtype=np.int64)
        used = np.zeros((2, self.height, self.width), dtype=bool)
        k = len(self.rows_kept)
        slots = np.flatnonzero(copies >= 0)
        if len(slots):
            cells = self.levels[:, :, copies[slots], :]  # [2, k, slots, vs]
            cells = np.concatenate([cells, cells[..., vs - self.msb : vs]], axis=-1) if self.msb else cells
            cols = (slots[:, None] * n + np.arange(n)[None, :]).ravel()
            grid[:, :k, cols] = cells.reshape(2, k, -1)
            used[:, :k, cols] = True
        return grid, used

    def crossbars(self, copies: np.ndarray) -> int:
        """Crossbars (both arrays) holding at least one used cell."""
        _, used = self.written(copies)
        r, c = self.cfg.rows, self.cfg.cols
        tiles = used[0].reshape(self.tall, r, self.width // c, c).any(axis=(1, 3))
        return 2 * int(tiles.sum())


def plan_layer(
    name: str,
    weight: np.ndarray,
    bias: np.ndarray | None,
    cfg: CrossbarConfig,
    rows_kept: np.ndarray | None = None,
    cols_kept: np.ndarray | None = None,
    msb: int = 0,
    dup: bool = False,
    conv: dict[str, tuple[int, ...]] | None = None,
) -> LayerPlan:
    """Quantize and lay out ``weight [out, in]`` (see the module doc); pruned rows/cols are the ones not kept.

    Raises:
        ValueError: ``msb`` leaves no value slice, or more MSB slices than value slices.
    """
    out_f, in_f = weight.shape
    rows = np.arange(in_f) if rows_kept is None else np.sort(np.asarray(rows_kept, dtype=np.int64))
    cols = np.arange(out_f) if cols_kept is None else np.sort(np.asarray(cols_kept, dtype=np.int64))
    vs = cfg.slices - msb
    if msb < 0 or msb > vs:
        raise ValueError(
            f"msb={msb}: with {cfg.slices} slices per weight at most {cfg.slices // 2} can be duplicated (each copy takes a value slice)"
        )
    kept = np.asarray(weight, dtype=np.float64)[np.ix_(cols, rows)]  # [out_kept, in_kept]
    q_pos, q_neg, scale = quantize_magnitudes(kept, vs * cfg.bits_per_cell)
    levels = np.stack([slice_levels(q_pos.T, cfg.bits_per_cell, vs), slice_levels(q_neg.T, cfg.bits_per_cell, vs)])
    budget = math.ceil(in_f / cfg.rows) * math.ceil(out_f * cfg.slices / cfg.cols)
    tall = max(1, math.ceil(len(rows) / cfg.rows))
    return LayerPlan(
        name, np.asarray(weight, dtype=np.float64), None if bias is None else np.asarray(bias, dtype=np.float64), rows, cols, cfg, msb,
        scale, levels, tall, budget, dup, conv, out_f, in_f,
    )  # fmt: skip


@dataclass
class FaultyLayer:
    """A layer plan with one fault map: what each output column reads (see the module doc)."""

    plan: LayerPlan
    read: np.ndarray
    """Levels the cells read ``[2, height, width]``."""
    copies: np.ndarray
    """Kept-column index of each column copy slot (-1: empty)."""
    knowledge: Knowledge
    choice: np.ndarray | None = None
    """Known maps: chosen bitline ``[2, out_kept, value_slices]``."""
    groups: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    """Unknown maps: (kept columns, candidate bitlines ``[2, cols, value_slices, K]``) per candidate count K."""
    crossbars: int = 0
    _dense: torch.Tensor | None = field(default=None, repr=False)

    def effective_weight(self) -> np.ndarray:
        """The dense weights ``[out, in]`` this layer computes with (known fault maps only; pruned entries 0)."""
        if self.choice is None:
            raise ValueError("with unknown fault maps the vote depends on the input: there is no single effective weight")
        p = self.plan
        k = len(p.rows_kept)
        base = p.cfg.levels ** np.arange(p.value_slices)
        pos = np.einsum("ics,s->ic", p_read(self.read[0, :k], self.choice[0]), base)
        neg = np.einsum("ics,s->ic", p_read(self.read[1, :k], self.choice[1]), base)
        w = np.zeros((p.out_features, p.in_features))
        w[np.ix_(p.cols_kept, p.rows_kept)] = p.scale * (pos - neg).T
        return w

    def matmul(self, x: torch.Tensor, per_bitline: bool = False) -> torch.Tensor:
        """``x [N, in]`` through the crossbars: ``[N, out]`` without bias.

        With unknown maps (or ``per_bitline``) every bitline's partial sum is computed (float64)
        and combined digitally; with known maps the fixed choice makes that equal to one dense
        product with :meth:`effective_weight` (the tests check both agree), which is used instead.
        """
        if self.choice is not None and not per_bitline:
            if self._dense is None:
                self._dense = torch.as_tensor(self.effective_weight())
            return x @ self._dense.to(x.dtype).T
        p = self.plan
        k = len(p.rows_kept)
        xk = x[:, torch.as_tensor(p.rows_kept)].to(torch.float64)
        sums = [xk @ torch.as_tensor(self.read[a, :k], dtype=torch.float64) for a in (0, 1)]  # partial sum of every bitline
        base = torch.as_tensor(p.cfg.levels ** np.arange(p.value_slices), dtype=torch.float64)
        out = torch.zeros(x.shape[0], p.out_features, dtype=torch.float64)
        if self.choice is not None:
            val = [sums[a][:, torch.as_tensor(self.choice[a])] for a in (0, 1)]  # [N, out_kept, vs]
            out[:, torch.as_tensor(p.cols_kept)] = p.scale * ((val[0] - val[1]) @ base)
        else:
            for cols, cand in self.groups:
                val = [sums[a][:, torch.as_tensor(cand[a])].median(dim=-1).values for a in (0, 1)]  # lower median over K
                out[:, torch.as_tensor(p.cols_kept[cols])] = p.scale * ((val[0] - val[1]) @ base)
        return out.to(x.dtype)


def p_read(read: np.ndarray, choice: np.ndarray) -> np.ndarray:
    """``read[:, choice]`` as ``[rows, out_kept, value_slices]``."""
    return read[:, choice]


def realise(
    plan: LayerPlan,
    rng: np.random.Generator,
    rate: float,
    sa0_share: float,
    knowledge: Knowledge = "known",
    spare_rows: int = 0,
    spare_cols: int = 0,
    faults: np.ndarray | None = None,
) -> FaultyLayer:
    """Sample a fault map over the layer's crossbars and decide what each output reads.

    ``faults`` (codes ``[2, height, width]``) replaces the sampled map (tests build maps by hand);
    spare lines' own faults are still sampled from ``rng`` at ``rate``.

    Order: sample faults (and the spare lines' own faults); repair the originals with spare
    lines (known maps only); give duplicate slots to columns; choose or vote per bitline.
    """
    top = plan.cfg.levels - 1
    n_orig = len(plan.cols_kept)
    copies = np.full(plan.capacity, -1, dtype=np.int64)
    copies[:n_orig] = np.arange(n_orig)
    shape = (2, plan.height, plan.width)
    if faults is None:
        faults = sample_faults(rng, shape, rate, sa0_share)
    elif faults.shape != shape:
        raise ValueError(f"a fault map of this layer has shape {shape}, not {faults.shape}")
    written, used = plan.written(copies)
    if spare_rows or spare_cols:
        if knowledge != "known":
            raise ValueError("spare-line repair needs the fault map (knowledge='known'): a line is replaced because a test found it faulty")
        faults = repair_with_spares(faults, written, used, plan.cfg, rng, rate, sa0_share, spare_rows, spare_cols)
    if plan.dup and plan.capacity > n_orig:
        copies = assign_duplicates(plan, copies, faults, written, used, knowledge)
        written, used = plan.written(copies)
    read = stuck(written, faults, top)
    layer = FaultyLayer(plan, read, copies, knowledge, crossbars=plan.crossbars(copies))
    _decide(layer, written)
    return layer


def _candidate_lists(plan: LayerPlan, copies: np.ndarray) -> list[list[list[int]]]:
    """Per kept column, per value slice: its candidate bitlines (copies in slot order, each slice then its MSB copy)."""
    slots_of: list[list[int]] = [[] for _ in range(len(plan.cols_kept))]
    for slot, col in enumerate(copies):
        if col >= 0:
            slots_of[int(col)].append(slot)
    return [[[plan.bitline(c, pos) for c in slots for pos in plan.candidates(s)] for s in range(plan.value_slices)] for slots in slots_of]


def _candidate_bitlines(plan: LayerPlan, copies: np.ndarray) -> list[np.ndarray]:
    """Per kept column: candidate bitlines ``[value_slices, K]``, shorter lists padded with their first entry."""
    out = []
    for rows in _candidate_lists(plan, copies):
        k = max(len(r) for r in rows)
        # slices without an MSB copy have fewer candidates: repeat the first (only used by the known-map choice, never in a vote)
        out.append(np.array([r + [r[0]] * (k - len(r)) for r in rows], dtype=np.int64))
    return out


def _decide(layer: FaultyLayer, written: np.ndarray) -> None:
    plan = layer.plan
    k = len(plan.rows_kept)
    if layer.knowledge == "known":
        cands = _candidate_bitlines(plan, layer.copies)
        err = ((layer.read[:, :k].astype(np.float64) - written[:, :k]) ** 2).sum(axis=1)  # [2, width] squared level error per bitline
        choice = np.zeros((2, len(plan.cols_kept), plan.value_slices), dtype=np.int64)
        for j, c in enumerate(cands):
            for a in (0, 1):
                e = err[a][c]  # [vs, K]
                choice[a, j] = c[np.arange(len(c)), e.argmin(axis=1)]  # argmin takes the first (the original) on ties
        layer.choice = choice
        return
    # unknown maps: a vote among each slice's candidates. Slices with an MSB copy have more candidates than the
    # others; every list is repeated to a common length (the lcm), which leaves its lower median unchanged.
    lists = [[list(row) for row in c] for c in _candidate_lists(plan, layer.copies)]
    common = math.lcm(*{len(x) for c in lists for x in c})
    cand = np.array([[x * (common // len(x)) for x in c] for c in lists], dtype=np.int64)  # [out_kept, vs, common]
    layer.groups = [(np.arange(len(plan.cols_kept)), np.stack([cand, cand]))]


def assign_duplicates(
    plan: LayerPlan, copies: np.ndarray, faults: np.ndarray, written: np.ndarray, used: np.ndarray, knowledge: Knowledge
) -> np.ndarray:
    """Give the free column-copy slots to columns.

    Known maps: columns whose original reads wrong weights, the largest weight-space squared
    error first, one extra copy each, round after round while slots remain. Unknown maps: the
    columns of largest L2 norm first, two extra copies each (a vote of three).
    """
    out = copies.copy()
    n_orig = len(plan.cols_kept)
    free = list(range(n_orig, plan.capacity))
    if knowledge == "known":
        k = len(plan.rows_kept)
        read = stuck(written, faults, plan.cfg.levels - 1)
        sig = np.tile(plan.cfg.levels ** np.arange(plan.cfg.slices), plan.capacity)[: plan.width].astype(np.float64)
        # MSB copies are not counted (they repair their slice): error of the value slices only, in weight units
        pos_in_copy = np.arange(plan.width) % plan.cfg.slices
        sig = np.where(pos_in_copy < plan.value_slices, sig, 0.0)
        diff = (read[:, :k] - written[:, :k]).astype(np.float64) * sig  # [2, k, width]
        per_bitline = (diff**2).sum(axis=1).sum(axis=0)  # [width]
        col_err = per_bitline[: n_orig * plan.cfg.slices].reshape(n_orig, plan.cfg.slices).sum(axis=1)
        order = [int(j) for j in np.argsort(-col_err, kind="stable") if col_err[j] > 0]
        while free and order:
            for j in order:
                if not free:
                    break
                out[free.pop(0)] = j
    else:
        norms = np.linalg.norm(plan.weight[plan.cols_kept][:, plan.rows_kept], axis=1)
        for j in np.argsort(-norms, kind="stable"):
            if len(free) < 2:
                break
            out[free.pop(0)] = j
            out[free.pop(0)] = j
    return out


def repair_with_spares(
    faults: np.ndarray,
    written: np.ndarray,
    used: np.ndarray,
    cfg: CrossbarConfig,
    rng: np.random.Generator,
    rate: float,
    sa0_share: float,
    spare_rows: int,
    spare_cols: int,
) -> np.ndarray:
    """Replace faulty lines with each crossbar's spare rows/columns (greedy), returning the repaired fault map.

    Per crossbar, while spares remain: the row or column with the most harmful faults on used
    cells is replaced by the next spare line, whose own cells are faulty at the same rate (its
    faults are sampled here). A replaced line's cells take the spare's fault codes.
    """
    top = cfg.levels - 1
    r, c = cfg.rows, cfg.cols
    out = faults.copy()
    _, h, w = faults.shape
    for a in range(faults.shape[0]):
        for ti in range(h // r):
            for tj in range(w // c):
                rs, cs = slice(ti * r, (ti + 1) * r), slice(tj * c, (tj + 1) * c)
                if not used[a, rs, cs].any():
                    continue
                tile, lv, us = out[a, rs, cs], written[a, rs, cs], used[a, rs, cs]
                spare_r = sample_faults(rng, (spare_rows, c), rate, sa0_share)
                spare_c = sample_faults(rng, (r, spare_cols), rate, sa0_share)
                left_r, left_c = spare_rows, spare_cols
                while left_r or left_c:
                    bad = harmful(lv, tile, top, us)
                    by_row = bad.sum(axis=1) if left_r else np.zeros(r, dtype=np.int64)
                    by_col = bad.sum(axis=0) if left_c else np.zeros(c, dtype=np.int64)
                    if max(by_row.max(), by_col.max()) == 0:
                        break
                    if by_row.max() >= by_col.max():
                        tile[int(by_row.argmax()), :] = spare_r[spare_rows - left_r]
                        left_r -= 1
                    else:
                        tile[:, int(by_col.argmax())] = spare_c[:, spare_cols - left_c]
                        left_c -= 1
    return out


class CrossbarLayer(nn.Module):
    """A Linear or Conv2d whose weights are read through a :class:`FaultyLayer` (inference only)."""

    def __init__(self, faulty: FaultyLayer) -> None:
        super().__init__()
        self.faulty = faulty
        bias = faulty.plan.bias
        # a plain attribute, not a parameter: the layer is for inference through a fixed fault map
        self.bias_value: torch.Tensor | None = None if bias is None else torch.as_tensor(bias, dtype=torch.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv = self.faulty.plan.conv
        if conv is None:
            lead = x.shape[:-1]
            y = self.faulty.matmul(x.reshape(-1, x.shape[-1])).reshape(*lead, -1)
            return y if self.bias_value is None else y + self.bias_value.to(y.dtype)
        n, _, hgt, wid = x.shape
        k, s, p, d = conv["kernel"], conv["stride"], conv["padding"], conv["dilation"]
        cols = F.unfold(x, k, dilation=d, padding=p, stride=s)  # [N, C*kh*kw, L]
        ho = (hgt + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
        wo = (wid + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
        y = self.faulty.matmul(cols.transpose(1, 2).reshape(-1, cols.shape[1]))  # [N*L, out]
        y = y.reshape(n, ho * wo, -1).transpose(1, 2).reshape(n, -1, ho, wo)
        return y if self.bias_value is None else y + self.bias_value.to(y.dtype).view(1, -1, 1, 1)
