"""Cycle-level cost model of an FPGA-style transformer accelerator: devices, engines, tiles, DDR.

The accelerator has ``pes`` processing elements (PEs). A PE is ``lanes`` int8 multiply-
accumulate units (one DSP slice each), i.e. ``lanes`` MACs or vector ops per cycle. The PEs
are split between three engines:

* ``matmul``: the linear layers (QKV projection, output projection, FFN1, FFN2);
* ``attention``: the attention products (Q K^T scores, the low-bit key pre-scores of top-k
  attention, and P V);
* ``softmax``: a vector unit for softmax (and the top-k selection).

Each engine may be split into ``cores`` equal cores; a core runs one task at a time. The
on-chip buffer (``buffer_kb``) and the DDR bandwidth are statically partitioned between the
cores in proportion to their PEs (a fixed port arbitration, so concurrent tasks never ask
DDR for more than it has).

Cost formulas (all in cycles; ``ceil`` is integer ceiling; ``P`` PEs and ``l`` lanes per
core; ``B`` DDR bytes per cycle of the core; ``tm, tn, tk`` tile sizes):

GEMM ``(M x K) @ (K x N)`` (:func:`gemm_cycles`), output-stationary tiling: the output is cut
into ``tm x tn`` tiles, the reduction into ``tk`` steps. A step on an ``r x c`` output tile
with reduction depth ``kk`` costs

    compute = ceil(r * c / P) * ceil(kk / (l * pack))
    memory  = ceil((r * kk * a_bits + kk * c * b_bits + [last step] r * c * out_bits) / (8 B))
    step    = max(compute, memory)            (operands double-buffered: load overlaps compute)

``pack`` is how many low-bit products a lane does per cycle (``8 // bits`` for the pre-score
of quantized keys, 1 otherwise). The task costs ``fill + sum(step) + overhead`` where
``fill`` is the memory time of the first step's operands (nothing to overlap with) and
``overhead`` the per-task launch cost. Edge tiles use their real size (no tile padding).
The tiles must fit the core's buffer: ``2 (tm tk a_bits + tk tn b_bits) / 8 + 4 tm tn``
bytes (double-buffered operands, int32 accumulators).

Attention products are GEMMs given row tile by row tile (:func:`gemm_rows_cycles`): a tile of
``tm`` queries ending at query ``i`` needs ``keys(i)`` keys (dense causal ``i + 1``; top-k and
local+global gather their kept keys: see :class:`AttentionConfig`), so scores are
``(r x d_head) @ (d_head x keys(i))``, ``P V`` is ``(r x keys(i)) @ (keys(i) x d_head)`` and the
top-k pre-score ``(r x d_head) @ (d_head x visible(i))`` at ``key_bits`` bits. Masked lanes inside a
tile still cost cycles (the tile is computed whole).

Vector op (:func:`vector_cycles`) over ``e_in`` input and ``e_out`` output elements with
``ops`` operations per input element: ``max(ceil(e_in ops / (P l)), ceil((e_in + e_out) / B))
+ overhead`` (streamed, 1 byte per element). Softmax is 4 ops per score (max, subtract and
exp, sum, divide); top-k selection 1 compare per pre-score (a k-deep comparator chain per lane).

Compressed weights (:attr:`TransformerShape.weight_bits`, default int8): a linear layer's weight
operand moves ``b_bits`` = its stored bits per weight over DDR; its compute is unchanged.

Re-configuring the PE split (``realloc`` moves PEs between the engines per batch) costs
:attr:`Accelerator.reconfig_cycles` before the batch's first task whenever a batch runs on another
split than the batch before it (:func:`sim.fpga.sched.schedule_batch`). The default,
:data:`RECONFIG_CYCLES`, is an assumption (a runtime switch of the PEs' engine multiplexers, not
a bitstream load); :func:`dfx_reconfig_cycles` is the sourced alternative, a partial bitstream
load through the ICAP.

What the model leaves out (said again in docs/fpga.md): layer norm, residual adds and GELU
(vector work of O(L d), small beside the matmuls), DDR latency and bank conflicts, clock
frequency differences between designs, power.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from coevo.sim.attention.config import ATTENTION
from coevo.sim.errors import UserInputError, unknown_name

ENGINES = ("matmul", "attention", "softmax")
"""The engines, in the order PE splits list them."""

Engine = Literal["matmul", "attention", "softmax"]
AttentionMethod = Literal["dense", "topk", "local-global"]
SOFTMAX_OPS = 4
SELECT_OPS = 1
KEY_BITS_MIN, KEY_BITS_MAX = 2, 8
"""Key bits the top-k pre-score can run at (inclusive): a lane is an int8 MAC packing ``8 // key_bits`` products, so
above 8 it packs none; 1 bit (sign codes) would be an XNOR-popcount unit, not a packed DSP MAC, which this model
does not have. Narrower than :mod:`sim.attention`'s 1..16, whose operator runs in floating point."""


@dataclass(frozen=True)
class Device:
    """An FPGA board: DSP slices, on-chip memory, DDR bandwidth, clock.

    Attributes:
        name: preset name.
        dsps: DSP slices (one int8 MAC per cycle each).
        onchip_kb: BRAM + URAM, KiB.
        ddr_gbps: peak DDR (or HBM) bandwidth, GB/s.
        clock_mhz: accelerator clock.
    """

    name: str
    dsps: int
    onchip_kb: int
    ddr_gbps: float
    clock_mhz: float

    def max_pes(self, lanes: int) -> int:
        """PEs of ``lanes`` MACs that fit the device's DSP slices."""
        return self.dsps // lanes

    def ddr_bytes_per_cycle(self) -> float:
        """DDR bytes per accelerator cycle."""
        return self.ddr_gbps * 1e9 / (self.clock_mhz * 1e6)


DEVICES: dict[str, Device] = {
    # data-sheet figures: DSP48E2 slices, BRAM36 (+ URAM) capacity, the board's DDR4 / HBM2 peak
    "zu3eg": Device("zu3eg", 360, 972, 8.5, 200.0),  # Ultra96-V2: 216 BRAM36, LPDDR4 32-bit 2133
    "zcu102": Device("zcu102", 2520, 4104, 19.2, 200.0),  # ZU9EG: 912 BRAM36, PS DDR4 64-bit 2400
    "alveo-u280": Device("alveo-u280", 9024, 41_472, 460.0, 300.0),  # 2016 BRAM36 + 960 URAM, 8 GB HBM2
}
"""Device presets; ``pes`` beyond :meth:`Device.max_pes` is refused."""


RECONFIG_CYCLES = 2_000
"""Default cost of changing the PE split between two batches (cycles): an ASSUMPTION, not a measurement.

It models a runtime switch: every PE is wired to all three engines through multiplexers, and the
host writes the new split to control registers, after which the engines re-partition their buffer
and DDR shares (the buffers are refilled per batch anyway). 10 us at the 200 MHz clock (2,000
cycles) is taken as the order of a few dozen AXI-Lite register writes from the processing system
and an interrupt round trip; no synthesis backs it. 0 reproduces the model before the cost was
charged; :func:`dfx_reconfig_cycles` gives the far larger cost of a partial bitstream load."""

CHANGE_RULES: tuple[str, ...] = ("myopic", "amortized")
"""When ``realloc`` changes the PE split (:mod:`sim.fpga.switch`): ``myopic`` per batch, when this batch's saving exceeds
the cost; ``amortized`` by the ski-rental break-even rule, once a split's savings since the last change reach the cost."""
CHANGE_RULE = "myopic"
"""The default change rule: the figure's sweep (docs/bench/fpga/schedule.md, section 4) measures both against the hindsight optimum."""

ICAP_BYTES_PER_S = 800e6
"""UltraScale+ ICAP/MCAP peak configuration bandwidth: 32 bits at 200 MHz = 6.4 Gb/s (AMD UG909, "Configuration Time", Table 3)."""
FULL_BITSTREAM_BITS = 192_999_264
"""A full configuration bitstream of a device of zcu102's PL size: KU060's (2,760 DSP slices; AMD UG570, "Device Resources and
Configuration Bitstream Lengths") stands in for the ZU9EG's (2,520), whose own row is not quoted here: an approximation."""


def dfx_reconfig_cycles(device: Device, pes: int, lanes: int = 16) -> int:
    """Cycles to load a partial bitstream re-wiring the PE array by Dynamic Function eXchange through the ICAP.

    A partial bitstream is about the reconfigurable region's share of the full one (UG909, "Partial
    Bitstreams"); the region is taken as the PEs' share of the device's DSP slices (``pes * lanes /
    dsps``), the full bitstream as :data:`FULL_BITSTREAM_BITS`, the port at :data:`ICAP_BYTES_PER_S`
    (its peak: real controllers are slower). zcu102 with 64 PEs: 40.6 % of 24.1 MB, 9.8 MB, 12.3 ms,
    about 2.45 M cycles at 200 MHz.
    """
    share = min(1.0, pes * lanes / device.dsps)
    seconds = share * FULL_BITSTREAM_BITS / 8 / ICAP_BYTES_PER_S
    return round(seconds * device.clock_mhz * 1e6)


LINEAR_KINDS = ("qkv", "out", "ffn1", "ffn2")
"""The linear layers of a transformer layer, in the order :attr:`TransformerShape.weight_bits` lists their widths."""


@dataclass(frozen=True)
class TransformerShape:
    """The transformer the accelerator runs (per-layer shapes).

    Attributes:
        weight_bits: per layer, the bits stored per weight of its ``qkv``, ``out``, ``ffn1`` and
            ``ffn2`` weights (:data:`LINEAR_KINDS` order); empty: int8 everywhere. A compressed
            model's narrow or sparse weights (a sparse layer stores each kept weight with its index)
            make the GEMMs' weight operand fewer DDR bytes; the engines keep their int8 lanes and
            their cycles (a dense PE array does not skip zeros, and a narrower weight does not make a
            MAC faster), so only memory-bound tiles get faster.
    """

    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    weight_bits: tuple[tuple[float, float, float, float], ...] = ()

    def __post_init__(self) -> None:
        if self.weight_bits and len(self.weight_bits) != self.n_layers:
            raise UserInputError(f"weight_bits gives {len(self.weight_bits)} layers' widths; the model has {self.n_layers} layers")
        bad = [b for layer in self.weight_bits for b in layer if not 0 < b <= 8]
        if bad or any(len(layer) != len(LINEAR_KINDS) for layer in self.weight_bits):
            raise UserInputError(
                f"weight_bits: give each layer {len(LINEAR_KINDS)} widths ({', '.join(LINEAR_KINDS)}) in (0, 8] bits (the lanes are "
                f"int8); got {bad[:3] or self.weight_bits[:1]}"
            )

    @property
    def d_head(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.n_heads

    def linear_bits(self, layer: int) -> dict[str, float]:
        """Stored bits per weight of layer ``layer``'s linear layers, by kind (8 when :attr:`weight_bits` is empty)."""
        widths = self.weight_bits[layer] if self.weight_bits else (8.0,) * len(LINEAR_KINDS)
        return dict(zip(LINEAR_KINDS, widths, strict=True))


MODELS: dict[str, TransformerShape] = {
    "lm-pydoc": TransformerShape(256, 4, 4, 1024),  # the model zoo's byte LM (sim.zoo recipe lm-pydoc)
    "lm-pydoc-tiny": TransformerShape(64, 2, 2, 256),
    "bert-base": TransformerShape(768, 12, 12, 3072),
}
"""Transformer presets: the zoo's LMs (whose perplexity sparse attention is measured on) and BERT-base."""


@dataclass(frozen=True)
class AttentionConfig:
    """How attention is computed.

    Attributes:
        method: ``dense`` (every key), ``topk`` (keys pre-scored with ``key_bits``-bit quantized
            Q/K, the ``top_k`` best kept per query: the pre-score is still ``L^2`` but at low
            bits; the exact part is ``L k``), ``local-global`` (``window`` previous keys plus
            ``n_global`` global ones: linear).
        top_k: keys kept per query (topk).
        key_bits: bits of the quantized Q/K of the pre-score (topk), :data:`KEY_BITS_MIN`..:data:`KEY_BITS_MAX`.
        window: local window (local-global).
        n_global: global keys (local-global).
        causal: query ``i`` sees keys ``0..i`` only (the zoo's LMs); False: every key (an encoder).

    Keys of query ``i`` (0-based) when causal, as :mod:`sim.attention` counts them: dense ``i + 1``;
    topk ``min(top_k, i + 1)``; local-global ``min(window, i + 1) + max(0, min(n_global, i + 1 - window))``
    (the window includes the query, the global keys are the first tokens left of it).

    The defaults of ``top_k``, ``key_bits``, ``window`` and ``n_global`` are the sparse-attention family's
    (:class:`~coevo.sim.attention.config.AttentionFamilyConfig`): the operator whose cost this models.
    """

    method: AttentionMethod = "dense"
    top_k: int = ATTENTION.top_k
    key_bits: int = ATTENTION.key_bits
    window: int = ATTENTION.window
    n_global: int = ATTENTION.n_global
    causal: bool = True

    def __post_init__(self) -> None:
        if self.method not in ("dense", "topk", "local-global"):
            raise unknown_name("attention method", str(self.method), ("dense", "topk", "local-global"))
        if self.top_k < 1 or self.window < 1 or self.n_global < 0:
            raise UserInputError(f"top_k and window must be >= 1 and n_global >= 0; got {self.top_k}, {self.window}, {self.n_global}")
        if not KEY_BITS_MIN <= self.key_bits <= KEY_BITS_MAX:
            raise UserInputError(
                f"key_bits must lie between {KEY_BITS_MIN} and {KEY_BITS_MAX} (the pre-score packs 8 // key_bits products per "
                f"int8 lane); got {self.key_bits}"
            )

    def keys_per_query(self, length: int, query: int | None = None) -> int:
        """Keys query ``query`` (default: the last) attends to in a sequence of ``length`` tokens."""
        visible = (length if query is None else query + 1) if self.causal else length
        if self.method == "topk":
            return min(self.top_k, visible)
        if self.method == "local-global":
            return min(self.window, visible) + max(0, min(self.n_global, visible - self.window))
        return visible

    def visible_pairs(self, length: int) -> int:
        """(query, key) pairs a dense pass (or the top-k pre-score) covers."""
        return length * (length + 1) // 2 if self.causal else length * length

    def pairs(self, length: int) -> int:
        """(query, key) pairs attended: the sum of :meth:`keys_per_query` over the queries."""
        if not self.causal:
            return length * self.keys_per_query(length)
        return _causal_pairs(self, length)

    def row_tiles(self, length: int, tm: int) -> list[tuple[int, int, int]]:
        """Query row tiles of ``tm`` rows: ``(rows, keys the tile needs, visible keys)``; causal tiles need keys up to their last query."""
        out = []
        for i0 in range(0, length, tm):
            r = min(tm, length - i0)
            last = i0 + r - 1
            out.append((r, self.keys_per_query(length, last), last + 1 if self.causal else length))
        return out

    def prescores(self, length: int) -> bool:
        """Whether top-k needs its pre-score and selection at this length (not when every key is kept anyway)."""
        return self.method == "topk" and length > self.top_k


@functools.lru_cache(maxsize=20_000)
def _causal_pairs(attn: AttentionConfig, length: int) -> int:
    return sum(attn.keys_per_query(length, i) for i in range(length))


@dataclass(frozen=True)
class Core:
    """One core of an engine: its PEs, lanes, buffer and DDR share."""

    engine: str
    index: int
    pes: int
    lanes: int
    buffer_bytes: int
    ddr_bytes_per_cycle: float


@dataclass(frozen=True)
class Accelerator:
    """An accelerator design on a device (see the module doc for the cost formulas).

    Attributes:
        device: the board.
        split: PEs per engine, in :data:`ENGINES` order.
        cores: cores per engine, in :data:`ENGINES` order; each gets ``engine PEs // cores`` PEs (a remainder
            idles, and still counts in the utilisation's denominator).
        lanes: MACs per PE.
        tile_m, tile_n, tile_k: GEMM tile sizes (output rows, output columns, reduction depth).
        overhead_cycles: launch cost of every task.
        reconfig_cycles: cost of running a batch on another PE split than the batch before it (``realloc``),
            charged before the batch's first task (:data:`RECONFIG_CYCLES`: an assumption; 0: free, as before).
        change_rule: when ``realloc`` changes the split (:data:`CHANGE_RULES`; :mod:`sim.fpga.switch`).
    """

    device: Device
    split: tuple[int, int, int]
    cores: tuple[int, int, int] = (1, 1, 1)
    lanes: int = 16
    tile_m: int = 32
    tile_n: int = 64
    tile_k: int = 64
    overhead_cycles: int = 64
    reconfig_cycles: int = RECONFIG_CYCLES
    change_rule: str = CHANGE_RULE
    core_list: tuple[Core, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.split) != 3 or len(self.cores) != 3:
            raise UserInputError(f"split and cores give one value per engine ({', '.join(ENGINES)}); got {self.split}, {self.cores}")
        if self.lanes < 1:
            raise UserInputError(f"lanes must be >= 1; got {self.lanes}")
        for name, pes, cores in zip(ENGINES, self.split, self.cores, strict=True):
            if cores < 1 or pes < cores:
                raise UserInputError(f"the {name} engine has {pes} PEs for {cores} cores; give every core at least one PE")
        total, limit = sum(self.split), self.device.max_pes(self.lanes)
        if total > limit:
            bigger = [d.name for d in DEVICES.values() if d.max_pes(self.lanes) >= total]
            raise UserInputError(
                f"{total} PEs of {self.lanes} MACs need {total * self.lanes} DSP slices; {self.device.name} has {self.device.dsps} "
                f"(at most {limit} PEs): use pes <= {limit}" + (f" or a larger device ({', '.join(bigger)})" if bigger else "")
            )
        if isinstance(self.reconfig_cycles, bool) or int(self.reconfig_cycles) != self.reconfig_cycles or self.reconfig_cycles < 0:
            raise UserInputError(
                f"reconfig_cycles={self.reconfig_cycles} must be an integer >= 0 (cycles to change the PE split between batches; "
                f"0: free; default {RECONFIG_CYCLES})"
            )
        if self.change_rule not in CHANGE_RULES:
            raise UserInputError(f"change_rule={self.change_rule!r} is not one of {', '.join(CHANGE_RULES)}")
        if min(self.tile_m, self.tile_n, self.tile_k) < 1 or self.overhead_cycles < 0:
            raise UserInputError("tile sizes must be >= 1 and overhead_cycles >= 0")
        cores_out = []
        for name, pes, n in zip(ENGINES, self.split, self.cores, strict=True):
            one = engine_core(self.device, name, pes, n, total, self.lanes)
            cores_out += [Core(name, i, one.pes, one.lanes, one.buffer_bytes, one.ddr_bytes_per_cycle) for i in range(n)]
        object.__setattr__(self, "core_list", tuple(cores_out))
        for core in cores_out:
            if core.engine == "softmax":
                continue
            need = tile_bytes(self.tile_m, self.tile_n, self.tile_k)
            if need > core.buffer_bytes:
                raise UserInputError(
                    f"tiles {self.tile_m}x{self.tile_n}x{self.tile_k} need {need / 1024:.1f} KiB of buffer; a {core.engine} core "
                    f"has {core.buffer_bytes / 1024:.1f} KiB ({self.device.name}'s {self.device.onchip_kb} KiB shared by PEs): "
                    "use smaller tiles or fewer cores"
                )

    @property
    def pes(self) -> int:
        """All PEs."""
        return sum(self.split)

    def with_split(self, split: tuple[int, int, int]) -> Accelerator:
        """The same design with its PEs re-allocated to ``split`` (same cores, tiles, device; checked as a new design)."""
        return dataclasses.replace(self, split=split)

    def engine_cores(self, engine: str) -> tuple[Core, ...]:
        """The cores of ``engine``."""
        return tuple(c for c in self.core_list if c.engine == engine)

    def capacity(self, engine: str) -> int:
        """How many tasks ``engine`` runs at once (its cores)."""
        return self.cores[ENGINES.index(engine)]

    def core(self, engine: str) -> Core:
        """A core of ``engine`` (they are identical)."""
        return self.engine_cores(engine)[0]

    def cycles_to_ms(self, cycles: float) -> float:
        """Milliseconds at the device clock."""
        return cycles / (self.device.clock_mhz * 1e3)


def engine_core(device: Device, engine: str, engine_pes: int, cores: int, total_pes: int, lanes: int = 16) -> Core:
    """Core 0 of ``engine`` when it has ``engine_pes`` of ``total_pes`` PEs in ``cores`` cores (module doc: buffer and DDR by PE share).

    A core's costs depend on its own engine's PEs only (the total fixes the shares), which lets a
    re-allocation tabulate each engine's costs separately (:mod:`sim.fpga.alloc`).
    """
    per = engine_pes // cores
    share = per / total_pes
    return Core(engine, 0, per, lanes, int(device.onchip_kb * 1024 * share), device.ddr_bytes_per_cycle() * share)


def split_pes(pes: int, shares: tuple[float, float, float]) -> tuple[int, int, int]:
    """``pes`` split by ``shares`` (matmul, attention, softmax), rounded so they sum to ``pes``, each >= 1.

    Raises:
        UserInputError: fewer than 3 PEs, or a share that is not positive.
    """
    if pes < 3:
        raise UserInputError(f"pes={pes}: the three engines need at least one PE each; use pes >= 3")
    if len(shares) != 3 or any(not (s > 0) for s in shares):
        raise UserInputError(f"PE shares need three positive numbers (matmul:attention:softmax), got {shares}")
    total = sum(shares)
    raw = [pes * s / total for s in shares]
    out = [max(1, math.floor(r)) for r in raw]
    while sum(out) < pes:  # largest remainder first
        i = max(range(3), key=lambda j: raw[j] - out[j])
        out[i] += 1
    while sum(out) > pes:
        i = max((j for j in range(3) if out[j] > 1), key=lambda j: out[j] - raw[j])
        out[i] -= 1
    return (out[0], out[1], out[2])


def tile_bytes(tm: int, tn: int, tk: int, a_bits: int = 8, b_bits: int = 8) -> int:
    """Buffer bytes a GEMM tile needs: double-buffered operand tiles plus int32 accumulators."""
    return 2 * math.ceil((tm * tk * a_bits + tk * tn * b_bits) / 8) + 4 * tm * tn


def _parts(size: int, tile: int) -> list[tuple[int, int]]:
    """``size`` cut into tiles: ``(count, tile size)`` for the full tiles and the edge tile."""
    full, rest = divmod(size, tile)
    return [(n, s) for n, s in ((full, tile), (1 if rest else 0, rest)) if n]


Rows = tuple[tuple[int, int, int, int], ...]
"""A GEMM by row tiles: ``(count, rows, reduction depth, output columns)`` per kind of row tile."""


@functools.lru_cache(maxsize=200_000)
def gemm_rows_cycles(rows: Rows, core: Core, tn: int, tk: int, overhead: int, a_bits: int = 8, b_bits: float = 8, pack: int = 1) -> int:
    """Cycles of a GEMM given row tile by row tile (``rows``; each row tile may have its own depth and width).

    The attention products of a causal sequence are such GEMMs: a row tile of queries needs the
    keys up to its last query only. Costs as in the module doc; 0 when there is nothing to do.
    """
    rows = tuple(x for x in rows if x[0] > 0 and min(x[1:]) > 0)
    if not rows:
        return 0
    bw8 = 8 * core.ddr_bytes_per_cycle
    out_bits = 8
    total = 0
    for count, r, k, n in rows:
        k_steps = math.ceil(k / tk)
        k_last = k - (k_steps - 1) * tk
        for cn, c in _parts(n, tn):

            def step(kk: int, last: bool, r: int = r, c: int = c) -> int:
                compute = math.ceil(r * c / core.pes) * math.ceil(kk / (core.lanes * pack))
                memory = math.ceil((r * kk * a_bits + kk * c * b_bits + (r * c * out_bits if last else 0)) / bw8)
                return max(compute, memory)

            total += count * cn * ((k_steps - 1) * step(tk, False) + step(k_last, True))
    _, r0, k0, n0 = rows[0]
    fill = math.ceil((r0 * min(tk, k0) * a_bits + min(tk, k0) * min(tn, n0) * b_bits) / bw8)
    return fill + total + overhead


def gemm_cycles(
    m: int, k: int, n: int, core: Core, tm: int, tn: int, tk: int, overhead: int, a_bits: int = 8, b_bits: float = 8, pack: int = 1
) -> int:
    """Cycles of ``(m x k) @ (k x n)`` on ``core`` with ``tm x tn x tk`` tiles (module doc); 0 for an empty product."""
    if m <= 0 or n <= 0 or k <= 0:
        return 0
    rows = tuple((count, r, k, n) for count, r in _parts(m, tm))
    return gemm_rows_cycles(rows, core, tn, tk, overhead, a_bits, b_bits, pack)


def gemm_rows_cycles_by_pes(
    rows: Rows,
    pes: np.ndarray,
    ddr_bytes_per_cycle: np.ndarray,
    lanes: int,
    tn: int,
    tk: int,
    overhead: int,
    a_bits: int = 8,
    b_bits: float = 8,
    pack: int = 1,
) -> np.ndarray:
    """:func:`gemm_rows_cycles` on many cores at once: core ``i`` has ``pes[i]`` PEs and ``ddr_bytes_per_cycle[i]``.

    The same integers as :func:`gemm_rows_cycles` core by core (the same floating-point operations in the
    same order, element-wise; tests compare them): a re-allocation tabulates a GEMM over every PE count in
    one pass, where the per-core cache cannot help (a compressed model's weight bits make every design's
    layers new keys).
    """
    rows = tuple(x for x in rows if x[0] > 0 and min(x[1:]) > 0)
    per = np.asarray(pes, dtype=np.int64)
    if not rows:
        return np.zeros(len(per), dtype=np.int64)
    bw8 = 8 * np.asarray(ddr_bytes_per_cycle, dtype=float)
    out_bits = 8
    total = np.zeros(len(per), dtype=np.int64)
    for count, r, k, n in rows:
        k_steps = math.ceil(k / tk)
        k_last = k - (k_steps - 1) * tk
        for cn, c in _parts(n, tn):
            rc = np.ceil((r * c) / per).astype(np.int64)

            def step(kk: int, last: bool, r: int = r, c: int = c, rc: np.ndarray = rc) -> np.ndarray:
                compute = rc * math.ceil(kk / (lanes * pack))
                memory = np.ceil((r * kk * a_bits + kk * c * b_bits + (r * c * out_bits if last else 0)) / bw8).astype(np.int64)
                return np.maximum(compute, memory)

            total += count * cn * ((k_steps - 1) * step(tk, False) + step(k_last, True))
    _, r0, k0, n0 = rows[0]
    fill = np.ceil((r0 * min(tk, k0) * a_bits + min(tk, k0) * min(tn, n0) * b_bits) / bw8).astype(np.int64)
    return fill + total + overhead


def gemm_cycles_by_pes(
    m: int,
    k: int,
    n: int,
    pes: np.ndarray,
    ddr_bytes_per_cycle: np.ndarray,
    lanes: int,
    tm: int,
    tn: int,
    tk: int,
    overhead: int,
    a_bits: int = 8,
    b_bits: float = 8,
    pack: int = 1,
) -> np.ndarray:
    """:func:`gemm_cycles` on many cores at once (:func:`gemm_rows_cycles_by_pes`); 0 for an empty product."""
    if m <= 0 or n <= 0 or k <= 0:
        return np.zeros(len(pes), dtype=np.int64)
    rows = tuple((count, r, k, n) for count, r in _parts(m, tm))
    return gemm_rows_cycles_by_pes(rows, pes, ddr_bytes_per_cycle, lanes, tn, tk, overhead, a_bits, b_bits, pack)


def vector_cycles_by_pes(
    elements_in: int, elements_out: int, ops: int, pes: np.ndarray, lanes: int, ddr_bytes_per_cycle: np.ndarray, overhead: int
) -> np.ndarray:
    """:func:`vector_cycles` on many cores at once (the same integers, element-wise)."""
    per = np.asarray(pes, dtype=np.int64)
    if elements_in <= 0:
        return np.zeros(len(per), dtype=np.int64)
    compute = np.ceil((elements_in * ops) / (per * lanes)).astype(np.int64)
    memory = np.ceil((elements_in + elements_out) / np.asarray(ddr_bytes_per_cycle, dtype=float)).astype(np.int64)
    return np.maximum(compute, memory) + overhead


@functools.lru_cache(maxsize=200_000)
def vector_cycles(elements_in: int, elements_out: int, ops: int, core: Core, overhead: int) -> int:
    """Cycles of a streamed vector op (module doc); 0 for no elements."""
    if elements_in <= 0:
        return 0
    compute = math.ceil(elements_in * ops / (core.pes * core.lanes))
    memory = math.ceil((elements_in + elements_out) / core.ddr_bytes_per_cycle)
    return max(compute, memory) + overhead


def device(name: str) -> Device:
    """The preset ``name`` (:data:`DEVICES`); UserInputError naming the presets otherwise."""
    if name not in DEVICES:
        raise unknown_name("device", name, DEVICES)
    return DEVICES[name]


def model_shape(name: str) -> TransformerShape:
    """The preset ``name`` (:data:`MODELS`); UserInputError naming the presets otherwise."""
    if name not in MODELS:
        raise unknown_name("model", name, MODELS)
    return MODELS[name]
