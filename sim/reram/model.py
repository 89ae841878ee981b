"""A whole model on crossbars: protection schemes, structured pruning, the crossbar budget, and accuracy over many fault maps.

Every ``nn.Linear`` and ``nn.Conv2d`` (groups 1) is mapped; embeddings, norms and biases stay
digital. A :class:`Protection` combines:

* ``prune``: structured pruning of a fraction of each layer's input rows and output columns
  (never the model's last layer's columns, which are the classes or the vocabulary); their
  cells are freed. ``prune_method="learned"`` (default, the paper's kind): every row and column
  of every mapped layer has a learnable score; the forward pass multiplies the weights by a hard
  top-k mask of the scores (straight-through gradient to the scores through a sigmoid), with an
  L1 penalty on the sigmoid gates, and the scores train jointly with the weights for
  ``finetune_epochs`` epochs while the pruned fraction ramps up to the requested one
  (:func:`learn_masks`). ``prune_method="l2"``: the baseline, one-shot smallest-L2-norm lines
  (:func:`prune_masks`), then masked fine-tuning.
* fine-tuning: every scheme, unprotected included, gets the same ``finetune_epochs`` epochs of
  training (same optimizer, learning rate, seed and batches), so a scheme's gain is never extra
  training.
* ``dup``: duplicate columns into the freed bitlines of the same crossbar budget, read by a
  vote of three copies without the fault map (``knowledge="unknown"``, the headline) or by the
  fault-map-aware choice after a post-fabrication test (``knowledge="known"``): :mod:`sim.reram.layer`.
* ``msb``: the most significant slice(s) of every weight also stored in its least significant
  cells (fewer bits of precision, no extra cells).
* ``spare``: the baseline: each crossbar carries spare rows and columns that replace its
  faultiest lines after a test (known maps); they cost area, counted in crossbar equivalents.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import nn

from coevo.sim.errors import UserInputError
from coevo.sim.reram.config import ReramConfig
from coevo.sim.reram.crossbar import CrossbarConfig, check_rate
from coevo.sim.reram.layer import CrossbarLayer, FaultyLayer, Knowledge, LayerPlan, plan_layer, realise

SCHEME_PARTS = ("none", "prune", "dup", "msb", "spare")
"""Words a protection string combines with ``+``."""
PRUNE_METHODS = ("learned", "l2")
"""``learned``: row/column scores trained with the model (default); ``l2``: one-shot magnitude baseline."""
SCORE_LR = 1e-2
"""Adam learning rate of the row/column scores of learned pruning (the weights use the fine-tuning rate)."""
SPARSITY = 1e-3
"""Weight of the L1 penalty on the sigmoid gates of learned pruning (pushes lines the loss does not use down)."""


@dataclass(frozen=True)
class Protection:
    """A protection scheme (module doc). Build from text with :meth:`parse`."""

    prune_rows: float = 0.0
    prune_cols: float = 0.0
    dup: bool = False
    msb: int = 0
    spare_rows: int = 0
    spare_cols: int = 0
    knowledge: Knowledge = "known"
    finetune_epochs: int = 0
    prune_method: str = "learned"

    def __post_init__(self) -> None:
        if self.prune_method not in PRUNE_METHODS:
            raise UserInputError(
                f"prune_method={self.prune_method!r}: use 'learned' (row/column scores trained with the model) or 'l2' (magnitude)"
            )
        for name in ("prune_rows", "prune_cols"):
            v = getattr(self, name)
            if not 0.0 <= v < 1.0:
                raise UserInputError(f"{name}={v}: prune a fraction in [0, 1) of each layer's lines")
        for name in ("msb", "spare_rows", "spare_cols", "finetune_epochs"):
            if getattr(self, name) < 0:
                raise UserInputError(f"{name}={getattr(self, name)}: must be >= 0")
        if self.knowledge not in ("known", "unknown"):
            raise UserInputError(f"knowledge={self.knowledge!r}: use 'known' (fault maps from a post-fabrication test) or 'unknown'")
        if (self.spare_rows or self.spare_cols) and self.knowledge != "known":
            raise UserInputError("spare lines replace the lines a test found faulty: they need knowledge='known'")

    @classmethod
    def parse(cls, text: str, **settings: Any) -> Protection:
        """``"prune+dup+msb"``-style text; a word turns its part on with defaults that ``settings`` override.

        Defaults (:class:`~coevo.sim.reram.config.ReramConfig`'s): ``prune`` 10 % of rows and 10 % of columns;
        ``msb`` 1 slice; ``spare`` 2 rows and 2 columns per crossbar. A setting given for a part the text leaves out
        is an error.

        Raises:
            UserInputError: an unknown word, or settings for a part not named.
        """
        words = [w.strip().lower() for w in str(text).split("+") if w.strip()]
        bad = [w for w in words if w not in SCHEME_PARTS]
        if not words or bad:
            raise UserInputError(
                f"protection={text!r}: {'unknown part ' + ', '.join(map(repr, bad)) if bad else 'empty'}; combine "
                f"{', '.join(SCHEME_PARTS)} with '+', e.g. 'prune+dup+msb' or 'spare'"
            )
        given = {k: v for k, v in settings.items() if v is not None}
        values: dict[str, Any] = {}
        if "prune" in words:
            values |= {"prune_rows": ReramConfig.prune_rows, "prune_cols": ReramConfig.prune_cols}
        if "dup" in words:
            values["dup"] = True
        if "msb" in words:
            values["msb"] = ReramConfig.msb
        if "spare" in words:
            values |= {"spare_rows": ReramConfig.spare_rows, "spare_cols": ReramConfig.spare_cols}
        owner = {"prune_rows": "prune", "prune_cols": "prune", "msb": "msb", "spare_rows": "spare", "spare_cols": "spare"}
        stray = [k for k, part in owner.items() if k in given and given[k] and part not in words]
        if stray:
            raise UserInputError(f"{', '.join(stray)} given but protection={text!r} does not name {owner[stray[0]]!r}; add it with '+'")
        return cls(**(values | given))

    @property
    def label(self) -> str:
        """Short text naming the parts and their settings."""
        parts = []
        if self.prune_rows or self.prune_cols:
            parts.append(f"prune(r{self.prune_rows:g},c{self.prune_cols:g}{',l2' if self.prune_method == 'l2' else ''})")
        if self.dup:
            parts.append("dup")
        if self.msb:
            parts.append(f"msb{self.msb}")
        if self.spare_rows or self.spare_cols:
            parts.append(f"spare(r{self.spare_rows},c{self.spare_cols})")
        if self.finetune_epochs:
            parts.append(f"ft{self.finetune_epochs}")
        return "+".join(parts if len(parts) > (1 if self.finetune_epochs else 0) else ["none", *parts])

    def area_factor(self, cfg: CrossbarConfig) -> float:
        """Area of one crossbar with its spare lines, in crossbars without spares."""
        return (cfg.rows + self.spare_rows) * (cfg.cols + self.spare_cols) / (cfg.rows * cfg.cols)


def mapped_layers(model: nn.Module) -> list[tuple[str, nn.Linear | nn.Conv2d]]:
    """The model's Linear and Conv2d layers, in module order.

    Raises:
        UserInputError: a grouped convolution (not mapped here) or a model with no such layer.
    """
    out: list[tuple[str, nn.Linear | nn.Conv2d]] = []
    for name, m in model.named_modules():
        if isinstance(m, nn.Conv2d):
            if m.groups != 1 or m.padding_mode != "zeros" or isinstance(m.padding, str):
                raise UserInputError(f"layer {name}: only Conv2d with groups=1 and numeric zero padding maps onto crossbars")
            out.append((name, m))
        elif isinstance(m, nn.Linear):
            out.append((name, m))
    if not out:
        raise UserInputError("the model has no Linear or Conv2d layer to map onto crossbars")
    return out


def _matrix(m: nn.Linear | nn.Conv2d) -> np.ndarray:
    return m.weight.detach().double().reshape(m.weight.shape[0], -1).numpy()


def crossbars_needed(model: nn.Module, cfg: CrossbarConfig) -> int:
    """Crossbars (both arrays of each differential pair) of the unpruned, unprotected mapping."""
    total = 0
    for _, m in mapped_layers(model):
        out_f, in_f = _matrix(m).shape
        total += 2 * math.ceil(in_f / cfg.rows) * math.ceil(out_f * cfg.slices / cfg.cols)
    return total


def check_budget(model: nn.Module, cfg: CrossbarConfig, budget: int | None) -> int:
    """Crossbars needed; raises :class:`UserInputError` saying by how much when ``budget`` is smaller."""
    need = crossbars_needed(model, cfg)
    if budget is not None and need > budget:
        raise UserInputError(
            f"the model needs {need} crossbars of {cfg.rows}x{cfg.cols} ({cfg.weight_bits}-bit weights, {cfg.bits_per_cell} bits per "
            f"cell, differential pairs) but the budget is {budget}: {need - budget} more than available ({need / budget:.2f}x the "
            "budget); raise crossbar_budget, use larger crossbars, more bits per cell or fewer weight bits"
        )
    return need


def _prune_counts(layers: Sequence[tuple[str, nn.Linear | nn.Conv2d]], rows: float, cols: float) -> list[tuple[int, int]]:
    """(input rows, output columns) to prune per mapped layer: the fractions rounded down, at least one line kept.

    The last mapped layer keeps all its columns (its outputs are the classes or the vocabulary).
    """
    out = []
    for i, (_, m) in enumerate(layers):
        out_f, in_f = _matrix(m).shape
        n_rows = min(math.floor(rows * in_f), in_f - 1)
        n_cols = 0 if i == len(layers) - 1 else min(math.floor(cols * out_f), out_f - 1)
        out.append((n_rows, n_cols))
    return out


def prune_masks(model: nn.Module, rows: float, cols: float) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Kept (input rows, output columns) per mapped layer: the smallest-L2-norm fraction of each removed (rounded down).

    The L2-magnitude baseline (``prune_method="l2"``); the last mapped layer keeps all its columns.
    """
    layers = mapped_layers(model)
    masks = {}
    for (name, m), (n_rows, n_cols) in zip(layers, _prune_counts(layers, rows, cols), strict=True):
        w = _matrix(m)
        row_norm, col_norm = np.linalg.norm(w, axis=0), np.linalg.norm(w, axis=1)
        keep_r = np.sort(np.argsort(row_norm, kind="stable")[n_rows:])
        keep_c = np.sort(np.argsort(col_norm, kind="stable")[n_cols:])
        masks[name] = (keep_r, keep_c)
    return masks


def apply_masks(model: nn.Module, masks: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """Zero the pruned rows and columns (and the pruned columns' biases) in place."""
    mods = dict(model.named_modules())
    with torch.no_grad():
        for name, (keep_r, keep_c) in masks.items():
            m = mods[name]
            w = m.weight.view(m.weight.shape[0], -1)
            mask = torch.zeros_like(w, dtype=torch.bool)
            mask[torch.as_tensor(keep_c)[:, None], torch.as_tensor(keep_r)[None, :]] = True
            w.mul_(mask)
            if m.bias is not None:
                b = torch.zeros_like(m.bias, dtype=torch.bool)
                b[torch.as_tensor(keep_c)] = True
                m.bias.mul_(b)


def _straight_through_topk(scores: torch.Tensor, prune: int) -> torch.Tensor:
    """A 0/1 mask keeping all but the ``prune`` lowest scores in the forward pass; the gradient flows to the scores through a sigmoid."""
    soft = torch.sigmoid(scores)
    hard = torch.ones_like(scores)
    if prune:
        hard[torch.topk(scores.detach(), prune, largest=False).indices] = 0.0
    return hard + soft - soft.detach()


class _LineScores:
    """Learnable scores of one layer's input rows and output columns, and how many of each the forward pass prunes now."""

    def __init__(self, weight: np.ndarray) -> None:
        row_norm, col_norm = np.linalg.norm(weight, axis=0), np.linalg.norm(weight, axis=1)
        # a warm start from magnitude, small enough (about 0.1) for a few dozen score steps to reorder the lines
        self.rows = torch.tensor(0.1 * row_norm / max(float(row_norm.mean()), 1e-12), dtype=torch.float32, requires_grad=True)
        self.cols = torch.tensor(0.1 * col_norm / max(float(col_norm.mean()), 1e-12), dtype=torch.float32, requires_grad=True)
        self.prune_rows = 0
        self.prune_cols = 0

    def masks(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(row mask ``[in]``, column mask ``[out]``) with straight-through gradients."""
        return _straight_through_topk(self.rows, self.prune_rows), _straight_through_topk(self.cols, self.prune_cols)

    def kept(self) -> tuple[np.ndarray, np.ndarray]:
        """Kept (rows, columns), sorted: all but the lowest-scored lines."""
        r = self.rows.detach().numpy()
        c = self.cols.detach().numpy()
        return np.sort(np.argsort(r, kind="stable")[self.prune_rows :]), np.sort(np.argsort(c, kind="stable")[self.prune_cols :])

    def penalty(self) -> torch.Tensor:
        """L1 of the sigmoid gates (sparsity pressure on the lines the loss does not hold up)."""
        return torch.sigmoid(self.rows).sum() + torch.sigmoid(self.cols).sum()


class _GatedWeight(nn.Module):
    """Parametrization of a weight ``[out, ...]``: times its column mask and its (im2col) row mask."""

    def __init__(self, scores: _LineScores) -> None:
        super().__init__()
        self.scores = scores

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        rows, cols = self.scores.masks()
        return (w.reshape(w.shape[0], -1) * cols[:, None] * rows[None, :]).reshape(w.shape)


class _GatedBias(nn.Module):
    """Parametrization of a bias: a pruned column outputs nothing, bias included."""

    def __init__(self, scores: _LineScores) -> None:
        super().__init__()
        self.scores = scores

    def forward(self, b: torch.Tensor) -> torch.Tensor:
        return b * self.scores.masks()[1]


def _train(
    model: nn.Module,
    batches: Callable[[int], Any],
    loss: Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor],
    epochs: int,
    lr: float,
    seed: int,
    scores: Sequence[torch.Tensor] = (),
    penalty: Callable[[], torch.Tensor] | None = None,
    before_epoch: Callable[[int], None] | None = None,
    after_step: Callable[[], None] | None = None,
) -> None:
    """The one fine-tuning loop every scheme uses: Adam at ``lr`` on the weights, seeded, batches from ``batches(epoch)``."""
    torch.manual_seed(seed)
    weights = [p for p in model.parameters() if p.requires_grad]
    groups: list[dict[str, Any]] = [{"params": weights, "lr": lr}]
    if scores:
        groups.append({"params": list(scores), "lr": SCORE_LR})
    opt = torch.optim.Adam(groups)
    model.train()
    for epoch in range(epochs):
        if before_epoch is not None:
            before_epoch(epoch)
        for x, y in batches(epoch):
            opt.zero_grad(set_to_none=True)
            value = loss(model, x, y)
            if penalty is not None:
                value = value + penalty()
            value.backward()
            opt.step()
            if after_step is not None:
                after_step()
    model.eval()


def learn_masks(
    model: nn.Module,
    rows: float,
    cols: float,
    batches: Callable[[int], Any],
    loss: Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor],
    epochs: int,
    lr: float = 1e-3,
    seed: int = 0,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Differentiable row/column structured pruning, trained with the weights of ``model`` (in place); the kept lines per layer.

    Every mapped layer's input rows and output columns get a score (warm-started from their L2
    norms). The forward pass multiplies the weights (and the biases of the columns) by a hard mask
    that drops the lowest-scored lines; its gradient reaches the scores straight through a sigmoid,
    plus an L1 penalty (weight :data:`SPARSITY`) on the sigmoid gates. The pruned share ramps
    linearly over the first half of the epochs (at least one) to the requested one, rounded down as
    in :func:`prune_masks`; the remaining epochs train at that share. The weights (Adam at ``lr``)
    and the scores (Adam at :data:`SCORE_LR`) train jointly. At the end the masks are baked into
    the weights (pruned lines exactly 0).
    """
    from torch.nn.utils import parametrize

    layers = mapped_layers(model)
    counts = _prune_counts(layers, rows, cols)
    scores = {name: _LineScores(_matrix(m)) for name, m in layers}
    for name, m in layers:
        parametrize.register_parametrization(m, "weight", _GatedWeight(scores[name]))
        if m.bias is not None:
            parametrize.register_parametrization(m, "bias", _GatedBias(scores[name]))
    ramp = max(1, math.ceil(epochs / 2))

    def schedule(epoch: int) -> None:
        share = min(1.0, (epoch + 1) / ramp)
        for (name, _), (n_rows, n_cols) in zip(layers, counts, strict=True):
            scores[name].prune_rows, scores[name].prune_cols = math.floor(share * n_rows), math.floor(share * n_cols)

    params = [t for s in scores.values() for t in (s.rows, s.cols)]
    try:
        _train(
            model, batches, loss, epochs, lr, seed, params, lambda: SPARSITY * sum((s.penalty() for s in scores.values()), torch.zeros(())),
            schedule,
        )  # fmt: skip
    finally:
        for _, m in layers:
            for attr in ("weight", "bias"):
                if parametrize.is_parametrized(m, attr):
                    parametrize.remove_parametrizations(m, attr, leave_parametrized=True)
    masks = {name: scores[name].kept() for name, _ in layers}
    apply_masks(model, masks)
    return masks


def pruned_model(
    model: nn.Module,
    protection: Protection,
    batches: Callable[[int], Any] | None = None,
    loss: Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    lr: float = 1e-3,
    seed: int = 0,
) -> tuple[nn.Module, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """A copy of ``model`` pruned as ``protection`` says and fine-tuned ``protection.finetune_epochs`` epochs, and its masks.

    Every scheme gets the same fine-tuning (loop, optimizer, ``lr``, ``seed``, batches), pruned or
    not: an unpruned model is fine-tuned as much as a pruned one. Learned pruning trains its scores
    during those epochs (:func:`learn_masks`); L2 pruning prunes first, then fine-tunes with the
    masks held. ``batches(epoch)`` yields ``(x, y)`` training batches and ``loss(model, x, y)``
    gives the loss; both are needed only when ``finetune_epochs > 0``.

    Raises:
        UserInputError: fine-tuning without data, or learned pruning with no epoch to learn in.
    """
    out = copy.deepcopy(model)
    prunes = bool(protection.prune_rows or protection.prune_cols)
    epochs = protection.finetune_epochs
    if epochs and (batches is None or loss is None):
        raise UserInputError("fine-tuning needs the training data: give batches and loss")
    if prunes and protection.prune_method == "learned":
        if not epochs or batches is None or loss is None:
            raise UserInputError(
                f"finetune_epochs={epochs}: learned pruning trains its row/column scores with the model; give finetune_epochs >= 1 "
                "(and the training data), or prune_method='l2' for one-shot magnitude pruning"
            )
        return out, learn_masks(out, protection.prune_rows, protection.prune_cols, batches, loss, epochs, lr, seed)
    masks = prune_masks(out, protection.prune_rows, protection.prune_cols)
    if prunes:
        apply_masks(out, masks)
    if epochs and batches is not None and loss is not None:
        # projected gradient descent: pruned lines stay empty
        _train(out, batches, loss, epochs, lr, seed, after_step=(lambda: apply_masks(out, masks)) if prunes else None)
    return out, masks


@dataclass
class ModelPlan:
    """A model's layers laid out on crossbars under one protection (no faults yet)."""

    model: nn.Module
    layers: list[LayerPlan]
    cfg: CrossbarConfig
    protection: Protection
    budget_crossbars: int
    """Crossbars of the unpruned, unprotected mapping (the zero-space budget)."""

    def crossbars(self) -> int:
        """Crossbars used without faults deciding anything (duplicate slots all count as used when ``dup``)."""
        total = 0
        for p in self.layers:
            copies = np.full(p.capacity, -1, dtype=np.int64)
            copies[: len(p.cols_kept)] = np.arange(len(p.cols_kept))
            if p.dup:
                copies[:] = np.where(copies >= 0, copies, 0)
            total += p.crossbars(copies)
        return total

    def area(self) -> float:
        """Crossbar equivalents: crossbars used times the spare-line area factor."""
        return self.crossbars() * self.protection.area_factor(self.cfg)

    def quantized_model(self) -> nn.Module:
        """The model with fault-free quantized weights (what the crossbars hold when nothing is stuck)."""
        out = copy.deepcopy(self.model)
        mods = dict(out.named_modules())
        with torch.no_grad():
            for p in self.layers:
                m = mods[p.name]
                m.weight.copy_(torch.as_tensor(p.quantized_weight, dtype=m.weight.dtype).view_as(m.weight))
        return out


def plan_model(
    model: nn.Module, cfg: CrossbarConfig, protection: Protection, masks: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
) -> ModelPlan:
    """Quantize and lay out every mapped layer of ``model`` (already pruned when ``masks`` is given)."""
    plans = []
    for name, m in mapped_layers(model):
        w = _matrix(m)
        keep_r, keep_c = masks[name] if masks else (None, None)
        conv = None
        if isinstance(m, nn.Conv2d):
            conv = {
                k: tuple(getattr(m, a))
                for k, a in (("kernel", "kernel_size"), ("stride", "stride"), ("padding", "padding"), ("dilation", "dilation"))
            }
        bias = None if m.bias is None else m.bias.detach().double().numpy()
        try:
            plans.append(plan_layer(name, w, bias, cfg, keep_r, keep_c, protection.msb, protection.dup, conv))
        except ValueError as exc:
            raise UserInputError(f"layer {name}: {exc}") from None
    return ModelPlan(model, plans, cfg, protection, crossbars_needed(model, cfg))


def layout_area(model: nn.Module, cfg: CrossbarConfig, protection: Protection) -> float:
    """:meth:`ModelPlan.area` of ``protection``'s layout of ``model``, without pruning or fine-tuning it.

    The area depends only on how many rows and columns each layer keeps (:func:`_prune_counts`, the same counts for
    every prune method), on duplication and on spare lines, never on which lines are kept or on the weights: so the
    layout is made with the L2 masks of those counts on the untrained model. A search uses it as its cheap objective
    (learned pruning trains for every design; the area did not need that).
    """
    masks = prune_masks(model, protection.prune_rows, protection.prune_cols)
    return plan_model(model, cfg, protection, masks).area()


def layer_rng(seed: int, index: int) -> np.random.Generator:
    """The generator of fault map ``seed`` for the ``index``-th mapped layer (the same for every scheme)."""
    return np.random.default_rng([int(seed), int(index)])


def faulty_layers(plan: ModelPlan, rate: float, sa0_share: float, seed: int) -> list[FaultyLayer]:
    """Every layer of ``plan`` with fault map ``seed``."""
    check_rate(rate)
    pr = plan.protection
    return [realise(p, layer_rng(seed, i), rate, sa0_share, pr.knowledge, pr.spare_rows, pr.spare_cols) for i, p in enumerate(plan.layers)]


def faulty_model(plan: ModelPlan, rate: float, sa0_share: float, seed: int) -> tuple[nn.Module, list[FaultyLayer]]:
    """A copy of the model whose mapped layers compute through the crossbars of fault map ``seed``."""
    layers = faulty_layers(plan, rate, sa0_share, seed)
    out = copy.deepcopy(plan.model)
    for fl in layers:
        parent_name, _, attr = fl.plan.name.rpartition(".")
        parent = out.get_submodule(parent_name) if parent_name else out
        setattr(parent, attr, CrossbarLayer(fl))
    out.eval()
    return out, layers


@dataclass(frozen=True)
class Summary:
    """Mean and 95 % Student-t interval of values measured over fault maps."""

    mean: float
    low: float
    high: float
    n: int
    std: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        """Summary of ``values`` (one value: a zero-width interval)."""
        v = np.asarray(values, dtype=float)
        n = len(v)
        if n == 0:
            raise ValueError("no values")
        mean = float(v.mean())
        if n == 1:
            return cls(mean, mean, mean, 1, 0.0)
        from scipy import stats

        sd = float(v.std(ddof=1))
        half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
        return cls(mean, mean - half, mean + half, n, sd)


def evaluate_under_faults(
    plan: ModelPlan,
    metric: Callable[[nn.Module], float],
    rate: float,
    sa0_share: float,
    seeds: Sequence[int],
) -> tuple[list[float], list[int]]:
    """``metric`` of the faulty model for each fault map seed, and the crossbars each used."""
    values, bars = [], []
    with torch.no_grad():
        for seed in seeds:
            model, layers = faulty_model(plan, rate, sa0_share, seed)
            values.append(float(metric(model)))
            bars.append(sum(fl.crossbars for fl in layers))
    return values, bars


def with_knowledge(p: Protection, knowledge: Knowledge) -> Protection:
    """``p`` with another fault-map knowledge."""
    return replace(p, knowledge=knowledge)


def prepare(zm: Any, cfg: CrossbarConfig, protection: Protection, budget: int | None = None, seed: int = 0) -> ModelPlan:
    """Prune (and fine-tune) a :class:`sim.zoo.ZooModel`'s model as ``protection`` says and lay it out on crossbars.

    Fine-tuning reads the zoo model's train split (batches shuffled with ``seed`` + epoch).

    Raises:
        UserInputError: the model needs more crossbars than ``budget`` (the message says how many more).
    """
    check_budget(zm.model, cfg, budget)

    def batches(epoch: int) -> Any:
        return zm.loader("train", shuffle=True, seed=seed + epoch)

    model, masks = pruned_model(zm.model, protection, batches, zm.loss, seed=seed)
    return plan_model(model, cfg, protection, masks)
