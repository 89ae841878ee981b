"""Fresh (uncached) zoo trainings: checkpoint spacing, the step hook, and equality with the cached training."""

from __future__ import annotations

from pathlib import Path

import pytest
from torch import nn

from coevo.sim.zoo import ZooError, load, recipe, recipe_key, weights_fingerprint
from coevo.sim.zoo.recipes import RECIPES
from coevo.sim.zoo.registry import checkpoint_steps, fresh_recipe, train_fresh


def test_checkpoints_are_spread_evenly_and_end_at_the_last_step() -> None:
    assert checkpoint_steps(10, 5) == (2, 4, 6, 8, 10)
    assert checkpoint_steps(10, 3) == (4, 7, 10)  # ceil(10/3) = 4, ceil(20/3) = 7
    assert checkpoint_steps(7, 1) == (7,)
    assert checkpoint_steps(5, 5) == (1, 2, 3, 4, 5)
    assert checkpoint_steps(9600, 8) == (1200, 2400, 3600, 4800, 6000, 7200, 8400, 9600)
    for total, n in ((5, 0), (5, 6), (0, 1)):
        with pytest.raises(ZooError):
            checkpoint_steps(total, n)


def test_the_fresh_recipe_scales_the_steps_and_sets_seed_and_weight_decay() -> None:
    rec = fresh_recipe("lm-pydoc-tiny", train_seed=3, steps_multiplier=32, weight_decay=0.0)
    assert rec["train"]["steps"] == 9600 and rec["train"]["seed"] == 3 and rec["train"]["weight_decay"] == 0.0
    plain = recipe("lm-pydoc-tiny")
    assert recipe_key(fresh_recipe("lm-pydoc-tiny")) == recipe_key(plain)  # multiplier 1, recipe's decay: load's recipe
    assert fresh_recipe("lm-pydoc-tiny", steps_multiplier=0.5)["train"]["steps"] == 150
    assert fresh_recipe("lm-pydoc-tiny", lr_multiplier=3.0)["train"]["lr"] == pytest.approx(3 * plain["train"]["lr"])
    assert recipe_key(fresh_recipe("lm-pydoc-tiny", lr_multiplier=3.0)) != recipe_key(plain)
    bad_options: tuple[dict[str, float], ...] = (
        {"steps_multiplier": 0.0},
        {"steps_multiplier": -1.0},
        {"steps_multiplier": 1e-4},
        {"weight_decay": -0.1},
        {"lr_multiplier": 0.0},
        {"lr_multiplier": float("nan")},
    )
    for bad in bad_options:
        with pytest.raises(ZooError):
            fresh_recipe("lm-pydoc-tiny", **bad)  # type: ignore[arg-type]
    with pytest.raises(ZooError, match="classify model"):
        fresh_recipe("cnn-digits")
    with pytest.raises(ZooError, match="no model"):
        fresh_recipe("lm-nope")


def test_the_hook_runs_at_exactly_the_asked_steps_in_training_mode_and_leaves_the_weights_as_without_it() -> None:
    seen: list[tuple[int, bool, str]] = []

    def hook(step: int, model: nn.Module) -> None:
        seen.append((step, model.training, weights_fingerprint(model)))

    # 0.05 x 300 = 15 steps
    hooked = train_fresh("lm-pydoc-tiny", steps_multiplier=0.05, on_step=hook, checkpoints=(3, 7, 15), progress=lambda *_: None)
    assert [s for s, _, _ in seen] == [3, 7, 15]
    assert all(training for _, training, _ in seen)
    assert seen[-1][2] == hooked.fingerprint  # the last checkpoint is the returned model
    assert len({f for _, _, f in seen}) == 3  # each step changed the weights
    plain = train_fresh("lm-pydoc-tiny", steps_multiplier=0.05, progress=lambda *_: None)
    assert plain.fingerprint == hooked.fingerprint
    assert plain.recipe["train"]["steps"] == 15 and not plain.model.training
    with pytest.raises(ZooError, match="outside"):
        train_fresh("lm-pydoc-tiny", steps_multiplier=0.05, on_step=hook, checkpoints=(16,))


def test_multiplier_one_with_the_recipes_decay_gives_the_cached_weights_and_another_decay_does_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COEVO_CACHE", str(tmp_path))
    monkeypatch.setitem(RECIPES["lm-pydoc-tiny"]["train"], "steps", 20)  # a short recipe: the same code path, in seconds
    cached = load("lm-pydoc-tiny", progress=lambda *_: None)
    assert cached.note == "trained"
    files = sorted(tmp_path.rglob("*"))
    fresh = train_fresh("lm-pydoc-tiny", weight_decay=RECIPES["lm-pydoc-tiny"]["train"]["weight_decay"], progress=lambda *_: None)
    assert fresh.key == cached.key and fresh.fingerprint == cached.fingerprint
    assert fresh.baseline == pytest.approx(cached.baseline)
    assert sorted(tmp_path.rglob("*")) == files  # nothing cached
    again = load("lm-pydoc-tiny", progress=lambda *_: None)
    assert again.note == "loaded" and again.fingerprint == cached.fingerprint
    other = train_fresh("lm-pydoc-tiny", weight_decay=0.0, progress=lambda *_: None)
    assert other.fingerprint != cached.fingerprint
    seed = train_fresh("lm-pydoc-tiny", train_seed=1, progress=lambda *_: None)
    assert seed.fingerprint == load("lm-pydoc-tiny", train_seed=1, progress=lambda *_: None).fingerprint
