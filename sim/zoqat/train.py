"""Quantization-aware training of a :func:`sim.zoqat.fakequant.quantize`'d model: zeroth-order and first-order.

Methods (the same trainable parameters, batches and seeds for all):

* ``spsa``: two-point SPSA / MeZO (Malladi et al., NeurIPS 2023). Per step one ``z ~ N(0, I)`` is drawn from a
  step seed; the trainable tensors are moved in place by ``+eps z``, the batch loss is taken, by ``-2 eps z``, the
  loss again, and by ``+eps z`` back; ``g = (L+ - L-) / (2 eps)`` (the projected gradient, a scalar) and the update
  ``theta -= lr * g * z`` regenerates ``z`` from the same seed. Only the seed is stored: no ``z`` kept, no backprop,
  no optimizer state. As in MeZO the in-place moves restore the parameters up to float32 rounding (a few ulp), and
  the regenerated ``z`` is bit-identical. QZO (Shang et al. 2025) applies this to quantization scales.
* ``pgap``: P-GAP, projected gradient-aligned perturbations (Mi et al. 2025, arXiv 2510.18228). Every ``refresh``
  steps, ``probes`` two-point estimates with full-space Gaussian perturbations (no update; each takes one step of the
  budget, so every ZO method makes the same number of forward passes) give, per trained weight *matrix*, the
  estimate ``G = mean g_i Z_i``; its truncated SVD ``U_r S_r V_r^T`` is the matrix's low-dimensional gradient space
  and ``S = diag(S_r)`` its projected gradient. The other steps perturb each matrix by ``Z = c U_r C V_r^T`` with
  ``C`` an ``r x r`` Gaussian aligned with ``S``: ``C = C0 - (<S, C0> - xi sqrt(delta) |S|) / |S|^2 S`` (``xi = +-1``
  at random), so its component along the projected gradient has the fixed size ``sqrt(delta)``;
  ``c = sqrt(m n) / r`` gives ``Z`` the squared norm a Gaussian ``m x n`` perturbation has, so ``eps`` means the
  same size of move as for SPSA (a choice of ours: the paper does not fix it, and through fake quantization a
  smaller move flips almost no rounding). Vectors (biases, quantization scales: not matrices) keep Gaussian
  perturbations, as in the paper. One ``g`` per step for all tensors; seeds only, as in MeZO. State per matrix:
  ``U_r``, ``V_r``, ``S`` (``(m + n + 1) r`` floats); while probing, one estimate per matrix (a weight-sized buffer).
  With only the scales trained (the light variant) nothing is a matrix and ``pgap`` is SPSA with fewer updates.
* ``ste``: first-order QAT: backprop through the fake quantizers with the straight-through estimator, Adam.
* ``rtn``: round-to-nearest post-training quantization: the RTN scales, no training.

* ``gptq``: GPTQ post-training quantization (:mod:`sim.zoqat.gptq`), applied by the caller before; no training.

Trainable parameters: the quantization scales (``w_log_s``, ``a_log_s``) by default (ZeroQAT's light variant: the
weights frozen), or also the Linear weights (``train_weights``: full ZeroQAT, weights and the weight and activation
quantizers trained forward-only). Scales alone are the cheap default because the variance of a two-point estimate
grows with the number of perturbed values d (a few thousand scales vs millions of weights). The same set is
trained by STE so the comparison is fair.
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
from coevo.sim.zoqat.config import ZOQAT
from coevo.sim.zoqat.fakequant import quant_layers

Method = Literal["spsa", "pgap", "ste", "rtn", "gptq"]
METHODS: tuple[str, ...] = ("spsa", "pgap", "ste", "rtn", "gptq")
UNTRAINED: frozenset[str] = frozenset({"rtn", "gptq"})
"""Post-training baselines: no training step."""
LossFn = Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]


def default_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy: logits ``[B, C]`` vs labels ``[B]`` (classify) or ``[B, T, V]`` vs ``[B, T]`` (LM)."""
    out = model(x)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def trainable(model: nn.Module, train_weights: bool = False) -> list[torch.Tensor]:
    """The parameters QAT trains (and only those require grad afterwards): scales, smoothing factors where the model
    has them (:func:`sim.zoqat.fakequant.smooth`), optionally Linear weights."""
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
        if m.log_smooth is not None:  # smoothing factors: quantizer parameters, trained with the scales
            chosen.append(m.log_smooth)
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


@dataclass(frozen=True)
class Subspace:
    """One weight matrix's low-dimensional gradient space (P-GAP): ``U`` [m, r], ``V`` [n, r], projected gradient ``S`` [r, r]."""

    u: torch.Tensor
    v: torch.Tensor
    s: torch.Tensor

    @classmethod
    def from_estimate(cls, g: torch.Tensor, rank: int) -> Subspace:
        """The rank-``rank`` truncated SVD of a gradient estimate ``g`` [m, n]."""
        u, sv, vh = torch.linalg.svd(g, full_matrices=False)
        return cls(u[:, :rank].contiguous(), vh[:rank].T.contiguous(), torch.diag(sv[:rank]))


class Perturbation:
    """The direction ``z`` of one ZO step, regenerated from its seed whenever it is needed (never stored).

    Without ``subspaces`` every tensor gets ``N(0, I)``; a tensor whose index is in ``subspaces`` gets P-GAP's
    aligned low-rank perturbation instead (module docstring), with projection magnitude ``delta``.
    """

    def __init__(self, params: list[torch.Tensor], subspaces: dict[int, Subspace] | None = None, delta: float = 1.0) -> None:
        self.params = params
        self.subspaces = subspaces or {}
        self.delta = delta
        self.d = sum(p.numel() for p in params)

    def _aligned(self, p: torch.Tensor, sub: Subspace, g: torch.Generator) -> torch.Tensor:
        r = sub.s.shape[0]
        c = torch.randn((r, r), generator=g)
        xi = 1.0 if torch.rand((), generator=g) < 0.5 else -1.0
        norm = float(sub.s.norm())
        if norm > 0:
            c = c - (float((sub.s * c).sum()) - xi * math.sqrt(self.delta) * norm) / norm**2 * sub.s
        # the squared norm of a Gaussian m x n draw, so eps means the same move as for SPSA
        return (sub.u @ c @ sub.v.T) * (math.sqrt(p.numel()) / r)

    def directions(self, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """``(param, z_param)`` for every trainable tensor, regenerated from ``seed`` in a fixed order."""
        g = torch.Generator().manual_seed(seed)
        for i, p in enumerate(self.params):
            sub = self.subspaces.get(i)
            yield p, (torch.randn(p.shape, generator=g) if sub is None else self._aligned(p, sub, g))

    @torch.no_grad()
    def move(self, seed: int, scale: float) -> None:
        """``theta += scale * z(seed)`` in place."""
        for p, z in self.directions(seed):
            p.add_(z, alpha=scale)

    def flat(self, seed: int) -> torch.Tensor:
        """``z(seed)`` as one flat vector."""
        return torch.cat([z.reshape(-1) for _, z in self.directions(seed)])


def matrices(params: list[torch.Tensor], rank: int) -> list[int]:
    """Indices of the tensors P-GAP gives a subspace: matrices with both sides longer than ``rank``."""
    return [i for i, p in enumerate(params) if p.dim() == 2 and min(p.shape) > rank]


def estimate_subspaces(params: list[torch.Tensor], probes: list[tuple[int, float]], rank: int) -> dict[int, Subspace]:
    """P-GAP's gradient spaces from full-space probes ``(seed, g)``: per matrix, the SVD of ``mean g z``."""
    wanted = set(matrices(params, rank))
    if not wanted or not probes:
        return {}
    sums = {i: torch.zeros(params[i].shape) for i in wanted}
    plain = Perturbation(params)
    for seed, g in probes:
        for i, (_, z) in enumerate(plain.directions(seed)):
            if i in sums:
                sums[i].add_(z, alpha=g / len(probes))
    return {i: Subspace.from_estimate(est, rank) for i, est in sums.items()}


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


def check_pgap(rank: int, probes: int, refresh: int, delta: float = 1.0) -> None:
    """Raise :class:`UserInputError` (one line naming the value and its bound) on P-GAP settings out of their domain.

    ``probes >= rank``: the estimate is a mean of ``probes`` rank-one matrices, so its rank is at most ``probes``
    and singular directions past that are arbitrary (zero singular values), not an estimated gradient space.
    """
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise UserInputError(f"pgap rank must be an integer >= 1, got {rank!r}")
    if isinstance(probes, bool) or not isinstance(probes, int) or probes < rank:
        raise UserInputError(f"pgap probes must be an integer >= rank ({rank}), got {probes!r}")
    if isinstance(refresh, bool) or not isinstance(refresh, int) or refresh <= probes:
        raise UserInputError(f"pgap refresh must be an integer > probes ({probes}), got {refresh!r}")
    if not (delta > 0 and math.isfinite(delta)):
        raise UserInputError(f"pgap delta must be a positive number, got {delta!r}")


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
    rank: int = ZOQAT.rank,
    refresh: int = ZOQAT.refresh,
    probes: int = ZOQAT.probes,
    delta: float = 1.0,
) -> TrainLog:
    """Train a quantized model in place (it is the caller's copy from :func:`sim.zoqat.fakequant.quantize`).

    Args:
        model: a model whose Linear layers are :class:`sim.zoqat.fakequant.QuantLinear`.
        loader: yields ``(x, y)`` batches; re-iterated when exhausted.
        method: ``spsa``, ``pgap``, ``ste``, or ``rtn`` / ``gptq`` (no training).
        steps: training steps, one batch each (for ZO two forward passes each, P-GAP's probes included).
        lr: learning rate (SGD-style for ZO, Adam for STE).
        eps: ZO perturbation size (in log-scale units for the scales: 1e-3 is a 0.1 % change).
        seed: seed of the perturbations (ZO) and of nothing else (batches come from ``loader``).
        train_weights: also train the Linear weights (full ZeroQAT), not only the scales (the light variant).
        loss_fn: ``loss_fn(model, x, y)`` -> scalar tensor.
        clip: clip the ZO projected gradient to ``[-clip, clip]`` (QZO's stabiliser); None: no clipping.
        rank, refresh, probes, delta: ``pgap`` only: subspace rank per matrix, steps per window (the subspaces are
            re-estimated at the start of each), probe steps per window, projection magnitude.
    """
    if method not in METHODS:
        raise UserInputError(f"unknown method {method!r}; valid methods: {', '.join(METHODS)}")
    if steps < 0:
        raise UserInputError(f"steps must be >= 0, got {steps}")
    if method not in UNTRAINED and not (lr > 0 and math.isfinite(lr)):
        raise UserInputError(f"lr must be a positive number, got {lr}")
    if not (eps > 0 and math.isfinite(eps)):
        raise UserInputError(f"eps must be a positive number, got {eps}")
    if method == "pgap":
        check_pgap(rank, probes, refresh, delta)
    params = trainable(model, train_weights)
    log = TrainLog(method=method, steps=0, trainable_values=sum(p.numel() for p in params))
    if method in UNTRAINED or steps == 0:
        return log
    was_training = model.training
    model.eval()  # no dropout: the two ZO evaluations must see the same function
    batches = cycle(loader)
    started = time.perf_counter()
    try:
        if method == "ste":
            _train_ste(model, batches, params, steps, lr, loss_fn, log)
        else:
            window = (refresh, probes, rank, delta) if method == "pgap" else None
            _train_zo(model, batches, params, steps, lr, eps, seed, loss_fn, clip, window, log)
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
    steps: int,
    lr: float,
    eps: float,
    seed: int,
    loss_fn: LossFn,
    clip: float | None,
    window: tuple[int, int, int, float] | None,
    log: TrainLog,
) -> None:
    """SPSA (``window`` None) or P-GAP (``window`` = refresh, probes, rank, delta), ``steps`` two-point evaluations."""
    plain = Perturbation(params)
    pert = plain
    found: list[tuple[int, float]] = []
    for i, s in enumerate(step_seeds(seed, steps)):
        x, y = next(batches)
        probing = window is not None and i % window[0] < window[1]
        if probing:  # P-GAP: a full-space probe of the gradient space, no update
            g, loss = zo_step(model, loss_fn, x, y, plain, s, 0.0, eps, clip)
            found.append((s, g))
        else:
            if window is not None and found:  # the window's probes are in: re-estimate the subspaces
                pert = Perturbation(params, estimate_subspaces(params, found, window[2]), window[3])
                found = []
            g, loss = zo_step(model, loss_fn, x, y, pert, s, lr, eps, clip)
        log.losses.append(loss)
        log.steps += 1


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
