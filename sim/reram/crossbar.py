"""Crossbar geometry, weight quantization with bit-slicing, conductances, and stuck-at fault maps.

Conventions (used by every module of :mod:`sim.reram`):

* A layer's weight ``W [out, in]`` is mapped transposed: inputs drive the wordlines (rows),
  each output is read on bitlines (columns). A Conv2d is mapped through its im2col matrix
  (``in = C_in * k_h * k_w``).
* Signed weights use a differential pair: a positive and a negative array; a weight lives in
  one of the two (the other holds level 0), and the periphery subtracts the two bitlines.
* The magnitude is quantized to ``weight_bits`` bits with one scale per layer
  (``scale = max|W| / (2**weight_bits - 1)``) and bit-sliced into ``ceil(weight_bits / bits_per_cell)``
  cells on adjacent bitlines, least significant slice first; a cell holds one of
  ``2**bits_per_cell`` conductance levels (``G = g_min + level / (levels - 1) * (g_max - g_min)``).
* Stuck-at-0 (SA0): the cell is stuck in its high-resistance state, level 0 (``g_min``).
  Stuck-at-1 (SA1): stuck in its low-resistance state, the top level (``g_max``). Faults are
  independent per cell with a given rate, and a fault is SA0 with probability ``sa0 / (sa0 + sa1)``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from coevo.sim.errors import UserInputError

OK, SA0, SA1 = 0, 1, 2
"""Fault codes of a cell in a fault map."""


@dataclass(frozen=True)
class CrossbarConfig:
    """One crossbar type and the weight encoding on it.

    Args:
        rows: wordlines per crossbar.
        cols: bitlines per crossbar.
        weight_bits: magnitude bits of a weight (the sign is the differential pair).
        bits_per_cell: bits one cell stores (``2**bits_per_cell`` conductance levels).
        g_min_us: conductance of level 0 (HRS), microsiemens.
        g_max_us: conductance of the top level (LRS), microsiemens.
    """

    rows: int = 64
    cols: int = 64
    weight_bits: int = 8
    bits_per_cell: int = 2
    g_min_us: float = 1.0
    g_max_us: float = 100.0

    def __post_init__(self) -> None:
        if not (1 <= self.rows <= 4096 and 1 <= self.cols <= 4096):
            raise UserInputError(f"crossbar of {self.rows}x{self.cols}: rows and cols must each be between 1 and 4096")
        if not 1 <= self.weight_bits <= 16:
            raise UserInputError(f"weight_bits={self.weight_bits}: use 1 to 16 bits of magnitude")
        if not 1 <= self.bits_per_cell <= min(4, self.weight_bits):
            raise UserInputError(
                f"bits_per_cell={self.bits_per_cell}: use 1 to {min(4, self.weight_bits)} (at most 4 bits, 16 conductance "
                "levels, per cell, and no more than weight_bits)"
            )
        if not 0 <= self.g_min_us < self.g_max_us:
            raise UserInputError(f"conductances g_min={self.g_min_us} uS, g_max={self.g_max_us} uS: need 0 <= g_min < g_max")

    @property
    def levels(self) -> int:
        """Conductance levels per cell."""
        return 2**self.bits_per_cell

    @property
    def slices(self) -> int:
        """Cells (adjacent bitlines) per weight magnitude."""
        return math.ceil(self.weight_bits / self.bits_per_cell)

    def conductance(self, level: np.ndarray) -> np.ndarray:
        """Conductance in microsiemens of cells at ``level``."""
        return self.g_min_us + np.asarray(level, dtype=float) / (self.levels - 1) * (self.g_max_us - self.g_min_us)


def quantize_magnitudes(weight: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Split ``weight`` into positive and negative integer magnitudes of ``bits`` bits and the layer scale.

    Returns:
        ``(q_pos, q_neg, scale)``: ``weight ~= scale * (q_pos - q_neg)``, each ``q`` in ``[0, 2**bits - 1]``,
        at most one of the two non-zero per weight. An all-zero weight gets scale 1.
    """
    w = np.asarray(weight, dtype=np.float64)
    top = float(np.abs(w).max()) if w.size else 0.0
    scale = top / (2**bits - 1) if top > 0 else 1.0
    q = np.rint(np.abs(w) / scale).astype(np.int64)
    return np.where(w > 0, q, 0), np.where(w < 0, q, 0), scale


def slice_levels(q: np.ndarray, bits_per_cell: int, n: int) -> np.ndarray:
    """The base-``2**bits_per_cell`` digits of non-negative integers ``q``: shape ``q.shape + (n,)``, least significant first.

    Raises:
        ValueError: a value needs more than ``n`` digits.
    """
    base = 2**bits_per_cell
    q = np.asarray(q, dtype=np.int64)
    if q.size and (q.min() < 0 or q.max() >= base**n):
        raise ValueError(f"values must lie in [0, {base**n - 1}] to fit {n} cells of {bits_per_cell} bits")
    return np.stack([(q // base**s) % base for s in range(n)], axis=-1)


def unslice(levels: np.ndarray, bits_per_cell: int) -> np.ndarray:
    """Inverse of :func:`slice_levels` (the last axis holds the slices)."""
    base = 2**bits_per_cell
    weights = base ** np.arange(levels.shape[-1], dtype=np.int64)
    return np.asarray(levels, dtype=np.int64) @ weights


_RATIO = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*:\s*(\d+(?:\.\d*)?)\s*$")


def parse_ratio(text: str) -> float:
    """The SA0 share of faults from an ``"SA0:SA1"`` ratio such as ``"9:1"`` (-> 0.9).

    Raises:
        UserInputError: not two non-negative numbers separated by ``:``, or both zero.
    """
    m = _RATIO.match(text) if isinstance(text, str) else None
    if m is None:
        raise UserInputError(f"sa0_sa1={text!r}: write the SA0:SA1 ratio as two non-negative numbers such as '9:1' or '1:1'")
    a, b = float(m.group(1)), float(m.group(2))
    if a + b == 0:
        raise UserInputError(f"sa0_sa1={text!r}: both parts are zero; give at least one positive part such as '9:1'")
    return a / (a + b)


def check_rate(rate: float) -> float:
    """``rate`` as a float if it is a probability.

    Raises:
        UserInputError: outside [0, 1] or not finite.
    """
    r = float(rate)
    if not (math.isfinite(r) and 0.0 <= r <= 1.0):
        raise UserInputError(f"fault_rate={rate!r}: a fault rate is the share of faulty cells, between 0 and 1 (0.02 is 2 %)")
    return r


def sample_faults(rng: np.random.Generator, shape: tuple[int, ...], rate: float, sa0_share: float) -> np.ndarray:
    """A fault map (``OK``/``SA0``/``SA1`` codes, int8): each cell faulty with probability ``rate``, SA0 with ``sa0_share``."""
    rate = check_rate(rate)
    u = rng.random(shape)
    return np.where(u < rate * sa0_share, SA0, np.where(u < rate, SA1, OK)).astype(np.int8)


def stuck(levels: np.ndarray, faults: np.ndarray, top: int) -> np.ndarray:
    """The levels cells read: SA0 cells read 0, SA1 cells read ``top``, the others what was written."""
    return np.where(faults == SA0, 0, np.where(faults == SA1, top, levels))


def harmful(levels: np.ndarray, faults: np.ndarray, top: int, used: np.ndarray) -> np.ndarray:
    """Used cells whose stuck level differs from the level written (a fault on a cell that holds 0 and sticks at 0 is harmless)."""
    return used & (((faults == SA0) & (levels != 0)) | ((faults == SA1) & (levels != top)))
