"""A whole NAS-Bench-201 network on a systolic array: its real layer shapes, and latency and energy per image.

**Layer shapes** (:func:`nb201_layers`) follow the NAS-Bench-201 network (``search/nb201/model.py``,
the benchmark's "TinyNetwork"): a 3x3 stem convolution to C = 16 channels; three stages of
5 cells at C, 2C, 4C channels and H, H/2, H/4 pixels, joined by residual reduction blocks
(3x3 stride-2 conv, 3x3 conv, and a 2x2 average pool + 1x1 conv shortcut); global average
pooling and a linear classifier. Within a cell every edge's operation runs (as the PyTorch
network runs it; nothing is pruned when a node's result is unused):

* ``nor_conv_1x1`` / ``nor_conv_3x3``: a C -> C convolution (padding k // 2), a GEMM on the array;
* ``avg_pool_3x3`` (and the shortcut's 2x2 pool, and the global pool): run on the array as a
  depthwise convolution with fixed weights, one GEMM (H*W, k*k, 1) per channel, since the
  accelerator modelled has no other compute unit (a pool keeps one column of the array busy,
  so pooling is slow on it);
* ``skip_connect`` and ``none``, the node sums, batch norm and ReLU: not counted (assumed done
  on the fly in the array's output path).

**Cost** (:func:`network_cost`): each layer is mapped with :func:`sim.accel.systolic.map_layer`
(cycles, SRAM accesses, DRAM bytes). A layer takes ``max(cycles / clock, DRAM bytes / DRAM
bandwidth)``: DRAM transfers are assumed to overlap compute (double buffering), so a layer is
either compute- or bandwidth-bound. Energy per image = MAC + SRAM + DRAM, with the Horowitz
ISSCC 2014 45 nm constants of :mod:`sim.accel.energy` (an 8-bit multiply and a 22-bit add per
MAC at random-operand activity; no data-dependent switching), except that each buffer's
energy per access follows its size through Horowitz's three SRAM points (8 KB: 10 pJ,
32 KB: 20 pJ, 1 MB: 100 pJ per 64-bit access; log-log interpolation, extrapolated below 8 KB
by the first segment). **Assumed** (no source): the supply voltage rises linearly with the
clock, from 0.6 V at 0 MHz to Horowitz's 0.9 V at 1 GHz, and MAC and SRAM energy scale with
its square (DRAM energy does not). Leakage is not counted. Batch 1; int8 operands unless a layer
says otherwise (below).

**Narrow and sparse weights** (:attr:`NetLayer.weight_bits`, :attr:`NetLayer.density`; the
defaults, 8 bits and dense, leave every figure above unchanged). The array keeps its 8-bit PEs
and its cycles (a dense systolic array does not skip zeros, and a narrower weight does not make
a MAC faster); what changes:

* **multiplier energy** scales with the weight's width, ``MULT8_PJ x bits / 8``: an array
  multiplier's energy follows its partial-product bits (weight bits x 8 activation bits), the
  scaling Horowitz's own 8- and 32-bit multipliers follow (0.2 pJ and 3.1 pJ: 15.5x for 16x the
  partial-product bits). The partial-sum adder keeps its 22 bits;
* **zero weights gate their MAC**: MAC energy is multiplied by the layer's density (share of
  nonzero weights). **Assumed**, after Eyeriss's data gating (Chen et al., JSSC 2017), which
  holds a PE's multiplier and adder when an operand is zero; cycles are not saved;
* **weight storage and traffic**: a weight takes :func:`stored_weight_bits` bits, the smaller of
  dense (``bits``) and sparse storage (each nonzero weight with a relative index,
  ``density x (bits + index bits)``, with Deep Compression's index widths: 8 bits in a
  convolution, 5 in a fully connected layer; Han, Mao and Dally, ICLR 2016; the padding entries
  of long zero runs are not counted). The weight buffer holds the stored bytes (a layer that did
  not fit at int8 may fit at 4 bits), and the weights' SRAM reads and DRAM bytes scale with
  them (:func:`sim.accel.systolic.map_layer`'s ``weight_bytes``), so DRAM-bound layers get faster.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from coevo.sim.accel.energy import ADD_PJ, DRAM_PJ_PER_BYTE, MULT8_PJ, PSUM_BYTES
from coevo.sim.accel.systolic import DATAFLOWS, Layer, map_layer
from coevo.sim.errors import UserInputError

NB201_OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
"""The NAS-Bench-201 operations (canonical order; ``search/nb201/space.py`` holds the same)."""
CONV_KERNEL = {"nor_conv_1x1": 1, "nor_conv_3x3": 3}
SRAM_POINTS = ((8.0, 10.0), (32.0, 20.0), (1024.0, 100.0))
"""Horowitz ISSCC 2014: (KB, pJ per 64-bit access) of a cache-like SRAM."""
V_NOMINAL = 0.9
"""Horowitz's supply voltage (his energies hold there)."""
V_AT_ZERO = 0.6
"""Assumed intercept of the linear voltage-frequency line (module doc)."""
F_NOMINAL_MHZ = 1000.0
"""Assumed clock reached at the nominal voltage."""
INDEX_BITS = {"conv": 8, "linear": 5}
"""Han, Mao and Dally, Deep Compression, ICLR 2016: relative-index bits per stored nonzero weight (conv 8, fc 5)."""


def stored_weight_bits(bits: float, density: float, kind: str) -> float:
    """Bits stored per weight of a layer of ``kind``: dense, or sparse with a relative index per nonzero, whichever is smaller."""
    return min(bits, density * (bits + INDEX_BITS.get(kind, INDEX_BITS["conv"])))


@dataclass(frozen=True)
class NetLayer:
    """One kind of layer of a network and how often it runs per image.

    Attributes:
        name: where it sits (``stage2.nor_conv_3x3``).
        kind: ``conv`` (a convolution), ``linear`` (the classifier) or ``pool`` (an average pool run as a depthwise convolution).
        layer: its shape, as :func:`sim.accel.systolic.map_layer` maps it (a pool: one channel's GEMM).
        count: how many times it runs per image (cells x edges, or channels of a pool).
    """

    name: str
    kind: str
    layer: Layer
    count: int
    weight_bits: float = 8.0
    """Bits per weight, on average over the layer (mixed precision: its units' widths weighted by their weights)."""
    density: float = 1.0
    """Share of the layer's weights that are nonzero (1: dense)."""

    def __post_init__(self) -> None:
        if not 0 < self.weight_bits <= 8:
            raise UserInputError(f"layer {self.name}: weight_bits must be in (0, 8] (the array's PEs are 8-bit), got {self.weight_bits}")
        if not 0 < self.density <= 1:
            raise UserInputError(f"layer {self.name}: density must be in (0, 1] (share of nonzero weights), got {self.density}")

    @property
    def weight_bytes(self) -> float:
        """Bytes stored per weight (:func:`stored_weight_bits` / 8)."""
        return stored_weight_bits(self.weight_bits, self.density, self.kind) / 8

    @property
    def mac_pj(self) -> float:
        """Energy of one MAC at the nominal voltage, pJ (module doc: width-scaled multiplier, zero weights gated)."""
        return self.density * (MULT8_PJ * self.weight_bits / 8 + ADD_PJ)

    @property
    def macs(self) -> int:
        """Multiply-accumulates per image."""
        m, k, n = self.layer.gemm()
        return m * k * n * self.count


@dataclass(frozen=True)
class Workload:
    """What a network hands an accelerator: its layers per image, and the operand width."""

    layers: tuple[NetLayer, ...]
    bits: int = 8

    def macs(self, kinds: Sequence[str] = ("conv", "linear", "pool")) -> int:
        """Multiply-accumulates per image of the layers of the given kinds."""
        return sum(layer.macs for layer in self.layers if layer.kind in kinds)


def _conv(name: str, c_in: int, c_out: int, size: int, kernel: int, stride: int = 1, count: int = 1) -> NetLayer:
    layer = Layer("conv", c_in=c_in, h=size, w=size, c_out=c_out, kernel=kernel, stride=stride, padding=kernel // 2)
    return NetLayer(name, "conv", layer, count)


def _pool(name: str, channels: int, size_out: int, kernel: int, count: int) -> NetLayer:
    # a depthwise conv with fixed weights: per channel, every output pixel is a kernel x kernel dot product
    return NetLayer(name, "pool", Layer("gemm", m=size_out * size_out, k=kernel * kernel, n=1), channels * count)


@functools.lru_cache(maxsize=1 << 16)  # every NB201 cell (15,625) of a few sizes
def nb201_layers(
    ops: tuple[str, ...], *, channels: int = 16, cells_per_stage: int = 5, input_size: int = 32, num_classes: int = 10
) -> Workload:
    """The layers of the NAS-Bench-201 network around a cell (module doc).

    Args:
        ops: the operation on each of the 6 edges, in NAS-Bench-201 edge order.
        channels: C of the first stage; cells_per_stage: N; input_size: H = W of the image.

    Raises:
        UserInputError: not 6 ops, an unknown op, or an image too small for two reductions.
    """
    if len(ops) != 6 or any(op not in NB201_OPS for op in ops):
        raise UserInputError(f"an NB201 cell is 6 ops from {', '.join(NB201_OPS)}; got {ops!r}")
    if input_size < 4 or input_size % 4:
        raise UserInputError(f"input_size must be a multiple of 4 (two stride-2 reductions), got {input_size}")
    out = [_conv("stem", 3, channels, input_size, 3)]
    c, size = channels, input_size
    for stage in range(1, 4):
        if stage > 1:
            out += [
                _conv(f"reduce{stage}.a", c, 2 * c, size, 3, stride=2),
                _conv(f"reduce{stage}.b", 2 * c, 2 * c, size // 2, 3),
                _pool(f"reduce{stage}.shortcut_pool", c, size // 2, 2, 1),
                _conv(f"reduce{stage}.shortcut_conv", c, 2 * c, size // 2, 1),
            ]
            c, size = 2 * c, size // 2
        for op in sorted(set(ops)):
            n = ops.count(op) * cells_per_stage
            if op in CONV_KERNEL:
                out.append(_conv(f"stage{stage}.{op}", c, c, size, CONV_KERNEL[op], count=n))
            elif op == "avg_pool_3x3":
                out.append(_pool(f"stage{stage}.{op}", c, size, 3, n))
    out.append(_pool("global_pool", c, 1, size, 1))
    out.append(NetLayer("classifier", "linear", Layer("gemm", m=1, k=c, n=num_classes), 1))
    return Workload(tuple(out))


@dataclass(frozen=True)
class ArrayConfig:
    """A systolic-array accelerator: array, dataflow, buffers (KiB), clock and DRAM bandwidth."""

    rows: int
    cols: int
    dataflow: str
    ifmap_kb: float
    filter_kb: float
    ofmap_kb: float
    clock_mhz: float
    dram_gbps: float = 12.8

    def __post_init__(self) -> None:
        if self.dataflow not in DATAFLOWS:
            raise UserInputError(f"dataflow must be one of {', '.join(DATAFLOWS)}, got {self.dataflow!r}")
        for name in ("ifmap_kb", "filter_kb", "ofmap_kb", "clock_mhz", "dram_gbps"):
            if not getattr(self, name) > 0:
                raise UserInputError(f"{name} must be > 0, got {getattr(self, name)}")


def sram_pj_per_byte(kib: float) -> float:
    """Energy per byte read or written of a ``kib`` KiB buffer: Horowitz's points, log-log interpolated (module doc)."""
    (x0, y0), (x1, y1), (x2, y2) = SRAM_POINTS
    lo, hi = ((x0, y0), (x1, y1)) if kib <= x1 else ((x1, y1), (x2, y2))
    slope = math.log(hi[1] / lo[1]) / math.log(hi[0] / lo[0])
    return lo[1] * (kib / lo[0]) ** slope / 8


def voltage_scale(clock_mhz: float) -> float:
    """(V / 0.9 V)^2 at ``clock_mhz`` under the assumed linear voltage-frequency line (module doc)."""
    v = V_AT_ZERO + (V_NOMINAL - V_AT_ZERO) * clock_mhz / F_NOMINAL_MHZ
    return (v / V_NOMINAL) ** 2


@functools.lru_cache(maxsize=1 << 17)
def _layer_on_array(
    layer: Layer, rows: int, cols: int, dataflow: str, kbs: tuple[float, float, float], weight_bytes: float = 1.0
) -> tuple[int, int, float, int]:
    """(cycles, MACs, SRAM pJ at the nominal voltage, DRAM bytes) of one run of ``layer`` with ``weight_bytes`` per weight."""
    mapping = map_layer(layer, rows, cols, dataflow, ifmap_kb=kbs[0], filter_kb=kbs[1], ofmap_kb=kbs[2], weight_bytes=weight_bytes)
    sram = (
        mapping.sram_reads["ifmap"] * sram_pj_per_byte(kbs[0])
        + mapping.sram_reads["filter"] * weight_bytes * sram_pj_per_byte(kbs[1])
        + PSUM_BYTES * (mapping.sram_reads["psum"] + mapping.sram_writes["ofmap"]) * sram_pj_per_byte(kbs[2])
    )
    return mapping.cycles, mapping.macs, sram, sum(mapping.dram_bytes.values())


@dataclass(frozen=True)
class NetworkCost:
    """Latency and energy of one image (module doc)."""

    latency_ms: float
    mac_uj: float
    sram_uj: float
    dram_uj: float
    cycles: int
    """Compute cycles (the bandwidth bound aside)."""

    @property
    def energy_uj(self) -> float:
        """MAC + SRAM + DRAM energy, uJ."""
        return self.mac_uj + self.sram_uj + self.dram_uj


def network_cost(workload: Workload, config: ArrayConfig) -> NetworkCost:
    """Latency (ms) and energy (uJ) of one image of ``workload`` on ``config`` (module doc)."""
    kbs = (float(config.ifmap_kb), float(config.filter_kb), float(config.ofmap_kb))
    seconds = mac_pj = sram_pj = dram_pj = 0.0
    cycles = 0
    bandwidth = config.dram_gbps * 1e9
    clock = config.clock_mhz * 1e6
    for net_layer in workload.layers:
        c, macs, sram, dram = _layer_on_array(net_layer.layer, config.rows, config.cols, config.dataflow, kbs, net_layer.weight_bytes)
        seconds += net_layer.count * max(c / clock, dram / bandwidth)
        cycles += net_layer.count * c
        mac_pj += net_layer.count * macs * net_layer.mac_pj
        sram_pj += net_layer.count * sram
        dram_pj += net_layer.count * dram * DRAM_PJ_PER_BYTE
    scale = voltage_scale(config.clock_mhz)
    return NetworkCost(seconds * 1e3, mac_pj * scale / 1e6, sram_pj * scale / 1e6, dram_pj / 1e6, cycles)
