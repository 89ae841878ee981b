"""Bit-level MAC energy of a weight-stationary systolic array, driven by a layer's real activations,
and the energy of a whole inference on the array (compute + SRAM + DRAM).

**Compute.** In a weight-stationary column, the PE at row ``r`` holds weight ``w`` while the
layer's activations stream past, one per cycle. Each cycle its multiplier output (16-bit
two's complement product ``p_t = a_t w``) and its 22-bit partial-sum register
(``s_t = s_in,t + p_t``, the running dot product handed down the column) switch; dynamic
energy follows the bits that toggle (alpha C V^2).

Partial-sum transitions are **grouped by the Hamming distance of consecutive partial sums in
their 6 most significant bits** (the sign-extension region: a sign change of the running sum
flips all of them, a small step flips none). Each group ``g = 0..6`` gets its own cost per
transition, ``c_g`` = (mean toggles of the 16 low bits over the transitions in that group) +
``msb_weight x g`` (the g MSB flips, each weighted by ``msb_weight``, the capacitance of an MSB
flip-flop and its sign-extension fan-out relative to a low bit; 1.0 = equal capacitance, the
default, for want of a layout to extract it from). The costs are measured per layer, pooled over
the layer's sampled transitions for all 256 candidate weight values so that every group is
populated. Partial-sum energy is then ``sum_g N_g x c_g`` (``N_g``: transitions in group g), both
in a value's table entry (shares of its transitions per group) and in the energy of a model's
real weights (:func:`measure_layer`): the grouping, not a per-value mean, carries the weight
dependence into the energy.

**Where the groups are populated.** The grouping separates magnitude classes only where the
running sums reach the MSB window. On the zoo CNNs with the paper's 22-bit register and a 16-row
array, partial sums stay below 2^16, so the 6 MSBs are pure sign extension: every transition is
distance 0 or 6 (sign flip or not) and groups 1-5 are empty. Longer accumulations (``rows``) grow
the sums only slowly (up to ~2^17 over a whole fc1 dot product), so the register width is a
parameter too: ``psum_bits`` (and ``msb_bits``) move the MSB window; :func:`fitted_psum_bits`
sizes the register to the partial sums a layer actually produces (the window then covers the top
of their range, and every group can be populated), :func:`worst_case_psum_bits` to the largest
sum ``rows`` int8 products can make (22 bits = 64 rows, the paper's width). Sums wider than the
register wrap (two's complement), as an unsaturated register would.

Tables are measured on a given model's real activation streams and incoming partial sums
(sampled (row, column) positions of the real im2col matrix); after a weight restriction the
caller measures them again on the restricted model, whose partial sums differ.

**Units and calibration.** Toggles are turned into picojoules with Horowitz, "Computing's
energy problem", ISSCC 2014 (45 nm, 0.9 V): an 8-bit integer multiply costs 0.2 pJ and a 32-bit
add 0.1 pJ (a 22-bit add: 0.1 x 22/32 pJ, adder energy scaling with width as his 8-/32-bit adds
do) at the activity of uniformly random operands. The energy per toggle is that cost over the
mean toggles of random operands (16-bit product of two independent uniform int8 values,
computed exactly; a uniformly random 22-bit register: 11 toggles). Memory: 20 pJ per 64-bit
read of a 32 KB SRAM (2.5 pJ/byte) and 1.3 nJ per 64-bit DRAM access (162.5 pJ/byte, the low
end of his 1.3-2.6 nJ), from the same table. Everything is a model (simulated), not a chip.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from coevo.sim.accel.systolic import Mapping
from coevo.sim.errors import UserInputError

PRODUCT_BITS = 16
PSUM_BITS = 22
MSB_BITS = 6
GROUPS = MSB_BITS + 1
VALUES = np.arange(-128, 128)
"""The int8 weight values, in table order (index = value + 128)."""

MULT8_PJ = 0.2
"""Horowitz ISSCC 2014, 45 nm: 8-bit integer multiply."""
ADD32_PJ = 0.1
"""Horowitz ISSCC 2014, 45 nm: 32-bit integer add."""
ADD_PJ = ADD32_PJ * PSUM_BITS / 32
"""A 22-bit add, scaled by width from the 32-bit one."""
SRAM_PJ_PER_BYTE = 20.0 / 8
"""Horowitz ISSCC 2014: 20 pJ per 64-bit read of a 32 KB SRAM."""
DRAM_PJ_PER_BYTE = 1300.0 / 8
"""Horowitz ISSCC 2014: 1.3-2.6 nJ per 64-bit DRAM access; the low end."""
PSUM_BYTES = 4
"""Partial sums and outputs travel as 32-bit words (:mod:`sim.accel.systolic`)."""


def check_psum_bits(psum_bits: int, msb_bits: int) -> None:
    """Raise :class:`UserInputError` unless a ``psum_bits`` register with a ``msb_bits`` MSB window is one coevo can model."""
    if not 2 <= psum_bits <= 62:
        raise UserInputError(f"psum_bits must be between 2 and 62 (bits of the partial-sum register), got {psum_bits}")
    if not 1 <= msb_bits < psum_bits:
        raise UserInputError(f"msb_bits must be between 1 and psum_bits - 1 = {psum_bits - 1}, got {msb_bits}")


def worst_case_psum_bits(rows: int) -> int:
    """Two's complement width that holds any sum of ``rows`` int8 x int8 products (range [-16256 rows, 16384 rows]).

    16 bits for one product, 20 for 16 rows, 22 for 64 rows (the paper's register), 24 for 256."""
    if rows < 1:
        raise UserInputError(f"rows must be >= 1 (array rows = accumulation length), got {rows}")
    return (128 * 128 * rows).bit_length() + 1


def fitted_psum_bits(psums: np.ndarray) -> int:
    """Smallest two's complement width that holds every value of ``psums`` (at least 2 bits)."""
    v = np.asarray(psums, dtype=np.int64)
    if v.size == 0:
        return 2
    hi, lo = int(v.max()), int(v.min())
    return max(max(hi, 0).bit_length(), (-min(lo, 0) - 1).bit_length() if lo < 0 else 0, 1) + 1


def toggles(a: np.ndarray, b: np.ndarray, bits: int) -> np.ndarray:
    """Bits that differ between the ``bits``-bit two's complement forms of ``a`` and ``b``."""
    mask = (1 << bits) - 1
    return np.bitwise_count((a.astype(np.int64) ^ b.astype(np.int64)) & mask).astype(np.int64)


def msb_distance(a: np.ndarray, b: np.ndarray, bits: int = PSUM_BITS, msb: int = MSB_BITS) -> np.ndarray:
    """Hamming distance over the ``msb`` most significant of ``bits`` bits."""
    shift = bits - msb
    return np.bitwise_count(((a.astype(np.int64) ^ b.astype(np.int64)) >> shift) & ((1 << msb) - 1)).astype(np.int64)


@functools.cache
def random_product_toggles() -> float:
    """Mean toggles of the 16-bit product between two independent products of uniform int8 operands (exact).

    Bits of independent products are independent across the two cycles, so each bit ``b``
    toggles with probability ``2 q_b (1 - q_b)``, ``q_b`` its probability of being 1 over all
    65,536 operand pairs."""
    p = (VALUES[:, None] * VALUES[None, :]).ravel() & ((1 << PRODUCT_BITS) - 1)
    q = np.array([((p >> b) & 1).mean() for b in range(PRODUCT_BITS)])
    return float((2 * q * (1 - q)).sum())


def pj_per_toggle() -> tuple[float, float]:
    """(multiplier, partial-sum adder/register) energy per toggled bit, pJ (module doc's calibration)."""
    return MULT8_PJ / random_product_toggles(), ADD_PJ / (PSUM_BITS / 2)


def group_costs(
    psum_prev: np.ndarray,
    psum_next: np.ndarray,
    msb_weight: float = 1.0,
    *,
    psum_bits: int = PSUM_BITS,
    msb_bits: int = MSB_BITS,
) -> tuple[np.ndarray, np.ndarray]:
    """Per MSB-distance group (``msb_bits + 1`` of them): (transitions counted, cost per transition in low-bit-toggle units).

    Cost of group g = mean toggles of the ``psum_bits - msb_bits`` low bits over its transitions
    + ``msb_weight * g``. An empty group costs what its definition says with no low-bit toggles
    measured: ``msb_weight * g`` (it never weighs in a total, having no transitions)."""
    check_psum_bits(psum_bits, msb_bits)
    groups = msb_bits + 1
    dist = msb_distance(psum_next, psum_prev, psum_bits, msb_bits).ravel()
    low = toggles(psum_next, psum_prev, psum_bits - msb_bits).ravel()
    counts = np.bincount(dist, minlength=groups)
    low_sum = np.bincount(dist, weights=low, minlength=groups)
    low_mean = np.divide(low_sum, counts, out=np.zeros(groups), where=counts > 0)
    return counts.astype(np.int64), low_mean + msb_weight * np.arange(groups)


@dataclass(frozen=True)
class EnergyTable:
    """Energy per use of each int8 weight value in one layer (toggle units; see :func:`pj_per_toggle`)."""

    layer: str
    energy: np.ndarray
    """(256,) energy per use, index = value + 128: multiplier toggles + partial-sum group costs."""
    mult_toggles: np.ndarray
    psum_toggles: np.ndarray
    """(256,) partial-sum energy per use: sum over groups of share x group cost."""
    msb_groups: np.ndarray
    """(256, msb_bits + 1): share of partial-sum transitions by MSB Hamming distance."""
    group_cost: np.ndarray
    """(msb_bits + 1,) cost of one partial-sum transition in each group (pooled over the layer's transitions)."""
    psum_bits: int = PSUM_BITS
    """Width of the partial-sum register the table was measured with (its top ``len(group_cost) - 1`` bits are the MSB window)."""

    def of(self, values: np.ndarray) -> np.ndarray:
        """Energy per use of each int8 value in ``values``."""
        return self.energy[np.asarray(values, dtype=np.int64) + 128]

    def cheapest(self, count: int, among: np.ndarray | None = None) -> np.ndarray:
        """The ``count`` lowest-energy int8 values (of ``among``, default all 256; 0 always kept), sorted by value."""
        pool = VALUES if among is None else np.unique(np.asarray(among, dtype=np.int64))
        order = pool[np.argsort(self.of(pool), kind="stable")]
        chosen = set(order[:count].tolist()) | {0}
        while len(chosen) > count:  # 0 was forced in: drop the dearest other value
            chosen.remove(max(chosen - {0}, key=lambda v: self.energy[v + 128]))
        return np.array(sorted(chosen), dtype=np.int64)


def streams(
    acts: np.ndarray, weights: np.ndarray, rows: int, positions: int, stream: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sampled (k, n) positions of a WS array: (activation streams (P, T), incoming partial sums (P, T), ks, ns)."""
    acts = np.asarray(acts, dtype=np.int64)
    weights = np.asarray(weights, dtype=np.int64)
    m, k = acts.shape
    if weights.shape[0] != k:
        raise ValueError(f"activations have {k} columns but weights {weights.shape[0]} rows")
    n = weights.shape[1]
    rng = np.random.default_rng(seed)
    ks = rng.integers(0, k, positions)
    ns = rng.integers(0, n, positions)
    length = min(stream, m)
    start = rng.integers(0, m - length + 1, positions)
    t = start[:, None] + np.arange(length)[None, :]  # (P, T) stream rows
    a = acts[t, ks[:, None]]
    # incoming partial sum: the dot product over the earlier rows of the same tile (the array's rows)
    tile_start = (ks // rows) * rows
    s_in = np.zeros_like(a)
    for p in range(positions):
        lo, hi = tile_start[p], ks[p]
        if hi > lo:
            s_in[p] = acts[t[p]][:, lo:hi] @ weights[lo:hi, ns[p]]
    return a, s_in, ks, ns


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
    msb_weight: float = 1.0,
    psum_bits: int = PSUM_BITS,
    msb_bits: int = MSB_BITS,
) -> EnergyTable:
    """Measure a layer's energy table (module doc).

    Args:
        acts: (M, K) int8 activations as they stream (im2col rows for a conv), in order.
        weights: (K, N) int8 weights (the model's current ones: they make the incoming partial sums).
        rows: array rows: partial sums restart every ``rows`` reduction elements (one tile).
        positions: (k, n) positions sampled; stream: consecutive cycles per position.
        msb_weight: capacitance of an MSB flip relative to a low bit (group costs).
        psum_bits, msb_bits: the partial-sum register's width and its MSB window (module doc).
    """
    check_psum_bits(psum_bits, msb_bits)
    a, s_in, _, _ = streams(acts, weights, rows, positions, stream, seed)
    w = VALUES[:, None, None]  # (256, 1, 1)
    prod = a[None] * w  # (256, P, T)
    psum = s_in[None] + prod
    mult = toggles(prod[..., 1:], prod[..., :-1], PRODUCT_BITS).mean(axis=(1, 2))
    _, cost = group_costs(psum[..., :-1], psum[..., 1:], msb_weight, psum_bits=psum_bits, msb_bits=msb_bits)
    dist = msb_distance(psum[..., 1:], psum[..., :-1], psum_bits, msb_bits).reshape(len(VALUES), -1)
    shares = np.stack([(dist == g).mean(axis=1) for g in range(msb_bits + 1)], axis=1)
    reg = shares @ cost
    return EnergyTable(layer, mult_weight * mult + psum_weight * reg, mult, reg, shares, cost, psum_bits)


@dataclass(frozen=True)
class LayerActivity:
    """Measured switching of a layer's real weights on its real activations (per MAC)."""

    mult_toggles: float
    """Mean multiplier-output toggles per MAC."""
    group_counts: np.ndarray
    """(msb_bits + 1,) partial-sum transitions measured per MSB-distance group."""
    group_cost: np.ndarray
    """(msb_bits + 1,) cost per transition of each group (from the layer's current table)."""

    @property
    def group_shares(self) -> np.ndarray:
        """Share of the measured partial-sum transitions in each MSB-distance group (the groups' occupancy)."""
        return self.group_counts / max(int(self.group_counts.sum()), 1)

    @property
    def groups_used(self) -> int:
        """How many MSB-distance groups hold at least one measured transition (2 = sign flip or not)."""
        return int((self.group_counts > 0).sum())

    @property
    def psum_toggles(self) -> float:
        """Partial-sum energy per MAC: sum over groups of count x group cost, over the transitions measured."""
        return float(self.group_counts @ self.group_cost / max(int(self.group_counts.sum()), 1))

    def pj_per_mac(self) -> float:
        """Compute energy per MAC in pJ (Horowitz-calibrated toggles)."""
        e_mult, e_psum = pj_per_toggle()
        return self.mult_toggles * e_mult + self.psum_toggles * e_psum


def measure_layer(
    acts: np.ndarray,
    weights: np.ndarray,
    group_cost: np.ndarray,
    *,
    rows: int = 32,
    positions: int = 256,
    stream: int = 256,
    seed: int = 0,
    psum_bits: int = PSUM_BITS,
) -> LayerActivity:
    """Switching of the layer's own weights (not every candidate value) at sampled positions of its real streams.

    The MSB window is the top ``len(group_cost) - 1`` bits of a ``psum_bits`` register (the table's)."""
    msb_bits = len(group_cost) - 1
    check_psum_bits(psum_bits, msb_bits)
    a, s_in, ks, ns = streams(acts, weights, rows, positions, stream, seed)
    w = np.asarray(weights, dtype=np.int64)[ks, ns][:, None]  # (P, 1): the weight each sampled PE holds
    prod = a * w
    psum = s_in + prod
    mult = float(toggles(prod[:, 1:], prod[:, :-1], PRODUCT_BITS).mean())
    dist = msb_distance(psum[:, 1:], psum[:, :-1], psum_bits, msb_bits).ravel()
    counts = np.bincount(dist, minlength=msb_bits + 1).astype(np.int64)
    return LayerActivity(mult, counts, np.asarray(group_cost, dtype=float))


def layer_psums(
    acts: np.ndarray, weights: np.ndarray, *, rows: int = 32, positions: int = 256, stream: int = 256, seed: int = 0
) -> np.ndarray:
    """The partial sums (P, T) the layer's own weights make at the positions :func:`measure_layer` samples."""
    a, s_in, ks, ns = streams(acts, weights, rows, positions, stream, seed)
    return s_in + a * np.asarray(weights, dtype=np.int64)[ks, ns][:, None]


def memory_pj(
    mapping: Mapping, *, sram_pj_per_byte: float = SRAM_PJ_PER_BYTE, dram_pj_per_byte: float = DRAM_PJ_PER_BYTE
) -> dict[str, float]:
    """SRAM and DRAM energy of a mapped layer, pJ: per-byte costs times the mapping's accesses (int8 operands, 32-bit partial sums)."""
    sram_bytes = (
        mapping.sram_reads["ifmap"]
        + mapping.sram_reads["filter"]
        + PSUM_BYTES * (mapping.sram_reads["psum"] + mapping.sram_writes["ofmap"])
    )
    dram_bytes = sum(mapping.dram_bytes.values())
    return {"sram_pj": sram_bytes * sram_pj_per_byte, "dram_pj": dram_bytes * dram_pj_per_byte}


def constants() -> dict[str, Any]:
    """The energy constants in force and their source, for reports."""
    e_mult, e_psum = pj_per_toggle()
    return {
        "source": "Horowitz, Computing's energy problem, ISSCC 2014 (45 nm, 0.9 V)",
        "mult8_pj": MULT8_PJ,
        "add22_pj": round(ADD_PJ, 4),
        "random_product_toggles": round(random_product_toggles(), 3),
        "pj_per_mult_toggle": round(e_mult, 5),
        "pj_per_psum_toggle": round(e_psum, 5),
        "sram_pj_per_byte": SRAM_PJ_PER_BYTE,
        "dram_pj_per_byte": DRAM_PJ_PER_BYTE,
    }
