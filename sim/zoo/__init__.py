"""The shared model zoo: small real models trained by coevo on real data that installs offline.

>>> from coevo.sim.zoo import load
>>> zm = load("cnn-digits")          # trained the first time (seconds), loaded from the cache after
>>> zm.evaluate(zm.model, "val")     # accuracy in %                         # doctest: +SKIP

Serves quantization, pruning and the accelerator tools; each of those also takes a user's own
``torch.nn.Module`` and data loader. See :mod:`sim.zoo.registry` for the cache and recipes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.sim._lazy import lazy_exports

if TYPE_CHECKING:  # the names load on first use (sim/_lazy.py): listing problems or tools imports no torch
    from coevo.sim.zoo.data import Split
    from coevo.sim.zoo.models import ByteGPT, DigitsCNN, DigitsMLP, MnistCNN
    from coevo.sim.zoo.recipes import (
        RECIPES,
        ZooError,
        cache_dir,
        cached_info,
        names,
        recipe,
        recipe_key,
        recipe_parameter_count,
    )
    from coevo.sim.zoo.registry import ZooModel, build, folds, load, parameter_count, used_models, weights_fingerprint

__all__ = [
    "RECIPES",
    "ByteGPT",
    "DigitsCNN",
    "DigitsMLP",
    "MnistCNN",
    "Split",
    "ZooError",
    "ZooModel",
    "build",
    "cache_dir",
    "cached_info",
    "folds",
    "load",
    "names",
    "parameter_count",
    "recipe",
    "recipe_key",
    "recipe_parameter_count",
    "used_models",
    "weights_fingerprint",
]

__getattr__ = lazy_exports(__name__, __file__)
