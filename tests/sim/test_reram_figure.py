"""The ReRAM figure's cross-validated arm: a model trained per seed and fold, every digit tested once per seed and scheme."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest
import torch

from coevo.figures import reram
from coevo.sim.zoo import ZooModel, folds
from coevo.sim.zoo.data import Split, digits_fold_splits
from coevo.sim.zoo.models import DigitsCNN
from coevo.sim.zoo.recipes import recipe

DIGITS = 1797
MODEL = "cnn-digits-cv"


class _Recorder:
    """A zoo loader at test size: the recipe's real fold splits (128 training images), a tiny CNN seeded by the training seed.

    It records every (train_seed, fold) it is asked for, the first weight of each model it
    hands out, and every test image (its bytes) each fold's model is evaluated on.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[int, int | None]] = []
        self.first_weight: dict[tuple[int, int], float] = {}
        self.tested: dict[tuple[int, int], set[bytes]] = defaultdict(set)

    def __call__(self, name: str, train_seed: int, fold: int | None) -> ZooModel:
        assert name == MODEL and fold is not None
        self.calls.append((train_seed, fold))
        data = recipe(name)["data"]
        splits = digits_fold_splits(data["folds"], fold, data["n_val"], data["n_train"], data["seed"])
        splits["train"] = Split(splits["train"].x[:128], splits["train"].y[:128])  # two fine-tuning batches: fast
        torch.manual_seed(train_seed)
        model = DigitsCNN(width=2, hidden=8).eval()
        self.first_weight[(train_seed, fold)] = float(model.conv1.weight.detach().flatten()[0])
        zm = ZooModel.from_module(model, "classify", splits, name=name)
        zm.baseline = {"test_accuracy": zm.evaluate(model, "test")}
        tested = self.tested[(train_seed, fold)]
        evaluate = zm.evaluate

        def recording(m: torch.nn.Module, split: str = "val", max_batches: int | None = None) -> float:
            assert split == "test" and max_batches is None  # the classifier: the whole of its fold's test split
            tested.update(row.numpy().tobytes() for row in splits["test"].x)
            return evaluate(m, split, max_batches)

        zm.__dict__["evaluate"] = recording  # an instance attribute shadows the method
        return zm


def test_cross_validated_arm_trains_a_model_per_seed_and_tests_every_image_once_per_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(reram.FT, MODEL, 1)  # one fine-tuning epoch: the mechanics, not the accuracy
    loader = _Recorder()
    keep = ("none", reram.KNOWN)  # the known map reads through one dense product: fast
    rows = reram.run(2, [MODEL], loader=loader, rates=[0.0, 0.05], keep=keep)
    n_folds = folds(MODEL)
    assert n_folds == 5
    # every seed trains its own model for every fold: the loader is asked for each (seed, fold) once, with the seed as training seed
    assert sorted(loader.calls) == [(s, f) for s in range(2) for f in range(n_folds)]
    assert all(loader.first_weight[(0, f)] != loader.first_weight[(1, f)] for f in range(n_folds))
    # every fold has its own fault map, none shared between seeds or folds
    maps = {(int(r["seed"]), int(r["fold"])): int(r["fault_map"]) for r in rows}
    assert len(set(maps.values())) == 2 * n_folds
    # each seed's folds test disjoint images that together are the whole data set
    for seed in range(2):
        images = [loader.tested[(seed, f)] for f in range(n_folds)]
        assert sum(len(i) for i in images) == DIGITS and len(set().union(*images)) == DIGITS
    # per (seed, scheme, ratio, rate): one row per fold, their test images summing to every digit once
    cells: dict[tuple[Any, ...], Counter[int]] = defaultdict(Counter)
    for r in rows:
        cells[(r["seed"], r["scheme"], r["sa0_sa1"], r["fault_rate"])][int(r["fold"])] += int(r["test_n"])
    assert len(cells) == 2 * len(keep) * 2 * 2  # seeds x schemes x ratios (both schemes run at 1:1 too) x rates
    assert all(sorted(c) == list(range(n_folds)) and sum(c.values()) == DIGITS for c in cells.values())
    # a seed's value pools its folds by their test images: the accuracy over all 1,797 digits
    pooled = {(r["seed"], r["scheme"], r["sa0_sa1"], r["fault_rate"]): r for r in reram.per_seed(rows)}
    assert len(pooled) == len(cells)
    for key, r in pooled.items():
        folds_of = [x for x in rows if (x["seed"], x["scheme"], x["sa0_sa1"], x["fault_rate"]) == key]
        right = sum(x["value"] * x["test_n"] / 100 for x in folds_of)
        assert r["test_n"] == DIGITS and r["folds"] == n_folds
        assert r["value"] == pytest.approx(100 * right / DIGITS)
