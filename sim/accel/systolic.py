"""Tile mapping of conv and GEMM layers onto an R x C systolic array: cycles, utilisation, SRAM and DRAM traffic.

A layer becomes a GEMM ``O[M, N] = I[M, K] x W[K, N]``: for a convolution ``M`` is the
output pixels (batch x H_out x W_out), ``K`` the receptive field (C_in x k_h x k_w) and
``N`` the output channels (im2col). Three dataflows, as in SCALE-Sim:

* ``ws`` (weight stationary): a ``R x C`` tile of ``W`` (K rows, N columns) is preloaded
  (``R`` cycles), then the ``M`` input rows stream through; tiles ``ceil(K/R) x ceil(N/C)``,
  each ``R + M + R + C - 2`` cycles (load, stream, fill and drain skew).
* ``os`` (output stationary): each PE accumulates one output; tiles ``ceil(M/R) x ceil(N/C)``,
  each ``K + R + C - 2`` cycles.
* ``is`` (input stationary): a ``R x C`` tile of ``I^T`` (K rows, M columns) is preloaded and
  the ``N`` weight columns stream; tiles ``ceil(K/R) x ceil(M/C)``, each ``R + N + R + C - 2``.

SRAM accesses (elements): the stationary operand is read once; the streamed operand once
per tile of the other non-reduction dimension; outputs are written once per K-tile (and
partial sums read back ``ceil(K/R) - 1`` times) unless the dataflow is output stationary.
DRAM: an operand that fits its SRAM buffer is read from DRAM once; one that does not is
read from DRAM as often as from SRAM (no reuse across tiles); outputs are written once,
plus partial sums spilled and refetched when the output buffer is too small. Elements are
1 byte (int8) for inputs and weights and 4 bytes for partial sums/outputs, except that a
caller may store weights narrower (``weight_bytes`` per weight, on average: quantized or
sparse-encoded weights): their buffer fit and DRAM bytes then scale with it (SRAM accesses
stay counted in elements).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from coevo.sim.accel.config import ACCEL
from coevo.sim.errors import UserInputError

DATAFLOWS = ("ws", "os", "is")


@dataclass(frozen=True)
class Layer:
    """A conv or GEMM layer.

    Conv fields: ``batch, c_in, h, w, c_out, kernel, stride, padding``; GEMM: ``m, k, n``.
    """

    type: str
    batch: int = 1
    c_in: int = 0
    h: int = 0
    w: int = 0
    c_out: int = 0
    kernel: int = 1
    stride: int = 1
    padding: int = 0
    m: int = 0
    k: int = 0
    n: int = 0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Layer:
        """Read a layer description (raises ``UserInputError`` naming the bad field)."""
        kind = data.get("type")
        fields = {"conv": ("c_in", "h", "w", "c_out"), "gemm": ("m", "k", "n")}
        if kind not in fields:
            raise UserInputError(f"layer type must be 'conv' or 'gemm', got {kind!r}")
        allowed = {"type", "batch", "kernel", "stride", "padding", *fields[kind]}
        extra = sorted(set(data) - allowed)
        if extra:
            raise UserInputError(f"{kind} layer: unknown field(s) {', '.join(extra)}; fields: {', '.join(sorted(allowed))}")
        missing = [f for f in fields[kind] if f not in data]
        if missing:
            raise UserInputError(f"{kind} layer needs {', '.join(missing)}")
        for key, value in data.items():
            if key != "type" and (not isinstance(value, int) or isinstance(value, bool) or value < (0 if key == "padding" else 1)):
                raise UserInputError(f"{kind} layer: {key} must be a positive integer, got {value!r}")
        layer = cls(**data)
        if kind == "conv" and (layer.h + 2 * layer.padding < layer.kernel or layer.w + 2 * layer.padding < layer.kernel):
            raise UserInputError(f"conv layer: a {layer.kernel}x{layer.kernel} kernel does not fit a {layer.h}x{layer.w} input")
        return layer

    def gemm(self) -> tuple[int, int, int]:
        """(M, K, N) of the layer's GEMM."""
        if self.type == "gemm":
            return self.m, self.k, self.n
        h_out = (self.h + 2 * self.padding - self.kernel) // self.stride + 1
        w_out = (self.w + 2 * self.padding - self.kernel) // self.stride + 1
        return self.batch * h_out * w_out, self.c_in * self.kernel * self.kernel, self.c_out


@dataclass(frozen=True)
class Mapping:
    """A layer on an array with a dataflow."""

    dataflow: str
    rows: int
    cols: int
    gemm: tuple[int, int, int]
    tiles: int
    cycles: int
    macs: int
    sram_reads: dict[str, int]
    sram_writes: dict[str, int]
    dram_bytes: dict[str, int]

    @property
    def utilisation(self) -> float:
        """MACs over PE-cycles."""
        return self.macs / (self.cycles * self.rows * self.cols)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        m, k, n = self.gemm
        return {
            "dataflow": self.dataflow,
            "array": f"{self.rows}x{self.cols}",
            "gemm_mkn": [m, k, n],
            "tiles": self.tiles,
            "cycles": self.cycles,
            "macs": self.macs,
            "utilisation": round(self.utilisation, 4),
            "sram_reads": self.sram_reads,
            "sram_writes": self.sram_writes,
            "dram_bytes": self.dram_bytes,
        }


def map_layer(
    layer: Layer,
    rows: int,
    cols: int,
    dataflow: str,
    *,
    ifmap_kb: float = ACCEL.ifmap_kb,
    filter_kb: float = ACCEL.filter_kb,
    ofmap_kb: float = ACCEL.ofmap_kb,
    weight_bytes: float = 1.0,
) -> Mapping:
    """Map ``layer`` onto an ``rows x cols`` array (module doc).

    ``weight_bytes``: bytes stored per weight (1: int8); the weight buffer's fit and the weights' DRAM bytes follow it.

    Raises:
        UserInputError: unknown dataflow, an array size outside 1..1024, or ``weight_bytes`` outside (0, 1].
    """
    if not 0 < weight_bytes <= 1:
        raise UserInputError(f"weight_bytes must be in (0, 1] (bytes per stored weight; 1: int8), got {weight_bytes}")
    if dataflow not in DATAFLOWS:
        raise UserInputError(f"unknown dataflow {dataflow!r}; choose ws (weight), os (output) or is (input stationary)")
    if not (1 <= rows <= 1024 and 1 <= cols <= 1024):
        raise UserInputError(f"array must be 1..1024 x 1..1024 PEs, got {rows}x{cols}")
    m, k, n = layer.gemm()
    if min(m, k, n) < 1:
        raise UserInputError(f"layer has an empty GEMM (M, K, N) = ({m}, {k}, {n}); check its sizes")
    kt = math.ceil(k / rows)
    if dataflow == "ws":
        tiles = kt * math.ceil(n / cols)
        cycles = tiles * (rows + m + rows + cols - 2)
        reads = {"ifmap": m * k * math.ceil(n / cols), "filter": k * n, "psum": m * n * (kt - 1)}
        writes = {"ofmap": m * n * kt}
    elif dataflow == "os":
        tiles = math.ceil(m / rows) * math.ceil(n / cols)
        cycles = tiles * (k + rows + cols - 2)
        reads = {"ifmap": m * k * math.ceil(n / cols), "filter": k * n * math.ceil(m / rows), "psum": 0}
        writes = {"ofmap": m * n}
    else:
        tiles = kt * math.ceil(m / cols)
        cycles = tiles * (rows + n + rows + cols - 2)
        reads = {"ifmap": m * k, "filter": k * n * math.ceil(m / cols), "psum": m * n * (kt - 1)}
        writes = {"ofmap": m * n * kt}
    unique = {"ifmap": m * k, "filter": math.ceil(k * n * weight_bytes)}
    dram = {
        "ifmap": unique["ifmap"] if unique["ifmap"] <= ifmap_kb * 1024 else reads["ifmap"],
        "filter": unique["filter"] if unique["filter"] <= filter_kb * 1024 else math.ceil(reads["filter"] * weight_bytes),
    }
    out_bytes = m * n * 4
    dram["ofmap"] = out_bytes if out_bytes <= ofmap_kb * 1024 else 4 * (writes["ofmap"] + reads["psum"])
    return Mapping(dataflow, rows, cols, (m, k, n), tiles, cycles, m * k * n, reads, writes, dram)
