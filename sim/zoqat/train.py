"""Quantization-aware training of a :func:`sim.zoqat.fakequant.quantize`'d model: zeroth-order and first-order.

Methods (the same trainable parameters, batches and seeds for all):

* ``spsa``: two-point SPSA / MeZO (Malladi et al., NeurIPS 2023). Per step one ``z ~ N(0, I)`` is drawn from a
  step seed; the trainable tensors are moved in place by ``+eps z``, the batch loss is taken, by ``-2 eps z``, the
  loss again, and by ``+eps z`` back; ``g = (L+ - L-) / (2 eps)`` (the projected gradient, a scalar) and the update
  ``theta -= lr * g * z`` regenerates ``z`` from the same seed. Only the seed is stored: no ``z`` kept, no backprop,
  no optimizer state. As in MeZO the in-place moves restore the parameters up to float32 rounding (a few ulp), and
  the regenerated ``z`` is bit-identical. QZO (Shang et al. 2025) applies this to quantization scales.
* ``projected``: SPSA whose perturbations are drawn mostly inside a low-dimensional gradient subspace, in the
  family of P-GAP (Mi et al. 2025, "projected gradient-aligned perturbations": estimate a low-dimensional gradient
  space, perturb within it) and of guided evolution strategies with past descent directions (Maheswaranathan et
  al., ICML 2019; Meier et al. 2019). What is implemented: the SPSA estimates ``g z`` are summed over blocks of
  ``refresh // rank`` steps; the last ``rank`` block sums, orthonormalised (QR), span the subspace ``U`` (d x rank),
  rebuilt every ``refresh`` steps from zeroth-order information only (no backprop, no extra forward passes). The
  perturbation is ``z = sqrt(alpha) e + sqrt((1 - alpha) d / rank) U xi`` with ``e ~ N(0, I_d)``, ``xi ~ N(0, I_rank)``
  from the step seed, so ``E|z|^2 = d`` as for plain SPSA; ``alpha`` keeps some isotropic exploration. Until the first
  subspace exists the steps are plain SPSA. State: ``U`` and one block sum, ``(rank + 1) d`` floats (d = trainable
  values: ~10k for the scales of lm-pydoc). P-GAP's own subspace is per weight matrix (low-rank ``U S V^T``) and
  estimated with extra probes; the scales here are vectors, so one flat subspace over all of them is used instead.
* ``ste``: first-order QAT: backprop through the fake quantizers with the straight-through estimator, Adam.
* ``rtn``: round-to-nearest post-training quantization: the RTN scales, no training.

Trainable parameters: the quantization scales (``w_log_s``, ``a_log_s``) by default, optionally also the Linear
weights (``train_weights``). Scales are the default because the variance of a two-point estimate grows with the
number of perturbed values d (a few thousand scales vs millions of weights), and because the frozen weights stay
quantized with no float copy to update: the QZO setting. The same set is trained by STE so the comparison is fair.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn
from torch.nn import functional as F

from coevo.sim.errors import UserInputError
from coevo.sim.zoqat.fakequant import quant_layers

Method = Literal["spsa", "projected", "ste", "rtn"]
METHODS: tuple[str, ...] = ("spsa", "projected", "ste", "rtn")
LossFn = Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]


def default_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy: logits ``[B, C]`` vs labels ``[B]`` (classify) or ``[B, T, V]`` vs ``[B, T]`` (LM)."""
    out = model(x)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def trainable(model: nn.Module, train_weights: bool = False) -> list[torch.Tensor]:
    """The parameters QAT trains (and only those require grad afterwards): scales, optionally Linear weights."""
    layers = quant_layers(model)
    if not layers:
        raise UserInputError("the model has no quantized Linear layer: call sim.zoqat.quantize first")
    for p in model.parameters():
        p.requires_grad_(False)
    chosen: list[torch.Tensor] = []
    for m in layers:
        chosen.append(m.w_log_s)
        if m.a_bits is not None:
            chosen.append(m.a_log_s)
        if train_weights:
            chosen.append(m.weight)
    unique = list({id(p): p for p in chosen}.values())  # tied weights once
    for t in unique:
        t.requires_grad_(True)
    return unique


@dataclass
class TrainLog:
    """What one training run did.

    Attributes:
        method: spsa, projected, ste or rtn.
        steps: steps taken.
        losses: the batch loss at each step (for ZO the mean of the two perturbed losses).
        seconds: wall time of the steps (no evaluation inside).
        trainable_values: number of trained scalars (d).
    """

    method: str
    steps: int
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    trainable_values: int = 0

    @property
    def s_per_step(self) -> float:
        return self.seconds / self.steps if self.steps else 0.0


def cycle(loader: Iterable[Any]) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Batches ``(x, y)`` of ``loader`` forever (re-iterating it); an empty loader is an error."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch[0], batch[1]
        if empty:
            raise UserInputError("the training loader yields no batch")


def step_seeds(seed: int, steps: int) -> list[int]:
    """One perturbation seed per step, drawn from ``seed`` (so a run is reproducible and only seeds are kept)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 2**62, (steps,), generator=g).tolist()


class Perturbation:
    """The direction ``z`` of one ZO step, regenerated from its seed whenever it is needed (never stored).

    With a subspace ``basis`` (d x r, orthonormal columns) and ``alpha`` < 1 the direction is the guided mix of
    the module docstring; without one it is ``N(0, I_d)``.
    """

    def __init__(self, params: list[torch.Tensor], basis: torch.Tensor | None = None, alpha: float = 1.0) -> None:
        self.params = params
        self.basis = basis
        self.alpha = alpha
        self.d = sum(p.numel() for p in params)

    def directions(self, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """``(param, z_param)`` for every trainable tensor, regenerated from ``seed`` in a fixed order."""
        g = torch.Generator().manual_seed(seed)
        guided: torch.Tensor | None = None
        if self.basis is not None:
            xi = torch.randn(self.basis.shape[1], generator=g)
            r = self.basis.shape[1]
            guided = (self.basis @ xi) * math.sqrt((1 - self.alpha) * self.d / r)
        offset = 0
        for p in self.params:
            z = torch.randn(p.shape, generator=g)
            if guided is not None:
                z = z * math.sqrt(self.alpha) + guided[offset : offset + p.numel()].view(p.shape)
            offset += p.numel()
            yield p, z

    @torch.no_grad()
    def move(self, seed: int, scale: float) -> None:
        """``theta += scale * z(seed)`` in place."""
        for p, z in self.directions(seed):
            p.add_(z, alpha=scale)

    def flat(self, seed: int) -> torch.Tensor:
        """``z(seed)`` as one flat vector (for the subspace's block sums)."""
        return torch.cat([z.reshape(-1) for _, z in self.directions(seed)])


@torch.no_grad()
def zo_step(
    model: nn.Module,
    loss_fn: LossFn,
    x: torch.Tensor,
    y: torch.Tensor,
    pert: Perturbation,
    seed: int,
    lr: float,
    eps: float,
    clip: float | None = None,
) -> tuple[float, float]:
    """One two-point SPSA step in place; returns ``(projected gradient g, mean of the two losses)``."""
    pert.move(seed, eps)
    plus = float(loss_fn(model, x, y))
    pert.move(seed, -2 * eps)
    minus = float(loss_fn(model, x, y))
    pert.move(seed, eps)
    g = (plus - minus) / (2 * eps)
    if not math.isfinite(g):
        raise FloatingPointError(f"the zeroth-order estimate is not finite (losses {plus}, {minus}): lower eps or lr")
    if clip is not None:
        g = max(-clip, min(clip, g))
    if lr:
        pert.move(seed, -lr * g)
    return g, (plus + minus) / 2


def train(
    model: nn.Module,
    loader: Iterable[Any],
    method: str,
    steps: int,
    *,
    lr: float,
    eps: float = 1e-3,
    seed: int = 0,
    train_weights: bool = False,
    loss_fn: LossFn = default_loss,
    clip: float | None = None,
    rank: int = 4,
    refresh: int = 20,
    alpha: float = 0.25,
) -> TrainLog:
    """Train a quantized model in place (it is the caller's copy from :func:`sim.zoqat.fakequant.quantize`).

    Args:
        model: a model whose Linear layers are :class:`sim.zoqat.fakequant.QuantLinear`.
        loader: yields ``(x, y)`` batches; re-iterated when exhausted.
        method: ``spsa``, ``projected``, ``ste`` or ``rtn`` (no training).
        steps: training steps (one batch each).
        lr: learning rate (SGD-style for ZO, Adam for STE).
        eps: ZO perturbation size (in log-scale units for the scales: 1e-3 is a 0.1 % change).
        seed: seed of the perturbations (ZO) and of nothing else (batches come from ``loader``).
        train_weights: also train the Linear weights, not only the scales.
        loss_fn: ``loss_fn(model, x, y)`` -> scalar tensor.
        clip: clip the ZO projected gradient to ``[-clip, clip]`` (QZO's stabiliser); None: no clipping.
        rank, refresh, alpha: ``projected`` only: subspace dimension, steps between rebuilds, isotropic share.
    """
    if method not in METHODS:
        raise UserInputError(f"unknown method {method!r}; valid methods: {', '.join(METHODS)}")
    if steps < 0:
        raise UserInputError(f"steps must be >= 0, got {steps}")
    if method != "rtn" and not (lr > 0 and math.isfinite(lr)):
        raise UserInputError(f"lr must be a positive number, got {lr}")
    if not (eps > 0 and math.isfinite(eps)):
        raise UserInputError(f"eps must be a positive number, got {eps}")
    if rank < 1 or refresh < rank or not 0 <= alpha <= 1:
        raise UserInputError(f"projected needs rank >= 1, refresh >= rank and alpha in [0, 1], got {rank}, {refresh}, {alpha}")
    params = trainable(model, train_weights)
    log = TrainLog(method=method, steps=0, trainable_values=sum(p.numel() for p in params))
    if method == "rtn" or steps == 0:
        return log
    was_training = model.training
    model.eval()  # no dropout: the two ZO evaluations must see the same function
    batches = cycle(loader)
    started = time.perf_counter()
    try:
        if method == "ste":
            _train_ste(model, batches, params, steps, lr, loss_fn, log)
        else:
            _train_zo(model, batches, params, method, steps, lr, eps, seed, loss_fn, clip, rank, refresh, alpha, log)
    finally:
        log.seconds = time.perf_counter() - started
        model.train(was_training)
        for p in params:
            p.requires_grad_(False)
    return log


def _train_ste(
    model: nn.Module,
    batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
    params: list[torch.Tensor],
    steps: int,
    lr: float,
    loss_fn: LossFn,
    log: TrainLog,
) -> None:
    opt = torch.optim.Adam(params, lr=lr)
    for _ in range(steps):
        x, y = next(batches)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model, x, y)
        loss.backward()
        opt.step()
        log.losses.append(float(loss.detach()))
        log.steps += 1


def _train_zo(
    model: nn.Module,
    batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
    params: list[torch.Tensor],
    method: str,
    steps: int,
    lr: float,
    eps: float,
    seed: int,
    loss_fn: LossFn,
    clip: float | None,
    rank: int,
    refresh: int,
    alpha: float,
    log: TrainLog,
) -> None:
    pert = Perturbation(params)
    block = max(1, refresh // rank)
    history: list[torch.Tensor] = []
    acc: torch.Tensor | None = None
    for i, s in enumerate(step_seeds(seed, steps)):
        x, y = next(batches)
        g, loss = zo_step(model, loss_fn, x, y, pert, s, lr, eps, clip)
        log.losses.append(loss)
        log.steps += 1
        if method != "projected":
            continue
        estimate = pert.flat(s) * g  # this step's gradient estimate, regenerated from its seed
        acc = estimate if acc is None else acc + estimate
        if (i + 1) % block == 0:
            history = [*history[-(rank - 1) :], acc] if rank > 1 else [acc]
            acc = None
        if (i + 1) % refresh == 0 and len(history) == rank:
            basis, _ = torch.linalg.qr(torch.stack(history, dim=1))
            pert = Perturbation(params, basis, alpha)


@torch.no_grad()
def evaluate(model: nn.Module, loader: Iterable[Any], task: str = "lm", max_batches: int | None = None) -> float:
    """Perplexity (``task="lm"``: exp of the mean token cross-entropy) or accuracy in % (``"classify"``)."""
    was = model.training
    model.eval()
    total, count, correct = 0.0, 0, 0
    try:
        for i, (x, y) in enumerate(loader):
            if max_batches is not None and i >= max_batches:
                break
            out = model(x)
            flat, target = out.reshape(-1, out.shape[-1]), y.reshape(-1)
            total += float(F.cross_entropy(flat, target, reduction="sum"))
            correct += int((flat.argmax(-1) == target).sum())
            count += target.numel()
    finally:
        model.train(was)
    if not count:
        raise UserInputError("the evaluation loader yields no batch")
    return math.exp(total / count) if task == "lm" else 100.0 * correct / count
