"""Build (train) a stepping net or a baseline on a zoo classifier's data, cached on disk like the zoo's models.

The cache key hashes everything that shapes the result (the zoo recipe's architecture and
data split, the step fractions, the kind of net, epochs, seed, distillation) with
:func:`sim.zoo.registry.recipe_key`, so another setting never loads a stale net. Files live in
``<zoo cache>/../stepping/<model>-<kind>-<key>.pt``, written atomically, with a JSON sidecar
holding the file's SHA-256 and the accuracies: a file whose checksum does not match, that
does not load, or that holds another key is rebuilt (with a note saying why).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from coevo.sim.errors import UserInputError
from coevo.sim.stepping._nets import make_net
from coevo.sim.stepping._plan import Arch, StepPlan, check_fractions, plan
from coevo.sim.stepping._train import ASSIGNS, Progress, TrainConfig, accuracies, train
from coevo.sim.zoo.cache_files import DamagedCache, atomic_write, rebuilt_note
from coevo.sim.zoo.cache_files import note as cache_note
from coevo.sim.zoo.data import Split
from coevo.sim.zoo.registry import ZooError, cache_dir, recipe, recipe_key, splits_of

Kind = Literal["stepping", "slimmable", "independent"]
KINDS: tuple[Kind, ...] = ("stepping", "slimmable", "independent")
Assign = Literal["index", "importance"]
VERSION = 1


@dataclass
class Built:
    """A trained net of one kind, its plan and its accuracy per step.

    Attributes:
        kind: ``stepping``, ``slimmable`` or ``independent``.
        net: the trained net (eval mode).
        plan: widths and MACs of every step.
        val_accuracy / test_accuracy: % per step.
        train_s: training seconds (when it was trained; the cached value when loaded).
        path: the cache file.
        note: ``trained``, ``loaded``, or why a cache file was rebuilt.
        splits: the data (train, val, test).
    """

    kind: Kind
    net: nn.Module
    plan: StepPlan
    val_accuracy: list[float]
    test_accuracy: list[float]
    train_s: float
    path: Path
    note: str
    splits: dict[str, Split] = field(repr=False)

    @property
    def macs(self) -> list[int]:
        """MACs per image of each step (the stepping subnet's, or the dense net's for the baselines)."""
        if self.kind == "stepping":
            return [self.plan.macs(s) for s in range(self.plan.steps)]
        return [self.plan.dense_macs(s) for s in range(self.plan.steps)]


def stepping_root() -> Path:
    """Where built nets are cached: beside the zoo's cache (``$COEVO_CACHE/stepping`` or ``~/.cache/coevo/stepping``)."""
    return cache_dir().parent / "stepping"


def zoo_setup(model: str) -> tuple[dict[str, Any], Arch]:
    """The zoo recipe of ``model`` and its architecture; :class:`UserInputError` for an unknown or non-CNN model."""
    try:
        rec = recipe(model)
    except ZooError as exc:
        raise UserInputError(str(exc)) from None
    if rec["task"] != "classify":
        raise UserInputError(f"model {model!r} is a {rec['task']} model; stepping nets need a CNN classifier (cnn-digits, cnn-mnist5k)")
    return rec, Arch.from_zoo(rec["arch"])


def build(
    model: str,
    steps: list[float] | tuple[float, ...],
    *,
    kind: Kind = "stepping",
    epochs: int | None = None,
    seed: int = 0,
    distill: bool = False,
    assign: Assign = "importance",
    progress: Progress | None = None,
    rebuild: bool = False,
) -> Built:
    """Train (or load from the cache) a net of ``kind`` whose steps sit at the MAC fractions ``steps`` of ``model``.

    Args:
        model: a zoo CNN classifier (``cnn-digits``, ``cnn-mnist5k``); its data split and widths are used.
        steps: MAC fractions of the full zoo model, strictly increasing in (0, 1].
        kind: ``stepping`` (nested, incremental), ``slimmable`` or ``independent`` (the baselines at the same MACs).
        epochs: training epochs (default: the zoo recipe's).
        seed: initialisation and batch order.
        distill: steps below the largest also learn from it (stepping and slimmable).
        assign: how a stepping net's units are put in step groups: ``importance`` (moved by importance during
            training, SteppingNet's rule; :mod:`sim.stepping._assign`) or ``index`` (the fixed index partition, the
            ablation). Ignored for the baselines.
        progress: ``(what, fraction)`` while training.
        rebuild: train again even when cached.

    Raises:
        UserInputError: unknown model, bad fractions, epochs < 1, unknown kind or assignment.
    """
    if kind not in KINDS:
        raise UserInputError(f"kind {kind!r}: use one of {', '.join(KINDS)}")
    if assign not in ASSIGNS:
        raise UserInputError(f"assign {assign!r}: use one of {', '.join(ASSIGNS)}")
    fractions = check_fractions(steps)
    rec, arch = zoo_setup(model)
    n_epochs = int(rec["train"]["epochs"]) if epochs is None else int(epochs)
    if n_epochs < 1:
        raise UserInputError(f"epochs must be at least 1, got {n_epochs}")
    the_plan = plan(arch, fractions)
    how = assign if kind == "stepping" else "index"
    cfg = TrainConfig(n_epochs, int(seed), bool(distill) and kind != "independent", rec["train"]["batch"], rec["train"]["lr"], assign=how)
    identity = {
        "version": VERSION,
        "kind": kind,
        "arch": rec["arch"],
        "data": rec["data"],
        "fractions": list(fractions),
        "train": {
            "epochs": cfg.epochs,
            "seed": cfg.seed,
            "distill": cfg.distill,
            "batch": cfg.batch,
            "lr": cfg.lr,
            "wd": cfg.weight_decay,
            "assign": cfg.assign,
            "rounds": cfg.rounds,
            "probe": cfg.importance_images,
        },
    }
    key = recipe_key(identity)
    splits, _ = splits_of(rec)
    path = stepping_root() / f"{model}-{kind}-{key}.pt"
    net = _fresh(kind, the_plan, cfg.seed)
    note = "trained"
    if path.exists() and not rebuild:
        try:
            return _load(path, key, kind, net, the_plan, splits)
        except Exception as exc:  # a cache file is disposable: the recipe makes it again
            note = rebuilt_note(path, exc)  # our check's sentence, or the exception's class alone (never torch's advice)
            cache_note(note, stacklevel=2)
            net = _fresh(kind, the_plan, cfg.seed)
    started = time.perf_counter()
    train(net, splits["train"].x, splits["train"].y, cfg, progress, f"{kind} {model}")
    seconds = time.perf_counter() - started
    val = accuracies(net, splits["val"].x, splits["val"].y)
    test = accuracies(net, splits["test"].x, splits["test"].y)
    _save(path, {"key": key, "state_dict": net.state_dict()}, {"key": key, "val": val, "test": test, "train_s": round(seconds, 2)})
    return Built(kind, net, the_plan, val, test, seconds, path, note, splits)


def _fresh(kind: Kind, the_plan: StepPlan, seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return make_net(kind, the_plan)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load(path: Path, key: str, kind: Kind, net: nn.Module, the_plan: StepPlan, splits: dict[str, Split]) -> Built:
    sidecar = path.with_suffix(".json")
    info = json.loads(sidecar.read_text())
    if info.get("sha256") != _sha256(path):
        raise DamagedCache("its SHA-256 does not match the one recorded when it was written (corrupt or changed)")
    stored = torch.load(path, map_location="cpu", weights_only=True)
    if stored.get("key") != key or info.get("key") != key:
        raise DamagedCache(f"it holds key {stored.get('key')!r}, not {key!r}")
    net.load_state_dict(stored["state_dict"])
    net.eval()
    return Built(kind, net, the_plan, list(info["val"]), list(info["test"]), float(info["train_s"]), path, "loaded", splits)


def _save(path: Path, obj: dict[str, Any], info: dict[str, Any]) -> None:
    # each file written then renamed, the checksum last: a killed or failed run never leaves a file that passes the
    # check, nor a temporary file behind
    digest: list[str] = []

    def weights(tmp: Path) -> None:
        torch.save(obj, tmp)
        digest.append(_sha256(tmp))  # of the bytes written, before the rename puts them in place

    atomic_write(path, weights)
    atomic_write(path.with_suffix(".json"), lambda tmp: tmp.write_text(json.dumps({**info, "sha256": digest[0]})))
