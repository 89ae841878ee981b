"""Layer freezing with a compressed on-disk feature cache (issue 21): see :mod:`sim.freeze.train` and docs/freezing.md.

>>> from coevo.sim.freeze import FreezeConfig, train_zoo
>>> r = train_zoo("cnn-digits", FreezeConfig(method="cache", codec="jpeg", epochs=6))  # doctest: +SKIP
>>> r.val_accuracy, r.macs, r.cache_bytes                                               # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coevo.sim._lazy import lazy_exports

if TYPE_CHECKING:  # the names load on first use (sim/_lazy.py): listing problems or tools imports no torch
    from coevo.sim.freeze.cache import CODECS, CacheCorruptError, CacheWriteError, Codec, read_file, write_file
    from coevo.sim.freeze.similarity import augment, channel_sensitivity, linear_cka, pick_channels
    from coevo.sim.freeze.stages import MacCounter, split
    from coevo.sim.freeze.train import AUGMENTS, METHODS, N_BLOCKS, FreezeConfig, FreezeResult, train, train_zoo

__all__ = [
    "AUGMENTS",
    "CODECS",
    "METHODS",
    "N_BLOCKS",
    "CacheCorruptError",
    "CacheWriteError",
    "Codec",
    "FreezeConfig",
    "FreezeResult",
    "MacCounter",
    "augment",
    "channel_sensitivity",
    "linear_cka",
    "pick_channels",
    "read_file",
    "split",
    "train",
    "train_zoo",
    "write_file",
]

__getattr__ = lazy_exports(__name__, __file__)
