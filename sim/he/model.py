"""A small GCN whose ReLUs are partly kept, partly replaced by trainable polynomials (LinGCN-style), and its training.

Architecture (every model here, teacher, student and baseline alike): ``L`` graph
convolutions ``z = A_hat (h W) + b`` then a per-node activation, global mean pooling over the
nodes and a linear head. Inputs per node: the pixel intensity (private) and its coordinates
(public).

* **Teacher**: ReLU at every node of every layer (plaintext only).
* **Student**: per layer and node a gate ``g`` in [0, 1]; the activation is
  ``g * relu(z) + (1 - g) * p(z)`` with ``p`` a trainable polynomial of degree ``poly_degree``
  per layer and node (power basis, initialised to the least-squares fit of ReLU over the
  teacher's pre-activation range). During the first two thirds of training ``g =
  sigmoid(logit / tau)`` with ``tau`` annealed from 1 to 0.05 and a penalty
  ``mu * (mean(g_l) - keep_l)^2`` per layer pulls the mean gate of layer ``l`` to its target keep
  fraction; then the gates are hardened (the ``round(keep_l * n)`` nodes with the largest
  logits keep their ReLU, :func:`harden`) and the rest of the budget fine-tunes weights and
  polynomials with the mask fixed. The loss is ``(1 - w) * CE + w * T^2 * KL(teacher || student)``
  at temperature ``T`` (distillation from the teacher's logits); the student starts from the
  teacher's weights.
* **Baseline** (CryptoGCN-style): the student with ``keep = 0`` in every layer: every node a
  trainable degree-2 polynomial, the same initialisation, distillation, epochs and seeds.

Trained models are cached on disk under a key hashing the recipe (like :mod:`sim.zoo`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from coevo.sim.errors import UserInputError
from coevo.sim.he.data import GraphData, load_dataset
from coevo.sim.zoo import cache_dir

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class Recipe:
    """Everything that determines a trained model (its hash is the cache key).

    Attributes:
        dataset: dataset name (:data:`sim.he.data.DATASETS`).
        neighbours: 4 or 8 grid neighbours.
        hidden: channels of each graph convolution (its length is the number of layers).
        readout: ``flatten`` (a linear head over every node's channels) or ``mean`` (global mean pooling, then linear).
        keep: per layer, the share of nodes that keep their ReLU (0: all polynomial, 1: all ReLU).
        poly_degree: degree of the trainable polynomials (1 to 4).
        poly_init: ``relu-fit`` (least squares of ReLU over the teacher's range) or ``square`` (``z^2``, CryptoNets).
        distill: weight ``w`` of the distillation term (0: cross-entropy only).
        temperature: distillation temperature ``T``.
        teacher_epochs: epochs of the all-ReLU teacher.
        epochs: epochs of the student (gate search + fine-tuning).
        seed: seed of initialisation and batch order.
    """

    dataset: str = "digits-grid"
    neighbours: int = 4
    hidden: tuple[int, ...] = (8, 8)
    readout: str = "flatten"
    keep: tuple[float, ...] = (0.25, 0.25)
    poly_degree: int = 2
    poly_init: str = "relu-fit"
    distill: float = 0.5
    temperature: float = 4.0
    teacher_epochs: int = 60
    epochs: int = 30
    seed: int = 0
    lr: float = field(default=1e-2)

    def check(self) -> None:
        """Raise :class:`UserInputError` naming the first field out of its domain."""
        if not self.hidden or any(h < 1 for h in self.hidden):
            raise UserInputError(f"hidden needs one positive channel count per layer, got {list(self.hidden)}")
        if len(self.keep) != len(self.hidden):
            raise UserInputError(f"keep needs one fraction per layer ({len(self.hidden)}), got {list(self.keep)}")
        if any(not 0.0 <= k <= 1.0 for k in self.keep):
            raise UserInputError(f"keep fractions must lie in [0, 1], got {list(self.keep)}")
        if self.readout not in ("flatten", "mean"):
            raise UserInputError(f"readout must be 'flatten' or 'mean', got {self.readout!r}")
        if not 1 <= self.poly_degree <= 4:
            raise UserInputError(f"poly_degree must be 1 to 4 (a degree-d polynomial costs ceil(log2 d) levels), got {self.poly_degree}")
        if self.poly_init not in ("relu-fit", "square"):
            raise UserInputError(f"poly_init must be 'relu-fit' or 'square', got {self.poly_init!r}")
        if not 0.0 <= self.distill <= 1.0:
            raise UserInputError(f"distill must lie in [0, 1], got {self.distill}")
        if self.teacher_epochs < 1 or self.epochs < 0:
            raise UserInputError(f"teacher_epochs must be >= 1 and epochs >= 0, got {self.teacher_epochs}, {self.epochs}")

    def teacher(self) -> dict[str, Any]:
        """The part of the recipe the teacher depends on."""
        return {
            k: v for k, v in asdict(self).items() if k in ("dataset", "neighbours", "hidden", "readout", "teacher_epochs", "seed", "lr")
        }

    def key(self) -> str:
        """First 16 hex digits of SHA-256 over the canonical JSON of the recipe."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]


class GatedGCN(nn.Module):
    """The GCN of the module doc; ``mode`` is ``relu`` (teacher) or ``gated`` (student and baseline)."""

    adj: torch.Tensor
    coords: torch.Tensor
    mask: torch.Tensor
    convs: nn.ModuleList

    def __init__(
        self,
        adj: np.ndarray,
        coords: np.ndarray,
        hidden: Sequence[int],
        classes: int,
        poly_degree: int = 2,
        mode: str = "relu",
        readout: str = "flatten",
    ):
        super().__init__()
        self.register_buffer("adj", torch.tensor(adj, dtype=torch.float32))
        self.register_buffer("coords", torch.tensor(coords, dtype=torch.float32))
        n = adj.shape[0]
        dims = [1 + coords.shape[1], *hidden]
        linears = [nn.Linear(a, b) for a, b in itertools.pairwise(dims)]
        for lin in linears:  # positive biases: with few channels, ReLUs that start dead on the whole grid never recover
            nn.init.constant_(lin.bias, 0.1)
        self.convs = nn.ModuleList(linears)
        self.readout = readout
        self.head = nn.Linear(dims[-1] * (n if readout == "flatten" else 1), classes)
        self.mode = mode
        self.coef = nn.Parameter(torch.zeros(len(hidden), n, poly_degree + 1))
        self.gate_logit = nn.Parameter(torch.zeros(len(hidden), n))
        self.register_buffer("mask", torch.full((len(hidden), n), float("nan")))
        self.tau = 1.0

    @property
    def layers(self) -> int:
        """Number of graph convolutions."""
        return len(self.convs)

    def gates(self) -> torch.Tensor:
        """``(layers, n)``: the hardened 0/1 mask once set, else ``sigmoid(logit / tau)``."""
        if not torch.isnan(self.mask).any():
            return self.mask
        return torch.sigmoid(self.gate_logit / self.tau)

    def poly(self, layer: int, z: torch.Tensor) -> torch.Tensor:
        """The layer's per-node polynomial of ``z`` (``(batch, n, channels)``)."""
        coef = self.coef[layer]  # (n, d+1)
        out = coef[:, 0, None].expand_as(z).clone()
        power = torch.ones_like(z)
        for k in range(1, coef.shape[1]):
            power = power * z
            out = out + coef[:, k, None] * power
        return out

    def forward(self, x: torch.Tensor, pre: list[torch.Tensor] | None = None) -> torch.Tensor:
        """Logits of ``x`` (``(batch, n)`` intensities); the pre-activations are appended to ``pre`` if given."""
        h = torch.cat([x[..., None], self.coords.expand(x.shape[0], -1, -1)], dim=-1)
        gates = self.gates() if self.mode == "gated" else None
        for layer, conv in enumerate(self.convs):
            assert isinstance(conv, nn.Linear)
            z = self.adj @ (h @ conv.weight.T) + conv.bias
            if pre is not None:
                pre.append(z.detach())
            if gates is None:
                h = torch.relu(z)
            else:
                g = gates[layer][None, :, None]
                h = g * torch.relu(z) + (1 - g) * self.poly(layer, z)
        return self.head(h.flatten(1) if self.readout == "flatten" else h.mean(dim=1))


def relu_fit(radius: float, degree: int, points: int = 2001) -> np.ndarray:
    """Power-basis coefficients (``c_0..c_degree``) of the least-squares fit of ReLU on [-radius, radius], uniform weight."""
    z = np.linspace(-radius, radius, points)
    return np.polynomial.polynomial.polyfit(z, np.maximum(z, 0.0), degree)


def harden(logits: torch.Tensor, keep: Sequence[float]) -> torch.Tensor:
    """0/1 mask per layer: the ``round(keep_l * n)`` nodes with the largest gate logits are 1 (ties: lower index first)."""
    mask = torch.zeros_like(logits)
    n = logits.shape[1]
    for layer, fraction in enumerate(keep):
        k = round(fraction * n)
        if k:
            order = sorted(range(n), key=lambda i: (-float(logits[layer, i]), i))
            mask[layer, order[:k]] = 1.0
    return mask


@dataclass
class Trained:
    """A trained model with its recipe and the numbers measured while training."""

    recipe: Recipe
    model: GatedGCN
    data: GraphData
    val_accuracy: float
    teacher_val_accuracy: float
    ranges: list[float]
    """Per layer, the largest |pre-activation| over the training split (sets the ReLU-approximation interval)."""

    def accuracy(self, split: str, model: nn.Module | None = None) -> float:
        """Accuracy (%) of the model (or ``model``) on ``split``."""
        return accuracy(model or self.model, self.data, split)


def _tensors(data: GraphData, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor(data.x[split], dtype=torch.float32), torch.tensor(data.y[split])


def accuracy(model: nn.Module, data: GraphData, split: str) -> float:
    """Accuracy (%) of ``model`` on ``split``."""
    x, y = _tensors(data, split)
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean()) * 100.0


def pre_activation_ranges(model: GatedGCN, data: GraphData) -> list[float]:
    """Per layer, max |z| over the training split."""
    pre: list[torch.Tensor] = []
    with torch.no_grad():
        model(_tensors(data, "train")[0], pre)
    return [float(z.abs().max()) for z in pre]


def _epochs(
    model: GatedGCN,
    data: GraphData,
    epochs: int,
    seed: int,
    lr: float,
    loss_fn: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    on_epoch: Callable[[int], None] | None = None,
) -> None:
    x, y = _tensors(data, "train")
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(1, epochs))
    for epoch in range(epochs):
        if on_epoch is not None:
            on_epoch(epoch)
        model.train()
        for idx in torch.randperm(len(y), generator=gen).split(64):
            loss = loss_fn(model(x[idx]), y[idx], idx)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
        sched.step()
    model.eval()


def _teacher(recipe: Recipe, data: GraphData, progress: Progress | None) -> GatedGCN:
    path = (
        cache_dir().parent / "he" / f"teacher-{hashlib.sha256(json.dumps(recipe.teacher(), sort_keys=True).encode()).hexdigest()[:16]}.pt"
    )
    torch.manual_seed(recipe.seed)
    model = GatedGCN(data.adj, data.coords, recipe.hidden, data.classes, recipe.poly_degree, "relu", recipe.readout)
    if path.exists():
        state = torch.load(path, weights_only=True)
        model.load_state_dict({k: v for k, v in state.items() if k != "coef" and k != "gate_logit" and k != "mask"}, strict=False)
        model.eval()
        return model
    if progress:
        progress("training the all-ReLU teacher", 0.0)
    _epochs(model, data, recipe.teacher_epochs, recipe.seed, recipe.lr, lambda out, y, _: F.cross_entropy(out, y))
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), path)
    return model


def train(recipe: Recipe, progress: Progress | None = None, rebuild: bool = False) -> Trained:
    """The student (or baseline, ``keep`` all 0) of ``recipe``: from the disk cache, or trained (seconds) and cached.

    Runs on one torch thread (tiny tensors: threads only add contention on a shared box) and
    gives the caller's thread count back afterwards.

    Raises:
        UserInputError: a recipe field out of its domain.
    """
    recipe.check()
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _train(recipe, progress, rebuild)
    finally:
        torch.set_num_threads(before)


def _train(recipe: Recipe, progress: Progress | None, rebuild: bool) -> Trained:
    data = load_dataset(recipe.dataset, recipe.neighbours, seed=0)
    teacher = _teacher(recipe, data, progress)
    teacher_val = accuracy(teacher, data, "val")
    path = cache_dir().parent / "he" / f"student-{recipe.key()}.pt"
    student = GatedGCN(data.adj, data.coords, recipe.hidden, data.classes, recipe.poly_degree, "gated", recipe.readout)
    if path.exists() and not rebuild:
        blob = torch.load(path, weights_only=False)
        student.load_state_dict(blob["state"])
        student.eval()
        return Trained(recipe, student, data, blob["val_accuracy"], teacher_val, blob["ranges"])
    student.load_state_dict(teacher.state_dict(), strict=False)
    ranges = pre_activation_ranges(teacher, data)
    with torch.no_grad():
        for layer, r in enumerate(ranges):
            init = (
                relu_fit(r, recipe.poly_degree)
                if recipe.poly_init == "relu-fit"
                else np.eye(recipe.poly_degree + 1)[min(2, recipe.poly_degree)]
            )
            student.coef[layer] = torch.tensor(init, dtype=torch.float32)[None, :]
    keep = torch.tensor(recipe.keep, dtype=torch.float32)
    searching = [k for k in recipe.keep if 0.0 < k < 1.0]
    gate_epochs = (2 * recipe.epochs) // 3 if searching else 0
    if not searching:
        student.mask.copy_(harden(student.gate_logit.detach(), recipe.keep))
    x_train = _tensors(data, "train")[0]
    with torch.no_grad():
        soft_targets = torch.log_softmax(teacher(x_train) / recipe.temperature, dim=1)
    w, t = recipe.distill, recipe.temperature

    def loss_fn(out: torch.Tensor, y: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        loss = (1 - w) * F.cross_entropy(out, y)
        if w > 0:
            kl = F.kl_div(torch.log_softmax(out / t, dim=1), soft_targets[idx], log_target=True, reduction="batchmean")
            loss = loss + w * t * t * kl
        if torch.isnan(student.mask).any():
            loss = loss + 10.0 * ((torch.sigmoid(student.gate_logit / student.tau).mean(dim=1) - keep) ** 2).sum()
        return loss

    def on_epoch(epoch: int) -> None:
        if progress:
            progress(f"student epoch {epoch + 1}/{recipe.epochs}", epoch / max(1, recipe.epochs))
        if epoch < gate_epochs:
            student.tau = math.exp(math.log(0.05) * epoch / max(1, gate_epochs - 1))
        elif torch.isnan(student.mask).any():
            student.mask.copy_(harden(student.gate_logit.detach(), recipe.keep))

    _epochs(student, data, recipe.epochs, recipe.seed + 1, recipe.lr / 3, loss_fn, on_epoch)
    if torch.isnan(student.mask).any():  # epochs == 0 or all gate epochs: harden now
        student.mask.copy_(harden(student.gate_logit.detach(), recipe.keep))
    val = accuracy(student, data, "val")
    ranges = pre_activation_ranges(student, data)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state": student.state_dict(), "val_accuracy": val, "ranges": ranges, "recipe": asdict(recipe)}, path)
    return Trained(recipe, student, data, val, teacher_val, ranges)


def teacher_accuracy(recipe: Recipe) -> dict[str, float]:
    """Val and test accuracy (%) of the recipe's all-ReLU teacher (plaintext)."""
    data = load_dataset(recipe.dataset, recipe.neighbours, seed=0)
    teacher = _teacher(recipe, data, None)
    return {"val": accuracy(teacher, data, "val"), "test": accuracy(teacher, data, "test")}


def cache_path(recipe: Recipe) -> Path:
    """Where the student of ``recipe`` is cached."""
    return cache_dir().parent / "he" / f"student-{recipe.key()}.pt"
