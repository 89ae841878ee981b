"""The layer-freezing family's configuration: the defaults and bounds its tool and problem share, declared once.

One training run's defaults are :class:`~coevo.sim.freeze.train.FreezeConfig`'s own (the cache
method, its codec, progressive bits and qualities, augmentation share and copies);
:class:`FreezeFamilyConfig` names them with bounds and help, and adds the models and epochs.
``tools/freeze.py`` (``freeze.train``) and ``search/freeze/problem.py`` (the ``freeze`` problem)
read their defaults and bounds from here. ``search_`` fields are the problem's own: a search
trains every design, so it uses the small digits CNN for a few epochs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coevo.sim.freeze.settings import PROGRESSIVE_BITS, PROGRESSIVE_QUALITY, THRESHOLDS, FreezeConfig


@dataclass(frozen=True)
class FreezeFamilyConfig:
    """Defaults and bounds of the freezing family (each field's ``metadata``: ``help``, ``unit``, bounds)."""

    model: str = field(default="cnn-mnist5k", metadata={"help": "zoo CNN trained from scratch"})
    search_model: str = field(default="cnn-digits", metadata={"help": "zoo CNN trained from scratch"})
    method: str = field(
        default=FreezeConfig.method,
        metadata={
            "help": "cache: frozen prefix's outputs cached on disk, the rest trains from the cache; naive: frozen blocks still "
            "run forward every step; full: no freezing"
        },
    )
    schedule: str = field(
        default=FreezeConfig.schedule, metadata={"help": "auto: freeze a block when its criterion plateaus; fixed: freeze_at"}
    )
    criterion: str = field(
        default=FreezeConfig.criterion,
        metadata={
            "help": f"auto: cka (CKA of a block's output between epochs >= threshold, default {THRESHOLDS['cka']}) or gradnorm "
            f"(relative change of its mean gradient norm <= threshold, default {THRESHOLDS['gradnorm']})"
        },
    )
    augment: str = field(
        default=FreezeConfig.augment,
        metadata={
            "help": "augmentation from the cache: similarity-aware (augmented copies of the most augmentation-sensitive "
            "channels), none (clean features only), full (augmented copies of every channel)"
        },
    )
    codec: str = field(default=FreezeConfig.codec, metadata={"help": "cache codec"})
    bits: tuple[int, ...] = field(
        default=PROGRESSIVE_BITS, metadata={"help": "bits of the cache when 1, 2, 3 blocks are frozen", "unit": "bits"}
    )
    quality: tuple[int, ...] = field(
        default=PROGRESSIVE_QUALITY, metadata={"help": "jpeg/webp quality of the cache when 1, 2, 3 blocks are frozen (1-100)"}
    )
    share: float = field(
        default=FreezeConfig.share,
        metadata={"help": "similarity-aware: share of channels cached with augmented copies", "unit": "share", "ge": 0, "le": 1},
    )
    versions: int = field(
        default=FreezeConfig.versions, metadata={"help": "augmented copies cached per sample", "unit": "copies", "ge": 0, "le": 8}
    )
    max_frozen: int = field(
        default=FreezeConfig.max_frozen, metadata={"help": "auto: most blocks frozen (the head always trains)", "ge": 0, "le": 3}
    )
    search_epochs: int = field(
        default=8,
        metadata={"help": "training epochs per design (short runs keep a search fast)", "unit": "epochs", "ge": 1, "le": 40},
    )
    seed: int = field(default=FreezeConfig.seed, metadata={"help": "seed of initialisation, batch order and augmentation", "ge": 0})


__all__ = ["FreezeFamilyConfig"]
