"""Activation-aware pruning of the nn.Linear layers of any torch model, layer by layer on calibration data.

Scores (higher = more important; the lowest are pruned). ``W`` is a layer's weight
``[out, in]``, ``x_n`` its input and ``y_n = W x_n + b`` its dense output on calibration token
``n`` (``N`` tokens, inputs flattened over every leading dimension):

* ``magnitude``: ``|W_ij|`` (no calibration data needed).
* ``wanda``: ``|W_ij| * ||X_j||_2``, the input channel's L2 norm over the tokens (Sun et al. 2023).
* ``var``: ``|W_ij| * sqrt(Var_n(x_nj))``, the input channel's standard deviation over the tokens
  (input-activation variance: a channel that is nearly constant carries a bias, not information).
* ``cos``: the weight's first-order contribution to the angular deviation between the dense
  and the pruned output. Removing ``W_ij`` changes ``y_n`` by ``d = -W_ij x_nj e_i``; for a
  small change, ``1 - cos(y_n, y_n + d) ~= |d_perp|^2 / (2 |y_n|^2)`` where ``d_perp`` is the
  part of ``d`` orthogonal to ``y_n``, i.e. the squared angle is
  ``theta_n^2 ~= W_ij^2 x_nj^2 (1 - yhat_ni^2) / |y_n|^2`` with ``yhat_n = y_n / |y_n|``. The score
  is the root mean square angle over the calibration tokens:
  ``|W_ij| * sqrt(mean_n x_nj^2 (1 - yhat_ni^2) / |y_n|^2)``. Unlike Wanda it weights each token
  by its output norm (tokens whose output is small turn most when a weight goes) and discounts
  weights whose removal mostly rescales the output (the ``1 - yhat^2`` factor).
* ``cos+var``: the geometric mean of the two, ``sqrt(score_cos * score_var)`` (scale-free, so
  neither metric's units dominate).
* ``sparsegpt``: not a score but the SparseGPT baseline (:mod:`sim.prune.sparsegpt`): masks by
  the OBS saliency with the kept weights updated to reconstruct the layer's output.

Pruning is sequential, as in SparseGPT and Wanda: the layers are visited in the order the
model executes them, and each layer's calibration inputs are recomputed through the layers
already pruned (one forward pass per layer, stopped right after the layer's input is seen).
``sequential=False`` takes every layer's input from the dense model in one pass instead.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from coevo.sim.errors import UserInputError
from coevo.sim.prune.config import SCORES, PruneConfig
from coevo.sim.prune.masks import Group, Pattern, check_pattern_sparsity, make_mask, parse_pattern
from coevo.sim.prune.sparsegpt import sparsegpt_layer

_NEEDS_OUTPUT = ("cos", "cos+var")


class _Stop(Exception):
    """Raised by a hook once the layer's input has been seen: the rest of the forward pass is not needed."""


@dataclass
class _Stats:
    """Running sums over the calibration tokens of one layer's input (and, for ``cos``, its output)."""

    n: int = 0
    sum_x: torch.Tensor | None = None
    sum_x2: torch.Tensor | None = None
    cos_col: torch.Tensor | None = None  # sum_n x_nj^2 / |y_n|^2
    cos_mat: torch.Tensor | None = None  # sum_n y_ni^2 x_nj^2 / |y_n|^4
    gram: torch.Tensor | None = None  # X^T X (sparsegpt)

    def add(self, layer: nn.Linear, x: torch.Tensor, score: str) -> None:
        x = x.detach().reshape(-1, layer.in_features).double()
        x2 = x * x
        self.n += x.shape[0]
        self.sum_x = x.sum(0) if self.sum_x is None else self.sum_x + x.sum(0)
        self.sum_x2 = x2.sum(0) if self.sum_x2 is None else self.sum_x2 + x2.sum(0)
        if score == "sparsegpt":
            g = x.T @ x
            self.gram = g if self.gram is None else self.gram + g
        if score in _NEEDS_OUTPUT:
            y = x @ layer.weight.detach().double().T
            if layer.bias is not None:
                y = y + layer.bias.detach().double()
            inv = 1.0 / (y * y).sum(1).clamp_min(1e-12)  # 1 / |y_n|^2
            col = inv @ x2
            mat = (y * y * (inv * inv)[:, None]).T @ x2
            self.cos_col = col if self.cos_col is None else self.cos_col + col
            self.cos_mat = mat if self.cos_mat is None else self.cos_mat + mat


def score_matrix(weight: torch.Tensor, stats: _Stats | None, score: str) -> torch.Tensor:
    """The ``[out, in]`` importance of each weight (module doc) from the layer's calibration statistics."""
    w = weight.detach().abs().double()
    if score == "magnitude":
        return w
    if stats is None or stats.n == 0 or stats.sum_x2 is None or stats.sum_x is None:
        raise UserInputError(f"score {score!r} needs calibration data, and the layer saw none (empty loader?)")
    if score == "wanda":
        return w * stats.sum_x2.sqrt()[None, :]
    mean = stats.sum_x / stats.n
    std = (stats.sum_x2 / stats.n - mean * mean).clamp_min(0).sqrt()
    if score == "var":
        return w * std[None, :]
    assert stats.cos_col is not None and stats.cos_mat is not None
    angle = ((stats.cos_col[None, :] - stats.cos_mat) / stats.n).clamp_min(0).sqrt()
    if score == "cos":
        return w * angle
    return w * (angle * std[None, :]).sqrt()  # cos+var: sqrt(|W| angle * |W| std)


@dataclass
class PruneResult:
    """What :func:`prune` did.

    Attributes:
        model: the pruned model (the caller's own object only with ``inplace=True``).
        masks: layer name -> bool mask, True where a weight is kept.
        layer_sparsity: layer name -> share of its weights pruned (measured from the mask).
        sparsity: share of the pruned layers' weights pruned, all together (measured).
        calib_tokens: calibration tokens actually used (0 for ``magnitude``).
        wall_s: wall time of the pruning (statistics, scores, masks), seconds.
    """

    model: nn.Module
    masks: dict[str, torch.Tensor]
    layer_sparsity: dict[str, float]
    sparsity: float
    calib_tokens: int
    wall_s: float
    score: str
    pattern: str
    order: list[str] = field(default_factory=list)


def prunable_layers(model: nn.Module) -> list[str]:
    """Names of the nn.Linear layers pruned by default: those inside an ``nn.ModuleList`` (the usual container of
    transformer blocks), or, in a model without one, every nn.Linear but the last (the output head).

    Raises:
        UserInputError: the model has no nn.Linear layer.
    """
    linears = [name for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise UserInputError(f"{type(model).__name__} has no nn.Linear layers to prune (this pruner handles nn.Linear only)")
    lists = [name for name, m in model.named_modules() if isinstance(m, nn.ModuleList) and name]
    inside = [n for n in linears if any(n.startswith(prefix + ".") for prefix in lists)]
    if inside:
        return inside
    if len(linears) == 1:
        return linears
    return linears[:-1]


def calibration_inputs(batches: Iterable[Any], tokens: int) -> tuple[list[torch.Tensor], int]:
    """The first ``tokens`` calibration tokens of ``batches`` (each ``x`` or ``(x, y, ...)``), as a list of inputs.

    Integer inputs ``[B, T]`` (token ids) count ``B * T`` tokens; the last sequence is cut to the
    tokens still needed. Other inputs count one token per sample (the first dimension).

    Raises:
        UserInputError: ``tokens`` < 1, or the loader gave nothing.
    """
    if tokens < 1:
        raise UserInputError(f"calibration tokens {tokens!r} must be at least 1")
    chunks: list[torch.Tensor] = []
    have = 0
    for batch in batches:
        x = batch[0] if isinstance(batch, (tuple, list)) else batch
        if not isinstance(x, torch.Tensor):
            raise UserInputError(f"calibration batches must be tensors or (x, y) tuples of tensors; got {type(x).__name__}")
        sequence = not torch.is_floating_point(x) and x.dim() == 2
        per_row = x.shape[1] if sequence else 1
        rows = min(x.shape[0], -(-(tokens - have) // per_row))
        x = x[:rows]
        if sequence and have + rows * per_row > tokens:
            full = (tokens - have) // per_row
            if full:
                chunks.append(x[:full])
            chunks.append(x[full : full + 1, : tokens - have - full * per_row])
            have = tokens
        else:
            chunks.append(x)
            have += rows * per_row
        if have >= tokens:
            break
    if not chunks:
        raise UserInputError("the calibration loader gave no batches")
    return chunks, have


_DEFAULTS = PruneConfig()
"""The family's defaults (its tool and problem use the same): a direct call prunes as they do."""


def prune(
    model: nn.Module,
    batches: Iterable[Any] | None,
    sparsity: float | Mapping[str, float] | None = _DEFAULTS.sparsity,
    *,
    pattern: str = _DEFAULTS.pattern,
    score: str = _DEFAULTS.score,
    calib_tokens: int = _DEFAULTS.calib_tokens,
    layers: Sequence[str] | None = None,
    group: Group = "row",
    sequential: bool = True,
    inplace: bool = False,
    progress: Callable[[str, float], None] | None = None,
) -> PruneResult:
    """Prune ``model``'s nn.Linear layers with ``score`` (module doc) to ``sparsity`` in ``pattern``.

    Args:
        model: any module; its prunable layers are nn.Linear (see :func:`prunable_layers`).
        batches: calibration data (a DataLoader or any iterable of ``x`` or ``(x, y)``); None only for ``magnitude``.
        sparsity: share of each layer's weights to prune, in (0, 1), or layer name -> share in [0, 1)
            (0 leaves a layer dense). With an N:M pattern: None or exactly 1 - N/M.
        pattern: ``unstructured`` or ``N:M`` (at most N nonzeros in every M consecutive input weights).
        score: ``magnitude``, ``wanda``, ``var``, ``cos``, ``cos+var`` or ``sparsegpt`` (masks and reconstruction).
        calib_tokens: calibration tokens to use (short calibration is the point of the activation metrics).
        layers: names of the nn.Linear layers to prune (default: :func:`prunable_layers`).
        group: unstructured comparison group, each output ``row`` (as Wanda) or the whole ``layer`` (sparsegpt: always ``row``).
        sequential: recompute each layer's inputs through the layers already pruned (default), or
            take them all from the dense model.
        inplace: prune ``model`` itself; otherwise a deep copy is pruned and ``model`` is untouched.
        progress: called with (what, fraction done).

    Raises:
        UserInputError: a model without nn.Linear layers, sparsity outside (0, 1), an unknown
            score or pattern, an N:M pattern that does not divide a layer, no calibration data.
    """
    if score not in SCORES:
        raise UserInputError(f"unknown score {score!r}; valid scores: {', '.join(SCORES)}")
    pat: Pattern = parse_pattern(pattern)
    targets = _layer_targets(model, layers, sparsity, pat)
    needs_data = score != "magnitude"
    if needs_data and batches is None:
        raise UserInputError(f"score {score!r} needs calibration batches")

    started = time.perf_counter()
    work = model if inplace else copy.deepcopy(model)
    was_training = work.training
    work.eval()
    mods = dict(work.named_modules())
    inputs, used = calibration_inputs(batches, calib_tokens) if needs_data and batches is not None else ([], 0)
    order = _execution_order(work, list(targets), inputs) if inputs else list(targets)
    masks: dict[str, torch.Tensor] = {}
    stats: dict[str, _Stats] = {}
    try:
        with torch.no_grad():
            if needs_data and not sequential:
                stats = _collect(work, mods, order, inputs, score, stop_at=None)
            for i, name in enumerate(order):
                layer = mods[name]
                assert isinstance(layer, nn.Linear)
                if needs_data and sequential:
                    stats = _collect(work, mods, [name], inputs, score, stop_at=name)
                masks[name] = _prune_layer(layer, name, stats.get(name), score, targets[name], pat, group)
                if progress:
                    progress(f"pruned {name}", (i + 1) / len(order))
    finally:
        work.train(was_training)
    wall = time.perf_counter() - started
    layer_sparsity = {n: 1 - m.float().mean().item() for n, m in masks.items()}
    total = sum(m.numel() for m in masks.values())
    kept = sum(int(m.sum()) for m in masks.values())
    return PruneResult(
        model=work,
        masks=masks,
        layer_sparsity=layer_sparsity,
        sparsity=1 - kept / total if total else 0.0,
        calib_tokens=used,
        wall_s=wall,
        score=score,
        pattern=str(pat),
        order=order,
    )


def _layer_targets(
    model: nn.Module, layers: Sequence[str] | None, sparsity: float | Mapping[str, float] | None, pat: Pattern
) -> dict[str, float]:
    """The layers :func:`prune` prunes, each with its sparsity (checked: nn.Linear, some, and ``pat`` divides them)."""
    names = list(layers) if layers is not None else prunable_layers(model)
    modules = dict(model.named_modules())
    bad = [n for n in names if not isinstance(modules.get(n), nn.Linear)]
    if bad:
        raise UserInputError(f"not nn.Linear layers of {type(model).__name__}: {', '.join(bad)}")
    if not names:
        raise UserInputError(f"{type(model).__name__}: no layers to prune")
    targets = _targets(names, sparsity, pat)
    for name in targets:
        width = modules[name].weight.shape[1]
        if pat.m is not None and width % pat.m:
            raise UserInputError(f"layer {name}: N:M pattern {pat} does not divide the layer's input dimension {width}")
    return targets


def _prune_layer(layer: nn.Linear, name: str, stats: _Stats | None, score: str, target: float, pat: Pattern, group: Group) -> torch.Tensor:
    """Prune ``layer`` in place to ``target`` (sparsegpt: masks and reconstructs the weights); its mask."""
    if score == "sparsegpt":
        gram = stats.gram if stats is not None else None
        if gram is None:
            raise UserInputError(f"layer {name} saw no calibration data (empty loader?)")
        mask, new = sparsegpt_layer(layer.weight, gram, target, pat)
        layer.weight.copy_(new)
        return mask
    s = score_matrix(layer.weight, stats, score)
    mask = make_mask(s, target, pat, group, where=f"layer {name}")
    layer.weight.mul_(mask.to(layer.weight.dtype))
    return mask


def _targets(names: list[str], sparsity: float | Mapping[str, float] | None, pat: Pattern) -> dict[str, float]:
    """Layer -> sparsity to reach (layers at 0 are left out)."""
    if pat.structured:
        if isinstance(sparsity, Mapping):
            raise UserInputError(f"an N:M pattern ({pat}) fixes every layer's sparsity; give one sparsity or None, not one per layer")
        check_pattern_sparsity(pat, sparsity)
        implied = pat.sparsity
        assert implied is not None
        return dict.fromkeys(names, implied)
    if sparsity is None:
        raise UserInputError("unstructured pruning needs a sparsity in (0, 1)")
    if isinstance(sparsity, Mapping):
        unknown = [n for n in sparsity if n not in names]
        if unknown:
            raise UserInputError(f"sparsity given for layers that are not pruned: {', '.join(unknown)}; prunable: {', '.join(names)}")
        bad = {n: s for n, s in sparsity.items() if not 0 <= s < 1}
        if bad:
            raise UserInputError(f"per-layer sparsity must be in [0, 1): {bad}")
        return {n: float(sparsity[n]) for n in names if sparsity.get(n, 0) > 0}
    if not 0 < sparsity < 1:
        raise UserInputError(f"sparsity {sparsity!r} must be in (0, 1)")
    return dict.fromkeys(names, float(sparsity))


def _execution_order(model: nn.Module, names: list[str], inputs: list[torch.Tensor]) -> list[str]:
    """``names`` in the order ``model`` first calls them on the first calibration input (never-called layers last)."""
    seen: list[str] = []
    mods = dict(model.named_modules())
    handles = [mods[n].register_forward_pre_hook(lambda _m, _a, n=n: seen.append(n) if n not in seen else None) for n in names]
    try:
        with torch.no_grad():
            model(inputs[0])
    finally:
        for h in handles:
            h.remove()
    return seen + [n for n in names if n not in seen]


def _collect(
    model: nn.Module, mods: dict[str, nn.Module], names: list[str], inputs: list[torch.Tensor], score: str, stop_at: str | None
) -> dict[str, _Stats]:
    """Calibration statistics of ``names``' inputs; the forward pass stops after ``stop_at``'s input is seen."""
    stats = {n: _Stats() for n in names}

    def hook(name: str) -> Callable[..., None]:
        def seen(module: nn.Module, args: tuple[Any, ...]) -> None:
            assert isinstance(module, nn.Linear)
            stats[name].add(module, args[0], score)
            if name == stop_at:
                raise _Stop

        return seen

    handles = [mods[n].register_forward_pre_hook(hook(n)) for n in names]
    try:
        for x in inputs:
            with contextlib.suppress(_Stop):
                model(x)
    finally:
        for h in handles:
            h.remove()
    return stats
