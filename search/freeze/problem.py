"""Layer freezing with a compressed feature cache as a coevo problem: accuracy vs training MACs vs cache size.

A design sets, for a zoo CNN trained from scratch for ``epochs`` epochs with the cache method of
:mod:`sim.freeze` (fixed schedule):

* ``f1``, ``f2``, ``f3`` in {0.25, 0.5, 0.75, 1.0}: the share of the epochs trained before block
  ``k`` (conv1, conv2, conv3) freezes; blocks freeze from the input on, so block ``k`` freezes at the
  largest of ``f1..fk`` (1.0: never). The epoch is ``max(1, round(share x epochs))``.
* ``b1``, ``b2``, ``b3`` in {8, 6, 4}: bits of the cache while 1, 2, 3 blocks are frozen (codec
  ``quant`` or ``zstd``); with ``jpeg``/``webp`` they pick the quality: 8 -> 90, 6 -> 75, 4 -> 50.
* ``share`` in {0, 0.125, 0.25, 0.5, 1}: the share of channels cached with augmented copies
  (similarity-aware: the most augmentation-sensitive ones); 0 caches clean features only, 1 full copies.

Objectives:

* ``accuracy`` (maximised, expensive, measured): validation accuracy (%) of the final model.
* ``train_gmac`` (minimised, cheap, counted): forward + backward GMACs training executes, cache
  building included. It follows from the design alone (:func:`sim.freeze.train.expected_macs`, which the
  tests check equals what the run's per-call counter counts), so proposers get it free.
* ``cache_mb`` (minimised, expensive, measured): the largest cache on disk (MB), from the files written.

Wall time is not an objective: on a shared machine it is noise around the counted MACs (the
``freeze.train`` tool and the figures report it). Deterministic per seed (CPU, fixed seeds).
Niches split the space by the number of blocks frozen by the end: 0, 1, 2, 3.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, cast

import numpy as np

from coevo.search.niches import Niche
from coevo.search.problem import LevelProblem, Levels, Objective, ProblemOptions, config_field
from coevo.sim.freeze.config import FreezeFamilyConfig
from coevo.sim.freeze.settings import Augment

FRACTIONS = (0.25, 0.5, 0.75, 1.0)
BITS = (8, 6, 4)
SHARES = (0.0, 0.125, 0.25, 0.5, 1.0)
QUALITY = dict(zip(FreezeFamilyConfig.bits, FreezeFamilyConfig.quality, strict=True))
"""jpeg/webp: the quality standing for a stage's bits (8 -> 90, 6 -> 75, 4 -> 50), the family's progressive pairs."""
LEVELS: dict[str, tuple[float, ...]] = {
    "f1": FRACTIONS, "f2": FRACTIONS, "f3": FRACTIONS, "b1": BITS, "b2": BITS, "b3": BITS, "share": SHARES,
}  # fmt: skip
PARAMS = tuple(LEVELS)
TABLE = {p: Levels(v, fmt="g") for p, v in LEVELS.items()}
Design = tuple[float, float, float, int, int, int, float]


@functools.cache
def _setup(model: str) -> tuple[dict[str, Any], dict[str, Any], list[int], list[int]]:
    """The recipe, splits, per-sample layer MACs and conv output channels of a zoo CNN (once per process)."""
    import torch

    from coevo.sim.freeze.train import layer_forward_macs
    from coevo.sim.zoo import build, recipe
    from coevo.sim.zoo.registry import splits_of

    rec = recipe(model)
    splits, _ = splits_of(rec)
    net = build(rec)
    channels = [int(m.out_channels) for m in (net.conv1, net.conv2, net.conv3) if isinstance(m, torch.nn.Conv2d)]
    return rec, splits, layer_forward_macs(net, splits["train"].x), channels


class FreezeOptions(ProblemOptions):
    """Options of the ``freeze`` problem."""

    model: Literal["cnn-digits", "cnn-mnist5k"] = config_field(FreezeFamilyConfig, "search_model")
    epochs: int = config_field(FreezeFamilyConfig, "search_epochs")
    codec: Literal["zstd", "quant", "jpeg", "webp"] = config_field(
        FreezeFamilyConfig,
        "codec",
        description="cache codec: zstd/quant use the design's bits, jpeg/webp its quality (8->90, 6->75, 4->50)",
    )
    versions: int = config_field(
        FreezeFamilyConfig, "versions", description="augmented copies cached per sample for the augmented channels", ge=1
    )  # a design with augmented channels needs at least one copy
    seed: int = config_field(FreezeFamilyConfig, "seed")


class FreezeProblem(LevelProblem):
    """Freeze points, cache compression per stage and augmentation share (module doc)."""

    name = "freeze"
    Options = FreezeOptions
    run_group = "model"
    design_label = "freezing"
    design_noun = "a freezing design"
    levels = TABLE
    design_format = "f1=F f2=F f3=F b1=B b2=B b3=B share=S with F in 0.25/0.5/0.75/1.0, B in 8/6/4, S in 0/0.125/0.25/0.5/1"
    example_options: ClassVar[Mapping[str, Any]] = {"model": "cnn-digits", "epochs": 2}
    objectives = (
        Objective("accuracy", "maximize", "%", "expensive", bounds=(0.0, 100.0)),
        Objective("train_gmac", "minimize", "GMAC", "cheap", depends_on=("model", "epochs", "versions"), bounds=(0.0, None)),
        Objective("cache_mb", "minimize", "MB", "expensive", bounds=(0.0, None)),
    )

    def __init__(self, options: FreezeOptions | None = None, /, **values: Any) -> None:
        super().__init__(options, **values)
        self._cache: dict[Design, dict[str, float]] = {}

    def explain_encoding(self) -> str:
        return (
            f"A design trains {self.options.model} from scratch for {self.options.epochs} epochs with layer freezing and an "
            "on-disk feature cache. f1, f2, f3 (0.25/0.5/0.75/1.0) are the share of the epochs before conv1, conv2, conv3 "
            "freeze; a block freezes at the largest share of itself and the blocks before it (1.0 never). b1, b2, b3 "
            f"(8/6/4) are the cache's bits while 1, 2, 3 blocks are frozen (codec {self.options.codec}; jpeg/webp map "
            "8/6/4 to quality 90/75/50). share is the part of channels cached with augmented copies (the most "
            f"augmentation-sensitive; 0 none, 1 all). It is written as {self.design_format}."
        )

    # ---- what a design runs

    def freeze_at(self, point: Any) -> tuple[int | None, ...]:
        """Epochs trained before blocks 1, 2, 3 freeze (None: never), from the running maximum of f1..f3."""
        out: list[int | None] = []
        top = 0.0
        for f in point[:3]:
            top = max(top, float(f))
            out.append(None if top >= 1.0 else max(1, round(top * self.options.epochs)))
        return tuple(out)

    def config(self, point: Any) -> Any:
        """The :class:`sim.freeze.FreezeConfig` of a design."""
        from coevo.sim.freeze import FreezeConfig

        bits = tuple(int(b) for b in point[3:6])
        share = float(point[6])
        augment: Augment = "none" if share == 0 else "full" if share == 1 else "similarity-aware"
        return FreezeConfig(
            method="cache", schedule="fixed", freeze_at=self.freeze_at(point), codec=self.options.codec, bits=bits,
            quality=tuple(QUALITY[b] for b in bits), augment=augment, share=share, versions=self.options.versions,
            epochs=self.options.epochs, seed=self.options.seed,
        )  # fmt: skip

    def evaluate(self, point: Any) -> dict[str, float]:
        design = cast(Design, tuple(point))
        if design not in self._cache:
            from coevo.sim.freeze import train

            rec, splits, _, _ = _setup(self.options.model)
            result = train(rec, splits, self.config(design), cache_dir=None)
            self._cache[design] = {
                "accuracy": float(result.val_accuracy),
                "train_gmac": result.macs / 1e9,
                "cache_mb": result.cache_bytes / 1e6,
            }
        return dict(self._cache[design])

    def acquisition_bounds(self) -> tuple[float, float]:
        """Accuracy floor 80 % (a useful 10-class digit classifier; a constant), and full training's counted GMACs."""
        return 80.0, self._gmac((1.0, 1.0, 1.0, 8, 8, 8, 0.0)) + 1e-9

    def _gmac(self, point: Any) -> float:
        from coevo.sim.freeze.train import expected_macs

        _, splits, layers, channels = _setup(self.options.model)
        return expected_macs(layers, channels, self.config(point), self.options.epochs, len(splits["train"])) / 1e9

    def _frozen(self, point: Any) -> int:
        return sum(1 for f in self.freeze_at(point) if f is not None and f < self.options.epochs)

    def niches(self) -> tuple[Niche, ...]:
        return (
            Niche("none", "no block freezes before the end: full training (the cache is never used)", lambda p: self._frozen(p) == 0),
            Niche("one", "conv1 freezes: the cache holds conv1's outputs", lambda p: self._frozen(p) == 1),
            Niche("two", "conv1 and conv2 freeze", lambda p: self._frozen(p) == 2),
            Niche("three", "every conv freezes; only the head trains at the end", lambda p: self._frozen(p) == 3),
        )

    # ---- operators for the co-evolution engine (Evolvable)

    def features(self, points: Sequence[Any]) -> np.ndarray:
        """The seven parameters as numbers, with the effective freeze shares (running maximum) in place of f1..f3."""
        rows = []
        for p in points:
            eff = np.maximum.accumulate(np.array(p[:3], dtype=float))
            rows.append([*eff, *map(float, p[3:])])
        return np.array(rows, dtype=float).reshape(len(points), len(PARAMS))

    def cheap_values(self, points: Sequence[Any]) -> dict[str, np.ndarray]:
        return {"train_gmac": np.array([self._gmac(p) for p in points], dtype=float)}


__all__ = ["FreezeOptions", "FreezeProblem"]
