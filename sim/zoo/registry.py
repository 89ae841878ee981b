"""The model zoo: recipes, training, the on-disk cache and the :class:`ZooModel` handle.

A recipe is a plain dict (architecture, data split, training settings, seeds). Its SHA-256
over canonical JSON is the cache key, so changing any setting trains a new model and an old
cache entry can never be mistaken for it. The first :func:`load` trains (reporting progress),
writes ``<name>-<key>.pt`` atomically with a JSON sidecar (baseline metrics, train time, the
weights' fingerprint), and every later call loads. A cache file that does not load, holds
another recipe, or holds weights other than the fingerprint it and its sidecar record (torch reads
overwritten tensor bytes without a word) is rebuilt, with a one-line note
(:mod:`sim.zoo.cache_files`); a failed write leaves no temporary file.

Training is seeded but not bit-identical across machines (float kernels differ by CPU), nor across
torch thread counts on one machine (lm-pystdlib-tiny, seed 0: fingerprint 6a0e95bac14af9ff with 1
thread, d0dec1a43e5be8dc with 2), so two caches can hold different weights for one recipe; the
sidecar records the thread count that trained it. Every loaded model therefore carries
:attr:`ZooModel.fingerprint`, a hash of its weights, and :func:`used_models` lists the ones this
process loaded, which the figures record beside their data: a reader can tell whether a rerun
used the same trained model.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from coevo.sim._progress import report
from coevo.sim.zoo.cache_files import DamagedCache, atomic_write, exclusive, rebuilt_note, why_not_loaded
from coevo.sim.zoo.cache_files import note as cache_note
from coevo.sim.zoo.data import (
    Split,
    byte_blocks,
    byte_tensor,
    digits_fold_splits,
    digits_splits,
    mnist5k_splits,
    pydoc_text,
    random_windows,
    stdlib_text,
)
from coevo.sim.zoo.models import ByteGPT, DigitsCNN, DigitsMLP, MnistCNN
from coevo.sim.zoo.recipes import (  # the torch-free part, here too for callers of sim.zoo.registry
    AS_RECIPE,
    RECIPES,
    SPLITS,
    ZooError,
    cache_dir,
    recipe,
    recipe_key,
    train_estimate,
)

Progress = Callable[[str, float], None]
"""``(what, fraction done in [0, 1])``."""

StepHook = Callable[[int, nn.Module], None]
"""``(step, model)``: called after optimiser step ``step`` (1-based) with the model in training mode.

A hook may evaluate the model (in eval mode, no gradients) but must leave it in training mode and
its weights untouched; it does not draw from the training's random generator, so the weights do not
depend on whether or where hooks ran.
"""


def build(rec: dict[str, Any]) -> nn.Module:
    """An untrained model of the recipe's architecture (initialised with the recipe's training seed)."""
    arch = dict(rec["arch"])
    kind = arch.pop("kind")
    torch.manual_seed(rec["train"]["seed"])
    if kind == "DigitsCNN":
        return DigitsCNN(**arch)
    if kind == "MnistCNN":
        return MnistCNN(**arch)
    if kind == "ByteGPT":
        return ByteGPT(**arch)
    if kind == "DigitsMLP":  # issue 20
        return DigitsMLP(**arch)
    raise ZooError(f"unknown architecture {kind!r}")


def parameter_count(model: nn.Module) -> int:
    """Number of parameters."""
    return sum(p.numel() for p in model.parameters())


@dataclass
class ZooModel:
    """A trained model with its data, metric and evaluation; ``model`` is the caller's own copy."""

    name: str
    task: str
    model: nn.Module
    recipe: dict[str, Any]
    key: str
    baseline: dict[str, float]
    splits: dict[str, Split] = field(repr=False)
    path: Path
    note: str = ""
    """How the model was obtained: ``trained``, ``loaded``, or why a cache entry was rebuilt."""
    fingerprint: str = ""
    """:func:`weights_fingerprint` of the weights as loaded or trained (empty for a user's own model)."""

    @classmethod
    def from_module(cls, model: nn.Module, task: str, splits: dict[str, Split], name: str = "user-model") -> ZooModel:
        """Wrap a user's own model and data (``splits`` holds ``train``, ``val`` and ``test``) so every zoo method takes it.

        ``task`` is ``classify`` (``model(x) -> logits [B, classes]``) or ``lm`` (``model(x) -> logits [B, T, vocab]``).
        """
        if task not in ("classify", "lm"):
            raise ZooError(f"task {task!r}: use 'classify' or 'lm'")
        missing = [s for s in SPLITS if s not in splits]
        if missing:
            raise ZooError(f"the user data has no {', '.join(missing)} split: give train, val and test")
        return cls(name, task, model, {"user": True}, "user", {}, dict(splits), Path("."), "user's own model")

    @property
    def metric(self) -> str:
        """``accuracy`` (percent, higher is better) or ``perplexity`` (lower is better)."""
        return "accuracy" if self.task == "classify" else "perplexity"

    @property
    def params(self) -> int:
        """Number of parameters of the model."""
        return parameter_count(self.model)

    def loader(self, split: str, batch_size: int = 64, shuffle: bool = False, seed: int = 0) -> DataLoader[tuple[torch.Tensor, ...]]:
        """Batches ``(x, y)`` of a split (see :mod:`sim.zoo.data` for the shapes); shuffled with ``seed`` when asked."""
        data = self._split(split)
        gen = torch.Generator().manual_seed(seed)
        return DataLoader(TensorDataset(data.x, data.y), batch_size=batch_size, shuffle=shuffle, generator=gen)

    def loss(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of ``model`` on one batch (over images, or over every token)."""
        return _loss(model, x, y)

    @torch.no_grad()
    def evaluate(self, model: nn.Module, split: str = "val", max_batches: int | None = None) -> float:
        """Accuracy in % (classify) or perplexity (lm) of ``model`` on a split."""
        return _evaluate(self.task, model, self._split(split), max_batches)

    @torch.no_grad()
    def sequence_nll(self, model: nn.Module, split: str = "test", max_batches: int | None = None) -> list[float]:
        """Mean token cross-entropy (nats) of ``model`` on each sequence of a language model's split, in order.

        The sequences :meth:`evaluate` scores (batches of 64, the first ``max_batches`` of them); two
        models' lists, paired by position, give the test-set noise of a perplexity change
        (:func:`search.stats.paired_log_ratio`).

        Raises:
            ZooError: not a language model, or an unknown split.
        """
        if self.task != "lm":
            raise ZooError(f"{self.name} is a {self.task} model: per-sequence cross-entropy is for language models")
        return _sequence_nll(model, self._split(split), max_batches)

    def _split(self, split: str) -> Split:
        if split not in self.splits:
            raise ZooError(f"no split {split!r}: use one of {', '.join(SPLITS)}")
        return self.splits[split]


FINGERPRINT_CHARS = 16
"""Hex characters of SHA-256 kept in a fingerprint: 64 bits, no collision among a cache's models."""

_USED: dict[str, str] = {}
"""Models loaded by this process: :func:`model_label` -> fingerprint (see :func:`used_models`)."""


def weights_fingerprint(model: nn.Module) -> str:
    """A short SHA-256 of ``model``'s state dict (names, dtypes, shapes and bytes, in name order).

    Equal fingerprints mean bit-identical weights; it is what tells two trainings of one recipe apart.
    """
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        value = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{value.dtype}|{tuple(value.shape)}|".encode())
        digest.update(value.view(torch.uint8).numpy().tobytes() if value.numel() else b"")
    return digest.hexdigest()[:FINGERPRINT_CHARS]


def model_label(name: str, rec: dict[str, Any]) -> str:
    """``name`` with the training seed and (cross-validated recipes) the fold: one trained model each."""
    label = f"{name} seed {rec['train']['seed']}"
    return label + (f" fold {rec['data']['fold']}" if "fold" in rec["data"] else "")


def used_models() -> dict[str, str]:
    """The zoo models this process has loaded or trained, :func:`model_label` -> :func:`weights_fingerprint`."""
    return dict(sorted(_USED.items()))


def _loaded(zm: ZooModel) -> ZooModel:
    """``zm`` with its fingerprint, noted in :func:`used_models`."""
    zm.fingerprint = weights_fingerprint(zm.model)
    return _register(zm)


def _register(zm: ZooModel) -> ZooModel:
    """Note ``zm`` (fingerprinted) in :func:`used_models`: only once its weights are checked, so a damaged file is never listed."""
    _USED[model_label(zm.name, zm.recipe)] = zm.fingerprint
    return zm


def lm_text(rec: dict[str, Any]) -> dict[str, bytes]:
    """A language model's recipe's text, split into train / val / test bytes (the standard library or the pydoc topics)."""
    data = rec["data"]
    if data["set"] == "python-stdlib":
        return stdlib_text(data["val_bytes"], data["test_bytes"], data["seed"])
    return pydoc_text(data["val_share"], data["test_share"], data["seed"])


def splits_of(rec: dict[str, Any]) -> tuple[dict[str, Split], bytes | None]:
    """The recipe's splits (and, for a language model, the raw training text for random windows)."""
    data = rec["data"]
    if data["set"] == "digits":
        return digits_splits(data["n_train"], data["n_val"], data["seed"]), None
    if data["set"] == "digits-cv":
        return digits_fold_splits(data["folds"], data["fold"], data["n_val"], data["n_train"], data["seed"]), None
    if data["set"] == "mnist5k":
        return mnist5k_splits(data["n_train"], data["n_val"], data["seed"]), None
    text = lm_text(rec)
    block = rec["arch"]["block"]
    return {name: byte_blocks(text[name], block) for name in SPLITS}, text["train"]


def folds(name: str) -> int:
    """Number of cross-validation folds of ``name`` (1 for a model with one fixed split)."""
    return int(recipe(name)["data"].get("folds", 1))


def load(
    name: str, progress: Progress | None = None, rebuild: bool = False, train_seed: int | None = None, fold: int | None = None
) -> ZooModel:
    """The trained model ``name``: from the cache, or trained now (and cached) when absent, stale or corrupt.

    Args:
        name: a zoo model (:func:`names`).
        progress: called with ``(what, fraction)`` while training, first with an announcement (why it
            trains, about how long, where it is cached); default: :func:`sim._progress.report`, so
            whoever listens (the CLI's progress, chat's spinner) hears of a first-use training.
        rebuild: train again even when a cache entry exists.
        train_seed: train with this seed instead of the recipe's (initialisation and batch order;
            the data split stays the recipe's). It is part of the recipe, so each seed is cached apart.
        fold: for a cross-validated model (:func:`folds` > 1), the fold whose test split this model
            never sees (default: the recipe's, 0); cached apart like a seed.

    Raises:
        ZooError: ``name`` is not in the zoo, or ``fold`` is not one of its folds.
    """
    rec = recipe(name)
    if train_seed is not None:
        rec["train"]["seed"] = int(train_seed)
    if fold is not None:
        n = int(rec["data"].get("folds", 1))
        if n < 2 or not 0 <= int(fold) < n:
            raise ZooError(f"fold {fold} of {name}: " + (f"use 0..{n - 1}" if n > 1 else "it has one fixed split, give no fold"))
        rec["data"]["fold"] = int(fold)
    key = recipe_key(rec)
    splits, train_text = splits_of(rec)
    path = cache_dir() / f"{name}-{key}.pt"
    progress = report if progress is None else progress
    # one process trains a recipe at a time; the others (workers on one machine, parallel tests) wait and load its file
    with exclusive(path):
        return _load_or_train(name, rec, key, splits, train_text, path, progress, rebuild)


def _load_or_train(
    name: str,
    rec: dict[str, Any],
    key: str,
    splits: dict[str, Split],
    train_text: bytes | None,
    path: Path,
    progress: Progress,
    rebuild: bool,
) -> ZooModel:
    note = "trained"
    if path.exists() and not rebuild:
        try:
            loaded, sidecar = _load_cached(name, rec, key, splits, path)
        except Exception as exc:  # any unreadable or damaged cache is rebuilt: it is a cache, the recipe can make it again
            note = rebuilt_note(path, exc)
            cache_note(note, stacklevel=3)  # the caller of load()
        else:  # outside the try: a sidecar that cannot be rewritten is an error of its own, not a reason to retrain
            _register(loaded)
            _check_sidecar(loaded, sidecar)
            return loaded
    model = build(rec)
    why = "asked to rebuild" if rebuild else "on first use" if note == "trained" else "its cache file did not load"
    progress(f"{training_label(name)}: {why} ({train_estimate(name)}; cached in {path.parent})", 0.0)
    started = time.perf_counter()
    _train(rec, model, splits, train_text, name, progress)
    model.eval()
    metric = "accuracy" if rec["task"] == "classify" else "perplexity"
    baseline = {f"{split}_{metric}": _evaluate(rec["task"], model, splits[split], None) for split in ("val", "test")}
    seconds = time.perf_counter() - started
    zm = _loaded(ZooModel(name, rec["task"], model, rec, key, baseline, splits, path, note))
    state = {"key": key, "recipe": json.dumps(rec), "state_dict": model.state_dict(), "baseline": baseline, "weights": zm.fingerprint}
    _save(path, state)
    _write_sidecar(zm, round(seconds, 1), torch.get_num_threads())
    return zm


def _load_cached(name: str, rec: dict[str, Any], key: str, splits: dict[str, Split], path: Path) -> tuple[ZooModel, dict[str, Any] | str]:
    """The model in cache file ``path``, checked, with its sidecar (or why the sidecar did not load).

    Torch reads a weights file whose tensor bytes were overwritten without a word (the zip's
    checksums are not verified), so the weights' fingerprint is compared with the one the file and
    its sidecar record. It costs no extra pass: every loaded model is fingerprinted anyway
    (:attr:`ZooModel.fingerprint`, for :func:`used_models`).

    Raises:
        DamagedCache: the file holds another recipe, or weights other than those recorded.
        Exception: whatever torch raises on a file it cannot read.
    """
    stored = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(stored, dict) or stored.get("key") != key:
        held = stored.get("key") if isinstance(stored, dict) else None
        raise DamagedCache(f"it holds recipe {held!r}, not {key!r}")
    model = build(rec)
    model.load_state_dict(stored["state_dict"])
    model.eval()
    zm = ZooModel(name, rec["task"], model, rec, key, dict(stored["baseline"]), splits, path, "loaded")
    zm.fingerprint = weights_fingerprint(model)
    sidecar = _read_sidecar(path.with_suffix(".json"))
    for where, recorded in (("the file itself", stored.get("weights")), ("its sidecar", _recorded_weights(sidecar, key))):
        if recorded is not None and recorded != zm.fingerprint:
            raise DamagedCache(f"damaged: its weights hash to {zm.fingerprint}, {where} records {recorded}")
    return zm, sidecar


def _read_sidecar(sidecar: Path) -> dict[str, Any] | str:
    """The sidecar's JSON object, or why there is none (``did not load (...)``, ``is not a JSON object``)."""
    try:
        info = json.loads(sidecar.read_text())
    except (OSError, ValueError) as exc:
        return f"did not load ({why_not_loaded(exc)})"
    return info if isinstance(info, dict) else "is not a JSON object"


def _recorded_weights(sidecar: dict[str, Any] | str, key: str) -> str | None:
    """The weights' fingerprint a sidecar of recipe ``key`` records (None: it is not one, or records none)."""
    if isinstance(sidecar, dict) and sidecar.get("key") == key and isinstance(sidecar.get("weights"), str):
        return str(sidecar["weights"])
    return None


def _write_sidecar(zm: ZooModel, train_s: float | None, threads: int | None) -> None:
    """The ``.json`` beside the weights: what ``coevo models list`` shows without loading them."""
    sidecar = {
        "name": zm.name, "key": zm.key, "baseline": zm.baseline, "train_s": train_s, "weights": zm.fingerprint,
        "train_threads": threads,  # the float reductions, hence the weights, depend on it (module doc)
    }  # fmt: skip
    _save_text(zm.path.with_suffix(".json"), json.dumps(sidecar))


def _check_sidecar(zm: ZooModel, sidecar: dict[str, Any] | str) -> None:
    """Rewrite a missing or unreadable sidecar of weights that loaded, from them (with a note: the training time is lost)."""
    if isinstance(sidecar, dict):
        if sidecar.get("key") == zm.key and isinstance(sidecar.get("baseline"), dict):
            return
        why = "does not describe these weights"
    else:
        why = sidecar
    _write_sidecar(zm, None, None)
    path = zm.path.with_suffix(".json")
    cache_note(f"repaired: the cache's sidecar {path} {why}; rewritten from the weights file (training time unknown)", stacklevel=4)


def checkpoint_steps(total: int, n: int) -> tuple[int, ...]:
    """``n`` optimiser steps (1-based) spread evenly over a training of ``total`` steps, the last being ``total``.

    Step ``ceil(k * total / n)`` for ``k = 1 .. n``: gaps of ``total / n`` rounded up, so the steps
    are distinct and increasing, and ``n = 1`` is the last step alone.

    Raises:
        ZooError: ``total`` < 1, or ``n`` not in ``1 .. total``.
    """
    if total < 1:
        raise ZooError(f"a training of {total} steps has no step to check")
    if not 1 <= n <= total:
        raise ZooError(f"checkpoints {n}: use 1 to {total} (one per training step at most)")
    return tuple((k * total + n - 1) // n for k in range(1, n + 1))


def fresh_recipe(
    name: str,
    *,
    train_seed: int = 0,
    steps_multiplier: float = AS_RECIPE,
    weight_decay: float | None = None,
    lr_multiplier: float = AS_RECIPE,
) -> dict[str, Any]:
    """The recipe :func:`train_fresh` trains: ``name``'s, with this seed, ``steps x steps_multiplier`` steps, decay and peak rate.

    With both multipliers 1 and no weight decay given it is the recipe :func:`load` caches for
    ``train_seed`` (same :func:`recipe_key`). The step count is rounded to the nearest integer; the
    peak learning rate of the one-cycle schedule is the recipe's times ``lr_multiplier``.

    Raises:
        ZooError: ``name`` is not in the zoo or not a language model, a multiplier is not > 0 (or
            the steps one leaves no step), or the weight decay is negative.
    """
    rec = recipe(name)
    if rec["task"] != "lm":
        lms = ", ".join(n for n, r in RECIPES.items() if r["task"] == "lm")
        raise ZooError(f"{name} is a {rec['task']} model: a fresh training with a step multiplier is for language models ({lms})")
    if not (math.isfinite(steps_multiplier) and steps_multiplier > 0):
        raise ZooError(f"steps multiplier {steps_multiplier}: must be a number > 0")
    steps = round(rec["train"]["steps"] * steps_multiplier)
    if steps < 1:
        raise ZooError(f"steps multiplier {steps_multiplier} leaves {name} ({rec['train']['steps']} steps) no step to train")
    if not (math.isfinite(lr_multiplier) and lr_multiplier > 0):
        raise ZooError(f"learning-rate multiplier {lr_multiplier}: must be a number > 0")
    rec["train"]["lr"] *= lr_multiplier  # exact at 1: the recipe's key is unchanged
    if weight_decay is not None:
        if not (math.isfinite(weight_decay) and weight_decay >= 0):
            raise ZooError(f"weight decay {weight_decay}: must be a number >= 0")
        rec["train"]["weight_decay"] = float(weight_decay)
    rec["train"]["steps"] = steps
    rec["train"]["seed"] = int(train_seed)
    return rec


def train_fresh(
    name: str,
    *,
    train_seed: int = 0,
    steps_multiplier: float = AS_RECIPE,
    weight_decay: float | None = None,
    lr_multiplier: float = AS_RECIPE,
    on_step: StepHook | None = None,
    checkpoints: Collection[int] = (),
    progress: Progress | None = None,
) -> ZooModel:
    """Build language model ``name`` and train it from scratch, neither reading nor writing the cache.

    The training is :func:`load`'s (same initialisation, batches and schedule), on :func:`fresh_recipe`'s
    settings: with multiplier 1 and the recipe's weight decay it gives :func:`load`'s weights for
    ``train_seed``. A longer training stretches the one-cycle schedule over all its steps.

    Args:
        name: a zoo language model.
        train_seed: initialisation and batch order (the data split stays the recipe's).
        steps_multiplier: the recipe's step count is multiplied by it (rounded).
        weight_decay: AdamW's weight decay instead of the recipe's (None: the recipe's).
        lr_multiplier: the one-cycle schedule's peak learning rate is the recipe's times this.
        on_step: called as ``on_step(step, model)`` after each optimiser step in ``checkpoints`` (:data:`StepHook`).
        checkpoints: 1-based steps for ``on_step``, e.g. :func:`checkpoint_steps`.
        progress: ``(what, fraction)`` while training; default :func:`sim._progress.report`.

    Returns:
        The trained model (eval mode) with its val and test perplexity as ``baseline``; its
        fingerprint is listed by :func:`used_models` under a label naming the steps and weight decay.

    Raises:
        ZooError: as :func:`fresh_recipe`, or a checkpoint outside ``1 .. steps``.
    """
    rec = fresh_recipe(
        name, train_seed=train_seed, steps_multiplier=steps_multiplier, weight_decay=weight_decay, lr_multiplier=lr_multiplier
    )
    steps = rec["train"]["steps"]
    at = frozenset(int(c) for c in checkpoints)
    outside = sorted(c for c in at if not 1 <= c <= steps)
    if outside:
        raise ZooError(f"checkpoints {outside} are outside the training's steps 1 to {steps}")
    splits, text = splits_of(rec)
    model = build(rec)
    started = time.perf_counter()
    _train(rec, model, splits, text, name, report if progress is None else progress, on_step, at)
    model.eval()
    baseline = {f"{split}_perplexity": _evaluate("lm", model, splits[split], None) for split in ("val", "test")}
    note = f"trained fresh in {time.perf_counter() - started:.0f} s ({steps} steps), not cached"
    zm = ZooModel(name, "lm", model, rec, recipe_key(rec), baseline, splits, Path(), note)
    zm.fingerprint = weights_fingerprint(model)
    lr = f", learning rate {rec['train']['lr']:g}" if lr_multiplier != AS_RECIPE else ""
    _USED[f"{model_label(name, rec)}, fresh: {steps} steps, weight decay {rec['train']['weight_decay']:g}{lr}"] = zm.fingerprint
    return zm


def _save(path: Path, obj: dict[str, Any]) -> None:
    # write then rename: a killed training never leaves a half-written cache file behind, a failed one no temporary file
    atomic_write(path, lambda tmp: torch.save(obj, tmp))


def _save_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text))


def _loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = model(x)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def _each_batch(model: nn.Module, data: Split, max_batches: int | None, score: Callable[[torch.Tensor, torch.Tensor], None]) -> None:
    """Call ``score(output, targets)`` on each batch of 64 of ``data`` (the first ``max_batches``), in eval mode, no gradients."""
    batch = 64
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for i in range(0, len(data), batch):
                if max_batches is not None and i // batch >= max_batches:
                    break
                score(model(data.x[i : i + batch]), data.y[i : i + batch])
    finally:
        model.train(was_training)


def _evaluate(task: str, model: nn.Module, data: Split, max_batches: int | None) -> float:
    sums = {"total": 0, "right": 0, "nll": 0.0}

    def score(out: torch.Tensor, y: torch.Tensor) -> None:
        if task == "classify":
            sums["right"] += int((out.argmax(-1) == y).sum())
            sums["total"] += len(y)
        else:
            sums["nll"] += float(F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1), reduction="sum"))
            sums["total"] += y.numel()

    _each_batch(model, data, max_batches, score)
    if sums["total"] == 0:
        raise ZooError("nothing to evaluate: the split (or max_batches) is empty")
    return 100.0 * sums["right"] / sums["total"] if task == "classify" else math.exp(sums["nll"] / sums["total"])


def lm_perplexity(model: nn.Module, data: Split) -> float:
    """Token perplexity of language model ``model`` on ``data``'s blocks, as :meth:`ZooModel.evaluate` scores a split."""
    return _evaluate("lm", model, data, None)


def _sequence_nll(model: nn.Module, data: Split, max_batches: int | None) -> list[float]:
    out: list[float] = []

    def score(logits: torch.Tensor, y: torch.Tensor) -> None:
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none").view(y.shape)
        out.extend(nll.double().mean(dim=1).tolist())

    _each_batch(model, data, max_batches, score)
    return out


def training_label(name: str) -> str:
    """What the progress of training ``name`` is reported as (the text before the colon of each report)."""
    return f"training zoo model {name}"


def _train(
    rec: dict[str, Any],
    model: nn.Module,
    splits: dict[str, Split],
    text: bytes | None,
    name: str,
    progress: Progress | None,
    on_step: StepHook | None = None,
    at: Collection[int] = (),
) -> None:
    """Train ``model`` by the recipe; ``on_step(step, model)`` after each optimiser step (1-based) in ``at``."""
    cfg = rec["train"]
    gen = torch.Generator().manual_seed(cfg["seed"])
    if rec["task"] == "classify":
        opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
        model.train()
        train = splits["train"]
        per_epoch = math.ceil(len(train) / cfg["batch"])
        steps = cfg["epochs"] * per_epoch
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg["lr"], total_steps=steps)
        step = 0
        for epoch in range(cfg["epochs"]):
            order = torch.randperm(len(train), generator=gen)
            for i in range(0, len(train), cfg["batch"]):
                idx = order[i : i + cfg["batch"]]
                _step(opt, sched, _loss(model, train.x[idx], train.y[idx]))
                step += 1
                if on_step is not None and step in at:
                    on_step(step, model)
            if progress is not None:
                progress(f"{training_label(name)}: epoch {epoch + 1} of {cfg['epochs']}", step / steps)
        return
    assert text is not None
    steps = cfg["steps"]

    def on_loss(step: int, loss: float) -> None:
        if progress is not None:
            progress(f"{training_label(name)}: step {step} of {steps}, loss {loss:.3f}", step / steps)

    data = byte_tensor(text)  # once: the standard library's 31 MB would otherwise be copied at every step
    hyper = LMTraining(steps, cfg["batch"], rec["arch"]["block"], cfg["lr"], cfg["weight_decay"])
    train_lm(model, data, hyper, gen, on_step=on_step, at=at, on_loss=on_loss)


@dataclass(frozen=True)
class LMTraining:
    """A byte-level LM's training: ``steps`` optimiser steps on ``batch`` random windows of ``block`` bytes,
    AdamW (``lr``, ``weight_decay``) on a one-cycle schedule peaking at ``lr`` after a 10 % warm-up."""

    steps: int
    batch: int
    block: int
    lr: float
    weight_decay: float


LOSS_EVERY = 10
""":func:`train_lm` reports the training loss every this many steps (reading it waits for a GPU)."""


def train_lm(
    model: nn.Module,
    data: torch.Tensor,
    hyper: LMTraining,
    generator: torch.Generator,
    *,
    on_step: StepHook | None = None,
    at: Collection[int] = (),
    on_loss: Callable[[int, float], None] | None = None,
    bf16: bool = False,
) -> None:
    """Train byte-level LM ``model`` on ``data`` (:func:`sim.zoo.data.byte_tensor`, on the model's device) by ``hyper``.

    The zoo's language-model training, also run on a GPU (the lm-wide figure): windows drawn with
    ``generator`` (of ``data``'s device), gradient clipping at 1. ``on_step(step, model)`` runs after each
    1-based step in ``at``; ``on_loss(step, loss)`` every :data:`LOSS_EVERY` steps and at the last.
    ``bf16`` runs the forward pass under bfloat16 autocast (the loss in float32).
    """
    opt = torch.optim.AdamW(model.parameters(), lr=hyper.lr, weight_decay=hyper.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=hyper.lr, total_steps=hyper.steps, pct_start=0.1)
    model.train()
    for step in range(1, hyper.steps + 1):
        batch = random_windows(data, hyper.block, hyper.batch, generator)
        with torch.autocast(data.device.type, dtype=torch.bfloat16, enabled=bf16):
            out = model(batch.x)
        # float32 logits: a no-op without autocast, so the CPU zoo's weights are the same as before
        loss = F.cross_entropy(out.float().reshape(-1, out.shape[-1]), batch.y.reshape(-1))
        _step(opt, sched, loss)
        if on_step is not None and step in at:
            on_step(step, model)
        if on_loss is not None and (step % LOSS_EVERY == 0 or step == hyper.steps):
            on_loss(step, float(loss.detach()))


def _step(opt: torch.optim.Optimizer, sched: torch.optim.lr_scheduler.LRScheduler, loss: torch.Tensor) -> None:
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], 1.0)
    opt.step()
    sched.step()
