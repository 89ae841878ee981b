"""Mixed-precision bit allocation: class-based importance, HAWQ-style Hessian trace, weight magnitude, uniform.

Every method turns a per-group *priority* into bit widths under one budget (the average
weight bits, weighted by weight count) with the same allocator, so they differ only in
what they think matters:

* ``class-based``: for each class ``c``, the first-order Taylor score of each unit with
  respect to the loss of the class-``c`` training samples, ``|sum_unit w * dL_c/dw|``,
  divided by its layer's mean score (per-layer normalisation). A unit is *important to*
  class ``c`` when its score is above the ``quantile`` of all units' scores for ``c``; its
  **class count** is the number of such classes (the paper's importance score). Priority
  per unit: ``(count + 1) * max|w|^2``: the importance times the unit's quantization error
  scale (its step is ``max|w| / (2^(b-1) - 1)``, so its error power is ``~ max|w|^2 4^-b``),
  so bits go where the rounding error is large *and* hurts many classes. The class count
  alone (the earlier priority) ignored the error scale and gave bits to units whose
  rounding barely changes their weights.
* ``class-count`` (ablation of the error scale; the priority before issue 31): ``count + 1`` alone.
* ``taylor`` (ablation of the class counting): the same Taylor scores averaged over classes
  and scaled to the class count's range, ``1 + C * score / max score``, times ``max|w|^2``.
* ``magnitude``: per unit, ``max|w|^2`` (the scale of its quantization error) alone.
* ``hawq``: per layer (all units of a layer share a width, as in HAWQ), the Hutchinson
  estimate of the Hessian trace divided by the layer's weight count, times the layer's mean
  ``max|w|^2``; widths chosen by exhaustive search over the layers (HAWQ-V3 solves the
  same problem as an integer program) when the space is small, greedily otherwise.
* ``uniform``: one width for every layer; a target between two candidate widths gives the
  upper one to the set of layers that comes closest to the budget without exceeding it.

The allocator minimises ``sum_g priority_g * n_g * 4^-b_g`` (quantization noise power
falls 4x per bit) subject to ``sum_g n_g * b_g <= avg_bits * N``: starting from the lowest
candidate width, it repeatedly gives the next candidate width to the group with the largest
noise reduction per added bit. For per-unit priorities it stops at the first upgrade that
does not fit, which keeps the widths monotone in the priority (of two units with the same
error scale, the one important to more classes never gets fewer bits) and leaves the average below the target by less than one
unit's upgrade.
"""

from __future__ import annotations

import copy
import heapq
import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from coevo.sim.errors import UserInputError
from coevo.sim.quant.config import CANDIDATES, METHODS, QuantConfig
from coevo.sim.quant.fake import (
    Batches,
    FineTune,
    Layer,
    Progress,
    accuracy,
    average_bits,
    check_bits,
    finetune,
    logits_of,
    model_bits,
    quant_layers,
    quantized_copy,
    weight_of,
)

EXHAUSTIVE_MAX = 20_000
"""Largest number of per-layer combinations :func:`allocate_layers` tries exhaustively."""


def check_candidates(candidates: Sequence[int]) -> tuple[int, ...]:
    """Sorted distinct candidate widths, each an integer from 1 to 32."""
    out = tuple(sorted({int(b) for b in candidates}))
    if not out or out[0] < 1 or out[-1] > 32:
        raise UserInputError(f"candidate bit widths must be integers from 1 to 32, got {list(candidates)}")
    return out


def check_target(avg_bits: float, candidates: Sequence[int]) -> None:
    """Raise unless ``avg_bits`` lies between the narrowest and widest candidate widths."""
    if not candidates[0] <= avg_bits <= candidates[-1]:
        raise UserInputError(
            f"avg_bits must lie between the narrowest and widest candidate widths ({candidates[0]} and {candidates[-1]}), got {avg_bits}"
        )


def _modules(model: nn.Module, layers: Sequence[Layer]) -> list[nn.Module]:
    mods = dict(model.named_modules())
    return [mods[layer.name] for layer in layers]


def _weights(model: nn.Module, layers: Sequence[Layer]) -> list[torch.Tensor]:
    return [weight_of(m) for m in _modules(model, layers)]


# ---- importance


def class_scores(model: nn.Module, loader: Batches, *, max_batches: int | None = None) -> dict[str, torch.Tensor]:
    """Per-layer ``[classes, units]`` first-order Taylor scores of each unit for each class's loss, normalised per layer.

    ``score[c, u] = |sum_{w in u} w * dL_c/dw|`` with ``L_c`` the mean cross-entropy of the
    class-``c`` samples of ``loader``, divided by the mean over the layer's units (so layers
    compare). Computed on a copy in eval mode; the caller's model is untouched.
    """
    layers = quant_layers(model)
    twin = copy.deepcopy(model).eval()
    for p in twin.parameters():
        p.requires_grad_(True)
    weights = _weights(twin, layers)
    grads: dict[int, list[torch.Tensor]] = {}
    counts: dict[int, int] = {}
    for i, (x, y) in enumerate(loader):
        if max_batches is not None and i >= max_batches:
            break
        losses = F.cross_entropy(logits_of(twin, x, y), y, reduction="none")
        present = sorted(int(c) for c in torch.unique(y))
        for k, c in enumerate(present):
            mask = y == c
            g = torch.autograd.grad(losses[mask].sum(), weights, retain_graph=k < len(present) - 1)
            acc = grads.setdefault(c, [torch.zeros_like(w) for w in weights])
            for a, gi in zip(acc, g, strict=True):
                a += gi
            counts[c] = counts.get(c, 0) + int(mask.sum())
    if not grads:
        raise UserInputError("the importance loader yielded no samples")
    classes = range(max(grads) + 1)
    out = {}
    with torch.no_grad():
        for j, (layer, w) in enumerate(zip(layers, weights, strict=True)):
            rows = []
            for c in classes:
                if c not in grads:
                    rows.append(torch.zeros(layer.units))
                    continue
                s = (w * grads[c][j] / counts[c]).reshape(layer.units, -1).sum(dim=1).abs()
                rows.append(s / s.mean().clamp(min=1e-12))
            out[layer.name] = torch.stack(rows)
    return out


def class_counts(scores: Mapping[str, torch.Tensor], quantile: float = 0.5) -> dict[str, torch.Tensor]:
    """Per unit, the number of classes it is important to: score above the ``quantile`` of all units' scores for that class."""
    if not 0.0 < quantile < 1.0:
        raise UserInputError(f"importance quantile must lie in (0, 1), got {quantile}")
    names = list(scores)
    every = torch.cat([scores[n] for n in names], dim=1)  # [classes, all units]
    threshold = torch.quantile(every, quantile, dim=1, keepdim=True)
    return {n: (scores[n] > threshold).sum(dim=0) for n in names}


def hessian_traces(model: nn.Module, loader: Batches, *, samples: int = 8, max_batches: int = 4, seed: int = 0) -> dict[str, float]:
    """Hutchinson estimate of each Conv2d/Linear layer's Hessian trace of the cross-entropy (Rademacher probes)."""
    layers = quant_layers(model)
    twin = copy.deepcopy(model).eval()
    for p in twin.parameters():
        p.requires_grad_(True)
    weights = _weights(twin, layers)
    gen = torch.Generator().manual_seed(seed)
    sums = [0.0] * len(layers)
    n = 0
    for i, (x, y) in enumerate(loader):
        if i >= max_batches:
            break
        grads = torch.autograd.grad(F.cross_entropy(logits_of(twin, x, y), y), weights, create_graph=True)
        for k in range(samples):
            vs = [torch.randint(0, 2, w.shape, generator=gen).float() * 2 - 1 for w in weights]
            hv = torch.autograd.grad(grads, weights, grad_outputs=vs, retain_graph=k < samples - 1)
            for j, (v, h) in enumerate(zip(vs, hv, strict=True)):
                sums[j] += float((v * h).sum())
        n += samples
    if n == 0:
        raise UserInputError("the Hessian loader yielded no samples")
    return {layer.name: sums[j] / n for j, layer in enumerate(layers)}


# ---- allocation


def allocate_groups(
    priority: Sequence[float], sizes: Sequence[int], avg_bits: float, candidates: Sequence[int] = CANDIDATES, *, monotone: bool = True
) -> list[int]:
    """Widths per group minimising ``sum p_g n_g 4^-b_g`` under ``sum n_g b_g <= avg_bits * sum n_g`` (greedy; module doc).

    Args:
        priority: per group, >= 0.
        sizes: weights per group.
        monotone: stop at the first upgrade that does not fit (widths monotone in priority);
            otherwise skip it and keep filling the budget with smaller groups.
    """
    cands = check_candidates(candidates)
    check_target(avg_bits, cands)
    budget = avg_bits * sum(sizes) + 1e-9
    level = [0] * len(sizes)
    used = cands[0] * sum(sizes)

    def gain(g: int) -> float:
        b, nb = cands[level[g]], cands[level[g] + 1]
        return float(priority[g]) * (4.0**-b - 4.0**-nb) / (nb - b)

    heap = [(-gain(g), -float(priority[g]), g) for g in range(len(sizes)) if len(cands) > 1]
    heapq.heapify(heap)
    while heap:
        _, _, g = heapq.heappop(heap)
        cost = (cands[level[g] + 1] - cands[level[g]]) * sizes[g]
        if used + cost > budget:
            if monotone:
                break
            continue
        level[g] += 1
        used += cost
        if level[g] + 1 < len(cands):
            heapq.heappush(heap, (-gain(g), -float(priority[g]), g))
    return [cands[i] for i in level]


def allocate_layers(priority: Sequence[float], sizes: Sequence[int], avg_bits: float, candidates: Sequence[int] = CANDIDATES) -> list[int]:
    """One width per layer minimising ``sum p_l n_l 4^-b_l`` under the budget: exhaustive when small, else greedy."""
    cands = check_candidates(candidates)
    check_target(avg_bits, cands)
    if len(cands) ** len(sizes) > EXHAUSTIVE_MAX:
        return allocate_groups(priority, sizes, avg_bits, cands, monotone=False)
    budget = avg_bits * sum(sizes) + 1e-9
    best: tuple[float, float] | None = None
    choice: tuple[int, ...] = tuple(cands[0] for _ in sizes)
    for combo in itertools.product(cands, repeat=len(sizes)):
        used = sum(b * n for b, n in zip(combo, sizes, strict=True))
        if used > budget:
            continue
        noise = sum(p * n * 4.0**-b for p, n, b in zip(priority, sizes, combo, strict=True))
        key = (noise, -used)
        if best is None or key < best:
            best, choice = key, combo
    return list(choice)


def allocate_uniform(sizes: Sequence[int], avg_bits: float, candidates: Sequence[int] = CANDIDATES) -> list[int]:
    """The same width for every layer; between two candidates, the upper one for the set of layers that fills the budget best.

    That set is found exhaustively for up to 16 layers (ties: earlier layers first), greedily
    in network order beyond.
    """
    cands = check_candidates(candidates)
    check_target(avg_bits, cands)
    low = max(b for b in cands if b <= avg_bits + 1e-9)
    if low == avg_bits or low == cands[-1]:
        return [low] * len(sizes)
    high = min(b for b in cands if b > low)
    spare = avg_bits * sum(sizes) + 1e-9 - low * sum(sizes)
    extra = [(high - low) * n for n in sizes]
    if len(sizes) <= 16:
        flags = max(
            (f for f in itertools.product((1, 0), repeat=len(sizes)) if sum(e for e, x in zip(extra, f, strict=True) if x) <= spare),
            key=lambda f: (sum(e for e, x in zip(extra, f, strict=True) if x), f),
        )
    else:
        used, chosen = 0.0, []
        for e in extra:
            chosen.append(int(used + e <= spare))
            used += e * chosen[-1]
        flags = tuple(chosen)
    return [high if x else low for x in flags]


@dataclass
class Allocation:
    """Bit widths per unit and what chose them."""

    method: str
    target_bits: float
    bits: dict[str, list[int]]
    avg_bits: float
    detail: dict[str, Any] = field(default_factory=dict)


def allocate(
    model: nn.Module,
    train: Batches,
    *,
    avg_bits: float,
    method: str,
    candidates: Sequence[int] = CANDIDATES,
    quantile: float = 0.5,
    importance_batches: int | None = None,
    seed: int = 0,
) -> Allocation:
    """Bit widths per unit of ``model`` for ``method`` (module doc) at ``avg_bits`` (scores from ``train``)."""
    if method not in METHODS:
        raise UserInputError(f"unknown quantization method {method!r}; valid methods: {', '.join(METHODS)}")
    layers = quant_layers(model)
    cands = check_candidates(candidates)
    check_target(avg_bits, cands)
    detail: dict[str, Any] = {}
    if method == "uniform":
        per_layer = allocate_uniform([layer.weights for layer in layers], avg_bits, cands)
    elif method == "hawq":
        per_layer = allocate_layers(
            _hawq_priorities(model, train, layers, seed, detail), [layer.weights for layer in layers], avg_bits, cands
        )
    else:
        prio_units = _unit_priorities(model, train, layers, method, quantile, importance_batches, detail)
        k = 0
        detail["priority"] = {}
        for layer in layers:
            detail["priority"][layer.name] = prio_units[k : k + layer.units]
            k += layer.units
        sizes = [layer.weights_per_unit for layer in layers for _ in range(layer.units)]
        flat = allocate_groups(prio_units, sizes, avg_bits, cands, monotone=True)
        bits, k = {}, 0
        for layer in layers:
            bits[layer.name] = flat[k : k + layer.units]
            k += layer.units
        return Allocation(method, float(avg_bits), bits, average_bits(bits, layers), detail)
    bits = {layer.name: [b] * layer.units for layer, b in zip(layers, per_layer, strict=True)}
    return Allocation(method, float(avg_bits), bits, average_bits(bits, layers), detail)


def _hawq_priorities(model: nn.Module, train: Batches, layers: Sequence[Layer], seed: int, detail: dict[str, Any]) -> list[float]:
    """HAWQ's per-layer priority: Hessian trace per weight times the mean squared unit range (traces go into ``detail``)."""
    traces = hessian_traces(model, train, seed=seed)
    mods = _modules(model, layers)
    with torch.no_grad():
        ranges = [
            float(weight_of(m).reshape(layer.units, -1).abs().amax(dim=1).pow(2).mean()) for m, layer in zip(mods, layers, strict=True)
        ]
    detail["hessian_trace"] = traces
    return [max(traces[layer.name], 0.0) / layer.weights * r for layer, r in zip(layers, ranges, strict=True)]


def _unit_priorities(
    model: nn.Module,
    train: Batches,
    layers: Sequence[Layer],
    method: str,
    quantile: float,
    importance_batches: int | None,
    detail: dict[str, Any],
) -> list[float]:
    """Per unit (all layers in order): ``class-based``, ``class-count``, ``taylor`` or ``magnitude`` priority (module doc).

    ``detail`` receives ``error_scale`` (per unit ``max|w|^2``) and, for the class methods, ``class_counts``.
    """
    scale = unit_error_scales(model, layers)
    detail["error_scale"] = {n: [float(v) for v in t] for n, t in scale.items()}
    flat_scale = [float(v) for layer in layers for v in scale[layer.name]]
    if method in ("class-based", "class-count"):
        counts = class_counts(class_scores(model, train, max_batches=importance_batches), quantile)
        detail["class_counts"] = {n: [int(c) for c in v] for n, v in counts.items()}
        importance = [float(c) + 1.0 for layer in layers for c in counts[layer.name]]
        if method == "class-count":  # ablation: the class count alone, no error scale
            return importance
    elif method == "taylor":  # ablation: the same Taylor scores pooled over classes, no class counting
        scores = class_scores(model, train, max_batches=importance_batches)
        pooled = torch.cat([scores[layer.name].mean(dim=0) for layer in layers])
        n_classes = next(iter(scores.values())).shape[0]
        importance = [1.0 + n_classes * float(v) for v in pooled / pooled.max().clamp(min=1e-12)]
    else:  # magnitude: the error scale alone
        importance = [1.0] * len(flat_scale)
    return [i * e for i, e in zip(importance, flat_scale, strict=True)]


def unit_error_scales(model: nn.Module, layers: Sequence[Layer] | None = None) -> dict[str, torch.Tensor]:
    """Per layer, each unit's quantization error scale ``max|w|^2`` (its rounding error power is ``~ max|w|^2 * 4^-b``)."""
    layers = quant_layers(model) if layers is None else layers
    with torch.no_grad():
        return {
            layer.name: weight_of(m).detach().reshape(layer.units, -1).abs().amax(dim=1).pow(2)
            for m, layer in zip(_modules(model, layers), layers, strict=True)
        }


# ---- end to end


@dataclass
class QuantResult:
    """One quantization run: the allocation, accuracies (%, before = float model) and the quantized model."""

    allocation: Allocation
    val_before: float
    val_ptq: float
    val_after: float
    test_before: float | None
    test_after: float | None
    finetune_epochs: list[float]
    best_epoch: int
    model_bits: int
    float_bits: int
    wall_s: float
    model: nn.Module
    test_rtn: float | None = None
    """Test accuracy of round-to-nearest at the same widths (no fine-tuning), to show what fine-tuning recovers."""

    def layer_summary(self, layers: Sequence[Layer]) -> list[dict[str, Any]]:
        """Per layer: units, weights, mean/min/max width and the count of units at each width."""
        rows = []
        for layer in layers:
            b = self.allocation.bits[layer.name]
            hist: dict[str, int] = {}
            for v in b:
                hist[str(v)] = hist.get(str(v), 0) + 1
            rows.append(
                {
                    "layer": layer.name,
                    "units": layer.units,
                    "weights": layer.weights,
                    "mean_bits": sum(b) / len(b),
                    "min_bits": min(b),
                    "max_bits": max(b),
                    "units_at_bits": hist,
                }
            )
        return rows


def quantize(
    model: nn.Module,
    train: Batches,
    val: Batches,
    *,
    avg_bits: float,
    method: str = QuantConfig.method,
    test: Batches | None = None,
    finetune_epochs: int = QuantConfig.finetune_epochs,
    lr: float = 1e-3,
    candidates: Sequence[int] = CANDIDATES,
    quantile: float = 0.5,
    seed: int = QuantConfig.seed,
    progress: Progress | None = None,
) -> QuantResult:
    """Allocate widths with ``method`` at ``avg_bits``, quantize a copy of ``model`` and fine-tune it (straight-through).

    The test split, when given, is evaluated once per model: the float one, round-to-nearest
    at the chosen widths, and the fine-tuned one; nothing is chosen on it.
    """
    start = time.perf_counter()
    say = progress or (lambda what, fraction: None)
    layers = quant_layers(model)
    say(f"{method}: allocating bits", 0.05)
    alloc = allocate(model, train, avg_bits=avg_bits, method=method, candidates=candidates, quantile=quantile, seed=seed)
    val_before = accuracy(model, val)
    say(f"{method}: fine-tuning at {alloc.avg_bits:.3f} average bits", 0.2)
    tuned, record = finetune(
        model, alloc.bits, train, val, epochs=finetune_epochs, lr=lr, seed=seed, progress=lambda w, f: say(w, 0.2 + 0.75 * f)
    )
    del layers
    return _result(model, alloc, val_before, tuned, record, test, start)


# ---- greedy search under an accuracy constraint


@dataclass(frozen=True)
class Group:
    """Units of one layer that share a width in a search: ``many`` = important to the most classes."""

    layer: str
    part: str
    units: tuple[int, ...]
    weights: int

    @property
    def name(self) -> str:
        return f"{self.layer}.{self.part}" if self.part else self.layer


def class_groups(model: nn.Module, counts: Mapping[str, torch.Tensor] | None, parts: int = 2) -> list[Group]:
    """Each layer's units as ``parts`` groups (1: the whole layer; 2: ``many`` = class count >= the layer's median, ``rest``)."""
    if parts not in (1, 2):
        raise UserInputError(f"groups per layer must be 1 or 2, got {parts}")
    out = []
    for layer in quant_layers(model):
        if parts == 1 or counts is None:
            out.append(Group(layer.name, "", tuple(range(layer.units)), layer.weights))
            continue
        c = counts[layer.name].float()
        med = float(torch.median(c))
        many = tuple(int(i) for i in torch.nonzero(c >= med).flatten())
        rest = tuple(i for i in range(layer.units) if i not in set(many))
        out.append(Group(layer.name, "many", many, len(many) * layer.weights_per_unit))
        out.append(Group(layer.name, "rest", rest, len(rest) * layer.weights_per_unit))
    return out


def group_bits(model: nn.Module, groups: Sequence[Group], widths: Sequence[int]) -> dict[str, list[int]]:
    """Per-unit widths from one width per group."""
    bits = {layer.name: [0] * layer.units for layer in quant_layers(model)}
    for g, b in zip(groups, widths, strict=True):
        for u in g.units:
            bits[g.layer][u] = int(b)
    return bits


@dataclass
class GreedyResult:
    """The greedy search's final widths per group, its trace, and the fine-tuned result."""

    groups: list[Group]
    widths: list[int]
    trace: list[dict[str, Any]]
    fp_val: float
    result: QuantResult


def greedy_search(
    model: nn.Module,
    train: Batches,
    val: Batches,
    *,
    max_drop: float = 1.0,
    test: Batches | None = None,
    candidates: Sequence[int] = CANDIDATES,
    parts: int = 2,
    finetune_epochs: int = 3,
    quantile: float = 0.5,
    seed: int = 0,
    progress: Progress | None = None,
) -> GreedyResult:
    """Start every group at the widest candidate; repeatedly lower the group whose lowering costs least validation accuracy.

    Each step tries every group one candidate lower (round-to-nearest, no fine-tuning) and
    keeps the one with the best validation accuracy (ties: the most bits saved, then the
    ``rest`` group); it stops when even the best would fall more than ``max_drop``
    percentage points below the float model on the validation split. The final widths are
    then fine-tuned (which, keeping the best validation epoch, can only raise validation accuracy).
    """
    if max_drop < 0:
        raise UserInputError(f"max accuracy drop must be >= 0 percentage points, got {max_drop}")
    cands = check_candidates(candidates)
    say = progress or (lambda what, fraction: None)
    layers = quant_layers(model)
    counts = class_counts(class_scores(model, train), quantile) if parts == 2 else None
    groups = [g for g in class_groups(model, counts, parts) if g.units]
    fp_val = accuracy(model, val)
    level = [len(cands) - 1] * len(groups)
    trace: list[dict[str, Any]] = []
    total_steps = len(groups) * (len(cands) - 1)
    while True:
        best: tuple[float, int, int, int] | None = None
        for gi, g in enumerate(groups):
            if level[gi] == 0:
                continue
            trial = list(level)
            trial[gi] -= 1
            acc = accuracy(quantized_copy(model, group_bits(model, groups, [cands[i] for i in trial])), val)
            saved = (cands[level[gi]] - cands[level[gi] - 1]) * g.weights
            key = (acc, saved, int(g.part == "rest"), -gi)
            if best is None or key > best:
                best = key
        if best is None or best[0] < fp_val - max_drop:
            break
        gi = -best[3]
        level[gi] -= 1
        widths = [cands[i] for i in level]
        trace.append(
            {
                "group": groups[gi].name,
                "bits": cands[level[gi]],
                "val_accuracy": best[0],
                "avg_bits": average_bits(group_bits(model, groups, widths), layers),
            }
        )
        say(f"greedy: {groups[gi].name} -> {cands[level[gi]]} bits, val {best[0]:.1f} %", 0.8 * len(trace) / total_steps)
    widths = [cands[i] for i in level]
    bits = group_bits(model, groups, widths)
    check_bits(bits, layers)
    start = time.perf_counter()
    tuned, record = finetune(model, bits, train, val, epochs=finetune_epochs, seed=seed)
    alloc = Allocation("greedy", average_bits(bits, layers), bits, average_bits(bits, layers), {"max_drop": max_drop})
    result = _result(model, alloc, fp_val, tuned, record, test, start)
    say("greedy: done", 1.0)
    return GreedyResult(groups, widths, trace, fp_val, result)


def _result(
    model: nn.Module, alloc: Allocation, val_before: float, tuned: nn.Module, record: FineTune, test: Batches | None, start: float
) -> QuantResult:
    """The QuantResult of ``model`` fine-tuned at ``alloc`` into ``tuned`` (test figures when a test loader is given)."""
    return QuantResult(
        alloc,
        val_before,
        record.val_accuracy[0],
        record.val_accuracy[record.best_epoch],
        accuracy(model, test) if test is not None else None,
        accuracy(tuned, test) if test is not None else None,
        record.val_accuracy,
        record.best_epoch,
        model_bits(model, alloc.bits),
        32 * sum(p.numel() for p in model.parameters()),
        time.perf_counter() - start,
        tuned,
        accuracy(quantized_copy(model, alloc.bits), test) if test is not None else None,
    )
