"""LinGCN (Peng et al., NeurIPS 2023): a GCN whose non-linearities are structurally linearized, and its training.

Architecture (teacher, student and baseline alike): ``B`` blocks, each

    graph conv ``z1 = A_hat (h W) + b`` -> act_1 -> node-wise linear ``z2 = a1 V + c`` (channel mix, no node mixing) -> act_2

(the shape of the paper's ST-GCN block: graph conv, then a per-node temporal conv), then a
linear head over every node's channels (``flatten``) or over their mean (``mean``). Inputs per
node: the pixel intensity (private) and its coordinates (public).

* **Teacher**: ReLU at both positions of every block (plaintext only).
* **Student**: per block ``l``, position ``p`` (act_1, act_2) and node ``i`` a mask value
  ``m[l, p, i]`` in {0, 1}: 1 keeps the non-linearity as a trainable polynomial
  ``a z^2 + b z + c`` (per block, position and node; initialised to the least-squares fit of
  ReLU over the teacher's pre-activation range, or ``z^2``), 0 removes it (the node passes
  ``z`` through: linear). The mask is **structured** as in the authors' code: the indicators
  ``aux[l, :, i]`` are sorted per node (descending), each rank row is summed over the nodes,
  ``S[l, r] = sum_i sorted[l, r, i]``, rank ``r`` is kept when ``S[l, r] > 0``, and every node
  keeps its own top-``k_l`` positions with ``k_l = #{r: S[l, r] > 0}`` the same for every node
  of the block (:func:`structured_mask`). Forward is the hard mask; backward passes
  ``grad * softplus(aux)`` to ``aux`` (straight-through, :class:`StructuredSTE`). Node mixing
  happens only at the graph conv, so every path through block ``l`` meets exactly ``k_l``
  non-linearities: removing one really lowers the multiplicative depth.
  During the first two thirds of the epochs the mask follows ``aux`` and a penalty
  ``mu * relu(mean(m) - budget)`` drives linearization; then :func:`harden` keeps exactly
  ``round(budget * 2B)`` (block, rank) rows (largest ``S``) and the rest of the epochs
  fine-tune weights and polynomials with the mask fixed.
* **Loss** (two-level distillation from the teacher): ``(1 - w) CE + w T^2 KL(teacher || student)``
  on the logits plus ``beta * sum_l MSE(block output_l, teacher block output_l)``. The student
  starts from the teacher's weights.
* **Baseline** (CryptoGCN-style): ``budget = 1``: every non-linearity a trainable polynomial, no
  indicators, the same initialisation, distillation, epochs and seeds.

Trained models are cached on disk under a key hashing the recipe, and a cache file that does not
load or fails its weights' fingerprint is trained again with a note (like :mod:`sim.zoo`). The
files hold tensors and plain values only and are read with ``weights_only``: a cache file is
never unpickled as code.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from coevo.sim.errors import UserInputError
from coevo.sim.he.data import GraphData, load_dataset
from coevo.sim.he.recipe import ARCHITECTURE, Recipe  # noqa: F401  # defined there without torch, re-exported here
from coevo.sim.zoo import cache_dir
from coevo.sim.zoo.cache_files import DamagedCache, atomic_write, note, rebuilt_note
from coevo.sim.zoo.registry import weights_fingerprint

Progress = Callable[[str, float], None]
PENALTY = 10.0
"""Weight ``mu`` of the linearization penalty during the indicator search."""
AUX_INIT = 1.0
"""Initial indicator value: positive, so the search starts from the all-polynomial student."""
AUX_LR = 3e-2
"""Learning rate of the indicators (Adam: about this much movement per step, so the search can cross 0 in its epochs)."""


def structured_mask(aux: torch.Tensor) -> torch.Tensor:
    """The hard structured 0/1 mask of indicators ``aux`` (``(blocks, positions, n)``), the paper's rule.

    Per block: sort each node's indicators descending, ``S[r] = sum_i sorted[r, i]``, ``k = #{r: S[r] > 0}``;
    each node keeps its own ``k`` largest positions (ties: the lower position first).
    """
    sorted_aux = torch.sort(aux, dim=1, descending=True, stable=True)
    k = (sorted_aux.values.sum(dim=2) > 0).sum(dim=1)  # (blocks,)
    ranks = torch.empty_like(sorted_aux.indices)
    positions = torch.arange(aux.shape[1], device=aux.device)[None, :, None].expand_as(ranks)
    ranks.scatter_(1, sorted_aux.indices, positions)  # rank of each position within its node
    return (ranks < k[:, None, None]).to(aux.dtype)


class StructuredSTE(torch.autograd.Function):
    """Straight-through estimator: forward :func:`structured_mask`, backward ``grad * softplus(aux)`` (the authors' choice)."""

    @staticmethod
    def forward(ctx: Any, aux: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(aux)
        return structured_mask(aux)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (aux,) = ctx.saved_tensors
        return grad * F.softplus(aux)


def harden(aux: torch.Tensor, rows: int) -> torch.Tensor:
    """The final 0/1 mask keeping exactly ``rows`` (block, rank) rows: those with the largest ``S[l, r]``.

    Ties go to the lower rank, then the lower block; since ``S[l, 0] >= S[l, 1]`` a block's rank 1 is
    never kept without its rank 0. Each node of block ``l`` keeps its own top-``k_l`` positions by ``aux``.

    Raises:
        UserInputError: ``rows`` outside ``[0, blocks * positions]``.
    """
    blocks, positions, _ = aux.shape
    if not 0 <= rows <= blocks * positions:
        raise UserInputError(f"kept rows must lie in [0, {blocks * positions}], got {rows}")
    sorted_aux = torch.sort(aux, dim=1, descending=True, stable=True)
    score = sorted_aux.values.sum(dim=2)
    order = sorted(itertools.product(range(blocks), range(positions)), key=lambda lr: (-float(score[lr]), lr[1], lr[0]))
    k = torch.zeros(blocks, dtype=torch.long)
    for block, _rank in order[:rows]:
        k[block] += 1
    ranks = torch.empty_like(sorted_aux.indices)
    ranks.scatter_(1, sorted_aux.indices, torch.arange(positions)[None, :, None].expand_as(ranks).contiguous())
    return (ranks < k[:, None, None]).to(aux.dtype)


class LinGCN(nn.Module):
    """The block GCN of the module doc; ``mode`` is ``relu`` (teacher) or ``poly`` (student and baseline)."""

    coords: torch.Tensor
    adj: torch.Tensor
    mask: torch.Tensor

    def __init__(
        self, adj: np.ndarray, coords: np.ndarray, hidden: Sequence[int], classes: int, mode: str = "relu", readout: str = "flatten"
    ):
        super().__init__()
        self.register_buffer("adj", torch.tensor(adj, dtype=torch.float32))
        self.register_buffer("coords", torch.tensor(coords, dtype=torch.float32))
        n = adj.shape[0]
        dims = [1 + coords.shape[1], *hidden]
        self.convs = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(dims))
        self.mixes = nn.ModuleList(nn.Linear(h, h) for h in hidden)
        for lin in [*self.convs, *self.mixes]:
            assert isinstance(lin, nn.Linear)
            # He init: torch's default shrinks the signal ~3x per linear, so 4 of them in a row left the teacher untrainable
            nn.init.kaiming_uniform_(lin.weight, nonlinearity="relu")
            nn.init.constant_(lin.bias, 0.1)  # positive: with few channels, ReLUs that start dead never recover
        self.readout = readout
        self.head = nn.Linear(dims[-1] * (n if readout == "flatten" else 1), classes)
        self.mode = mode
        self.coef = nn.Parameter(torch.zeros(len(hidden), 2, n, 3))
        self.aux = nn.Parameter(torch.full((len(hidden), 2, n), AUX_INIT))
        self.register_buffer("mask", torch.full((len(hidden), 2, n), float("nan")))

    @property
    def blocks(self) -> int:
        """Number of blocks."""
        return len(self.convs)

    def hardened(self) -> bool:
        """True once the mask is fixed (hardened, or set for the baseline)."""
        return not bool(torch.isnan(self.mask).any())

    def gates(self) -> torch.Tensor:
        """``(blocks, 2, n)`` 0/1: the fixed mask once set, else the structured STE of ``aux``."""
        if self.hardened():
            return self.mask
        mask: torch.Tensor = StructuredSTE.apply(self.aux)
        return mask

    def act(self, block: int, position: int, z: torch.Tensor, gate: torch.Tensor | None) -> torch.Tensor:
        """The activation at ``(block, position)`` of ``z`` (``(batch, n, channels)``): ReLU, or mask * poly + (1 - mask) * z."""
        if gate is None:
            return torch.relu(z)
        c = self.coef[block, position]  # (n, 3)
        poly = c[:, 0, None] + c[:, 1, None] * z + c[:, 2, None] * z * z
        g = gate[block, position][None, :, None]
        return g * poly + (1 - g) * z

    def forward(self, x: torch.Tensor, pre: list[torch.Tensor] | None = None, feats: list[torch.Tensor] | None = None) -> torch.Tensor:
        """Logits of ``x`` (``(batch, n)`` intensities).

        Args:
            x: private node features.
            pre: if given, the pre-activations (two per block) are appended (detached).
            feats: if given, every block's output is appended (with its graph, for feature distillation).
        """
        h = torch.cat([x[..., None], self.coords.expand(x.shape[0], -1, -1)], dim=-1)
        gate = self.gates() if self.mode == "poly" else None
        for block, (conv, mix) in enumerate(zip(self.convs, self.mixes, strict=True)):
            assert isinstance(conv, nn.Linear) and isinstance(mix, nn.Linear)
            z = self.adj @ (h @ conv.weight.T) + conv.bias
            if pre is not None:
                pre.append(z.detach())
            z = mix(self.act(block, 0, z, gate))
            if pre is not None:
                pre.append(z.detach())
            h = self.act(block, 1, z, gate)
            if feats is not None:
                feats.append(h)
        return self.head(h.flatten(1) if self.readout == "flatten" else h.mean(dim=1))


def relu_fit(radius: float, degree: int = 2, points: int = 2001) -> np.ndarray:
    """Power-basis coefficients (``c_0..c_degree``) of the least-squares fit of ReLU on [-radius, radius], uniform weight."""
    z = np.linspace(-radius, radius, points)
    return np.polynomial.polynomial.polyfit(z, np.maximum(z, 0.0), degree)


@dataclass
class Trained:
    """A trained model with its recipe and the numbers measured while training."""

    recipe: Recipe
    model: LinGCN
    data: GraphData
    val_accuracy: float
    teacher_val_accuracy: float
    ranges: list[float]
    """Per block and position (``2 * blocks``), the largest |pre-activation| over the training split."""

    def accuracy(self, split: str, model: nn.Module | None = None) -> float:
        """Accuracy (%) of the model (or ``model``) on ``split``."""
        return accuracy(model or self.model, self.data, split)

    def kept_per_block(self) -> list[int]:
        """Per block, the count of non-linear positions every node keeps (``k_l``, the same for every node)."""
        return [int(k) for k in self.model.mask.sum(dim=1)[:, 0].tolist()]


def _tensors(data: GraphData, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor(data.x[split], dtype=torch.float32), torch.tensor(data.y[split])


def accuracy(model: nn.Module, data: GraphData, split: str) -> float:
    """Accuracy (%) of ``model`` on ``split``."""
    x, y = _tensors(data, split)
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean()) * 100.0


def pre_activation_ranges(model: LinGCN, data: GraphData) -> list[float]:
    """Per block and position, max |z| over the training split."""
    pre: list[torch.Tensor] = []
    with torch.no_grad():
        model(_tensors(data, "train")[0], pre)
    return [float(z.abs().max()) for z in pre]


def _epochs(
    model: LinGCN,
    data: GraphData,
    epochs: int,
    seed: int,
    lr: float,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    on_epoch: Callable[[int], None] | None = None,
) -> None:
    """``epochs`` of Adam (cosine schedule) over the training split in batches of 64; ``loss_fn(x_idx, y)``."""
    y = torch.tensor(data.y["train"])
    gen = torch.Generator().manual_seed(seed)
    weights = [p for name, p in model.named_parameters() if name != "aux"]
    opt = torch.optim.Adam([{"params": weights, "lr": lr}, {"params": [model.aux], "lr": AUX_LR}])
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(1, epochs))
    for epoch in range(epochs):
        if on_epoch is not None:
            on_epoch(epoch)
        model.train()
        for idx in torch.randperm(len(y), generator=gen).split(64):
            loss = loss_fn(idx, y[idx])
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(weights, 5.0)
            opt.step()
        sched.step()
    model.eval()


def _teacher(recipe: Recipe, data: GraphData, progress: Progress | None) -> LinGCN:
    digest = hashlib.sha256(json.dumps(recipe.teacher(), sort_keys=True).encode()).hexdigest()[:16]
    path = he_cache() / f"teacher-{digest}.pt"

    def fresh() -> LinGCN:  # seeded: a teacher trained again after a damaged file is the same teacher
        torch.manual_seed(recipe.seed)
        return LinGCN(data.adj, data.coords, recipe.hidden, data.classes, "relu", recipe.readout)

    model = fresh()
    if path.exists():
        try:
            _load_checked(model, path)
        except Exception as exc:  # a cache: the recipe makes it again
            note(rebuilt_note(path, exc), stacklevel=4)  # the caller of train()
            model = fresh()  # load_state_dict may have copied part of the file before it failed
        else:
            model.eval()
            return model
    if progress:
        progress("training the all-ReLU teacher", 0.0)
    x = _tensors(data, "train")[0]
    _epochs(model, data, recipe.teacher_epochs, recipe.seed, recipe.lr, lambda idx, y: F.cross_entropy(model(x[idx]), y))
    if progress:
        progress("training the all-ReLU teacher", 1.0)  # ends its line before the student's begin
    _save(path, {"state": model.state_dict(), "weights": weights_fingerprint(model)})
    return model


def _load_checked(model: LinGCN, path: Path) -> dict[str, Any]:
    """Load cache file ``path`` into ``model`` (tensors and plain values only: ``weights_only``) and return what it holds.

    The file is ``{"state": state dict, "weights": its fingerprint, ...}``; a teacher cached before
    fingerprints is a bare state dict, loaded unchecked.

    Raises:
        DamagedCache: not a dict, or weights other than the fingerprint it records.
        Exception: whatever torch raises on a file it cannot read, or on a state dict of another shape.
    """
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(blob, dict):
        raise DamagedCache(f"it holds a {type(blob).__name__}, not a model")
    model.load_state_dict(blob.get("state", blob))
    recorded = blob.get("weights")
    if recorded is not None and recorded != (found := weights_fingerprint(model)):
        raise DamagedCache(f"damaged: its weights hash to {found}, the file records {recorded}")
    return blob


def _save(path: Path, blob: dict[str, Any]) -> None:
    """Write ``blob`` to ``path`` atomically (a failed write leaves no temporary file)."""
    atomic_write(path, lambda tmp: torch.save(blob, tmp))


def he_cache() -> Path:
    """``$COEVO_CACHE/he``: the LinGCN teachers and students, and the measured CKKS op costs."""
    return cache_dir().parent / "he"


def train(recipe: Recipe, progress: Progress | None = None, rebuild: bool = False) -> Trained:
    """The student (or baseline, ``budget`` 1) of ``recipe``: from the disk cache, or trained (seconds) and cached.

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


def _init_student(student: LinGCN, teacher: LinGCN, recipe: Recipe, data: GraphData) -> None:
    """Teacher weights; per block and position the ReLU fit over the teacher's range (or ``z^2``)."""
    student.load_state_dict(teacher.state_dict())
    with torch.no_grad():
        for i, r in enumerate(pre_activation_ranges(teacher, data)):
            init = relu_fit(r) if recipe.poly_init == "relu-fit" else np.array([0.0, 0.0, 1.0])
            student.coef[i // 2, i % 2] = torch.tensor(init, dtype=torch.float32)[None, :]
        student.aux.fill_(AUX_INIT)
        student.mask.fill_(float("nan"))


def _train(recipe: Recipe, progress: Progress | None, rebuild: bool) -> Trained:
    data = load_dataset(recipe.dataset, recipe.neighbours, seed=0)
    teacher = _teacher(recipe, data, progress)
    teacher_val = accuracy(teacher, data, "val")
    path = cache_path(recipe)
    student = LinGCN(data.adj, data.coords, recipe.hidden, data.classes, "poly", recipe.readout)
    if path.exists() and not rebuild:
        try:
            return _cached_student(recipe, student, data, path, teacher_val)
        except Exception as exc:  # a cache: the recipe makes it again
            note(rebuilt_note(path, exc), stacklevel=3)  # the caller of train()
            student = LinGCN(data.adj, data.coords, recipe.hidden, data.classes, "poly", recipe.readout)
    _init_student(student, teacher, recipe, data)
    # budget 0 or 1 leaves nothing to search: the mask is fixed from the start (the baseline has no indicators)
    searching = 0.0 < recipe.budget < 1.0
    search_epochs = (2 * recipe.epochs) // 3 if searching else 0
    if not searching:
        student.mask.copy_(harden(student.aux.detach(), recipe.kept_rows))
    x_train = _tensors(data, "train")[0]
    with torch.no_grad():
        teacher_feats: list[torch.Tensor] = []
        soft_targets = torch.log_softmax(teacher(x_train, feats=teacher_feats) / recipe.temperature, dim=1)
    w, t, beta = recipe.distill, recipe.temperature, recipe.feature_distill

    def loss_fn(idx: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        feats: list[torch.Tensor] = []
        out = student(x_train[idx], feats=feats if beta > 0 else None)
        loss = (1 - w) * F.cross_entropy(out, y)
        if w > 0:
            kl = F.kl_div(torch.log_softmax(out / t, dim=1), soft_targets[idx], log_target=True, reduction="batchmean")
            loss = loss + w * t * t * kl
        if beta > 0:
            loss = loss + beta * sum((F.mse_loss(f, tf[idx]) for f, tf in zip(feats, teacher_feats, strict=True)), torch.zeros(()))
        if not student.hardened():
            loss = loss + PENALTY * torch.relu(student.gates().mean() - recipe.budget)
        return loss

    def on_epoch(epoch: int) -> None:
        if progress:
            # one kind of work ("training the student"), so a listener keeps one line for it, not one per epoch
            progress(f"training the student: epoch {epoch + 1} of {recipe.epochs}", epoch / max(1, recipe.epochs))
        if epoch >= search_epochs and not student.hardened():
            student.mask.copy_(harden(student.aux.detach(), recipe.kept_rows))

    _epochs(student, data, recipe.epochs, recipe.seed + 1, recipe.lr / 3, loss_fn, on_epoch)
    if progress:
        progress(f"training the student: epoch {recipe.epochs} of {recipe.epochs}", 1.0)
    if not student.hardened():  # epochs == 0 or all search epochs: harden now
        student.mask.copy_(harden(student.aux.detach(), recipe.kept_rows))
    val = accuracy(student, data, "val")
    ranges = pre_activation_ranges(student, data)
    state = {"state": student.state_dict(), "weights": weights_fingerprint(student), "val_accuracy": val, "ranges": ranges}
    _save(path, {**state, "recipe": asdict(recipe)})
    return Trained(recipe, student, data, val, teacher_val, ranges)


def _cached_student(recipe: Recipe, student: LinGCN, data: GraphData, path: Path, teacher_val: float) -> Trained:
    """The student cached in ``path``, checked (:func:`_load_checked`, and its numbers' types and count).

    Raises:
        DamagedCache: a file that loads but is not a student of this recipe's shape.
        Exception: whatever torch raises on a file it cannot read.
    """
    blob = _load_checked(student, path)
    val, ranges = blob.get("val_accuracy"), blob.get("ranges")
    if not isinstance(val, float) or not isinstance(ranges, list) or len(ranges) != 2 * len(recipe.hidden):
        raise DamagedCache("it holds no validation accuracy and pre-activation ranges of this recipe's blocks")
    if not student.hardened():
        raise DamagedCache("its mask is not hardened")
    student.eval()
    return Trained(recipe, student, data, val, teacher_val, [float(r) for r in ranges])


def teacher_accuracy(recipe: Recipe) -> dict[str, float]:
    """Val and test accuracy (%) of the recipe's all-ReLU teacher (plaintext)."""
    data = load_dataset(recipe.dataset, recipe.neighbours, seed=0)
    teacher = _teacher(recipe, data, None)
    return {"val": accuracy(teacher, data, "val"), "test": accuracy(teacher, data, "test")}


def cache_path(recipe: Recipe) -> Path:
    """Where the student of ``recipe`` is cached."""
    return he_cache() / f"student-{recipe.key()}.pt"
