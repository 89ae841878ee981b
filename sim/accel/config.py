"""The accelerator family's configuration: systolic mapping and energy-aware compression, each default declared once.

:class:`AccelConfig` holds the defaults and bounds that ``accel.systolic`` and
``compress.energy_aware`` (``tools/noc.py``), the ``compress`` problem
(``search/compress/problem.py``) and the simulator functions
(:func:`~coevo.sim.accel.systolic.map_layer`, :func:`~coevo.sim.accel.compress.compress`,
:class:`~coevo.sim.accel.compress.Compressor`) share.

Two arrays are described, on purpose: the ``accel.systolic`` tool maps a layer onto a 32 x 32
array with 256 KiB buffers (``rows``, ``cols``, ``*_kb``), while the energy model of the
compression maps the zoo CNNs onto a 16 x 16 array with 32 KiB buffers (``compress_rows``,
``compress_cols``, ``compress_buffer_kb``), the array its quoted energies were measured on.
"""

from __future__ import annotations

from dataclasses import dataclass, field

LEVELS = (256, 128, 64, 32, 16, 8, 4)
"""Allowed-value counts a layer may be restricted to (256: plain INT8), from least to most restricted."""


@dataclass(frozen=True)
class AccelConfig:
    """Defaults and bounds of the accelerator family (each field's ``metadata``: ``help``, ``unit``, bounds)."""

    # ---- systolic mapping (sim/accel/systolic.py, the accel.systolic tool)
    rows: int = field(default=32, metadata={"help": "array rows (PEs)", "unit": "PEs", "ge": 1, "le": 1024})
    cols: int = field(default=32, metadata={"help": "array columns (PEs)", "unit": "PEs", "ge": 1, "le": 1024})
    dataflow: str = field(default="ws", metadata={"help": "weight, output or input stationary"})
    ifmap_kb: float = field(default=256, metadata={"help": "input SRAM buffer", "unit": "KiB", "gt": 0})
    filter_kb: float = field(default=256, metadata={"help": "weight SRAM buffer", "unit": "KiB", "gt": 0})
    ofmap_kb: float = field(default=256, metadata={"help": "output SRAM buffer", "unit": "KiB", "gt": 0})
    # ---- energy-aware compression (sim/accel/compress.py, compress.energy_aware, the compress problem)
    model: str = field(default="cnn-digits", metadata={"help": "zoo CNN to compress: cnn-digits or cnn-mnist5k"})
    accuracy_drop_max: float = field(
        default=2.0,
        metadata={"help": "largest accuracy drop allowed vs plain INT8", "unit": "percentage points", "ge": 0, "le": 100},
    )
    seed: int = field(default=0, metadata={"help": "seed of the zoo model's training, of QAT and of the energy sampling", "ge": 0})
    energy_scope: str = field(
        default="total",
        metadata={
            "help": "energy objective's scope: total (compute + SRAM + DRAM on the array), on_chip (compute + SRAM) "
            "or compute (MAC energy only)"
        },
    )
    qat_epochs: int = field(default=3, metadata={"help": "quantization-aware training epochs per restriction", "unit": "epochs"})
    compress_rows: int = field(default=16, metadata={"help": "rows of the array the compressed CNN is mapped onto", "unit": "PEs"})
    compress_cols: int = field(default=16, metadata={"help": "columns of that array", "unit": "PEs"})
    compress_buffer_kb: float = field(default=32, metadata={"help": "each SRAM buffer of that array", "unit": "KiB"})
    batch: int = field(default=1, metadata={"help": "batch of the array mapping (its energies are divided by it)", "unit": "images"})
    energy_samples: int = field(
        default=128, metadata={"help": "training images whose streams the energy tables are measured on", "unit": "images"}
    )
    psum_bits: int = field(
        default=22,
        metadata={
            "help": "partial-sum register width whose top msb_bits bits group the transitions (22: the paper's); "
            "0: fitted per layer to the INT8 model's partial sums, so the MSB window covers the top of their range",
            "unit": "bits",
            "ge": 0,
            "le": 62,
        },
    )
    msb_bits: int = field(
        default=6, metadata={"help": "MSB window of the partial-sum register (groups 0..msb_bits)", "unit": "bits", "ge": 1}
    )
    positions: int = field(default=512, metadata={"help": "positions sampled per layer when its activity is measured", "unit": "positions"})


ACCEL = AccelConfig()
"""The defaults (an instance, so a simulator's keyword default reads ``ACCEL.field``)."""

__all__ = ["ACCEL", "LEVELS", "AccelConfig"]
