"""One freeze training run's settings, without torch (:mod:`sim.freeze.train` runs them and re-exports these names).

Here so that the ``freeze`` problem's options read their defaults without importing torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

from coevo.sim.errors import UserInputError
from coevo.sim.freeze.cache import CODECS, Codec, CodecKind

Method = Literal["full", "naive", "cache"]
Augment = Literal["none", "similarity-aware", "full"]
Schedule = Literal["fixed", "auto"]
METHODS: tuple[Method, ...] = get_args(Method)
AUGMENTS: tuple[Augment, ...] = get_args(Augment)
N_BLOCKS = 3
PROGRESSIVE_BITS = (8, 6, 4)
PROGRESSIVE_QUALITY = (90, 75, 50)
Criterion = Literal["cka", "gradnorm"]
THRESHOLDS: dict[str, float] = {"cka": 0.995, "gradnorm": 0.05}
"""The auto schedule's default threshold per criterion: linear CKA of a block's output between epochs ``>=`` it, or the
relative change of its mean gradient norm ``<=`` it (:attr:`FreezeConfig.cut`)."""


@dataclass(frozen=True)
class FreezeConfig:
    """One training run's settings (module doc); ``epochs`` None takes the zoo recipe's."""

    method: Method = "cache"
    schedule: Schedule = "auto"
    freeze_at: tuple[int | None, ...] = (None, None, None)
    criterion: Criterion = "cka"
    threshold: float | None = None
    min_epochs: int | None = None
    max_frozen: int = 2
    codec: CodecKind = "zstd"
    bits: tuple[int, ...] = PROGRESSIVE_BITS
    quality: tuple[int, ...] = PROGRESSIVE_QUALITY
    augment: Augment = "similarity-aware"
    versions: int = 3
    share: float = 0.25
    shift: int | None = None
    noise: float = 0.1
    epochs: int | None = None
    seed: int = 0
    probe: int = 256

    @property
    def cut(self) -> float:
        """The auto schedule's threshold: ``threshold`` or the criterion's default (:data:`THRESHOLDS`)."""
        if self.threshold is not None:
            return self.threshold
        return THRESHOLDS[self.criterion]

    def earliest(self, epochs: int) -> int:
        """The first epoch count after which the auto schedule may freeze: ``min_epochs``, or by default the end of the
        one-cycle learning-rate warm-up (30 % of the epochs), when weights have barely moved and every CKA is close to 1."""
        return self.min_epochs if self.min_epochs is not None else max(1, math.ceil(0.3 * epochs))

    def check(self, epochs: int) -> None:
        """Raise :class:`UserInputError` naming the setting to change when the config cannot run for ``epochs`` epochs."""
        if self.method not in METHODS:
            raise UserInputError(f"method {self.method!r}: use one of {', '.join(METHODS)}")
        if self.augment not in AUGMENTS:
            raise UserInputError(f"augment {self.augment!r}: use one of {', '.join(AUGMENTS)}")
        if self.codec not in CODECS:
            raise UserInputError(f"cache codec {self.codec!r}: use one of {', '.join(CODECS)}")
        if epochs < 1:
            raise UserInputError(f"epochs {epochs}: train at least 1 epoch")
        if len(self.bits) != N_BLOCKS or len(self.quality) != N_BLOCKS:
            raise UserInputError(f"bits and quality need one value per freezable block ({N_BLOCKS}), got {self.bits} and {self.quality}")
        for b, q in zip(self.bits, self.quality, strict=True):
            Codec(self.codec, b, q)  # raises on a bad width or quality
        if self.schedule == "fixed":
            if len(self.freeze_at) != N_BLOCKS:
                raise UserInputError(f"freeze_at needs {N_BLOCKS} entries (epochs, or None for never), got {list(self.freeze_at)}")
            given = [f for f in self.freeze_at if f is not None]
            if None in self.freeze_at and any(f is not None for f in self.freeze_at[self.freeze_at.index(None) :]):
                raise UserInputError(f"freeze_at {list(self.freeze_at)}: blocks freeze from the input on, so no epoch may follow a None")
            if any(f < 1 or f > epochs for f in given) or given != sorted(given):
                raise UserInputError(
                    f"freeze_at {list(self.freeze_at)}: epochs must rise (block k+1 freezes no earlier than block k) and lie in 1..{epochs}"
                )
        elif self.schedule != "auto":
            raise UserInputError(f"schedule {self.schedule!r}: use 'fixed' or 'auto'")
        if not 0 <= self.max_frozen <= N_BLOCKS:
            raise UserInputError(f"max_frozen {self.max_frozen}: 0 to {N_BLOCKS} blocks")
        if not 0.0 <= self.share <= 1.0:
            raise UserInputError(f"share {self.share}: the share of channels cached augmented lies in [0, 1]")
        if not 0 <= self.versions <= 16:
            raise UserInputError(f"versions {self.versions}: 0 to 16 augmented copies")
        if self.criterion not in ("cka", "gradnorm"):
            raise UserInputError(f"criterion {self.criterion!r}: use 'cka' or 'gradnorm'")
