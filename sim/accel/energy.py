"""Bit-level MAC energy of a weight-stationary systolic array, driven by a layer's real activations.

In a weight-stationary column, the PE at row ``r`` holds weight ``w`` while the layer's
activations stream past, one per cycle. Each cycle its multiplier output (16-bit two's
complement product ``p_t = a_t w``) and its 22-bit partial-sum register
(``s_t = s_in,t + p_t``, the running dot product handed down the column) switch; dynamic
energy is proportional to the bits that toggle (alpha C V^2 with equal C per bit, the
model's assumption; ``mult_weight`` and ``psum_weight`` scale the two parts). For each
int8 weight value the mean toggles per use are measured on the layer's own activation
streams and incoming partial sums (sampled (row, column) positions of the real im2col
matrix), giving an **energy table per layer**: energy per use of each of the 256 values.
Partial-sum transitions are also grouped by their Hamming distance in the 6 most
significant bits (sign-extension region), where most of the weight dependence lies.

Units: bit toggles per use (relative energy; multiply by a technology's energy per toggle).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PRODUCT_BITS = 16
PSUM_BITS = 22
MSB_BITS = 6
VALUES = np.arange(-128, 128)
"""The int8 weight values, in table order (index = value + 128)."""


def toggles(a: np.ndarray, b: np.ndarray, bits: int) -> np.ndarray:
    """Bits that differ between the ``bits``-bit two's complement forms of ``a`` and ``b``."""
    mask = (1 << bits) - 1
    return np.bitwise_count((a.astype(np.int64) ^ b.astype(np.int64)) & mask).astype(np.int64)


def msb_distance(a: np.ndarray, b: np.ndarray, bits: int = PSUM_BITS, msb: int = MSB_BITS) -> np.ndarray:
    """Hamming distance over the ``msb`` most significant of ``bits`` bits."""
    shift = bits - msb
    return np.bitwise_count(((a.astype(np.int64) ^ b.astype(np.int64)) >> shift) & ((1 << msb) - 1)).astype(np.int64)


@dataclass(frozen=True)
class EnergyTable:
    """Energy per use of each int8 weight value in one layer."""

    layer: str
    energy: np.ndarray
    """(256,) energy per use, index = value + 128."""
    mult_toggles: np.ndarray
    psum_toggles: np.ndarray
    msb_groups: np.ndarray
    """(256, MSB_BITS + 1): share of partial-sum transitions by MSB Hamming distance."""

    def of(self, values: np.ndarray) -> np.ndarray:
        """Energy per use of each int8 value in ``values``."""
        return self.energy[np.asarray(values, dtype=np.int64) + 128]

    def cheapest(self, count: int) -> np.ndarray:
        """The ``count`` lowest-energy int8 values (0 always among them), sorted by value."""
        order = np.argsort(self.energy, kind="stable")
        chosen = set((VALUES[order[:count]]).tolist()) | {0}
        while len(chosen) > count:  # 0 was forced in: drop the dearest other value
            chosen.remove(max(chosen - {0}, key=lambda v: self.energy[v + 128]))
        return np.array(sorted(chosen), dtype=np.int64)


def energy_table(
    layer: str,
    acts: np.ndarray,
    weights: np.ndarray,
    *,
    rows: int = 32,
    positions: int = 64,
    stream: int = 256,
    seed: int = 0,
    mult_weight: float = 1.0,
    psum_weight: float = 1.0,
) -> EnergyTable:
    """Measure a layer's energy table (module doc).

    Args:
        acts: (M, K) int8 activations as they stream (im2col rows for a conv), in order.
        weights: (K, N) int8 weights.
        rows: array rows: partial sums restart every ``rows`` reduction elements (one tile).
        positions: (k, n) positions sampled; stream: consecutive cycles per position.
    """
    acts = np.asarray(acts, dtype=np.int64)
    weights = np.asarray(weights, dtype=np.int64)
    m, k = acts.shape
    n = weights.shape[1]
    rng = np.random.default_rng(seed)
    ks = rng.integers(0, k, positions)
    ns = rng.integers(0, n, positions)
    length = min(stream, m)
    start = rng.integers(0, m - length + 1, positions)
    t = start[:, None] + np.arange(length)[None, :]  # (P, T) stream rows
    a = acts[t, ks[:, None]]  # (P, T) activation stream at each position
    # incoming partial sum: the dot product over the earlier rows of the same tile
    tile_start = (ks // rows) * rows
    s_in = np.zeros_like(a)
    for p in range(positions):
        lo, hi = tile_start[p], ks[p]
        if hi > lo:
            s_in[p] = acts[t[p]][:, lo:hi] @ weights[lo:hi, ns[p]]
    w = VALUES[:, None, None]  # (256, 1, 1)
    prod = a[None] * w  # (256, P, T)
    psum = s_in[None] + prod
    mult = toggles(prod[..., 1:], prod[..., :-1], PRODUCT_BITS).mean(axis=(1, 2))
    reg = toggles(psum[..., 1:], psum[..., :-1], PSUM_BITS).mean(axis=(1, 2))
    msb = msb_distance(psum[..., 1:], psum[..., :-1]).reshape(len(VALUES), -1)
    groups = np.stack([(msb == g).mean(axis=1) for g in range(MSB_BITS + 1)], axis=1)
    return EnergyTable(layer, mult_weight * mult + psum_weight * reg, mult, reg, groups)
