"""The shared model zoo: small real models trained by coevo on real data that installs offline.

>>> from coevo.sim.zoo import load
>>> zm = load("cnn-digits")          # trained the first time (seconds), loaded from the cache after
>>> zm.evaluate(zm.model, "val")     # accuracy in %                         # doctest: +SKIP

Serves quantization, pruning and the accelerator tools; each of those also takes a user's own
``torch.nn.Module`` and data loader. See :mod:`sim.zoo.registry` for the cache and recipes.
"""

from coevo.sim.zoo.data import Split
from coevo.sim.zoo.models import ByteGPT, DigitsCNN, DigitsMLP, MnistCNN
from coevo.sim.zoo.registry import (
    RECIPES,
    ZooError,
    ZooModel,
    build,
    cache_dir,
    cached_info,
    folds,
    load,
    names,
    parameter_count,
    recipe,
    recipe_key,
)

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
]
